"""The results' charts: per-class F1 head -> tail, head vs tail (and the shot buckets), the
paper's reported numbers beside ours, and post-hoc calibration's effect."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from ..models.methods import METHODS, method_label, registry_order
from ..runs.metrics import SHOT_BUCKETS, shot_bucket
from ..runs.paper import NEAREST_REFERENCE, paper_cells
from ..runs.recommend import ranked
from ..runs.record import METRIC_TITLES
from ..runs.store import Run
from ..runs.tables import aggregate
from .style import (
    APP_WIDTH,
    BUCKET_COLORS,
    CLASS_STEP,
    FACET_GAP,
    FILL_WIDTH,
    GROUP_TITLES,
    MARGIN,
    REFERENCE_BASELINE,
    ROW_LABEL_LIMIT,
    SHOT_GROUP_COLORS,
    STRIP_WIDTH,
    _class_method_grid,
    _class_row_axis,
    _class_rows,
    _class_table,
    _group_color,
    _label_width,
    _per_class_rows,
    _pooled_note,
    pool_rare_classes,
)

# --------------------------------------------------------------------------------------------
# Results


def per_class_f1_frame(runs: list[Run]) -> pd.DataFrame:
    """Per-class test F1 (mean over seeds) with each class's training count and group."""
    rows = []
    for group, fields in _per_class_rows(runs):
        support = group[0].metrics.per_class[fields["class"]].support
        # a class with no test text (kept in training only) has no F1: blank, not 0
        f1 = [r.metrics.per_class[fields["class"]].f1 for r in group] if support else [np.nan]
        rows.append(
            {**fields, "f1": float(np.mean(f1)), "test support": support, "seeds": len(group)}
        )
    return pd.DataFrame(rows)


def chart_per_class_f1(
    runs: list[Run], highlight: str | None = None, width: int = APP_WIDTH
) -> alt.Chart:
    """Per-class test F1 (mean over seeds) as a grid: one row per class, head (top) to tail,
    one column per method (its id; the full name in the tooltip), the value printed in each cell
    while the columns are wide enough. The grid fits ``width`` from 1 to 19+ methods and keeps
    every class's label from 2 to 120+ classes (the page grows down instead); a strip on the left
    marks head / tail and the many / medium / few bucket; ``highlight`` outlines one class's
    row."""
    frame = pool_rare_classes(per_class_f1_frame(runs), mean=["f1"], total=["test support"])
    frame["shot"] = frame["count"].map(shot_bucket)
    strip = _class_rows(frame)
    strips = (
        alt.Chart(strip[strip["method"] == strip["method"].iloc[0]])
        .transform_fold(["group", "shot"], as_=["kind", "bucket"])
        .mark_rect()
        .encode(
            x=alt.X(
                "kind:N",
                sort=["group", "shot"],
                title=None,
                axis=alt.Axis(orient="top", labelAngle=-90, labelOverlap=False),
            ),
            y=_class_row_axis(strip),
            color=alt.Color(
                "bucket:N",
                title="class group",
                scale=SHOT_GROUP_COLORS,
                legend=alt.Legend(orient="bottom", direction="vertical"),
            ),
            tooltip=["class", "count", "group", "shot"],
        )
        .properties(width=STRIP_WIDTH, height=alt.Step(CLASS_STEP))
    )
    grid = _class_method_grid(
        strip,
        "f1",
        width - MARGIN - STRIP_WIDTH - 4 - _label_width(strip["row"], ROW_LABEL_LIMIT),
        color=alt.Color(
            "f1:Q",
            title="test F1",
            scale=alt.Scale(domain=[0, 1], scheme="blues"),
            legend=alt.Legend(orient="bottom", direction="horizontal"),
        ),
        tooltip=[
            "paper row",
            "class",
            "count",
            "group",
            "shot",
            alt.Tooltip("f1:Q", format=".3f"),
            "test support",
            "seeds",
        ],
        text_color=alt.condition(alt.datum.f1 > 0.6, alt.value("white"), alt.value("black")),
        highlight=highlight,
        row_axis=False,
    )
    return (
        alt.hconcat(strips, grid, spacing=4)
        .resolve_scale(color="independent")
        .properties(
            title="Per-class test F1 (mean over seeds), classes head → tail" + _pooled_note(frame)
        )
    )


# The class x method grids (per-class F1, weight norms past 30 classes): a row per class, a
# column per method, fitted to the width they are given
def summary_frame(runs: list[Run]) -> pd.DataFrame:
    frame = aggregate(runs)
    frame["paper row"] = frame["method"].map(method_label)
    return frame


