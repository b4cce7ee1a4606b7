"""Sweeps on Ray: a local Ray with 2 CPUs runs tiny runs as tasks into the same store a local run
writes, with the same metrics; a second sweep submits nothing; a failing run is reported with its
id while the others land; a killed driver leaves nothing that looks finished."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from glee_core.core.errors import GleeError
from glee_core.models.config import TrainConfig
from glee_core.models.methods import get_method
from glee_core.models.options import ExecutorOptions
from glee_core.runs.store import RunStore, load_checked
from glee_core.train.executors import LocalExecutor, RayExecutor, SweepFailed, make_executor
from glee_core.train.launch import Launch

ray = pytest.importorskip("ray", reason="the cluster extra: pip install -e '.[cluster]'")
ROOT = Path(__file__).resolve().parents[1]
CONFIG = TrainConfig(
    mode="frozen", epochs=2, batch_size=16, device="cpu", pooling="cls", choose_by="dev"
)


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def batch(dataset, model, store, methods=("cls-relu", "prompt"), seeds=(1, 2), config=CONFIG):
    return Launch(dataset, [get_method(m) for m in methods], list(seeds), str(model), config, store)


def test_four_runs_land_with_the_metrics_of_a_local_run(
    local_ray, toy_dataset, tiny_bert, tmp_path
):
    lines: list[str] = []
    events = []
    executor = RayExecutor(
        ExecutorOptions(executor="ray", cpus_per_run=1),
        events.append,
        echo=lines.append,
        show_bar=False,
    )
    store = RunStore(tmp_path / "cluster")
    runs = executor.run([batch(toy_dataset, tiny_bert, store)])
    assert len(runs) == 4 and all(store.get(r.run_id) is not None for r in runs)
    assert any(line.startswith("submitted 4 of 4 runs") for line in lines)
    assert sum(line.startswith("done ") for line in lines) == 4
    assert events[-1].done == 4 and events[-1].failed == 0 and events[-1].total == 4

    local = LocalExecutor().run([batch(toy_dataset, tiny_bert, RunStore(tmp_path / "local"))])
    for ours, theirs in zip(runs, local, strict=True):
        assert ours.run_id == theirs.run_id  # the same configuration, the same id
        for key in ("acc", "f1", "head_f1", "tail_f1"):
            assert ours.metrics.value(key) == pytest.approx(theirs.metrics.value(key), abs=1e-6), (
                key
            )

    lines.clear()
    again = executor.run([batch(toy_dataset, tiny_bert, store)])  # everything is there
    assert [r.run_id for r in again] == [r.run_id for r in runs]
    assert lines == ["all 4 runs are in the store; nothing to submit"]


def test_a_failing_run_is_reported_and_the_others_land(local_ray, toy_dataset, tiny_bert, tmp_path):
    store = RunStore(tmp_path / "runs")
    lines: list[str] = []
    executor = RayExecutor(
        ExecutorOptions(executor="ray", gpus_per_run=0), echo=lines.append, show_bar=False
    )
    good = batch(toy_dataset, tiny_bert, store, methods=("cls-relu",), seeds=(1, 2))
    # asks the node for a GPU it does not have: the task raises there
    bad = batch(
        toy_dataset,
        tiny_bert,
        store,
        methods=("cls-relu",),
        seeds=(3,),
        config=replace(CONFIG, device="cuda"),
    )
    with pytest.raises(SweepFailed) as failed:
        executor.run([good, bad])
    assert len(failed.value.failures) == 1
    [(run_id, error)] = failed.value.failures.items()
    assert "-s3-" in run_id and "no CUDA GPU" in error
    assert run_id in str(failed.value) and "Re-run the same command" in str(failed.value)
    assert len(store.runs()) == 2 and store.get(run_id) is None  # the others landed
    assert any(line.startswith(f"FAILED {run_id}: GleeError") for line in lines)


def test_ray_executor_without_ray_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(GleeError, match=r"needs Ray: pip install -e \"\.\[cluster\]\""):
        make_executor(ExecutorOptions(executor="ray"))
    assert isinstance(make_executor(ExecutorOptions()), LocalExecutor)
    # one list of executors: the flag's choices, its check and how each is made
    from glee_core.models.options import EXECUTORS

    assert [e.remote for e in EXECUTORS.values()] == [False, True]
    assert ExecutorOptions(executor="ray").remote and not ExecutorOptions().remote
    with pytest.raises(GleeError, match="--executor must be local or ray"):
        ExecutorOptions(executor="slurm")
    # an executor's settings are ExecutorOptions fields, checked as given
    from dataclasses import fields

    names = {f.name for f in fields(ExecutorOptions)}
    assert all(s.field in names for e in EXECUTORS.values() for s in e.settings)
    with pytest.raises(GleeError, match="--cpus-per-run must be at least 0.1"):
        ExecutorOptions(executor="ray", cpus_per_run=0)
    with pytest.raises(GleeError, match="--gpus-per-run must be at least 0"):
        ExecutorOptions(executor="ray", gpus_per_run=-1)
    assert ExecutorOptions(executor="ray", gpus_per_run=None).gpus_per_run is None
    with pytest.raises(GleeError, match="--cpus-per-run must be at least 0.1"):
        ExecutorOptions(cpus_per_run=0)  # given, it is checked whichever executor runs


def test_a_store_a_node_cannot_write_is_refused(toy_dataset, tiny_bert, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the store's parent folder should be")  # even root fails
    with pytest.raises(GleeError, match="cannot write the run store .*storage every node sees"):
        RayExecutor(ExecutorOptions(executor="ray"), show_bar=False).run(
            [batch(toy_dataset, tiny_bert, RunStore(blocker / "runs"))]
        )


@pytest.mark.slow
def test_a_killed_driver_leaves_no_run_that_looks_finished(toy_csv, tiny_bert, tmp_path):
    """The CLI's sweep (its own local Ray), killed while tasks train: every folder the store
    lists is complete, and re-running trains only what is missing."""
    store = tmp_path / "runs"
    command = [
        sys.executable,
        "-m",
        "glee_core",
        "train",
        "--dataset",
        f"csv:{toy_csv}",
        "--method",
        "cls-relu,cls-tanh",
        "--seeds",
        "1,2",
        "--model",
        str(tiny_bert),
        "--mode",
        "frozen",
        "--pooling",
        "cls",
        "--choose-by",
        "dev",
        # long enough (no early stop) that the kill lands while tasks train, on a fast machine
        "--epochs",
        "100",
        "--patience",
        "100",
        "--batch-size",
        "4",
        "--device",
        "cpu",
        "--executor",
        "ray",
        "--cpus-per-run",
        "1",
        "--runs-dir",
        str(store),
    ]
    env = {**os.environ, "GLEE_RAY_CPUS": "2", "PYTHONPATH": str(ROOT)}
    driver = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.time() + 120
    locks = store / ".locks"
    while time.time() < deadline and not (locks.is_dir() and any(locks.glob("*-s*.lock"))):
        time.sleep(0.2)  # a task has taken its run's lock: training has begun
    assert driver.poll() is None, driver.communicate()
    assert any(locks.glob("*-s*.lock")), "no run's lock within 120 s: training never began"
    os.killpg(driver.pid, signal.SIGKILL)  # the driver and the workers it started, at once
    driver.wait()
    listed = RunStore(store).runs()  # a run lands whole or not at all: no settling to wait for
    for run in listed:  # whatever it lists is whole
        assert load_checked(run.path)[0] is not None
    assert len(listed) < 4
    finished = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert finished.returncode == 0, finished.stderr[-2000:]
    # only what is missing is submitted (a task of the killed sweep may still have landed a
    # whole run in between: it counts as there)
    submitted = int(re.search(r"submitted (\d+) of 4 runs", finished.stderr).group(1))
    assert submitted <= 4 - len(listed)
    assert len(RunStore(store).runs()) == 4
