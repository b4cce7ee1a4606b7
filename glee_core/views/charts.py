"""Every chart of the app and of the PDF report: one function per chart, returning ``alt.Chart``.

Each ``chart_*`` draws one thing from stored runs (or a dataset's counts); the matching
``*_frame`` function builds the tidy table behind it, so the numbers can be checked and tabled.
Classes are always ordered head to tail (by training count) and coloured head / tail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import altair as alt
import numpy as np
import pandas as pd

from ..models.methods import method_label, registry_order
from ..runs.metrics import SHOT_BUCKETS, shot_bucket
from ..runs.paper import NEAREST_REFERENCE, paper_cells
from ..runs.record import METRIC_TITLES, group_of
from ..runs.store import Run
from ..runs.tables import aggregate

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
FILL_WIDTH = {"width": "container",
              "autosize": alt.AutoSizeParams(type="fit-x", contains="padding")}


def _label_width(labels: Iterable, limit: int) -> int:
    """The px an axis of ``labels`` takes (at most ``limit``, where labels are cut)."""
    return int(min(limit, LABEL_PX * max((len(str(x)) for x in labels), default=0) + 10))


REFERENCE_BASELINE = "probe-balanced"  # the line a Glee head has to beat on the tail
# the class groups of the results: head / tail, and OLTR's many / medium / few-shot buckets;
# one colour each, wherever a chart shows a group
GROUP_PALETTE = {"head": "#4c78a8", "tail": "#f58518", "many": "#6f4e7c", "medium": "#9d7bb0",
                 "few": "#c9b3d6"}
GROUP_COLORS = alt.Scale(domain=["head", "tail"],
                         range=[GROUP_PALETTE["head"], GROUP_PALETTE["tail"]])
SHOT_GROUP_COLORS = alt.Scale(domain=list(GROUP_PALETTE), range=list(GROUP_PALETTE.values()))
GROUP_TITLES = {"head_f1": "Head", "tail_f1": "Tail", "many_f1": "Many (> 100)",
                "medium_f1": "Medium (20-100)", "few_f1": "Few (< 20)"}
BUCKET_COLORS = alt.Scale(domain=list(GROUP_TITLES), range=list(GROUP_PALETTE.values()))


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


def pool_rare_classes(frame: pd.DataFrame, mean: Iterable[str], total: Iterable[str] = (),
                      by: str | None = "method", limit: int = CLASS_ROWS) -> pd.DataFrame:
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
    frame = frame.assign(bin=np.where(frame["rank"] <= keep, frame["rank"],
                                      keep + 1 + (frame["rank"] - keep - 1) // size))
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
            row.update({"class": f"{len(part)} classes, ranks {first}–{last}", "rank": first,
                        "group": part["group"].mode().iloc[0]})
        row["pooled"] = len(part)
        rows.append(row)
    return pd.DataFrame(rows).drop(columns="bin")


def _pooled_note(frame: pd.DataFrame) -> str:
    """A title's note on what was pooled, or nothing."""
    pooled = frame[frame["pooled"] > 1].drop_duplicates("class")
    if pooled.empty:
        return ""
    return (f" · the {int(pooled['pooled'].sum())} rarest classes pooled in runs of "
            f"{int(pooled['pooled'].max())} (mean)")


def _class_table(run: Run) -> pd.DataFrame:
    """Classes of a run's dataset, head to tail, with their training count and group."""
    dataset = run.record.dataset
    counts = dataset.class_counts  # stored head to tail
    return pd.DataFrame({"class": list(counts), "count": list(counts.values()),
                         "rank": range(1, len(counts) + 1),
                         "group": [dataset.group(c) for c in counts]})


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


def chart_class_frequency(counts: Mapping[str, int], head: Iterable[str],
                          log_scale: bool = False, title: str = "Training examples per class",
                          highlight: str | None = None, left_out: int = 0) -> alt.Chart:
    """Classes sorted head to tail; the head/tail boundary is the dashed rule. Every class is
    named: columns up to 40 classes, rows (one per class, the chart grows) beyond. ``left_out``:
    how many classes the dataset left out for too few texts (said in the title)."""
    frame = pool_rare_classes(class_frequency_frame(counts, head), mean=["count", "share"],
                              by=None)
    title += _pooled_note(frame)
    if left_out:
        title += f" · {left_out} rarer class(es) left out (too few texts)"
    order = list(frame["class"])
    value = alt.X if len(order) > 40 else alt.Y
    category = alt.Y if len(order) > 40 else alt.X
    cls = category("class:N", sort=order, title="class (head → tail)",
                   axis=alt.Axis(labelOverlap=False, labelLimit=160,
                                 labelFontSize=10 if len(order) <= 40 else 9,
                                 **({} if len(order) > 40 else {"labelAngle": -60})))
    across, along = ("y", "x") if len(order) > 40 else ("x", "y")
    extra = {}
    if log_scale:  # bars from a baseline under 1, so a class of one example keeps its bar
        top = max(1, int(frame["count"].max()))
        ticks = [m * 10 ** e for e in range(len(str(top))) for m in (1, 2, 5) if m * 10 ** e <= top]
        count = value("count:Q", title="training examples (log)",
                      scale=alt.Scale(type="log", domain=[LOG_BASELINE, top * 1.2], nice=False),
                      axis=alt.Axis(values=ticks, format="~s"))
        extra[f"{along}2"] = alt.datum(LOG_BASELINE)
    else:
        count = value("count:Q", title="training examples")
    bars = alt.Chart(frame).mark_bar().encode(
        **{across: cls, along: count}, **extra,
        color=alt.Color("group:N", scale=GROUP_COLORS, title=None),
        opacity=_highlight(highlight),
        tooltip=["class", "count", alt.Tooltip("share:Q", format=".1%"),
                 alt.Tooltip("cumulative share:Q", format=".1%"), "group"])
    n_head = int((frame["group"] == "head").sum())
    layers = [bars]
    if 0 < n_head < len(frame):
        boundary = pd.DataFrame({"class": [frame["class"].iloc[n_head]]})
        rule = category("class:N", sort=order, bandPosition=0)
        layers.append(alt.Chart(boundary).mark_rule(strokeDash=[6, 4], color="black")
                      .encode(**{("y" if len(order) > 40 else "x"): rule}))
    if len(order) > 40:
        return alt.layer(*layers).properties(title=title, height=alt.Step(12), **FILL_WIDTH)
    return alt.layer(*layers).properties(title=title, height=280, **FILL_WIDTH)


# --------------------------------------------------------------------------------------------
# Results


