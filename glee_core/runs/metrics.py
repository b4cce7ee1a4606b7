"""The paper's metrics: accuracy, macro-F1, and macro-F1 over head and tail.

All of them come from one confusion matrix, counted with ``np.bincount``: the definitions are
scikit-learn's (``precision_recall_fscore_support`` with ``zero_division=0``, checked against it in
``tests/test_metrics.py``), without its input checks, which cost ~4 ms a call. Calibration
recomputes the metrics at each of 21 strengths for every run it calibrates (the report: one per
method), and training scores dev at every evaluation, so those checks were most of a report's
calibration section."""

from __future__ import annotations

import numpy as np
from scipy import stats

from ..models.config import RESAMPLES
from .record import group_of


def confusion(gold: np.ndarray, pred: np.ndarray, num_classes: int) -> np.ndarray:
    """Rows gold, columns predicted, classes ``0 .. num_classes - 1``."""
    gold, pred = np.asarray(gold, dtype=np.int64), np.asarray(pred, dtype=np.int64)
    if gold.shape != pred.shape:
        raise ValueError(f"{len(gold)} gold labels but {len(pred)} predictions")
    if gold.size and (
        min(gold.min(), pred.min()) < 0 or max(gold.max(), pred.max()) >= num_classes
    ):
        raise ValueError(f"a label outside 0..{num_classes - 1}")
    return np.bincount(gold * num_classes + pred, minlength=num_classes**2).reshape(
        num_classes, num_classes
    )


def _ratio(top: np.ndarray, bottom: np.ndarray) -> np.ndarray:
    """``top / bottom``, 0 where ``bottom`` is 0 (scikit-learn's ``zero_division=0``)."""
    return np.divide(top, bottom, out=np.zeros(len(top)), where=bottom > 0)


def per_class_scores(matrix: np.ndarray) -> tuple[np.ndarray, ...]:
    """Precision, recall, F1 and support of each class, from a confusion matrix."""
    hits = np.diag(matrix).astype(float)
    support, predicted = matrix.sum(1), matrix.sum(0)
    return (
        _ratio(hits, predicted),
        _ratio(hits, support),
        _ratio(2 * hits, support + predicted),
        support,
    )


def classification_metrics(
    gold: np.ndarray, pred: np.ndarray, classes: list[str], head: list[str], tail: list[str]
) -> dict:
    """``acc``, ``f1`` (macro), ``head_f1``, ``tail_f1``, per-class P/R/F1/support and the
    confusion matrix (rows gold, columns predicted, in ``classes`` order).

    Macro averages run over the classes present in ``gold``, so a class with no test example
    does not count as F1 = 0; ``head_f1``/``tail_f1`` average the per-class F1 of the head/tail
    classes among them."""
    matrix = confusion(gold, pred, len(classes))
    precision, recall, f1, support = per_class_scores(matrix)
    present = support > 0
    index = {c: i for i, c in enumerate(classes)}

    def mean_f1(names):
        rows = [index[c] for c in names if present[index[c]]]
        return float(np.mean(f1[rows])) if rows else float("nan")

    total = matrix.sum()
    return {
        "acc": float(np.trace(matrix) / total) if total else float("nan"),
        "f1": float(np.mean(f1[present])) if present.any() else float("nan"),
        "head_f1": mean_f1(head),
        "tail_f1": mean_f1(tail),
        "per_class": {
            c: {
                "precision": float(precision[i]),
                "recall": float(recall[i]),
                "f1": float(f1[i]),
                "support": int(support[i]),
                "group": group_of(c, head),
            }
            for i, c in enumerate(classes)
        },
        "confusion_matrix": matrix.tolist(),
    }


def macro_f1(gold: np.ndarray, pred: np.ndarray, num_classes: int) -> float:
    """Macro-F1 over the classes present in ``gold`` (model selection on dev)."""
    _, _, f1, support = per_class_scores(confusion(gold, pred, num_classes))
    return float(np.mean(f1[support > 0]))


def dev_score(gold: np.ndarray, pred: np.ndarray, num_classes: int, metric: str) -> float:
    """The dev score a run selects by: macro-F1 (``f1``) or accuracy (``acc``)."""
    if metric == "f1":
        return macro_f1(gold, pred, num_classes)
    return float(np.mean(np.asarray(gold) == np.asarray(pred)))


def bootstrap_lead(
    gold: np.ndarray, pred_a: np.ndarray, pred_b: np.ndarray, num_classes: int, metric: str
) -> float:
    """How sure dev is that ``pred_a`` scores above ``pred_b``: the share of paired bootstrap
    resamples of dev's texts (scipy's, :data:`RESAMPLES` of them, seeded) in which a's score
    (:func:`dev_score`) is above b's, a tie counting half. 0.5 is a coin toss."""
    if len(gold) < 2:
        return 0.5

    def lead(gold, a, b):
        return dev_score(gold, a, num_classes, metric) - dev_score(gold, b, num_classes, metric)

    found = stats.bootstrap(
        (np.asarray(gold), np.asarray(pred_a), np.asarray(pred_b)),
        lead,
        paired=True,
        vectorized=False,
        n_resamples=RESAMPLES,
        method="percentile",
        rng=np.random.default_rng(0),
    ).bootstrap_distribution
    return float(np.mean(found > 0) + 0.5 * np.mean(found == 0))


# Many / medium / few-shot classes by training count (Liu et al. 2019, OLTR's convention).
SHOT_BUCKETS = (("many", 101, None), ("medium", 20, 100), ("few", 0, 19))


def shot_bucket(train_count: int) -> str:
    """``many`` (> 100 training examples), ``medium`` (20-100) or ``few`` (< 20)."""
    return next(
        name
        for name, low, high in SHOT_BUCKETS
        if train_count >= low and (high is None or train_count <= high)
    )


def shot_f1(per_class: dict, class_counts: dict[str, int]) -> dict[str, float | None]:
    """Mean test F1 of the many / medium / few-shot classes present in test; None for a bucket
    with no such class (small data often has no many-shot class)."""
    out: dict[str, float | None] = {}
    for name, _, _ in SHOT_BUCKETS:
        values = [
            per_class[c]["f1"]
            for c, n in class_counts.items()
            if shot_bucket(n) == name and per_class.get(c, {}).get("support", 0) > 0
        ]
        out[name] = float(np.mean(values)) if values else None
    return out


def within_noise(best_dev: float, best_std: float, dev: float, std: float) -> bool:
    """Whether a score ``dev`` (± ``std``) is within the spread of the best one: the gap is at
    most the larger of the two spreads (percent points). Never where neither has a spread (one
    seed each, no folds: NaN): there is nothing to judge by."""
    spreads = [s for s in (best_std, std) if s == s]
    return bool(spreads) and best_dev - dev <= max(spreads)
