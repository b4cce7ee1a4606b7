"""Which heads to take further, chosen on dev: the step from a quick compare to fine-tuning.

A quick compare trains every head on the frozen backbone in seconds; fine-tuning is where the
accuracy is, and costs minutes per head. :func:`ranked_on_dev` orders the methods of one setting
by their mean best dev score over seeds (never by test), and :func:`top_for_finetuning` picks the
first few that can be fine-tuned (the probes and cRT cannot).
"""

from __future__ import annotations

import pandas as pd

from ..models.methods import METHODS
from .store import Run


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


def top_for_finetuning(runs: list[Run], k: int = 3) -> list[str]:
    """The ``k`` best methods on dev that can be fine-tuned."""
    ranked = ranked_on_dev(runs)
    return [m for m in ranked["method"] if m in METHODS and METHODS[m].supports_finetune][:k]
