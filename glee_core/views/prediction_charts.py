"""The predictions' charts: the confusion matrix (the rarest classes pooled past what fits)
and one text's score for every class."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from ..models.methods import method_label
from ..runs.store import Run
from .style import (
    APP_WIDTH,
    FILL_WIDTH,
    GROUP_COLORS,
    _class_table,
    _label_width,
)

# --------------------------------------------------------------------------------------------
# Predictions and the playground


def _pooled_head_label(pooled: int) -> str:
    return f"{pooled} most frequent classes, pooled"


def confusion_frame(run: Run, keep: int | None = None) -> pd.DataFrame:
    """Confusion counts, classes head to tail, non-zero cells only (a 120-class matrix is
    mostly zeros); ``share`` is the cell's part of its gold row (recall on the diagonal).
    ``keep`` keeps the rarest classes, each on its own row and column, and pools the more
    frequent ones into the first row and column (named after how many it holds): the tail is
    what this tool is about, and no test example is dropped."""
    order = _class_table(run)["class"].tolist()
    matrix = np.asarray(run.metrics.confusion_matrix)
    index = [run.classes.index(c) for c in order]
    matrix = matrix[np.ix_(index, index)]
    labels = list(order)
    if keep and keep < len(order):
        pooled = len(order) - keep
        corner = matrix[:pooled, :pooled].sum(keepdims=True).reshape(1, 1)
        top = matrix[:pooled, pooled:].sum(0, keepdims=True)
        left = matrix[pooled:, :pooled].sum(1, keepdims=True)
        matrix = np.block([[corner, top], [left, matrix[pooled:, pooled:]]])
        labels = [_pooled_head_label(pooled)] + order[pooled:]
    totals = matrix.sum(1)
    gold, pred = np.nonzero(matrix)
    return pd.DataFrame(
        {
            "gold": [labels[i] for i in gold],
            "predicted": [labels[j] for j in pred],
            "count": matrix[gold, pred].astype(int),
            "share": matrix[gold, pred] / np.maximum(totals[gold], 1),
        }
    ).assign(order=lambda f: f["gold"].map(labels.index))


CONFUSION_LABELS = 180  # px of class names beside (and above) the matrix
CONFUSION_COUNTS = 30  # up to this many classes a cell prints its count (10 px type)
CONFUSION_CELL = (22, 36, 12)  # px a cell with counts: at least, at most; a cell beyond


def confusion_fits(width: int = APP_WIDTH) -> int:
    """How many classes a confusion matrix shows one by one within ``width`` px."""
    return int((width - CONFUSION_LABELS - 40) // CONFUSION_CELL[2])


def chart_confusion(run: Run, keep: int | None = None, width: int = APP_WIDTH) -> alt.Chart:
    """Rows gold, columns predicted, classes head to tail; colour is the share of the gold row
    (so a tail class with 3 test examples is as visible as a head class with 600), counts printed
    in the cells (10 px) up to :data:`CONFUSION_COUNTS` classes, whose cells share ``width`` px
    (22 to 36 px a cell). ``keep``: see :func:`confusion_frame` (the pages keep what
    :func:`confusion_fits` the column)."""
    frame = confusion_frame(run, keep)
    order = _class_table(run)["class"].tolist()
    if keep and keep < len(order):
        order = [_pooled_head_label(len(order) - keep)] + order[len(order) - keep :]
    counts = len(order) <= CONFUSION_COUNTS
    labels = _label_width(order, CONFUSION_LABELS)
    step = (
        int(np.clip((width - labels - 40) / len(order), *CONFUSION_CELL[:2]))
        if counts
        else CONFUSION_CELL[2]
    )
    axis = dict(labelOverlap=False, labelFontSize=10 if counts else 9, labelLimit=CONFUSION_LABELS)
    base = alt.Chart(frame).encode(
        x=alt.X(
            "predicted:N",
            scale=alt.Scale(domain=order),
            title="predicted",
            axis=alt.Axis(labelAngle=-90, orient="top", **axis),
        ),
        y=alt.Y(
            "gold:N",
            scale=alt.Scale(domain=order),
            title="gold (head → tail)",
            axis=alt.Axis(**axis),
        ),
    )
    cells = base.mark_rect(stroke="#eee", strokeWidth=0.5).encode(
        color=alt.Color(
            "share:Q",
            scale=alt.Scale(scheme="blues", domain=[0, 1]),
            title="share of gold row",
            legend=alt.Legend(
                orient="bottom",
                direction="horizontal",
                format=".0%",
                values=[0, 0.25, 0.5, 0.75, 1],
            ),
        ),
        tooltip=["gold", "predicted", "count", alt.Tooltip("share:Q", format=".1%")],
    )
    layers = [cells]
    if counts:
        layers.append(
            base.mark_text(fontSize=10 if step < 30 else 12).encode(
                text="count:Q",
                color=alt.condition(alt.datum.share > 0.5, alt.value("white"), alt.value("black")),
            )
        )
    return alt.layer(*layers).properties(
        title=f"Confusion matrix ({method_label(run.method)})",
        width=alt.Step(step),
        height=alt.Step(step),
    )


def chart_class_scores(scores: pd.DataFrame, title: str) -> alt.Chart:
    """One bar per class, best first (columns ``class``, ``score``, ``label words``, ``group``),
    every class named and its probability printed, so a tiny bar still reads; the axis runs to
    a little past the top score (a top score of 9% is not a sliver on a 0-100% axis)."""
    frame = scores.sort_values("score", ascending=False, kind="stable")
    frame = frame.assign(text=[f"{p:.1%}" if p >= 0.001 else "<0.1%" for p in frame["score"]])
    top = float(frame["score"].max()) if len(frame) else 1.0
    base = alt.Chart(frame).encode(
        # the order as a list: Vega-Lite drops an encoding sort ("-x") in a layered chart
        y=alt.Y(
            "class:N",
            sort=list(frame["class"]),
            title=None,
            axis=alt.Axis(labelLimit=220, labelOverlap=False),
        ),
        x=alt.X(
            "score:Q",
            title="probability",
            scale=alt.Scale(domain=[0, min(1.0, max(top * 1.2, 0.01))], nice=False),
            axis=alt.Axis(format="%", tickCount=5),
        ),
    )
    bars = base.mark_bar().encode(
        color=alt.Color("group:N", scale=GROUP_COLORS, title=None),
        tooltip=["class", "label words", alt.Tooltip("score:Q", format=".4f"), "group"],
    )
    labels = base.mark_text(align="left", dx=3, fontSize=10).encode(text="text:N")
    return alt.layer(bars, labels).properties(title=title, height=alt.Step(18), **FILL_WIDTH)
