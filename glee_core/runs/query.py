"""Which unlabelled texts to label next: query strategies over a classifier's class
probabilities on the pool (numpy only: the backtest and ``suggest`` share them).

* ``random``: uniformly, the baseline every other is measured against.
* ``margin``: the smallest gap between the two most probable classes (uncertainty sampling;
  small-text's ``BreakingTies``).
* ``balanced``: margin within each predicted class, the classes with the fewest labelled texts
  served first, in turns (a class-balanced selection: no class's uncertain texts crowd out the
  tail's).
* ``rare``: the probability mass on the rarest classes, each class weighed by the inverse of its
  labelled texts: the texts most likely to be of a tail class, which is where labels pay most.
* ``rare-margin``: ``rare``'s score times ``1 - margin / 2``: of the likely tail texts, those the
  classifier is least sure of first (the surest ones teach it least; ``rare`` alone trailed
  random twice in the backtest's 96 cells, this never).
* ``auto``: ``rare-margin`` where the data has a tail, else ``margin``
  (:data:`~glee_core.models.options.AUTO_RULE`); the backtest (``bench/pool_backtest.py``,
  BENCHMARKS.md "What to label next") holds it against random.

The names and their help live in ``models/options.py`` (``QUERY_STRATEGIES``: the flag's choices
read them); what each does is :func:`select`'s branch here.
"""

from __future__ import annotations

import numpy as np

from ..core.errors import GleeError
from ..models.options import QUERY_STRATEGIES

__all__ = [  # what this module offers
    "margins",
    "resolve_strategy",
    "select",
]


def resolve_strategy(strategy: str, has_tail: bool) -> str:
    """The strategy ``auto`` stands for on this data (:data:`AUTO_RULE`); an unknown name is an
    error listing the known ones."""
    if strategy not in QUERY_STRATEGIES:
        raise GleeError(
            f"--strategy must be one of {', '.join(QUERY_STRATEGIES)}, got {strategy!r}"
        )
    if strategy == "auto":
        return "rare-margin" if has_tail else "margin"
    return strategy


def margins(probs: np.ndarray) -> np.ndarray:
    """The gap between each text's two most probable classes (0: a tie)."""
    if probs.shape[1] < 2:
        return np.ones(len(probs))
    top = np.partition(probs, -2, axis=1)[:, -2:]
    return top[:, 1] - top[:, 0]


def select(
    strategy: str, probs: np.ndarray, labelled: np.ndarray, n: int, seed: int = 1
) -> np.ndarray:
    """The rows of ``probs`` (pool texts x classes) to label next, best first: ``n`` of them
    (all, when the pool holds fewer) by ``strategy`` (a resolved one, not ``auto``);
    ``labelled``: each class's labelled texts (what ``balanced`` and ``rare`` weigh by)."""
    n = min(n, len(probs))
    rng = np.random.default_rng(seed)
    if strategy == "random":
        return rng.permutation(len(probs))[:n]
    # ties broken at random, the same way for every strategy of one seed
    jitter = rng.random(len(probs)) * 1e-9
    if strategy == "margin":
        return np.argsort(margins(probs) + jitter, kind="stable")[:n]
    if strategy in ("rare", "rare-margin"):
        score = probs @ (1.0 / np.maximum(labelled.astype(float), 1.0))
        if strategy == "rare-margin":
            score = score * (1.0 - margins(probs) / 2)
        return np.argsort(-score + jitter, kind="stable")[:n]
    if strategy == "balanced":
        predicted, gap = probs.argmax(1), margins(probs) + jitter
        queues = {
            c: list(np.flatnonzero(predicted == c)[np.argsort(gap[predicted == c])])
            for c in np.argsort(labelled, kind="stable")
        }
        chosen: list[int] = []
        while len(chosen) < n:
            for c in list(queues):
                if queues[c] and len(chosen) < n:
                    chosen.append(int(queues[c].pop(0)))
                if not queues[c]:
                    del queues[c]
        return np.array(chosen, dtype=np.int64)
    raise GleeError(f"unknown query strategy {strategy!r}")
