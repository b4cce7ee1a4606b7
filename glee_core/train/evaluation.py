"""A fitted run scored: its test logits (calibrated where its head is), the metrics, the
predictions and the classifier inputs kept for Figure 4, as the :class:`RunResult` the store
writes (:func:`evaluate`); :func:`scored_logits` is what the cross-validation and the data
reports score with."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch

from ..core.devices import device_name, resolve_precision
from ..core.events import Testing
from ..data.splits import SPLIT_SEED
from ..models.losses import eta_normalise
from ..models.model import GleeModel
from ..models.scoring import Scoring, Split, predict
from ..models.search_log import sureness
from ..runs.metrics import classification_metrics, shot_f1
from ..runs.record import MetricsRecord
from ..runs.run_parts import Timing, Tuning
from .setup import Fitted, RunResult, Setup

FEATURES_PER_CLASS = 64  # test examples per class whose classifier input is stored (Figure 4)


def feature_pass_rate(train: Split) -> float | None:
    """A frozen run's record of how fast its feature pass encoded (what estimates read)."""
    rate = getattr(train, "pass_tokens_per_second", None)
    return round(rate, 1) if rate else None


def sample_feature_rows(labels: np.ndarray, per_class: int = FEATURES_PER_CLASS) -> np.ndarray:
    """Up to ``per_class`` test rows of every class, the same rows for every method and seed."""
    rng = np.random.default_rng(SPLIT_SEED)
    rows = [rng.permutation(np.flatnonzero(labels == c))[:per_class] for c in np.unique(labels)]
    return np.sort(np.concatenate(rows)) if rows else np.zeros(0, dtype=np.int64)


