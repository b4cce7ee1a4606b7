"""Learning from the unlabelled rest: class-rebalanced self-training (CReST, Wei et al. 2021)
on the frozen features.

Each generation fits the classifier on the labelled texts and the pseudo-labels kept so far,
scores the pool, and keeps for each predicted class its most confident pool texts: a share
``(N_rarest / N_c) ** alpha`` of the texts predicted as it (``N_c``: its labelled texts), so the
rarest class keeps every text predicted as it and the largest the fewest - the rebalancing that
stops the head classes from swallowing the pseudo-labels. The classifier is the class-balanced
probe (closed form: a generation is seconds). :func:`helps` is ``--self-train auto``'s test:
cross-validation on the labelled texts alone, with and without the pseudo-labels.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..models.heads import probe_classifier

__all__ = ["ALPHA", "GENERATIONS", "PseudoLabels", "crest", "helps"]

GENERATIONS = 3
ALPHA = 1 / 3  # CReST's rebalancing power (its paper's default on CIFAR-LT)


@dataclass
class PseudoLabels:
    """The pool rows kept (``rows``), their pseudo-labels and confidence, the generation each
    was last kept in, and each class's count."""

    rows: np.ndarray
    labels: np.ndarray
    confidence: np.ndarray
    generations: int
    per_class: dict[int, int] = field(default_factory=dict)


def _probabilities(clf, features: np.ndarray, k: int) -> np.ndarray:
    out = np.zeros((len(features), k))
    out[:, clf.classes_] = clf.predict_proba(features)
    return out


def crest(
    labelled: np.ndarray,
    labels: np.ndarray,
    pool: np.ndarray,
    k: int,
    generations: int = GENERATIONS,
    alpha: float = ALPHA,
    progress: Callable[[int, int], None] | None = None,
) -> PseudoLabels:
    """The pseudo-labels ``generations`` of CReST keep from ``pool`` (features) given the
    ``labelled`` features and their ``labels`` (the module's docstring says how)."""
    counts = np.bincount(labels, minlength=k).astype(float)
    present = counts > 0
    rate = np.zeros(k)
    rate[present] = (counts[present].min() / counts[present]) ** alpha
    rows = np.zeros(0, dtype=np.int64)
    pseudo = np.zeros(0, dtype=np.int64)
    confidence = np.zeros(0)
    for generation in range(1, generations + 1):
        clf = probe_classifier(
            np.concatenate([labelled, pool[rows]]), np.concatenate([labels, pseudo]), True
        )
        probs = _probabilities(clf, pool, k)
        predicted, sure = probs.argmax(1), probs.max(1)
        kept = []
        for c in np.flatnonzero(present):
            members = np.flatnonzero(predicted == c)
            take = int(round(rate[c] * len(members)))
            kept.extend(members[np.argsort(-sure[members], kind="stable")[:take]])
        rows = np.sort(np.array(kept, dtype=np.int64))
        pseudo, confidence = predicted[rows], sure[rows]
        if progress:
            progress(generation, generations)
    per_class = {
        int(c): int(n) for c, n in zip(*np.unique(pseudo, return_counts=True), strict=True)
    }
    return PseudoLabels(rows, pseudo, confidence, generations, per_class)


def helps(
    labelled: np.ndarray,
    labels: np.ndarray,
    pool: np.ndarray,
    k: int,
    folds: int = 3,
    seed: int = 1,
) -> tuple[bool, float, float]:
    """Do CReST's pseudo-labels help here? ``folds``-fold cross-validation on the labelled texts
    (stratified; classes with fewer texts than folds stay in every fit): the macro-F1 of the
    probe on each held-out fold without and with the pseudo-labels made from the other folds
    and the pool. (helps, macro-F1 without, macro-F1 with), both in percent."""
    from sklearn.metrics import f1_score  # noqa: PLC0415 (only this test needs it)
    from sklearn.model_selection import StratifiedKFold  # noqa: PLC0415

    counts = np.bincount(labels, minlength=k)
    judged = np.flatnonzero(counts[labels] >= folds)
    always = np.flatnonzero(counts[labels] < folds)
    if len(np.unique(labels[judged])) < 2:
        return False, float("nan"), float("nan")
    without, with_pseudo = [], []
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    for fit, held in splitter.split(judged, labels[judged]):
        train = np.concatenate([judged[fit], always])
        test = judged[held]
        base = probe_classifier(labelled[train], labels[train], True)
        found = crest(labelled[train], labels[train], pool, k)
        more = probe_classifier(
            np.concatenate([labelled[train], pool[found.rows]]),
            np.concatenate([labels[train], found.labels]),
            True,
        )
        without.append(f1_score(labels[test], base.predict(labelled[test]), average="macro"))
        with_pseudo.append(f1_score(labels[test], more.predict(labelled[test]), average="macro"))
    a, b = 100 * float(np.mean(without)), 100 * float(np.mean(with_pseudo))
    return b > a, a, b
