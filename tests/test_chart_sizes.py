"""Every run chart fits the width it is drawn for, at every size a user has: 2, 20 and 60 classes
x 1, 6 and 19 methods, in the app's page column (1,440 px window) and on the PDF's A4 page.

The charts are rendered to SVG by vl-convert (the PDF's renderer; the browser check in
``test_browser_sizes.py`` measures the same charts in Chromium): the drawing's width must stay
within its budget, its height above a floor (a chart squeezed to a sliver is a defect), and
every class and method it names must be written in it. Chromium then measures where each word of
the drawing lands: no two words may share ink and none may be cut by the drawing's edge
(``tests/helpers/text_geometry.py``).
"""

import re
from pathlib import Path

import pytest
import vl_convert

from glee_core.models.methods import METHODS, registry_order
from glee_core.runs.store import RunStore
from glee_core.views import charts
from glee_core.views.diagnostics_charts import FIGURE4_METHODS
from glee_core.views.results_charts import (
    chart_calibration_delta,
    chart_paper_head_tail_gap,
    chart_paper_results,
)
from glee_core.views.style import APP_WIDTH, CLASS_ROWS, PDF_WIDTH
from tests.helpers.streamlit_server import CHROMIUM, FLAGS
from tests.helpers.synthetic_runs import write_synthetic_store
from tests.helpers.text_geometry import TEXT_CORNERS, text_clashes

SIZES = [s for s in charts.LEGIBLE_SIZES if s[0] <= 60]
MIN_HEIGHT = 110  # px: under it a chart is a sliver
SVG_SIZE = re.compile(r'<svg[^>]*\bwidth="([\d.]+)"[^>]*\bheight="([\d.]+)"')
# charts that write every method's id (panels, rows or columns) and every class's name
NAMES_METHODS = {"head-tail", "per-class-f1", "weight-norms", "norm-vs-count", "features"}


@pytest.fixture(scope="module", params=SIZES, ids=lambda s: f"c{s[0]}-m{s[1]}")
def runs(request, tmp_path_factory):
    n_classes, n_methods = request.param
    store = RunStore(tmp_path_factory.mktemp(f"sizes-c{n_classes}m{n_methods}"))
    return write_synthetic_store(store, n_classes, registry_order(METHODS)[:n_methods], [1, 2])


WIDTHS = {"app": APP_WIDTH, "pdf": PDF_WIDTH}


@pytest.fixture(scope="module")
def drawings(runs) -> dict[tuple[str, str], str]:
    """(where, chart) -> the SVG of every registry chart drawn for the page and the PDF (the
    report's charts only), and the pages' other charts for the page."""
    found = {}
    for where, width in WIDTHS.items():
        for chart in charts.RUN_CHARTS.values():
            if where == "app" or chart.in_report:
                found[where, chart.name] = svg_of(chart.draw(runs, width), width)
    for name, chart in page_charts(runs).items():
        found["app", name] = svg_of(chart, APP_WIDTH)
    return found


@pytest.fixture(scope="module")
def chromium():
    """A blank Chromium page to lay drawings out in (one for the module)."""
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed")
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield browser.new_page()
        browser.close()


def svg_of(chart, width: int) -> str:
    spec = chart.to_dict()
    if spec.get("width") == "container":  # as the page or the PDF fits it
        spec.update(width=width, autosize={"type": "fit-x", "contains": "padding"})
    spec.setdefault("config", {}).setdefault("font", "DejaVu Sans")
    return vl_convert.vegalite_to_svg(spec)


@pytest.mark.parametrize("where", WIDTHS)
def test_every_chart_fits_its_width_and_names_what_it_shows(runs, drawings, where):
    width = WIDTHS[where]
    n_classes = len(runs[0].classes)
    methods = registry_order({r.method for r in runs})
    figure4 = [m for m in methods if m in FIGURE4_METHODS] or methods
    for chart in charts.RUN_CHARTS.values():
        if where == "pdf" and not chart.in_report:
            continue
        svg = drawings[where, chart.name]
        found = SVG_SIZE.search(svg)
        assert found, chart.name
        drawn_width, drawn_height = map(float, found.groups())
        assert drawn_width <= width + 1, (chart.name, where, drawn_width, width)
        assert drawn_height >= MIN_HEIGHT, (chart.name, where, drawn_height)
        texts = set(re.findall(r">([^<>]+)</text>", svg))
        if chart.name in NAMES_METHODS:
            shown = figure4 if chart.name == "features" else methods
            missing = [m for m in shown if not any(t == m or t.startswith(f"{m}:") for t in texts)]
            assert not missing, (chart.name, where, missing)
        if chart.names_classes and chart.name != "confusion" and n_classes <= CLASS_ROWS:
            labels = " ".join(texts)
            missing = [c for c in runs[0].classes if c not in labels]
            assert not missing, (chart.name, where, missing[:5])
    if where == "app" and (n_classes, len(methods)) == (60, 19):
        out = Path(__file__).resolve().parents[1] / "test-artifacts" / "sizes"
        out.mkdir(parents=True, exist_ok=True)
        drawn = {c.name: c.draw(runs, width) for c in charts.RUN_CHARTS.values()}
        drawn.update(page_charts(runs))
        for name, chart in drawn.items():
            spec = chart.to_dict()
            if spec.get("width") == "container":
                spec.update(width=width, autosize={"type": "fit-x", "contains": "padding"})
            (out / f"{name}-c60-m19.png").write_bytes(vl_convert.vegalite_to_png(spec))


