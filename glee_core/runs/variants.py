"""Whether a variant of the data helped: training without the rows data health flagged
(``+without-``) or with self-training's pseudo-labels (``+pseudo-``), judged on dev against the
data's own recommendation (:mod:`glee_core.runs.recommend`). Home reads it."""

from __future__ import annotations

from ..data.splits import WITHOUT
from ..pool.files import PSEUDO
from .metrics import within_noise
from .recommend import Pick, Recommendation


def variant_base(dataset_id: str) -> str:
    """The dataset a variant was made from: ``+without-N-<digest>`` (training rows left out) or
    ``+pseudo-N-<digest>`` (self-training's pseudo-labels added); itself when neither."""
    return dataset_id.split(WITHOUT, 1)[0].split(PSEUDO, 1)[0]


def _beats(v: Pick, b: Pick) -> bool:
    """Does ``v`` win on dev beyond the seeds' spread (the same dev texts)?"""
    return v.dev > b.dev and not within_noise(v.dev, v.dev_std, b.dev, b.dev_std)


def dev_winner(base: Recommendation | None, variants: dict[str, Recommendation | None]) -> str:
    """Among the data's own recommendation (``base``) and its variants' (by dataset id), the id
    whose recommended candidate wins on **dev** beyond the seeds' spread (their dev texts are the
    same; cross-validated scores are not comparable: a variant's folds hold other training
    texts); ``""`` for the data's own when no variant beats it."""
    if base is None:
        return ""
    best, chosen = "", base.chosen
    for variant_id, rec in variants.items():
        if rec is not None and _beats(rec.chosen, chosen):
            best, chosen = variant_id, rec.chosen
    return best


def variant_line(
    base_id: str, base: Recommendation | None, variant_id: str, variant: Recommendation | None
) -> str | None:
    """Whether a variant helped, on **dev** (:func:`dev_winner` says why dev): training without
    the flagged rows, or with self-training's pseudo-labels. None until both have a
    recommendation."""
    if base is None or variant is None:
        return None
    b, v = base.chosen, variant.chosen
    gap = v.dev - b.dev
    best, other = (b, v) if b.dev >= v.dev else (v, b)
    noise = within_noise(best.dev, best.dev_std, other.dev, other.dev_std)
    pseudo = PSEUDO in variant_id
    verdict = (
        "the same score: the data cannot tell them apart"
        if round(gap, 1) == 0
        else "within the seeds' spread: the data cannot tell them apart"
        if noise
        else ("the pseudo-labels win on dev" if pseudo else "the data without them wins on dev")
        if gap > 0
        else (
            "the labelled texts alone do better on dev: leave the pseudo-labels out"
            if pseudo
            else "every row does better on dev: keep them"
        )
    )
    what = "With self-training's pseudo-labels" if pseudo else "Without the flagged training rows"
    return (
        f"{what} (`{variant_id}`), the recommended `{v.method}` "
        f"scores {v.dev:.1f} on dev against {b.dev:.1f} for `{b.method}` on `{base_id}` "
        f"({gap:+.1f}; the same dev texts): {verdict}."
    )
