"""Threads per job on a CPU: each working process takes its share of the cores."""

import os
import subprocess
import sys
import time

import pytest
import torch

from glee_core.core import devices
from glee_core.core.devices import CpuShare, cpu_share
from glee_core.data.datasets import load_dataset
from glee_core.models.backbone import estimate_parameters
from glee_core.models.config import TrainConfig
from glee_core.models.methods import get_method
from glee_core.runs.busy import other_work
from glee_core.runs.estimate import Workload, estimate_seconds
from glee_core.runs.store import RunStore
from glee_core.train.experiment import run_launch
from glee_core.train.launch import Launch
from tests.conftest import TOY_WORDS, toy_rows
from tests.helpers.tiny_models import save_tiny_mlm

HOLD = """
import sys, time
from pathlib import Path
from glee_core.core.devices import CpuShare
with CpuShare(Path(sys.argv[1])):
    print("holding", flush=True)
    time.sleep(60)
"""


def test_a_job_takes_its_share_of_the_threads_and_all_again_when_alone(tmp_path, monkeypatch):
    folder = tmp_path / "jobs"
    # the count of jobs alone: work that is not a glee job (a bench beside the suite) is the
    # next test's
    monkeypatch.setattr(CpuShare, "other_cores", lambda self: 0.0)
    before = torch.get_num_threads()
    torch.set_num_threads(4)
    other = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert other.stdout.readline().strip() == "holding"
        with CpuShare(folder) as share:
            assert share.jobs() == 2
            assert torch.get_num_threads() == 2  # 4 threads, 2 jobs working
            other.kill()
            other.wait()
            share.rebalance(force=True)
            assert share.jobs() == 1 and torch.get_num_threads() == 4
        assert not list(folder.glob("*.job"))  # the dead job's file swept, ours removed
        assert torch.get_num_threads() == 4  # what it was before
    finally:
        other.kill()
        torch.set_num_threads(before)


def test_the_users_thread_count_wins_and_a_gpu_run_shares_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("GLEE_CPU_JOBS_DIR", str(tmp_path))
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    with cpu_share(torch.device("cpu")):
        assert not devices._SHARE
    monkeypatch.delenv("OMP_NUM_THREADS")
    with cpu_share(torch.device("cuda")):
        assert not devices._SHARE
    with cpu_share(torch.device("cpu")):
        assert len(devices._SHARE) == 1 and list(tmp_path.glob("*.job"))
        with cpu_share(torch.device("cpu")):  # nested (LP-FT's stage): the same share
            assert len(devices._SHARE) == 1
    assert not devices._SHARE and not list(tmp_path.glob("*.job"))


def test_rebalancing_is_checked_at_most_every_two_seconds(tmp_path, monkeypatch):
    share = CpuShare(tmp_path)
    calls = []
    monkeypatch.setattr(share, "jobs", lambda: calls.append(1) or 1)
    with share:
        for _ in range(50):
            share.rebalance()
    assert len(calls) == 1  # the forced count on entry only
    share.checked = time.monotonic() - 3
    share.rebalance()
    assert len(calls) == 2


HOG = "while True: pass"


def test_a_job_beside_a_cpu_hog_takes_the_spare_cores_only(tmp_path):
    """Threads that outnumber the free cores wait for each other at every step (a step beside
    one busy process on 2 cores: 1.5x as long on 2 threads as on 1): the share counts work
    that is not a glee job too, and gives the pool back when it ends."""
    before = torch.get_num_threads()
    cores = os.cpu_count() or 1
    torch.set_num_threads(cores)
    hog = subprocess.Popen([sys.executable, "-c", HOG])
    try:
        with CpuShare(tmp_path / "jobs") as share:
            assert torch.get_num_threads() == cores  # no measure yet: its share, every core
            time.sleep(1.0)
            share.rebalance(force=True)
            assert torch.get_num_threads() == max(1, cores - 1)  # one core's worth is taken
            hog.kill()
            hog.wait()
            share.other_cores()  # a look with the hog gone: what the next one counts from
            time.sleep(1.0)
            share.rebalance(force=True)
            if cores > 1:  # some other work may hold a core of a small machine now and then
                assert torch.get_num_threads() >= cores - 1
    finally:
        hog.kill()
        torch.set_num_threads(before)


