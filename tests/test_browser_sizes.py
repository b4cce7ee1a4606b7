"""The run views in a real browser, a 1,440 x 900 window, at every size a user has: 2, 20 and 60
classes x 1, 6 and 19 methods (one server, one synthetic dataset a size, each chosen the way a
user's choice is remembered; screenshots in test-artifacts/sizes-*.png, each chart alone at the
two ends of the range). Each view renders its charts without an error, each no wider than the
page's column (and in a box that scrolls sideways in a narrower one) and no flatter than a
floor; a person judges the screenshots. Where each chart's words land is measured in
``test_chart_sizes.py`` (Streamlit draws on a canvas)."""

import json
from pathlib import Path

import pytest

from glee_core.models.methods import METHODS, registry_order
from glee_core.runs.store import RunStore
from glee_core.views.charts import LEGIBLE_SIZES
from studio_ui.navigation import APP_PAGES
from tests.helpers.streamlit_server import CHROMIUM, FLAGS, open_page, serve
from tests.helpers.synthetic_runs import write_synthetic_store

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
# page -> charts it draws (Results: per-class grid + groups; Diagnostics: Figure 3, norm vs
# count, Figure 4; Predictions: the confusion matrix)
PAGES = {"Results": 2, "Diagnostics": 3, "Predictions": 1, "Paper": 2}
WINDOW = {"width": 1440, "height": 900}


# the overflow of the box a chart is drawn in (studio_ui.navigation.CHART_SCROLL)
SCROLLS = "e => getComputedStyle(e).overflowX"
# no box from a chart's toolbar (its full-screen button, above the chart) up to the chart's
# element container clips it: the scrolling box is the chart alone
CLIPPED = """e => { const bar = e.parentElement.querySelector('[data-testid=stElementToolbar]');
  for (let n = bar?.parentElement; n; n = n.parentElement) {
    if (getComputedStyle(n).overflowX !== 'visible') return n.outerHTML.slice(0, 80);
    if (n.dataset.testid === 'stElementContainer') return '';
  }
  return 'no toolbar'; }"""
SIZES = [s for s in LEGIBLE_SIZES if s[0] <= 60]
EACH_CHART = {(2, 1), (60, 19)}  # the sizes whose charts are also shot one by one


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
def test_run_views_render_at_every_size(tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    store = RunStore(tmp_path / "runs")
    for classes, methods in SIZES:  # datasets known here by their runs alone
        write_synthetic_store(
            store, classes, registry_order(METHODS)[:methods], [1, 2], name=f"c{classes}-m{methods}"
        )
    ARTIFACTS.mkdir(exist_ok=True)
    with (
        serve(
            {
                "GLEE_RUNS_DIR": str(store.root),
                "GLEE_DATA_DIR": str(tmp_path / "data"),
                "GLEE_UPLOADS_DIR": str(tmp_path / "uploads"),
            }
        ) as url,
        playwright.sync_playwright() as p,
    ):
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        errors = []
        opened_by_its_link_first(browser, url, playwright)
        for classes, methods in SIZES:
            # what the app remembers of the last choice; a new page is a new session
            (store.root / ".studio-choice.json").write_text(
                json.dumps(
                    {"dataset": f"c{classes}-m{methods}", "threshold": None, "keep_rare": False}
                )
            )
            page = browser.new_page(viewport=WINDOW)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(url)
            playwright.expect(page.get_by_role("heading", name="Glee Studio").first).to_be_visible(
                timeout=90_000
            )
            for label, count in PAGES.items():
                check_page(page, playwright, label, count, classes, methods)
            page.close()
        browser.close()
    assert not errors, errors


def opened_by_its_link_first(browser, url: str, playwright) -> None:
    """A bookmark after a restart: a page's own URL is the fresh server's very first request.
    The page still runs inside ``app.py`` (its page config and navigation), not as a page of
    Streamlit's ``pages/`` folder mode (which lists "app" beside the pages and drops the
    layout): the pages live in ``app_pages/``."""
    page = browser.new_page(viewport=WINDOW)
    page.goto(f"{url}/Results")
    playwright.expect(page.get_by_role("heading", name="Results").first).to_be_visible(
        timeout=90_000
    )
    links = page.locator('[data-testid="stSidebarNavLink"]')
    playwright.expect(links).to_have_count(len(APP_PAGES))
    assert [text.split()[-1] for text in links.all_inner_texts()] == [
        title for _, title, _ in APP_PAGES
    ]
    assert page.title() == "Glee Studio"
    page.close()


def check_page(page, playwright, label: str, count: int, classes: int, methods: int) -> None:
    """Open a run view from the sidebar; its charts drew, within the column, above a floor."""
    open_page(page, label)
    playwright.expect(page.get_by_text(f"c{classes}-m{methods}").first).to_be_visible()
    charts = page.locator(".vega-embed:visible")  # not those in closed expanders
    playwright.expect(charts.nth(count - 1)).to_be_visible(timeout=120_000)
    page.wait_for_timeout(1000)
    assert not page.locator('[data-testid="stException"]').count(), label
    # the page's column: Streamlit's main block less its padding
    column = page.locator('[data-testid="stMainBlockContainer"]').evaluate(
        "e => e.clientWidth - parseFloat(getComputedStyle(e).paddingLeft)"
        " - parseFloat(getComputedStyle(e).paddingRight)"
    )
    stem = f"sizes-c{classes}-m{methods}-{label}"
    for i in range(charts.count()):
        box = charts.nth(i).bounding_box()
        where = (classes, methods, label, i, box)
        assert box and box["width"] > 100 and box["height"] > 100, where
        assert box["width"] <= column + 1, (*where, column)
        # a narrower window (a phone, the sidebar open at 800 px): the chart's box scrolls
        # sideways instead of cutting it at the column's edge
        assert charts.nth(i).evaluate(SCROLLS) == "auto", where
        assert charts.nth(i).evaluate(CLIPPED) == "", where
        if (classes, methods) in EACH_CHART:
            # the page scrolls inside Streamlit's main block: shoot each chart itself, in a
            # window tall enough to paint all of it
            page.set_viewport_size({"width": WINDOW["width"], "height": int(box["height"]) + 400})
            charts.nth(i).scroll_into_view_if_needed()
            page.wait_for_timeout(500)
            charts.nth(i).screenshot(path=str(ARTIFACTS / f"{stem}-chart{i + 1}.png"))
            page.set_viewport_size(WINDOW)
    page.screenshot(path=str(ARTIFACTS / f"{stem}.png"))
