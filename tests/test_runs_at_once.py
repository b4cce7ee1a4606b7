"""``--runs-at-once N``: fine-tuning runs trained N at a time, each in a worker process of its own
sharing the device, into the same store and under the same ids as one after another; ``auto`` is
1 on a CPU and what the GPU's free memory holds (faked here) on a GPU."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import types
from pathlib import Path

import pytest
import torch

from glee_core.core import devices
from glee_core.core.errors import GleeError
from glee_core.core.events import RunStarted, SweepProgress
from glee_core.models.config import TrainConfig
from glee_core.models.methods import get_method
from glee_core.models.options import ExecutorOptions
from glee_core.runs.store import RunStore
from glee_core.train.executors import LocalExecutor, SweepFailed, make_executor
from glee_core.train.launch import Launch
from glee_core.train.plan import plan_runs


def test_runs_at_once_is_auto_or_a_number_of_one_or_more():
    assert ExecutorOptions().runs_at_once == "auto"
    assert ExecutorOptions(runs_at_once=" 4 ").runs_at_once == "4"
    for bad in ("0", "-2", "many", "1.5"):
        with pytest.raises(GleeError, match="--runs-at-once must be auto or a number"):
            ExecutorOptions(runs_at_once=bad)
    assert make_executor(ExecutorOptions(runs_at_once="3")).runs_at_once == "3"


def test_auto_is_one_on_a_cpu_and_what_fits_a_gpu_up_to_the_measured_best(monkeypatch):
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert devices.resolve_runs_at_once("auto", cpu) == 1
    assert devices.resolve_runs_at_once("3", cpu) == 3  # asked for: as many as asked
    gib = 2**30
    for free, expected in ((70 * gib, 8), (200 * gib, 8), (25 * gib, 4), (3 * gib, 1)):
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device, f=free: (f, 80 * gib))
        assert devices.resolve_runs_at_once("auto", cuda) == expected


def test_two_workers_train_what_one_after_another_would(toy_dataset, tiny_bert, tmp_path):
    """Two fine-tuning runs with LP-FT, two at once: their heads are fitted first in this
    process (in one loop), then each run trains in a worker and lands under its planned id; a
    second launch finds them all stored."""
    config = TrainConfig(epochs=1, batch_size=16, lr=1e-4, min_steps=1, device="cpu")
    specs = [get_method(m) for m in ("cls-relu-pt-ln", "prompt")]
    store = RunStore(tmp_path / "runs")
    lines, events = [], []
    executor = LocalExecutor("2", echo=lines.append, show_bar=False)
    runs = executor.run(
        [Launch(toy_dataset, specs, [1], str(tiny_bert), config, store, progress=events.append)]
    )
    planned = plan_runs(toy_dataset, specs, [1], str(tiny_bert), config)
    assert [r.run_id for r in runs] == [p.run_id for p in planned]
    assert "training 2 runs, 2 at once, each in a process of its own" in lines
    assert sum(line.startswith("done ") for line in lines) == 2
    swept = [e for e in events if isinstance(e, SweepProgress)]
    assert swept[-1].done == 2 and swept[-1].failed == 0
    # the workers' runs are then loaded without a word: not announced as found in the store
    assert not {e.run_id for e in events if isinstance(e, RunStarted)} & {r.run_id for r in runs}
    for run in runs:
        assert run.metrics is not None and run.record.mode == "finetune"
        stage = store.get(run.record.tuning.lp_ft_from)  # LP-FT's head: a run of its own
        assert stage is not None and stage.record.mode == "frozen"
    assert len(store.runs()) == 4
    lines.clear()
    events.clear()
    again = executor.run(
        [Launch(toy_dataset, specs, [1], str(tiny_bert), config, store, progress=events.append)]
    )
    assert [r.run_id for r in again] == [r.run_id for r in runs] and not lines
    assert [(e.run_id, e.cached) for e in events if isinstance(e, RunStarted)] == [
        (r.run_id, True) for r in runs
    ]  # a later launch: stored, and says so


def test_workers_do_not_run_the_callers_script_again(toy_dataset, tiny_bert, tmp_path, monkeypatch):
    """A sweep launched from a Streamlit page (or after an AppTest, which leaves its script as
    ``__main__``) or from a script without a main guard: multiprocessing's spawn would run that
    file again in each worker, and every worker died before its run started."""
    script = tmp_path / "page.py"
    script.write_text("raise SystemExit('this page must not run in a worker')\n")
    page = types.ModuleType("__main__")
    page.__file__ = str(script)
    monkeypatch.setitem(sys.modules, "__main__", page)
    config = TrainConfig(epochs=1, batch_size=16, lr=1e-4, min_steps=1, device="cpu", lp_ft=False)
    specs = [get_method(m) for m in ("cls-relu", "cls-tanh")]
    lines = []
    runs = LocalExecutor("2", echo=lines.append, show_bar=False).run(
        [Launch(toy_dataset, specs, [1], str(tiny_bert), config, RunStore(tmp_path / "runs"))]
    )
    assert sum(line.startswith("done ") for line in lines) == 2
    assert all(run.metrics is not None for run in runs)


def _workers() -> dict[int, str]:
    """This process's live ``--runs-at-once`` workers: pid -> the run each trains."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            argv = (stat.parent / "cmdline").read_bytes().decode().split("\0")
        except (OSError, IndexError, ValueError):  # ended meanwhile
            continue
        if parent == os.getpid() and "glee_core.train.worker" in argv:
            found[int(stat.parent.name)] = argv[argv.index("glee_core.train.worker") + 2]
    return found


def test_a_killed_worker_is_started_once_more_and_a_second_death_fails_its_run_alone(
    toy_dataset, tiny_bert, tmp_path
):
    """What the out-of-memory killer does to a worker: its run is trained once more in a new
    process and lands; a run whose worker is killed both times fails with how it died, and the
    sweep's other runs land all the same."""
    config = TrainConfig(epochs=1, batch_size=16, lr=1e-4, min_steps=1, device="cpu", lp_ft=False)
    specs = [get_method(m) for m in ("cls-relu", "cls-tanh")]
    unlucky, once = plan_runs(toy_dataset, specs, [1], str(tiny_bert), config)
    kills = {unlucky.run_id: 2, once.run_id: 1}  # workers to kill, by the run they train
    stop = threading.Event()

    def killer():  # kills each worker it sees while its run still has kills left
        seen = set()
        while not stop.is_set():
            for pid, run_id in _workers().items():
                if kills.get(run_id, 0) > 0 and pid not in seen:
                    seen.add(pid)
                    kills[run_id] -= 1
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    lines = []
    store = RunStore(tmp_path / "runs")
    try:
        with pytest.raises(SweepFailed) as failed:
            LocalExecutor("2", echo=lines.append, show_bar=False).run(
                [Launch(toy_dataset, specs, [1], str(tiny_bert), config, store)]
            )
    finally:
        stop.set()
        thread.join()
    assert kills == {unlucky.run_id: 0, once.run_id: 0}
    assert (
        f"the worker training {once.run_id} was killed by SIGKILL; training it once more" in lines
    )
    assert f"done   {once.run_id}" in "\n".join(lines)
    assert store.get(once.run_id).metrics is not None  # the retried run landed
    assert store.get(unlucky.run_id) is None
    assert failed.value.failures == {
        unlucky.run_id: "its worker was killed by SIGKILL, 2 "
        "times (out of memory? fewer --runs-at-once)"
    }
    assert "(1 landed in the store)" in str(failed.value)
    assert not _workers()
