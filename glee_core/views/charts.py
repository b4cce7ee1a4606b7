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

from ..models.methods import METHODS, method_label, registry_order
from ..runs.metrics import SHOT_BUCKETS, shot_bucket
from ..runs.paper import NEAREST_REFERENCE, paper_cells
from ..runs.record import METRIC_TITLES, group_of
from ..runs.store import Run, aggregate

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
# one colour per registry method, the same in every chart, app and PDF (20 distinguishable hues)
METHOD_PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                  "#7f7f7f", "#bcbd22", "#17becf", "#000080", "#f032e6", "#469990", "#9a6324",
                  "#800000", "#aaffc3", "#808000", "#ffd8b1", "#000000", "#dcbeff"]
BUCKET_COLORS = alt.Scale(domain=list(GROUP_TITLES), range=list(GROUP_PALETTE.values()))


def _highlight(highlight: str | None):
    """Opacity encoding that brings one class forward (the same class in every chart)."""
    if not highlight:
        return alt.value(1.0)
    return alt.condition(alt.datum["class"] == highlight, alt.value(1.0), alt.value(0.25))
def _row_order(frame: pd.DataFrame) -> list[str]:
    """The paper-row labels of a frame's methods, in the registry's order (legends, panels)."""
    return [method_label(m) for m in registry_order(frame["method"])]


def method_colors(labels: Mapping[str, str]) -> alt.Scale:
    """A colour scale over ``labels`` (method id -> the text shown for it) giving each method its
    fixed colour from :data:`METHOD_PALETTE` by its registry position."""
    positions = {m: i for i, m in enumerate(registry_order(METHODS))}
    ordered = registry_order(labels)
    return alt.Scale(domain=[labels[m] for m in ordered],
                     range=[METHOD_PALETTE[positions[m] % len(METHOD_PALETTE)] for m in ordered])


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


