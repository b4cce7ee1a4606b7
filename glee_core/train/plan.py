"""Planning a launch before anything trains: the runs it asks for (each one's id derived from what
it depends on), the heads a backbone cannot read (the checks that need the backbone:
``train.preflight``); a launch planned once (``plan_launch``: the runs to train, the races, the
rate searched once, the cross-validation due, the feature passes not cached), which the app's
estimate reads and the job runs; and the record a run is stored with (``run_record``;
``RunStore.save`` writes it), LP-FT's stage and a stored head's weights."""

from __future__ import annotations

import importlib.metadata
import platform
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import sklearn
import torch
import transformers
from safetensors.torch import load_file

from .. import __version__
from ..core.errors import GleeError
from ..core.progress import ENCODING_SHARE
from ..data.datasets import LongTailDataset
from ..models.backbone import Backbone, model_fingerprint, trained_pooling
from ..models.config import TrainConfig
from ..models.features import missing_share
from ..models.heads import head_of, label_word_token_ids
from ..models.methods import METHODS, MethodSpec
from ..models.modes import get_mode
from ..models.scoring import get_tokenizer
from ..models.search import SearchLog, shared_key
from ..runs.notes import untrained_head_note
from ..runs.record import DatasetRecord, ModelRecord, RunRecord
from ..runs.store import Run, RunStore, make_run_id
from .setup import RunResult

__all__ = [  # what this module offers
    "LaunchPlan",
    "PlannedRun",
    "cross_validation_share",
    "dataset_record",
    "job_search_log",
    "load_head",
    "lp_ft_stage",
    "package_versions",
    "plan_launch",
    "plan_runs",
    "run_identity",
    "run_record",
    "searched_rate",
    "uncached_passes",
    "unreadable_heads",
]


def run_identity(
    dataset: LongTailDataset, spec: MethodSpec, model_name: str, config: TrainConfig
) -> dict:
    """What makes two runs the same run (and so the run id). ``config`` is resolved."""
    return {
        "dataset": dataset.id,
        "dataset_fingerprint": dataset.fingerprint(),
        "template": dataset.template,
        "verbalizer": dataset.verbalizer,
        "threshold": dataset.threshold,
        **({"head_tail": dataset.head_tail_rule} if dataset.head_tail_rule != "train" else {}),
        "model": model_name,
        "model_fingerprint": model_fingerprint(model_name),
        **spec.identity(),
        **config.identity(),
    }


def package_versions() -> dict:
    return {
        "glee_core": __version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "peft": importlib.metadata.version("peft"),
        "accelerate": importlib.metadata.version("accelerate"),
        "tokenizers": importlib.metadata.version("tokenizers"),
        "scikit-learn": sklearn.__version__,
        "numpy": np.__version__,
        "pandas": pd.__version__,
        "python": platform.python_version(),
    }


def dataset_record(dataset: LongTailDataset) -> DatasetRecord:
    head, tail = dataset.head_tail()
    return DatasetRecord(
        id=dataset.id,
        fingerprint=dataset.fingerprint(),
        classes=dataset.classes,
        head_classes=head,
        tail_classes=tail,
        threshold=dataset.threshold,
        template=dataset.template,
        verbalizer=dataset.verbalizer,
        class_counts={k: int(v) for k, v in dataset.class_counts().items()},
        sizes={k: len(v) for k, v in dataset.splits.items()},
        warnings=dataset.warnings,
        head_tail_rule=dataset.head_tail_rule,
    )


@dataclass(frozen=True)
class PlannedRun:
    spec: MethodSpec
    config: TrainConfig  # resolved against the dataset, with the run's seed
    identity: dict
    run_id: str


