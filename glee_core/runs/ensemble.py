"""The answer when the data cannot tell the best few candidates apart: their probabilities
averaged.

With a few dozen candidates whose cross-validated scores sit within a point or two and folds of
a few texts per tail class, the best score is an optimistic, noisy pick (the winner's curse).
:func:`contenders` takes the candidates within one standard error of the best (its own or
theirs, the larger), at most :data:`ENSEMBLE_MOST`; :func:`ensemble_of` averages their test
probabilities at each seed they all have, from the runs' stored logits (nothing is trained or
scored again). ``bench/selection.py`` measured the answer it gives on eight long-tailed sets:
within one point of the best single candidate in hindsight on all eight, above it on five
(BENCHMARKS "How good is the choice?"). :class:`AveragedRun` reads it as the run pages read a
run; :class:`glee_core.serve.ensemble.EnsembleScorer` scores new text with it, and ``export
--run A,B,...`` writes it as one folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd
from scipy.special import softmax

from ..core.errors import GleeError
from .metrics import classification_metrics, shot_f1
from .record import MetricsRecord
from .store import Run

ENSEMBLE_MOST = 5  # contenders averaged, at most


@dataclass(frozen=True)
class Ensemble:
    """The contenders' probabilities averaged: its ``members`` (``Pick``s, best first) and
    ``answers``, their runs averaged at each seed every member has (seed order); its test scores
    over those seeds (%, mean and sample spread; NaN spread for one seed) and, per member, the
    run of the first seed (``runs``: what is exported and scores new text)."""

    members: tuple  # recommend.Pick, best first
    answers: tuple[AveragedRun, ...]

    @property
    def seeds(self) -> int:
        return len(self.answers)

    @property
    def runs(self) -> tuple[Run, ...]:
        return self.averaged.members

    @property
    def run_ids(self) -> list[str]:
        return [run.run_id for run in self.runs]

    @property
    def averaged(self) -> AveragedRun:
        """Its members' runs (the first shared seed) as the run pages read one run."""
        return self.answers[0]

    def _test(self, metric: str) -> np.ndarray:
        """``metric`` (%) of each answer on test, a seed each."""
        return np.array([100 * getattr(answer.metrics, metric) for answer in self.answers])

    @property
    def f1(self) -> float:
        return float(self._test("f1").mean())

    @property
    def f1_std(self) -> float:
        return _spread(self._test("f1"))

    @property
    def tail_f1(self) -> float:
        return float(self._test("tail_f1").mean())

    @property
    def tail_f1_std(self) -> float:
        return _spread(self._test("tail_f1"))


def _spread(values: np.ndarray) -> float:
    return float(values.std(ddof=1)) if len(values) > 1 else float("nan")


@dataclass(frozen=True)
class AveragedRun:
    """Runs of one dataset and seed with their test probabilities averaged, read as the run
    pages read a run (the Predictions page: its test predictions, per-class scores and confusion
    matrix, measured from the members' stored logits): ``run_id`` is the members' ids joined by
    commas, what ``predict`` and ``export --run`` take."""

    members: tuple[Run, ...]

    @property
    def run_id(self) -> str:
        return ",".join(run.run_id for run in self.members)

    @property
    def record(self):
        return self.members[0].record

    @property
    def classes(self) -> list[str]:
        return self.members[0].classes

    @property
    def seed(self) -> int:
        return self.members[0].seed

    @property
    def method(self) -> str:
        """What a chart's title names: the heads averaged."""
        return "the average of " + " + ".join(run.method for run in self.members)

    @cached_property
    def _probabilities(self) -> np.ndarray:
        return average_probabilities([run.logits for run in self.members])

    @cached_property
    def metrics(self) -> MetricsRecord:
        data = self.record.dataset
        gold = self.members[0].predictions["gold"].map({c: i for i, c in enumerate(data.classes)})
        values = classification_metrics(
            gold.to_numpy(),
            self._probabilities.argmax(1),
            data.classes,
            data.head_classes,
            data.tail_classes,
        )
        values.update(
            {f"{k}_f1": v for k, v in shot_f1(values["per_class"], data.class_counts).items()}
        )
        return MetricsRecord.from_dict(values, data.classes)

    @cached_property
    def predictions(self) -> pd.DataFrame:
        """The first member's test predictions with the average's class and confidence."""
        frame = self.members[0].predictions.copy()
        pred = self._probabilities.argmax(1)
        frame["pred"] = [self.classes[i] for i in pred]
        frame["confidence"] = self._probabilities.max(1).round(6)
        frame["correct"] = frame["pred"] == frame["gold"]
        return frame


def _error(pick) -> float:
    """A candidate's standard error on the cross-validation scale (%): its spread over seeds over
    the square root of their number; one seed's is its folds' already (0 where none is known)."""
    std = pick.score_std if pick.score_std == pick.score_std else 0.0
    return std / np.sqrt(pick.seeds) if pick.seeds > 1 else std


def contenders(picks) -> list:
    """Of ``picks`` (``recommend.Pick``, best first), those within one standard error of the
    best - its own or theirs, the larger - at most :data:`ENSEMBLE_MOST`, best first."""
    if not picks:
        return []
    best = picks[0]
    near = [p for p in picks if best.score - p.score <= max(_error(best), _error(p))]
    return near[:ENSEMBLE_MOST]


def average_probabilities(logits: list[np.ndarray]) -> np.ndarray:
    """The members' class probabilities (softmax of each one's logits), averaged."""
    return np.mean([softmax(np.asarray(x, dtype=np.float64), axis=1) for x in logits], axis=0)


def ensemble_test_scores(runs: list[Run]) -> dict[str, float]:
    """Macro-F1 and tail F1 (%) on the test split of ``runs``' probabilities averaged (runs of
    one dataset and seed), from their stored logits (:attr:`AveragedRun.metrics`)."""
    metrics = AveragedRun(tuple(runs)).metrics
    return {"f1": 100 * metrics.f1, "tail_f1": 100 * metrics.tail_f1}


def ensemble_of(picks, runs: list[Run]) -> Ensemble | None:
    """The ensemble of ``picks``' contenders (``recommend.Pick``, best first, all on the
    cross-validation scale) over ``runs`` (one dataset), averaged at every seed all of them have
    whose stored logits read (a broken file of a member's run leaves that seed out): None with
    fewer than two contenders or no such seed."""
    members = contenders(picks)
    if len(members) < 2:
        return None
    keys = [(p.setting, p.method) for p in members]
    by_seed: dict[int, dict[tuple[str, str], Run]] = {}
    for run in runs:
        if (run.setting, run.method) in keys:
            by_seed.setdefault(run.seed, {})[(run.setting, run.method)] = run
    answers = []
    for seed in sorted(seed for seed, found in by_seed.items() if len(found) == len(keys)):
        answer = AveragedRun(tuple(by_seed[seed][key] for key in keys))
        try:
            answer.metrics  # noqa: B018 (read now: a broken file leaves the seed out)
        except GleeError:
            continue
        answers.append(answer)
    return Ensemble(tuple(members), tuple(answers)) if answers else None
