"""The data health check end to end (``python -m glee_core health``, the Data page): the cached
frozen features, out-of-fold class probabilities for every training text, and cleanlab's reading
of them (:func:`glee_core.health.report.examine`).

The probabilities come from a closed-form probe (``probe-balanced``, the default, or ``probe``:
seconds) or from any quick-mode head (``--method cls-relu-pt-ln``, the head the lab recommends):
trained k times on the cached features with one fold of the training split held out, the folds'
heads as one pack (:func:`~glee_core.train.training.fit_together`), each selected on the dev split
as a quick run is and scoring only the texts it never trained on.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from ..core.errors import GleeError
from ..core.events import Examining, ProgressFn
from ..data.datasets import LongTailDataset
from ..models.backbone import trained_pooling
from ..models.config import TrainConfig
from ..models.features import Encoder, FeatureInputs, cached_features
from ..models.heads import head_of
from ..models.methods import get_method
from ..train.evaluation import scored_logits
from ..train.setup import TrainingContext
from ..train.training import fit_packs, prepare
from .options import HealthOptions
from .report import HealthReport, examine, health_folds

PROBES = ("probe-balanced", "probe")  # the closed-form probes: fitted here, per fold, in seconds


def data_health(
    dataset: LongTailDataset,
    encoder: Encoder,
    model: str,
    options: HealthOptions,
    progress: ProgressFn | None = None,
) -> HealthReport:
    """Label issues, near-duplicates (within training and across splits), outliers and the
    most confused pairs of ``dataset``'s training split (the module's docstring says how), on
    the features of ``model`` (``encoder``'s backbone)."""
    progress = progress or (lambda event: None)
    if dataset.num_classes < 2 or "train" not in dataset.splits or dataset.splits["train"].empty:
        raise GleeError(
            f"{dataset.id}: data health needs a training split with two classes or more"
        )
    pooling = options.pooling or trained_pooling(model) or "mean"
    max_length = options.max_length or dataset.max_length
    inputs = FeatureInputs("plain", max_length, pooling)
    split_features = cached_features(dataset, encoder, inputs, progress)
    probabilities = None
    if options.method not in PROBES:
        probabilities = head_probabilities(
            dataset, encoder, options, inputs, progress, split_features
        )
    report = examine(dataset, split_features, options, progress, probabilities)
    return replace(report, model=model, pooling=pooling)


def head_probabilities(
    dataset: LongTailDataset,
    encoder: Encoder,
    options: HealthOptions,
    inputs: FeatureInputs,
    progress: ProgressFn,
    plain: dict | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(probabilities, judged) of every training text from ``options.method`` trained on the
    other folds (a text of a class with fewer than ``folds`` texts is not judged: NaN), on the
    features ``inputs`` read (their pooling and length; the head's own input format);
    ``plain``: the plain inputs' features already loaded (a plain-input head reads them)."""
    spec = get_method(options.method)
    if head_of(spec).closed_form:
        raise GleeError(
            f"--method {spec.id}: give probe or probe-balanced for a closed-form "
            "probe, or a head trained on the features"
        )
    config = TrainConfig(
        mode="frozen",
        pooling=inputs.pooling,
        max_length=inputs.max_length,
        device=options.device,
        seed=options.seed,
    )
    base = prepare(
        TrainingContext(
            dataset, encoder.backbone, feature_cache=encoder.cache_dir, device=encoder.device
        ),
        spec,
        config,
        splits=plain if spec.input_format == "plain" else None,
    )
    train = base.splits["train"]
    labels, k = train.labels, dataset.num_classes
    judged, parts = health_folds(labels, k, options.folds, options.seed)
    progress(
        Examining(
            step=1,
            steps=options.folds + 1,
            what=f"out-of-fold probabilities: {spec.id}, {options.folds} folds as one pack",
        )
    )
    setups = [
        replace(
            base,
            splits={**base.splits, "train": train.subset(fit_rows)},
            progress=lambda event: None,
        )
        for fit_rows, _ in parts
    ]
    fitted = fit_packs(setups)
    probs = np.full((len(labels), k), np.nan)
    for setup, result, (_, held) in zip(setups, fitted, parts, strict=True):
        logits = scored_logits(setup, result.model, train.subset(held))[0]
        probs[held] = torch.softmax(torch.from_numpy(logits).float(), dim=1).numpy()
    progress(
        Examining(
            step=options.folds,
            steps=options.folds + 1,
            what=f"out-of-fold probabilities: {spec.id}, done",
        )
    )
    return probs, judged
