"""The diagnostics' feature charts, the paper's Figure 4: the classifier-input features of a head
and a tail class, and the features no class lights (the weight norms, Figure 3: ``norm_charts``)."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from ..models.methods import method_label, registry_order
from ..runs.store import Run
from .style import (
    APP_WIDTH,
    GROUP_PALETTE,
    MARGIN,
    _by_method,
    _class_table,
    _label_width,
)

# --------------------------------------------------------------------------------------------
# Diagnostics: the paper's Figure 4


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


def _density_grid(frame, rows: list[str], features: list[str], color, panel: tuple[int, bool]):
    """Figure 4's small densities, a method a row and a feature a column (``panel``: a panel's
    width, and whether its density axis has labels)."""
    panel, density_labels = panel
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
    return grid


def _dead_bars(dead, rows: list[str], color, dims: int):
    """How many of the first ``dims`` features are dead (zero for most examples), per method
    and class."""
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
    return bars


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
    grid = _density_grid(frame, rows, features, color, (panel, density_labels))
    bars = _dead_bars(dead, rows, color, dims)
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