@pytest.mark.slow
def test_a_small_fine_tune_beside_a_cpu_hog_takes_about_its_estimate(tmp_path, monkeypatch):
    """Newcomer's first hour, round two, item 1: a fine-tune estimated at 15 min took 54
    beside other work. The same run alone calibrates the estimate; beside a CPU hog, the launch
    estimate (``other_work`` measured with the hog running) holds its training within +-50%.
    The test holds itself and the hog to one core (the other cores' work, a CI worker's, is not
    theirs to count: ``cpu_times`` reads the process's own cores). The texts are long and the
    model 384 wide: the steps are matrix work, as a real backbone's are."""
    monkeypatch.setenv("GLEE_CPU_JOBS_DIR", str(tmp_path / "jobs"))
    before, cores = torch.get_num_threads(), os.sched_getaffinity(0)
    torch.set_num_threads(1)
    os.sched_setaffinity(0, {min(cores)})  # the hog, started from here, shares it
    model = str(save_tiny_mlm(tmp_path / "bert", "bert", TOY_WORDS, hidden_size=384))
    rows = toy_rows()
    rows["text"] = (rows["text"] + " ") * 8  # ~60 tokens each
    rows.to_csv(tmp_path / "long.csv", index=False)
    dataset = load_dataset(f"csv:{tmp_path / 'long.csv'}")
    config = TrainConfig(mode="finetune", recipe="paper", epochs=2, batch_size=16, max_length=96)
    method = [get_method("cls-tanh")]

    def trained(seed: int, folder: str) -> list:
        return run_launch(
            Launch(dataset, method, [seed], model, config, RunStore(tmp_path / folder))
        )

    try:
        trained(0, "warm")  # the first run pays for loading and compiling what it touches
        alone = trained(1, "alone")
        hog = subprocess.Popen([sys.executable, "-c", HOG])
        try:
            time.sleep(1.0)
            busy = other_work()
            guess = estimate_seconds(
                Workload(dataset, 1, config, model, estimate_parameters(model), "cpu"),
                alone,
                busy=busy,
            )
            (run,) = trained(2, "busy")
        finally:
            hog.kill()
            hog.wait()
    finally:
        torch.set_num_threads(before)
        os.sched_setaffinity(0, cores)
    assert busy > 1.7  # the hog counted: a core's worth
    took = run.record.timing.train_seconds + run.record.timing.test_seconds
    assert 0.5 <= took / guess.per_run <= 1.5, (took, guess)


def test_the_estimate_counts_a_glee_job_at_the_share_it_shrinks_to():
    """Beside a glee fine-tune on both cores of two, a launch's estimate counts one core of it
    (its pool shrinks to one thread when the launch starts: it took 1.95x, not 2.9x, in
    bench/time_left_trace.py); other processes count as busy as they are."""
    from glee_core.core.environment import cores_after_launch

    assert cores_after_launch(busy=1.9, glee=1.9, jobs=1, cores=2) == 1
    assert cores_after_launch(busy=1.9, glee=0.0, jobs=0, cores=2) == 1.9  # a hog keeps its core
    assert cores_after_launch(busy=3.0, glee=1.0, jobs=1, cores=4) == 3.0  # 1 < its share 2
    assert cores_after_launch(busy=8.0, glee=8.0, jobs=2, cores=8) == 2 * 2  # 8 // 3 each
    assert cores_after_launch(busy=0.0, glee=0.0, jobs=0, cores=2) == 0.0


