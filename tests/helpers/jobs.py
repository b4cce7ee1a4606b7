"""Waiting on the app's background jobs in a test: a page's click launches one and returns."""

from __future__ import annotations

from glee_core.runs.store import RunStore
from glee_core.train.jobs import list_jobs
from tests.helpers.waiting import wait_until


def wait_for_jobs(root, seconds: float = 240.0) -> list:
    """Every job of the store at ``root`` ended (within ``seconds``); returns them, newest
    first."""
    wait_until(
        lambda: not any(job.running for job in list_jobs(RunStore(root))),
        seconds,
        "the store's jobs ending",
    )
    return list_jobs(RunStore(root))


def finished(root, kind: str):
    """The newest job of ``kind`` in the store at ``root``, once every job ended; it must have
    finished (else its status, error and log fail the test)."""
    job = next(j for j in wait_for_jobs(root) if j.command == kind)
    assert job.status == "done", (job.status, job.error, job.log())
    return job
