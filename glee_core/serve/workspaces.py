"""Public mode: each browser session works in its own workspace, under limits, for a stated time.

On a public deployment (a Hugging Face Space: ``GLEE_PUBLIC``, on by default when ``SPACE_ID`` is
set) every visitor's uploads, and the runs and jobs trained on them, live in
``<workspaces>/<key>/`` where ``key`` is an unguessable token (192 random bits) that only the
visitor's browser session holds. Nothing lists workspaces; a key that is malformed or names no
workspace opens nothing; every path is built from the key and checked to stay inside the
workspaces folder. The owner's store (``GLEE_RUNS_DIR``: runs shipped with the Space), the paper's
datasets and the demo are shared and read-only. Limits per session (concurrent and queued jobs,
upload size, total disk) refuse the next launch or upload with a message saying which limit and
what to do; a workspace idle longer than its time to live is deleted.

Write access is tied to the visitor's browser, never to a link: the key rides in a cookie the
app sets (``COOKIE``), not in the URL, so a link cannot plant a workspace on someone else. What a
link can carry is a *share token* (:meth:`Workspace.share_token`), which opens the workspace's
runs read-only, and says so. Limits per launch (runs, estimated minutes) and per session
(estimated minutes of its unfinished jobs) cap the work one click queues; global caps (jobs on
the machine, workspaces) hold however many tabs or browsers a visitor opens.

Training is switched off entirely with ``GLEE_READ_ONLY`` (a showcase of shipped runs); the
command line ignores both switches: it is the owner's.
"""

from __future__ import annotations

import re
import secrets
import shutil
import time
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock

from ..core import environment
from ..core.errors import GleeError, disk_message
from ..core.files import folder_bytes, size_text, write_atomic
from ..runs.rates import Estimate
from ..runs.store import RunStore
from ..train.job_kinds import kind_of
from ..train.jobs import Job, Visitor, launch, list_jobs, running_job
from .policy import LimitReached, Policy

KEY = re.compile(r"[A-Za-z0-9_-]{32}")  # fullmatch: no trailing newline
USED_MARKER = ".last-used"
VISITOR_FILE = ".visitor"  # the hashed address that made a workspace (its share of them)
SHARE_FILE = ".share"  # a workspace's read-only share token, once its owner made one
SHARE_MODELS_FILE = ".share-models"  # present: a share link's viewers may export the models
SHARES_DIR = ".shares"  # <workspaces>/.shares/<token>: the key it opens, read-only
COOKIE = "glee_workspace"  # the browser's cookie holding its workspace key (write access)


