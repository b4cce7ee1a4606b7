"""The pages first, on a machine the app shares: while a page of the app draws, and for
:data:`GRACE` seconds after (the browser draws what it was sent), the jobs this web process
started run :data:`DRAW_NICE` steps below it; then at their own priority again
(``GLEE_JOB_NICE``, 0 outside public mode). A click is answered as if the jobs were niced, and
between clicks they keep their share of the machine beside other programs: niced all the time,
a job yields to every other program too (beside a niced matrix product in another session a
quick compare ran 3.3x its estimate, BENCHMARKS.md).

Where the kernel groups processes by session (``sched_autogroup``): a job leads a session of its
own, and its group's nice (``/proc/<pid>/autogroup``) may go down and back up without
privileges. Elsewhere a process's nice cannot come back up, and nothing changes here."""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time

from ..core.environment import JOB_NICE, job_nice, niced_work_yields, set_group_nice

DRAW_NICE = JOB_NICE  # the jobs' group nice while a page draws
GRACE = 2.0  # seconds the jobs stay niced after a draw: the browser's drawing of it
_TICK = 0.25  # how often the jobs are looked at once the pages are idle


class _Pages:
    """The web process's draws in progress and the jobs niced for them (one per process)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.drawing = 0
        self.ended = 0.0
        self.niced: dict[int, int] = {}  # pid -> the nice to give back
        self.watcher: threading.Thread | None = None
        self.children: list[subprocess.Popen] = []  # polled: a finished job is reaped

    def first(self) -> bool:
        """Whether the pages come first now: a draw in progress or within its grace."""
        return bool(self.drawing) or time.monotonic() - self.ended <= GRACE

    def nice_jobs(self) -> None:
        for child in started_here():
            if child.pid not in self.niced and set_group_nice(child.pid, DRAW_NICE):
                self.niced[child.pid] = job_nice()

    def give_back(self) -> None:
        live = {child.pid for child in started_here()}  # a pid reaped may be another's now
        for pid, nice in self.niced.items():
            if pid in live:
                set_group_nice(pid, nice)
        self.niced.clear()

    def watch(self) -> None:
        while True:
            time.sleep(_TICK)
            with self.lock:
                if self.niced and not self.drawing and time.monotonic() - self.ended > GRACE:
                    self.give_back()


_PAGES = _Pages()


def _pages_first_here() -> bool:
    """Whether this process nices its jobs for its pages: not where they are niced as far
    already (public mode) or where the kernel does not group by session."""
    return job_nice() < DRAW_NICE and not niced_work_yields()


def start_nice() -> int:
    """The nice a job launched now starts at (:func:`glee_core.train.jobs.launch`): its own
    (:func:`~glee_core.core.environment.job_nice`), or :data:`DRAW_NICE` while a page draws or
    within its grace (a click's launch: the job's interpreter start and imports, a second of CPU,
    ran beside the next page's draw), given back with the others' after the grace."""
    with _PAGES.lock:
        return DRAW_NICE if _pages_first_here() and _PAGES.first() else job_nice()


def started(process: subprocess.Popen, nice: int) -> None:
    """Keep ``process``, a job this process just launched at ``nice`` (:func:`start_nice`):
    niced for the pages, its own priority comes back with the others' after the grace."""
    with _PAGES.lock:
        _PAGES.children.append(process)
        if nice > job_nice() and set_group_nice(process.pid, nice):  # its shell's too, first
            _PAGES.niced[process.pid] = job_nice()
            _PAGES.ended = max(_PAGES.ended, time.monotonic())  # the grace from the launch
            _watch()


def started_here() -> list[subprocess.Popen]:
    """The jobs this process started that still run (each poll reaps one that finished, not
    left as a zombie)."""
    return [child for child in list(_PAGES.children) if child.poll() is None]


def _watch() -> None:
    """Start the thread that gives the jobs their priority back (under the lock)."""
    if _PAGES.watcher is None:
        _PAGES.watcher = threading.Thread(target=_PAGES.watch, name="pages-first", daemon=True)
        _PAGES.watcher.start()


@contextlib.contextmanager
def pages_drawing():
    """Around a page's draw (``studio_ui.run_page``): the jobs niced from its start to
    :data:`GRACE` seconds after its end (a job launched by the draw too). Nothing where they
    are niced already (public mode) or where the kernel does not group by session."""
    if not _pages_first_here():
        yield
        return
    with _PAGES.lock:
        _PAGES.drawing += 1
        _PAGES.nice_jobs()
        _watch()
    try:
        yield
    finally:
        with _PAGES.lock:
            _PAGES.drawing -= 1
            _PAGES.ended = time.monotonic()
            _PAGES.nice_jobs()  # one the draw launched (started niced: start_nice)