def test_other_work_reads_the_live_glee_jobs_cpu_apart_from_the_rest(tmp_path, monkeypatch):
    """A live glee job (its locked file in the CPU jobs folder) is found by its pid and its CPU
    time read apart; a file whose process is gone is swept; the estimate's factor counts the
    job at its share and the rest whole."""
    from glee_core.core import environment
    from glee_core.runs import busy

    folder = tmp_path / "jobs"
    other = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert other.stdout.readline().strip() == "holding"
        (folder / "999999-gone.job").write_text("")
        assert environment.live_cpu_jobs(folder) == [other.pid]
        assert not (folder / "999999-gone.job").exists()
        # 2 cores, both busy over the window, 1.8 cores of it the glee job's (it will keep 1
        # core), 0.1 the asking process's own (left out): 0.1 core of other work stays
        monkeypatch.setenv("GLEE_CPU_JOBS_DIR", str(folder))
        monkeypatch.setattr(busy, "core_count", lambda: 2)
        tick = os.sysconf("SC_CLK_TCK")  # 1 CPU second in 0.5 s: both cores
        ticks = iter([(0.0, 0.0, 0.0), (1.0 * tick, 1.0 * tick, 0.0)])
        monkeypatch.setattr(environment, "cpu_times", lambda: next(ticks))
        used = iter([10.0, 10.0 + 1.8 * 0.5])  # over the 0.5 s window: 1.8 cores
        monkeypatch.setattr(busy, "process_cpu_seconds", lambda pid: next(used))
        monkeypatch.setattr(busy.time, "sleep", lambda s: None)
        clock = iter([0.0, 0.5])
        monkeypatch.setattr(busy.time, "monotonic", lambda: next(clock))
        own = iter([3.0, 3.0 + 0.05])  # the asking process drew a page: 0.1 core, not counted
        monkeypatch.setattr(busy.time, "process_time", lambda: next(own))
        # the launch runs beside 1.1 cores' worth: the 0.1 and the glee job's one core
        assert busy.other_work() == pytest.approx(busy.slowdown(1.1, 2))
    finally:
        other.kill()
        other.wait()


def test_the_apps_busy_factor_is_the_median_of_a_minutes_samples(tmp_path, monkeypatch):
    """One sample taken while a browser on the machine draws the page (x2.7 where the work a
    launch runs beside gives x2.0) does not move the factor the app's estimates use; a glee job
    that has ended no longer counts (a minute's median of it made a new user's next fine-tune
    x1.5 where nothing else worked); the sampler samples on its own in the background."""
    from glee_core.runs import busy
    from glee_core.runs.busy import BusySampler, beside
    from tests.helpers.waiting import wait_until

    monkeypatch.setenv("GLEE_CPU_JOBS_DIR", str(tmp_path / "jobs"))  # no glee job now
    monkeypatch.setattr(busy, "core_count", lambda: 2)
    page, work = (1.7, 0.0, 0), (1.0, 0.0, 0)  # cores' worth of others, of glee jobs, jobs
    readings = iter([page, work, work, work, page])
    sampler = BusySampler(measure=lambda: next(readings), keep=4)
    assert sampler.value() == beside(1.7, 0.0, 0)  # no sample yet: one taken now
    for _ in range(3):
        sampler.sample()
    assert sampler.value() == beside(1.0, 0.0, 0)  # 1.7, 1.0, 1.0, 1.0
    sampler.sample()
    assert sampler.value() == beside(1.0, 0.0, 0)  # the oldest dropped: 1.0, 1.0, 1.0, 1.7
    ended = BusySampler(measure=lambda: (0.0, 1.8, 1))  # a quick compare working, then ended
    for _ in range(4):
        ended.sample()
    assert ended.value() == 1.0  # its job file gone: nothing beside the next launch
    running = BusySampler(every=0.01, measure=lambda: work).start()
    wait_until(lambda: len(running.samples) >= 3, timeout=10, what="three samples")
    assert running.value() == beside(1.0, 0.0, 0)
    assert BusySampler(measure=lambda: None).value() == 1.0  # no /proc/stat: no guess
