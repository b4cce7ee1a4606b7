"""The look every chart shares: the widths a chart may take (the app's column, the PDF's
page), the head / tail and shot-bucket colours, a class's row and a method's column of the
class grids, and the pooling of the rarest classes past :data:`CLASS_ROWS`."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import altair as alt
import numpy as np
import pandas as pd

from ..models.methods import method_label, registry_order
from ..runs.store import Run

# The width a chart may take, in px: the app's page column at a 1,440 px window (wide layout,
# sidebar open: a 1,140 px main block less its padding), and the PDF's, where a chart is printed
# 180 mm wide and its 9-10 px type must stay at 7 pt or more.
APP_WIDTH = 980
PDF_WIDTH = 640
LABEL_PX = 6.2  # px per character of a 10 px label (an estimate on the generous side)
MARGIN = 64  # px a chart's padding, axis offsets and titles take beside what is computed


# A chart as wide as its column: the width fitted, the height its own (``height`` is the plot's,
# as in a fixed-width chart). Streamlit's default for such a chart fits the whole chart, axes and
# legend included, into ``height``, which left a 180 px curve 55 px of plot.
FILL_WIDTH = {
    "width": "container",
    "autosize": alt.AutoSizeParams(type="fit-x", contains="padding"),
}


def _label_width(labels: Iterable, limit: int) -> int:
    """The px an axis of ``labels`` takes (at most ``limit``, where labels are cut)."""
    return int(min(limit, LABEL_PX * max((len(str(x)) for x in labels), default=0) + 10))


REFERENCE_BASELINE = "probe-balanced"  # the line a Glee head has to beat on the tail
# the class groups of the results: head / tail, and OLTR's many / medium / few-shot buckets;
# one colour each, wherever a chart shows a group
GROUP_PALETTE = {
    "head": "#4c78a8",
    "tail": "#f58518",
    "many": "#6f4e7c",
    "medium": "#9d7bb0",
    "few": "#c9b3d6",
}
GROUP_COLORS = alt.Scale(
    domain=["head", "tail"], range=[GROUP_PALETTE["head"], GROUP_PALETTE["tail"]]
)
SHOT_GROUP_COLORS = alt.Scale(domain=list(GROUP_PALETTE), range=list(GROUP_PALETTE.values()))
GROUP_TITLES = {
    "head_f1": "Head",
    "tail_f1": "Tail",
    "many_f1": "Many (> 100)",
    "medium_f1": "Medium (20-100)",
    "few_f1": "Few (< 20)",
}
BUCKET_COLORS = alt.Scale(domain=list(GROUP_TITLES), range=list(GROUP_PALETTE.values()))


def _group_color() -> alt.Color:
    """The head / tail colour of a chart's marks, its legend on top (a new encoding each call:
    altair's objects are changed in place by the charts that take them)."""
    return alt.Color("group:N", scale=GROUP_COLORS, title=None, legend=alt.Legend(orient="top"))


def _highlight(highlight: str | None):
    """Opacity encoding that brings one class forward (the same class in every chart)."""
    if not highlight:
        return alt.value(1.0)
    return alt.condition(alt.datum["class"] == highlight, alt.value(1.0), alt.value(0.25))


def _by_method(runs: list[Run]) -> dict[str, list[Run]]:
    grouped: dict[str, list[Run]] = {}
    for run in sorted(runs, key=lambda r: r.seed):
        grouped.setdefault(run.method, []).append(run)
    return {m: grouped[m] for m in registry_order(grouped)}


# Per-class charts name every class up to this many; past it the head's classes stay named (half
# the rows) and the rarer ones are pooled in runs of neighbouring ranks (the other half), so a
# chart of 1,500 classes keeps the head → tail trend at a size a page (and vl-convert) can hold.
CLASS_ROWS = 120


