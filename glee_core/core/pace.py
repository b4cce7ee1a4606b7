"""A job's pace against its estimate: the time left its bar shows (:func:`time_left`: the launch
estimate at first, then the job's own pace) and the guard that stops a public launch whose own
pace runs far past the time a launch may take (:class:`PaceGuard`). The events they read are
:mod:`glee_core.core.events`'."""

from __future__ import annotations

import time

from .errors import GleeError
from .events import (
    Event,
    Examining,
    FeaturePass,
    ProgressFn,
    Queued,
    TrainStep,
    WaitingForRun,
    Working,
)
from .progress import ProgressState

WORK_EVENTS = (TrainStep, FeaturePass, Examining, Working)  # what a job's pace is timed on


TRUST_PROGRESS = 0.25  # from this share done on, the time left is the progress's own


def time_left(fraction: float, elapsed: float, estimate: float | None = None) -> float | None:
    """Seconds left of a job ``fraction`` done after ``elapsed`` seconds: from its launch
    estimate at first (``estimate - elapsed``), then more and more from its own pace
    (``elapsed * (1 - fraction) / fraction``, from 5% done), wholly so from
    :data:`TRUST_PROGRESS` on, or from 1% done once that pace gives over three times the
    estimate after a quarter of it has passed (a 12-hour job estimated at 23 min says hours
    after 7 min, not after 36); None when neither says anything yet (no estimate, under 5%
    done)."""
    paced = elapsed * (1 - fraction) / fraction if fraction >= 0.01 else None
    planned = max(estimate - elapsed, 0.0) if estimate else None
    if planned is None:
        return paced if fraction >= 0.05 else None
    if paced is None:
        return planned
    if elapsed / fraction > 3 * estimate and elapsed > estimate / 4:
        return paced  # the estimate is far out, and the pace has outgrown its start-up
    if fraction < 0.05:
        return planned
    weight = min(1.0, fraction / TRUST_PROGRESS)
    return weight * paced + (1 - weight) * planned


PACE_SLACK = 2.0  # a job's own pace may give this many times its launch limit before it stops
PACE_KNOWN_AFTER = 30.0  # seconds of training before its pace is trusted to refuse it


class PaceGuard:
    """Stops a launch whose own pace, once known, runs far past the time it may take
    (``limit`` seconds: a public machine's minutes a launch, ``GLEE_JOB_SECONDS``): the launch
    estimate can miss (LoRA of rank 512 at batch 1 was estimated at 23 min and paced at 12 h),
    so after :data:`PACE_KNOWN_AFTER` seconds of work (training steps, or the frozen backbone's
    feature pass, a data report's steps, a PDF's parts) the time the launch's share done
    (:meth:`ProgressState.share`, early stopping expected at ``stop``) took is the estimate
    that counts, and past :data:`PACE_SLACK` times the limit the job ends with one line saying
    why. The pace is timed from the first such event, and again after a wait for the machine (a
    queue is not the job's pace). Passes every event on to ``inner`` first."""

    def __init__(
        self, limit: float, inner: ProgressFn, stop: float | None = None, clock=time.monotonic
    ):
        self.limit, self.inner, self.stop, self.clock = limit, inner, stop, clock
        self.state, self.checked = ProgressState(), 0.0
        self.anchor: tuple[float, float] | None = None  # (time, share) the pace is timed from

    def __call__(self, event: Event) -> None:
        self.inner(event)
        self.state.apply(event)
        if isinstance(event, Queued | WaitingForRun):
            self.anchor = None
        now = self.clock()
        if not isinstance(event, WORK_EVENTS) or now - self.checked < 1.0:
            return
        self.checked = now
        share = self.state.share(self.stop)
        if self.anchor is None:
            self.anchor = (now, share)
            return
        seconds, done = now - self.anchor[0], share - self.anchor[1]
        if seconds < PACE_KNOWN_AFTER or done <= 0:
            return
        paced = seconds / done
        if paced > PACE_SLACK * self.limit:
            raise GleeError(
                f"stopped: at its own pace this launch would take about {_hours(paced)}, over "
                f"the {_hours(self.limit)} a launch may take here; launch fewer epochs, runs or "
                "seeds, a larger batch size or a shorter max length"
            )


def _hours(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"
