"""The diagnostics' charts, the paper's explanations: per-class weight norms (Figure 3),
the norm against the training count and during training, and the classifier-input features of a
head and a tail class (Figure 4)."""

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
    GROUP_COLORS,
    GROUP_PALETTE,
    MARGIN,
    PANEL_AXIS,
    ROW_LABEL_LIMIT,
    _by_method,
    _class_method_grid,
    _class_rows,
    _class_table,
    _highlight,
    _label_width,
    _pooled_note,
    pool_rare_classes,
)

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
            rows.append(
                {
                    "method": method,
                    "paper row": method_label(method),
                    "class": c["class"],
                    "rank": c["rank"],
                    "count": c["count"],
                    "group": c["group"],
                    "norm": float(np.mean(norms)),
                }
            )
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
            color=alt.Color(
                "group:N", scale=GROUP_COLORS, title=None, legend=alt.Legend(orient="top")
            ),
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


def feature_distribution_frame(
    runs: list[Run], head_class: str, tail_class: str, dims: int = FIGURE4_FEATURES, bins: int = 12
) -> pd.DataFrame:
    """Figure 4's data: for each method (its lowest seed's run) and each of the first ``dims``
    classifier-input features, the density histogram of the head class's and the tail class's
    stored test examples over shared bin edges (densities, so a class of 2 examples reads on
    the same scale as one of 64)."""
    rows = []
    for method, group in _by_method(runs).items():
        run = group[0]
        values = {
            "head": _class_features(run, head_class, dims),
            "tail": _class_features(run, tail_class, dims),
        }
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
                    rows.append(
                        {
                            "method": method,
                            "paper row": method_label(method),
                            "feature": f"f{d + 1}",
                            "group": group_name,
                            "class": head_class if group_name == "head" else tail_class,
                            "examples": len(array),
                            "bin_start": float(edges[i]),
                            "bin_end": float(edges[i + 1]),
                            "density": float(value),
                        }
                    )
    return pd.DataFrame(
        rows,
        columns=[
            "method",
            "paper row",
            "feature",
            "group",
            "class",
            "examples",
            "bin_start",
            "bin_end",
            "density",
        ],
    )


def dead_feature_frame(
    runs: list[Run], head_class: str, tail_class: str, dims: int = FIGURE4_FEATURES
) -> pd.DataFrame:
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
            rows.append(
                {
                    "method": method,
                    "paper row": method_label(method),
                    "class": name,
                    "group": group_name,
                    "examples": len(array),
                    "zero share": float(zero.mean()),
                    "dead features": int((zero.mean(axis=0) > 0.5).sum()),
                    "features": array.shape[1],
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "method",
            "paper row",
            "class",
            "group",
            "examples",
            "zero share",
            "dead features",
            "features",
        ],
    )


def chart_feature_distributions(
    runs: list[Run],
    head_class: str,
    tail_class: str,
    dims: int = FIGURE4_FEATURES,
    width: int = APP_WIDTH,
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
    color = alt.Color(
        "legend:N",
        title=None,
        legend=alt.Legend(orient="top"),
        scale=alt.Scale(
            domain=list(named.values()), range=[GROUP_PALETTE["head"], GROUP_PALETTE["tail"]]
        ),
    )
    # each panel on its own scales: the feature's values below (two or three ticks), and where
    # there is room the density's at the left
    # "~r": plain decimals ("~g" drew a density of 10 as "1e+1"); 10 px, the smallest type the
    # app draws (9 px read as ~7 px once the app scaled the chart to its column)
    small = {
        "labelFontSize": 10,
        "tickSize": 3,
        "labelPadding": 1,
        "grid": False,
        "labelOverlap": "greedy",
    }
    grid = (
        alt.Chart(frame)
        .mark_area(opacity=0.45, interpolate="step-after")
        .encode(
            x=alt.X("bin_start:Q", title=None, axis=alt.Axis(tickCount=3, format="~r", **small)),
            y=alt.Y(
                "density:Q",
                title=None,
                stack=None,
                axis=alt.Axis(tickCount=2, format="~r", labels=density_labels, **small),
            ),
            color=color,
            tooltip=[
                "paper row",
                "feature",
                "class",
                "examples",
                alt.Tooltip("bin_start:Q", format=".3f"),
                alt.Tooltip("density:Q", format=".2f"),
            ],
        )
        .properties(width=panel, height=56)
        .facet(
            row=alt.Row(
                "method:N",
                sort=rows,
                title=None,
                header=alt.Header(
                    labelAngle=0, labelAlign="left", labelLimit=160, labelFontSize=10
                ),
            ),
            column=alt.Column(
                "feature:N",
                sort=features,
                title="classifier-input feature: density of its values, each panel "
                "on its own scales",
            ),
            spacing=4,
        )
        .resolve_scale(x="independent", y="independent")
    )
    base = alt.Chart(dead).encode(
        y=alt.Y("method:N", sort=rows, title=None, axis=alt.Axis(labelLimit=160)),
        yOffset="group:N",
        x=alt.X(
            "dead features:Q",
            title=f"dead features (of the first {dims})",
            scale=alt.Scale(domain=[0, dims]),
        ),
        tooltip=[
            "paper row",
            "class",
            "examples",
            "dead features",
            alt.Tooltip("zero share:Q", format=".0%"),
        ],
    )
    bars = alt.layer(
        base.mark_bar().encode(color=color),
        base.mark_text(align="left", dx=3, fontSize=10)
        .encode(text=alt.Text("label:N"))
        .transform_calculate(
            label="datum.group + ': ' + datum['dead features'] + ' dead, ' + "
            "format(datum['zero share'], '.0%') + ' zeros'"
        ),
    ).properties(width=260, height=alt.Step(14), title="Dead features (zero for most examples)")
    title = f"Classifier-input features: {head_class} (head) vs {tail_class} (tail)"
    if not dead["dead features"].any():  # all-zero bars say nothing: a sentence says it
        return grid.properties(
            title=alt.TitleParams(
                title,
                subtitle=f"No head shown has a dead feature among the first {dims} (zero for "
                "most examples of either class).",
            )
        )
    # the histograms first, right under the legend that names their colours
    return alt.vconcat(grid, bars).resolve_legend(color="shared").properties(title=title)


# --------------------------------------------------------------------------------------------
# Weight norms against class frequency, and as training goes


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
            color=alt.Color(
                "group:N", scale=GROUP_COLORS, title=None, legend=alt.Legend(orient="top")
            ),
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