def chart_class_frequency(counts: Mapping[str, int], head: Iterable[str],
                          log_scale: bool = False, title: str = "Training examples per class",
                          highlight: str | None = None) -> alt.Chart:
    """Classes sorted head to tail; the head/tail boundary is the dashed rule. Every class is
    named: columns up to 40 classes, rows (one per class, the chart grows) beyond."""
    frame = pool_rare_classes(class_frequency_frame(counts, head), mean=["count", "share"],
                              by=None)
    title += _pooled_note(frame)
    order = list(frame["class"])
    scale = alt.Scale(type="symlog") if log_scale else alt.Scale()  # bars start at 0
    value = alt.X if len(order) > 40 else alt.Y
    category = alt.Y if len(order) > 40 else alt.X
    cls = category("class:N", sort=order, title="class (head → tail)",
                   axis=alt.Axis(labelOverlap=False, labelLimit=160,
                                 labelFontSize=10 if len(order) <= 40 else 9,
                                 **({} if len(order) > 40 else {"labelAngle": -60})))
    count = value("count:Q", scale=scale, title="training examples" + (" (log)" if log_scale
                                                                         else ""))
    bars = alt.Chart(frame).mark_bar().encode(
        **{("y" if len(order) > 40 else "x"): cls, ("x" if len(order) > 40 else "y"): count},
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
        return alt.layer(*layers).properties(title=title, width="container",
                                             height=alt.Step(12))
    return alt.layer(*layers).properties(title=title, width="container", height=280)


# --------------------------------------------------------------------------------------------
# Results


def per_class_f1_frame(runs: list[Run]) -> pd.DataFrame:
    """Per-class test F1 (mean over seeds) with each class's training count and group."""
    rows = []
    for method, group in _by_method(runs).items():
        classes = _class_table(group[0])
        for _, c in classes.iterrows():
            f1 = [r.metrics.per_class[c["class"]].f1 for r in group]
            support = group[0].metrics.per_class[c["class"]].support
            rows.append({"method": method, "paper row": method_label(method), "class": c["class"],
                         "rank": c["rank"], "count": c["count"], "group": c["group"],
                         "f1": float(np.mean(f1)), "test support": support,
                         "seeds": len(group)})
    return pd.DataFrame(rows)


def chart_per_class_f1(runs: list[Run], highlight: str | None = None) -> alt.Chart:
    """Per-class test F1 (mean over seeds) as a grid: one row per class, head (top) to tail,
    one column per method, the value printed in each cell. Every class and every method keeps
    its label from 2 to 120+ classes and 1 to 16+ methods (the page grows instead); a strip on
    the left marks head / tail and the many / medium / few bucket; ``highlight`` outlines one
    class's row."""
    frame = pool_rare_classes(per_class_f1_frame(runs), mean=["f1"], total=["test support"])
    frame["shot"] = frame["count"].map(shot_bucket)
    frame["row"] = [f"{c} ({n})" for c, n in zip(frame["class"], frame["count"], strict=True)]
    rows = list(dict.fromkeys(frame.sort_values("rank")["row"]))
    columns = _row_order(frame)
    y = alt.Y("row:N", sort=rows, title="class (training examples), head → tail",
              axis=alt.Axis(labelLimit=220, labelFontSize=10, labelOverlap=False))
    strips = alt.Chart(frame[frame["method"] == frame["method"].iloc[0]]).transform_fold(
        ["group", "shot"], as_=["kind", "bucket"]).mark_rect().encode(
        x=alt.X("kind:N", sort=["group", "shot"], title=None,
                axis=alt.Axis(orient="top", labelAngle=-35, labelOverlap=False)),
        y=y, color=alt.Color("bucket:N", title="class group", scale=SHOT_GROUP_COLORS,
                             legend=alt.Legend(orient="bottom", direction="vertical")),
        tooltip=["class", "count", "group", "shot"]).properties(width=70,
                                                                 height=alt.Step(15))
    cells = alt.Chart(frame).encode(
        x=alt.X("paper row:N", sort=columns, title=None,
                axis=alt.Axis(orient="top", labelAngle=-35, labelLimit=340, labelFontSize=10,
                              labelOverlap=False)),
        y=alt.Y("row:N", sort=rows, title=None, axis=None))
    heat = cells.mark_rect().encode(
        color=alt.Color("f1:Q", title="test F1", scale=alt.Scale(domain=[0, 1], scheme="blues"),
                        legend=alt.Legend(orient="bottom", direction="horizontal")),
        tooltip=["paper row", "class", "count", "group", "shot",
                 alt.Tooltip("f1:Q", format=".3f"), "test support", "seeds"])
    text = cells.mark_text(fontSize=9).encode(
        text=alt.Text("f1:Q", format=".2f"),
        color=alt.condition(alt.datum.f1 > 0.6, alt.value("white"), alt.value("black")))
    layers = [heat, text]
    if highlight:
        layers.append(cells.mark_rect(fill=None, stroke="black", strokeWidth=2)
                      .transform_filter(alt.datum["class"] == highlight))
    grid = alt.layer(*layers).properties(width=alt.Step(44), height=alt.Step(15))
    return alt.hconcat(strips, grid, spacing=4).resolve_scale(color="independent").properties(
        title="Per-class test F1 (mean over seeds), classes head → tail" + _pooled_note(frame))


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


def chart_head_tail(runs: list[Run]) -> alt.Chart:
    """Head / tail F1 and many / medium / few-shot F1 per method (mean over seeds; the black
    line spans ± std; the dashed line is the class-balanced probe, the baseline to beat).
    One panel per group, methods down the side: legible from 1 to 16+ methods; a group with no
    class is said so in its title ("no class"), one with no test example in its bars."""
    frame = head_tail_frame(runs)
    order = _row_order(frame)
    panels = list(dict.fromkeys(frame["panel"]))
    y = alt.Y("paper row:N", sort=order, title=None, axis=alt.Axis(labelLimit=420))
    x = alt.X("F1:Q", title="macro-F1 (%)", scale=alt.Scale(domain=[0, 100]),
              axis=alt.Axis(values=[0, 50, 100]))
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
        width=150, height=alt.Step(20)).facet(
        column=alt.Column("panel:N", sort=panels, title=None,
                          header=alt.Header(labelFontWeight="bold", labelFontSize=11,
                                            labelExpr="split(datum.label, '\\n')")),
        spacing=8).properties(title="F1 by class group: head / tail and many / medium / few "
                                    "shot (%)")


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


