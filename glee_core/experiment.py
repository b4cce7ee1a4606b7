"""Run experiments through the store: train what is missing, load what is finished.

``run_experiments`` is what the CLI's ``train``, the app's jobs, ``reproduce`` and the benchmarks
call: for each method and seed it derives the run id from the configuration, takes the run's
lock, and either loads the finished run or trains it and stores its :class:`RunRecord`.
"""

from __future__ import annotations

import contextlib
import platform
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import sklearn
import torch
import transformers
from safetensors.torch import save_model

from . import __version__
from .backbone import Backbone, load_backbone, model_fingerprint, trained_pooling
from .config import TrainConfig
from .datasets import LongTailDataset
from .devices import resolve_device
from .distributed import data_parallel
from .encoding import unknown_token_share
from .errors import GleeError
from .events import Loading, Note, ProgressFn, Queued, RunStarted
from .files import write_json
from .heads import label_word_token_ids
from .methods import MethodSpec
from .record import DatasetRecord, ModelRecord, RunRecord, untrained_head_note
from .store import Run, RunStore, make_run_id
from .training import RunResult, train_and_evaluate

UNKNOWN_SHARE_WARNING = 0.05
VOCABULARY_SAMPLE = 500


@cache
def get_backbone(name: str) -> Backbone:
    """Load a backbone once per process (fine-tuning trains deep copies of it)."""
    return load_backbone(name)


def run_identity(dataset: LongTailDataset, spec: MethodSpec, model_name: str,
                 config: TrainConfig) -> dict:
    """What makes two runs the same run (and so the run id). ``config`` is resolved."""
    return {
        "dataset": dataset.id, "dataset_fingerprint": dataset.fingerprint(),
        "template": dataset.template, "verbalizer": dataset.verbalizer,
        "threshold": dataset.threshold,
        **({"head_tail": dataset.head_tail_rule} if dataset.head_tail_rule != "train" else {}),
        "model": model_name, "model_fingerprint": model_fingerprint(model_name),
        **spec.identity(), **config.identity(),
    }


def package_versions() -> dict:
    return {"glee_core": __version__, "torch": torch.__version__,
            "transformers": transformers.__version__, "scikit-learn": sklearn.__version__,
            "numpy": np.__version__, "pandas": pd.__version__,
            "python": platform.python_version()}


def dataset_record(dataset: LongTailDataset) -> DatasetRecord:
    head, tail = dataset.head_tail()
    return DatasetRecord(
        id=dataset.id, fingerprint=dataset.fingerprint(), classes=dataset.classes,
        head_classes=head, tail_classes=tail, threshold=dataset.threshold,
        template=dataset.template, verbalizer=dataset.verbalizer,
        class_counts={k: int(v) for k, v in dataset.class_counts().items()},
        sizes={k: len(v) for k, v in dataset.splits.items()}, warnings=dataset.warnings,
        head_tail_rule=dataset.head_tail_rule)


@dataclass(frozen=True)
class PlannedRun:
    spec: MethodSpec
    config: TrainConfig  # resolved against the dataset, with the run's seed
    identity: dict
    run_id: str


def plan_runs(dataset: LongTailDataset, methods: Iterable[MethodSpec], seeds: Iterable[int],
              model_name: str, config: TrainConfig | None = None) -> list[PlannedRun]:
    """Every method x seed with its resolved configuration and run id, in training order."""
    base = (config or TrainConfig()).resolved(dataset.max_length, dataset.batch_size)
    planned = []
    for spec in methods:
        if base.frozen and not spec.supports_frozen:
            raise GleeError(f"{spec.id} cannot train on a frozen backbone; use --mode finetune")
        if not base.frozen and not spec.supports_finetune:
            raise GleeError(f"{spec.id} is a baseline fitted on a frozen backbone; use "
                            "--mode frozen (or leave it out of a fine-tuning run)")
        for seed in seeds:
            # a template input is read at [MASK] whatever the pooling: one run, one id
            cfg = replace(base, seed=seed, **({"pooling": "cls"}
                                              if spec.input_format == "prompt" else {}))
            identity = run_identity(dataset, spec, model_name, cfg)
            planned.append(PlannedRun(spec, cfg, identity,
                                      make_run_id(dataset.id, spec.id, seed, identity)))
    return planned