def plan_runs(
    dataset: LongTailDataset,
    methods: Iterable[MethodSpec],
    seeds: Iterable[int],
    model_name: str,
    config: TrainConfig | None = None,
) -> list[PlannedRun]:
    """Every method x pooling x seed with its resolved configuration and run id, in training
    order (plain-input methods: a run for each pooling the config reads, see
    :meth:`TrainConfig.poolings`)."""
    config = config or TrainConfig()
    poolings = config.poolings(trained_pooling(model_name))  # before the recipe is resolved
    base = config.resolved(dataset.max_length, dataset.batch_size)
    planned = []
    for spec in methods:
        if base.frozen and not spec.trains_in(base.tuning):
            raise GleeError(f"{spec.id} cannot train on a frozen backbone; use --mode finetune")
        if not spec.trains_in(base.tuning):
            raise GleeError(
                f"{spec.id} is fitted on a frozen backbone's features; use "
                f"--mode frozen (or leave it out of a {base.tuning.label} run)"
            )
        # a template input is read at [MASK] whatever the pooling: one run, one id
        for pooling in ("cls",) if spec.input_format == "prompt" else poolings:
            for seed in seeds:
                cfg = replace(base, seed=seed, pooling=pooling)
                identity = run_identity(dataset, spec, model_name, cfg)
                planned.append(
                    PlannedRun(
                        spec, cfg, identity, make_run_id(dataset.id, spec.id, seed, identity)
                    )
                )
    return planned


def unreadable_heads(
    dataset: LongTailDataset,
    specs: list[MethodSpec],
    seeds: Iterable[int],
    model_name: str,
    config: TrainConfig,
    store: RunStore,
    force: bool = False,
    stored: Mapping[str, Run] | None = None,
) -> tuple[list[MethodSpec], str]:
    """The heads a launch of ``specs`` leaves out, and the note saying why. A launch of every
    head that trains in its mode (the quick compare of them all) on a backbone whose vocabulary
    lacks the data's label words leaves out the heads that score label words and trains the
    others; a launch naming such heads fails on their words in :func:`preflight`. The vocabulary
    is read (the tokenizer alone) only when such a head has a run to train, as there.
    ``stored``: the store's runs by id where the caller has read them (none opened again)."""
    worded = [s for s in specs if head_of(s).verbalizer]
    every = {m.id for m in METHODS.values() if m.trains_in(get_mode(config.mode))}
    if (
        not worded
        or not every <= {s.id for s in specs}
        or not any(
            force or (store.get(p.run_id) if stored is None else stored.get(p.run_id)) is None
            for p in plan_runs(dataset, worded, seeds, model_name, config)
        )
    ):
        return [], ""
    try:
        label_word_token_ids(get_tokenizer(model_name), dataset.verbalizer, dataset.classes)
    except GleeError as error:
        return worded, (
            f"{len(worded)} of the {len(specs)} heads are left out "
            f"({', '.join(s.id for s in worded)}): they score label words, and "
            f"{error}; the other heads train"
        )
    return [], ""


def run_record(
    job: PlannedRun,
    dataset: LongTailDataset,
    backbone: Backbone,
    result: RunResult,
    notes: list[str],
) -> RunRecord:
    """The record a finished run stores: its data, backbone, method, resolved config, notes."""
    model = ModelRecord.from_dict(backbone.describe())
    record = RunRecord(
        run_id=job.run_id,
        dataset=dataset_record(dataset),
        model=model,
        method=job.spec,
        seed=job.config.seed,
        hyperparameters=result.config,
        created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        versions=package_versions(),
        identity=job.identity,
        timing=result.timing,
    )
    if record.mlm_head_caveat:
        record.notes.append(untrained_head_note(backbone.name, [job.spec.id]))
    trained = trained_pooling(backbone.name)
    pooling = job.config.pooling
    # quick mode trains every pooling by default and chooses among them: no note there
    if (
        job.spec.input_format == "plain"
        and trained
        and trained != pooling
        and not job.config.frozen
    ):
        record.notes.append(
            f"{job.spec.id}: plain input read at the {pooling} pooling, but {backbone.name!r} is a "
            f"sentence encoder trained with {trained} pooling: its {pooling} state was never "
            f"trained to sum up a text (try --pooling {trained})"
        )
    record.notes += notes + result.notes
    record.tuning = replace(result.tuning)
    return record


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


def plan_launch(
    dataset: LongTailDataset,
    specs: list[MethodSpec],
    seeds: Iterable[int],
    model_name: str,
    config: TrainConfig,
    store: RunStore,
    force: bool = False,
    stored: Mapping[str, Run] | None = None,
) -> LaunchPlan:
    """Plan a launch of ``specs`` x ``seeds`` once: every question about what it must do is
    answered here, from the store as it is now. ``stored``: the runs the store holds by id,
    where the caller has read them already (the app's estimate: no run is opened again); else
    each run is looked up. A backbone whose vocabulary cannot be read leaves no head out (the
    launch's :func:`preflight` says why)."""
    seeds = list(seeds)

    def held(run_id: str) -> Run | None:
        if force:
            return None
        return store.get(run_id) if stored is None else stored.get(run_id)

    try:
        left_out, note = unreadable_heads(
            dataset, specs, seeds, model_name, config, store, force, stored
        )
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
            for group in _by_seed(runs).values()
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