class Workspace:
    """One browser session's uploads, runs and jobs."""

    def __init__(self, root: Path, key: str):
        if not KEY.fullmatch(key):
            raise GleeError("not a workspace key")
        self.root = Path(root).resolve()
        self.key = key
        self.path = self.root / key
        if self.path.resolve().parent != self.root:  # cannot happen with KEY; belt and braces
            raise GleeError("not a workspace key")

    @classmethod
    def create(
        cls,
        root: str | Path | None = None,
        limit: int | None = None,
        per_minute: int | None = None,
        visitor: str | None = None,
        per_visitor: int | None = None,
    ) -> Workspace:
        """A new workspace with a fresh unguessable key. ``limit``: how many the machine may
        hold (when full, the expired ones are swept, then the empty ones idle for an hour are
        reclaimed, then it is refused with a message); ``per_minute``: how many may be made in a
        minute (a script opening sessions in a loop is refused, not the visitors after it).
        ``visitor`` (the hashed address, ``studio_ui.visitor_id``) with ``per_visitor``: how
        many one address may hold, and make a minute (a fifth of ``per_minute``), so a client
        that drops its cookie can fill neither the machine nor the minute for everyone else
        (its own empty workspaces make room first). A full disk is refused with a message too."""
        root = Path(root or environment.workspaces_dir())
        try:
            root.mkdir(parents=True, exist_ok=True)
            with FileLock(str(root / ".create.lock"), timeout=30):
                if visitor and per_visitor is not None:
                    _check_visitor(root, visitor, per_visitor, per_minute)
                if per_minute is not None:
                    _check_rate(root, per_minute)
                if limit is not None and len(keys_in(root)) >= limit:
                    expire(root)
                    reclaim_empty(root)
                    if len(keys_in(root)) >= limit:
                        raise LimitReached(
                            f"This Space holds {limit} visitors' workspaces, its most: try "
                            "again later, or run Glee Studio on your own machine."
                        )
                workspace = cls(root, secrets.token_urlsafe(24))  # 32 characters
                workspace.path.mkdir()
                workspace.touch()
                if visitor:
                    (workspace.path / VISITOR_FILE).write_text(visitor, encoding="utf-8")
                _note_creation(root, visitor or "")
        except OSError as exc:
            raise LimitReached(f"Your workspace could not be made: {disk_message(exc)}.") from None
        return workspace

    @classmethod
    def open_shared(cls, token: str | None, root: str | Path | None = None) -> Workspace | None:
        """The workspace a share token opens (read-only: the caller must not write), or None."""
        if not token or not isinstance(token, str) or not KEY.fullmatch(token):
            return None
        root = Path(root or environment.workspaces_dir())
        try:
            key = (root / SHARES_DIR / token).read_text(encoding="utf-8").strip()
        except OSError:
            return None
        return cls.open(key, root)

    def revoke_share(self) -> None:
        """Stop sharing: the token opens nothing from now on; the next share makes a new one."""
        marker = self.path / SHARE_FILE
        if marker.is_file():
            token = marker.read_text(encoding="utf-8").strip()
            if KEY.fullmatch(token):
                (self.root / SHARES_DIR / token).unlink(missing_ok=True)
            marker.unlink(missing_ok=True)
        (self.path / SHARE_MODELS_FILE).unlink(missing_ok=True)

    @property
    def shares_models(self) -> bool:
        """May a share link's viewers build and download this workspace's models? Not unless
        its owner said so: a share shows scores, and a model carries what it was trained on."""
        return (self.path / SHARE_MODELS_FILE).is_file() and (self.path / SHARE_FILE).is_file()

    def share_models(self, allowed: bool) -> None:
        """Let a share link's viewers export this workspace's models, or stop letting them."""
        marker = self.path / SHARE_MODELS_FILE
        if allowed:
            marker.write_text("yes", encoding="utf-8")
        else:
            marker.unlink(missing_ok=True)

    def share_token(self) -> str:
        """This workspace's read-only share token (made on first use, the same after, until
        :meth:`revoke_share`)."""
        marker = self.path / SHARE_FILE
        if marker.is_file():
            return marker.read_text(encoding="utf-8").strip()
        token = secrets.token_urlsafe(24)
        shares = self.root / SHARES_DIR
        shares.mkdir(exist_ok=True)
        (shares / token).write_text(self.key, encoding="utf-8")
        marker.write_text(token, encoding="utf-8")
        return token

    @classmethod
    def open(cls, key: str | None, root: str | Path | None = None) -> Workspace | None:
        """The workspace of ``key``, or None when the key is malformed or names none."""
        if not key or not isinstance(key, str) or not KEY.fullmatch(key):
            return None
        workspace = cls(Path(root or environment.workspaces_dir()), key)
        return workspace if workspace.path.is_dir() else None

    @property
    def store(self) -> RunStore:
        return RunStore(self.path / "runs")

    @property
    def uploads_dir(self) -> Path:
        return self.path / "uploads"

    @property
    def session_lock(self) -> Path:
        """Held while one of this workspace's runs trains (or the app scores a file for it):
        a session's work takes turns, one thing at a time (:mod:`glee_core.core.slots`)."""
        return self.path / ".session.lock"

    def touch(self) -> None:
        """Mark it used now (best effort: a full disk must not break a visit)."""
        try:
            (self.path / USED_MARKER).write_text(str(time.time()), encoding="utf-8")
        except OSError:
            pass

    @property
    def last_used(self) -> float:
        marker = self.path / USED_MARKER
        return marker.stat().st_mtime if marker.is_file() else self.path.stat().st_mtime

    def disk_bytes(self) -> int:
        return folder_bytes(self.path)

    # ---- limits -------------------------------------------------------------------------
    def check_upload(self, policy: Policy, size: int) -> None:
        """A file to keep: within the upload limit, and within the workspace's disk."""
        policy.check_upload_size(size)
        self.check_disk(policy, size)

    def check_disk(self, policy: Policy, adding: int = 0) -> None:
        """Within the workspace's limit, and room left on the machine's disk: however many
        workspaces the caps allow (500 x 500 MB is more than a Space's disk), work is accepted
        only while the disk keeps ``FREE_RESERVE`` free besides it."""
        free = shutil.disk_usage(self.root).free
        if free - adding < FREE_RESERVE:
            raise LimitReached(
                f"This Space's disk is nearly full ({size_text(free)} free): it "
                "takes no new uploads or jobs until space is freed (idle "
                "workspaces are deleted after their time); try again later."
            )
        used = self.disk_bytes()
        if used + adding > policy.disk_bytes:
            raise LimitReached(
                f"Your workspace uses {size_text(used)} of its "
                f"{size_text(policy.disk_bytes)}: delete uploads or runs you no "
                "longer need (sidebar, Your workspace) before adding more."
            )

    def check_launch(self, policy: Policy, unfinished: int) -> None:
        """Before a launch: ``unfinished`` is how many of this session's jobs still run or
        wait."""
        allowed = policy.jobs + policy.queued
        if unfinished >= allowed:
            raise LimitReached(
                f"You already have {unfinished} job(s) training or waiting; a "
                f"session may have {policy.jobs} training and {policy.queued} "
                "waiting at once. Wait for one to finish, or stop one."
            )
        self.check_disk(policy)

    # ---- deleting what is yours ---------------------------------------------------------
    def delete_upload(self, name: str) -> None:
        """Delete one of this workspace's uploads (its CSV and column file)."""
        target = self.uploads_dir / Path(str(name)).name
        if not re.fullmatch(r"[A-Za-z0-9_-]+\.csv", target.name) or not target.is_file():
            raise GleeError(f"no upload {name!r} in your workspace")
        target.unlink()
        target.with_suffix(".json").unlink(missing_ok=True)

    def delete_run(self, run_id: str) -> None:
        """Delete one of this workspace's runs."""
        folder = self.store.path(str(run_id))  # refuses an id that could leave the store
        if not (folder / "config.json").is_file():
            raise GleeError(f"no run {run_id!r} in your workspace")
        shutil.rmtree(folder)


