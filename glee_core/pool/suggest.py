"""What to label next from the user's unlabelled texts (``python -m glee_core suggest``, the Data
page's "Unlabelled texts").

The pool is encoded once by the frozen backbone (both poolings, cached beside the dataset's
features, :func:`pool_features`); pool texts that are already in train, dev or test, exactly or
as near-duplicates (the health check's rule: a cosine distance under 0.13 of the median
distance between neighbouring labelled texts, cleanlab's default), are left out and counted.
The classifier is the dataset's recommended quick-mode head (its quick compare's choice; a
class-balanced probe trained now where there is none, in seconds); its class probabilities on
the pool go to a query strategy (:mod:`glee_core.pool.strategies`).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ..core.devices import resolve_device
from ..core.errors import GleeError
from ..core.events import FeaturePass, Note, ProgressFn
from ..data.datasets import LongTailDataset
from ..data.encoding import unknown_token_share
from ..models.backbone import trained_pooling
from ..models.config import POOLINGS, TrainConfig
from ..models.features import (
    Encoder,
    FeatureInputs,
    FeatureSpace,
    FeatureSplit,
    cached_features,
)
from ..models.methods import get_method
from ..models.model import build_model
from ..models.scoring import get_backbone, predict
from ..runs.notes import vocabulary_note
from ..runs.recommend import recommend
from ..runs.store import Run, RunStore
from ..train.experiment import run_launch
from ..train.launch import Launch
from ..train.preflight import UNKNOWN_SHARE_WARNING
from .strategies import PoolFeatures, resolve_strategy, select

NEAR_DUPLICATE = 0.13  # cleanlab's near-duplicate threshold, of the median neighbour distance
DEFAULT_PROBE = "probe-balanced"  # the classifier where no quick compare chose one: seconds


@dataclass
class Suggestions:
    """The texts to label next (``frame``: pool_row, text, predicted, confidence, strategy,
    rank, label), the strategy ``auto`` resolved to, the run whose head scored the pool, and
    what was left out of the pool (duplicates of labelled texts) with notes for the user."""

    frame: pd.DataFrame
    strategy: str
    run_id: str
    pool_texts: int
    duplicates: int
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    pool_classes: list[dict] = field(default_factory=list)  # :func:`likely_in_pool`

    def summary(self) -> dict:
        return {
            "suggested": len(self.frame),
            "strategy": self.strategy,
            "run": self.run_id,
            "pool_texts": self.pool_texts,
            "left_out_as_duplicates": self.duplicates,
            "seconds": round(self.seconds, 2),
        }


def pool_features(
    pool: pd.DataFrame, space: FeatureSpace, encoder: Encoder, progress: ProgressFn | None = None
) -> dict[str, np.ndarray]:
    """The frozen backbone's pooled states of every pool text (``{"cls", "mean"}``): those the
    feature cache holds (a pool text is kept by its content, as a dataset's are: once labelled
    and added, the new version finds it encoded) read from it, the others encoded now, with a
    bar, and kept (within the workspace's quota)."""
    progress = progress or (lambda event: None)
    frame = pd.DataFrame(
        {
            "text": pool["text"].to_numpy(),
            "text_b": "",
            "label": np.zeros(len(pool), dtype=np.int64),
        }
    )
    (keys,) = space.encode_missing(
        [frame],
        encoder,
        "the pool's features",
        lambda done, total: progress(
            FeaturePass(format=f"{space.input_format} (the pool)", done=done, total=total)
        ),
    )
    return {p: space.states(keys, p, encoder.backbone.hidden_size) for p in POOLINGS}


def near_duplicates(pool: np.ndarray, labelled: np.ndarray) -> np.ndarray:
    """Which pool texts are near-duplicates of a labelled one: a cosine distance under
    :data:`NEAR_DUPLICATE` times the median distance between each labelled text and its nearest
    labelled neighbour (health's rule, which cleanlab's Datalab applies)."""

    def unit(x: np.ndarray) -> np.ndarray:
        return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)

    pool, labelled = unit(pool.astype(np.float32)), unit(labelled.astype(np.float32))
    own = np.empty(len(labelled), dtype=np.float32)
    for start in range(0, len(labelled), 2048):  # blocks: a 20,000 x 5,000 product at most
        sims = labelled[start : start + 2048] @ labelled.T
        rows = np.arange(sims.shape[0])
        sims[rows, rows + start] = -np.inf  # not itself
        own[start : start + 2048] = 1 - sims.max(1)
    radius = NEAR_DUPLICATE * max(float(np.median(own)), 1e-6)
    nearest = np.empty(len(pool), dtype=np.float32)
    for start in range(0, len(pool), 2048):
        nearest[start : start + 2048] = 1 - (pool[start : start + 2048] @ labelled.T).max(1)
    return nearest < radius


