"""Which head to use, chosen on held-out evidence (never test): the answer a compare ends on.

A quick compare trains every head (and, for plain-input heads, every pooling) on the frozen
backbone in seconds; fine-tuning is where the accuracy is, and costs minutes per head. Each
candidate - a (setting, head) pair, the pooling being part of the setting - is scored by what it
can be chosen by:

* ``dev``: its best dev score, mean over seeds (the runs' own selection metric);
* ``cv``: where the quick compare cross-validated its heads (a dev split small for its classes,
  :mod:`glee_core.train.selection`), the macro-F1 of their pooled out-of-fold predictions on
  train + dev. A tuned run (fine-tuned, LoRA, P-tuning v2) is put on the same scale by the lift
  tuning brought over the same head's quick-mode run on dev (its LP-FT stage: same head, pooling,
  seed and texts, so the two dev scores are paired): ``cv(head) + dev(tuned) - dev(quick)``.

:func:`ranked` orders candidates by that score, :func:`top_for_finetuning` picks the first few
that can be fine-tuned (the probes and cRT cannot), and :func:`recommend` says which to use, its
test scores over seeds, how often each contender wins across folds and seeds, which others are
within noise of it, and what to run next.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ..core.errors import GleeError
from ..models.methods import METHODS
from .ensemble import Ensemble, ensemble_of
from .metrics import within_noise
from .store import Run
from .tables import aggregate

FINETUNE_TOP = 3  # heads taken from a quick compare to fine-tuning
ENOUGH_SEEDS = 3  # below it the recommendation asks for more seeds first
CONTENDERS = 6  # the candidates whose wins across folds and seeds are counted
DEV, CV = "dev", "cv"


def _twin_key(run: Run) -> tuple:
    """What a tuned run shares with the quick-mode run of the same head it is paired with."""
    h = run.record.hyperparameters
    return (
        run.dataset,
        run.record.model.name,
        run.method,
        run.seed,
        h.pooling,
        h.max_length,
        h.limit,
        h.limit_strategy,
    )


def cv_scale(runs: list[Run]) -> dict[str, float]:
    """Each run's score on the cross-validation scale (%), where it has one: a quick-mode run's
    cross-validated macro-F1; a tuned run's quick-mode twin's (its LP-FT stage, or the quick run
    of the same head, pooling, seed and inputs) plus the lift tuning brought on dev over that
    twin. Runs without one are left out."""
    frozen = {r.run_id: r for r in runs if r.record.mode == "frozen" and r.metrics.cv}
    by_key = {_twin_key(r): r for r in frozen.values()}
    scores = {}
    for run in runs:
        dev = run.metrics.best_dev
        if run.run_id in frozen:
            scores[run.run_id] = 100 * run.metrics.cv.f1
        elif run.record.mode != "frozen" and dev is not None:
            twin = frozen.get(run.record.tuning.lp_ft_from or "") or by_key.get(_twin_key(run))
            if twin is not None and twin.metrics.best_dev is not None:
                scores[run.run_id] = 100 * (twin.metrics.cv.f1 + dev - twin.metrics.best_dev)
    return scores


@dataclass(frozen=True)
class Pick:
    """One candidate, a (setting, head) of a dataset's runs: its dev, cross-validated and test
    scores over seeds (%), and ``score``, what it is chosen by (``Recommendation.basis``)."""

    setting: str
    setting_label: str
    mode: str
    method: str
    pooling: str
    seeds: int
    dev: float
    dev_std: float
    f1: float
    f1_std: float
    tail_f1: float
    tail_f1_std: float
    score: float = float("nan")
    score_std: float = float("nan")  # over seeds; one seed: the folds' standard error
    wins: int = 0  # folds (of every seed the contenders share) where it scored best
    cells: int = 0


@dataclass(frozen=True)
class NextStep:
    """One next step of a recommendation: ``finetune-one`` (fine-tune the best head of a quick
    compare that can be), ``finetune`` (its top heads, racing on dev) or ``seeds`` (the top
    heads of its setting with :data:`ENOUGH_SEEDS` seeds); the heads it trains; the
    better-ranked heads a fine-tuning step passes over (fitted on the frozen features, they
    cannot be fine-tuned); and, once ``glee_core.train.next_steps`` made it, the
    ``TrainRequest`` that carries it out (None: not launchable in the same setting here)."""

    kind: str
    heads: tuple[str, ...]
    passed_over: tuple[str, ...] = ()
    request: object = None  # a glee_core.models.options.TrainRequest

    @property
    def finetunes(self) -> bool:
        return self.kind.startswith("finetune")


@dataclass(frozen=True)
class Recommendation:
    """The candidate best by ``basis`` (``dev`` or ``cv``) among a dataset's runs, the others
    within noise of it (``close``; empty when no spread is known), how many candidates there
    were, those left out of a cross-validated choice (``unscored``: stored without it), and the
    next steps (:class:`NextStep`; :func:`order_steps` orders them by cost); ``ensemble``:
    where the choice was cross-validated and the best few are within one standard error of each
    other, their probabilities averaged (:mod:`glee_core.runs.ensemble`), which is then the
    answer."""

    chosen: Pick
    close: tuple[Pick, ...]
    candidates: int
    steps: tuple[NextStep, ...]
    basis: str = DEV
    contenders: tuple[Pick, ...] = ()  # the best few by score, with their wins
    unscored: int = 0
    folds: int = 0
    ensemble: Ensemble | None = None

    def step(self, kind: str) -> NextStep | None:
        """Its next step of ``kind`` (``finetune-one``, ``finetune``, ``seeds``), if it has one."""
        return next((s for s in self.steps if s.kind == kind), None)

    @property
    def spread_known(self) -> bool:
        return self.chosen.seeds > 1 or self.chosen.score_std == self.chosen.score_std


def _picks(runs: list[Run]) -> tuple[list[Pick], str, int, int]:
    """Every candidate of ``runs`` with its score, the basis, the candidates left out (no score
    on the cross-validation scale) and the folds."""
    scale = cv_scale(runs)
    basis = CV if any(r.record.mode == "frozen" and r.metrics.cv for r in runs) else DEV
    folds = max((r.metrics.cv.folds for r in runs if r.metrics.cv), default=0)
    summary = aggregate(runs)
    groups: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        groups.setdefault((run.setting, run.method), []).append(run)
    picks, unscored = [], 0
    for _, row in summary.iterrows():
        members = groups[(row["setting"], row["method"])]
        first = members[0]
        if basis == CV:
            values = [scale[r.run_id] for r in members if r.run_id in scale]
            if len(values) < len(members):
                unscored += 1
                continue
            score = float(np.mean(values))
            std = float(np.std(values, ddof=1)) if len(values) > 1 else _fold_error(members)
        else:
            if row["dev_mean"] != row["dev_mean"]:
                continue
            score, std = row["dev_mean"], row["dev_std"]
        picks.append(
            Pick(
                row["setting"],
                first.record.setting_label,
                first.record.mode,
                row["method"],
                first.reads,
                int(row["seeds"]),
                row["dev_mean"],
                row["dev_std"],
                row["f1_mean"],
                row["f1_std"],
                row["tail_f1_mean"],
                row["tail_f1_std"],
                score,
                std,
            )
        )
    return picks, basis, unscored, folds


def _fold_error(members: list[Run]) -> float:
    """One seed's standard error from its folds (%): the spread of the fold scores over the
    square root of their number (the twin's, for a tuned run; NaN without folds)."""
    folds = [r.metrics.cv.fold_f1 for r in members if r.metrics.cv]
    if not folds or len(folds[0]) < 2:
        return float("nan")
    return 100 * float(np.std(folds[0], ddof=1)) / np.sqrt(len(folds[0]))


def _with_wins(picks: list[Pick], runs: list[Run]) -> list[Pick]:
    """``picks`` (the contenders, quick-mode ones scored by cross-validation) with how often each
    scored best across the folds of every seed they all have."""
    folds: dict[tuple[str, str], dict[int, list[float]]] = {}
    for run in runs:
        if run.metrics.cv:
            folds.setdefault((run.setting, run.method), {})[run.seed] = run.metrics.cv.fold_f1
    scored = [p for p in picks if (p.setting, p.method) in folds]
    if len(scored) < 2:
        return picks
    seeds = set.intersection(*(set(folds[(p.setting, p.method)]) for p in scored))
    wins = {(p.setting, p.method): 0 for p in scored}
    cells = 0
    for seed in sorted(seeds):
        rows = [folds[(p.setting, p.method)][seed] for p in scored]
        if len({len(row) for row in rows}) != 1:  # another number of folds: not comparable
            continue
        for column in np.array(rows).T:
            best = scored[int(np.argmax(column))]
            wins[(best.setting, best.method)] += 1
            cells += 1
    return [
        replace(
            p,
            wins=wins.get((p.setting, p.method), 0),
            cells=cells if (p.setting, p.method) in wins else 0,
        )
        for p in picks
    ]


def ranked(runs: list[Run]) -> pd.DataFrame:
    """One row per candidate of ``runs``, best first by what the choice uses (cross-validation
    where the compare made it, else dev): ``method``, ``pooling``, ``mode``, ``setting``,
    ``seeds``, ``score`` (%), ``dev``, ``f1`` and ``tail_f1`` (test, mean %); ties keep the
    registry's order."""
    picks, _, _, _ = _picks(runs)
    columns = ["method", "pooling", "mode", "setting", "seeds", "score", "dev", "f1", "tail_f1"]
    if not picks:
        return pd.DataFrame(columns=columns)
    order = {m: i for i, m in enumerate(METHODS)}
    frame = pd.DataFrame([{c: getattr(p, c) for c in columns} for p in picks])
    frame["_order"] = frame["method"].map(order).fillna(len(order))
    return (
        frame.sort_values(["score", "_order"], ascending=[False, True])
        .drop(columns="_order")
        .reset_index(drop=True)
    )


def top_for_finetuning(
    runs: list[Run], k: int = FINETUNE_TOP, pooling: str | None = None
) -> tuple[list[str], list[list[str]]]:
    """The ``k`` best heads of ``runs`` that can be fine-tuned, each once, and for each the
    better-ranked heads passed over because they cannot be (the probes and cRT, fitted on the
    frozen features); ``pooling``: only candidates reading it (or a template input, read at
    ``[MASK]`` whatever the pooling)."""
    out, passed, above = [], [], []
    for _, row in ranked(runs).iterrows():
        method = row["method"]
        if (
            len(out) == k
            or not (pooling is None or row["pooling"] in (pooling, "[MASK]"))
            or method in out
            or method not in METHODS
        ):
            continue
        if METHODS[method].supports_finetune:
            out.append(method)
            passed.append(list(above))
        elif method not in above:
            above.append(method)
    return out, passed


def recommend(runs: list[Run]) -> Recommendation | None:
    """The candidate to use among ``runs`` (one dataset, any settings), chosen by
    cross-validation where the quick compare made it, else on dev; None when nothing can be
    chosen by."""
    picks, basis, unscored, folds = _picks(runs)
    # best first; on a tie the frozen candidate first (a tuned one tied with it showed no lift on
    # dev: its tuning is not evidence), then the registry's order (the sort is stable)
    picks = sorted(picks, key=lambda p: (-p.score, p.mode != "frozen"))
    if not picks:
        return None
    contenders = _with_wins(picks[:CONTENDERS], runs)
    picks[:CONTENDERS] = contenders
    chosen = picks[0]
    close = tuple(
        p
        for p in picks[1:]
        if p.score == chosen.score  # a tie is close whether or not a spread is known
        or within_noise(chosen.score, chosen.score_std, p.score, p.score_std)
    )
    steps = []
    frozen = [r for r in runs if r.record.mode == "frozen"]
    if chosen.mode == "frozen":
        top, passed = top_for_finetuning(
            [r for r in frozen if r.record.model.name == _model(runs, chosen)],
            pooling=chosen.pooling if chosen.pooling != "[MASK]" else None,
        )
        if top:
            steps.append(NextStep("finetune-one", (top[0],), tuple(passed[0])))
        if len(top) > 1:
            steps.append(NextStep("finetune", tuple(top), tuple(passed[-1])))
    if chosen.seeds < ENOUGH_SEEDS:
        same = [r for r in runs if r.setting == chosen.setting]
        steps.append(NextStep("seeds", tuple(ranked(same)["method"].head(FINETUNE_TOP))))
    return Recommendation(
        chosen,
        close,
        len(picks),
        tuple(steps),
        basis,
        tuple(contenders),
        unscored,
        folds,
        ensemble_of(picks, runs) if basis == CV else None,
    )


FINETUNE_FIRST_MINUTES = 30.0  # a fine-tune that fits in this leads the next steps


def order_steps(steps, minutes: dict[str, float]) -> list[NextStep]:
    """A recommendation's next steps (:class:`NextStep`) in the order to offer them, given each
    kind's estimated ``minutes`` here: fine-tuning the best head leads when it fits in
    :data:`FINETUNE_FIRST_MINUTES` (it is where the accuracy is: +5 to +16 macro-F1 over quick
    mode on demo, r8-1500 and r52-lt, BENCHMARKS.md); past that, the cheaper steps come first,
    so the user sees what a few minutes buy before committing an hour. Ties keep the given
    order."""
    one = minutes.get("finetune-one", float("inf"))
    if one <= FINETUNE_FIRST_MINUTES:
        return sorted(steps, key=lambda step: not step.finetunes)
    return sorted(steps, key=lambda step: minutes.get(step.kind, float("inf")))


def recommended_first(runs: list[Run]) -> list[Run]:
    """``runs`` in the order a page offers them when it shows one: the recommended candidate's
    first (its seeds in order), then each other candidate's by their rank, so every page opens on
    the run the recommendation names."""
    order = ranked(runs)
    rank = {(row["setting"], row["method"]): i for i, row in order.iterrows()}
    return sorted(runs, key=lambda r: (rank.get((r.setting, r.method), len(rank)), r.seed))


def report_setting(runs: list[Run], asked: str | None = None) -> tuple[list[Run], str | None]:
    """The runs of one dataset a report (or any one-setting view) shows: those of ``asked`` (a
    setting, or its short id), else of the recommended candidate's setting, else of the newest
    run; with a note naming the others as ``--setting`` ids, or None when there was one."""
    settings: dict[str, Run] = {}
    for run in sorted(runs, key=lambda r: r.record.created, reverse=True):
        settings.setdefault(run.setting, run)
    listed = "; ".join(
        f"--setting {r.record.setting_id} ({r.record.setting_label})" for r in settings.values()
    )
    if asked is not None:
        found = [s for s, r in settings.items() if asked in (s, r.record.setting_id)]
        if not found:
            raise GleeError(f"no runs of the setting {asked!r}; the store holds: {listed}")
        return [r for r in runs if r.setting == found[0]], None
    if len(settings) < 2:
        return runs, None
    rec = recommend(runs)
    setting = rec.chosen.setting if rec is not None else next(iter(settings))
    why = "the recommended candidate's" if rec is not None else "the newest run's"
    others = "; ".join(
        f"--setting {r.record.setting_id} ({r.record.setting_label})"
        for s, r in settings.items()
        if s != setting
    )
    return (
        [r for r in runs if r.setting == setting],
        f"the store holds runs of {len(settings)} settings; this is {why} "
        f"({settings[setting].record.setting_label}); for another, pass {others}",
    )


def _model(runs: list[Run], pick: Pick) -> str:
    return next(r.record.model.name for r in runs if r.setting == pick.setting)
