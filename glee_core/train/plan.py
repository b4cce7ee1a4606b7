"""The runs a launch asks for, before anything trains: each one's resolved configuration and id
(derived from what it depends on: ``plan_runs``), the feature passes not cached, the rate searched
once, LP-FT's stage; and the record a run is stored with (``run_record``; ``RunStore.save``
writes it) and a stored head's weights. A launch planned whole: ``train.launch``; the checks that
need the backbone: ``train.preflight``."""

from __future__ import annotations

import importlib.metadata
import platform
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import sklearn
import torch
import transformers
from safetensors.torch import load_file

from .. import __version__
from ..core.errors import GleeError
from ..data.datasets import LongTailDataset
from ..models.backbone import Backbone, model_fingerprint, trained_pooling
from ..models.config import TrainConfig
from ..models.features import FeatureInputs, missing_share
from ..models.methods import MethodSpec
from ..models.search_log import SearchLog, shared_key
from ..runs.notes import untrained_head_note
from ..runs.record import DatasetRecord, ModelRecord, RunRecord
from ..runs.store import Run, RunStore, make_run_id
from .setup import RunResult


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


def by_seed(jobs: list[PlannedRun]) -> dict[int, list[PlannedRun]]:
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
            FeatureInputs(fmt, cfg.max_length, limit=cfg.limit, strategy=cfg.limit_strategy),
        )
        for fmt, cfg in formats.items()
    )