def in_the_data(
    dataset: LongTailDataset,
    pool: pd.DataFrame,
    states: np.ndarray,
    features: dict[str, FeatureSplit],
) -> np.ndarray:
    """Which pool texts ``dataset`` already holds in train, dev or test: the same text, or a
    near-duplicate of one (:func:`near_duplicates`) on ``states`` (the pool's) and ``features``
    (the splits', of the same input and pooling)."""
    known = set(pd.concat([dataset.splits[s]["text"] for s in ("train", "dev", "test")]))
    return pool["text"].isin(known).to_numpy() | near_duplicates(
        states, np.concatenate([features[s].hidden for s in ("train", "dev", "test")])
    )


def suggestion_run(
    dataset: LongTailDataset, model_name: str, store: RunStore, progress: ProgressFn
) -> Run:
    """The head that scores the pool: the dataset's recommended quick-mode candidate with this
    backbone (its first seed's run), else :data:`DEFAULT_PROBE` trained now."""
    quick = [
        run
        for run in store.runs(dataset.id)
        if run.record.hyperparameters.frozen and run.record.model.name == model_name
    ]
    rec = recommend(quick) if quick else None
    if rec is not None and rec.chosen.mode == "frozen":
        chosen = [
            run
            for run in quick
            if run.setting == rec.chosen.setting and run.method == rec.chosen.method
        ]
        if chosen:
            return min(chosen, key=lambda run: run.record.seed)
    progress(
        Note(
            message=f"no quick compare of {dataset.id} to choose the classifier: "
            f"{DEFAULT_PROBE} is trained on the frozen features (seconds)"
        )
    )
    pooling = trained_pooling(model_name) or "mean"
    [run] = run_launch(
        Launch(
            dataset,
            [get_method(DEFAULT_PROBE)],
            [1],
            model_name,
            TrainConfig(mode="frozen", pooling=pooling, choose_by="dev"),
            store,
            progress=progress,
        )
    )
    return run