def per_class_f1_frame(runs: list[Run]) -> pd.DataFrame:
    """Per-class test F1 (mean over seeds) with each class's training count and group."""
    rows = []
    for method, group in _by_method(runs).items():
        classes = _class_table(group[0])
        for _, c in classes.iterrows():
            support = group[0].metrics.per_class[c["class"]].support
            # a class with no test text (kept in training only) has no F1: blank, not 0
            f1 = [r.metrics.per_class[c["class"]].f1 for r in group] if support else [np.nan]
            rows.append({"method": method, "paper row": method_label(method), "class": c["class"],
                         "rank": c["rank"], "count": c["count"], "group": c["group"],
                         "f1": float(np.mean(f1)), "test support": support,
                         "seeds": len(group)})
    return pd.DataFrame(rows)


def chart_per_class_f1(runs: list[Run], highlight: str | None = None,
                       width: int = APP_WIDTH) -> alt.Chart:
    """Per-class test F1 (mean over seeds) as a grid: one row per class, head (top) to tail,
    one column per method (its id; the full name in the tooltip), the value printed in each cell
    while the columns are wide enough. The grid fits ``width`` from 1 to 19+ methods and keeps
    every class's label from 2 to 120+ classes (the page grows down instead); a strip on the left
    marks head / tail and the many / medium / few bucket; ``highlight`` outlines one class's
    row."""
    frame = pool_rare_classes(per_class_f1_frame(runs), mean=["f1"], total=["test support"])
    frame["shot"] = frame["count"].map(shot_bucket)
    strip = _class_rows(frame)
    strips = alt.Chart(strip[strip["method"] == strip["method"].iloc[0]]).transform_fold(
        ["group", "shot"], as_=["kind", "bucket"]).mark_rect().encode(
        x=alt.X("kind:N", sort=["group", "shot"], title=None,
                axis=alt.Axis(orient="top", labelAngle=-90, labelOverlap=False)),
        y=_class_row_axis(strip),
        color=alt.Color("bucket:N", title="class group", scale=SHOT_GROUP_COLORS,
                        legend=alt.Legend(orient="bottom", direction="vertical")),
        tooltip=["class", "count", "group", "shot"]).properties(width=STRIP_WIDTH,
                                                                 height=alt.Step(CLASS_STEP))
    grid = _class_method_grid(
        strip, "f1", width - MARGIN - STRIP_WIDTH - 4 - _label_width(strip["row"],
                                                                     ROW_LABEL_LIMIT),
        color=alt.Color("f1:Q", title="test F1", scale=alt.Scale(domain=[0, 1], scheme="blues"),
                        legend=alt.Legend(orient="bottom", direction="horizontal")),
        tooltip=["paper row", "class", "count", "group", "shot",
                 alt.Tooltip("f1:Q", format=".3f"), "test support", "seeds"],
        text_color=alt.condition(alt.datum.f1 > 0.6, alt.value("white"), alt.value("black")),
        highlight=highlight, row_axis=False)
    return alt.hconcat(strips, grid, spacing=4).resolve_scale(color="independent").properties(
        title="Per-class test F1 (mean over seeds), classes head → tail" + _pooled_note(frame))


# The class x method grids (per-class F1, weight norms past 30 classes): a row per class, a
# column per method, fitted to the width they are given
STRIP_WIDTH = 36  # the head / tail and shot-bucket strip left of the per-class F1 grid
CLASS_STEP = 15  # px a class's row
ROW_LABEL_LIMIT = 220  # px a class's row label may take (longer names end in an ellipsis)
COLUMN_STEPS = (16, 44)  # px a method's column: narrowest, widest
TEXT_STEP = 26  # columns at least this wide print their value (9 px: "0.87" takes 22 px)


def _class_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with ``row``: a class's label with its training count."""
    return frame.assign(row=[f"{c} ({n})" for c, n in zip(frame["class"], frame["count"],
                                                           strict=True)])


def _class_row_axis(frame: pd.DataFrame, labelled: bool = True) -> alt.Y:
    """Classes as rows, head (top) to tail, named beside the rows (``labelled``) or not."""
    rows = list(dict.fromkeys(frame.sort_values("rank")["row"]))
    if not labelled:
        return alt.Y("row:N", sort=rows, title=None, axis=None)
    return alt.Y("row:N", sort=rows, title="class (training examples), head → tail",
                 axis=alt.Axis(labelLimit=ROW_LABEL_LIMIT, labelFontSize=10,
                               labelOverlap=False))


def _method_column_axis(frame: pd.DataFrame) -> alt.X:
    """Methods as columns, named by their ids (the full paper row is in each cell's tooltip),
    written upright so no label reaches past the last column."""
    return alt.X("method:N", sort=registry_order(frame["method"]), title=None,
                 axis=alt.Axis(orient="top", labelAngle=-90, labelLimit=200, labelFontSize=10,
                               labelOverlap=False, labelPadding=4))


def _class_method_grid(frame: pd.DataFrame, value: str, width: float, color, tooltip,
                       text_color=alt.value("black"), highlight: str | None = None,
                       row_axis: bool = True) -> alt.LayerChart:
    """A heat grid of ``value`` (rows: ``frame["row"]``, head to tail; columns: methods) whose
    columns share ``width`` px (between :data:`COLUMN_STEPS`), the value printed when a column
    is wide enough; ``highlight`` outlines one class's row."""
    step = int(np.clip(width / max(frame["method"].nunique(), 1), *COLUMN_STEPS))
    cells = alt.Chart(frame).encode(
        x=_method_column_axis(frame),
        y=_class_row_axis(frame, labelled=row_axis))
    layers = [cells.mark_rect().encode(color=color, tooltip=tooltip)]
    if step >= TEXT_STEP:
        layers.append(cells.mark_text(fontSize=9).encode(
            text=alt.Text(f"{value}:Q", format=".2f"), color=text_color, tooltip=tooltip
        ).transform_filter(f"isValid(datum['{value}'])"))
    if highlight:
        layers.append(cells.mark_rect(fill=None, stroke="black", strokeWidth=2)
                      .transform_filter(alt.datum["class"] == highlight))
    return alt.layer(*layers).properties(width=alt.Step(step), height=alt.Step(CLASS_STEP))


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
    sizes = {"head_f1": sum(c in head for c in counts),
             "tail_f1": sum(c not in head for c in counts),
             **{f"{name}_f1": sum(shot_bucket(n) == name for n in counts.values())
                for name, _, _ in SHOT_BUCKETS}}
    rows = []
    for key, title in GROUP_TITLES.items():
        size = sizes[key]
        panel = f"{title}\n{size} class{'es' if size != 1 else ''}" if size else \
            f"{title}\nno class"
        for _, row in frame.iterrows():
            mean, std = row.get(f"{key}_mean", np.nan), row.get(f"{key}_std", np.nan)
            rows.append({"method": row["method"], "paper row": row["paper row"], "group": key,
                         "panel": panel, "F1": mean, "std": std,
                         "low": mean - std if std == std else np.nan,
                         "high": mean + std if std == std else np.nan,
                         "note": "" if mean == mean else "no test class"})
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
    y = alt.Y("method:N", sort=order, title=None, axis=alt.Axis(labelLimit=160,
                                                                labelOverlap=False))
    x = alt.X("F1:Q", title="macro-F1 (%)", scale=alt.Scale(domain=[0, 100]),
              axis=alt.Axis(values=[0, 25, 50, 75, 100]))
    base = alt.Chart().encode(y=y)
    bars = base.mark_bar(height={"band": 0.7}).encode(
        x=x, color=alt.Color("group:N", scale=BUCKET_COLORS, legend=None),
        tooltip=["paper row", "panel", alt.Tooltip("F1:Q", format=".1f"),
                 alt.Tooltip("std:Q", format=".1f")])
    errors = base.mark_rule(color="black", clip=True).encode(x="low:Q", x2="high:Q")
    empty = base.mark_text(align="left", dx=4, color="#666", fontSize=11).encode(
        x=alt.value(0), text="note:N")
    layers = [bars, errors, empty]
    if REFERENCE_BASELINE in set(frame["method"]) and frame["method"].nunique() > 1:
        layers.append(alt.Chart().mark_rule(strokeDash=[5, 3], color="#54a24b", size=2)
                      .encode(x="F1:Q")
                      .transform_filter(alt.datum.method == REFERENCE_BASELINE))
    return alt.layer(*layers, data=frame).properties(
        width=panel, height=alt.Step(18)).facet(
        facet=alt.Facet("panel:N", sort=panels, title=None,
                        header=alt.Header(labelFontWeight="bold", labelFontSize=11,
                                          labelExpr="split(datum.label, '\\n')")),
        columns=columns, spacing=FACET_GAP).properties(
        title="F1 by class group: head / tail and many / medium / few shot (%)")


