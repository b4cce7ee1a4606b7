"""Where things live, from the environment: the one home of every ``GLEE_*`` variable.

Stores (on a Hugging Face Space, ``SPACE_ID`` set, with persistent storage mounted at ``/data``,
they default to ``/data/glee/<name>`` so runs survive a restart; elsewhere to ``./<name>``):

- ``GLEE_RUNS_DIR`` (``runs``): the run store (public mode: the owner's, shared read-only)
- ``GLEE_UPLOADS_DIR`` (``uploads``): CSVs uploaded in the app
- ``GLEE_WORKSPACES_DIR`` (``workspaces``): public mode, each browser session's uploads and runs
- ``GLEE_DATA_DIR`` (``./data``): the paper's datasets, one folder per id
- ``GLEE_SLOTS_DIR`` (the store's ``.locks``): the training slots (public mode: the shared
  store's, so every workspace queues for the one GPU)
- ``GLEE_CPU_JOBS_DIR`` (``glee-cpu-jobs`` in the temp folder): where the machine's CPU jobs
  say they are working, so each takes its share of the threads

Behaviour:

- ``GLEE_DEFAULT_MODEL`` (``auto``): the backbone the app starts with
- ``GLEE_MAX_CONCURRENT_RUNS`` (1): runs training at once per store (public mode: per machine)
- ``GLEE_PUBLIC`` (1 when ``SPACE_ID`` is set, else 0): private workspaces and limits
- ``GLEE_READ_ONLY`` (0): the app trains nothing and takes no uploads (shipped runs only)
- ``GLEE_SESSION_JOBS`` (1) / ``GLEE_SESSION_QUEUED`` (2): jobs a session may have training /
  waiting; ``GLEE_SESSION_UPLOAD_MB`` (10): largest upload; ``GLEE_SESSION_DISK_MB`` (500): a
  workspace's uploads and runs; ``GLEE_SESSION_TTL_HOURS`` (24): an idle workspace is deleted
- ``GLEE_SESSION_JOB_RUNS`` (40) / ``GLEE_SESSION_JOB_MINUTES`` (30): runs and estimated minutes
  one launch may plan; ``GLEE_SESSION_MINUTES`` (60): estimated minutes of a session's unfinished
  jobs together; ``GLEE_SESSION_SCORE_ROWS`` (2000): texts a file may give (the Playground's to
  classify, a pool of unlabelled texts)
- ``GLEE_MAX_JOBS`` (8): jobs training or waiting on the machine, all sessions together;
  ``GLEE_MAX_WORKSPACES`` (500): workspaces on the machine; ``GLEE_VISITOR_WORKSPACES`` (10):
  workspaces one address may hold (at most a quarter of the machine's)
- ``GLEE_TRUSTED_PROXIES`` (1 when ``SPACE_ID`` is set, else 0): the proxies in front of the app
  that append the client's address to ``X-Forwarded-For``; the address is that many entries from
  its end (0: the header is ignored, as a client writes it itself where no proxy appends)
- ``GLEE_PUBLIC_MODELS`` (the default model): backbones visitors may pick, comma-separated
- ``GLEE_JOB_NICE`` (10 in public mode, else 0): how far a job the app starts yields the CPU
  to the pages (:func:`yield_to_pages`; 0: not at all); the app passes it to each job it starts.
  Whatever it says, the jobs run niced while a page draws (``glee_core.train.priority``)
- ``GLEE_DRAW_LOG`` (unset): a file the app appends each page draw's wall and CPU seconds to
  (``bench/app_clicks.py`` reads it to tell the server's draw from the browser's)
- ``GLEE_CUDNN_SDPA`` (0): let cuDNN serve scaled-dot-product attention on a GPU
  (``glee_core.core.devices.configure_cuda`` says why it is off)
- set by the app for a public job, read by its process: ``GLEE_QUOTA_DIR`` and
  ``GLEE_QUOTA_MB`` (the workspace and its disk limit, checked before each run is written),
  ``GLEE_SESSION_SLOT`` (a lock file: one job of a session trains at a time),
  ``GLEE_JOB_SECONDS`` and ``GLEE_JOB_STOP`` (the minutes a launch may take and the early
  stopping its estimate expects: the job stops when its own pace runs far past them),
  ``GLEE_POOL_TEXTS`` (the texts a pool may hold)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path

from filelock import FileLock, Timeout

AUTO_MODEL = "auto"  # the offline default backbone (glee_core.models.backbone says what it is)
AUTO_MODEL_NAME = "all-MiniLM-L6-v2"  # what it loads, as the app names it beside "auto"
SPACE_STORAGE = Path("/data")  # where a Space's persistent storage is mounted


def on_space() -> bool:
    """Running as a Hugging Face Space (the platform sets ``SPACE_ID``)."""
    return bool(os.environ.get("SPACE_ID"))


def _base() -> Path:
    """``/data/glee`` on a Space with persistent storage, else the working directory."""
    if on_space() and SPACE_STORAGE.is_dir() and os.access(SPACE_STORAGE, os.W_OK):
        return SPACE_STORAGE / "glee"
    return Path()


def _path(variable: str, default: str) -> Path:
    value = os.environ.get(variable)
    return Path(value).expanduser() if value else _base() / default


def cpu_jobs_dir() -> Path:
    return Path(
        os.environ.get("GLEE_CPU_JOBS_DIR") or Path(tempfile.gettempdir()) / "glee-cpu-jobs"
    )


def runs_dir() -> Path:
    return _path("GLEE_RUNS_DIR", "runs")


def uploads_dir() -> Path:
    return _path("GLEE_UPLOADS_DIR", "uploads")


def workspaces_dir() -> Path:
    return _path("GLEE_WORKSPACES_DIR", "workspaces")


def data_dir() -> Path:
    return Path(os.environ.get("GLEE_DATA_DIR") or "data").expanduser()


def slots_dir() -> Path | None:
    value = os.environ.get("GLEE_SLOTS_DIR")
    return Path(value).expanduser() if value else None


def default_model() -> str:
    return os.environ.get("GLEE_DEFAULT_MODEL") or AUTO_MODEL


def max_concurrent_runs() -> int:
    return max(1, int(os.environ.get("GLEE_MAX_CONCURRENT_RUNS") or 1))


def _flag(variable: str, default: bool) -> bool:
    value = os.environ.get(variable, "").strip().lower()
    if not value:
        return default
    return value not in ("0", "false", "no", "off")


def public() -> bool:
    return _flag("GLEE_PUBLIC", on_space())


def read_only() -> bool:
    return _flag("GLEE_READ_ONLY", False)


SESSION_LIMITS = {
    "jobs": "GLEE_SESSION_JOBS",
    "queued": "GLEE_SESSION_QUEUED",
    "upload_mb": "GLEE_SESSION_UPLOAD_MB",
    "disk_mb": "GLEE_SESSION_DISK_MB",
    "ttl_hours": "GLEE_SESSION_TTL_HOURS",
    "job_runs": "GLEE_SESSION_JOB_RUNS",
    "job_minutes": "GLEE_SESSION_JOB_MINUTES",
    "session_minutes": "GLEE_SESSION_MINUTES",
    "score_rows": "GLEE_SESSION_SCORE_ROWS",
    "max_jobs": "GLEE_MAX_JOBS",
    "max_workspaces": "GLEE_MAX_WORKSPACES",
    "workspaces_per_minute": "GLEE_WORKSPACES_PER_MINUTE",
    "visitor_workspaces": "GLEE_VISITOR_WORKSPACES",
    "upload_classes": "GLEE_SESSION_UPLOAD_CLASSES",
}


def draw_log() -> Path | None:
    value = os.environ.get("GLEE_DRAW_LOG")
    return Path(value) if value else None


def session_limits() -> dict[str, float]:
    """Public mode's per-session limits that the environment sets (the defaults live in
    ``serve.policy.Policy``)."""
    values = {key: os.environ.get(variable, "").strip() for key, variable in SESSION_LIMITS.items()}
    return {key: float(value) for key, value in values.items() if value}


def trusted_proxies() -> int:
    value = os.environ.get("GLEE_TRUSTED_PROXIES", "").strip()
    try:
        return max(0, int(value)) if value else int(on_space())
    except ValueError:
        return int(on_space())


def public_models() -> list[str]:
    value = os.environ.get("GLEE_PUBLIC_MODELS", "")
    return [m.strip() for m in value.split(",") if m.strip()] or [default_model()]


def disk_quota() -> tuple[Path, int] | None:
    """A public job's workspace and its disk limit in bytes (``GLEE_QUOTA_DIR``,
    ``GLEE_QUOTA_MB``), or None (no limit: the owner's own runs)."""
    folder, megabytes = os.environ.get("GLEE_QUOTA_DIR"), os.environ.get("GLEE_QUOTA_MB")
    return (Path(folder), int(float(megabytes) * 2**20)) if folder and megabytes else None


def job_limit() -> tuple[float, float | None] | None:
    """A public job's time limit in seconds and the early stopping its estimate expects
    (``GLEE_JOB_SECONDS``, ``GLEE_JOB_STOP``), or None (no limit: the owner's own runs)."""
    try:
        seconds = float(os.environ.get("GLEE_JOB_SECONDS") or 0)
        stop = float(os.environ.get("GLEE_JOB_STOP") or 0) or None
    except ValueError:
        return None
    return (seconds, stop) if seconds > 0 else None


def pool_limit() -> int | None:
    """A public job's cap on the texts of a pool (``GLEE_POOL_TEXTS``), or None (none)."""
    try:
        return int(os.environ.get("GLEE_POOL_TEXTS") or 0) or None
    except ValueError:
        return None


def session_slot() -> Path | None:
    """A public job's session lock: held while it trains, so a session's jobs take turns."""
    value = os.environ.get("GLEE_SESSION_SLOT")
    return Path(value) if value else None


def usable_cores() -> list[int] | None:
    """The CPUs this process may run on (its affinity: a container's cpuset, ``taskset``), or
    None where the system does not say."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def core_count() -> int:
    """How many CPUs this process may run on."""
    cores = usable_cores()
    return len(cores) if cores else os.cpu_count() or 1


def proc_stat(pid: int | str) -> list[str] | None:
    """Fields of ``/proc/<pid>/stat`` after the command name (Linux: state, parent, group,
    session ... user and system ticks at 11 and 12, start at 19), or None where the process is
    gone or there is no ``/proc``."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _cpu_seconds(fields: list[str]) -> float:
    """User + system seconds of a :func:`proc_stat` (ValueError, IndexError on a foreign one)."""
    return (float(fields[11]) + float(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int) -> float | None:
    """The CPU seconds process ``pid`` has used (user + system, ``/proc/<pid>/stat``), or None
    where it is gone or there is no ``/proc``."""
    fields = proc_stat(pid)
    with contextlib.suppress(ValueError, IndexError):
        return None if fields is None else _cpu_seconds(fields)
    return None


def session_cpu_seconds() -> dict[int, float]:
    """The CPU seconds the live processes of each session have used (:func:`proc_stat`: its
    session id, user + system), by session id; {} where there is no ``/proc``."""
    sessions: dict[int, float] = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            fields = proc_stat(entry.name) if entry.name.isdigit() else None
            if fields is None:  # not a process, or gone meanwhile
                continue
            try:
                sid, seconds = int(fields[3]), _cpu_seconds(fields)
            except (ValueError, IndexError):
                continue
            sessions[sid] = sessions.get(sid, 0.0) + seconds
    return sessions


def busy_sessions(
    before: dict[int, float], after: dict[int, float], seconds: float, leave_out: set[int]
) -> int:
    """How many sessions (:func:`session_cpu_seconds` ``before`` and ``after`` ``seconds``),
    those in ``leave_out`` aside, worked a quarter of a core or more meanwhile."""
    return sum(
        1
        for sid, used in after.items()
        if sid not in leave_out and (used - before.get(sid, 0.0)) / max(seconds, 1e-3) >= 0.25
    )


def session_share_cap(others: float, sessions: int, cores: int) -> float:
    """``others`` cores' worth of other work as it weighs against a launch where the kernel
    shares the CPU by session (``sched_autogroup``; a job leads a session of its own): the
    ``sessions`` busy ones keep ``sessions / (sessions + 1)`` of the cores, whatever their
    threads, and a core's worth each at least (beside them a launch keeps one thread, which
    gets a session's share of a core: ``runs.busy.slowdown`` counts it so). Beside a 2-thread
    matrix product in one session the demo's compare took what it takes alone, estimated x2.
    As it is elsewhere, or where no busy session was seen."""
    if sessions < 1 or niced_work_yields():
        return others
    return min(others, max(cores * sessions / (sessions + 1), float(sessions)))


def cpu_times() -> tuple[float, float, float] | None:
    """How busy the CPUs this process may run on have been: (busy, total, niced) jiffies since
    boot (Linux's ``/proc/stat``, the lines of those CPUs: a process held to some cores of a
    larger machine counts the work on its own; niced: the busy time of processes at a lower
    priority, ``nice`` above 0), or None."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            lines = [line.split() for line in stat if line.startswith("cpu")]
        cores = {f"cpu{n}" for n in usable_cores() or ()}
        rows = [line[1:] for line in lines if line[0] in cores] or [lines[0][1:]]
        fields = [sum(float(row[k]) for row in rows) for k in range(len(rows[0]))]
    except (OSError, ValueError, IndexError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    return sum(fields) - idle, sum(fields), fields[1]


def load_mark() -> tuple[float, float, float, float] | None:
    """Where this machine's CPU counters stand now, for :func:`other_cores_since`: (now, the
    machine's busy CPU seconds since boot, this process's CPU seconds, the niced processes' CPU
    seconds), or None where ``/proc/stat`` is not there."""
    times = cpu_times()
    if times is None:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    return time.monotonic(), times[0] / tick, time.process_time(), times[2] / tick


# What a process at ``nice`` 10 (the ``nice`` command's default) keeps of a core beside one at 0:
# Linux's scheduler weighs them 110 : 1024 (BENCHMARKS.md, "How long does a fine-tune take?")
NICED_SHARE = 110 / (1024 + 110)
AUTOGROUP = Path("/proc/sys/kernel/sched_autogroup_enabled")


def niced_work_yields() -> bool:
    """Whether niced work on this machine yields the cores to a launch. Not where the kernel
    groups processes by session (``sched_autogroup``, on in many distributions): a job starts a
    session of its own, and sessions share the CPU evenly whatever their processes' ``nice``
    (measured: a matrix product at nice 19 in another session kept a core from a quick compare,
    whose two threads then took 2.4 s a step on the one left, 0.3 s alone)."""
    try:
        return AUTOGROUP.read_text(encoding="ascii").strip() != "1"
    except OSError:  # not Linux, or no such knob: processes weigh by their nice alone
        return True


JOB_NICE = 10  # a job the app starts, beside the pages (GLEE_JOB_NICE)


def job_nice() -> int:
    """How far a job the app starts yields the CPU to the web process: ``GLEE_JOB_NICE`` (0 to
    19; default :data:`JOB_NICE` in public mode, where the machine is the app's, else 0: niced,
    a job yields to every other program of a shared machine, :func:`yield_to_pages`)."""
    default = JOB_NICE if public() else 0
    value = os.environ.get("GLEE_JOB_NICE", "").strip()
    try:
        return min(19, max(0, int(value))) if value else default
    except ValueError:
        return default


def set_group_nice(pid: int, nice: int) -> bool:
    """Set the nice of the CPU group of ``pid``'s session (``/proc/<pid>/autogroup``, where the
    kernel groups processes by session); False where it cannot. Its owner may lower and raise
    it again without privileges (down to 0), unlike a process's own nice."""
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/autogroup").write_text(str(nice), encoding="ascii")
        return True
    return False


