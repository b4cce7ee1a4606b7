"""Training slots handed out in turn: first come, first served, released between runs.

A machine trains ``slots`` runs at once (``GLEE_MAX_CONCURRENT_RUNS``). A run that wants one
takes a *ticket* (a file named by the time it arrived, locked by its process while it waits) and
may try for a slot only when its ticket is the oldest one left; a ticket whose process died is
unlocked, and swept. A job releases its slot after each run and queues again at the back for its
next one, so two jobs of many runs train in turn instead of the one that just finished taking the
slot back at once.

In public mode a session also holds its own lock (``GLEE_SESSION_SLOT``) while one of its runs
trains, so a visitor's jobs take turns with each other and never fill every slot, and it waits
for that lock before taking a ticket (it does not hold a place in the machine's queue meanwhile).

A job may take its first slot before it loads anything heavy (:func:`hold_first`): a queued job
then holds no memory while it waits.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable
from contextlib import ExitStack, contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from . import environment

POLL_SECONDS = 0.2
_FIRST: list[ExitStack] = []  # a slot this process took before loading (see hold_first)


class SlotQueue:
    """``slots`` training slots in ``folder``, in turn; ``session``: a lock file held while one
    of the session's runs trains."""

    def __init__(self, folder: Path, slots: int, session: Path | None = None):
        self.folder, self.slots, self.session = Path(folder), slots, session

    @property
    def tickets(self) -> Path:
        return self.folder / "queue"

    def _live_tickets(self) -> list[Path]:
        """Tickets oldest first; one whose process is gone (its lock is free) is removed."""
        live = []
        for ticket in sorted(self.tickets.glob("*.ticket")):
            probe = FileLock(str(ticket))
            try:
                probe.acquire(timeout=0)
            except Timeout:
                live.append(ticket)  # its process holds it: still waiting
                continue
            probe.release()
            ticket.unlink(missing_ok=True)
        return live

    def acquire(self, on_wait: Callable[[], None] | None = None) -> ExitStack:
        """Wait for this process's turn and a free slot; the returned stack releases both."""
        held = ExitStack()
        if self.slots == 0:  # no limit
            return held
        try:
            waited = False
            if self.session is not None:
                session = FileLock(str(self.session))
                try:
                    session.acquire(timeout=0)
                except Timeout:
                    waited = _announce(on_wait, waited)
                    session.acquire()
                held.callback(session.release)
            self.tickets.mkdir(parents=True, exist_ok=True)
            ticket = (
                self.tickets / f"{time.time_ns():020d}-{os.getpid()}-{secrets.token_hex(3)}.ticket"
            )
            mine = FileLock(str(ticket))
            mine.acquire()
            slots = [FileLock(str(self.folder / f"slot-{i}.lock")) for i in range(self.slots)]
            try:
                while True:
                    if self._live_tickets()[:1] == [ticket]:
                        for slot in slots:
                            try:
                                slot.acquire(timeout=0)
                            except Timeout:
                                continue
                            held.callback(slot.release)
                            return held
                    waited = _announce(on_wait, waited)
                    time.sleep(POLL_SECONDS)
            finally:
                mine.release()
                ticket.unlink(missing_ok=True)
        except BaseException:
            held.close()
            raise

    @contextmanager
    def slot(self, on_wait: Callable[[], None] | None = None):
        """Hold a slot for one run: the one :func:`hold_first` took, else one in turn."""
        held = _FIRST.pop() if _FIRST else self.acquire(on_wait)
        with held:
            yield


def machine_queue(locks_dir: Path, slots: int) -> SlotQueue:
    """The queue a store's runs wait in: the store's own (``locks_dir``), or in public mode the
    machine's (``GLEE_SLOTS_DIR``) with the session's lock (``GLEE_SESSION_SLOT``)."""
    return SlotQueue(environment.slots_dir() or locks_dir, slots, environment.session_slot())


def _announce(on_wait: Callable[[], None] | None, announced: bool) -> bool:
    if on_wait is not None and not announced:
        on_wait()
    return True


def hold_first(queue: SlotQueue, on_wait: Callable[[], None] | None = None) -> None:
    """Take this process's first slot now (before loading torch and the backbone); the first
    run that trains uses it, and :func:`release_first` frees it if none does."""
    _FIRST.append(queue.acquire(on_wait))


def release_first() -> None:
    while _FIRST:
        _FIRST.pop().close()
