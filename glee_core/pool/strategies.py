"""Which unlabelled texts to label next: a query strategy is a class with its name, its line of
help (``suggest --strategy``'s choices, the Data page's picker) and its ``select`` over a
classifier's class probabilities on the pool (numpy only: ``suggest`` and the backtest,
``bench/pool_backtest.py``, share them). A new strategy is one class here and its line in
:data:`QUERY_STRATEGIES`.

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
* ``auto``: ``rare-margin`` where the data has a tail, else ``margin`` (:data:`AUTO_RULE`); the
  backtest (BENCHMARKS.md "What to label next") holds it against random.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..core.errors import GleeError

AUTO_RULE = "rare-margin where the data has tail classes, else margin"


def margins(probs: np.ndarray) -> np.ndarray:
    """The gap between each text's two most probable classes (0: a tie)."""
    if probs.shape[1] < 2:
        return np.ones(len(probs))
    top = np.partition(probs, -2, axis=1)[:, -2:]
    return top[:, 1] - top[:, 0]


class QueryStrategy:
    """A way to pick the pool texts to label next. ``select`` returns the rows of ``probs``
    (pool texts x classes) to label, best first, ``n`` of them; ``labelled`` holds each class's
    labelled texts; ``rng`` breaks ties (drawn the same way by every strategy of one seed)."""

    name: ClassVar[str]
    help: ClassVar[str]

    def select(
        self, probs: np.ndarray, labelled: np.ndarray, n: int, rng: np.random.Generator
    ) -> np.ndarray:
        return np.argsort(-self.score(probs, labelled) + _jitter(rng, probs), kind="stable")[:n]

    def score(self, probs: np.ndarray, labelled: np.ndarray) -> np.ndarray:
        """Each text's worth (the higher, the sooner it is asked)."""
        raise NotImplementedError


def _jitter(rng: np.random.Generator, probs: np.ndarray) -> np.ndarray:
    return rng.random(len(probs)) * 1e-9


class Random(QueryStrategy):
    name, help = "random", "uniformly at random (the baseline)"

    def select(self, probs, labelled, n, rng):
        return rng.permutation(len(probs))[:n]


class Margin(QueryStrategy):
    name, help = "margin", "the smallest gap between the two most probable classes"

    def score(self, probs, labelled):
        return -margins(probs)


class Rare(QueryStrategy):
    name, help = "rare", "the probability of the rarest classes (inverse labelled counts)"

    def score(self, probs, labelled):
        return probs @ (1.0 / np.maximum(labelled.astype(float), 1.0))


class RareMargin(Rare):
    name = "rare-margin"
    help = "rare, the texts the classifier is least sure of first (rare x margin)"

    def score(self, probs, labelled):
        return super().score(probs, labelled) * (1.0 - margins(probs) / 2)


def in_turns(queues: dict[int, list[int]], n: int) -> np.ndarray:
    """``n`` rows taken from the ``queues`` (a class's rows, best first) in turns, in the
    queues' order: no class's rows crowd out another's."""
    queues = {c: list(rows) for c, rows in queues.items() if len(rows)}
    chosen: list[int] = []
    while len(chosen) < n and queues:
        for c in list(queues):
            if len(chosen) < n:
                chosen.append(int(queues[c].pop(0)))
            if not queues[c]:
                del queues[c]
    return np.array(chosen, dtype=np.int64)


class Balanced(QueryStrategy):
    name, help = "balanced", "margin within each predicted class, fewest-labelled class first"

    def select(self, probs, labelled, n, rng):
        predicted, gap = probs.argmax(1), margins(probs) + _jitter(rng, probs)
        queues = {
            c: list(np.flatnonzero(predicted == c)[np.argsort(gap[predicted == c])])
            for c in np.argsort(labelled, kind="stable")
        }
        return in_turns(queues, n)


class Auto(QueryStrategy):
    """Stands for another strategy on the data at hand (:func:`resolve_strategy`)."""

    name, help = "auto", f"{AUTO_RULE} (the default)"

    def select(self, probs, labelled, n, rng):
        raise GleeError("auto stands for another strategy: resolve it on the data first")


QUERY_STRATEGIES: dict[str, QueryStrategy] = {
    s.name: s for s in (Auto(), Random(), Margin(), Balanced(), Rare(), RareMargin())
}


def resolve_strategy(strategy: str, has_tail: bool) -> str:
    """The strategy ``auto`` stands for on this data (:data:`AUTO_RULE`); an unknown name is an
    error listing the known ones."""
    if strategy not in QUERY_STRATEGIES:
        raise GleeError(
            f"--strategy must be one of {', '.join(QUERY_STRATEGIES)}, got {strategy!r}"
        )
    if strategy == "auto":
        return RareMargin.name if has_tail else Margin.name
    return strategy


def select(
    strategy: str, probs: np.ndarray, labelled: np.ndarray, n: int, seed: int = 1
) -> np.ndarray:
    """The rows of ``probs`` to label next, best first: ``n`` of them (all, when the pool holds
    fewer) by the strategy named (a resolved one, not ``auto``)."""
    if strategy not in QUERY_STRATEGIES:
        raise GleeError(f"unknown query strategy {strategy!r}")
    n = min(n, len(probs))
    return QUERY_STRATEGIES[strategy].select(probs, labelled, n, np.random.default_rng(seed))