def chart_weight_norms(runs: list[Run], columns: int = 3, highlight: str | None = None
                       ) -> alt.Chart:
    """Figure 3: per-class weight-norm bars, classes head to tail, one panel per method, shared
    axis; flat bars mean the classifier does not favour the head. Every panel names every class
    up to 30 classes; beyond that the bars become a grid (a row per class, a column per method,
    the norm printed), so 120 classes stay legible."""
    frame = weight_norm_frame(runs)
    order = list(dict.fromkeys(frame.sort_values("rank")["class"]))
    tooltip = ["paper row", "class", "count", "group", alt.Tooltip("norm:Q", format=".3f")]
    if len(order) > 30:
        frame["relative"] = frame["norm"] / frame.groupby("method")["norm"].transform("mean")
        frame = pool_rare_classes(frame, mean=["norm", "relative"])
        frame["row"] = [f"{c} ({n})" for c, n in zip(frame["class"], frame["count"],
                                                      strict=True)]
        rows = list(dict.fromkeys(frame.sort_values("rank")["row"]))
        cells = alt.Chart(frame).encode(
            x=alt.X("paper row:N", sort=_row_order(frame), title=None,
                    axis=alt.Axis(orient="top", labelAngle=-35, labelLimit=340,
                                  labelFontSize=10, labelOverlap=False)),
            y=alt.Y("row:N", sort=rows, title="class (training examples), head → tail",
                    axis=alt.Axis(labelFontSize=10, labelLimit=220, labelOverlap=False)))
        heat = cells.mark_rect().encode(
            color=alt.Color("relative:Q", title="‖w_c‖ / method mean",
                            scale=alt.Scale(scheme="redblue", reverse=True, domainMid=1),
                            legend=alt.Legend(orient="bottom", direction="horizontal")),
            opacity=_highlight(highlight), tooltip=tooltip)
        text = cells.mark_text(fontSize=9).encode(text=alt.Text("norm:Q", format=".2f"))
        return alt.layer(heat, text).properties(
            width=alt.Step(44), height=alt.Step(15),
            title="Per-class weight norms (head → tail; colour: against the method's mean)"
            + _pooled_note(frame))
    width = max(220, 14 * len(order))
    columns = max(1, min(columns, 700 // width))
    return alt.Chart(frame).mark_bar().encode(
        x=alt.X("class:N", sort=order, title=None,
                axis=alt.Axis(labelAngle=-60, labelOverlap=False, labelFontSize=9,
                              labelLimit=90)),
        y=alt.Y("norm:Q", title="‖w_c‖"),
        color=alt.Color("group:N", scale=GROUP_COLORS, title=None),
        opacity=_highlight(highlight),
        tooltip=tooltip,
    ).properties(width=width, height=150).facet(
        facet=alt.Facet("paper row:N", sort=_row_order(frame), title=None,
                        header=alt.Header(labelFontSize=11, labelLimit=width + 60)),
        columns=columns,
    ).resolve_scale(y="shared").resolve_axis(x="independent").properties(
        title="Per-class weight norms (head → tail)")


def default_feature_classes(run: Run) -> tuple[str, str]:
    """The most frequent head class and the rarest tail class with stored features."""
    classes = _class_table(run)
    labels = set(run.features["labels"].tolist())
    index = {c: i for i, c in enumerate(run.classes)}
    present = classes[[index[c] in labels for c in classes["class"]]]
    head = present[present["group"] == "head"]["class"]
    tail = present[present["group"] == "tail"]["class"]
    return (head.iloc[0] if len(head) else present["class"].iloc[0],
            tail.iloc[-1] if len(tail) else present["class"].iloc[-1])


FIGURE4_METHODS = ("cls-tanh", "cls-relu", "cls-relu-ln", "cls-relu-pt-ln", "prompt")  # its heads
FIGURE4_FEATURES = 10  # the paper plots the first ten classifier-input features


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
                                dims: int = FIGURE4_FEATURES) -> alt.Chart:
    """Figure 4: one small density plot per method (rows) and feature (columns), the head and
    the tail class overlaid; beside it, how many of those features are dead (zero for most
    examples) per method and class - ReLU kills tail features, a LayerNorm after it does not."""
    frame = feature_distribution_frame(runs, head_class, tail_class, dims)
    dead = dead_feature_frame(runs, head_class, tail_class, dims)
    rows = _row_order(frame) if len(frame) else []
    features = [f"f{d + 1}" for d in range(dims)]
    # the legend names the two classes: as data (a column and the scale's domain), never inside
    # a Vega expression, where a class name would be code
    named = {"head": f"head: {head_class}", "tail": f"tail: {tail_class}"}
    frame = frame.assign(legend=frame["group"].map(named))
    dead = dead.assign(legend=dead["group"].map(named))
    color = alt.Color("legend:N", title=None, legend=alt.Legend(orient="top"),
                      scale=alt.Scale(domain=list(named.values()),
                                      range=[GROUP_PALETTE["head"], GROUP_PALETTE["tail"]]))
    grid = alt.Chart(frame).mark_area(opacity=0.45, interpolate="step-after").encode(
        x=alt.X("bin_start:Q", title=None, axis=alt.Axis(labels=False, ticks=False)),
        y=alt.Y("density:Q", title=None, stack=None, axis=alt.Axis(labels=False, ticks=False)),
        color=color,
        tooltip=["paper row", "feature", "class", "examples",
                 alt.Tooltip("bin_start:Q", format=".3f"), alt.Tooltip("density:Q", format=".2f")],
    ).properties(width=62, height=44).facet(
        row=alt.Row("paper row:N", sort=rows, title=None,
                    header=alt.Header(labelAngle=0, labelAlign="left", labelLimit=230)),
        column=alt.Column("feature:N", sort=features, title="classifier-input feature (density)"),
        spacing=4,
    ).resolve_scale(x="independent", y="independent")
    base = alt.Chart(dead).encode(
        y=alt.Y("paper row:N", sort=rows, title=None, axis=alt.Axis(labelLimit=230)),
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
    return alt.vconcat(bars, grid).resolve_legend(color="shared").properties(
        title=f"Classifier-input features: {head_class} (head) vs {tail_class} (tail)")


# --------------------------------------------------------------------------------------------
# Predictions and the playground


def confusion_frame(run: Run, top_k: int | None = None) -> pd.DataFrame:
    """Confusion counts, classes head to tail, non-zero cells only (a 120-class matrix is
    mostly zeros); ``share`` is the cell's part of its gold row (recall on the diagonal).
    ``top_k`` keeps the most frequent classes and pools the rest into one row and column named
    after how many classes it holds, so the tail is never dropped silently."""
    order = _class_table(run)["class"].tolist()
    matrix = np.asarray(run.metrics.confusion_matrix)
    index = [run.classes.index(c) for c in order]
    matrix = matrix[np.ix_(index, index)]
    labels = list(order)
    if top_k and top_k < len(order):
        pooled = f"{len(order) - top_k} rarer classes, pooled"
        kept = matrix[:top_k, :top_k]
        right = matrix[:top_k, top_k:].sum(1, keepdims=True)
        bottom = matrix[top_k:, :top_k].sum(0, keepdims=True)
        corner = matrix[top_k:, top_k:].sum(keepdims=True).reshape(1, 1)
        matrix = np.block([[kept, right], [bottom, corner]])
        labels = order[:top_k] + [pooled]
    totals = matrix.sum(1)
    gold, pred = np.nonzero(matrix)
    return pd.DataFrame({"gold": [labels[i] for i in gold], "predicted": [labels[j] for j in pred],
                         "count": matrix[gold, pred].astype(int),
                         "share": matrix[gold, pred] / np.maximum(totals[gold], 1)}
                        ).assign(order=lambda f: f["gold"].map(labels.index))


def chart_confusion(run: Run, top_k: int | None = None) -> alt.Chart:
    """Rows gold, columns predicted, classes head to tail; colour is the share of the gold row
    (so a tail class with 3 test examples is as visible as a head class with 600), counts printed
    in the cells up to 30 classes. Every class keeps its label; the matrix grows with classes."""
    frame = confusion_frame(run, top_k)
    order = _class_table(run)["class"].tolist()
    if top_k and top_k < len(order):
        order = order[:top_k] + [f"{len(order) - top_k} rarer classes, pooled"]
    step = 22 if len(order) <= 30 else 12
    axis = dict(labelOverlap=False, labelFontSize=10 if len(order) <= 30 else 8, labelLimit=180)
    base = alt.Chart(frame).encode(
        x=alt.X("predicted:N", scale=alt.Scale(domain=order), title="predicted",
                axis=alt.Axis(labelAngle=-60, orient="top", **axis)),
        y=alt.Y("gold:N", scale=alt.Scale(domain=order), title="gold (head → tail)",
                axis=alt.Axis(**axis)))
    cells = base.mark_rect(stroke="#eee", strokeWidth=0.5).encode(
        color=alt.Color("share:Q", scale=alt.Scale(scheme="blues", domain=[0, 1]),
                        title="share of gold row",
                        legend=alt.Legend(orient="bottom", direction="horizontal",
                                          format=".0%", values=[0, 0.25, 0.5, 0.75, 1])),
        tooltip=["gold", "predicted", "count", alt.Tooltip("share:Q", format=".1%")])
    layers = [cells]
    if len(order) <= 30:
        layers.append(base.mark_text(fontSize=10 if len(order) <= 15 else 8).encode(
            text="count:Q",
            color=alt.condition(alt.datum.share > 0.5, alt.value("white"), alt.value("black"))))
    return alt.layer(*layers).properties(title=f"Confusion matrix ({method_label(run.method)})",
                                         width=alt.Step(step), height=alt.Step(step))


def chart_class_scores(scores: pd.DataFrame, title: str) -> alt.Chart:
    """One bar per class, best first (columns ``class``, ``score``, ``label words``, ``group``),
    every class named and its probability printed, so a tiny bar still reads."""
    frame = scores.assign(text=[f"{p:.1%}" if p >= 0.001 else "<0.1%" for p in scores["score"]])
    base = alt.Chart(frame).encode(
        y=alt.Y("class:N", sort="-x", title=None,
                axis=alt.Axis(labelLimit=220, labelOverlap=False)),
        x=alt.X("score:Q", title="probability", scale=alt.Scale(domain=[0, 1]),
                axis=alt.Axis(format="%")))
    bars = base.mark_bar().encode(
        color=alt.Color("group:N", scale=GROUP_COLORS, title=None),
        tooltip=["class", "label words", alt.Tooltip("score:Q", format=".4f"), "group"])
    labels = base.mark_text(align="left", dx=3, fontSize=10).encode(text="text:N")
    return alt.layer(bars, labels).properties(title=title, width="container",
                                              height=alt.Step(18))


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
    ).properties(width="container", height=22 * len(frame),
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


def chart_calibration_delta(run: Run, before: dict, after: dict, title: str) -> alt.Chart:
    """The change in each class's test F1 (points), classes head to tail: logit adjustment and
    τ-norm should lift the tail and may cost the head."""
    frame = calibration_delta_frame(run, before, after)
    order = list(frame["class"])
    bars = alt.Chart(frame).mark_bar().encode(
        x=alt.X("class:N", sort=order, title="class (head → tail, by training count)",
                axis=alt.Axis(labelAngle=-60, labelLimit=140, labelOverlap=False)),
        y=alt.Y("delta:Q", title="Δ test F1 (points)"),
        color=alt.Color("group:N", scale=GROUP_COLORS, title=None),
        tooltip=["class", "count", "group", alt.Tooltip("before:Q", format=".3f"),
                 alt.Tooltip("after:Q", format=".3f"), alt.Tooltip("delta:Q", format="+.1f")])
    zero = alt.Chart(pd.DataFrame({"y": [0]})).mark_rule(color="black").encode(y="y:Q")
    return alt.layer(bars, zero).properties(title=title, width="container", height=260)


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
    return alt.layer(line, rules).properties(width="container", height=180,
                                             title="Dev metric against the strength")


# --------------------------------------------------------------------------------------------
# Weight norms against class frequency, and as training goes


def norm_count_frame(runs: list[Run]) -> pd.DataFrame:
    """Per class and method: training count and the predictor norm relative to the method's
    mean norm (mean over seeds), with each method's fitted slope against log10(count)."""
    frame = weight_norm_frame(runs)
    frame = frame[frame["count"] > 0].copy()
    frame["relative norm"] = frame["norm"] / frame.groupby("method")["norm"].transform("mean")
    slopes = {m: float(np.polyfit(np.log10(g["count"]), g["relative norm"], 1)[0])
              if len(g) >= 3 else float("nan") for m, g in frame.groupby("method")}
    frame["slope"] = frame["method"].map(slopes)
    frame["legend"] = [f"{s:+.2f}  {row}" for row, s in
                       zip(frame["paper row"], frame["slope"], strict=True)]
    return frame


def chart_norm_vs_count(runs: list[Run]) -> alt.Chart:
    """Figure 3 in one glance: each class's predictor norm (relative to its method's mean)
    against its training count (log scale), one colour per method, the fitted slope in the
    legend. Flat (slope near 0): the classifier does not favour frequent classes."""
    frame = norm_count_frame(runs)
    legends = dict(zip(frame["method"], frame["legend"], strict=True))
    base = alt.Chart(frame).encode(
        x=alt.X("count:Q", scale=alt.Scale(type="log"), title="training examples (log)"),
        y=alt.Y("relative norm:Q", title="‖w_c‖ / mean ‖w‖", scale=alt.Scale(zero=False)),
        color=alt.Color("legend:N", scale=method_colors(legends),
                        title="slope of the norm against log10 count, method",
                        legend=alt.Legend(orient="bottom", columns=2, labelLimit=360,
                                          titleLimit=500, symbolLimit=0)))
    points = base.mark_point(filled=True, size=40).encode(
        tooltip=["paper row", "class", "count", alt.Tooltip("norm:Q", format=".3f"),
                 alt.Tooltip("relative norm:Q", format=".2f")])
    fits = base.transform_regression("count", "relative norm", groupby=["legend"],
                                     method="log").mark_line(opacity=0.7)
    return alt.layer(points, fits).properties(
        title="Per-class weight norm against training count", width="container", height=300)


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
                       f"{run.seed})", width="container",
                 height=alt.Step(16 if len(order) <= 40 else 12))


# --------------------------------------------------------------------------------------------
# The registry: every chart drawn from one dataset's runs, where it is shown, in one place


# (classes, methods): the sizes every chart must stay readable at (gallery and legibility test)
LEGIBLE_SIZES = ((2, 1), (20, 3), (120, 16))


@dataclass(frozen=True)
class RunChart:
    """A chart of one dataset's runs (a setting, one or more methods and seeds): its title,
    how to draw it, the app page that shows it, whether the PDF report has it, whether it names
    every class on an axis, and the (classes, methods) sizes it must stay readable at. The
    report, the gallery (``tools/chart_gallery.py``), its legibility test and the Report page's
    list read this registry; a new chart is a function above and a line below."""

    name: str
    title: str
    draw: Callable[[list[Run]], alt.Chart]
    page: str
    in_report: bool = True
    names_classes: bool = False  # an axis names every class (never thinned out)
    sizes: tuple[tuple[int, int], ...] = LEGIBLE_SIZES


def _frequency(runs: list[Run]) -> alt.Chart:
    data = runs[0].record.dataset
    return chart_class_frequency(data.class_counts, data.head_classes)


def _figure4(runs: list[Run]) -> alt.Chart:
    head, tail = default_feature_classes(runs[0])
    return chart_feature_distributions([r for r in runs if r.method in FIGURE4_METHODS] or runs,
                                       head, tail)


RUN_CHARTS: dict[str, RunChart] = {c.name: c for c in (
    RunChart("class-frequency", "Class frequency", _frequency, "Data", names_classes=True),
    RunChart("head-tail", "Head vs tail", chart_head_tail, "Results"),
    RunChart("per-class-f1", "Per-class F1", chart_per_class_f1, "Results", names_classes=True),
    RunChart("weight-norms", "Weight norms (Figure 3)", chart_weight_norms, "Diagnostics",
             names_classes=True),
    RunChart("norm-vs-count", "Weight norm against training count", chart_norm_vs_count,
             "Diagnostics", in_report=False),
    RunChart("norm-evolution", "Weight norms during training",
             lambda runs: chart_norm_evolution(runs[0]), "Diagnostics", in_report=False,
             names_classes=True),
    RunChart("features", "Classifier-input features (Figure 4)", _figure4, "Diagnostics"),
    RunChart("confusion", "Confusion matrix", lambda runs: chart_confusion(runs[0]),
             "Predictions", in_report=False, names_classes=True),
)}