def pool_rare_classes(
    frame: pd.DataFrame,
    mean: Iterable[str],
    total: Iterable[str] = (),
    by: str | None = "method",
    limit: int = CLASS_ROWS,
) -> pd.DataFrame:
    """``frame`` (a row per class, and per ``by``) with at most ``limit`` classes: past it the
    classes ranked after ``limit // 2`` are pooled by neighbouring rank, ``mean`` columns
    averaged and ``total`` ones summed; a pooled row's ``class`` says which ranks it holds, its
    ``count`` is their median training count (unless averaged) and ``pooled`` how many classes
    it stands for."""
    n = int(frame["rank"].max()) if len(frame) else 0
    if n <= limit:
        return frame.assign(pooled=1)
    keep = limit // 2
    size = -(-(n - keep) // (limit - keep))
    frame = frame.assign(
        bin=np.where(
            frame["rank"] <= keep, frame["rank"], keep + 1 + (frame["rank"] - keep - 1) // size
        )
    )
    keys = ([by] if by else []) + ["bin"]
    rows = []
    for _, part in frame.groupby(keys, sort=False):
        row = part.iloc[0].to_dict()
        if len(part) > 1:
            first, last = int(part["rank"].min()), int(part["rank"].max())
            row.update({c: float(part[c].mean()) for c in mean})
            row.update({c: part[c].sum() for c in total})
            if "count" not in mean:
                row["count"] = int(part["count"].median())
            row.update(
                {
                    "class": f"{len(part)} classes, ranks {first}–{last}",
                    "rank": first,
                    "group": part["group"].mode().iloc[0],
                }
            )
        row["pooled"] = len(part)
        rows.append(row)
    return pd.DataFrame(rows).drop(columns="bin")


def _pooled_note(frame: pd.DataFrame) -> str:
    """A title's note on what was pooled, or nothing."""
    pooled = frame[frame["pooled"] > 1].drop_duplicates("class")
    if pooled.empty:
        return ""
    return (
        f" · the {int(pooled['pooled'].sum())} rarest classes pooled in runs of "
        f"{int(pooled['pooled'].max())} (mean)"
    )


def _class_table(run: Run) -> pd.DataFrame:
    """Classes of a run's dataset, head to tail, with their training count and group."""
    dataset = run.record.dataset
    counts = dataset.class_counts  # stored head to tail
    return pd.DataFrame(
        {
            "class": list(counts),
            "count": list(counts.values()),
            "rank": range(1, len(counts) + 1),
            "group": [dataset.group(c) for c in counts],
        }
    )


def _per_class_rows(runs: list[Run]) -> Iterator[tuple[list[Run], dict]]:
    """Each method's runs (its seeds) with each of its classes, head to tail: the runs and the
    fields every per-class frame's row starts with (method, paper row, class, rank, count,
    group)."""
    for method, group in _by_method(runs).items():
        for _, c in _class_table(group[0]).iterrows():
            yield (
                group,
                {
                    "method": method,
                    "paper row": method_label(method),
                    "class": c["class"],
                    "rank": c["rank"],
                    "count": c["count"],
                    "group": c["group"],
                },
            )


STRIP_WIDTH = 36  # the head / tail and shot-bucket strip left of the per-class F1 grid
CLASS_STEP = 15  # px a class's row
ROW_LABEL_LIMIT = 220  # px a class's row label may take (longer names end in an ellipsis)
COLUMN_STEPS = (16, 44)  # px a method's column: narrowest, widest
TEXT_STEP = 26  # columns at least this wide print their value (9 px: "0.87" takes 22 px)


def _class_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with ``row``: a class's label with its training count."""
    return frame.assign(
        row=[f"{c} ({n})" for c, n in zip(frame["class"], frame["count"], strict=True)]
    )


def _class_row_axis(frame: pd.DataFrame, labelled: bool = True) -> alt.Y:
    """Classes as rows, head (top) to tail, named beside the rows (``labelled``) or not."""
    rows = list(dict.fromkeys(frame.sort_values("rank")["row"]))
    if not labelled:
        return alt.Y("row:N", sort=rows, title=None, axis=None)
    return alt.Y(
        "row:N",
        sort=rows,
        title="class (training examples), head → tail",
        axis=alt.Axis(labelLimit=ROW_LABEL_LIMIT, labelFontSize=10, labelOverlap=False),
    )


def _method_column_axis(frame: pd.DataFrame) -> alt.X:
    """Methods as columns, named by their ids (the full paper row is in each cell's tooltip),
    written upright so no label reaches past the last column."""
    return alt.X(
        "method:N",
        sort=registry_order(frame["method"]),
        title=None,
        axis=alt.Axis(
            orient="top",
            labelAngle=-90,
            labelLimit=200,
            labelFontSize=10,
            labelOverlap=False,
            labelPadding=4,
        ),
    )


def _class_method_grid(
    frame: pd.DataFrame,
    value: str,
    width: float,
    color,
    tooltip,
    text_color=alt.value("black"),
    highlight: str | None = None,
    row_axis: bool = True,
) -> alt.LayerChart:
    """A heat grid of ``value`` (rows: ``frame["row"]``, head to tail; columns: methods) whose
    columns share ``width`` px (between :data:`COLUMN_STEPS`), the value printed when a column
    is wide enough; ``highlight`` outlines one class's row."""
    step = int(np.clip(width / max(frame["method"].nunique(), 1), *COLUMN_STEPS))
    cells = alt.Chart(frame).encode(
        x=_method_column_axis(frame), y=_class_row_axis(frame, labelled=row_axis)
    )
    layers = [cells.mark_rect().encode(color=color, tooltip=tooltip)]
    if step >= TEXT_STEP:
        layers.append(
            cells.mark_text(fontSize=9)
            .encode(text=alt.Text(f"{value}:Q", format=".2f"), color=text_color, tooltip=tooltip)
            .transform_filter(f"isValid(datum['{value}'])")
        )
    if highlight:
        layers.append(
            cells.mark_rect(fill=None, stroke="black", strokeWidth=2).transform_filter(
                alt.datum["class"] == highlight
            )
        )
    return alt.layer(*layers).properties(width=alt.Step(step), height=alt.Step(CLASS_STEP))


FACET_GAP = 16  # px between small multiples (and their axes)
PANEL_AXIS = 70  # px a small multiple's own y axis takes (its labels and title)
