"""The data's charts: the class-frequency curve (head -> tail) and the label budget's
per-class learning curves and forecasts."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import altair as alt
import numpy as np
import pandas as pd

from ..budget.report import BudgetReport, ClassCurve
from ..runs.record import group_of
from .style import (
    APP_WIDTH,
    CLASS_STEP,
    FACET_GAP,
    FILL_WIDTH,
    GROUP_COLORS,
    MARGIN,
    ROW_LABEL_LIMIT,
    _group_color,
    _highlight,
    _label_width,
    _pooled_note,
    pool_rare_classes,
)

# --------------------------------------------------------------------------------------------
# Data: class frequency


def class_frequency_frame(counts: Mapping[str, int], head: Iterable[str]) -> pd.DataFrame:
    head = set(head)
    ordered = sorted(counts.items(), key=lambda kv: -kv[1])
    total = sum(counts.values()) or 1
    frame = pd.DataFrame(ordered, columns=["class", "count"])
    frame["rank"] = np.arange(1, len(frame) + 1)
    frame["share"] = frame["count"] / total
    frame["cumulative share"] = frame["share"].cumsum()
    frame["group"] = [group_of(c, head) for c in frame["class"]]
    return frame


LOG_BASELINE = 0.6  # where a log-scale count bar starts (below 1: one example still shows)


def chart_class_frequency(
    counts: Mapping[str, int],
    head: Iterable[str],
    log_scale: bool = False,
    highlight: str | None = None,
    left_out: int = 0,
) -> alt.Chart:
    """Classes sorted head to tail; the head/tail boundary is the dashed rule. Every class is
    named: columns up to 40 classes, rows (one per class, the chart grows) beyond. ``left_out``:
    how many classes the dataset left out for too few texts (said in the title)."""
    frame = pool_rare_classes(class_frequency_frame(counts, head), mean=["count", "share"], by=None)
    title = "Training examples per class" + _pooled_note(frame)
    if left_out:
        title += f" · {left_out} rarer class(es) left out (too few texts)"
    order = list(frame["class"])
    value = alt.X if len(order) > 40 else alt.Y
    category = alt.Y if len(order) > 40 else alt.X
    cls = category(
        "class:N",
        sort=order,
        title="class (head → tail)",
        axis=alt.Axis(
            labelOverlap=False,
            labelLimit=160,
            labelFontSize=10 if len(order) <= 40 else 9,
            **({} if len(order) > 40 else {"labelAngle": -60}),
        ),
    )
    across, along = ("y", "x") if len(order) > 40 else ("x", "y")
    extra = {}
    if log_scale:  # bars from a baseline under 1, so a class of one example keeps its bar
        top = max(1, int(frame["count"].max()))
        ticks = [m * 10**e for e in range(len(str(top))) for m in (1, 2, 5) if m * 10**e <= top]
        count = value(
            "count:Q",
            title="training examples (log)",
            scale=alt.Scale(type="log", domain=[LOG_BASELINE, top * 1.2], nice=False),
            axis=alt.Axis(values=ticks, format="~s"),
        )
        extra[f"{along}2"] = alt.datum(LOG_BASELINE)
    else:
        count = value("count:Q", title="training examples")
    bars = (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            **{across: cls, along: count},
            **extra,
            color=alt.Color("group:N", scale=GROUP_COLORS, title=None),
            opacity=_highlight(highlight),
            tooltip=[
                "class",
                "count",
                alt.Tooltip("share:Q", format=".1%"),
                alt.Tooltip("cumulative share:Q", format=".1%"),
                "group",
            ],
        )
    )
    n_head = int((frame["group"] == "head").sum())
    layers = [bars]
    if 0 < n_head < len(frame):
        boundary = pd.DataFrame({"class": [frame["class"].iloc[n_head]]})
        rule = category("class:N", sort=order, bandPosition=0)
        layers.append(
            alt.Chart(boundary)
            .mark_rule(strokeDash=[6, 4], color="black")
            .encode(**{("y" if len(order) > 40 else "x"): rule})
        )
    if len(order) > 40:
        return alt.layer(*layers).properties(title=title, height=alt.Step(12), **FILL_WIDTH)
    return alt.layer(*layers).properties(title=title, height=280, **FILL_WIDTH)


# --------------------------------------------------------------------------------------------
# The registry: every chart drawn from one dataset's runs, where it is shown, in one place


# (classes, methods): the sizes every chart must stay readable at (gallery, legibility and size
# tests, the browser check)
BUDGET_PANELS = 30  # up to this many classes the label budget draws a curve a class


def label_budget_frames(budget: BudgetReport) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The label budget's (``budget.report.BudgetReport``) measured points (each class's mean
    test F1 at each size), fitted curves (to its texts, then forecast to 4x) and forecast bands
    (the 80% interval from its texts to 4x), classes head -> tail."""
    exponent = budget.exponent
    points, curves, bands = [], [], []
    for rank, c in enumerate(budget.classes):
        label = _budget_label(c)
        base = {"class": c.name, "panel": label, "group": c.group, "rank": rank}
        points += [
            {**base, "texts": size, "F1": f1, "spread": spread}
            for size, f1, spread in zip(c.sizes, c.f1_at_sizes, c.f1_spread, strict=True)
        ]
        if not c.judged:
            continue
        n = c.n_train
        low = min(c.sizes) if c.sizes else n
        for size in np.geomspace(max(low, 1), 4 * n, 24):
            value = c.offset + c.a - c.b * size**-exponent
            curves.append(
                {
                    **base,
                    "texts": float(size),
                    "F1": float(np.clip(value, 0, 1)),
                    "part": "fitted" if size <= n * 1.0001 else "forecast",
                }
            )
        bands += [
            {**base, "texts": float(n), "low": c.f1, "high": c.f1},
            {
                **base,
                "texts": float(2 * n),
                "low": c.f1_at_2x_low,
                "high": c.f1_at_2x_high,
                "forecast": c.f1_at_2x,
            },
            {
                **base,
                "texts": float(4 * n),
                "low": c.f1_at_4x_low,
                "high": c.f1_at_4x_high,
                "forecast": c.f1_at_4x,
            },
        ]
    return pd.DataFrame(points), pd.DataFrame(curves), pd.DataFrame(bands)


