"""Background jobs, as the app launches every kind of long work (:mod:`glee_core.train.job_kinds`).

A job is a detached ``python -m glee_core <kind> --request FILE --progress-file F`` process:
navigation, reloads and even an app restart leave it running. Its state lives in the store's
``jobs_dir``: ``<id>.json`` (its typed launch record, :class:`JobRecord`: pid and its start time,
label, kind, estimate), ``<id>.request.json`` (the kind's request), ``<id>.progress.jsonl`` (its
progress events), ``<id>.out`` (stdout: its result as the last line), ``<id>.err`` (stderr: its
log, its error as an ``error:`` line) and ``<id>.stopped`` (the Stop button was pressed). The
run store's locks and queue apply as for any launch: the same configuration twice trains once,
and the same request launched while it runs attaches to the running job (:func:`launch`).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, fields
from functools import cached_property
from pathlib import Path

from filelock import FileLock

from ..core.environment import job_nice, niced_from_the_start, proc_stat
from ..core.errors import INTERRUPTED, GleeError
from ..core.events import Event, read_events
from ..core.files import write_json_atomic
from ..core.pace import time_left
from ..core.progress import ProgressState, fold
from ..runs.rates import Estimate
from ..runs.store import RunStore
from .job_kinds import JOB_KINDS, JobKind, Made, kind_of
from .priority import start_nice, started, started_here

LOG_LINES = 40  # the last lines of a job's log the jobs panel shows


def process_start(pid: int) -> str | None:
    """When ``pid`` started (clock ticks since boot, Linux): with the pid, it names one process,
    even after the pid is reused. None where /proc is missing."""
    stat = proc_stat(pid)
    return stat[19] if stat and len(stat) > 19 else None


def _alive(pid: int, started: str | None = None) -> bool:
    """Is the process ``pid`` (started at ``started``, when known) still running? A zombie
    (exited, not yet reaped) and a reused pid count as gone."""
    stat = proc_stat(pid)
    if stat is not None:
        return stat[0] != "Z" and (started is None or stat[19] == started)
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


@dataclass
class JobRecord:
    """A job's launch record, written once (atomically) when it starts: its process (``pid``
    and when it started, ``pid_start``), the ``label`` its panel heads it with, its ``command``
    (the kind: ``train``, ``health``, ...), when it ``started``, the ``estimate`` it launched
    with and the ``visitor`` who launched it (public mode's limits count it)."""

    id: str
    pid: int
    label: str = ""
    command: str = "train"
    started: float = 0.0
    pid_start: str | None = None
    argv: list[str] = field(default_factory=list)
    estimate: Estimate | None = None
    visitor: str | None = None

    def to_dict(self) -> dict:
        values = asdict(self)
        values["estimate"] = self.estimate.to_dict() if self.estimate else None
        return values

    @classmethod
    def from_dict(cls, values: dict) -> JobRecord:
        """The record in ``values``; one of a release before typed estimates keeps its
        ``estimate_seconds`` and ``stop_share`` as its estimate."""
        known = {f.name for f in fields(cls)}
        given = {k: v for k, v in values.items() if k in known}
        if isinstance(given.get("estimate"), dict):
            given["estimate"] = Estimate.from_dict(given["estimate"])
        elif values.get("estimate_seconds"):
            given["estimate"] = Estimate(
                float(values["estimate_seconds"]), "", measured=True, stop=values.get("stop_share")
            )
        else:
            given["estimate"] = None
        if not given.get("command"):
            given["command"] = "train"  # jobs before this field trained
        return cls(**given)


@dataclass
class Job:
    path: Path  # <id>.json
    attached: bool = False  # launch found it running the same request: not started again

    @property
    def id(self) -> str:
        return self.path.stem

    @cached_property
    def record(self) -> JobRecord:
        """The launch record; see :attr:`problem` for one that cannot be read."""
        return JobRecord.from_dict(json.loads(self.path.read_text(encoding="utf-8")))

    @cached_property
    def problem(self) -> str | None:
        """Why the launch record cannot be used (unreadable, not JSON, no process id, a kind
        this release does not run), or None; :func:`list_jobs` leaves such a job out and
        :func:`broken_jobs` lists it."""
        try:
            values = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            return f"unreadable ({exc})"
        except json.JSONDecodeError as exc:
            return f"not JSON ({exc.msg}, line {exc.lineno})"
        if not isinstance(values, dict):
            return f"a JSON {type(values).__name__}, not a job record"
        if not isinstance(values.get("pid"), int) or isinstance(values.get("pid"), bool):
            return "no process id (pid)"
        if not isinstance(values.get("label", ""), str):
            return "its label is not text"
        if (values.get("command") or "train") not in JOB_KINDS:
            return f"a kind of job this release does not run ({values.get('command')!r})"
        try:
            JobRecord.from_dict(values)
        except (TypeError, ValueError) as exc:
            return f"not a job record ({exc})"
        return None

    @property
    def label(self) -> str:
        return self.record.label or self.id

    @property
    def command(self) -> str:
        """What the job runs: its kind's name (``train``, ``adapt``, ``health``, ...)."""
        return self.record.command

    @property
    def kind(self) -> JobKind:
        return JOB_KINDS[self.command]

    def file(self, suffix: str) -> Path:
        """One of the job's files (``.request.json``, ``.progress.jsonl``, ``.out``, ``.err``)."""
        return self.path.with_name(f"{self.id}{suffix}")

    def request(self):
        """The job's typed request (its kind's); GleeError for one that cannot be read."""
        return self.kind.request.read(self.file(".request.json"))

    def events(self) -> list[Event]:
        """The job's progress events so far."""
        return read_events(self.file(".progress.jsonl"))

    @property
    def result(self) -> list | dict | None:
        """The result line a finished job printed last (JSON), or None."""
        out = self.file(".out")
        lines = out.read_text(encoding="utf-8").strip().splitlines() if out.is_file() else []
        try:
            return json.loads(lines[-1]) if lines else None
        except json.JSONDecodeError:
            return None

    def made(self) -> Made | None:
        """What a finished job made (its kind reads its result line), or None."""
        result = self.result
        return None if result is None else self.kind.made(result)

    @property
    def error(self) -> str | None:
        err = self.file(".err")
        if not err.is_file():
            return None
        lines = [
            ln
            for ln in err.read_text(encoding="utf-8", errors="replace").splitlines()
            if ln.startswith("error:")
        ]
        return lines[-1][len("error:") :].strip() if lines else None

    def log(self, lines: int = LOG_LINES) -> str:
        """The last ``lines`` lines of the job's log (its stderr: notes, warnings, the error)."""
        err = self.file(".err")
        if not err.is_file():
            return ""
        with err.open("rb") as handle:  # the tail only: a long job's log may be megabytes
            handle.seek(max(0, err.stat().st_size - 20_000))
            text = handle.read().decode("utf-8", errors="replace")
        return "\n".join(text.replace("\r", "\n").splitlines()[-lines:])

    @property
    def running(self) -> bool:
        return _alive(self.record.pid, self.record.pid_start)

    @property
    def status(self) -> str:
        """``running``, ``done``, ``failed`` (with :attr:`error`), ``stopped`` (by its Stop
        button, or a signal it said so of) or ``died`` (it ended saying nothing: killed, out of
        memory, the machine restarted)."""
        if self.running:
            return "running"
        if self.result is not None:
            return "done"
        error = self.error
        if error and not error.startswith(INTERRUPTED):
            return "failed"
        return "stopped" if error or self.file(".stopped").is_file() else "died"

    @property
    def seconds(self) -> float | None:
        """How long a finished job took (its result's last write, from its start), or None."""
        out = self.file(".out")
        if self.status != "done" or not out.is_file():
            return None
        return max(out.stat().st_mtime - self.record.started, 0.0)

    def progress(self) -> ProgressState:
        """Where the job is: the same state the command line's progress bar draws."""
        return fold(self.events())

    def timing(self, progress: ProgressState | None = None) -> tuple[float, float, float | None]:
        """(share done, seconds since it started, seconds left) of the job at ``progress``
        (default: read now): its share counts a fine-tune's steps toward the early stop its
        estimate expects, and the time left is its launch estimate at first, then its own pace
        (:func:`~glee_core.core.pace.time_left`); None while neither says."""
        estimate = self.record.estimate
        share = (progress or self.progress()).share(estimate.stop if estimate else None)
        elapsed = time.time() - (self.record.started or time.time())
        return share, elapsed, time_left(share, elapsed, estimate.seconds if estimate else None)

    def stop(self) -> bool:
        """Stop the job (its unfinished work leaves nothing half-written). Signals only the
        process this job started: a pid since reused by another process is left alone."""
        if not self.running:
            return False
        self.file(".stopped").write_text(str(time.time()), encoding="utf-8")
        os.killpg(self.record.pid, signal.SIGTERM)
        return True


def _job_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)


