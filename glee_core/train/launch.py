"""A launch, the one way training runs: methods x seeds of one dataset on one backbone, with one
configuration and one store, planned once (:meth:`Launch.planned`: the runs to train, the heads
the backbone cannot read, the races, the rate searched once, the cross-validation due, the
feature passes not cached), which the app's estimate reads, and run once
(:func:`glee_core.train.experiment.run_launch`). The CLI's ``train``, the app's jobs,
``reproduce``, the executors (each :class:`Launch` one batch of theirs) and the benchmarks all
launch through it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..core.errors import GleeError
from ..core.events import ProgressFn
from ..core.progress import ENCODING_SHARE
from ..data.datasets import LongTailDataset
from ..models.config import TrainConfig
from ..models.heads import head_of, label_word_token_ids
from ..models.methods import METHODS, MethodSpec
from ..models.modes import get_mode
from ..models.scoring import get_tokenizer
from ..runs.store import Run, RunStore
from .plan import (
    PlannedRun,
    by_seed,
    lp_ft_stage,
    plan_runs,
    searched_rate,
    uncached_passes,
)


@dataclass
class Launch:
    """``methods`` x ``seeds`` on ``dataset`` with the backbone ``model``, ``config`` and
    ``store`` (``force``: train every run again). ``progress`` receives a :class:`RunStarted`
    before each run and the trainer's events; ``plan``: the launch planned already (as the app's
    estimate read it), else planned on first need. Run it with
    :func:`~glee_core.train.experiment.run_launch` (or an executor's ``run``)."""

    dataset: LongTailDataset
    methods: list[MethodSpec]
    seeds: list[int]
    model: str = "auto"
    config: TrainConfig = field(default_factory=TrainConfig)
    store: RunStore = field(default_factory=RunStore)
    force: bool = False
    progress: ProgressFn | None = field(default=None, repr=False)
    plan: LaunchPlan | None = field(default=None, repr=False)

    def __post_init__(self):
        self.methods, self.seeds = list(self.methods), list(self.seeds)
        self.config = TrainConfig() if self.config is None else self.config
        self.store = RunStore() if self.store is None else self.store

    def planned(self, stored: Mapping[str, Run] | None = None) -> LaunchPlan:
        """This launch planned once (:func:`plan_launch`; ``stored``: the store's runs by id
        where the caller has read them)."""
        if self.plan is None:
            self.plan = plan_launch(self, stored)
        return self.plan


@dataclass(frozen=True)
class LaunchPlan:
    """What a launch does, planned once (:func:`plan_launch`): the app's estimate reads it and
    the job runs it. ``runs``: every run the launch stands for, in order (the readable heads);
    ``to_train``: those the store lacks (every one under ``force``); ``left_out`` and ``note``:
    the heads the backbone cannot read; ``validate``: the quick-mode runs whose
    cross-validation is due; ``raced``: the heads that race, a race a seed; ``feature_passes``:
    the frozen feature passes not cached; ``lp_ft_stages``: the LP-FT heads still to fit;
    ``rate_searched``: the rate searched once is stored already (no search to pay)."""

    runs: list[PlannedRun]
    to_train: list[PlannedRun]
    left_out: list[MethodSpec]
    note: str
    validate: list[PlannedRun]
    raced: list[list[PlannedRun]]
    feature_passes: float
    lp_ft_stages: int
    rate_searched: bool


def plan_launch(launch: Launch, stored: Mapping[str, Run] | None = None) -> LaunchPlan:
    """Plan ``launch`` once (:meth:`Launch.planned` keeps it): every question about what it must
    do is answered here, from the store as it is now. ``stored``: the runs the store holds by
    id, where the caller has read them already (the app's estimate: no run is opened again);
    else each run is looked up. A backbone whose vocabulary cannot be read leaves no head out
    (the launch's :func:`preflight` says why)."""
    dataset, specs, seeds = launch.dataset, launch.methods, launch.seeds
    model_name, config, store = launch.model, launch.config, launch.store

    def held(run_id: str) -> Run | None:
        if launch.force:
            return None
        return store.get(run_id) if stored is None else stored.get(run_id)

    try:
        left_out, note = unreadable_heads(launch, stored)
    except GleeError:
        left_out, note = [], ""
    runs = plan_runs(dataset, [s for s in specs if s not in left_out], seeds, model_name, config)
    found = {job.run_id: held(job.run_id) for job in runs}  # each run looked up once
    to_train = [job for job in runs if found[job.run_id] is None]
    base = config.resolved(dataset.max_length, dataset.batch_size)
    validate = []
    if base.cross_validates(dataset):
        for job in runs:
            run = found[job.run_id]
            cv = None if run is None else run.metrics.cv
            if cv is None or cv.folds != base.folds:
                validate.append(job)
    raced = (
        []
        if not base.races or base.frozen
        else [
            group
            for group in by_seed(runs).values()
            if len(group) > 1 and all(found[j.run_id] is None for j in group)
        ]
    )
    frozen = [job for job in to_train if job.config.frozen]
    try:
        passes = uncached_passes(store, dataset, model_name, frozen) if frozen else 0
    except GleeError:  # a backbone that cannot be read: the launch says so
        passes = len({job.spec.input_format for job in frozen})
    stages = sum(
        held(lp_ft_stage(job, dataset, model_name).run_id) is None
        for job in to_train
        if job.config.lp_ft and not job.config.frozen
    )
    return LaunchPlan(
        runs=runs,
        to_train=to_train,
        left_out=left_out,
        note=note,
        validate=validate,
        raced=raced,
        feature_passes=passes,
        lp_ft_stages=stages,
        rate_searched=bool(to_train) and searched_rate(store, to_train[0]) is not None,
    )


def unreadable_heads(
    launch: Launch, stored: Mapping[str, Run] | None = None
) -> tuple[list[MethodSpec], str]:
    """The heads ``launch`` leaves out, and the note saying why. A launch of every head that
    trains in its mode (the quick compare of them all) on a backbone whose vocabulary lacks the
    data's label words leaves out the heads that score label words and trains the others; a
    launch naming such heads fails on their words in :func:`preflight`. The vocabulary is read
    (the tokenizer alone) only when such a head has a run to train, as there.
    ``stored``: the store's runs by id where the caller has read them (none opened again)."""
    dataset, specs, config = launch.dataset, launch.methods, launch.config
    worded = [s for s in specs if head_of(s).verbalizer]
    every = {m.id for m in METHODS.values() if m.trains_in(get_mode(config.mode))}
    if (
        not worded
        or not every <= {s.id for s in specs}
        or not any(
            launch.force
            or (launch.store.get(p.run_id) if stored is None else stored.get(p.run_id)) is None
            for p in plan_runs(dataset, worded, launch.seeds, launch.model, config)
        )
    ):
        return [], ""
    try:
        label_word_token_ids(get_tokenizer(launch.model), dataset.verbalizer, dataset.classes)
    except GleeError as error:
        return worded, (
            f"{len(worded)} of the {len(specs)} heads are left out "
            f"({', '.join(s.id for s in worded)}): they score label words, and "
            f"{error}; the other heads train"
        )
    return [], ""


def cross_validation_share(
    launch: Launch, jobs: list[PlannedRun], validate: list[PlannedRun]
) -> float:
    """About what share of ``launch`` (its runs ``jobs``) the cross-validation of ``validate``
    takes (the progress bar's): a head's training counts one, its cross-validation ``folds``
    trainings on (folds - 1) / folds of train + dev, and the heads' feature passes still to run
    (none where the backbone's are cached in the store) as much more as the bar counts them
    within the heads' runs (:data:`ENCODING_SHARE`): on a Reuters upload the passes were half of
    the heads' part, and without them the bar counted 5 min left of a 3 min compare at its first
    fold."""
    if not validate:
        return 0.0
    dataset, store, folds = launch.dataset, launch.store, launch.config.folds
    sizes = {name: len(split) for name, split in dataset.splits.items()}
    per_head = (folds - 1) * (sizes["train"] + sizes["dev"]) / max(sizes["train"], 1)
    pending = [job for job in jobs if launch.force or store.get(job.run_id) is None]
    formats = {job.spec.input_format for job in pending if job.config.frozen}
    uncached = uncached_passes(store, dataset, launch.model, pending)
    passes = ENCODING_SHARE / (1 - ENCODING_SHARE) * uncached / max(len(formats), 1)
    trained = len(pending) * (1 + passes)
    return len(validate) * per_head / (trained + len(validate) * per_head)
