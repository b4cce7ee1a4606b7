"""The paper's metrics, from scikit-learn: accuracy, macro-F1, and macro-F1 over head and tail."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import accuracy_score, confusion_matrix, precision_recall_fscore_support

from .record import group_of


def classification_metrics(gold: np.ndarray, pred: np.ndarray, classes: list[str],
                           head: list[str], tail: list[str]) -> dict:
    """``acc``, ``f1`` (macro), ``head_f1``, ``tail_f1``, per-class P/R/F1/support and the
    confusion matrix (rows gold, columns predicted, in ``classes`` order).

    Macro averages run over the classes present in ``gold``, so a class with no test example
    does not count as F1 = 0; ``head_f1``/``tail_f1`` average the per-class F1 of the head/tail
    classes among them."""
    labels = list(range(len(classes)))
    precision, recall, f1, support = precision_recall_fscore_support(
        gold, pred, labels=labels, zero_division=0)
    present = support > 0
    index = {c: i for i, c in enumerate(classes)}

    def mean_f1(names):
        rows = [index[c] for c in names if present[index[c]]]
        return float(np.mean(f1[rows])) if rows else float("nan")

    return {
        "acc": float(accuracy_score(gold, pred)),
        "f1": float(np.mean(f1[present])) if present.any() else float("nan"),
        "head_f1": mean_f1(head),
        "tail_f1": mean_f1(tail),
        "per_class": {
            c: {"precision": float(precision[i]), "recall": float(recall[i]),
                "f1": float(f1[i]), "support": int(support[i]),
                "group": group_of(c, head)}
            for i, c in enumerate(classes)
        },
        "confusion_matrix": confusion_matrix(gold, pred, labels=labels).tolist(),
    }


def macro_f1(gold: np.ndarray, pred: np.ndarray, num_classes: int) -> float:
    """Macro-F1 over the classes present in ``gold`` (model selection on dev)."""
    _, _, f1, support = precision_recall_fscore_support(
        gold, pred, labels=list(range(num_classes)), zero_division=0)
    return float(np.mean(f1[support > 0]))


# Many / medium / few-shot classes by training count (Liu et al. 2019, OLTR's convention).
SHOT_BUCKETS = (("many", 101, None), ("medium", 20, 100), ("few", 0, 19))


def shot_bucket(train_count: int) -> str:
    """``many`` (> 100 training examples), ``medium`` (20-100) or ``few`` (< 20)."""
    return next(name for name, low, high in SHOT_BUCKETS
                if train_count >= low and (high is None or train_count <= high))


def shot_f1(per_class: dict, class_counts: dict[str, int]) -> dict[str, float | None]:
    """Mean test F1 of the many / medium / few-shot classes present in test; None for a bucket
    with no such class (small data often has no many-shot class)."""
    out: dict[str, float | None] = {}
    for name, _, _ in SHOT_BUCKETS:
        values = [per_class[c]["f1"] for c, n in class_counts.items()
                  if shot_bucket(n) == name and per_class.get(c, {}).get("support", 0) > 0]
        out[name] = float(np.mean(values)) if values else None
    return out
