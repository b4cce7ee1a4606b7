"""The diagnostics' weight-norm charts, the paper's Figure 3 and what explains it: the per-class
norm of the predictor's rows, the norm against the class's training count, and the norm along
training."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from ..models.methods import method_label, registry_order
from ..runs.store import Run
from .style import (
    APP_WIDTH,
    FACET_GAP,
    FILL_WIDTH,
    MARGIN,
    PANEL_AXIS,
    ROW_LABEL_LIMIT,
    _class_method_grid,
    _class_rows,
    _class_table,
    _group_color,
    _highlight,
    _label_width,
    _per_class_rows,
    _pooled_note,
    pool_rare_classes,
)


def weight_norm_frame(runs: list[Run]) -> pd.DataFrame:
    """Per-class norm of the predictor rows (prompt: averaged label-word decoder rows), mean over
    seeds."""
    rows = [
        {**fields, "norm": float(np.mean([r.weight_norms[fields["class"]] for r in group]))}
        for group, fields in _per_class_rows(runs)
    ]
    return pd.DataFrame(rows)


def chart_weight_norms(
    runs: list[Run], highlight: str | None = None, width: int = APP_WIDTH
) -> alt.Chart:
    """Figure 3: per-class weight-norm bars, classes head to tail, one panel per method, each
    panel on its own axis (a probe's norms of 6 would flatten a trained head's 0.6-1.3, and the
    head → tail slope is the point); panels wrap to fit ``width``. Every panel names every
    class up to 30 classes; beyond that the bars become a grid (a row per class, a column per
    method, colour against the method's mean norm, the norm printed), so 120 classes stay
    legible."""
    frame = weight_norm_frame(runs)
    order = list(dict.fromkeys(frame.sort_values("rank")["class"]))
    tooltip = ["paper row", "class", "count", "group", alt.Tooltip("norm:Q", format=".3f")]
    if len(order) > 30:
        frame["relative"] = frame["norm"] / frame.groupby("method")["norm"].transform("mean")
        frame = _class_rows(pool_rare_classes(frame, mean=["norm", "relative"]))
        grid = _class_method_grid(
            frame,
            "norm",
            width - MARGIN - _label_width(frame["row"], ROW_LABEL_LIMIT),
            color=alt.Color(
                "relative:Q",
                title="‖w_c‖ / method mean",
                scale=alt.Scale(scheme="redblue", reverse=True, domainMid=1),
                legend=alt.Legend(orient="bottom", direction="horizontal"),
            ),
            tooltip=tooltip,
            highlight=highlight,
        )
        return grid.properties(
            title="Per-class weight norms (head → tail; colour: against the method's mean)"
            + _pooled_note(frame)
        )
    panel = max(160, 14 * len(order))
    two = (width - MARGIN) // 2 - PANEL_AXIS - FACET_GAP  # a panel's room, two to a row
    if panel > two >= 10 * len(order):  # a narrow page: two panels a row, 10 px a class,
        panel = max(two, 120)  # rather than one narrow column a page long
    columns = max(
        1, min(frame["method"].nunique(), (width - MARGIN) // (panel + PANEL_AXIS + FACET_GAP))
    )
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X(
                "class:N",
                sort=order,
                title=None,
                axis=alt.Axis(labelAngle=-60, labelOverlap=False, labelFontSize=9, labelLimit=90),
            ),
            y=alt.Y("norm:Q", title="‖w_c‖", axis=alt.Axis(tickCount=4, titleFontSize=10)),
            color=_group_color(),
            opacity=_highlight(highlight),
            tooltip=tooltip,
        )
        .properties(width=panel, height=130)
        .facet(
            facet=alt.Facet(
                "method:N",
                sort=registry_order(frame["method"]),
                title=None,
                header=alt.Header(labelFontSize=11, labelFontWeight="bold"),
            ),
            columns=columns,
            spacing=FACET_GAP,
        )
        .resolve_scale(y="independent")
        .resolve_axis(x="independent")
        .properties(title="Per-class weight norms (head → tail; each panel on its own axis)")
    )


def norm_count_frame(runs: list[Run]) -> pd.DataFrame:
    """Per class and method: training count and the predictor norm relative to the method's
    mean norm (mean over seeds), with each method's fitted slope against log10(count)."""
    frame = weight_norm_frame(runs)
    frame = frame[frame["count"] > 0].copy()
    frame["relative norm"] = frame["norm"] / frame.groupby("method")["norm"].transform("mean")
    slopes = {
        m: float(np.polyfit(np.log10(g["count"]), g["relative norm"], 1)[0])
        if len(g) >= 3 and g["count"].nunique() > 1
        else float("nan")
        for m, g in frame.groupby("method")
    }
    frame["slope"] = frame["method"].map(slopes)
    frame["panel"] = [
        f"{m}: slope {s:+.2f}" if s == s else f"{m}: no slope"
        for m, s in zip(frame["method"], frame["slope"], strict=True)
    ]
    return frame


def chart_norm_vs_count(runs: list[Run], width: int = APP_WIDTH) -> alt.Chart:
    """Figure 3 in one glance: each class's predictor norm (relative to its method's mean)
    against its training count (log scale), one small panel per method with its fitted line
    and slope in the panel's title, head and tail classes coloured. Flat (slope near 0): the
    classifier does not favour frequent classes. Panels on their own y axes (a probe's spread
    would flatten every other), wrapped to fit ``width``."""
    frame = norm_count_frame(runs)
    panels = [
        frame.loc[frame["method"] == m, "panel"].iloc[0] for m in registry_order(frame["method"])
    ]
    columns = max(1, min(len(panels), (width - MARGIN) // 250))
    panel = int((width - MARGIN) / columns - PANEL_AXIS - FACET_GAP)
    low, high = float(frame["count"].min()), float(frame["count"].max())
    x = alt.X(
        "count:Q",
        title="training examples (log)",
        scale=alt.Scale(type="log", domain=[low, max(high, low * 1.5)], nice=False),
        axis=alt.Axis(tickCount=4, format="~s"),
    )
    y = alt.Y(
        "relative norm:Q",
        title="‖w_c‖ / mean",
        scale=alt.Scale(zero=False),
        axis=alt.Axis(tickCount=4),
    )
    points = (
        alt.Chart()
        .mark_point(filled=True, size=28, opacity=0.8)
        .encode(
            x=x,
            y=y,
            color=_group_color(),
            tooltip=[
                "paper row",
                "class",
                "count",
                alt.Tooltip("norm:Q", format=".3f"),
                alt.Tooltip("relative norm:Q", format=".2f"),
                alt.Tooltip("slope:Q", format="+.3f"),
            ],
        )
    )
    fits = (
        alt.Chart()
        .transform_regression("count", "relative norm", method="log")
        .mark_line(color="black")
        .encode(x=x, y=y)
    )
    return (
        alt.layer(points, fits, data=frame)
        .properties(width=panel, height=110)
        .facet(
            facet=alt.Facet(
                "panel:N",
                sort=panels,
                title=None,
                header=alt.Header(labelFontSize=11, labelFontWeight="bold"),
            ),
            columns=columns,
            spacing=FACET_GAP,
        )
        .resolve_scale(y="independent")
        .properties(
            title=[
                "Per-class weight norm against training count",
                "(each panel: the fitted slope against log10 count)",
            ]
        )
    )


def norm_evolution_frame(run: Run) -> pd.DataFrame:
    """The per-class predictor norms at every dev evaluation of a run (empty for runs stored
    before histories kept them)."""
    classes = _class_table(run)
    index = {c: i for i, c in enumerate(run.classes)}
    rows = []
    for record in run.history:
        norms = record.get("weight_norms")
        if not norms:
            continue
        for _, c in classes.iterrows():
            rows.append(
                {
                    "evaluation": f"ep {record['epoch']} · step {record.get('step', '')}",
                    "step": record.get("step", record["epoch"]),
                    "class": c["class"],
                    "rank": c["rank"],
                    "group": c["group"],
                    "norm": norms[index[c["class"]]],
                }
            )
    return pd.DataFrame(rows, columns=["evaluation", "step", "class", "rank", "group", "norm"])


def chart_norm_evolution(run: Run) -> alt.Chart:
    """How each class's predictor norm grows while training: classes head to tail (rows),
    dev evaluations (columns)."""
    frame = norm_evolution_frame(run)
    order = list(dict.fromkeys(frame.sort_values("rank")["class"]))
    evaluations = list(dict.fromkeys(frame.sort_values("step")["evaluation"]))
    return (
        alt.Chart(frame)
        .mark_rect()
        .encode(
            x=alt.X(
                "evaluation:N",
                sort=evaluations,
                title="dev evaluation",
                axis=alt.Axis(labelAngle=-45, labelOverlap="greedy"),
            ),
            y=alt.Y(
                "class:N",
                sort=order,
                title="class (head → tail)",
                axis=alt.Axis(
                    labelLimit=160, labelOverlap=False, labelFontSize=10 if len(order) <= 40 else 9
                ),
            ),
            color=alt.Color("norm:Q", title="‖w_c‖", scale=alt.Scale(scheme="viridis")),
            tooltip=["class", "group", "evaluation", alt.Tooltip("norm:Q", format=".3f")],
        )
        .properties(
            title=f"Weight norms while training ({method_label(run.method)}, seed {run.seed})",
            height=alt.Step(16 if len(order) <= 40 else 12),
            **FILL_WIDTH,
        )
    )