def _by_seed(jobs: list[PlannedRun]) -> dict[int, list[PlannedRun]]:
    by_seed: dict[int, list[PlannedRun]] = {}
    for job in jobs:
        by_seed.setdefault(job.config.seed, []).append(job)
    return by_seed


def lp_ft_stage(job: PlannedRun, dataset: LongTailDataset, model_name: str) -> PlannedRun:
    """The quick-mode run LP-FT fits its head in: the same method, seed, data and backbone."""
    return plan_runs(
        dataset, [job.spec], [job.config.seed], model_name, job.config.linear_probe_stage()
    )[0]


def load_head(run: Run) -> dict[str, torch.Tensor]:
    """The head weights a quick-mode run stored (its ``model.safetensors`` is the head alone)."""
    return load_file(str(run.path / "model.safetensors"))


def job_search_log(store: RunStore, job: PlannedRun, once: bool = False) -> SearchLog | None:
    """Where ``job``'s learning-rate search is kept in ``store`` (none with one rate), shared
    over its backbone and data when the rate is searched once (``once``: whatever the config
    says, as a race searches it)."""
    if len(job.config.lr_grid) < 2:
        return None
    shared = (
        shared_key(job.identity, set(job.spec.identity()))
        if once or job.config.lr_search == "once"
        else None
    )
    return SearchLog(store.searches_dir, job.run_id, shared)


def searched_rate(store: RunStore, job: PlannedRun) -> float | None:
    """The learning rate searched once for ``job``'s backbone and data (any head and seed of
    them) that ``store`` already holds, which a launch of ``job`` trains at without a search
    (a race too); None when it would search (or has one rate, or searches each run)."""
    log = job_search_log(store, job, once=job.config.races)
    shared = log.chosen_elsewhere() if log is not None else None
    return float(shared["chosen"]) if shared else None


def uncached_passes(
    store: RunStore, dataset: LongTailDataset, model_name: str, jobs: list[PlannedRun]
) -> float:
    """The feature passes a frozen launch of ``jobs`` (the runs it trains) still runs: per
    input format, the share of its texts ``store`` has not encoded (1: a whole pass; the
    estimate and the bar read it)."""
    formats = {job.spec.input_format: job.config for job in jobs if job.config.frozen}
    fingerprint = model_fingerprint(model_name)
    return sum(
        missing_share(
            store.features_dir,
            dataset,
            fingerprint,
            fmt,
            cfg.max_length,
            cfg.limit,
            cfg.limit_strategy,
        )
        for fmt, cfg in formats.items()
    )


def cross_validation_share(
    dataset: LongTailDataset,
    jobs: list[PlannedRun],
    validate: list[PlannedRun],
    store: RunStore,
    folds: int,
    force: bool = False,
    model_name: str | None = None,
) -> float:
    """About what share of the launch its cross-validation takes (the progress bar's): a head's
    training counts one, its cross-validation ``folds`` trainings on (folds - 1) / folds of
    train + dev, and the heads' feature passes still to run (none where ``model_name``'s are
    cached in the store) as much more as the bar counts them within the heads' runs
    (:data:`ENCODING_SHARE`): on a Reuters upload the passes were half of the heads' part, and
    without them the bar counted 5 min left of a 3 min compare at its first fold."""
    if not validate:
        return 0.0
    sizes = {name: len(split) for name, split in dataset.splits.items()}
    per_head = (folds - 1) * (sizes["train"] + sizes["dev"]) / max(sizes["train"], 1)
    pending = [job for job in jobs if force or store.get(job.run_id) is None]
    formats = {job.spec.input_format for job in pending if job.config.frozen}
    uncached = 0 if model_name is None else uncached_passes(store, dataset, model_name, pending)
    passes = ENCODING_SHARE / (1 - ENCODING_SHARE) * uncached / max(len(formats), 1)
    trained = len(pending) * (1 + passes)
    return len(validate) * per_head / (trained + len(validate) * per_head)
