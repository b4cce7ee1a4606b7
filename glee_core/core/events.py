"""Progress events: what a launch reports while it works, one typed record per kind.

The trainer and the experiment loop emit these; ``core.progress.ProgressState`` folds them into
where the work stands (run i of n, phase, epoch, step, dev score, fraction done). The command
line's progress bar and the app's job view both read that one state. A launch from the app
writes the events as JSON lines (:class:`ProgressLog`), which :func:`read_events` turns back into
events.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import ClassVar


@dataclass
class Event:
    stage: ClassVar[str] = ""

    def to_dict(self) -> dict:
        return {"stage": self.stage, **asdict(self)}


@dataclass
class RunStarted(Event):
    """A planned run begins: trained, or loaded from the store (``cached``); ``together``: it
    is the first of that many heads trained in one loop (the quick compare's pack); ``after``:
    the share of the launch's work that follows its runs (cross-validation of the heads)."""

    stage: ClassVar[str] = "run"
    run_id: str
    method: str
    seed: int
    index: int
    total: int
    cached: bool
    together: int = 1
    after: float = 0.0
    race: bool = False  # the ``together`` heads race (fine-tuning): the best one is stored


@dataclass
class Note(Event):
    """Something the user should read about the results (a vocabulary that misses the data ...)."""

    stage: ClassVar[str] = "note"
    message: str


@dataclass
class Queued(Event):
    """Every training slot of the store is taken: this run waits (``behind``: what holds the
    slots, with its time left, where the store's jobs say)."""

    stage: ClassVar[str] = "queued"
    run_id: str
    behind: str = ""


@dataclass
class WaitingForRun(Event):
    """Another launch holds this run's lock (it is training the same configuration): this one
    waits, then loads what it stored."""

    stage: ClassVar[str] = "waiting"
    run_id: str


@dataclass
class Loading(Event):
    """Loading the backbone or encoding the data: said before work that takes seconds;
    ``lp_ft``: LP-FT's stage of a run begins (its head fitted on the frozen features)."""

    stage: ClassVar[str] = "loading"
    what: str
    lp_ft: bool = False


@dataclass
class FeaturePass(Event):
    """Quick mode: the frozen backbone encodes ``done`` of ``total`` examples of one format, the
    ``part``-th of the ``parts`` formats the run (or the pack of heads trained together) needs."""

    stage: ClassVar[str] = "features"
    format: str
    done: int
    total: int
    part: int = 1
    parts: int = 1


@dataclass
class TrainStep(Event):
    """An optimizer step of a trial: its epoch and step in the epoch; ``done`` of ``total``:
    the run's steps so far and planned, every trial of its learning-rate search counted (0: a
    trainer that does not count them)."""

    stage: ClassVar[str] = "train"
    epoch: int
    epochs: int
    step: int
    steps: int
    loss: float | None = None  # the running mean, read back every few steps only
    done: int = 0
    total: int = 0


@dataclass
class Searching(Event):
    """The learning-rate search trains ``candidate`` of ``candidates`` (rate ``lr``) for one
    round of successive halving on dev; ``chosen``: the search is over and ``lr`` trains on."""

    stage: ClassVar[str] = "search"
    lr: float
    candidate: int = 1
    candidates: int = 1
    round: int = 0
    rounds: int = 0
    chosen: bool = False
    head: str = ""  # a race of heads at one rate: the head this round trains


@dataclass
class CrossValidating(Event):
    """Quick mode on a small dev split: the ``heads`` of a seed (the ``part``-th of ``parts``)
    retrained on train + dev but fold ``fold`` of ``folds``, to choose among them on held-out
    texts (:mod:`glee_core.train.selection`)."""

    stage: ClassVar[str] = "cv"
    fold: int
    folds: int
    heads: int
    part: int = 1  # the seed's heads being validated, of ``parts`` (one a seed)
    parts: int = 1
    finished: bool = False  # the fold is done (the seed's last: its cross-validation is)


@dataclass
class Evaluated(Event):
    """The dev split was scored after an epoch."""

    stage: ClassVar[str] = "eval"
    epoch: int
    epochs: int
    dev_f1: float
    dev_acc: float
    best_dev: float
    select_metric: str


@dataclass
class Testing(Event):
    stage: ClassVar[str] = "test"


@dataclass
class SweepProgress(Event):
    """A sweep in other processes (Ray tasks, or the workers of ``--runs-at-once``): one run
    ended (``error`` empty when it landed in the store); ``done`` and ``failed`` count the ended
    runs of ``total`` submitted."""

    stage: ClassVar[str] = "sweep"
    run_id: str
    done: int
    failed: int
    total: int
    error: str = ""


@dataclass
class Examining(Event):
    """Data health or the label budget (``python -m glee_core health``, ``budget``): step
    ``step`` of ``steps`` of ``task``, doing ``what``."""

    stage: ClassVar[str] = "health"
    step: int
    steps: int
    what: str
    task: str = "data health"


@dataclass
class Working(Event):
    """A job without runs or steps of its own (the PDF report, an export) is ``share`` done,
    doing ``what``."""

    stage: ClassVar[str] = "work"
    what: str
    share: float = 0.0
    task: str = ""


EVENT_TYPES: dict[str, type[Event]] = {
    cls.stage: cls
    for cls in (
        RunStarted,
        Note,
        Queued,
        WaitingForRun,
        Loading,
        FeaturePass,
        Searching,
        TrainStep,
        Evaluated,
        Testing,
        SweepProgress,
        CrossValidating,
        Examining,
        Working,
    )
}

ProgressFn = Callable[[Event], None]


def event_from_dict(values: dict) -> Event | None:
    """The event a JSON line holds; None for an unknown stage (a newer writer's)."""
    cls = EVENT_TYPES.get(values.get("stage", ""))
    if cls is None:
        return None
    known = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in known})


class ProgressLog:
    """Appends events to a JSON-lines file (what the app's job view reads), passing each on to
    ``inner``. Training steps and feature batches are written at most twice a second, the last of
    a pass always."""

    def __init__(
        self, path: str | Path, inner: ProgressFn | None = None, min_interval: float = 0.5
    ):
        self.path, self.inner, self.min_interval, self.last = Path(path), inner, min_interval, 0.0

    def __call__(self, event: Event) -> None:
        if self.inner:
            self.inner(event)
        now = time.monotonic()
        frequent = isinstance(event, (TrainStep, FeaturePass))
        last_of_pass = (isinstance(event, TrainStep) and event.step == event.steps) or (
            isinstance(event, FeaturePass) and event.done == event.total
        )
        if frequent and not last_of_pass and now - self.last < self.min_interval:
            return
        self.last = now
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(event.to_dict()) + "\n")


def read_events(path: str | Path) -> list[Event]:
    """The events a :class:`ProgressLog` wrote so far (a torn last line is skipped)."""
    path = Path(path)
    if not path.is_file():
        return []
    events = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            event = event_from_dict(json.loads(line))
        except (json.JSONDecodeError, TypeError):
            continue
        if event is not None:
            events.append(event)
    return events