def scored_logits(
    setup: Setup, model: GleeModel, split: Split
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(logits, raw_logits, features)`` of ``split`` as a run scores its test split: η-norm
    applied for the methods that use it (one uncalibrated pass: post-hoc calibration reads the
    raw logits)."""
    config = setup.config
    raw_logits, features = predict(
        model, split, setup.device, Scoring.of(setup.pad_id, config), calibrate=False
    )
    logits = raw_logits
    if setup.spec.eta_norm:
        logits = eta_normalise(
            torch.from_numpy(raw_logits), model.class_weight_norms().detach().cpu()
        ).numpy()
    return logits, raw_logits, features


def kept_prefix(record: dict) -> str:
    """The prefix of an evaluation's dev scores of the model it would keep: ``average_`` where
    self-ensemble found the moving average better there, else none (the weights')."""
    return "average_" if record.get("kept") == "average" else ""


def self_ensemble_note(setup: Setup, history: list[dict], kept_average: bool) -> str:
    """What self-ensemble did in a run: at how many evaluations the moving average scored above
    the weights on dev, and which of the two the run kept (the best on dev over the run)."""
    led = sum(bool(kept_prefix(r)) for r in history)
    kept = "the moving average" if kept_average else "the trained weights"
    return (
        f"{setup.spec.id} seed {setup.config.seed}, self-ensemble: the moving average of the "
        f"weights scored above them on dev at {led} of {len(history)} evaluation(s); the model "
        f"kept (the best on dev) is {kept}"
    )


def evaluate(setup: Setup, fitted: Fitted) -> RunResult:
    """Score the kept weights on test (η-norm applied for the methods that use it), and gather
    what the run stores: metrics, predictions, sampled features, calibration inputs, timing."""
    setup.progress(Testing())
    dataset, model, test = setup.dataset, fitted.model, setup.splits["test"]
    test_start = time.perf_counter()
    logits, raw_logits, features = scored_logits(setup, model, test)
    test_seconds = time.perf_counter() - test_start
    pred = logits.argmax(1)
    probs = torch.softmax(torch.from_numpy(logits), dim=1).numpy()
    frame = dataset.splits["test"]
    predictions = pd.DataFrame(
        {
            "text": frame["text"].to_numpy(),
            "text_b": frame["text_b"].to_numpy(),
            "gold": [dataset.classes[i] for i in test.labels],
            "pred": [dataset.classes[i] for i in pred],
            "confidence": probs.max(1).round(6),
            "correct": pred == test.labels,
        }
    )
    rows = sample_feature_rows(test.labels)
    tuning, said = _tuning(setup, fitted)
    return RunResult(
        metrics=_test_metrics(setup, pred, fitted.history),
        history=fitted.history,
        predictions=predictions,
        logits=logits,
        weight_norms=model.class_weight_norms().detach().cpu().tolist(),
        features={
            "features": features[rows].astype(np.float16),
            "labels": test.labels[rows],
            "rows": rows,
        },
        model=model,
        notes=setup.notes + said,
        config=setup.config,
        calibration=_calibration_inputs(setup, model, raw_logits, features),
        tuning=tuning,
        timing=_timing(setup, fitted, test_seconds),
    )


def _test_metrics(setup: Setup, pred: np.ndarray, history: list[dict]) -> MetricsRecord:
    """The test scores (overall, per class, head/tail and shot buckets) and the dev evaluation
    the kept weights come from."""
    config, dataset, labels = setup.config, setup.dataset, setup.splits["test"].labels
    head, tail = dataset.head_tail()
    metrics = classification_metrics(labels, pred, dataset.classes, head, tail)
    metric = config.select_metric
    best = max(history, key=lambda r: r[f"{kept_prefix(r)}dev_{metric}"])  # the first best one
    kept = kept_prefix(best)
    metrics.update(
        {
            f"{k}_f1": v
            for k, v in shot_f1(metrics["per_class"], dataset.class_counts().to_dict()).items()
        }
    )
    metrics.update(
        best_epoch=best["epoch"],
        best_step=best["step"],
        best_dev_f1=best[f"{kept}dev_f1"],
        best_dev_acc=best[f"{kept}dev_acc"],
        select_metric=config.select_metric,
    )
    return MetricsRecord.from_dict(metrics, dataset.classes)


def _calibration_inputs(setup: Setup, model, raw_logits, features) -> dict:
    """What post-hoc calibration needs: the uncalibrated logits and classifier inputs of every
    dev and test example, and the predictor's W and b (logits = features @ W.T + b)."""
    config, dev, test = setup.config, setup.splits["dev"], setup.splits["test"]
    dev_raw, dev_features = predict(
        model, dev, setup.device, Scoring.of(setup.pad_id, config), calibrate=False
    )
    weight, bias = model.head.linear_predictor()
    return {
        "dev_logits": dev_raw,
        "dev_features": dev_features,
        "dev_labels": dev.labels,
        "test_logits": raw_logits,
        "test_features": features,
        "test_labels": test.labels,
        "weight": weight.detach().float().cpu().numpy(),
        "bias": bias.detach().float().cpu().numpy(),
    }


def _tuning(setup: Setup, fitted: Fitted) -> tuple[Tuning, list[str]]:
    """How the run was tuned (its rate and whose search chose it, what it trained, the weights
    kept), and what that adds to its notes."""
    trained, adapted = fitted.model.tuning_record()
    tuning = Tuning(
        lr=fitted.lr,
        lr_search=fitted.search or None,
        lr_from=fitted.lr_from or None,
        trainable_parameters=trained,
        adapted_modules=adapted,
    )
    said = []
    if setup.config.self_ensemble:
        tuning.kept = "moving average" if fitted.kept_average else "weights"
        said.append(self_ensemble_note(setup, fitted.history, fitted.kept_average))
    if fitted.search:
        sure = sureness(fitted.search)
        if sure and sure[1]:  # a close call is said where the run is read (card, report)
            said.append(f"learning rate {fitted.lr:g}: {sure[0]}")
    return tuning, said


def _timing(setup: Setup, fitted: Fitted, test_seconds: float) -> Timing:
    """What the run took and at what rates (the next estimates read them)."""
    config, device, train = setup.config, setup.device, setup.splits["train"]
    seconds_training = max(fitted.seconds - fitted.eval_seconds, 1e-9)
    examples_per_second = fitted.steps * config.batch_size / seconds_training
    return Timing(
        train_seconds=round(fitted.seconds, 3),
        test_seconds=round(test_seconds, 3),
        epochs_run=fitted.epochs_run,
        evaluations=len(fitted.history),
        steps=fitted.steps if fitted.planned_steps else None,
        planned_steps=fitted.planned_steps or None,
        device=str(device),
        device_name=device_name(device),
        precision=resolve_precision(config.precision, device),
        skipped_steps=fitted.skipped_steps or None,
        train_examples_per_second=round(examples_per_second, 2),
        train_tokens_per_second=round(examples_per_second * float(train.lengths.mean()), 1),
        feature_pass_tokens_per_second=feature_pass_rate(train),
    )
