"""Background training jobs, as the app launches them.

A job is a detached ``python -m glee_core train --request FILE --progress-file F`` process:
navigation, reloads and even an app restart leave it running. Its state lives in the store's
``jobs_dir``: ``<id>.json`` (the launch record: pid and its start time, label),
``<id>.request.json`` (the :class:`TrainRequest`), ``<id>.progress.jsonl`` (the trainer's
events), ``<id>.out`` (stdout: the result JSON as its last line) and ``<id>.err`` (stderr). The
run store's locks and queue apply as for any launch: the same configuration twice trains once.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ..core.errors import INTERRUPTED
from ..core.events import Event, ProgressState, fold, read_events
from ..core.files import write_json_atomic
from ..core.pace import time_left
from ..models.options import AdaptRequest, TrainRequest
from ..runs.store import RunStore

__all__ = [  # what this module offers (the app's door, glee_core.studio, reads it)
    "Job",
    "broken_jobs",
    "launch",
    "launch_training",
    "list_jobs",
    "process_start",
    "running_job",
    "running_summary",
]

_CHILDREN: list[subprocess.Popen] = []  # polled so finished jobs are reaped, not left as zombies


def _proc_stat(pid: int) -> list[str] | None:
    """Fields of ``/proc/<pid>/stat`` after the command name (Linux), or None."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def process_start(pid: int) -> str | None:
    """When ``pid`` started (clock ticks since boot, Linux): with the pid, it names one process,
    even after the pid is reused. None where /proc is missing."""
    stat = _proc_stat(pid)
    return stat[19] if stat and len(stat) > 19 else None


def _alive(pid: int, started: str | None = None) -> bool:
    """Is the process ``pid`` (started at ``started``, when known) still running? A zombie
    (exited, not yet reaped) and a reused pid count as gone."""
    stat = _proc_stat(pid)
    if stat is not None:
        return stat[0] != "Z" and (started is None or stat[19] == started)
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


@dataclass
class Job:
    path: Path  # <id>.json

    @property
    def id(self) -> str:
        return self.path.stem

    @cached_property
    def info(self) -> dict:
        """The launch record (pid, its start time, label); written once, atomically."""
        return json.loads(self.path.read_text(encoding="utf-8"))

    @cached_property
    def problem(self) -> str | None:
        """Why the launch record cannot be used (unreadable, not JSON, no process id), or None;
        :func:`list_jobs` leaves such a job out and :func:`broken_jobs` lists it."""
        try:
            info = self.info
        except (OSError, UnicodeDecodeError) as exc:
            return f"unreadable ({exc})"
        except json.JSONDecodeError as exc:
            return f"not JSON ({exc.msg}, line {exc.lineno})"
        if not isinstance(info, dict):
            return f"a JSON {type(info).__name__}, not a job record"
        if not isinstance(info.get("pid"), int) or isinstance(info.get("pid"), bool):
            return "no process id (pid)"
        if not isinstance(info.get("label", ""), str):
            return "its label is not text"
        return None

    @property
    def label(self) -> str:
        return self.info.get("label") or self.id

    @property
    def command(self) -> str:
        """What the job runs: ``train`` (jobs before this field trained) or ``adapt``."""
        return self.info.get("command") or "train"

    def _file(self, suffix: str) -> Path:
        return self.path.with_name(f"{self.id}{suffix}")

    def events(self) -> list[Event]:
        """The trainer's progress events so far."""
        return read_events(self._file(".progress.jsonl"))

    @property
    def result(self) -> list[dict] | None:
        out = self._file(".out")
        lines = out.read_text(encoding="utf-8").strip().splitlines() if out.is_file() else []
        try:
            return json.loads(lines[-1]) if lines else None
        except json.JSONDecodeError:
            return None

    @property
    def error(self) -> str | None:
        err = self._file(".err")
        if not err.is_file():
            return None
        lines = [
            ln
            for ln in err.read_text(encoding="utf-8", errors="replace").splitlines()
            if ln.startswith("error:")
        ]
        return lines[-1][len("error:") :].strip() if lines else None

    @property
    def running(self) -> bool:
        return _alive(self.info["pid"], self.info.get("pid_start"))

    @property
    def status(self) -> str:
        """``running``, ``done``, ``failed`` (with :attr:`error`) or ``stopped`` (killed, or
        ended by the Stop button's SIGTERM)."""
        if self.running:
            return "running"
        if self.result is not None:
            return "done"
        error = self.error
        return "failed" if error and not error.startswith(INTERRUPTED) else "stopped"

    def progress(self) -> ProgressState:
        """Where the job is: the same state the command line's progress bar draws."""
        return fold(self.events())

    def timing(self, progress: ProgressState | None = None) -> tuple[float, float, float | None]:
        """(share done, seconds since it started, seconds left) of the job at ``progress``
        (default: read now): its share counts a fine-tune's steps toward the early stop its
        estimate expects, and the time left is its launch estimate at first, then its own pace
        (:func:`~glee_core.core.pace.time_left`); None while neither says."""
        share = (progress or self.progress()).share(self.info.get("stop_share"))
        elapsed = time.time() - self.info.get("started", time.time())
        return share, elapsed, time_left(share, elapsed, self.info.get("estimate_seconds"))

    def stop(self) -> bool:
        """Stop the job (its unfinished run leaves nothing in the store). Signals only the
        process this job started: a pid since reused by another process is left alone."""
        if not self.running:
            return False
        os.killpg(self.info["pid"], signal.SIGTERM)
        return True


