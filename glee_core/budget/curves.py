"""Per-class learning curves in quick mode, measured: the label budget's points
(:mod:`glee_core.budget.report` fits and reads them).

For each seed, every class's training texts are shuffled once and the first ``fraction`` of them
kept (at least one a class): the subsets of one seed are nested, so the curve's steps are the
texts added, not a new draw. The head is retrained on each subset from the cached frozen features
(one feature pass for everything): the heads of one fraction, every seed, train together as one
pack (:func:`~glee_core.train.training.fit_together`), selected on the whole dev split as any
quick run is, and each class's F1 is measured on the whole test split. A subset may train as
many optimizer steps as the whole split plans and waits as many steps for a dev gain (its epochs
are shorter): with the quick protocol's fixed epochs a 10% subset's head would get a tenth of
the steps, and the curve would measure training time as well as data (BENCHMARKS.md, "Label
budget", has the backtest both ways). ``python -m glee_core budget`` runs it.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pandas as pd

from ..core.errors import GleeError
from ..core.events import Examining, FeaturePass, ProgressFn
from ..data.datasets import LongTailDataset
from ..models.config import TrainConfig
from ..models.features import Encoder
from ..models.methods import get_method
from ..train.evaluation import scored_logits
from ..train.setup import Setup, TrainingContext
from ..train.training import fit_packs, prepare
from .options import BudgetOptions
from .report import BudgetReport, forecast


def nested_subsets(
    labels: np.ndarray, fractions: tuple[float, ...], seed: int
) -> dict[float, np.ndarray]:
    """For each fraction, the sorted training rows kept: of every class, the first
    ``max(1, round(fraction * n))`` of one shuffle of its rows (nested across fractions)."""
    rng = np.random.default_rng(seed)
    order = {c: rng.permutation(np.flatnonzero(labels == c)) for c in np.unique(labels)}
    return {
        f: np.sort(
            np.concatenate([rows[: max(1, round(f * len(rows)))] for rows in order.values()])
        )
        for f in fractions
    }


def per_class_f1(labels: np.ndarray, predicted: np.ndarray, num_classes: int) -> np.ndarray:
    """Each class's test F1 (NaN for a class with no test text)."""
    from sklearn.metrics import f1_score  # noqa: PLC0415

    scores = f1_score(
        labels, predicted, labels=list(range(num_classes)), average=None, zero_division=0
    )
    support = np.bincount(labels, minlength=num_classes)
    return np.where(support > 0, scores, np.nan)


def label_budget(
    dataset: LongTailDataset,
    encoder: Encoder,
    model: str,
    options: BudgetOptions,
    progress: ProgressFn | None = None,
) -> BudgetReport:
    """Measure every class's learning curve on the features of ``model`` (``encoder``'s
    backbone) and forecast its label budget (the module's docstring says how)."""
    progress = progress or (lambda event: None)
    started = time.perf_counter()
    setup, points = measure(dataset, encoder, options, progress)
    labels, test = setup.splits["train"].labels, setup.splits["test"].labels
    k = dataset.num_classes
    head, _ = dataset.head_tail()
    counts = np.bincount(labels, minlength=k)
    curves, exponent, pooled = forecast(
        points,
        list(dataset.classes),
        {name: "head" if name in head else "tail" for name in dataset.classes},
        {name: int(counts[c]) for c, name in enumerate(dataset.classes)},
        {
            name: int(n)
            for name, n in zip(dataset.classes, np.bincount(test, minlength=k), strict=True)
        },
        options.target_f1,
    )
    return BudgetReport(
        dataset=dataset.id,
        model=model,
        pooling=setup.config.pooling,
        method=setup.spec.id,
        seeds=list(options.seed_list),
        fractions=list(options.fraction_list),
        target_f1=options.target_f1,
        exponent=exponent,
        pooled=pooled,
        classes=curves,
        points=points,
        seconds=time.perf_counter() - started,
    )


def measure(
    dataset: LongTailDataset, encoder: Encoder, options: BudgetOptions, progress: ProgressFn
) -> tuple[Setup, pd.DataFrame]:
    """The full data's setup and every measured point (class, fraction, seed, n_train, f1:
    the class's training texts in that subset and its test F1)."""
    spec = get_method(options.method)
    if "train" not in dataset.splits or dataset.splits["train"].empty or dataset.num_classes < 2:
        raise GleeError(
            f"{dataset.id}: a label budget needs a training split with two classes or more"
        )
    fractions, seeds = options.fraction_list, options.seed_list
    steps = len(fractions) + 2

    def features(event):  # the feature pass, when the features are not cached yet
        if isinstance(event, FeaturePass):
            progress(
                Examining(
                    step=1,
                    steps=steps,
                    task="label budget",
                    what=f"encoding the texts ({event.done}/{event.total})",
                )
            )

    config = TrainConfig(
        mode="frozen",
        pooling=options.pooling or TrainConfig.pooling,
        max_length=options.max_length,
        device=options.device,
        seed=seeds[0],
    )
    base = prepare(
        TrainingContext(dataset, encoder.backbone, features, encoder.cache_dir, encoder.device),
        spec,
        config,
    )
    labels = base.splits["train"].labels
    test = base.splits["test"].labels
    k = dataset.num_classes
    subsets = {seed: nested_subsets(labels, fractions, seed) for seed in seeds}
    # every subset may train as many steps as the whole split plans, and waits as many steps
    # for a dev gain: a small subset's few steps an epoch would otherwise leave its head
    # undertrained (or stop it after a few steps), and the curve would measure the steps
    full_steps, full_epoch = base.steps_per_epoch * base.epochs, base.steps_per_epoch
    rows = []
    for number, fraction in enumerate(fractions, 2):
        progress(
            Examining(
                step=number,
                steps=steps,
                task="label budget",
                what=f"{fraction:.0%} of every class's texts, {len(seeds)} seed(s)",
            )
        )
        epoch = base.config.steps_per_epoch(len(subsets[seeds[0]][fraction]))
        config = replace(
            base.config,
            min_steps=full_steps,
            patience=base.config.patience * -(-full_epoch // epoch),
        )
        setups = [
            replace(
                base,
                config=replace(config, seed=seed),
                splits={
                    **base.splits,
                    "train": base.splits["train"].subset(subsets[seed][fraction]),
                },
                progress=lambda event: None,
            )
            for seed in seeds
        ]
        for setup, fitted in zip(setups, fit_packs(setups), strict=True):
            logits = scored_logits(setup, fitted.model, setup.splits["test"])[0]
            scores = per_class_f1(test, logits.argmax(1), k)
            sizes = np.bincount(setup.splits["train"].labels, minlength=k)
            rows += [
                {
                    "class": dataset.classes[c],
                    "fraction": fraction,
                    "seed": setup.config.seed,
                    "n_train": int(sizes[c]),
                    "f1": None if np.isnan(scores[c]) else round(float(scores[c]), 5),
                }
                for c in range(k)
            ]
    progress(Examining(step=steps, steps=steps, task="label budget", what="fitting the curves"))
    return base, pd.DataFrame(rows, columns=["class", "fraction", "seed", "n_train", "f1"])
