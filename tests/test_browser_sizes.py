"""The run views in a real browser, a 1,440 x 900 window, at both ends of the range: 2 classes
with 1 method, and 60 classes with 19 methods (synthetic stores; screenshots in
test-artifacts/sizes-*.png). Each view renders its charts without an error, each no wider than
the page's column and no flatter than a floor; a person judges the screenshots."""

from pathlib import Path

import pytest

from glee_core.models.methods import METHODS, registry_order
from glee_core.runs.store import RunStore
from glee_core.runs.synthetic import write_synthetic_store
from tests.helpers.streamlit_server import CHROMIUM, FLAGS, serve

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
# page -> charts it draws (Results: per-class grid + groups; Diagnostics: Figure 3, norm vs
# count, Figure 4; Predictions: the confusion matrix)
PAGES = {"Results": 2, "Diagnostics": 3, "Predictions": 1, "Paper": 2}
WINDOW = {"width": 1440, "height": 900}


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
@pytest.mark.parametrize("classes,methods", [(2, 1), (60, 19)])
def test_run_views_render_at_few_and_many_classes(classes, methods, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    store = RunStore(tmp_path / "runs")
    # named demo so the app's default dataset shows them
    write_synthetic_store(store, classes, registry_order(METHODS)[:methods], [1, 2], name="demo")
    ARTIFACTS.mkdir(exist_ok=True)
    with serve({"GLEE_RUNS_DIR": str(store.root), "GLEE_DATA_DIR": str(tmp_path / "data"),
                "GLEE_UPLOADS_DIR": str(tmp_path / "uploads")}) as url, \
            playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport=WINDOW)
        errors = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url)
        playwright.expect(page.get_by_role("heading", name="Glee Studio").first).to_be_visible(
            timeout=90_000)
        for label, count in PAGES.items():
            page.locator('[data-testid="stSidebarNavLink"]', has_text=label).first.click()
            playwright.expect(page.get_by_role("heading", name=label).first).to_be_visible(
                timeout=60_000)
            charts = page.locator(".vega-embed:visible")  # not those in closed expanders
            playwright.expect(charts.nth(count - 1)).to_be_visible(timeout=120_000)
            page.wait_for_timeout(1500)
            assert not page.locator('[data-testid="stException"]').count(), label
            # the page's column: Streamlit's main block less its padding
            column = page.locator('[data-testid="stMainBlockContainer"]').evaluate(
                "e => e.clientWidth - parseFloat(getComputedStyle(e).paddingLeft)"
                " - parseFloat(getComputedStyle(e).paddingRight)")
            # every chart drew something, within the column and above a floor
            stem = f"sizes-c{classes}-m{methods}-{label}"
            for i in range(charts.count()):
                box = charts.nth(i).bounding_box()
                assert box and box["width"] > 100 and box["height"] > 100, (label, i, box)
                assert box["width"] <= column + 1, (label, i, box["width"], column)
                # the page scrolls inside Streamlit's main block: shoot each chart itself, in a
                # window tall enough to paint all of it
                page.set_viewport_size({"width": WINDOW["width"],
                                        "height": int(box["height"]) + 400})
                charts.nth(i).scroll_into_view_if_needed()
                page.wait_for_timeout(500)
                charts.nth(i).screenshot(path=str(ARTIFACTS / f"{stem}-chart{i + 1}.png"))
                page.set_viewport_size(WINDOW)
            page.screenshot(path=str(ARTIFACTS / f"{stem}.png"))
        browser.close()
    assert not errors, errors
