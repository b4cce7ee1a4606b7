"""What a deployment allows (public mode's and read-only's switches, and the limits per session,
per launch and on the machine), read from the environment once: :class:`Policy`; and the error
a limit raises (:class:`LimitReached`, its message saying which limit and what to do). The
workspaces that hold a visitor's work under it are :mod:`glee_core.serve.workspaces`'."""

from __future__ import annotations

from dataclasses import dataclass

from ..core import environment
from ..core.errors import GleeError
from ..core.files import size_text


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
    job_runs: int = 40  # runs one launch may queue (a quick compare of 19 heads x 2 seeds fits)
    job_seconds: float = 30 * 60.0  # estimated wall time of one launch
    session_seconds: float = 60 * 60.0  # estimated time of a session's unfinished jobs together
    max_jobs: int = 8  # jobs training or waiting on the machine, every session together
    max_workspaces: int = 500  # workspaces on the machine (expired, then empty ones go first)
    workspaces_per_minute: int = 30  # made on the machine a minute (a script cannot fill it)
    visitor_workspaces: int = 10  # held by one address (at most a quarter of max_workspaces)
    score_rows: int = 2000  # texts a file may give: the Playground's to classify, a pool
    upload_classes: int = 2000  # classes one upload may have (per-class charts, splitting)
    models: tuple[str, ...] = ()  # backbones a visitor may pick (public mode)

    @classmethod
    def from_environment(cls) -> Policy:
        """The fields' defaults, with what the environment sets (``GLEE_SESSION_*``, in the
        units people write: MB, hours)."""
        given = {
            field: type(getattr(cls, field))(value * unit)
            for key, value in environment.session_limits().items()
            for field, unit in [LIMIT_FIELDS[key]]
        }
        return cls(
            public=environment.public(),
            read_only=environment.read_only(),
            models=tuple(environment.public_models()),
            **given,
        )

    def check_upload_size(self, size: int) -> None:
        """Any file a visitor sends (kept or only read): within the upload limit."""
        if size > self.upload_bytes:
            raise LimitReached(
                f"This file is {size_text(size)}; uploads here are limited to "
                f"{size_text(self.upload_bytes)}. Upload a sample of it, or "
                "run Glee Studio on your own machine for larger data."
            )

    def check_job(self, runs: int, seconds: float, session_seconds: float = 0.0) -> None:
        """One launch: at most ``job_runs`` runs and ``job_seconds`` of estimated time, and with
        the session's unfinished jobs (``session_seconds`` of them) within ``session_seconds``."""
        if runs > self.job_runs:
            raise LimitReached(
                f"This launch plans {runs} runs; a launch here may plan at most "
                f"{self.job_runs}. Choose fewer methods or seeds."
            )
        if seconds > self.job_seconds:
            raise LimitReached(
                f"This launch is estimated at {minutes_text(seconds)}; a launch "
                f"here may take at most {minutes_text(self.job_seconds)}. Make it smaller "
                "(training: fewer methods, seeds or epochs, or a training limit; a report or "
                "suggestions: a smaller file), or run Glee Studio on your own machine."
            )
        if session_seconds + seconds > self.session_seconds:
            raise LimitReached(
                f"Your jobs still to run are estimated at "
                f"{minutes_text(session_seconds)}; with this launch that is over "
                f"this Space's {minutes_text(self.session_seconds)} per visitor. "
                "Wait for them to finish, or stop one."
            )

    def check_model(self, model: str) -> None:
        """A backbone a visitor may train (public mode offers a few)."""
        if model not in self.models:
            raise LimitReached(
                f"Backbone {model} is not offered here; choose one of {', '.join(self.models)}."
            )

    @property
    def visitor_share(self) -> int:
        """The workspaces one address may hold: its own limit, and at most a quarter of the
        machine's (a client that drops its cookie cannot fill it)."""
        return max(1, min(self.visitor_workspaces, self.max_workspaces // 4))

    @property
    def ttl_text(self) -> str:
        hours = self.ttl_seconds / 3600
        return f"{hours:g} hour{'s' if hours != 1 else ''}"


# environment.session_limits() key -> (Policy field, unit)
LIMIT_FIELDS = {
    "jobs": ("jobs", 1),
    "queued": ("queued", 1),
    "upload_mb": ("upload_bytes", 2**20),
    "disk_mb": ("disk_bytes", 2**20),
    "ttl_hours": ("ttl_seconds", 3600),
    "job_runs": ("job_runs", 1),
    "job_minutes": ("job_seconds", 60),
    "session_minutes": ("session_seconds", 60),
    "max_jobs": ("max_jobs", 1),
    "max_workspaces": ("max_workspaces", 1),
    "score_rows": ("score_rows", 1),
    "workspaces_per_minute": ("workspaces_per_minute", 1),
    "visitor_workspaces": ("visitor_workspaces", 1),
    "upload_classes": ("upload_classes", 1),
}


def minutes_text(seconds: float) -> str:
    """``40 s``, ``45 min``, ``2.5 h``: an estimated time as the limits' messages say it (a
    limit of 0.3 s said "at most 0 min")."""
    minutes = seconds / 60
    if seconds < 90:
        return f"{seconds:.0f} s" if seconds >= 1 else f"{seconds:.1f} s"
    return f"{minutes:.0f} min" if minutes < 90 else f"{minutes / 60:.1f} h"