def _budget_label(curve: ClassCurve) -> str:
    """A class's panel title or row label: its name and texts, and whether it was judged."""
    return f"{curve.name} ({curve.n_train})" + ("" if curve.judged else " · too few to judge")


def chart_label_budget(budget: BudgetReport, width: int = APP_WIDTH) -> alt.Chart:
    """Each class's test F1 against its training texts, head -> tail: the measured points (the
    mean over seeds), the fitted curve and, past the class's texts, the forecast to 4x with its
    80% band; a dashed line at the target. Up to :data:`BUDGET_PANELS` classes a small panel a
    class (each on its own log-scale axis of texts); beyond, a row a class: F1 now, the
    forecasts at 2x and 4x and the 2x band, with the smaller subsets' F1 faint behind."""
    points, curves, bands = label_budget_frames(budget)
    order = list(dict.fromkeys(points.sort_values("rank")["panel"]))
    color, title = _group_color(), _budget_title(budget)
    if len(order) > BUDGET_PANELS:
        return _budget_rows(budget, points, bands, width)
    room = 40 + FACET_GAP  # a panel's y axis and the gap
    columns = max(1, min(len(order), (width - MARGIN) // (130 + room)))
    panel_width = min(190, (width - MARGIN) // columns - room)
    x = alt.X(
        "texts:Q",
        scale=alt.Scale(type="log"),
        title="training texts",
        axis=alt.Axis(tickCount=4, format="~s", labelFontSize=9, titleFontSize=9),
    )
    y = alt.Y(
        "F1:Q",
        scale=alt.Scale(domain=[0, 1]),
        title="test F1",
        axis=alt.Axis(tickCount=3, labelFontSize=9, titleFontSize=9),
    )
    layers = _budget_layers(bands, curves, x, y, color)
    target = pd.DataFrame({"panel": order, "F1": budget.target_f1, "target": True})
    data = pd.concat([points, curves, bands, target], ignore_index=True)
    return (
        alt.layer(*layers, data=data)
        .properties(width=panel_width, height=90)
        .facet(
            facet=alt.Facet(
                "panel:N",
                sort=order,
                title=None,
                header=alt.Header(labelFontSize=10, labelLimit=panel_width + 30),
            ),
            columns=columns,
            spacing=FACET_GAP,
        )
        .resolve_scale(x="independent")
        .properties(title=title)
    )


def _budget_layers(bands: pd.DataFrame, curves: pd.DataFrame, x, y, color) -> list:
    """A label-budget panel's layers: the forecast's band, the fitted and forecast curves, the
    target's dashed line and the measured points."""
    layers = []
    if not bands.empty:
        layers.append(
            alt.Chart()
            .mark_area(opacity=0.22)
            .encode(
                x=x,
                y=alt.Y("low:Q", scale=alt.Scale(domain=[0, 1])),
                y2="high:Q",
                color=color,
                tooltip=[
                    "class",
                    alt.Tooltip("texts:Q", format=".0f"),
                    alt.Tooltip("low:Q", format=".2f"),
                    alt.Tooltip("high:Q", format=".2f"),
                ],
            )
            .transform_filter(alt.datum.low != None)  # noqa: E711 (Vega's null)
        )
    if not curves.empty:
        layers.append(
            alt.Chart()
            .mark_line(strokeWidth=1.5)
            .encode(
                x=x,
                y=y,
                color=color,
                strokeDash=alt.StrokeDash(
                    "part:N",
                    scale=alt.Scale(domain=["fitted", "forecast"], range=[[1, 0], [4, 3]]),
                    title=None,
                    legend=alt.Legend(orient="top"),
                ),
                detail="part:N",
            )
            .transform_filter(alt.datum.part != None)  # noqa: E711
        )
    layers.append(
        alt.Chart()
        .mark_rule(strokeDash=[2, 2], color="#888")
        .encode(y=y)
        .transform_filter(alt.datum.target == True)  # noqa: E712
    )
    layers.append(
        alt.Chart()
        .mark_point(filled=True, size=28)
        .encode(
            x=x,
            y=y,
            color=color,
            tooltip=[
                "class",
                "texts:Q",
                alt.Tooltip("F1:Q", format=".3f"),
                alt.Tooltip("spread:Q", title="std over seeds", format=".3f"),
            ],
        )
        .transform_filter(alt.datum.spread != None)  # noqa: E711
    )
    return layers


def _budget_row_frame(budget: BudgetReport) -> pd.DataFrame:
    """A row a class: F1 now, the forecasts at 2x and 4x, the 80% band at 2x."""
    return pd.DataFrame(
        [
            {
                "panel": _budget_label(c),
                "class": c.name,
                "group": c.group,
                "F1": c.f1,
                "at 2x": c.f1_at_2x,
                "at 4x": c.f1_at_4x,
                "low": c.f1_at_2x_low,
                "high": c.f1_at_2x_high,
            }
            for c in budget.classes
        ]
    )


def _budget_title(budget: BudgetReport) -> str:
    return (
        f"Label budget: test F1 against a class's training texts ({budget.method}; "
        f"target {budget.target_f1:g})"
    )


def _budget_rows(
    budget: BudgetReport, points: pd.DataFrame, bands: pd.DataFrame, width: int
) -> alt.Chart:
    """The label budget past :data:`BUDGET_PANELS` classes: a row a class."""
    color, title = _group_color(), _budget_title(budget)
    order = list(dict.fromkeys(points.sort_values("rank")["panel"]))
    label = _label_width(order, ROW_LABEL_LIMIT)
    y = alt.Y(
        "panel:N",
        sort=order,
        title=None,
        axis=alt.Axis(labelLimit=ROW_LABEL_LIMIT, labelFontSize=9, labelOverlap=False),
    )
    x = alt.X(
        "F1:Q",
        scale=alt.Scale(domain=[0, 1]),
        title="test F1",
        axis=alt.Axis(orient="top", tickCount=5),
    )
    plot = max(200, width - MARGIN - label)
    now = points.merge(pd.DataFrame({"panel": order}), on="panel")
    smaller = (
        alt.Chart(now)
        .mark_point(size=14, opacity=0.35)
        .encode(
            x=x, y=y, color=color, tooltip=["class", "texts:Q", alt.Tooltip("F1:Q", format=".2f")]
        )
    )
    full = _budget_row_frame(budget)
    band = (
        alt.Chart(full)
        .mark_rule(strokeWidth=6, opacity=0.3)
        .encode(x=alt.X("low:Q", scale=alt.Scale(domain=[0, 1])), x2="high:Q", y=y, color=color)
    )
    measured = (
        alt.Chart(full)
        .mark_point(filled=True, size=40)
        .encode(
            x=x,
            y=y,
            color=color,
            tooltip=[
                "class",
                alt.Tooltip("F1:Q", format=".2f"),
                alt.Tooltip("at 2x:Q", format=".2f"),
                alt.Tooltip("at 4x:Q", format=".2f"),
            ],
        )
    )
    twice = (
        alt.Chart(full)
        .mark_tick(thickness=2, size=11, color="#333")
        .encode(x=alt.X("at 2x:Q", scale=alt.Scale(domain=[0, 1])), y=y)
    )
    four = (
        alt.Chart(full)
        .mark_point(shape="triangle-right", size=36, color="#333")
        .encode(x=alt.X("at 4x:Q", scale=alt.Scale(domain=[0, 1])), y=y)
    )
    target = (
        alt.Chart(pd.DataFrame({"target": [budget.target_f1]}))
        .mark_rule(strokeDash=[2, 2], color="#888")
        .encode(x=alt.X("target:Q", scale=alt.Scale(domain=[0, 1])))
    )
    return alt.layer(target, band, smaller, measured, twice, four).properties(
        width=plot,
        height=alt.Step(CLASS_STEP),
        title=alt.TitleParams(
            title,
            subtitle="dot: F1 now; faint: smaller subsets; bar: 80% "
            "band at 2x; tick: forecast at 2x; triangle: 4x; "
            "dashed: the target",
        ),
    )
