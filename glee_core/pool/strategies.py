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
* ``tail-margin``: each class weighed by ``1 / (its labelled texts + 3)`` (the rarest first,
  without the one- and two-label classes drowning out the rest of the tail), times ``1 - margin``
  (the least sure first); where the labelled texts show that the rarer classes' texts have the
  longer feature vectors (a correlation over :data:`LEAN`), times that length too (the length
  of the gradient a text gives a softmax head, as expected gradient length weighs it, there
  leaning to the tail). Issue #80's round four (BENCHMARKS.md "What to label next").
* ``auto``: ``tail-margin`` where the data has a tail, else ``margin`` (:data:`AUTO_RULE`); the
  backtest (BENCHMARKS.md "What to label next") holds it against random and small-text's
  strategies.

A strategy that reads the texts' features (``tail-margin``) is given them as
:class:`PoolFeatures`; without them (a library caller's probabilities alone) it goes on without
the length.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..core.errors import GleeError

AUTO_RULE = "tail-margin where the data has tail classes, else margin"
PRIOR_LABELS = 3  # tail-margin's class weight: 1 / (labelled texts + PRIOR_LABELS)
# tail-margin reads the features' length where it leans to the rare classes by more than this
# correlation (Reuters' sets: 0.16 to 0.66 in every round of 18 seeds; demo, r8 and an unseen
# fortunes set: -0.38 to +0.06, where the length tips rounds the wrong way)
LEAN = 0.1


@dataclass(frozen=True)
class PoolFeatures:
    """The texts' features where a strategy reads them (the plain input's mean-pooled states,
    as the probe's): ``pool``'s rows are ``probs``' rows; ``labelled`` and ``labels`` (class ids)
    are the labelled texts'."""

    pool: np.ndarray
    labelled: np.ndarray
    labels: np.ndarray

    def norm_lean(self, counts: np.ndarray) -> float:
        """How the features' length leans to the rare classes among the labelled texts: the
        correlation of a text's log length with the log of its class's rarity (1 / its
        labelled texts); positive where the rarer classes' texts are the longer ones."""
        rarity = -np.log(np.maximum(counts[self.labels].astype(float), 1.0))
        length = np.log(np.maximum(np.linalg.norm(self.labelled, axis=1), 1e-12))
        if len(self.labels) < 3 or rarity.std() == 0 or length.std() == 0:
            return 0.0
        return float(np.corrcoef(length, rarity)[0, 1])


def margins(probs: np.ndarray) -> np.ndarray:
    """The gap between each text's two most probable classes (0: a tie)."""
    if probs.shape[1] < 2:
        return np.ones(len(probs))
    top = np.partition(probs, -2, axis=1)[:, -2:]
    return top[:, 1] - top[:, 0]


class QueryStrategy:
    """A way to pick the pool texts to label next. ``select`` returns the rows of ``probs``
    (pool texts x classes) to label, best first, ``n`` of them; ``labelled`` holds each class's
    labelled texts; ``rng`` breaks ties (drawn the same way by every strategy of one seed);
    ``features``: the texts' features, for a strategy that reads them (None: not at hand)."""

    name: ClassVar[str]
    help: ClassVar[str]

    def select(
        self,
        probs: np.ndarray,
        labelled: np.ndarray,
        n: int,
        rng: np.random.Generator,
        features: PoolFeatures | None = None,
    ) -> np.ndarray:
        worth = self.score(probs, labelled, features)
        return np.argsort(-worth + _jitter(rng, probs), kind="stable")[:n]

    def score(
        self, probs: np.ndarray, labelled: np.ndarray, features: PoolFeatures | None = None
    ) -> np.ndarray:
        """Each text's worth (the higher, the sooner it is asked)."""
        raise NotImplementedError


def _jitter(rng: np.random.Generator, probs: np.ndarray) -> np.ndarray:
    return rng.random(len(probs)) * 1e-9


class Random(QueryStrategy):
    name, help = "random", "uniformly at random (the baseline)"

    def select(self, probs, labelled, n, rng, features=None):
        return rng.permutation(len(probs))[:n]


class Margin(QueryStrategy):
    name, help = "margin", "the smallest gap between the two most probable classes"

    def score(self, probs, labelled, features=None):
        return -margins(probs)


class Rare(QueryStrategy):
    name, help = "rare", "the probability of the rarest classes (inverse labelled counts)"

    def score(self, probs, labelled, features=None):
        return probs @ (1.0 / np.maximum(labelled.astype(float), 1.0))


class RareMargin(Rare):
    name = "rare-margin"
    help = "rare, the texts the classifier is least sure of first (rare x margin)"

    def score(self, probs, labelled, features=None):
        return super().score(probs, labelled) * (1.0 - margins(probs) / 2)


class TailMargin(QueryStrategy):
    name = "tail-margin"
    help = (
        "the less-labelled classes' likely texts, least sure first (1 / (labelled + 3) x "
        "(1 - margin), x the feature length where it leans to the rare classes)"
    )

    def __init__(self, prior: float = PRIOR_LABELS):
        self.prior = prior  # the class weight's: 1 / (labelled + prior)

    def score(self, probs, labelled, features=None):
        worth = probs @ (1.0 / (labelled.astype(float) + self.prior)) * (1.0 - margins(probs))
        if features is not None and features.norm_lean(labelled) > LEAN:
            worth = worth * np.linalg.norm(features.pool, axis=1)
        return worth


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

    def select(self, probs, labelled, n, rng, features=None):
        predicted, gap = probs.argmax(1), margins(probs) + _jitter(rng, probs)
        queues = {
            c: list(np.flatnonzero(predicted == c)[np.argsort(gap[predicted == c])])
            for c in np.argsort(labelled, kind="stable")
        }
        return in_turns(queues, n)


class Auto(QueryStrategy):
    """Stands for another strategy on the data at hand (:func:`resolve_strategy`)."""

    name, help = "auto", f"{AUTO_RULE} (the default)"

    def select(self, probs, labelled, n, rng, features=None):
        raise GleeError("auto stands for another strategy: resolve it on the data first")


QUERY_STRATEGIES: dict[str, QueryStrategy] = {
    s.name: s for s in (Auto(), Random(), Margin(), Balanced(), Rare(), RareMargin(), TailMargin())
}


def resolve_strategy(strategy: str, has_tail: bool) -> str:
    """The strategy ``auto`` stands for on this data (:data:`AUTO_RULE`); an unknown name is an
    error listing the known ones."""
    if strategy not in QUERY_STRATEGIES:
        raise GleeError(
            f"--strategy must be one of {', '.join(QUERY_STRATEGIES)}, got {strategy!r}"
        )
    if strategy == "auto":
        return TailMargin.name if has_tail else Margin.name
    return strategy


def select(
    strategy: str,
    probs: np.ndarray,
    labelled: np.ndarray,
    seed: int = 1,
    features: PoolFeatures | None = None,
) -> np.ndarray:
    """Every row of ``probs`` in the order to label them, best first, by the strategy named (a
    resolved one, not ``auto``), reading ``features`` where it uses them: the first ``n`` are
    the ``n`` to label next."""
    if strategy not in QUERY_STRATEGIES:
        raise GleeError(f"unknown query strategy {strategy!r}")
    rng = np.random.default_rng(seed)
    return QUERY_STRATEGIES[strategy].select(probs, labelled, len(probs), rng, features)