def keys_in(root: Path) -> list[str]:
    """The workspace keys under ``root`` (its folders named like a key)."""
    return (
        sorted(p.name for p in root.iterdir() if p.is_dir() and KEY.fullmatch(p.name))
        if root.is_dir()
        else []
    )


FREE_RESERVE = 1 * 2**30  # disk kept free on the machine: new work is refused below it
CREATED_LOG = ".created"  # when workspaces were made (the last minute's, for the rate)
EMPTY_AFTER_SECONDS = 3600.0  # an empty workspace idle this long is reclaimed when full


def _check_rate(root: Path, per_minute: int) -> None:
    recent = [t for t, _ in _creations(root) if time.time() - t < 60]
    if len(recent) >= per_minute:
        raise LimitReached(
            f"This Space has made {per_minute} workspaces in the last minute, its "
            "most: try again in a minute."
        )


def _check_visitor(root: Path, visitor: str, per_visitor: int, per_minute: int | None) -> None:
    """One address's share: at most ``per_visitor`` workspaces held (its empty ones are
    reclaimed first, however recent) and a fifth of ``per_minute`` made a minute."""
    if per_minute is not None:
        mine = [t for t, who in _creations(root) if who == visitor and time.time() - t < 60]
        if len(mine) >= max(1, per_minute // 5):
            raise LimitReached(
                "This address has made several workspaces in the last minute: "
                "try again in a minute (a browser that blocks cookies makes a "
                "new one on every visit)."
            )
    held = [key for key in keys_in(root) if _visitor_of(root / key) == visitor]
    if len(held) >= per_visitor:
        reclaim_empty(root, idle_seconds=0.0, keys=held)
        held = [key for key in held if (root / key).is_dir()]
    if len(held) >= per_visitor:
        raise LimitReached(
            f"This address already holds {len(held)} workspaces on this Space, "
            "its share: allow cookies for this site so your browser keeps one, "
            "or use the workspace you have; idle ones are deleted after their "
            "time."
        )


def _visitor_of(folder: Path) -> str:
    try:
        return (folder / VISITOR_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def _creations(root: Path) -> list[tuple[float, str]]:
    """(when, the visitor's hashed address) of the workspaces made lately (``CREATED_LOG``)."""
    try:
        lines = (root / CREATED_LOG).read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        fields = line.split()
        try:
            out.append((float(fields[0]), fields[1] if len(fields) > 1 else ""))
        except (IndexError, ValueError):
            continue  # a line of another release, or damaged: not a creation
    return out


def _note_creation(root: Path, visitor: str) -> None:
    recent = [(t, who) for t, who in _creations(root) if time.time() - t < 60]
    recent.append((time.time(), visitor))
    write_atomic(root / CREATED_LOG, "".join(f"{t:.3f} {who}\n" for t, who in recent))


def reclaim_empty(
    root: Path, idle_seconds: float = EMPTY_AFTER_SECONDS, keys: list[str] | None = None
) -> list[str]:
    """Delete the workspaces (of ``keys``, default all) that hold nothing (no upload, run, job
    or share: only their use marker and whose they are) and were idle for ``idle_seconds``;
    returns their keys."""
    removed = []
    for key in keys_in(root) if keys is None else keys:
        workspace = Workspace(root, key)
        if not workspace.path.is_dir():
            continue
        held = [p for p in workspace.path.iterdir() if p.name not in (USED_MARKER, VISITOR_FILE)]
        if not held and time.time() - workspace.last_used >= idle_seconds:
            shutil.rmtree(workspace.path, ignore_errors=True)
            removed.append(key)
    return removed


def unfinished_jobs(root: str | Path | None = None, visitor: str | None = None) -> int:
    """Jobs training or waiting in every workspace (the machine's global cap counts them), or
    only those ``visitor`` launched, whatever workspace they launched them from."""
    root = Path(root or environment.workspaces_dir())
    return sum(
        job.running
        for key in keys_in(root)
        for job in list_jobs(Workspace(root, key).store)
        if visitor is None or job.record.visitor == visitor
    )


def check_machine(policy: Policy, visitor: str, root: str | Path | None = None) -> None:
    """The machine's caps under ``policy``: its jobs training or waiting (every visitor's, in the
    workspaces under ``root``), and one visitor's share of them (their own limit, and at most
    half the machine's), however many workspaces they opened."""
    if unfinished_jobs(root) >= policy.max_jobs:
        raise LimitReached(
            f"This Space has {policy.max_jobs} jobs training or waiting, its "
            "most: launch again in a few minutes."
        )
    theirs = unfinished_jobs(root, visitor=visitor)
    fair = min(policy.jobs + policy.queued, max(1, policy.max_jobs // 2))
    if theirs >= fair:
        raise LimitReached(
            f"You already have {theirs} job(s) training or waiting on this "
            f"Space (from this address, in any tab or session); {fair} at "
            "once is your share. Wait for one to finish, or stop one."
        )


@contextmanager
def launch_lock(machine: RunStore):
    """One launch at a time on this machine (a file lock in the owner's store ``machine``: every
    server process, every tab)."""
    machine.locks_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(machine.locks_dir / "launch.lock"), timeout=60):
        yield


def launch_in_workspace(
    own: Workspace,
    policy: Policy,
    request,
    label: str,
    estimate: Estimate,
    launcher: tuple[str, RunStore],
) -> Job:
    """Public mode's launch of ``request`` (any kind of job a visitor may run, estimated at
    ``estimate``) into the visitor's workspace ``own``, within every limit: the backbones
    offered, the session's jobs and disk, the machine's jobs and the visitor's share of them,
    the launch's runs and minutes. ``launcher``: (the visitor, hashed; the machine's owner
    store, which holds the machine's queue). The checks and the launch run under one lock
    (:func:`launch_lock`), so three tabs clicking at once cannot pass the same check before
    one's job is recorded; the same request already running is attached to, not launched
    again. The job queues for the machine's slots (in the owner's store) with every
    workspace's, runs one job of its session at a time, keeps the disk limit while it works,
    and stops when its own pace runs far past the minutes a launch may take
    (``GLEE_JOB_SECONDS``). Raises :class:`LimitReached` (which limit, and what to do) or
    ``OSError``."""
    visitor, machine = launcher
    kind = kind_of(request)
    if not kind.public:
        raise LimitReached(f"{kind.title} is switched off on this deployment.")
    if getattr(request, "model", None) is not None:
        policy.check_model(request.model)
    env = {
        "GLEE_SLOTS_DIR": str(machine.locks_dir),
        "GLEE_SESSION_SLOT": str(own.session_lock),
        "GLEE_QUOTA_DIR": str(own.path),
        "GLEE_QUOTA_MB": str(policy.disk_bytes / 2**20),
        "GLEE_JOB_SECONDS": str(policy.job_seconds),
        "GLEE_JOB_STOP": str(estimate.stop or ""),
        "GLEE_POOL_TEXTS": str(policy.score_rows),
    }
    with launch_lock(machine):
        running = running_job(own.store, request)
        if running is not None:
            running.attached = True
            return running
        mine = [job for job in list_jobs(own.store) if job.running]
        own.check_launch(policy, len(mine))
        check_machine(policy, visitor, own.root)
        policy.check_job(
            kind.planned_runs(request),
            estimate.seconds,
            sum(job.record.estimate.seconds for job in mine if job.record.estimate),
        )
        return launch(own.store, request, label, estimate, Visitor(visitor, env))


def expire(
    root: str | Path | None = None,
    ttl_seconds: float = Policy.ttl_seconds,
    now: float | None = None,
) -> list[str]:
    """Delete workspaces idle for longer than ``ttl_seconds`` (those with a job still running
    wait for it), and their share tokens; returns the keys removed."""
    root = Path(root or environment.workspaces_dir())
    now = time.time() if now is None else now
    removed = []
    for key in keys_in(root):
        workspace = Workspace(root, key)
        if now - workspace.last_used <= ttl_seconds:
            continue
        if any(job.running for job in list_jobs(workspace.store)):
            continue
        token = workspace.path / SHARE_FILE
        if token.is_file():
            (root / SHARES_DIR / token.read_text(encoding="utf-8").strip()).unlink(missing_ok=True)
        shutil.rmtree(workspace.path, ignore_errors=True)
        removed.append(workspace.key)
    return removed
