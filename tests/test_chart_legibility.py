"""Every run chart renders, with the marks and labels a reader needs, from 2 to 120 classes and
1 to 16 methods (synthetic stores; the PNGs go to test-artifacts/gallery for a person to look at;
``python tools/chart_gallery.py`` draws the full grid)."""

from pathlib import Path

import numpy as np
import pytest

from glee_core.models.methods import METHODS, registry_order
from glee_core.runs.store import RunStore
from glee_core.views import charts
from glee_core.views.prediction_charts import (
    CONFUSION_COUNTS,
    CONFUSION_LABELS,
    chart_confusion,
    confusion_fits,
    confusion_frame,
)
from glee_core.views.report import chart_png
from glee_core.views.results_charts import chart_calibration_curve, chart_head_tail, head_tail_frame
from glee_core.views.style import APP_WIDTH
from tests.helpers.synthetic_runs import write_synthetic_store
from tools.chart_gallery import gallery_charts

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts" / "gallery"
# both ends and the middle (test_chart_sizes.py checks every size's fit; this, marks and labels)
SIZES = [(2, 1), (20, 6), (120, 16)]


@pytest.fixture(scope="module", params=SIZES, ids=lambda s: f"c{s[0]}-m{s[1]}")
def runs(request, tmp_path_factory):
    n_classes, n_methods = request.param
    store = RunStore(tmp_path_factory.mktemp(f"c{n_classes}m{n_methods}"))
    return write_synthetic_store(store, n_classes, registry_order(METHODS)[:n_methods], [1, 2])


def test_head_tail_has_a_panel_per_group_and_a_row_per_method(runs):
    frame = head_tail_frame(runs)
    methods = {r.method for r in runs}
    assert set(frame["group"]) == {"head_f1", "tail_f1", "many_f1", "medium_f1", "few_f1"}
    assert len(frame) == 5 * len(methods)
    counts = runs[0].record.dataset.class_counts
    # each panel says how many classes it has, and an empty bucket says so instead of a bar
    for _, row in frame.iterrows():
        if row["panel"].endswith("no class"):
            assert row["note"] == "no test class" and row["F1"] != row["F1"]
    total = sum(
        int(p.split("\n")[1].split()[0])
        for p in set(frame["panel"])
        if not p.endswith("no class") and p.split("\n")[0] in ("Head", "Tail")
    )
    assert total == len(counts)
    spec = chart_head_tail(runs).to_dict()
    assert spec["facet"]["field"] == "panel"  # one panel per group, wrapped to the width
    name = f"head-tail-c{len(counts)}-m{len(methods)}.png"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    png = chart_png(chart_head_tail(runs), scale=1.0)
    (ARTIFACTS / name).write_bytes(png)
    assert png[:4] == b"\x89PNG"


CLASS_FIELDS = {"class", "row", "gold", "predicted"}  # the fields that put classes on an axis


def _class_axes(spec: dict) -> list[dict]:
    """The axis settings of every class-carrying channel in a Vega-Lite spec (nested layers,
    facets, concats)."""
    found = []

    def walk(node):
        if isinstance(node, dict):
            if node.get("field") in CLASS_FIELDS and "axis" in node:
                found.append(node["axis"] or {"labels": False})
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(spec)
    return found


def test_every_chart_renders_and_names_every_class(runs):
    """No chart thins class labels out (labelOverlap) or hides them, and each renders to PNG
    through the PDF's path (a 120-class confusion matrix once hit Altair's row limit)."""
    n_classes = len(runs[0].classes)
    size = (n_classes, len({r.method for r in runs}))
    for name, chart in gallery_charts(runs):
        if size not in charts.RUN_CHARTS[name].sizes:
            continue
        spec = chart.to_dict()
        shown = [a for a in _class_axes(spec) if a.get("labels", True) is not False]
        if charts.RUN_CHARTS[name].names_classes:
            assert shown, f"{name}: no axis names the classes"
        for axis in shown:  # an axis hidden beside a labelled one (a grid's strip) is fine
            # said outright: Streamlit's theme thins labels out unless told not to
            assert axis.get("labelOverlap") is False, (name, axis)
        png = chart_png(chart, scale=1.0)
        assert png[:4] == b"\x89PNG", name
        (ARTIFACTS / f"{name}-c{n_classes}-m{len({r.method for r in runs})}.png").write_bytes(png)


def test_confusion_keeps_the_tail_and_pools_the_head(runs):
    """Past what fits, the most frequent classes are pooled, never the tail: every tail class
    keeps its own row and column, and every test example is still counted."""
    run = runs[0]
    n = len(run.classes)
    keep = max(1, n // 2)
    frame = confusion_frame(run, keep)
    total = int(np.asarray(run.metrics.confusion_matrix).sum())
    assert frame["count"].sum() == total
    rarest = run.record.dataset.order[n - keep :]
    assert set(frame["gold"]) - {f"{n - keep} most frequent classes, pooled"} <= set(rarest)
    if keep < n:
        assert f"{n - keep} most frequent classes, pooled" in set(frame["gold"])


def _walk(node):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def test_confusion_counts_are_readable_and_the_matrix_takes_the_width(runs):
    """Up to 30 classes every cell prints its count in type of 10 px or more, in cells of 22 px
    or more that share the column (17 classes once drew a 330 px matrix of 7 px numbers)."""
    n = len(runs[0].classes)
    spec = chart_confusion(runs[0], confusion_fits()).to_dict()
    texts = [node for node in _walk(spec) if node.get("type") == "text"]  # text marks
    step = spec["width"]["step"]
    if n <= CONFUSION_COUNTS:
        assert texts and all(t["fontSize"] >= 10 for t in texts)
        assert step >= min(36, (APP_WIDTH - CONFUSION_LABELS - 40) // n)
        assert step >= 22 and step * n <= APP_WIDTH
    else:
        assert not texts


def test_charts_as_wide_as_the_column_keep_their_plot_height(runs):
    """A chart that fills the column's width fits only its width: Streamlit's default fits the
    whole chart, axes and legend, into the height, which drew a 180 px curve 55 px tall."""
    for name, chart in gallery_charts(runs):
        spec = chart.to_dict()
        if spec.get("width") == "container":
            assert spec["autosize"]["type"] == "fit-x", name
    curve = chart_calibration_curve({0.0: 0.5, 1.0: 0.6}, 0.0, 1.0, "f1").to_dict()
    assert curve["autosize"]["type"] == "fit-x" and curve["height"] >= 180