def test_no_two_words_collide_and_none_is_cut(drawings, chromium):
    """Every drawing laid out by Chromium: axis labels, headers, legends, titles and printed
    values each keep their own ink, inside the drawing."""
    problems = {}
    for (where, name), svg in drawings.items():
        chromium.set_content(svg)
        if found := text_clashes(chromium.evaluate(TEXT_CORNERS)):
            problems[f"{name} ({where})"] = found[:3]
    assert not problems, problems


def test_the_report_at_this_size_has_words_on_every_page(runs):
    """The PDF at each size: every page's text extracts, every page carries more than its
    footer (words or a chart), every method of the table is written."""
    import io

    from pypdf import PdfReader

    from glee_core.views.report import build_report

    reader = PdfReader(io.BytesIO(build_report(runs)))
    footer = re.compile(r"Glee Studio report · page (\d+)/(\d+)")
    pages = [page.extract_text() for page in reader.pages]
    assert [footer.search(text).groups() for text in pages] == [
        (str(i), str(len(pages))) for i in range(1, len(pages) + 1)
    ]
    assert all(
        reader.pages[i].images or footer.sub("", text).strip() for i, text in enumerate(pages)
    ), "a blank page"
    written = "\n".join(pages)
    assert all(method in written for method in {r.method for r in runs})


def test_the_word_check_sees_labels_that_collide(chromium):
    """The check above is not blind: 40 class names forced onto a 150 px axis, upright and at
    -45 degrees, collide; ten at -45 degrees with room do not."""
    import altair as alt

    rows = [{"c": f"class {i:02d}", "v": i} for i in range(40)]
    crowded = alt.Axis(labelOverlap=False)
    cases = {
        "upright": alt.Chart(alt.Data(values=rows))
        .mark_bar()
        .encode(y=alt.Y("c:N", axis=crowded), x="v:Q")
        .properties(height=150, width=200),
        "angled": alt.Chart(alt.Data(values=rows))
        .mark_bar()
        .encode(x=alt.X("c:N", axis=alt.Axis(labelOverlap=False, labelAngle=-45)), y="v:Q")
        .properties(width=150, height=100),
        "roomy": alt.Chart(alt.Data(values=rows[:10]))
        .mark_bar()
        .encode(x=alt.X("c:N", axis=alt.Axis(labelAngle=-45)), y="v:Q")
        .properties(width=300, height=100),
    }
    found = {}
    for name, chart in cases.items():
        chromium.set_content(vl_convert.vegalite_to_svg(chart.to_dict()))
        found[name] = text_clashes(chromium.evaluate(TEXT_CORNERS))
    assert len(found["upright"]) >= 30 and len(found["angled"]) >= 30, found
    assert found["roomy"] == [], found["roomy"]


def font_sizes(node) -> list[float]:
    """Every font size a Vega-Lite spec sets (marks, axes, headers, legends)."""
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key.lower().endswith("fontsize") and isinstance(value, int | float):
                found.append(value)
            else:
                found += font_sizes(value)
    elif isinstance(node, list):
        for value in node:
            found += font_sizes(value)
    return found


@pytest.mark.parametrize("n_classes,n_methods", [(2, 1), (60, 19)])
def test_the_pdfs_charts_print_at_7_pt_or_more(n_classes, n_methods, tmp_path):
    """A chart px prints at report.MM_PER_PX mm: every font size a report chart sets (Vega's
    defaults are 10-13 px) must stay at 7 pt or more on paper."""
    from glee_core.views.report import MM_PER_PX

    runs = write_synthetic_store(
        RunStore(tmp_path), n_classes, registry_order(METHODS)[:n_methods], [1]
    )
    smallest = 7 / 72 * 25.4 / MM_PER_PX  # px
    for chart in charts.RUN_CHARTS.values():
        if chart.in_report:
            sizes = font_sizes(chart.draw(runs, PDF_WIDTH).to_dict())
            assert all(size >= smallest for size in sizes), (chart.name, sizes, smallest)


def page_charts(runs) -> dict:
    """The charts a page draws from one run or the paper's tables, outside the registry: the
    calibration's per-class change (a made-up "after" lifting the tail) and the paper's."""
    run = runs[0]
    before = {"per_class": {c: {"f1": m.f1} for c, m in run.metrics.per_class.items()}}
    after = {
        "per_class": {
            c: {"f1": min(1.0, m.f1 + (0.2 if run.record.dataset.group(c) == "tail" else -0.05))}
            for c, m in run.metrics.per_class.items()
        }
    }
    return {
        "calibration-delta": chart_calibration_delta(
            run, before, after, "Per-class change in test F1"
        ),
        "paper-gap-table2": chart_paper_head_tail_gap(2),
        "paper-gap-table3": chart_paper_head_tail_gap(3),
        "paper-table2": chart_paper_results(2, "tail_f1"),
    }


def test_the_pages_other_charts_fit_the_column(runs, drawings):
    for name in page_charts(runs):
        found = SVG_SIZE.search(drawings["app", name])
        drawn_width, drawn_height = map(float, found.groups())
        assert drawn_width <= APP_WIDTH + 1, (name, drawn_width)
        assert drawn_height >= MIN_HEIGHT, (name, drawn_height)