def head_tail_frame(runs: list[Run]) -> pd.DataFrame:
    """Mean ± std F1 per method on the head and tail classes and the many / medium / few-shot
    buckets, one row per method x group; ``F1`` is NaN where a group has no test class."""
    frame = summary_frame(runs)
    counts = runs[0].record.dataset.class_counts
    head = set(runs[0].record.dataset.head_classes)
    sizes = {
        "head_f1": sum(c in head for c in counts),
        "tail_f1": sum(c not in head for c in counts),
        **{
            f"{name}_f1": sum(shot_bucket(n) == name for n in counts.values())
            for name, _, _ in SHOT_BUCKETS
        },
    }
    rows = []
    for key, title in GROUP_TITLES.items():
        size = sizes[key]
        panel = (
            f"{title}\n{size} class{'es' if size != 1 else ''}" if size else f"{title}\nno class"
        )
        for _, row in frame.iterrows():
            mean, std = row.get(f"{key}_mean", np.nan), row.get(f"{key}_std", np.nan)
            rows.append(
                {
                    "method": row["method"],
                    "paper row": row["paper row"],
                    "group": key,
                    "panel": panel,
                    "F1": mean,
                    "std": std,
                    "low": mean - std if std == std else np.nan,
                    "high": mean + std if std == std else np.nan,
                    "note": "" if mean == mean else "no test class",
                }
            )
    return pd.DataFrame(rows)


def chart_head_tail(runs: list[Run], width: int = APP_WIDTH) -> alt.Chart:
    """Head / tail F1 and many / medium / few-shot F1 per method (mean over seeds; the black
    line spans ± std; the dashed line is the class-balanced probe, the baseline to beat).
    One panel per group, methods (by id; the full name in the tooltip) down the side, the
    panels sharing ``width`` (wrapping to a second row where they would be under 110 px): legible
    from 1 to 19+ methods; a group with no class is said so in its title ("no class"), one with
    no test example in its bars."""
    frame = head_tail_frame(runs)
    order = registry_order(frame["method"])
    panels = list(dict.fromkeys(frame["panel"]))
    labels = _label_width(order, 160)
    columns = len(panels)
    while columns > 1 and (width - MARGIN - labels) / columns - FACET_GAP < 110:
        columns -= 1
    panel = int((width - MARGIN - labels) / columns - FACET_GAP)
    y = alt.Y("method:N", sort=order, title=None, axis=alt.Axis(labelLimit=160, labelOverlap=False))
    x = alt.X(
        "F1:Q",
        title="macro-F1 (%)",
        scale=alt.Scale(domain=[0, 100]),
        axis=alt.Axis(values=[0, 25, 50, 75, 100]),
    )
    base = alt.Chart().encode(y=y)
    bars = base.mark_bar(height={"band": 0.7}).encode(
        x=x,
        color=alt.Color("group:N", scale=BUCKET_COLORS, legend=None),
        tooltip=[
            "paper row",
            "panel",
            alt.Tooltip("F1:Q", format=".1f"),
            alt.Tooltip("std:Q", format=".1f"),
        ],
    )
    errors = base.mark_rule(color="black", clip=True).encode(x="low:Q", x2="high:Q")
    empty = base.mark_text(align="left", dx=4, color="#666", fontSize=11).encode(
        x=alt.value(0), text="note:N"
    )
    layers = [bars, errors, empty]
    if REFERENCE_BASELINE in set(frame["method"]) and frame["method"].nunique() > 1:
        layers.append(
            alt.Chart()
            .mark_rule(strokeDash=[5, 3], color="#54a24b", size=2)
            .encode(x="F1:Q")
            .transform_filter(alt.datum.method == REFERENCE_BASELINE)
        )
    return (
        alt.layer(*layers, data=frame)
        .properties(width=panel, height=alt.Step(18))
        .facet(
            facet=alt.Facet(
                "panel:N",
                sort=panels,
                title=None,
                header=alt.Header(
                    labelFontWeight="bold", labelFontSize=11, labelExpr="split(datum.label, '\\n')"
                ),
            ),
            columns=columns,
            spacing=FACET_GAP,
        )
        .properties(title="F1 by class group: head / tail and many / medium / few shot (%)")
    )


# --------------------------------------------------------------------------------------------
# The paper's own results (its Tables 2, 3 and 5), with the user's runs beside them


