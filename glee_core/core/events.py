"""Progress events: what a launch reports while it works, one typed record per kind.

The trainer and the experiment loop emit these; :class:`ProgressState` folds them into where the
work stands (run i of n, phase, epoch, step, dev score, fraction done). The command line's
progress bar and the app's job view both read that one state. A launch from the app writes the
events as JSON lines (:class:`ProgressLog`), which :func:`read_events` turns back into events.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import ClassVar

__all__ = [  # what this module offers
    "CrossValidating",
    "EARLY_STOP_TRUST",
    "ENCODING_SHARE",
    "EVENT_TYPES",
    "Evaluated",
    "Event",
    "Examining",
    "FeaturePass",
    "Loading",
    "Note",
    "ProgressFn",
    "ProgressLog",
    "ProgressState",
    "Queued",
    "RunStarted",
    "Searching",
    "SweepProgress",
    "Testing",
    "TrainStep",
    "UNRUN_PHASES",
    "WaitingForRun",
    "Working",
    "event_from_dict",
    "expected_share",
    "fold",
    "read_events",
]


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


# The share of a frozen run's time (or a pack's) its feature passes take, for the overall
# fraction: the middle of what the demo's quick compare measured on a CPU (BENCHMARKS.md,
# "Quick mode"); less on a GPU.
ENCODING_SHARE = 0.6
# the phases whose share a job without runs (adapt, a data report, the PDF, an export) counts
UNRUN_PHASES = ("training", "encoding", "examining", "working")


@dataclass
class ProgressState:
    """Where a launch stands, folded from its events by :meth:`apply`."""

    run: int = 0
    runs: int = 0
    method: str = ""
    seed: int | None = None
    cached: bool = False
    together: int = 1  # heads trained in one loop from this run on
    race: bool = False  # ... or racing, the best stored
    after: float = 0.0  # the share of the launch that follows its runs (cross-validation)
    fold: int = 0  # cross-validation: the fold being trained (1-based), of ``folds``
    folds: int = 0
    cv_part: int = 0  # cross-validation: the seed's folds being trained, of ``cv_parts``
    cv_parts: int = 0
    fold_finished: bool = False
    phase: str = "starting"  # starting, loading, encoding, queued, waiting, training, testing,
    # sweep; a job without runs: examining (a data report's steps), working (a share of it)
    detail: str = ""  # what loading/encoding is doing
    search: str = ""  # the learning-rate search's trial being trained, while it lasts
    epoch: int = 0
    epochs: int = 0
    step: int = 0
    steps: int = 0
    run_done: int = 0  # the run's optimizer steps so far, every trial's, of ``run_total``
    run_total: int = 0
    loss: float | None = None
    dev_f1: float | None = None
    dev_acc: float | None = None
    best_dev: float | None = None
    select_metric: str = "f1"
    encoded: float = 0.0  # the share of the run the feature passes have done (fraction)
    done: int = 0
    total: int = 0
    failed: int = 0  # sweeps: runs that raised
    notes: list[str] = field(default_factory=list)
    staging: bool = False  # LP-FT's stage of the run: its head on the frozen features
    task: str = ""  # a job without runs: what it is (data health, the PDF report, ...)
    worked: float = 0.0  # ... and the share of it done after its feature pass, if any

    def apply(self, event: Event) -> ProgressState:
        if isinstance(event, RunStarted):
            fresh = ProgressState(
                run=event.index,
                runs=event.total,
                method=event.method,
                seed=event.seed,
                cached=event.cached,
                together=event.together,
                after=event.after,
                race=event.race,
                notes=self.notes,
            )
            self.__dict__.update(fresh.__dict__)  # a new run: nothing of the last one carries
        elif isinstance(event, Note):
            self.notes.append(event.message)
        elif isinstance(event, Loading):
            self.phase, self.detail = "loading", event.what
            self.staging = event.lp_ft
        elif isinstance(event, Queued):
            self.phase = "queued"
        elif isinstance(event, WaitingForRun):
            self.phase, self.detail = (
                "waiting",
                (f"another launch is training {event.run_id}; this one loads it once it is stored"),
            )
        elif isinstance(event, FeaturePass):
            self.phase, self.detail = (
                "encoding",
                f"{event.format} input"
                + (f", pass {event.part}/{event.parts}" if event.parts > 1 else ""),
            )
            self.done, self.total = event.done, event.total
            self.encoded = (
                ENCODING_SHARE
                * (event.part - 1 + event.done / max(event.total, 1))
                / max(event.parts, 1)
            )
        elif isinstance(event, Searching):
            if not event.chosen:  # another trial: the last one's dev score is not its own
                self.dev_f1 = self.dev_acc = None
            self.search = (
                f"lr {event.lr:g} chosen on dev"
                if event.chosen
                else f"race {event.candidate}/{event.candidates} ({event.head}, lr "
                f"{event.lr:g}), round {event.round}/{event.rounds}"
                if event.head
                else f"lr search {event.candidate}/{event.candidates} "
                f"({event.lr:g}), round {event.round}/{event.rounds}"
            )
        elif isinstance(event, TrainStep):
            self.phase = "training"
            self.epoch, self.epochs, self.step, self.steps = (
                event.epoch,
                event.epochs,
                event.step,
                event.steps,
            )
            self.run_done, self.run_total = event.done, event.total
            if event.loss is not None:
                self.loss = event.loss
        elif isinstance(event, Evaluated):
            self.dev_f1, self.dev_acc = event.dev_f1, event.dev_acc
            self.best_dev, self.select_metric = event.best_dev, event.select_metric
        elif isinstance(event, Testing):  # LP-FT's stage ends so: fine-tuning starts afresh
            self.phase = "loading" if self.staging else "testing"
            self.search, self.encoded, self.staging = "", 0.0, False
        elif isinstance(event, CrossValidating):
            self.phase, self.fold, self.folds = "validating", event.fold, event.folds
            self.cv_part, self.cv_parts = event.part, event.parts
            self.fold_finished = event.finished
            self.together, self.method, self.dev_f1 = event.heads, "", None
            self.detail = (
                f"choosing among {event.heads} heads: {event.folds}-fold "
                f"cross-validation on train + dev"
                + (f", seed {event.part}/{event.parts}" if event.parts > 1 else "")
                + f", fold {event.fold}/{event.folds}"
            )
        elif isinstance(event, Examining):  # a data report's step: after its feature pass
            self.phase, self.detail, self.task = "examining", event.what, event.task
            self.step, self.steps = event.step, event.steps
            self.worked = (event.step - 1) / max(event.steps, 1)
        elif isinstance(event, Working):
            self.phase, self.detail, self.task = "working", event.what, event.task
            self.worked = min(max(event.share, 0.0), 1.0)
        elif isinstance(event, SweepProgress):
            self.phase, self.run, self.runs = "sweep", event.done + event.failed, event.total
            self.done, self.total, self.failed = event.done, event.total, event.failed
            self.detail = (
                f"{event.run_id} failed: {event.error}" if event.error else f"{event.run_id} landed"
            )
        return self

    @property
    def fraction(self) -> float:
        """Overall completion in [0, 1] by planned steps (:meth:`share`)."""
        return self.share()

    def share(self, stop: float | None = None) -> float:
        """Overall completion in [0, 1]: finished runs plus the share of the current one (LP-FT's
        stage, seconds before the fine-tuning's hour, counts as none of it). ``stop``: the share
        of its planned steps a run is expected to end at by early stopping (the launch
        estimate's), so a run's steps count toward the time it is expected to take
        (:func:`expected_share`), not the steps it plans and seldom trains."""
        if self.phase == "sweep" and self.runs:
            return self.run / self.runs
        if self.phase == "validating" and self.folds and self.cv_parts:
            folds_done = self.fold - (not self.fold_finished)
            done = (self.cv_part - 1 + folds_done / self.folds) / self.cv_parts
            return min(1.0, 1 - self.after + self.after * done)
        within = self.encoded  # training picks up where the feature passes left it
        if self.staging:
            within = 0.0
        elif self.phase == "training" and self.run_total:  # every trial of the search counted
            within += (1 - self.encoded) * expected_share(self.run_done / self.run_total, stop)
        elif self.phase == "training" and self.steps and self.epochs:
            within += (1 - self.encoded) * expected_share(
                ((self.epoch - 1) * self.steps + self.step) / (self.epochs * self.steps), stop
            )
        elif self.phase == "testing":
            within = 1.0
        elif self.phase == "examining":  # a data report: its feature pass (if any), its steps
            within = self.encoded + (1 - ENCODING_SHARE if self.encoded else 1.0) * self.worked
        elif self.phase == "working":
            within = self.worked
        if not self.run or not self.runs:  # a job of one pass without runs (adapt), or none yet
            return min(1.0, within) if self.phase in UNRUN_PHASES else 0.0
        return min(1.0, (self.run - 1 + within * self.together) / self.runs) * (1 - self.after)

    def describe(self) -> str:
        """One line for a person: ``run 2/6: prompt seed 1 · epoch 3/10 · step 5/40 · dev F1
        0.512``."""
        if self.phase == "sweep":
            return (
                f"sweep: {self.run}/{self.runs} runs ended, {self.failed} failed · "
                f"last: {self.detail}"
            )
        if self.phase == "validating":
            return self.detail
        if self.phase == "examining":
            return f"{self.task}: step {self.step}/{self.steps}, {self.detail}"
        if self.phase == "working":
            return f"{self.task}: {self.detail}" if self.task else self.detail
        if not self.run and self.phase == "encoding":
            return f"encoding the texts: {self.done} of {self.total} ({self.detail})"
        if not self.run and self.phase != "training":
            return f"{self.phase}: {self.detail}" if self.detail else "starting ..."
        text = (
            f"run {self.run}/{self.runs}: {self.method} seed {self.seed}"
            if self.run
            else "masked-LM training"
        )  # a job of one pass without runs (adapt)
        if self.together > 1:
            text = f"runs {self.run}-{self.run + self.together - 1}/{self.runs}: " + (
                f"the best of {self.together} heads (a race on dev)"
                if self.race
                else f"{self.together} heads trained together"
            )
        if self.cached:
            return text + " · loaded from the store"
        if self.phase == "training":
            text += f" · {self.search}" if self.search else ""
            text += f" · epoch {self.epoch}/{self.epochs} · step {self.step}/{self.steps}"
        elif self.phase in ("loading", "encoding"):
            text += f" · {self.phase} {self.detail}".rstrip()
        elif self.phase == "waiting":
            text += f" · {self.detail}"
        elif self.phase in ("queued", "testing"):
            text += f" · {self.phase}"
        if self.dev_f1 is not None:
            text += f" · dev F1 {self.dev_f1:.3f}"
        return text


EARLY_STOP_TRUST = 0.8  # up to this share of a run's expected time, planned steps / stop say it


def expected_share(planned: float, stop: float | None) -> float:
    """The share of a run's expected time done after ``planned`` of its planned steps, when
    early stopping is expected to end it at ``stop`` of them: ``planned / stop`` up to
    :data:`EARLY_STOP_TRUST` of the way, then the rest spread over the steps left to plan's end
    (a run that trains on past ``stop`` still nears the end, never passes it)."""
    planned = min(max(planned, 0.0), 1.0)
    if not stop or stop >= 1.0:
        return planned
    knee = EARLY_STOP_TRUST * stop
    if planned <= knee:
        return planned / stop
    return EARLY_STOP_TRUST + (1 - EARLY_STOP_TRUST) * (planned - knee) / (1 - knee)


def fold(events) -> ProgressState:
    """The state after ``events``."""
    state = ProgressState()
    for event in events:
        state.apply(event)
    return state


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