@dataclass(frozen=True)
class Visitor:
    """Who launched a job in public mode (hashed: the per-visitor limits count it) and the
    limits its process works within (variables added to its environment: its workspace's quota,
    its slot, its minutes)."""

    id: str
    env: dict[str, str] = field(default_factory=dict)


def launch(
    store: RunStore,
    request,
    label: str = "",
    estimate: Estimate | None = None,
    visitor: Visitor | None = None,
) -> Job:
    """Start ``request``'s kind of work (:func:`~glee_core.train.job_kinds.kind_of`) on ``store``
    in the background: ``python -m glee_core <kind> --request FILE``. ``estimate``: its estimated
    time, kept in the job's record for the session's limit and its bar's time left; ``visitor``:
    who launched it in public mode, and within what. The same request already running in
    ``store`` is not started again: its job comes back with :attr:`Job.attached` set (two tabs
    asking for the same report at once)."""
    kind = kind_of(request)
    folder = store.jobs_dir
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder / ".launch.lock"), timeout=60):
        running = running_job(store, request)
        if running is not None:
            running.attached = True
            return running
        job_id = _job_id()
        request_file = request.write(folder / f"{job_id}.request.json")
        argv = [
            sys.executable,
            "-m",
            "glee_core",
            kind.name,
            "--request",
            str(request_file),
            "--progress-file",
            str(folder / f"{job_id}.progress.jsonl"),
        ]
        if kind.store:
            argv += ["--runs-dir", str(store.root)]
        nice = start_nice()  # niced further while a page draws (the pages first)
        with (
            open(folder / f"{job_id}.out", "wb") as out,
            open(folder / f"{job_id}.err", "wb") as err,
        ):
            process = subprocess.Popen(
                niced_from_the_start(argv, nice),
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={
                    **os.environ,
                    "PYTHONUNBUFFERED": "1",
                    "GLEE_JOB_NICE": str(job_nice()),  # its own priority, for its children
                    **(visitor.env if visitor else {}),
                },
            )
        started(process, nice)
        job = Job(folder / f"{job_id}.json")
        record = JobRecord(
            id=job_id,
            pid=process.pid,
            label=label,
            command=kind.name,
            started=time.time(),
            pid_start=process_start(process.pid),
            argv=argv,
            estimate=estimate,
            visitor=visitor.id if visitor else None,
        )
        write_json_atomic(job.path, record.to_dict())
    return job


