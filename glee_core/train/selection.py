"""Choosing among a quick compare's heads on evidence that holds on test: k-fold cross-validation.

A quick-mode run keeps the epoch best on dev, and the compare then keeps the head best on dev:
two choices on one small split. Where dev is small for its classes (a user's long tail: the
rarest classes have two or three dev texts), both inflate dev scores and the head they pick is
often not the one best on test. So, where the dev split is small (``LongTailDataset.small_dev``),
every head of the compare is also trained k times on the cached features of train + dev, each time
with one fold held out, and scored on the pooled out-of-fold predictions: every training and dev
text is scored once, by a head that never trained on it nor chose its epoch on it. Each fold runs
the run's own protocol on what is left: the head trains on the training texts outside the fold
and keeps the epoch best on the dev texts outside it. (Keeping the epoch best on the held-out
fold itself, as this did before, scored each trained head by its best of a dozen looks at a
few texts a class, and a closed-form probe, with no epoch to pick, by one: on 28 classes of 5-10
texts the choice fell 3.95 macro-F1 behind the best on test, a probe; now 0.63, a probe too.
``bench/selection.py``, BENCHMARKS.md "How good is the choice?")
That is :class:`CrossValidation`, stored with the run (``metrics.json``'s ``cv``); the
recommendation ranks by it (:mod:`glee_core.runs.recommend`). Heads train in a pack per fold, as
in the compare itself (:func:`~glee_core.train.training.fit_together`), so the k folds cost about
k times the compare's head training, never another pass of the encoder.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import replace

import numpy as np
from sklearn.model_selection import StratifiedKFold

from ..core.events import CrossValidating, ProgressFn
from ..models.config import CV_FOLDS
from ..models.features import FeatureSplit
from ..runs.metrics import classification_metrics, macro_f1
from ..runs.record import CrossValidation
from .evaluation import scored_logits
from .setup import Setup
from .training import fit_packs


def fold_indices(labels: np.ndarray, folds: int, seed: int) -> list[tuple[np.ndarray, ...]]:
    """``(train, held_out)`` row indices of each fold, stratified by class (a class with fewer
    texts than folds lands in as many folds as it has texts), shuffled by ``seed``."""
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    with warnings.catch_warnings():  # "the least populated class has only 2 members": expected
        warnings.simplefilter("ignore", UserWarning)
        return list(splitter.split(np.zeros(len(labels)), labels))


def choosing_rows(fit_rows: np.ndarray, n_train: int, labels: np.ndarray, seed: int):
    """``(train, dev)`` rows of a fold's part left to fit on (``fit_rows`` of train + dev, the
    first ``n_train`` the training split): its training texts train, its dev texts choose the
    epoch, as in the run. Where no dev text is left (a dev split of a few texts), one stratified
    part of ``fit_rows`` in ``CV_FOLDS - 1`` chooses instead."""
    train, dev = fit_rows[fit_rows < n_train], fit_rows[fit_rows >= n_train]
    if len(dev) and len(train):
        return train, dev
    inner_train, inner_dev = fold_indices(labels[fit_rows], CV_FOLDS - 1, seed)[0]
    return fit_rows[inner_train], fit_rows[inner_dev]


def _merged(split_a: FeatureSplit, split_b: FeatureSplit) -> FeatureSplit:
    return FeatureSplit(
        np.concatenate([split_a.hidden, split_b.hidden]),
        np.concatenate([split_a.labels, split_b.labels]),
        split_a.pass_tokens_per_second,
    )


def cross_validate(
    setups: list[Setup], folds: int = CV_FOLDS, progress: ProgressFn | None = None
) -> list[CrossValidation]:
    """Each head of ``setups`` (quick-mode runs of one dataset and seed, prepared with their
    cached features) trained on ``folds - 1`` folds of train + dev and scored on the held-out one,
    as its run would be scored (η-norm applied where the method uses it); one
    :class:`CrossValidation` per setup, from the pooled out-of-fold predictions."""
    progress = progress or (lambda event: None)
    started = time.perf_counter()
    first = setups[0]
    dataset, seed = first.dataset, first.config.seed
    labels = np.concatenate([first.splits["train"].labels, first.splits["dev"].labels])
    n_train = len(first.splits["train"].labels)
    unscored = [dataset.classes.index(c) for c in dataset.train_only_classes]
    scored = ~np.isin(labels, unscored)
    parts = fold_indices(labels, folds, seed)
    merged = {}  # train + dev of each input (the heads of one input share its arrays)
    out_of_fold = [np.zeros(len(labels), dtype=np.int64) for _ in setups]
    fold_f1: list[list[float]] = [[] for _ in setups]
    quiet = lambda event: None  # noqa: E731 (the folds' steps would read as the run's)
    for number, (fit_rows, held_rows) in enumerate(parts, 1):
        progress(CrossValidating(fold=number, folds=folds, heads=len(setups)))
        train_rows, dev_rows = choosing_rows(fit_rows, n_train, labels, seed)
        cut = {}  # this fold's splits and held-out part of each input, cut once for its heads
        fold_setups, held_parts = [], []
        for setup in setups:
            key = id(setup.splits["train"])
            if key not in merged:
                merged[key] = _merged(setup.splits["train"], setup.splits["dev"])
            if key not in cut:
                whole = merged[key]
                splits = {"train": whole.subset(train_rows), "dev": whole.subset(dev_rows)}
                cut[key] = splits, whole.subset(held_rows)
            splits, held = cut[key]
            fold_setups.append(replace(setup, progress=quiet, notes=[], splits=splits))
            held_parts.append(held)
        fitted_heads = fit_packs(fold_setups)
        for i, (setup, fitted, held) in enumerate(
            zip(fold_setups, fitted_heads, held_parts, strict=True)
        ):
            logits = scored_logits(setup, fitted.model, held)[0]
            pred = logits.argmax(1)
            out_of_fold[i][held_rows] = pred
            keep = scored[held_rows]
            if keep.any():
                fold_f1[i].append(
                    round(macro_f1(labels[held_rows][keep], pred[keep], dataset.num_classes), 5)
                )
    progress(CrossValidating(fold=folds, folds=folds, heads=len(setups), finished=True))
    head, tail = dataset.head_tail()
    seconds = time.perf_counter() - started
    results = []
    for i, _ in enumerate(setups):
        metrics = classification_metrics(
            labels[scored], out_of_fold[i][scored], dataset.classes, head, tail
        )
        results.append(
            CrossValidation(
                folds=folds,
                f1=round(metrics["f1"], 5),
                tail_f1=round(metrics["tail_f1"], 5),
                fold_f1=fold_f1[i],
                texts=int(scored.sum()),
                seconds=round(seconds / len(setups), 3),
            )
        )
    return results
