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