def preflight(dataset: LongTailDataset, plan: list[PlannedRun], model_name: str,
              store: RunStore, force: bool = False) -> list[str]:
    """Checks that need the backbone, made before anything trains (and only when something
    will): the verbalizer's label words must be in its vocabulary (an error naming them), and a
    vocabulary that maps much of the data to the unknown token earns a note (returned)."""
    pending = [p for p in plan if force or store.get(p.run_id) is None]
    if not pending:
        return []
    tokenizer = get_backbone(model_name).tokenizer
    if any(p.spec.predictor == "mlm" for p in pending):
        label_word_token_ids(tokenizer, dataset.verbalizer, dataset.classes)
    share = unknown_token_share(tokenizer, dataset.splits["train"]["text"]
                                .head(VOCABULARY_SAMPLE).tolist())
    if share <= UNKNOWN_SHARE_WARNING:
        return []
    return [f"{share:.0%} of the tokens of {dataset.id}'s training texts (first "
            f"{VOCABULARY_SAMPLE}) are the unknown token for {model_name!r}: its vocabulary "
            f"does not cover this data's language ({dataset.language}), so the results say "
            "little; use a model made for it" + (" (e.g. bert-base-chinese)"
                                                 if dataset.language == "zh" else "")]


def run_record(job: PlannedRun, dataset: LongTailDataset, backbone: Backbone,
               result: RunResult, notes: list[str]) -> RunRecord:
    """The record a finished run stores: its data, backbone, method, resolved config, notes."""
    model = ModelRecord.from_dict(backbone.describe())
    record = RunRecord(run_id=job.run_id, dataset=dataset_record(dataset), model=model,
                       method=job.spec, seed=job.config.seed, hyperparameters=result.config,
                       created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                       versions=package_versions(), identity=job.identity, timing=result.timing)
    if record.mlm_head_caveat:
        record.notes.append(untrained_head_note(backbone.name, [job.spec.id]))
    trained = trained_pooling(backbone.name)
    pooling = job.config.pooling
    if job.spec.input_format == "plain" and trained and trained != pooling:
        record.notes.append(
            f"{job.spec.id}: plain input read at the {pooling} pooling, but {backbone.name!r} is a "
            f"sentence encoder trained with {trained} pooling: its {pooling} state was never "
            f"trained to sum up a text (try --pooling {trained})")
    record.notes += notes + result.notes
    return record


def save_result(store: RunStore, record: RunRecord, result: RunResult) -> Run:
    """Write every artifact of a run, ``metrics.json`` last, and move the folder into place."""

    def write(folder: Path) -> None:
        save_model(result.model.trained_module(), str(folder / "model.safetensors"))
        np.save(folder / "logits.npy", result.logits.astype(np.float32), allow_pickle=False)
        np.savez(folder / "features.npz", **result.features)
        np.savez(folder / "calibration.npz", **result.calibration)
        result.predictions.to_csv(folder / "predictions.csv", index=False)
        write_json(folder / "weight_norms.json",
                   dict(zip(record.dataset.classes, result.weight_norms, strict=True)))
        write_json(folder / "history.json", result.history)
        write_json(folder / "config.json", record.to_dict())
        write_json(folder / "metrics.json", result.metrics)  # last: marks the run complete

    return store.write(record.run_id, write)


def run_experiments(dataset: LongTailDataset, methods: Iterable[MethodSpec],
                    seeds: Iterable[int], model_name: str = "auto",
                    config: TrainConfig | None = None, store: RunStore | None = None,
                    force: bool = False, progress: ProgressFn | None = None) -> list[Run]:
    """Train (or load from the store) every method x seed; returns the runs in that order.

    ``progress`` receives a :class:`RunStarted` before each run and the trainer's events."""
    store = store or RunStore()
    progress = progress or (lambda event: None)
    device = (config or TrainConfig()).device
    resolve_device(device)  # fail before any work on a bad device
    ddp = data_parallel(device)  # several processes: the main one decides and writes
    main = ddp is None or ddp.is_main
    jobs = plan_runs(dataset, methods, seeds, model_name, config)
    if any(force or store.get(job.run_id) is None for job in jobs):
        progress(Loading(what=f"the backbone {model_name}"))
    vocabulary_notes = preflight(dataset, jobs, model_name, store, force)
    for note in vocabulary_notes:
        progress(Note(message=note))
    runs = []
    for index, job in enumerate(jobs, 1):
        with store.lock(job.run_id) if main else contextlib.nullcontext():
            train = force or store.get(job.run_id) is None
            if ddp is not None:
                train = ddp.broadcast(train)
            progress(RunStarted(run_id=job.run_id, method=job.spec.id, seed=job.config.seed,
                                index=index, total=len(jobs), cached=not train))
            if train:
                backbone = get_backbone(model_name)
                queued = Queued(run_id=job.run_id)
                with store.training_slot(lambda event=queued: progress(event)) if main \
                        else contextlib.nullcontext():
                    result = train_and_evaluate(dataset, job.spec, backbone, job.config,
                                                progress, feature_cache=store.features_dir)
                if main:
                    save_result(store, run_record(job, dataset, backbone, result,
                                                  vocabulary_notes), result)
            if ddp is not None:
                ddp.barrier()  # the others read the run once the main process has written it
        runs.append(Run(store.path(job.run_id)))
    return runs
