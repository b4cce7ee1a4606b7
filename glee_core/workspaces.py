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

Training is switched off entirely with ``GLEE_READ_ONLY`` (a showcase of shipped runs); the
command line ignores both switches: it is the owner's.
"""

from __future__ import annotations

import re
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from . import environment
from .errors import GleeError
from .jobs import list_jobs
from .store import RunStore

KEY = re.compile(r"^[A-Za-z0-9_-]{32}$")
USED_MARKER = ".last-used"


class LimitReached(GleeError):
    """A per-session limit refused a launch or an upload (the message says which and why)."""


@dataclass(frozen=True)
class Policy:
    """What a deployment allows: public mode, read-only, and the per-session limits."""

    public: bool = False
    read_only: bool = False
    jobs: int = 1  # training at once per session
    queued: int = 2  # waiting besides those
    upload_bytes: int = 10 * 2**20
    disk_bytes: int = 500 * 2**20
    ttl_seconds: float = 24 * 3600.0
    models: tuple[str, ...] = ()  # backbones a visitor may pick (public mode)

    @classmethod
    def from_environment(cls) -> Policy:
        """The fields' defaults, with what the environment sets (``GLEE_SESSION_*``, in the
        units people write: MB, hours)."""
        given = {field: type(getattr(cls, field))(value * unit)
                 for key, value in environment.session_limits().items()
                 for field, unit in [LIMIT_FIELDS[key]]}
        return cls(public=environment.public(), read_only=environment.read_only(),
                   models=tuple(environment.public_models()), **given)

    def check_upload_size(self, size: int) -> None:
        """Any file a visitor sends (kept or only read): within the upload limit."""
        if size > self.upload_bytes:
            raise LimitReached(f"This file is {size_text(size)}; uploads here are limited to "
                               f"{size_text(self.upload_bytes)}. Upload a sample of it, or "
                               "run Glee Studio on your own machine for larger data.")

    @property
    def ttl_text(self) -> str:
        hours = self.ttl_seconds / 3600
        return f"{hours:g} hour{'s' if hours != 1 else ''}"


# environment.session_limits() key -> (Policy field, unit)
LIMIT_FIELDS = {"jobs": ("jobs", 1), "queued": ("queued", 1), "upload_mb": ("upload_bytes", 2**20),
                "disk_mb": ("disk_bytes", 2**20), "ttl_hours": ("ttl_seconds", 3600)}


def size_text(n: float) -> str:
    """``10 MB``, ``512 KB``, ``104 bytes``: a size as the limits' messages say it."""
    if n >= 2**20:
        return f"{n / 2**20:.3g} MB"
    return f"{n / 2**10:.3g} KB" if n >= 2**10 else f"{int(n)} bytes"


def _folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else 0


class Workspace:
    """One browser session's uploads, runs and jobs."""

    def __init__(self, root: Path, key: str):
        if not KEY.match(key):
            raise GleeError("not a workspace key")
        self.root = Path(root).resolve()
        self.key = key
        self.path = self.root / key
        if self.path.resolve().parent != self.root:  # cannot happen with KEY; belt and braces
            raise GleeError("not a workspace key")

    @classmethod
    def create(cls, root: str | Path | None = None) -> Workspace:
        """A new workspace with a fresh unguessable key."""
        root = Path(root or environment.workspaces_dir())
        root.mkdir(parents=True, exist_ok=True)
        workspace = cls(root, secrets.token_urlsafe(24))  # 32 characters
        workspace.path.mkdir()
        workspace.touch()
        return workspace

    @classmethod
    def open(cls, key: str | None, root: str | Path | None = None) -> Workspace | None:
        """The workspace of ``key``, or None when the key is malformed or names none."""
        if not key or not isinstance(key, str) or not KEY.match(key):
            return None
        workspace = cls(Path(root or environment.workspaces_dir()), key)
        return workspace if workspace.path.is_dir() else None

    @property
    def store(self) -> RunStore:
        return RunStore(self.path / "runs")

    @property
    def uploads_dir(self) -> Path:
        return self.path / "uploads"

    def touch(self) -> None:
        (self.path / USED_MARKER).write_text(str(time.time()), encoding="utf-8")

    @property
    def last_used(self) -> float:
        marker = self.path / USED_MARKER
        return marker.stat().st_mtime if marker.is_file() else self.path.stat().st_mtime

    def disk_bytes(self) -> int:
        return _folder_bytes(self.path)

    # ---- limits -------------------------------------------------------------------------
    def check_upload(self, policy: Policy, size: int) -> None:
        """A file to keep: within the upload limit, and within the workspace's disk."""
        policy.check_upload_size(size)
        self.check_disk(policy, size)

    def check_disk(self, policy: Policy, adding: int = 0) -> None:
        used = self.disk_bytes()
        if used + adding > policy.disk_bytes:
            raise LimitReached(f"Your workspace uses {size_text(used)} of its "
                               f"{size_text(policy.disk_bytes)}: delete uploads or runs you no "
                               "longer need (sidebar, Your workspace) before adding more.")

    def check_launch(self, policy: Policy, unfinished: int) -> None:
        """Before a launch: ``unfinished`` is how many of this session's jobs still run or
        wait."""
        allowed = policy.jobs + policy.queued
        if unfinished >= allowed:
            raise LimitReached(f"You already have {unfinished} job(s) training or waiting; a "
                               f"session may have {policy.jobs} training and {policy.queued} "
                               "waiting at once. Wait for one to finish, or stop one.")
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


def expire(root: str | Path | None = None, ttl_seconds: float = Policy.ttl_seconds,
           now: float | None = None) -> list[str]:
    """Delete workspaces idle for longer than ``ttl_seconds`` (those with a job still running
    wait for it); returns the keys removed."""
    root = Path(root or environment.workspaces_dir())
    now = time.time() if now is None else now
    removed = []
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        workspace = Workspace.open(path.name, root)
        if workspace is None or now - workspace.last_used <= ttl_seconds:
            continue
        if any(job.running for job in list_jobs(workspace.store)):
            continue
        shutil.rmtree(workspace.path, ignore_errors=True)
        removed.append(workspace.key)
    return removed