def pool_probabilities(
    run: Run,
    pool: pd.DataFrame,
    cache_dir: str | os.PathLike,
    device: torch.device,
    progress: ProgressFn,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The run's class probabilities on every pool text (its calibration applied, as it
    scores), and the pool's features of the run's input (both poolings)."""
    record = run.record
    if not record.hyperparameters.frozen:
        raise GleeError(
            f"{run.run_id} is not a quick-mode run: its head cannot score cached features"
        )
    backbone = get_backbone(record.model.name)
    model = build_model(
        record.method,
        backbone,
        record.dataset.classes,
        record.dataset.verbalizer,
        record.hyperparameters,
    )  # the head alone
    model.load_trained(run.weights_path)
    model = model.to(device).eval()
    spec, hyper = record.method, record.hyperparameters
    encoder = Encoder(backbone, device, Path(cache_dir))
    space = encoder.space(spec.input_format, hyper.max_length, record.dataset.template)
    states = pool_features(pool, space, encoder, progress)
    pooling = hyper.pooling if spec.input_format == "plain" else "cls"
    split = FeatureSplit(states[pooling], np.zeros(len(pool), dtype=np.int64))
    logits, _ = predict(model, split, device)
    return torch.softmax(torch.from_numpy(logits), dim=1).numpy(), states


def likely_in_pool(run: Run, probs: np.ndarray, classes: list[str]) -> list[dict]:
    """For each class, the pool texts the head predicts as it and its precision on dev (from
    the run's stored dev logits; None where dev has no prediction of it, or the run kept
    none), and the texts of it the pool likely holds: predicted x precision."""
    k = len(classes)
    predicted = np.bincount(probs.argmax(1), minlength=k) if len(probs) else np.zeros(k, int)
    data = run.calibration_data
    precision = [None] * k
    if data is not None and "dev_logits" in data:
        dev_pred, dev_gold = data["dev_logits"].argmax(1), data["dev_labels"]
        for c in range(k):
            said = dev_pred == c
            precision[c] = float((dev_gold[said] == c).mean()) if said.any() else None
    return [
        {
            "class": name,
            "predicted": int(predicted[c]),
            "dev_precision": precision[c],
            "likely": None if precision[c] is None else round(predicted[c] * precision[c]),
        }
        for c, name in enumerate(classes)
    ]


def suggest(
    dataset: LongTailDataset,
    pool: pd.DataFrame,
    model_name: str,
    store: RunStore,
    options,
    progress: ProgressFn | None = None,
) -> Suggestions:
    """The ``options.n`` pool texts to label next by ``options.strategy`` (``SuggestOptions``:
    ``n``, ``strategy``, ``seed``, ``device``), best first (the module's docstring says how)."""
    progress = progress or (lambda event: None)
    started = time.perf_counter()
    if options.n < 1:
        raise GleeError(f"--n must be at least 1, got {options.n}")
    device = resolve_device(options.device)
    backbone = get_backbone(model_name)
    notes = []
    share = unknown_token_share(backbone.tokenizer, pool["text"].head(500).tolist())
    if share > UNKNOWN_SHARE_WARNING:
        notes.append(
            vocabulary_note(share, "the pool", min(500, len(pool)), model_name, dataset.language)
        )
    run = suggestion_run(dataset, model_name, store, progress)
    probs, states = pool_probabilities(run, pool, store.features_dir, device, progress)
    # near-duplicates of the labelled texts, on the plain input's mean-pooled states
    encoder = Encoder(backbone, device, store.features_dir)
    max_length = run.record.hyperparameters.max_length
    labelled = cached_features(
        dataset, encoder, FeatureInputs("plain", max_length, "mean"), progress
    )
    plain = (
        states["mean"]
        if run.record.method.input_format == "plain"
        else pool_features(
            pool, encoder.space("plain", max_length, dataset.template), encoder, progress
        )["mean"]
    )
    duplicate = in_the_data(dataset, pool, plain, labelled)
    if duplicate.all():
        raise GleeError(
            f"every one of the pool's {len(pool)} texts is already in the dataset "
            "(exactly or as a near-duplicate): nothing to suggest"
        )
    keep = np.flatnonzero(~duplicate)
    if options.n > len(keep):
        notes.append(
            f"--n {options.n} is more than the {len(keep)} pool texts left (after "
            f"{int(duplicate.sum())} duplicates of labelled texts): all of them are "
            "suggested"
        )
    strategy = resolve_strategy(options.strategy, bool(dataset.head_tail()[1]))
    counts = dataset.class_counts("train").reindex(dataset.classes).fillna(0).to_numpy()
    train = labelled["train"]  # the labelled texts' features, for a strategy that reads them
    features = PoolFeatures(plain[keep], train.hidden, train.labels)
    order = keep[select(strategy, probs[keep], counts, options.seed, features)[: options.n]]
    frame = pd.DataFrame(
        {
            "pool_row": pool["pool_row"].to_numpy()[order],
            "text": pool["text"].to_numpy()[order],
            "predicted": [dataset.classes[c] for c in probs[order].argmax(1)],
            "confidence": np.round(probs[order].max(1), 4),
            "strategy": strategy,
            "rank": np.arange(1, len(order) + 1),
            "label": "",
        }
    )
    return Suggestions(
        frame,
        strategy,
        run.run_id,
        len(pool),
        int(duplicate.sum()),
        notes,
        time.perf_counter() - started,
        likely_in_pool(run, probs[keep], dataset.classes),
    )
