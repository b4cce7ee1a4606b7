"""Which head to use, chosen on dev: the answer a compare ends on, and the step after it.

A quick compare trains every head on the frozen backbone in seconds; fine-tuning is where the
accuracy is, and costs minutes per head. :func:`ranked_on_dev` orders the methods of one setting
by their mean best dev score over seeds (never by test), :func:`top_for_finetuning` picks the
first few that can be fine-tuned (the probes and cRT cannot), and :func:`recommend` says which
(setting, head) to use, with its test scores over seeds, which others are within the seeds'
spread of it on dev, and what to run next.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from ..models.methods import METHODS
from .store import Run, aggregate

FINETUNE_TOP = 3  # heads taken from a quick compare to fine-tuning
ENOUGH_SEEDS = 3  # below it the recommendation asks for more seeds first


def ranked_on_dev(runs: list[Run]) -> pd.DataFrame:
    """One row per method of ``runs`` (one setting): ``method``, ``seeds``, ``dev`` (mean best
    dev score, the runs' selection metric), ``f1`` and ``tail_f1`` (test, mean), best dev
    first; ties keep the registry's order."""
    rows = [{"method": run.method, "dev": run.metrics.best_dev, "f1": run.metrics.f1,
             "tail_f1": run.metrics.tail_f1} for run in runs]
    if not rows:
        return pd.DataFrame(columns=["method", "seeds", "dev", "f1", "tail_f1"])
    frame = pd.DataFrame(rows)
    order = {m: i for i, m in enumerate(METHODS)}
    out = frame.groupby("method", sort=False).agg(
        seeds=("dev", "size"), dev=("dev", "mean"), f1=("f1", "mean"),
        tail_f1=("tail_f1", "mean")).reset_index()
    out["_order"] = out["method"].map(order).fillna(len(order))
    return out.sort_values(["dev", "_order"], ascending=[False, True]).drop(
        columns="_order").reset_index(drop=True)


def top_for_finetuning(runs: list[Run], k: int = FINETUNE_TOP) -> list[str]:
    """The ``k`` best methods on dev that can be fine-tuned."""
    ranked = ranked_on_dev(runs)
    return [m for m in ranked["method"] if m in METHODS and METHODS[m].supports_finetune][:k]


def within_noise(best_dev: float, best_std: float, dev: float, std: float) -> bool:
    """Whether a dev mean ``dev`` (± ``std``) is within the seeds' spread of the best one: the
    gap is at most the larger of the two sample stds (percent points). Never where neither has
    a spread (one seed each: NaN std): there is nothing to judge by."""
    spreads = [s for s in (best_std, std) if s == s]
    return bool(spreads) and best_dev - dev <= max(spreads)


@dataclass(frozen=True)
class Pick:
    """One (setting, head) of a dataset's runs, its dev and test scores over seeds (%)."""

    setting: str
    setting_label: str
    mode: str
    method: str
    seeds: int
    dev: float
    dev_std: float
    f1: float
    f1_std: float
    tail_f1: float
    tail_f1_std: float


@dataclass(frozen=True)
class Recommendation:
    """The (setting, head) best on dev among a dataset's runs, the others within the seeds'
    spread of it on dev (``close``; empty when the spread is unknown: one seed), and the next
    steps, first the one that gains most, each with the heads it trains: ``finetune`` (the top
    heads of a quick compare, fine-tuned) and ``seeds`` (the top heads of its setting with
    :data:`ENOUGH_SEEDS` seeds, so the spread is known)."""

    chosen: Pick
    close: tuple[Pick, ...]
    candidates: int
    steps: tuple[tuple[str, tuple[str, ...]], ...]

    @property
    def spread_known(self) -> bool:
        return self.chosen.seeds > 1


def _picks(runs: list[Run]) -> list[Pick]:
    summary = aggregate(runs)
    labels, modes = {}, {}
    for run in runs:
        labels.setdefault(run.setting, run.record.setting_label)
        modes.setdefault(run.setting, run.record.mode)
    return [Pick(row["setting"], labels[row["setting"]], modes[row["setting"]], row["method"],
                 int(row["seeds"]), row["dev_mean"], row["dev_std"], row["f1_mean"],
                 row["f1_std"], row["tail_f1_mean"], row["tail_f1_std"])
            for _, row in summary.iterrows() if row["dev_mean"] == row["dev_mean"]]


def recommend(runs: list[Run]) -> Recommendation | None:
    """The head to use among ``runs`` (one dataset, any settings), chosen on dev; None when no
    run recorded a dev score."""
    picks = sorted(_picks(runs), key=lambda p: -p.dev)  # stable: registry order on ties
    if not picks:
        return None
    chosen = picks[0]
    close = tuple(p for p in picks[1:]
                  if within_noise(chosen.dev, chosen.dev_std, p.dev, p.dev_std))
    same = [r for r in runs if r.setting == chosen.setting]
    steps = []
    if chosen.mode == "frozen" and (top := tuple(top_for_finetuning(same))):
        steps.append(("finetune", top))
    if chosen.seeds < ENOUGH_SEEDS:
        steps.append(("seeds", tuple(ranked_on_dev(same)["method"].head(FINETUNE_TOP))))
    return Recommendation(chosen, close, len(picks), tuple(steps))


def _score(mean: float, std: float) -> str:
    return f"{mean:.1f}" + ("" if std != std else f" ± {std:.1f}")


def recommendation_text(rec: Recommendation, literal: Callable[[str], str] = str) -> str:
    """The recommendation in a few Markdown sentences (method ids in code spans). The settings'
    labels hold the user's names (a backbone's folder, a dataset's split): ``literal`` makes
    them read as themselves where Markdown is rendered (the app passes its escaping)."""
    c = rec.chosen
    seeds = f"{c.seeds} seed{'s' if c.seeds != 1 else ''}"
    lines = [f"**Use `{c.method}`** ({literal(c.setting_label)}): best of {rec.candidates} on dev "
             f"({_score(c.dev, c.dev_std)}); on test, macro-F1 {_score(c.f1, c.f1_std)} and "
             f"tail F1 {_score(c.tail_f1, c.tail_f1_std)} over {seeds}."]
    if not rec.spread_known:
        lines.append("With one seed the spread between seeds is unknown, so a gap of a point "
                     "or two on dev may be noise.")
    elif rec.close:
        names = ", ".join(f"`{p.method}`" + (f" ({literal(p.setting_label)})"
                                             if p.setting != c.setting else "")
                          for p in rec.close[:6])
        more = f" and {len(rec.close) - 6} more" if len(rec.close) > 6 else ""
        lines.append(f"Within the seeds' spread of it on dev: {names}{more}; the data cannot "
                     "tell these apart.")
    else:
        lines.append("No other head is within the seeds' spread of it on dev.")
    return " ".join(lines)
