"""The app in a real browser: served on localhost, clicked through in headless Chromium.

Screenshots of every page land in ``test-artifacts/`` (look at them)."""

import re
from pathlib import Path

import pytest

from tests.helpers.streamlit_server import (
    CHROMIUM,
    FLAGS,
    click_until,
    open_page,
    serve,
    upload_in_browser,
)

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")


def long_tailed_csv() -> bytes:
    """A CSV of 12 classes from 60 texts down to 4, each class with its own words."""
    rows = ["text,label"]
    for k, count in enumerate([60, 40, 24, 16, 12, 10, 8, 7, 6, 5, 4, 4]):
        rows += [f"topic{k} word{k}a word{k}b note {i},class {k}" for i in range(count)]
    return ("\n".join(rows) + "\n").encode()


@pytest.fixture
def server(tmp_path, tiny_bert):
    with serve(
        {
            "GLEE_RUNS_DIR": str(tmp_path / "runs"),
            "GLEE_UPLOADS_DIR": str(tmp_path / "uploads"),
            "GLEE_DATA_DIR": str(tmp_path / "data"),
            "GLEE_DEFAULT_MODEL": str(tiny_bert),
        }
    ) as url:
        yield url


@pytest.mark.slow
def test_click_through_the_app(server):
    playwright = pytest.importorskip("playwright.sync_api")  # the test extra installs it
    expect, sync_playwright = playwright.expect, playwright.sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))

        def settle(name: str, ready, wait_s: int = 120):
            """Wait for the page's key element, let the script finish, then take the shot."""
            expect(ready).to_be_visible(timeout=wait_s * 1000)
            expect(page.get_by_role("button", name="Stop")).to_have_count(0, timeout=120_000)
            page.wait_for_timeout(1000)  # charts finish drawing
            assert not page.locator('[data-testid="stException"]').count(), name
            page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)

        def go(label: str):  # Home's heading is the tool's name
            open_page(page, label, "Glee Studio" if label == "Home" else None)

        charts = page.locator(".vega-embed")
        page.goto(server)
        settle("0-home", page.get_by_role("button", name=re.compile(r"Quick compare on")))
        go("Data")
        settle("1-data", charts.first)
        # a new user's flow: upload a long-tailed CSV, press Home's one button, end on a
        # recommendation for that CSV
        upload_in_browser(page, "tickets.csv", long_tailed_csv())
        go("Home")
        compare = page.get_by_role("button", name="Quick compare on tickets.csv")  # its name
        # the click took when Home shows the job's bar (a dropped click is retried after 30 s,
        # not after the whole compare's wait); then the compare itself
        click_until(
            page,
            compare,
            page.get_by_text(
                re.compile(
                    r"Quick compare: \d+ heads on "
                    r"tickets\.csv"
                )
            ).first,
            "flow-compare-failed",
        )
        # the job's bar took the button's place on Home, and Home shows the answer once the job
        # ends, with no reload and no other page
        advice = page.get_by_text(
            re.compile(
                r"Use .+ best of \d+ (on dev|by 5-fold "
                r"cross-validation)"
            )
        )
        expect(advice).to_be_visible(timeout=180_000)
        settle("0-home-recommendation", advice)
        expect(
            page.get_by_role("button", name=re.compile(r"Fine-tune the best of the top 3"))
        ).to_be_visible()
        go("Train")  # the jobs panel lists the finished compare
        settle("2-train-done", page.get_by_text("· done").first)
        settle("2-train", page.get_by_role("button", name="Launch"))

        go("Results")
        settle("3-results", page.locator('[data-testid="stDataFrame"]').first)
        page.get_by_role("tab", name="Calibrate (post-hoc)").click()
        settle("3-results-calibrate", page.get_by_text("Dev chose", exact=False).first)
        go("Diagnostics")
        # the page's last chart, Figure 4, drawn (a chart in the collapsed expander above it may
        # or may not be drawn, so counting charts is no measure of the page being done)
        expect(
            page.get_by_role("heading", name="Classifier-input features (Figure 4)")
        ).to_be_visible(timeout=120_000)
        settle("4-diagnostics", charts.last)
        go("Playground")
        settle("6-playground", page.get_by_text("Prediction", exact=True))
        expect(charts).to_have_count(1)
        go("Paper")
        settle("8-paper", charts.first)
        go("Report")
        build = page.get_by_role("button", name=re.compile(r"Build the PDF \("))
        settle("7-report", build)
        build.click()
        # 19 heads' PDF: ~8 s alone, but CI's 2 cores also run the other worker's tests, this
        # server and Chromium (one CI run passed 120 s while the build was still calibrating);
        # a job: the page shows its bar, then the download without a reload
        settle(
            "7-report-ready",
            page.get_by_role("button", name=re.compile(r"Download glee-report-.+\.pdf")),
            wait_s=360,
        )
        browser.close()
    assert not errors, errors
