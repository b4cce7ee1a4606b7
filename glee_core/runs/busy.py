"""How much slower a launch runs for the other work on this CPU: measured now
(:func:`other_work`, the command line's), or sampled in the background (:class:`BusySampler`,
the app's); the estimates (:mod:`glee_core.runs.estimate`) multiply by it.

BENCHMARKS.md, "How long does a fine-tune take, alone and beside other work?", measures both.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import deque

import numpy as np

from ..core.environment import (
    busy_sessions,
    core_count,
    cores_after_launch,
    cpu_jobs_dir,
    live_cpu_jobs,
    load_mark,
    niced_discount,
    niced_work_yields,
    other_cores_since,
    process_cpu_seconds,
    session_cpu_seconds,
    session_share_cap,
    spare_cores,
)

# The share of a training step that runs in parallel over a CPU job's threads (Amdahl's law): the
# middle of the runs measured (BENCHMARKS.md, "How long does a fine-tune take, alone and beside
# other work?": one thread of two, x1.06 to x1.94)
PARALLEL_SHARE = 0.57


def _speed(threads: int) -> float:
    return 1.0 / ((1.0 - PARALLEL_SHARE) + PARALLEL_SHARE / threads)


def slowdown(busy: float, cores: int) -> float:
    """How much slower a launch runs beside ``busy`` cores' worth of other work on ``cores``:
    its pool shrinks to the spare cores (``core.environment.spare_cores``, as
    ``glee_core.core.devices.CpuShare`` sizes it), which run a step :data:`PARALLEL_SHARE` as
    fast as the whole machine would; where the threads and the work outnumber the cores, each
    gets a slice of one."""
    threads = spare_cores(busy, cores) or cores
    shared = max(1.0, (busy + threads) / cores)
    return _speed(cores) / _speed(threads) * shared


def one_thread_slowdown(busy: float, cores: int) -> float:
    """How much slower work on one thread runs (a health check's probe fits and cleanlab) where
    a launch runs ``busy`` times slower: not at all while the other work leaves a core spare (the
    2,000-class check's fits took 34 s alone and 34 s beside a CPU hog on 2 cores); past that,
    as much as the launch's pool is slowed beyond it."""
    spare = slowdown(cores - 1.0, cores) if cores > 1 else 1.0
    return max(1.0, busy / spare)


def work_beside(seconds: float = 0.5) -> tuple[float, float, int] | None:
    """What works on this CPU over ``seconds``: (other processes' cores' worth, glee's own CPU
    jobs' cores' worth, how many of those), or None where ``/proc/stat`` is not there. Other
    processes count as busy as they are, at a lower priority at the share they keep beside a
    launch (``core.environment.other_cores_since``), and where the kernel shares the CPU by
    session no more than their sessions' share (``core.environment.session_share_cap``); the
    one asking (the app's web process drawing the page) not at all."""
    cores = core_count()
    jobs = live_cpu_jobs(cpu_jobs_dir())
    # where the kernel shares the CPU by session, the busy sessions count: each scans /proc
    sessions = dict if niced_work_yields() else session_cpu_seconds
    mark, used_before, sessions_before = load_mark(), _jobs_cpu(jobs), sessions()
    if mark is None:
        return None
    time.sleep(seconds)
    now, used_after, sessions_after = load_mark(), _jobs_cpu(jobs), sessions()
    if now is None:
        return None
    took = max(now[0] - mark[0], 1e-3)
    used, niced = (
        (after - before) / took for after, before in zip(used_after, used_before, strict=True)
    )
    # the asking process left out; the app's jobs are niced (yield_to_pages) but busy in full
    # here: where niced work is discounted, their share is added back
    busy = min(float(cores), other_cores_since(mark, now) + max(0.0, niced) * niced_discount())
    glee = min(busy, max(0.0, used))
    # other work in the asker's own session shares the CPU with it by threads (a command run
    # from a shell beside another there): counted whole, as where sessions do not count
    asker = os.getsid(0)
    mine = sessions_after.get(asker, 0.0) - sessions_before.get(asker, 0.0) - (now[2] - mark[2])
    counted = (
        0
        if mine / took >= 0.25
        else busy_sessions(
            sessions_before, sessions_after, took, {asker} | {_session(pid) for pid in jobs}
        )
    )
    return session_share_cap(busy - glee, counted, cores), glee, len(jobs)


def _session(pid: int) -> int:
    """The session of process ``pid`` (-1 where it is gone)."""
    try:
        return os.getsid(pid)
    except OSError:
        return -1


def beside(others: float, glee: float, jobs: int) -> float:
    """The :func:`slowdown` of a launch beside ``others`` cores' worth of other processes and
    ``jobs`` glee CPU jobs working ``glee`` cores' worth, each of which shrinks its pool to its
    share once the launch starts (:func:`~glee_core.core.environment.cores_after_launch`: a
    fine-tune on both cores of two takes one when another starts)."""
    cores = core_count()
    return slowdown(cores_after_launch(others + glee, glee, jobs, cores), cores)


def other_work(seconds: float = 0.5) -> float:
    """How much slower a launch runs for the work already on this CPU, measured now over
    ``seconds`` (:func:`work_beside`, :func:`beside`): 1.0 on an idle machine, or where
    ``/proc/stat`` is not there. A measured rate is an idle machine's (its upper quartile):
    this is what a busy one adds."""
    found = work_beside(seconds)
    return 1.0 if found is None else beside(*found)


class BusySampler:
    """:func:`work_beside` sampled every ``every`` seconds in a daemon thread; its value, the
    median of the last ``keep`` samples of the other processes' work beside glee's own jobs as
    they stand now. One half-second sample taken while a browser on the same machine draws the
    page counts the drawing as work a launch runs beside (0.7 core of it on 2 cores: x2.7 where
    the work there gave x2.0), and the median of a minute's samples does not; a glee job that
    has just ended no longer counts (a minute's median of it made a new user's next fine-tune
    x1.5 where nothing else worked). ``measure`` is what it samples (:func:`work_beside`)."""

    def __init__(self, every: float = 5.0, keep: int = 12, measure=None):
        self.every, self.measure = every, measure or work_beside
        self.samples: deque[tuple[float, float, int]] = deque(maxlen=keep)
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name="glee-busy-sampler", daemon=True)

    def start(self) -> BusySampler:
        self.thread.start()
        return self

    def sample(self) -> tuple[float, float, int] | None:
        """One sample (kept), or None where none can be taken: what the machine's shared
        folders hold (another user's file, a folder named like a job) never stops it."""
        try:
            value = self.measure()
        except OSError:
            return None
        if value is not None:
            with self.lock:
                self.samples.append(value)
        return value

    def _run(self) -> None:
        while True:  # one sampler a server: it lives as long as the server does
            self.sample()
            time.sleep(self.every)

    def value(self) -> float:
        """The slowdown beside the median of the other processes' work so far and glee's jobs
        now (their work as the latest sample measured it; one taken now when there is none)."""
        with self.lock:
            samples = list(self.samples)
        if not samples:
            latest = self.sample()
            if latest is None:
                return 1.0
            samples = [latest]
        others = float(np.median([sample[0] for sample in samples]))
        try:
            jobs = len(live_cpu_jobs(cpu_jobs_dir()))
        except OSError:
            jobs = 0
        _, glee, sampled = samples[-1]
        if not jobs:
            glee = 0.0
        elif not sampled:  # a job begun since the latest sample: a core's worth each
            glee = float(jobs)
        return beside(others, glee, jobs)


def _jobs_cpu(pids: list[int]) -> tuple[float, float]:
    """The CPU seconds the processes ``pids`` have used together, and those of them niced (a
    job the app started: ``yield_to_pages``); a gone one counts none."""
    total = niced = 0.0
    for pid in pids:
        seconds = process_cpu_seconds(pid) or 0.0
        total += seconds
        with contextlib.suppress(OSError):
            niced += seconds if os.getpriority(os.PRIO_PROCESS, pid) > 0 else 0.0
    return total, niced
