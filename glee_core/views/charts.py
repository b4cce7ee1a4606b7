"""Every chart of the app and of the PDF report, and the registry of the run charts
(:data:`RUN_CHARTS`) that the app's pages, the report, the gallery and the legibility tests read.

Each ``chart_*`` draws one thing from stored runs (or a dataset's counts, or a label budget); the
matching ``*_frame`` function builds the tidy table behind it, so the numbers can be checked and
tabled. Classes are always ordered head to tail (by training count) and coloured head / tail. The
charts live by the page that shows them (``data_charts``, ``results_charts``,
``diagnostics_charts``, ``norm_charts``, ``prediction_charts``), the look they share in
``style``; this module registers the run charts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import altair as alt

from ..runs.store import Run
from .data_charts import chart_class_frequency
from .diagnostics_charts import (
    FIGURE4_METHODS,
    chart_feature_distributions,
    default_feature_classes,
)
from .norm_charts import chart_norm_evolution, chart_norm_vs_count, chart_weight_norms
from .prediction_charts import chart_confusion, confusion_fits
from .results_charts import chart_head_tail, chart_per_class_f1

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
    return chart_feature_distributions(
        [r for r in runs if r.method in FIGURE4_METHODS] or runs, head, tail, width=width
    )


def _confusion(runs: list[Run], width: int) -> alt.Chart:
    return chart_confusion(runs[0], confusion_fits(width), width)


RUN_CHARTS: dict[str, RunChart] = {
    c.name: c
    for c in (
        RunChart("class-frequency", "Class frequency", _frequency, "Data", names_classes=True),
        RunChart(
            "head-tail", "Head vs tail", lambda runs, width: chart_head_tail(runs, width), "Results"
        ),
        RunChart(
            "per-class-f1",
            "Per-class F1",
            lambda runs, width: chart_per_class_f1(runs, width=width),
            "Results",
            names_classes=True,
        ),
        RunChart(
            "weight-norms",
            "Weight norms (Figure 3)",
            lambda runs, width: chart_weight_norms(runs, width=width),
            "Diagnostics",
            names_classes=True,
        ),
        RunChart(
            "norm-vs-count",
            "Weight norm against training count",
            lambda runs, width: chart_norm_vs_count(runs, width),
            "Diagnostics",
        ),
        RunChart(
            "norm-evolution",
            "Weight norms during training",
            lambda runs, width: chart_norm_evolution(runs[0]),
            "Diagnostics",
            in_report=False,
            names_classes=True,
        ),
        RunChart("features", "Classifier-input features (Figure 4)", _figure4, "Diagnostics"),
        RunChart(
            "confusion",
            "Confusion matrix",
            _confusion,
            "Predictions",
            in_report=False,
            names_classes=True,
        ),
    )
}