# --------------------------------------------------------------------------------------------
# Diagnostics: the paper's Figures 3 and 4


def weight_norm_frame(runs: list[Run]) -> pd.DataFrame:
    """Per-class norm of the predictor rows (prompt: averaged label-word decoder rows), mean over
    seeds."""
    rows = []
    for method, group in _by_method(runs).items():
        classes = _class_table(group[0])
        for _, c in classes.iterrows():
            norms = [r.weight_norms[c["class"]] for r in group]
            rows.append({"method": method, "paper row": method_label(method), "class": c["class"],
                         "rank": c["rank"], "count": c["count"], "group": c["group"],
                         "norm": float(np.mean(norms))})
    return pd.DataFrame(rows)


FACET_GAP = 16  # px between small multiples (and their axes)
PANEL_AXIS = 70  # px a small multiple's own y axis takes (its labels and title)


def chart_weight_norms(runs: list[Run], highlight: str | None = None,
                       width: int = APP_WIDTH) -> alt.Chart:
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
            frame, "norm", width - MARGIN - _label_width(frame["row"], ROW_LABEL_LIMIT),
            color=alt.Color("relative:Q", title="‖w_c‖ / method mean",
                            scale=alt.Scale(scheme="redblue", reverse=True, domainMid=1),
                            legend=alt.Legend(orient="bottom", direction="horizontal")),
            tooltip=tooltip, highlight=highlight)
        return grid.properties(
            title="Per-class weight norms (head → tail; colour: against the method's mean)"
            + _pooled_note(frame))
    panel = max(160, 14 * len(order))
    two = (width - MARGIN) // 2 - PANEL_AXIS - FACET_GAP  # a panel's room, two to a row
    if panel > two >= 10 * len(order):  # a narrow page: two panels a row, 10 px a class,
        panel = max(two, 120)  # rather than one narrow column a page long
    columns = max(1, min(frame["method"].nunique(),
                         (width - MARGIN) // (panel + PANEL_AXIS + FACET_GAP)))
    return alt.Chart(frame).mark_bar().encode(
        x=alt.X("class:N", sort=order, title=None,
                axis=alt.Axis(labelAngle=-60, labelOverlap=False, labelFontSize=9,
                              labelLimit=90)),
        y=alt.Y("norm:Q", title="‖w_c‖", axis=alt.Axis(tickCount=4, titleFontSize=10)),
        color=alt.Color("group:N", scale=GROUP_COLORS, title=None,
                        legend=alt.Legend(orient="top")),
        opacity=_highlight(highlight),
        tooltip=tooltip,
    ).properties(width=panel, height=130).facet(
        facet=alt.Facet("method:N", sort=registry_order(frame["method"]), title=None,
                        header=alt.Header(labelFontSize=11, labelFontWeight="bold")),
        columns=columns, spacing=FACET_GAP,
    ).resolve_scale(y="independent").resolve_axis(x="independent").properties(
        title="Per-class weight norms (head → tail; each panel on its own axis)")


FIGURE4_MIN_EXAMPLES = 5  # a tail class with fewer stored test examples draws single spikes


def feature_examples(run: Run) -> dict[str, int]:
    """How many stored test examples (classifier inputs) each class has, head to tail."""
    labels = np.asarray(run.features["labels"])
    return {c: int((labels == run.classes.index(c)).sum()) for c in _class_table(run)["class"]}


def default_feature_classes(run: Run) -> tuple[str, str]:
    """Figure 4's default pair: the most frequent head class, and the rarest tail class with at
    least :data:`FIGURE4_MIN_EXAMPLES` stored test examples (the tail class with the most where
    none has that many; the Diagnostics page says so)."""
    examples = feature_examples(run)
    classes = _class_table(run)
    present = classes[[examples[c] > 0 for c in classes["class"]]]
    head = present[present["group"] == "head"]["class"]
    tail = present[present["group"] == "tail"]["class"]
    enough = [c for c in tail if examples[c] >= FIGURE4_MIN_EXAMPLES]
    if enough:
        rare = enough[-1]
    elif len(tail):
        rare = max(reversed(list(tail)), key=examples.get)
    else:
        rare = present["class"].iloc[-1]
    return head.iloc[0] if len(head) else present["class"].iloc[0], rare


FIGURE4_METHODS = ("cls-tanh", "cls-relu", "cls-relu-ln", "cls-relu-pt-ln", "prompt")  # its heads
FIGURE4_FEATURES = 10  # the paper plots the first ten classifier-input features
FIGURE4_PANEL = 36  # px: a Figure 4 panel's least width (its value axis's three ticks fit)
FIGURE4_Y_AXIS = 22  # px a Figure 4 panel's density labels take at its left


def _class_features(run: Run, name: str, dims: int) -> np.ndarray:
    """The stored classifier inputs (first ``dims`` features) of one class's test examples."""
    data = run.features
    index = run.classes.index(name)
    return data["features"][data["labels"] == index][:, :dims].astype(np.float32)


def feature_distribution_frame(runs: list[Run], head_class: str, tail_class: str,
                               dims: int = FIGURE4_FEATURES, bins: int = 12) -> pd.DataFrame:
    """Figure 4's data: for each method (its lowest seed's run) and each of the first ``dims``
    classifier-input features, the density histogram of the head class's and the tail class's
    stored test examples over shared bin edges (densities, so a class of 2 examples reads on
    the same scale as one of 64)."""
    rows = []
    for method, group in _by_method(runs).items():
        run = group[0]
        values = {"head": _class_features(run, head_class, dims),
                  "tail": _class_features(run, tail_class, dims)}
        for d in range(min(dims, values["head"].shape[1] if values["head"].size else dims)):
            pooled = np.concatenate([values[g][:, d] for g in values if values[g].size])
            if pooled.size == 0:
                continue
            edges = np.histogram_bin_edges(pooled, bins=bins)
            if edges[0] == edges[-1]:  # a constant feature (e.g. always 0 after ReLU)
                edges = np.array([edges[0] - 0.5, edges[0] + 0.5])
            for group_name, array in values.items():
                if not array.size:
                    continue
                density, _ = np.histogram(array[:, d], bins=edges, density=True)
                for i, value in enumerate(density):
                    rows.append({"method": method, "paper row": method_label(method),
                                 "feature": f"f{d + 1}", "group": group_name,
                                 "class": head_class if group_name == "head" else tail_class,
                                 "examples": len(array), "bin_start": float(edges[i]),
                                 "bin_end": float(edges[i + 1]), "density": float(value)})
    return pd.DataFrame(rows, columns=["method", "paper row", "feature", "group", "class",
                                       "examples", "bin_start", "bin_end", "density"])


def dead_feature_frame(runs: list[Run], head_class: str, tail_class: str,
                       dims: int = FIGURE4_FEATURES) -> pd.DataFrame:
    """The paper's argument for LayerNorm: the share of the first ``dims`` features that are
    exactly zero ("dead" after ReLU), per method and class, and how many features are zero for
    most of the class's examples."""
    rows = []
    for method, group in _by_method(runs).items():
        run = group[0]
        for name, group_name in ((head_class, "head"), (tail_class, "tail")):
            array = _class_features(run, name, dims)
            if not array.size:
                continue
            zero = array == 0
            rows.append({"method": method, "paper row": method_label(method), "class": name,
                         "group": group_name, "examples": len(array),
                         "zero share": float(zero.mean()),
                         "dead features": int((zero.mean(axis=0) > 0.5).sum()),
                         "features": array.shape[1]})
    return pd.DataFrame(rows, columns=["method", "paper row", "class", "group", "examples",
                                       "zero share", "dead features", "features"])


def chart_feature_distributions(runs: list[Run], head_class: str, tail_class: str,
                                dims: int = FIGURE4_FEATURES, width: int = APP_WIDTH
                                ) -> alt.Chart:
    """Figure 4: one small density plot per method (rows) and feature (columns), the head and
    the tail class overlaid; under it, how many of those features are dead (zero for most
    examples) per method and class - ReLU kills tail features, a LayerNorm after it does not.
    Where no head shown has a dead feature, a subtitle says so instead of all-zero bars."""
    frame = feature_distribution_frame(runs, head_class, tail_class, dims)
    dead = dead_feature_frame(runs, head_class, tail_class, dims)
    rows = registry_order(frame["method"]) if len(frame) else []
    features = [f"f{d + 1}" for d in range(dims)]
    labels = _label_width(rows, 160)
    room = (width - MARGIN - labels) / max(dims, 1) - 4  # a panel's share of the width
    density_labels = room >= FIGURE4_PANEL + FIGURE4_Y_AXIS  # else the shape alone, no numbers
    panel = int(np.clip(room - FIGURE4_Y_AXIS * density_labels, FIGURE4_PANEL, 96))
    # the legend names the two classes: as data (a column and the scale's domain), never inside
    # a Vega expression, where a class name would be code
    named = {"head": f"head: {head_class}", "tail": f"tail: {tail_class}"}
    frame = frame.assign(legend=frame["group"].map(named))
    dead = dead.assign(legend=dead["group"].map(named))
    color = alt.Color("legend:N", title=None, legend=alt.Legend(orient="top"),
                      scale=alt.Scale(domain=list(named.values()),
                                      range=[GROUP_PALETTE["head"], GROUP_PALETTE["tail"]]))
    # each panel on its own scales: the feature's values below (two or three ticks), and where
    # there is room the density's at the left
    small = {"labelFontSize": 9, "tickSize": 3, "labelPadding": 1, "grid": False}
    grid = alt.Chart(frame).mark_area(opacity=0.45, interpolate="step-after").encode(
        x=alt.X("bin_start:Q", title=None, axis=alt.Axis(tickCount=3, format="~g", **small)),
        y=alt.Y("density:Q", title=None, stack=None,
                axis=alt.Axis(tickCount=2, format="~g", labels=density_labels, **small)),
        color=color,
        tooltip=["paper row", "feature", "class", "examples",
                 alt.Tooltip("bin_start:Q", format=".3f"), alt.Tooltip("density:Q", format=".2f")],
    ).properties(width=panel, height=56).facet(
        row=alt.Row("method:N", sort=rows, title=None,
                    header=alt.Header(labelAngle=0, labelAlign="left", labelLimit=160,
                                      labelFontSize=10)),
        column=alt.Column("feature:N", sort=features,
                          title="classifier-input feature: density of its values, each panel "
                                "on its own scales"),
        spacing=4,
    ).resolve_scale(x="independent", y="independent")
    base = alt.Chart(dead).encode(
        y=alt.Y("method:N", sort=rows, title=None, axis=alt.Axis(labelLimit=160)),
        yOffset="group:N",
        x=alt.X("dead features:Q", title=f"dead features (of the first {dims})",
                scale=alt.Scale(domain=[0, dims])),
        tooltip=["paper row", "class", "examples", "dead features",
                 alt.Tooltip("zero share:Q", format=".0%")])
    bars = alt.layer(
        base.mark_bar().encode(color=color),
        base.mark_text(align="left", dx=3, fontSize=10).encode(
            text=alt.Text("label:N")).transform_calculate(
            label="datum.group + ': ' + datum['dead features'] + ' dead, ' + "
                  "format(datum['zero share'], '.0%') + ' zeros'"),
    ).properties(width=260, height=alt.Step(14), title="Dead features (zero for most examples)")
    title = f"Classifier-input features: {head_class} (head) vs {tail_class} (tail)"
    if not dead["dead features"].any():  # all-zero bars say nothing: a sentence says it
        return grid.properties(title=alt.TitleParams(
            title, subtitle=f"No head shown has a dead feature among the first {dims} (zero for "
                            "most examples of either class)."))
    # the histograms first, right under the legend that names their colours
    return alt.vconcat(grid, bars).resolve_legend(color="shared").properties(title=title)


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
    return pd.DataFrame({"gold": [labels[i] for i in gold], "predicted": [labels[j] for j in pred],
                         "count": matrix[gold, pred].astype(int),
                         "share": matrix[gold, pred] / np.maximum(totals[gold], 1)}
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
        order = [_pooled_head_label(len(order) - keep)] + order[len(order) - keep:]
    counts = len(order) <= CONFUSION_COUNTS
    labels = _label_width(order, CONFUSION_LABELS)
    step = (int(np.clip((width - labels - 40) / len(order), *CONFUSION_CELL[:2])) if counts
            else CONFUSION_CELL[2])
    axis = dict(labelOverlap=False, labelFontSize=10 if counts else 9,
                labelLimit=CONFUSION_LABELS)
    base = alt.Chart(frame).encode(
        x=alt.X("predicted:N", scale=alt.Scale(domain=order), title="predicted",
                axis=alt.Axis(labelAngle=-90, orient="top", **axis)),
        y=alt.Y("gold:N", scale=alt.Scale(domain=order), title="gold (head → tail)",
                axis=alt.Axis(**axis)))
    cells = base.mark_rect(stroke="#eee", strokeWidth=0.5).encode(
        color=alt.Color("share:Q", scale=alt.Scale(scheme="blues", domain=[0, 1]),
                        title="share of gold row",
                        legend=alt.Legend(orient="bottom", direction="horizontal",
                                          format=".0%", values=[0, 0.25, 0.5, 0.75, 1])),
        tooltip=["gold", "predicted", "count", alt.Tooltip("share:Q", format=".1%")])
    layers = [cells]
    if counts:
        layers.append(base.mark_text(fontSize=10 if step < 30 else 12).encode(
            text="count:Q",
            color=alt.condition(alt.datum.share > 0.5, alt.value("white"), alt.value("black"))))
    return alt.layer(*layers).properties(title=f"Confusion matrix ({method_label(run.method)})",
                                         width=alt.Step(step), height=alt.Step(step))


def chart_class_scores(scores: pd.DataFrame, title: str) -> alt.Chart:
    """One bar per class, best first (columns ``class``, ``score``, ``label words``, ``group``),
    every class named and its probability printed, so a tiny bar still reads; the axis runs to
    a little past the top score (a top score of 9% is not a sliver on a 0-100% axis)."""
    frame = scores.sort_values("score", ascending=False, kind="stable")
    frame = frame.assign(text=[f"{p:.1%}" if p >= 0.001 else "<0.1%" for p in frame["score"]])
    top = float(frame["score"].max()) if len(frame) else 1.0
    base = alt.Chart(frame).encode(
        # the order as a list: Vega-Lite drops an encoding sort ("-x") in a layered chart
        y=alt.Y("class:N", sort=list(frame["class"]), title=None,
                axis=alt.Axis(labelLimit=220, labelOverlap=False)),
        x=alt.X("score:Q", title="probability",
                scale=alt.Scale(domain=[0, min(1.0, max(top * 1.2, 0.01))], nice=False),
                axis=alt.Axis(format="%", tickCount=5)))
    bars = base.mark_bar().encode(
        color=alt.Color("group:N", scale=GROUP_COLORS, title=None),
        tooltip=["class", "label words", alt.Tooltip("score:Q", format=".4f"), "group"])
    labels = base.mark_text(align="left", dx=3, fontSize=10).encode(text="text:N")
    return alt.layer(bars, labels).properties(title=title, height=alt.Step(18),
                                              **FILL_WIDTH)


# --------------------------------------------------------------------------------------------
# The paper's own results (its Tables 2, 3 and 5), with the user's runs beside them


def paper_results_frame(table: int, metric: str, runs: list[Run] | None = None) -> pd.DataFrame:
    """One row per method x dataset (and AVG) of a paper table: the paper's mean and its ± (the
    sample std), ``source`` ``paper``; plus, for the datasets ``runs`` cover (R8 in R52's panel,
    its nearest), our mean and sample std with ``source`` ``ours``."""
    cells = paper_cells()
    cells = cells[(cells["table"] == table) & (cells["metric"] == metric)]
    frame = pd.DataFrame({"method": cells["method"], "dataset": cells["dataset"].str.upper(),
                          "mean": cells["mean"], "std": cells["std"], "source": "paper"})
    if runs:
        ours = aggregate([r for r in runs if r.method in set(cells["method"])])
        if len(ours):
            ours = pd.DataFrame({
                "method": ours["method"],
                "dataset": ours["dataset"].map(lambda d: NEAREST_REFERENCE.get(d, d)).str.upper(),
                "mean": ours[f"{metric}_mean"], "std": ours[f"{metric}_std"],
                "source": "ours (" + ours["dataset"] + ")"})
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
    tooltip = ["paper row", "dataset", "source", alt.Tooltip("mean:Q", format=".1f"),
               alt.Tooltip("std:Q", format=".1f")]
    base = alt.Chart(frame)
    layers = [
        base.transform_filter(alt.datum.source == "paper").mark_bar(color="#9ecae1").encode(
            x=x, y=y, tooltip=tooltip),
        base.transform_filter(alt.datum.source == "paper").mark_rule(color="#08519c").encode(
            x="low:Q", x2="high:Q", y=y),
        base.transform_filter(alt.datum.source != "paper").mark_rule(color="black").encode(
            x="low:Q", x2="high:Q", y=y),
        base.transform_filter(alt.datum.source != "paper").mark_point(
            shape="diamond", filled=True, color="black", size=60).encode(
            x=x, y=y, tooltip=tooltip),
    ]
    # fixed sizes (not steps): the app fits a chart to its width, which would squeeze steps
    return alt.layer(*layers).properties(width=170, height=22 * len(order)).facet(
        facet=alt.Facet("dataset:N", sort=columns, title=None), columns=3,
    ).properties(title=f"Table {table}: {METRIC_TITLES[metric]}, the paper's mean ± std "
                       "(bars) and ours (black diamonds)")


def chart_paper_head_tail_gap(table: int) -> alt.Chart:
    """Head F1 - Tail F1 per method, averaged over the table's datasets (the paper's AVG): how
    much each head favours the head classes. Prompt-tuning and pt. LN have the smallest gaps."""
    cells = paper_cells()
    avg = cells[(cells["table"] == table) & (cells["dataset"] == "avg")]
    wide = avg.pivot_table(index="method", columns="metric", values="mean")
    wide = wide.reindex(list(dict.fromkeys(avg["method"])))
    frame = pd.DataFrame({"paper row": [method_label(m) for m in wide.index],
                          "gap": wide["head_f1"] - wide["tail_f1"],
                          "head_f1": wide["head_f1"], "tail_f1": wide["tail_f1"]})
    return alt.Chart(frame).mark_bar(color="#f58518").encode(
        x=alt.X("gap:Q", title="Head F1 − Tail F1 (points, AVG)"),
        y=alt.Y("paper row:N", sort=list(frame["paper row"]), title=None,
                axis=alt.Axis(labelLimit=260)),
        tooltip=["paper row", alt.Tooltip("head_f1:Q", format=".1f"),
                 alt.Tooltip("tail_f1:Q", format=".1f"), alt.Tooltip("gap:Q", format=".1f")],
    ).properties(width=560, height=alt.Step(22),
                 title=f"Table {table}: how far the tail trails the head")


# --------------------------------------------------------------------------------------------
# Post-hoc calibration


def calibration_delta_frame(run: Run, before: dict, after: dict) -> pd.DataFrame:
    """Per-class test F1 before and after a calibration, classes head to tail."""
    classes = _class_table(run)
    return classes.assign(
        before=[before["per_class"][c]["f1"] for c in classes["class"]],
        after=[after["per_class"][c]["f1"] for c in classes["class"]],
        delta=lambda f: 100 * (f["after"] - f["before"]))


def chart_calibration_delta(run: Run, before: dict, after: dict, title: str,
                            width: int = APP_WIDTH) -> alt.Chart:
    """The change in each class's test F1 (points), a row per class, head (top) to tail:
    logit adjustment and τ-norm should lift the tail and may cost the head. Rows, not columns,
    so 2 or 1,500 classes keep their names (past :data:`CLASS_ROWS` the rarest are pooled)."""
    frame = pool_rare_classes(calibration_delta_frame(run, before, after),
                              mean=["before", "after", "delta"], by=None)
    frame = _class_rows(frame)
    labels = _label_width(frame["row"], ROW_LABEL_LIMIT)
    y = _class_row_axis(frame)
    bars = alt.Chart(frame).mark_bar().encode(
        y=y, x=alt.X("delta:Q", title="Δ test F1 (points)"),
        color=alt.Color("group:N", scale=GROUP_COLORS, title=None,
                        legend=alt.Legend(orient="top")),
        tooltip=["class", "count", "group", alt.Tooltip("before:Q", format=".3f"),
                 alt.Tooltip("after:Q", format=".3f"), alt.Tooltip("delta:Q", format="+.1f")])
    zero = alt.Chart(pd.DataFrame({"x": [0]})).mark_rule(color="black").encode(x="x:Q")
    return alt.layer(bars, zero).properties(
        title=title + _pooled_note(frame), width=min(560, width - labels - 40),
        height=alt.Step(CLASS_STEP))


def chart_calibration_curve(curve: dict[float, float], chosen: float, current: float,
                            metric: str) -> alt.Chart:
    """The dev metric against the strength; the dev-chosen value and the slider's marked."""
    frame = pd.DataFrame({"strength": list(curve), "dev": [100 * v for v in curve.values()]})
    line = alt.Chart(frame).mark_line(point=True).encode(
        x=alt.X("strength:Q", title="strength"),
        y=alt.Y("dev:Q", title=f"dev {METRIC_TITLES[metric]} (%)", scale=alt.Scale(zero=False)),
        tooltip=[alt.Tooltip("strength:Q", format=".1f"), alt.Tooltip("dev:Q", format=".1f")])
    marks = pd.DataFrame({"strength": [chosen, current],
                          "what": ["chosen on dev", "shown below"]})
    rules = alt.Chart(marks).mark_rule(strokeDash=[4, 3]).encode(
        x="strength:Q", color=alt.Color("what:N", title=None,
                                        scale=alt.Scale(range=["#54a24b", "#e45756"])))
    return alt.layer(line, rules).properties(height=180, title="Dev metric against the strength",
                                             **FILL_WIDTH)


# --------------------------------------------------------------------------------------------
# Weight norms against class frequency, and as training goes


def norm_count_frame(runs: list[Run]) -> pd.DataFrame:
    """Per class and method: training count and the predictor norm relative to the method's
    mean norm (mean over seeds), with each method's fitted slope against log10(count)."""
    frame = weight_norm_frame(runs)
    frame = frame[frame["count"] > 0].copy()
    frame["relative norm"] = frame["norm"] / frame.groupby("method")["norm"].transform("mean")
    slopes = {m: float(np.polyfit(np.log10(g["count"]), g["relative norm"], 1)[0])
              if len(g) >= 3 and g["count"].nunique() > 1 else float("nan")
              for m, g in frame.groupby("method")}
    frame["slope"] = frame["method"].map(slopes)
    frame["panel"] = [f"{m}: slope {s:+.2f}" if s == s else f"{m}: no slope"
                      for m, s in zip(frame["method"], frame["slope"], strict=True)]
    return frame


def chart_norm_vs_count(runs: list[Run], width: int = APP_WIDTH) -> alt.Chart:
    """Figure 3 in one glance: each class's predictor norm (relative to its method's mean)
    against its training count (log scale), one small panel per method with its fitted line
    and slope in the panel's title, head and tail classes coloured. Flat (slope near 0): the
    classifier does not favour frequent classes. Panels on their own y axes (a probe's spread
    would flatten every other), wrapped to fit ``width``."""
    frame = norm_count_frame(runs)
    panels = [frame.loc[frame["method"] == m, "panel"].iloc[0]
              for m in registry_order(frame["method"])]
    columns = max(1, min(len(panels), (width - MARGIN) // 250))
    panel = int((width - MARGIN) / columns - PANEL_AXIS - FACET_GAP)
    low, high = float(frame["count"].min()), float(frame["count"].max())
    x = alt.X("count:Q", title="training examples (log)",
              scale=alt.Scale(type="log", domain=[low, max(high, low * 1.5)], nice=False),
              axis=alt.Axis(tickCount=4, format="~s"))
    y = alt.Y("relative norm:Q", title="‖w_c‖ / mean", scale=alt.Scale(zero=False),
              axis=alt.Axis(tickCount=4))
    points = alt.Chart().mark_point(filled=True, size=28, opacity=0.8).encode(
        x=x, y=y, color=alt.Color("group:N", scale=GROUP_COLORS, title=None,
                                  legend=alt.Legend(orient="top")),
        tooltip=["paper row", "class", "count", alt.Tooltip("norm:Q", format=".3f"),
                 alt.Tooltip("relative norm:Q", format=".2f"),
                 alt.Tooltip("slope:Q", format="+.3f")])
    fits = alt.Chart().transform_regression("count", "relative norm",
                                            method="log").mark_line(color="black").encode(
        x=x, y=y)
    return alt.layer(points, fits, data=frame).properties(width=panel, height=110).facet(
        facet=alt.Facet("panel:N", sort=panels, title=None,
                        header=alt.Header(labelFontSize=11, labelFontWeight="bold")),
        columns=columns, spacing=FACET_GAP,
    ).resolve_scale(y="independent").properties(
        title=["Per-class weight norm against training count",
               "(each panel: the fitted slope against log10 count)"])


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
            rows.append({"evaluation": f"ep {record['epoch']} · step {record.get('step', '')}",
                         "step": record.get("step", record["epoch"]), "class": c["class"],
                         "rank": c["rank"], "group": c["group"],
                         "norm": norms[index[c["class"]]]})
    return pd.DataFrame(rows, columns=["evaluation", "step", "class", "rank", "group", "norm"])


def chart_norm_evolution(run: Run) -> alt.Chart:
    """How each class's predictor norm grows while training: classes head to tail (rows),
    dev evaluations (columns)."""
    frame = norm_evolution_frame(run)
    order = list(dict.fromkeys(frame.sort_values("rank")["class"]))
    evaluations = list(dict.fromkeys(frame.sort_values("step")["evaluation"]))
    return alt.Chart(frame).mark_rect().encode(
        x=alt.X("evaluation:N", sort=evaluations, title="dev evaluation",
                axis=alt.Axis(labelAngle=-45, labelOverlap="greedy")),
        y=alt.Y("class:N", sort=order, title="class (head → tail)",
                axis=alt.Axis(labelLimit=160, labelOverlap=False,
                              labelFontSize=10 if len(order) <= 40 else 9)),
        color=alt.Color("norm:Q", title="‖w_c‖", scale=alt.Scale(scheme="viridis")),
        tooltip=["class", "group", "evaluation", alt.Tooltip("norm:Q", format=".3f")],
    ).properties(title=f"Weight norms while training ({method_label(run.method)}, seed "
                       f"{run.seed})", height=alt.Step(16 if len(order) <= 40 else 12),
                 **FILL_WIDTH)


# --------------------------------------------------------------------------------------------
# The registry: every chart drawn from one dataset's runs, where it is shown, in one place


# (classes, methods): the sizes every chart must stay readable at (gallery, legibility and size
# tests, the browser check)
BUDGET_PANELS = 30  # up to this many classes the label budget draws a curve a class


def label_budget_frames(budget: dict) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The label budget's (``runs.budget``'s budget.json) measured points (each class's mean
    test F1 at each size), fitted curves (to its texts, then forecast to 4x) and forecast bands
    (the 80% interval from its texts to 4x), classes head -> tail."""
    exponent = budget["exponent"]
    points, curves, bands = [], [], []
    for rank, c in enumerate(budget["classes"]):
        label = _budget_label(c)
        base = {"class": c["name"], "panel": label, "group": c["group"], "rank": rank}
        points += [{**base, "texts": size, "F1": f1, "spread": spread}
                   for size, f1, spread in zip(c["sizes"], c["f1_at_sizes"], c["f1_spread"],
                                               strict=True)]
        if not c["judged"]:
            continue
        n = c["n_train"]
        low = min(c["sizes"]) if c["sizes"] else n
        for size in np.geomspace(max(low, 1), 4 * n, 24):
            value = c["offset"] + c["a"] - c["b"] * size ** -exponent
            curves.append({**base, "texts": float(size), "F1": float(np.clip(value, 0, 1)),
                           "part": "fitted" if size <= n * 1.0001 else "forecast"})
        bands += [{**base, "texts": float(n), "low": c["f1"], "high": c["f1"]},
                  {**base, "texts": float(2 * n), "low": c["f1_at_2x_low"],
                   "high": c["f1_at_2x_high"], "forecast": c["f1_at_2x"]},
                  {**base, "texts": float(4 * n), "low": c["f1_at_4x_low"],
                   "high": c["f1_at_4x_high"], "forecast": c["f1_at_4x"]}]
    return pd.DataFrame(points), pd.DataFrame(curves), pd.DataFrame(bands)


def _budget_label(curve: dict) -> str:
    """A class's panel title or row label: its name and texts, and whether it was judged."""
    return f"{curve['name']} ({curve['n_train']})" + ("" if curve["judged"] else
                                                      " · too few to judge")


def chart_label_budget(budget: dict, width: int = APP_WIDTH) -> alt.Chart:
    """Each class's test F1 against its training texts, head -> tail: the measured points (the
    mean over seeds), the fitted curve and, past the class's texts, the forecast to 4x with its
    80% band; a dashed line at the target. Up to :data:`BUDGET_PANELS` classes a small panel a
    class (each on its own log-scale axis of texts); beyond, a row a class: F1 now, the
    forecasts at 2x and 4x and the 2x band, with the smaller subsets' F1 faint behind."""
    points, curves, bands = label_budget_frames(budget)
    order = list(dict.fromkeys(points.sort_values("rank")["panel"]))
    color = alt.Color("group:N", scale=GROUP_COLORS, title=None, legend=alt.Legend(orient="top"))
    title = (f"Label budget: test F1 against a class's training texts ({budget['method']}; "
             f"target {budget['target_f1']:g})")
    if len(order) > BUDGET_PANELS:
        return _budget_rows(budget, points, bands, color, width, title)
    room = 40 + FACET_GAP  # a panel's y axis and the gap
    columns = max(1, min(len(order), (width - MARGIN) // (130 + room)))
    panel_width = min(190, (width - MARGIN) // columns - room)
    x = alt.X("texts:Q", scale=alt.Scale(type="log"), title="training texts",
              axis=alt.Axis(tickCount=4, format="~s", labelFontSize=9, titleFontSize=9))
    y = alt.Y("F1:Q", scale=alt.Scale(domain=[0, 1]), title="test F1",
              axis=alt.Axis(tickCount=3, labelFontSize=9, titleFontSize=9))
    layers = []
    if not bands.empty:
        layers.append(alt.Chart().mark_area(opacity=0.22).encode(
            x=x, y=alt.Y("low:Q", scale=alt.Scale(domain=[0, 1])), y2="high:Q", color=color,
            tooltip=["class", alt.Tooltip("texts:Q", format=".0f"),
                     alt.Tooltip("low:Q", format=".2f"), alt.Tooltip("high:Q", format=".2f")]
        ).transform_filter(alt.datum.low != None))  # noqa: E711 (Vega's null)
    if not curves.empty:
        layers.append(alt.Chart().mark_line(strokeWidth=1.5).encode(
            x=x, y=y, color=color,
            strokeDash=alt.StrokeDash("part:N", scale=alt.Scale(
                domain=["fitted", "forecast"], range=[[1, 0], [4, 3]]), title=None,
                legend=alt.Legend(orient="top")),
            detail="part:N").transform_filter(alt.datum.part != None))  # noqa: E711
    layers.append(alt.Chart().mark_rule(strokeDash=[2, 2], color="#888").encode(y=y)
                  .transform_filter(alt.datum.target == True))  # noqa: E712
    layers.append(alt.Chart().mark_point(filled=True, size=28).encode(
        x=x, y=y, color=color,
        tooltip=["class", "texts:Q", alt.Tooltip("F1:Q", format=".3f"),
                 alt.Tooltip("spread:Q", title="std over seeds", format=".3f")]
    ).transform_filter(alt.datum.spread != None))  # noqa: E711
    target = pd.DataFrame({"panel": order, "F1": budget["target_f1"], "target": True})
    data = pd.concat([points, curves, bands, target], ignore_index=True)
    return alt.layer(*layers, data=data).properties(width=panel_width, height=90).facet(
        facet=alt.Facet("panel:N", sort=order, title=None,
                        header=alt.Header(labelFontSize=10, labelLimit=panel_width + 30)),
        columns=columns, spacing=FACET_GAP,
    ).resolve_scale(x="independent").properties(title=title)


def _budget_rows(budget: dict, points: pd.DataFrame, bands: pd.DataFrame, color, width: int,
                 title: str) -> alt.Chart:
    """The label budget past :data:`BUDGET_PANELS` classes: a row a class."""
    order = list(dict.fromkeys(points.sort_values("rank")["panel"]))
    label = _label_width(order, ROW_LABEL_LIMIT)
    y = alt.Y("panel:N", sort=order, title=None,
              axis=alt.Axis(labelLimit=ROW_LABEL_LIMIT, labelFontSize=9, labelOverlap=False))
    x = alt.X("F1:Q", scale=alt.Scale(domain=[0, 1]), title="test F1",
              axis=alt.Axis(orient="top", tickCount=5))
    plot = max(200, width - MARGIN - label)
    now = points.merge(pd.DataFrame({"panel": order}), on="panel")
    smaller = alt.Chart(now).mark_point(size=14, opacity=0.35).encode(
        x=x, y=y, color=color, tooltip=["class", "texts:Q", alt.Tooltip("F1:Q", format=".2f")])
    full = pd.DataFrame([{"panel": _budget_label(c), "class": c["name"],
                          "group": c["group"], "F1": c["f1"],
                          "at 2x": c["f1_at_2x"], "at 4x": c["f1_at_4x"],
                          "low": c["f1_at_2x_low"], "high": c["f1_at_2x_high"]}
                         for c in budget["classes"]])
    band = alt.Chart(full).mark_rule(strokeWidth=6, opacity=0.3).encode(
        x=alt.X("low:Q", scale=alt.Scale(domain=[0, 1])), x2="high:Q", y=y, color=color)
    measured = alt.Chart(full).mark_point(filled=True, size=40).encode(
        x=x, y=y, color=color, tooltip=["class", alt.Tooltip("F1:Q", format=".2f"),
                                        alt.Tooltip("at 2x:Q", format=".2f"),
                                        alt.Tooltip("at 4x:Q", format=".2f")])
    twice = alt.Chart(full).mark_tick(thickness=2, size=11, color="#333").encode(
        x=alt.X("at 2x:Q", scale=alt.Scale(domain=[0, 1])), y=y)
    four = alt.Chart(full).mark_point(shape="triangle-right", size=36, color="#333").encode(
        x=alt.X("at 4x:Q", scale=alt.Scale(domain=[0, 1])), y=y)
    target = alt.Chart(pd.DataFrame({"target": [budget["target_f1"]]})).mark_rule(
        strokeDash=[2, 2], color="#888").encode(x=alt.X("target:Q", scale=alt.Scale(
            domain=[0, 1])))
    return alt.layer(target, band, smaller, measured, twice, four).properties(
        width=plot, height=alt.Step(CLASS_STEP),
        title=alt.TitleParams(title, subtitle="dot: F1 now; faint: smaller subsets; bar: 80% "
                                              "band at 2x; tick: forecast at 2x; triangle: 4x; "
                                              "dashed: the target"))


LEGIBLE_SIZES = tuple((c, m) for c in (2, 20, 60) for m in (1, 6, 19)) + ((120, 16),)


@dataclass(frozen=True)
class RunChart:
    """A chart of one dataset's runs (a setting, one or more methods and seeds): its title,
    how to draw it at a width (px: :data:`APP_WIDTH` on a page, :data:`PDF_WIDTH` in the PDF),
    the app page that shows it, whether the PDF report has it, whether it names every class on
    an axis, and the (classes, methods) sizes it must stay readable at. The report, the gallery
    (``tools/chart_gallery.py``), the legibility and size tests and the Report page's list read
    this registry; a new chart is a function above and a line below."""

    name: str
    title: str
    draw: Callable[[list[Run], int], alt.Chart]
    page: str
    in_report: bool = True
    names_classes: bool = False  # an axis names every class (never thinned out)
    sizes: tuple[tuple[int, int], ...] = LEGIBLE_SIZES


def _frequency(runs: list[Run], width: int) -> alt.Chart:
    data = runs[0].record.dataset
    return chart_class_frequency(data.class_counts, data.head_classes)


def _figure4(runs: list[Run], width: int) -> alt.Chart:
    head, tail = default_feature_classes(runs[0])
    return chart_feature_distributions([r for r in runs if r.method in FIGURE4_METHODS] or runs,
                                       head, tail, width=width)


def _confusion(runs: list[Run], width: int) -> alt.Chart:
    return chart_confusion(runs[0], confusion_fits(width), width)


RUN_CHARTS: dict[str, RunChart] = {c.name: c for c in (
    RunChart("class-frequency", "Class frequency", _frequency, "Data", names_classes=True),
    RunChart("head-tail", "Head vs tail", lambda runs, width: chart_head_tail(runs, width),
             "Results"),
    RunChart("per-class-f1", "Per-class F1",
             lambda runs, width: chart_per_class_f1(runs, width=width), "Results",
             names_classes=True),
    RunChart("weight-norms", "Weight norms (Figure 3)",
             lambda runs, width: chart_weight_norms(runs, width=width), "Diagnostics",
             names_classes=True),
    RunChart("norm-vs-count", "Weight norm against training count",
             lambda runs, width: chart_norm_vs_count(runs, width), "Diagnostics"),
    RunChart("norm-evolution", "Weight norms during training",
             lambda runs, width: chart_norm_evolution(runs[0]), "Diagnostics", in_report=False,
             names_classes=True),
    RunChart("features", "Classifier-input features (Figure 4)", _figure4, "Diagnostics"),
    RunChart("confusion", "Confusion matrix", _confusion, "Predictions", in_report=False,
             names_classes=True),
)}
