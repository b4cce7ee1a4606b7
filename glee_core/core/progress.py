"""Where a launch stands: :class:`ProgressState` folds its events (``core.events``) into run i of
n, phase, epoch, step, dev score and the share done (early stopping's expected share counted).
The command line's bar and the app's job view read this one state."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import singledispatchmethod

from .events import (
    CrossValidating,
    Evaluated,
    Event,
    Examining,
    FeaturePass,
    Loading,
    Note,
    Queued,
    RunStarted,
    Searching,
    SweepProgress,
    Testing,
    TrainStep,
    WaitingForRun,
    Working,
)

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

    @singledispatchmethod
    def apply(self, event: Event) -> ProgressState:
        """The state after ``event`` (an event kind's handler below; one without: no change)."""
        return self

    @apply.register(RunStarted)
    def _(self, event: RunStarted) -> ProgressState:
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
        return self

    @apply.register(Note)
    def _(self, event: Note) -> ProgressState:
        self.notes.append(event.message)
        return self

    @apply.register(Loading)
    def _(self, event: Loading) -> ProgressState:
        self.phase, self.detail = "loading", event.what
        self.staging = event.lp_ft
        return self

    @apply.register(Queued)
    def _(self, event: Queued) -> ProgressState:
        self.phase = "queued"
        return self

    @apply.register(WaitingForRun)
    def _(self, event: WaitingForRun) -> ProgressState:
        self.phase = "waiting"
        self.detail = f"another launch is training {event.run_id}; this one loads it once stored"
        return self

    @apply.register(FeaturePass)
    def _(self, event: FeaturePass) -> ProgressState:
        self.phase = "encoding"
        self.detail = f"{event.format} input" + (
            f", pass {event.part}/{event.parts}" if event.parts > 1 else ""
        )
        self.done, self.total = event.done, event.total
        passes = event.part - 1 + event.done / max(event.total, 1)
        self.encoded = ENCODING_SHARE * passes / max(event.parts, 1)
        return self

    @apply.register(Searching)
    def _(self, event: Searching) -> ProgressState:
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
        return self

    @apply.register(TrainStep)
    def _(self, event: TrainStep) -> ProgressState:
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
        return self

    @apply.register(Evaluated)
    def _(self, event: Evaluated) -> ProgressState:
        self.dev_f1, self.dev_acc = event.dev_f1, event.dev_acc
        self.best_dev, self.select_metric = event.best_dev, event.select_metric
        return self

    @apply.register(Testing)
    def _(self, event: Testing) -> ProgressState:  # LP-FT's stage ends so: fine-tuning starts
        self.phase = "loading" if self.staging else "testing"
        self.search, self.encoded, self.staging = "", 0.0, False
        return self

    @apply.register(CrossValidating)
    def _(self, event: CrossValidating) -> ProgressState:
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
        return self

    @apply.register(Examining)
    def _(self, event: Examining) -> ProgressState:  # a data report's step, after its features
        self.phase, self.detail, self.task = "examining", event.what, event.task
        self.step, self.steps = event.step, event.steps
        self.worked = (event.step - 1) / max(event.steps, 1)
        return self

    @apply.register(Working)
    def _(self, event: Working) -> ProgressState:
        self.phase, self.detail, self.task = "working", event.what, event.task
        self.worked = min(max(event.share, 0.0), 1.0)
        return self

    @apply.register(SweepProgress)
    def _(self, event: SweepProgress) -> ProgressState:
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
