"""The recommendation (``runs.recommend``) in words: what to use, what it was chosen by and its
test scores, how often it won across folds and seeds, what is within noise of it."""

from __future__ import annotations

from collections.abc import Callable

from ..core.errors import first_few
from ..models.config import POOLINGS
from .recommend import CV, DEV, Pick, Recommendation


def recommendation_text(rec: Recommendation, literal: Callable[[str], str] = str) -> str:
    """The recommendation in a few Markdown sentences (method ids in code spans). The settings'
    labels hold the user's names (a backbone's folder, a dataset's split): ``literal`` makes
    them read as themselves where Markdown is rendered (the app passes its escaping)."""
    by = _chosen_by(rec)
    lines = [_use(rec, by, literal)]
    c = rec.chosen
    if rec.basis == CV and c.cells:
        lines.append(
            ("It" if rec.ensemble is None else f"`{c.method}`{_pooled(c)}")
            + f" scored best in {c.wins} of the {c.cells} folds where the top "
            f"{len([p for p in rec.contenders if p.cells])} met"
            + "".join(
                f"; `{p.method}`{_pooled(p)} in {p.wins}" for p in rec.contenders[1:] if p.wins
            )
            + "."
        )
    lines += _close(rec, literal)
    if rec.unscored:
        lines.append(
            f"{rec.unscored} candidate(s) were left out of the choice: they have no "
            "cross-validation to be compared by (quick-mode runs stored before it, or "
            "tuned runs without a quick-mode run of the same head, pooling and inputs "
            "that has one); the Results page shows them."
        )
    return " ".join(lines)


def _chosen_by(rec: Recommendation) -> str:
    """What the chosen candidate was chosen by, with its score there."""
    c = rec.chosen
    if rec.basis != CV:
        return f"best of {rec.candidates} on dev ({_score(c.dev, c.dev_std)})"
    return (
        f"best of {rec.candidates} by {rec.folds}-fold cross-validation on train + dev "
        f"({_score(c.score, c.score_std)}"
        + (", with fine-tuning's lift on dev" if c.mode != "frozen" else "")
        + ")"
    )


def _use(rec: Recommendation, by: str, literal: Callable[[str], str]) -> str:
    """The first sentence: what to use (the chosen head, or the average of the top few), why
    (``by``) and its test scores."""
    c = rec.chosen
    seeds = f"{c.seeds} seed{'s' if c.seeds != 1 else ''}"
    if (e := rec.ensemble) is None:
        pooled = (
            f", {c.pooling} pooling"
            if c.pooling in POOLINGS and "pooling" not in c.setting_label
            else ""
        )
        return (
            f"**Use `{c.method}`** ({literal(c.setting_label)}{pooled}): {by}; on test, "
            f"macro-F1 {_score(c.f1, c.f1_std)} and tail F1 {_score(c.tail_f1, c.tail_f1_std)} "
            f"over {seeds}."
        )
    shared = f"{e.seeds} seed{'s' if e.seeds != 1 else ''}"
    return (
        f"**Use the average of the top {len(e.members)}**: "
        + ", ".join(
            f"`{p.method}`{_pooled(p)}"
            + (f" ({literal(p.setting_label)})" if p.mode != c.mode else "")
            for p in e.members
        )
        + f" are within one standard error of the {by}, so the data cannot "
        "tell them apart and the answer averages their probabilities: on test, "
        f"macro-F1 {_score(e.f1, e.f1_std)} and tail F1 {_score(e.tail_f1, e.tail_f1_std)} "
        f"over {shared}; the best, `{c.method}`{_pooled(c)}, alone: "
        f"{_score(c.f1, c.f1_std)} and {_score(c.tail_f1, c.tail_f1_std)} over {seeds}."
    )


def _close(rec: Recommendation, literal: Callable[[str], str]) -> list[str]:
    """What is within noise of the choice (or, with one seed, that the spread is unknown)."""
    c = rec.chosen
    names = first_few(
        [
            f"`{p.method}`{_pooled(p)}"
            + (f" ({literal(p.setting_label)})" if p.mode != c.mode else "")
            for p in rec.close
        ],
        6,
    )
    if not rec.spread_known:
        lines = [
            "With one seed the spread between seeds is unknown, so a gap of a point "
            "or two may be noise."
        ]
        if rec.close:  # ties, known without a spread: the pick shown is the first of them
            lines.append(
                f"{len(rec.close)} other candidate(s) score the same: {names}; the data "
                "cannot tell them apart."
            )
        return lines
    if rec.ensemble is not None:  # the members are named; the others within the spread
        members = {(p.setting, p.method) for p in rec.ensemble.members}
        others = [p for p in rec.close if (p.setting, p.method) not in members]
        if not others:
            return []
        return [
            "Also within its spread (over seeds, or one seed's folds): "
            + first_few([f"`{p.method}`{_pooled(p)}" for p in others], 6)
            + "."
        ]
    if rec.close:
        spread = (
            "the seeds' spread of it on dev"
            if rec.basis == DEV
            else "its spread (over seeds, or one seed's folds)"
        )
        return [f"Within {spread}: {names}; the data cannot tell these apart."]
    return ["No other candidate is within the spread of it."]


def _score(mean: float, std: float) -> str:
    return f"{mean:.1f}" + ("" if std != std else f" ± {std:.1f}")


def _pooled(pick: Pick) -> str:
    return f" ({pick.pooling})" if pick.pooling in POOLINGS else ""
