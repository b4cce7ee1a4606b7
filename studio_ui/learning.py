"""Learning from the pool, and what it gave: a quick compare (or the recommended head's
fine-tune) with the pool's pseudo-labels as a job, and Home's comparison of a version with its
parent (the texts added per class, tail F1 before and after with the seeds' spread, what random
texts would have been expected to give)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import streamlit as st

from glee_core.core.errors import GleeError
from glee_core.pool.files import picked_by

from .choice import current_choice, current_model, load_options
from .jobs import work_button
from .stores import all_runs, quick_compare_runs, recommendation_of
from .text import code, md


def self_training(dataset, pool: Path) -> None:
    """Learning from the pool with no label given: a quick compare of every head on the data
    with the pool's pseudo-labels, kept unless cross-validation on the labelled texts says they
    cost over 2 points (``train --pool --self-train auto``); Home then shows what it did.
    Once the data has a quick compare, its recommended head can be fine-tuned the same way."""
    from glee_core.models.config import TrainConfig  # noqa: PLC0415 (the engine's request types)
    from glee_core.models.methods import METHODS  # noqa: PLC0415 (the engine's request types)

    self_training_button(
        dataset,
        pool,
        list(METHODS),
        TrainConfig(mode="frozen"),
        "quick compare",
        "Learn from the rest: a quick compare with self-training",
    )
    head = finetunable_head(dataset)
    if head is not None:
        self_training_button(
            dataset,
            pool,
            [head],
            TrainConfig(mode="finetune"),
            "fine-tune",
            f"Fine-tune {head} with self-training",
        )


def finetunable_head(dataset) -> str | None:
    """The head the data's quick compare recommends fine-tuning (Home's "Fine-tune ..."
    step), or None before a quick compare."""
    runs = quick_compare_runs(dataset.id, current_model())
    rec = recommendation_of(runs) if runs else None
    step = rec.step("finetune-one") if rec is not None else None
    return step.heads[0] if step is not None else None


def self_training_button(dataset, pool: Path, methods, config, what: str, label: str) -> None:
    """One launch of ``methods`` with ``config`` on the data with the pool's pseudo-labels
    (``--self-train auto``): its button with the estimate, or its bar while it runs."""
    from glee_core.models.requests import TrainRequest  # noqa: PLC0415
    from glee_core.pool.options import SelfTrainOptions  # noqa: PLC0415

    request = TrainRequest(
        data=current_choice(),
        methods=methods,
        seeds=[1],
        model=current_model(),
        config=config,
        self_train=SelfTrainOptions(pool=str(pool), self_train="auto"),
    )
    work_button(
        request,
        f"{label} (and the pool's pass)",
        key=f"self-train-{config.mode}-{pool.name}",
        primary=False,
        dataset=dataset,
        help="Pseudo-labels of the pool (each class at most its labelled share) join the "
        "training texts - unless cross-validation on your labelled texts says they cost "
        "over 2 macro-F1 points (the job's log says which way). Measured at 10% labelled: "
        "tail F1 +4.6 / +5.5 / +2.1 on the demo / r8-1500 / r52-lt (BENCHMARKS.md).",
    )


def gain_table(
    base_runs,
    variant_runs,
    counts: dict,
    gained: dict,
    tail: list[str],
    what: str,
    suggested: set[str] | None = None,
) -> None:
    """Per class, the texts a variant added (``gained``) and the F1 before and after: each
    dataset's answer on Home (its recommended quick-mode head, or the best few averaged) on the
    same test texts, tail as the data was.
    ``suggested``: the strategies that picked the texts, where they were suggested and labelled
    (None: pseudo-labels). Where auto's strategy alone picked them, what random ones would
    have been expected to give (the backtest's ratio, measured for auto) is said beside the
    gain; else why it is not."""
    from glee_core.pool.labelling import before_after, random_share  # noqa: PLC0415 (numpy)
    from glee_core.pool.strategies import resolve_strategy  # noqa: PLC0415

    added = {c: n for c, n in gained.items() if n}
    st.caption(
        f"{sum(added.values())} {what} added: "
        + ", ".join(f"{md(c)} +{n}" for c, n in sorted(added.items(), key=lambda kv: -kv[1]))
        + "."
    )
    result = before_after(base_runs, variant_runs, counts, gained, tail)
    if result is None:
        return
    low, high = result.tail_f1, result.f1
    spreads = [
        f" ± {spread:.1f} over {n} seeds" if spread is not None else " (one seed)"
        for spread, n in zip(result.tail_spread, result.seeds, strict=True)
    ]
    if None in result.tail_spread:
        sure = (
            "one seed moves these by a point or two: train more seeds of both (the seeds "
            "step) to see the spread"
        )
    elif abs(low[1] - low[0]) <= max(result.tail_spread):
        sure = "the change is inside the seeds' spread: not a gain the data shows yet"
    else:
        sure = "the change is beyond the seeds' spread"
    st.markdown(
        f"Tail F1 **{low[0]:.1f}{spreads[0]} → {low[1]:.1f}{spreads[1]}** "
        f"({low[1] - low[0]:+.1f}), macro-F1 {high[0]:.1f} → {high[1]:.1f} "
        f"({high[1] - high[0]:+.1f}): {code(result.method_before)} before, "
        f"{code(result.method_after)} after, each Home's answer on its version (the "
        f"recommended head, or the best few averaged), on the same test texts; {sure}."
        + (
            " The recommendation changed head, so part of the change is the head's, not only "
            "the texts'."
            if result.method_after != result.method_before
            else ""
        )
    )
    gain = low[1] - low[0]
    measured = random_share(sum(added.values())) if gain > 0 else None
    # the backtest's ratio is the strategy's auto stood for there
    backtest = measured if measured and suggested == {measured.strategy} else None
    if suggested is not None and backtest is None and gain > 0:
        st.caption(
            "What random texts would have given is said for texts auto picked ("
            + (measured.strategy if measured else resolve_strategy("auto", True))
            + ", the backtest's); these were picked by "
            + (
                ", ".join(f"`{s}`" for s in sorted(suggested))
                or "a strategy the file does not name"
            )
            + "."
        )
    if backtest is not None:
        st.caption(
            f"Texts picked at random would have been expected to give about "
            f"+{backtest.expected(gain):.1f} of this +{gain:.1f}: in the backtest "
            f"({', '.join(backtest.sets)}; {backtest.seeds} seeds; 10% of every class labelled, "
            f"{backtest.added} texts added in rounds of 50) random texts gained "
            f"{backtest.share:.0%} of the tail F1 the suggested ones gained "
            f"(`{backtest.command}`)."
        )
    frame = pd.DataFrame(result.rows).sort_values(["group", "added"], ascending=[False, False])
    st.dataframe(
        frame,
        hide_index=True,
        column_config={
            "F1 before": st.column_config.NumberColumn(format="%.1f"),
            "F1 after": st.column_config.NumberColumn(format="%.1f"),
        },
    )


def added_panel(dataset) -> None:
    """Home, on a dataset with labelled pool texts added: what they did (:func:`gain_table`),
    once both have a quick compare; on the data itself, what self-training did where a quick
    compare with it ran (:func:`pseudo_panel`)."""
    choice = current_choice()
    if dataset is None:
        return
    if not choice.add:
        pseudo_panel(dataset)
        return
    try:
        base = load_options(replace(choice, add=None))
    except GleeError:
        return
    model = current_model()
    st.subheader("What the labelled texts did")
    before, after = quick_compare_runs(base.id, model), quick_compare_runs(dataset.id, model)
    counts = base.class_counts("train").to_dict()
    gained = {c: int(n) - counts.get(c, 0) for c, n in dataset.class_counts("train").items()}
    if not before or not after:
        missing = "the data as it was" if not before else "the data with them"
        added = sum(n for n in gained.values() if n)
        st.caption(
            f"{added} labelled text(s) added. Run the quick compare on {missing} too: "
            "the gain per class shows here once both have one."
        )
        return
    tail = base.head_tail()[1]
    picked = picked_by(choice.add)
    gain_table(before, after, counts, gained, tail, "labelled text(s)", suggested=picked)
    split_moved(base.head_tail(), dataset.head_tail())


def split_moved(split: tuple[list, list], own: tuple[list, list]) -> None:
    """Where the texts added moved a class across the head/tail line (``own``: the version's
    head and tail, by its training counts; ``split``: the data's), say so: the before/after
    above stays over the data's own split."""
    (head, tail), (own_head, own_tail) = split, own
    if set(own_tail) == set(tail):
        return
    moved = [f"{md(c)} (tail → head)" for c in tail if c in own_head]
    moved += [f"{md(c)} (head → tail)" for c in head if c in own_tail]
    st.caption(
        f"With the texts added this version's own split is {len(own_head)} head / "
        f"{len(own_tail)} tail classes (the data's: {len(head)} / {len(tail)}): "
        + ", ".join(moved)
        + ". The tail F1 above stays over the data's own tail classes, so before and after "
        "are over the same classes; the Results page scores this version by its own split."
    )


def pseudo_panel(dataset) -> None:
    """Home: where a quick compare with self-training ran on this data (its runs are a
    ``+pseudo-`` variant's), what the pseudo-labels did against the data's own compare."""
    from glee_core.pool.files import PSEUDO  # noqa: PLC0415 (the pool's engine: torch)

    model = current_model()
    variants = sorted(
        {r.dataset for r in all_runs(report=False) if r.dataset.startswith(dataset.id + PSEUDO)}
    )
    before = quick_compare_runs(dataset.id, model)
    if not variants or not before:
        return
    after = quick_compare_runs(variants[-1], model)
    if not after:
        return
    st.subheader("What self-training did")
    counts = dataset.class_counts("train").to_dict()
    trained = after[0].record.dataset.class_counts
    gained = {c: int(trained.get(c, 0)) - counts.get(c, 0) for c in counts}
    gain_table(before, after, counts, gained, dataset.head_tail()[1], "pseudo-label(s)")
    version = after[0].record.dataset
    split_moved(dataset.head_tail(), (version.head_classes, version.tail_classes))
    for said in after[0].record.dataset.warnings:  # what the rule kept, and why
        if said.startswith("self-training kept"):
            st.caption(md(said[0].upper() + said[1:]) + ".")
    st.caption(
        f"The runs with the pseudo-labels are {code(variants[-1])}'s (Results, with that "
        "dataset chosen on the Data page, has them all)."
    )