def paper_results_frame(table: int, metric: str, runs: list[Run] | None = None) -> pd.DataFrame:
    """One row per method x dataset (and AVG) of a paper table: the paper's mean and its ± (the
    sample std), ``source`` ``paper``; plus, for the datasets ``runs`` cover (R8 in R52's panel,
    its nearest), our mean and sample std with ``source`` ``ours``."""
    cells = paper_cells()
    cells = cells[(cells["table"] == table) & (cells["metric"] == metric)]
    frame = pd.DataFrame(
        {
            "method": cells["method"],
            "dataset": cells["dataset"].str.upper(),
            "mean": cells["mean"],
            "std": cells["std"],
            "source": "paper",
        }
    )
    if runs:
        ours = aggregate([r for r in runs if r.method in set(cells["method"])])
        if len(ours):
            ours = pd.DataFrame(
                {
                    "method": ours["method"],
                    "dataset": ours["dataset"]
                    .map(lambda d: NEAREST_REFERENCE.get(d, d))
                    .str.upper(),
                    "mean": ours[f"{metric}_mean"],
                    "std": ours[f"{metric}_std"],
                    "source": "ours (" + ours["dataset"] + ")",
                }
            )
            frame = pd.concat([frame, ours], ignore_index=True)
    frame["paper row"] = frame["method"].map(method_label)
    frame["low"], frame["high"] = frame["mean"] - frame["std"], frame["mean"] + frame["std"]
    return frame.reset_index(drop=True)


def chart_paper_results(table: int, metric: str, runs: list[Run] | None = None) -> alt.Chart:
    """A paper table as bars: one panel per dataset (AVG last), one bar per method with its ±
    as an error bar; our runs of a covered dataset as black diamonds (with their ±)."""
    frame = paper_results_frame(table, metric, runs)
    paper = frame[frame["source"] == "paper"]
    order = [method_label(m) for m in dict.fromkeys(paper["method"])]
    columns = list(dict.fromkeys(paper["dataset"]))
    x = alt.X("mean:Q", title=f"{METRIC_TITLES[metric]} (%)", scale=alt.Scale(zero=True))
    y = alt.Y("paper row:N", sort=order, title=None, axis=alt.Axis(labelLimit=260))
    tooltip = [
        "paper row",
        "dataset",
        "source",
        alt.Tooltip("mean:Q", format=".1f"),
        alt.Tooltip("std:Q", format=".1f"),
    ]
    base = alt.Chart(frame)
    layers = [
        base.transform_filter(alt.datum.source == "paper")
        .mark_bar(color="#9ecae1")
        .encode(x=x, y=y, tooltip=tooltip),
        base.transform_filter(alt.datum.source == "paper")
        .mark_rule(color="#08519c")
        .encode(x="low:Q", x2="high:Q", y=y),
        base.transform_filter(alt.datum.source != "paper")
        .mark_rule(color="black")
        .encode(x="low:Q", x2="high:Q", y=y),
        base.transform_filter(alt.datum.source != "paper")
        .mark_point(shape="diamond", filled=True, color="black", size=60)
        .encode(x=x, y=y, tooltip=tooltip),
    ]
    # fixed sizes (not steps): the app fits a chart to its width, which would squeeze steps
    return (
        alt.layer(*layers)
        .properties(width=170, height=22 * len(order))
        .facet(
            facet=alt.Facet("dataset:N", sort=columns, title=None),
            columns=3,
        )
        .properties(
            title=f"Table {table}: {METRIC_TITLES[metric]}, the paper's mean ± std "
            "(bars) and ours (black diamonds)"
        )
    )


def chart_paper_head_tail_gap(table: int) -> alt.Chart:
    """Head F1 - Tail F1 per method, averaged over the table's datasets (the paper's AVG): how
    much each head favours the head classes. Prompt-tuning and pt. LN have the smallest gaps."""
    cells = paper_cells()
    avg = cells[(cells["table"] == table) & (cells["dataset"] == "avg")]
    wide = avg.pivot_table(index="method", columns="metric", values="mean")
    wide = wide.reindex(list(dict.fromkeys(avg["method"])))
    frame = pd.DataFrame(
        {
            "paper row": [method_label(m) for m in wide.index],
            "gap": wide["head_f1"] - wide["tail_f1"],
            "head_f1": wide["head_f1"],
            "tail_f1": wide["tail_f1"],
        }
    )
    return (
        alt.Chart(frame)
        .mark_bar(color="#f58518")
        .encode(
            x=alt.X("gap:Q", title="Head F1 − Tail F1 (points, AVG)"),
            y=alt.Y(
                "paper row:N",
                sort=list(frame["paper row"]),
                title=None,
                axis=alt.Axis(labelLimit=260),
            ),
            tooltip=[
                "paper row",
                alt.Tooltip("head_f1:Q", format=".1f"),
                alt.Tooltip("tail_f1:Q", format=".1f"),
                alt.Tooltip("gap:Q", format=".1f"),
            ],
        )
        .properties(
            width=560, height=alt.Step(22), title=f"Table {table}: how far the tail trails the head"
        )
    )