def _records(store: RunStore) -> list[Job]:
    folder = store.jobs_dir
    if not folder.is_dir():
        return []
    return sorted(
        (
            Job(p)
            for p in folder.glob("*.json")
            if not p.name.endswith(".request.json") and p.is_file()
        ),
        key=lambda j: j.id,
        reverse=True,
    )


def list_jobs(store: RunStore, command: str | None = None) -> list[Job]:
    """Jobs (of one ``command``: train, adapt, health ...), newest first; a job whose record
    is broken is left out (see :func:`broken_jobs`)."""
    started_here()  # reaps the jobs that finished
    return [
        job
        for job in _records(store)
        if job.problem is None and (command is None or job.command == command)
    ]


def broken_jobs(store: RunStore) -> dict[str, str]:
    """Job records that cannot be read: file name -> what is wrong with it."""
    return {job.path.name: job.problem for job in _records(store) if job.problem is not None}


def running_job(store: RunStore, request) -> Job | None:
    """The job of ``store`` running (or waiting) ``request`` itself, or None: work already
    launched is shown as running, not launched again."""
    kind = kind_of(request)
    wanted = request.to_dict()
    for job in list_jobs(store, kind.name):
        if not job.running:
            continue
        try:
            if job.request().to_dict() == wanted:
                return job
        except GleeError:
            continue  # a request of another release, or damaged: not this one
    return None


def past_jobs(store: RunStore) -> dict[str, list[tuple[float, float]]]:
    """The finished jobs of ``store`` by kind: (the estimate each launched with before the
    calibration by earlier jobs, the seconds it took), what the next estimate of the kind
    is calibrated on (``glee_core.runs.job_estimates.settle``)."""
    past: dict[str, list[tuple[float, float]]] = {}
    for job in list_jobs(store):
        estimate = job.record.estimate
        if estimate is None or not estimate.base:
            continue
        seconds = job.seconds
        if seconds:
            past.setdefault(job.command, []).append((estimate.base, seconds))
    return past


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