def group_nice(pid: int) -> int:
    """The nice of the CPU group of ``pid``'s session (:func:`set_group_nice`), 0 where the
    kernel does not group by session or ``pid`` is gone."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(Path(f"/proc/{pid}/autogroup").read_text().split()[-1])
    return 0


def yield_to_pages(nice: int) -> None:
    """Run this process (a job the app started, the leader of a session of its own) ``nice``
    steps below the web process, so a click on a page is answered before the job's next step:
    on 2 cores beside a CPU hog a job at the same priority held a click up to 3.4 s, niced 1.8 s
    (BENCHMARKS.md, "How does the app hold up?"). Where the kernel groups processes by session
    (``sched_autogroup``) a process's own nice weighs only inside its session, so the session's
    group is niced (``/proc/self/autogroup``); elsewhere the process (its workers inherit
    either). That yields to every other program too: beside a niced matrix product in another
    session a quick compare ran 3.3x its estimate, hence on by default only in public mode,
    where the machine is the app's (:func:`job_nice`). A process that does not lead its session
    (a command typed in a shell) is left as it is, and so is one the kernel refuses."""
    if nice <= 0 or os.getsid(0) != os.getpid():
        return
    if not niced_work_yields() and (
        group_nice(os.getpid()) >= nice or set_group_nice(os.getpid(), nice)
    ):  # never back up: the launch may have niced it further for a page's draw
        return
    with contextlib.suppress(OSError):
        os.nice(nice)


def niced_from_the_start(argv: list[str], nice: int) -> list[str]:
    """``argv`` run ``nice`` steps down from its first instruction, as :func:`yield_to_pages`
    would set it (the session's group where the kernel groups by session, else the process):
    left to the job itself, its interpreter's start and imports (a second of CPU or more) ran
    at the web process's priority, and a click in that second waited on them. For a process
    started as the leader of a session of its own (``start_new_session``); ``argv`` unchanged
    where ``nice`` is 0 or there is no POSIX shell."""
    shell = shutil.which("sh")
    if nice <= 0 or shell is None:
        return argv
    if not niced_work_yields():  # the group: sh writes it, then becomes the job (same pid)
        script = 'echo "$0" > /proc/self/autogroup 2>/dev/null; exec "$@"'
        return [shell, "-c", script, str(nice), *argv]
    script = 'command -v nice >/dev/null && exec nice -n "$0" "$@"; exec "$@"'
    return [shell, "-c", script, str(nice), *argv]


def niced_discount() -> float:
    """The part of niced work's CPU time that does not count as busy for this process: niced
    work yields a launch all but :data:`NICED_SHARE` of the cores it holds when this process is
    not niced itself, except where the kernel groups processes by session
    (:func:`niced_work_yields`): 0.0 there."""
    if os.getpriority(os.PRIO_PROCESS, 0) <= 0 and niced_work_yields():
        return 1 - NICED_SHARE
    return 0.0


def other_cores_since(
    mark: tuple[float, float, float, float] | None,
    now: tuple[float, float, float, float] | None = None,
) -> float:
    """Cores' worth of work other processes did between ``mark`` and ``now`` (default: now;
    both :func:`load_mark`'s), as it weighs against this process's: work at a lower priority
    (niced) at :data:`NICED_SHARE` when this process is not niced itself, since it yields the
    cores to a launch (in full where it does not: :func:`niced_work_yields`); 0.0 without a
    mark, ``/proc/stat`` or time passed."""
    now = now or load_mark()
    if mark is None or now is None or now[0] - mark[0] <= 0.05:
        return 0.0
    busy = (now[1] - mark[1]) - (now[2] - mark[2])
    busy -= (now[3] - mark[3]) * niced_discount()
    return max(0.0, busy / (now[0] - mark[0]))


def live_cpu_jobs(folder: Path, own: Path | None = None) -> list[int]:
    """The process ids of the glee jobs working on this CPU now (a locked file each in
    ``folder``, named ``<pid>-...job``; ``own``: this process's, not counted); a file whose
    process is gone is swept."""
    live = []
    for other in folder.glob("*.job") if folder.is_dir() else ():
        if other == own or not other.is_file():  # a folder so named (the folder is shared)
            continue
        probe = FileLock(str(other))
        try:
            probe.acquire(timeout=0)
        except Timeout:  # its process holds it
            with contextlib.suppress(ValueError):
                live.append(int(other.name.split("-", 1)[0]))
            continue
        except OSError:  # another user's file, or gone meanwhile: not a job of ours to count
            continue
        probe.release()
        with contextlib.suppress(OSError):
            other.unlink()
    return live


def spare_cores(others: float, cores: int) -> int | None:
    """The threads a CPU job keeps beside ``others`` cores' worth of other work on ``cores``:
    the spare cores, at least one; None on a quiet machine (under half a core of other work),
    where the job's own share stands."""
    return None if others < 0.5 else max(1, round(cores - others))


def cores_after_launch(busy: float, glee: float, jobs: int, cores: int) -> float:
    """Cores' worth of work beside a new CPU job once it starts: ``busy`` cores' worth on the
    machine now, ``glee`` of them by the ``jobs`` glee jobs working (each of which shrinks its
    pool to its share, ``cores // (jobs + 1)`` threads at least 1, when the new one starts:
    :class:`CpuShare`), the rest by other processes, which keep theirs."""
    others = max(0.0, busy - glee)
    if not jobs:
        return busy
    return others + min(glee, jobs * max(1, cores // (jobs + 1)))