def launch(
    store: RunStore,
    command: str,
    request: TrainRequest | AdaptRequest,
    label: str = "",
    env: dict[str, str] | None = None,
    estimate_seconds: float | None = None,
    visitor: str | None = None,
    stop_share: float | None = None,
) -> Job:
    """Start ``python -m glee_core COMMAND --request FILE`` on ``store`` in the background
    (``env``: variables to add to its environment; ``estimate_seconds``: its estimated time,
    kept in the job's record for the session's limit and its bar's time left; ``visitor``: who
    launched it, public mode's per-visitor limits count it; ``stop_share``: the share of their
    planned steps the estimate expects its runs to end at, which its bar reads)."""
    folder = store.jobs_dir
    folder.mkdir(parents=True, exist_ok=True)
    job_id = time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)
    request_file = request.write(folder / f"{job_id}.request.json")
    argv = [
        sys.executable,
        "-m",
        "glee_core",
        command,
        "--request",
        str(request_file),
        "--progress-file",
        str(folder / f"{job_id}.progress.jsonl"),
    ]
    if command == "train":
        argv += ["--runs-dir", str(store.root)]
    with open(folder / f"{job_id}.out", "wb") as out, open(folder / f"{job_id}.err", "wb") as err:
        process = subprocess.Popen(
            argv,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )
    _CHILDREN.append(process)
    job = Job(folder / f"{job_id}.json")
    write_json_atomic(
        job.path,
        {
            "id": job_id,
            "argv": argv,
            "pid": process.pid,
            "pid_start": process_start(process.pid),
            "label": label,
            "command": command,
            "started": time.time(),
            "estimate_seconds": estimate_seconds,
            "visitor": visitor,
            "stop_share": stop_share,
        },
    )
    return job


def launch_training(
    store: RunStore,
    request: TrainRequest,
    label: str = "",
    env: dict[str, str] | None = None,
    estimate_seconds: float | None = None,
    visitor: str | None = None,
    stop_share: float | None = None,
) -> Job:
    """A training job (see :func:`launch`)."""
    return launch(store, "train", request, label, env, estimate_seconds, visitor, stop_share)


def _records(store: RunStore) -> list[Job]:
    folder = store.jobs_dir
    if not folder.is_dir():
        return []
    return sorted(
        (Job(p) for p in folder.glob("*.json") if not p.name.endswith(".request.json")),
        key=lambda j: j.id,
        reverse=True,
    )


def list_jobs(store: RunStore, command: str | None = None) -> list[Job]:
    """Jobs (of one ``command``: train, adapt), newest first; a job whose record is broken is
    left out (see :func:`broken_jobs`)."""
    for child in _CHILDREN:
        child.poll()
    return [
        job
        for job in _records(store)
        if job.problem is None and (command is None or job.command == command)
    ]


def broken_jobs(store: RunStore) -> dict[str, str]:
    """Job records that cannot be read: file name -> what is wrong with it."""
    return {job.path.name: job.problem for job in _records(store) if job.problem is not None}


def running_job(store: RunStore, request: TrainRequest) -> Job | None:
    """The job of ``store`` running (or waiting) ``request`` itself, or None: a step already
    launched is shown as running, not offered again."""
    wanted = request.to_dict()
    for job in list_jobs(store, "train"):
        if not job.running:
            continue
        try:
            if TrainRequest.read(job._file(".request.json")).to_dict() == wanted:
                return job
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a request of another release, or damaged: not this step
    return None


def running_summary(store: RunStore) -> str:
    """What holds ``store``'s training slots, for a run that waits: its running jobs (the
    app's launches, or other commands given a progress file), each with the time it has left
    (:func:`~glee_core.core.pace.time_left`); "" when none says."""
    said = []
    for job in list_jobs(store):
        if not job.running:
            continue
        _, _, left = job.timing()
        said.append(
            f"the job '{job.label}'"
            + (f" (about {left / 60:.0f} min left)" if left is not None else "")
        )
    return ("training in this store: " + ", ".join(said)) if said else ""