# --------------------------------------------------------------------------------------------
# Post-hoc calibration


def calibration_delta_frame(run: Run, before: dict, after: dict) -> pd.DataFrame:
    """Per-class test F1 before and after a calibration, classes head to tail."""
    classes = _class_table(run)
    return classes.assign(
        before=[before["per_class"][c]["f1"] for c in classes["class"]],
        after=[after["per_class"][c]["f1"] for c in classes["class"]],
        delta=lambda f: 100 * (f["after"] - f["before"]),
    )


def chart_calibration_delta(
    run: Run, before: dict, after: dict, title: str, width: int = APP_WIDTH
) -> alt.Chart:
    """The change in each class's test F1 (points), a row per class, head (top) to tail:
    logit adjustment and τ-norm should lift the tail and may cost the head. Rows, not columns,
    so 2 or 1,500 classes keep their names (past :data:`CLASS_ROWS` the rarest are pooled)."""
    frame = pool_rare_classes(
        calibration_delta_frame(run, before, after), mean=["before", "after", "delta"], by=None
    )
    frame = _class_rows(frame)
    labels = _label_width(frame["row"], ROW_LABEL_LIMIT)
    y = _class_row_axis(frame)
    bars = (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            y=y,
            x=alt.X("delta:Q", title="Δ test F1 (points)"),
            color=_group_color(),
            tooltip=[
                "class",
                "count",
                "group",
                alt.Tooltip("before:Q", format=".3f"),
                alt.Tooltip("after:Q", format=".3f"),
                alt.Tooltip("delta:Q", format="+.1f"),
            ],
        )
    )
    zero = alt.Chart(pd.DataFrame({"x": [0]})).mark_rule(color="black").encode(x="x:Q")
    return alt.layer(bars, zero).properties(
        title=title + _pooled_note(frame),
        width=min(560, width - labels - 40),
        height=alt.Step(CLASS_STEP),
    )


def chart_calibration_curve(
    curve: dict[float, float], chosen: float, current: float, metric: str
) -> alt.Chart:
    """The dev metric against the strength; the dev-chosen value and the slider's marked."""
    frame = pd.DataFrame({"strength": list(curve), "dev": [100 * v for v in curve.values()]})
    line = (
        alt.Chart(frame)
        .mark_line(point=True)
        .encode(
            x=alt.X("strength:Q", title="strength"),
            y=alt.Y("dev:Q", title=f"dev {METRIC_TITLES[metric]} (%)", scale=alt.Scale(zero=False)),
            tooltip=[alt.Tooltip("strength:Q", format=".1f"), alt.Tooltip("dev:Q", format=".1f")],
        )
    )
    marks = pd.DataFrame({"strength": [chosen, current], "what": ["chosen on dev", "shown below"]})
    rules = (
        alt.Chart(marks)
        .mark_rule(strokeDash=[4, 3])
        .encode(
            x="strength:Q",
            color=alt.Color("what:N", title=None, scale=alt.Scale(range=["#54a24b", "#e45756"])),
        )
    )
    return alt.layer(line, rules).properties(
        height=180, title="Dev metric against the strength", **FILL_WIDTH
    )


def candidates_frame(compared: list[Run]) -> pd.DataFrame:
    """The quick compare's candidates (``compared``, its stored runs), best first as the choice
    ranks them (cross-validation or dev, never test): the head (its id and paper row), what it
    reads, the score that chose, dev, test macro-F1 and tail F1 (%), its seeds."""
    by_cv = any(r.metrics.cv for r in compared)
    order = ranked(compared)
    shown = order.assign(  # the id first: a cut label keeps what tells heads apart
        method=lambda f: f["method"].map(
            lambda m: f"{m} · {METHODS[m].paper_row}" if m in METHODS else method_label(m)
        ),
        **{c: lambda f, c=c: f[c].round(1) for c in ("score", "dev", "f1", "tail_f1")},
    )
    return shown[["method", "pooling", "score", "dev", "f1", "tail_f1", "seeds"]].rename(
        columns={
            "method": "Method",
            "pooling": "Reads",
            "seeds": "Seeds",
            "score": "CV F1 (chooses, %)" if by_cv else "Dev F1 (chooses, %)",
            "dev": "Dev F1 (%)",
            "f1": "Test macro-F1 (%)",
            "tail_f1": "Test tail F1 (%)",
        }
    )
