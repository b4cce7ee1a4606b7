"""Threads per job on a CPU: each working process takes its share of the cores."""

import subprocess
import sys
import time

import torch

from glee_core.core import devices
from glee_core.core.devices import CpuShare, cpu_share

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
