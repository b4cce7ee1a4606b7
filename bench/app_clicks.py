"""How long a click holds the page, in Chromium, for every long task the app starts (a new
user's walk: upload, the health check, the label budget, the quick compare, suggestions, the PDF,
an export), and how long a page takes to come back while the jobs run.

    python bench/app_clicks.py [--csv FILE] [--pool FILE] [--beside none|hog] [--shots DIR]
                               [--keep DIR] [--job-nice N]

A fresh store and server (``streamlit run app.py``); each click is timed from the click to the
page idle again (Streamlit's running indicator gone), the target being well under 1 s whatever
the work; each navigation likewise. Screenshots of each step go to ``--shots`` (default
``test-artifacts/clicks``). ``--csv`` defaults to a 17-class long-tailed CSV built from R52
(``bench/quick_estimate.py``'s ``r52-17``); ``--pool`` to 300 of its texts, a third of their
words dropped. The hog and the server are programs of their own (a session each, as a
desktop's programs are: the harness polling the browser does not share the server's);
``--job-nice`` sets the server's ``GLEE_JOB_NICE`` (how far its jobs yield to the pages; default
the app's). Each step prints when Streamlit's indicator showed, the server's draws
(``GLEE_DRAW_LOG``: the script, the page, the jobs' fragments) and the browser's long tasks.
Needs Debian's chromium and the test extra's playwright. Run by hand.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.quick_estimate import a_pool, r52_17  # noqa: E402
from glee_core.core.environment import job_nice  # noqa: E402
from glee_core.data.datasets import load_dataset  # noqa: E402
from tests.helpers.streamlit_server import CHROMIUM, FLAGS, serve  # noqa: E402

RUNNING = '[data-testid="stStatusWidget"]'  # Streamlit's "running" indicator
# In the page from its start: the browser's main thread busy 50 ms or more at a time (Chromium
# drawing the page), and each time Streamlit's running indicator came or went (its clock, ms)
WATCH = """
window.__long = [];
new PerformanceObserver(list => {
  for (const e of list.getEntries()) window.__long.push([e.startTime, e.duration]);
}).observe({type: "longtask", buffered: true});
window.__running = [];
new MutationObserver(() => {
  const on = document.querySelector('RUNNING') !== null;
  const last = window.__running.length ? window.__running[window.__running.length - 1][1] : false;
  if (on !== last) window.__running.push([performance.now(), on]);
}).observe(document, {childList: true, subtree: true});
""".replace("RUNNING", RUNNING)


def main(argv=None) -> int:
    from playwright.sync_api import expect, sync_playwright  # noqa: PLC0415 (the test extra)

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv")
    parser.add_argument("--pool")
    parser.add_argument("--beside", choices=("none", "hog"), default="none")
    parser.add_argument("--shots", default=str(ROOT / "test-artifacts" / "clicks"))
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--keep", help="a folder to keep the store, uploads and jobs in")
    parser.add_argument("--job-nice", type=int, help="GLEE_JOB_NICE for the server's jobs")
    args = parser.parse_args(argv)
    shots = Path(args.shots)
    shots.mkdir(parents=True, exist_ok=True)
    hog = (
        subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
        if args.beside == "hog"
        else None
    )
    timings: list[tuple[str, float]] = []
    # a job the server started may still be writing its folder as the walk ends
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        csv = Path(args.csv) if args.csv else Path(r52_17(Path(args.data_dir), folder)[4:])
        pool = Path(args.pool) if args.pool else a_pool(load_dataset(f"csv:{csv}"), folder)
        env = {f"GLEE_{k.upper()}_DIR": str(folder / k) for k in ("runs", "uploads", "data")}
        draws = folder / "draws.tsv"  # the server's page draws (GLEE_DRAW_LOG)
        env["GLEE_DRAW_LOG"] = str(draws)
        if args.job_nice is not None:
            env["GLEE_JOB_NICE"] = str(args.job_nice)
        try:
            with serve(env, own_session=True) as url, sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
                page = browser.new_page(viewport={"width": 1440, "height": 1000})
                page.add_init_script(WATCH)

                def idle(mark: float, seconds: float = 600) -> tuple[float, list[float]]:
                    """Seconds from ``mark`` (the browser's clock, ms) to the page idle again,
                    and when the indicator came on (seconds from ``mark``): the page idle is
                    Streamlit's running indicator gone and staying gone for a second (on a
                    loaded machine the rerun a click asks for can begin after a first look
                    finds none, and the next click then lands on a page about to be redrawn);
                    0.15 s where it never showed (Streamlit shows it once a run has lasted
                    0.5 s as the browser sees it, from the request; it fades out in 0.2 s).
                    Read from the page's own record of the indicator (``WATCH``), a few times a
                    second: polling the page for it every 50 ms took CPU from the machine the
                    clicks are timed on."""
                    deadline = time.perf_counter() + seconds
                    while time.perf_counter() < deadline:
                        page.wait_for_timeout(250)
                        now, changes = page.evaluate(
                            f"[performance.now(), window.__running.filter(c => c[0] >= {mark})]"
                        )
                        on = changes[-1][1] if changes else page.locator(RUNNING).count() > 0
                        if on:
                            continue
                        gone = changes[-1][0] if changes else mark + 150
                        if now - gone >= 1000:
                            shown = [(t - mark) / 1000 for t, lit in changes if lit]
                            return max(gone - mark, 150) / 1000, shown
                    raise TimeoutError(f"the page was still running after {seconds:.0f} s")

                def timed(what: str, act, seconds: float = 600) -> None:
                    origin, mark = page.evaluate("[performance.timeOrigin, performance.now()]")
                    clock = time.time()
                    act()
                    # a new document (the first page) has a clock of its own: the mark on it
                    mark += origin - page.evaluate("performance.timeOrigin")
                    took, shown = idle(mark, seconds)
                    timings.append((what, took))
                    on = ", ".join(f"{t:.2f}" for t in shown) or "never seen"
                    busy = page.evaluate(f"window.__long.filter(t => t[0] >= {mark})")
                    tasks = sum(d for _, d in busy) / 1000
                    print(
                        f"{what}: {took:.2f} s; running shown from {on} s; "
                        f"{server_draws(draws, clock, took + 1.0)}; "
                        f"the browser's long tasks {tasks:.2f} s ({len(busy)})",
                        flush=True,
                    )
                    name = re.sub(r"[^a-z0-9]+", "-", what.lower()).strip("-")
                    page.screenshot(path=str(shots / f"{name}.png"), full_page=True)

                def nav(name: str) -> None:
                    link = page.locator('[data-testid="stSidebarNavLink"]', has_text=name).first
                    timed(f"open {name}", link.click)
                    title = "Glee Studio" if name == "Home" else name
                    expect(page.locator("h1").first).to_contain_text(title, timeout=60_000)

                def first_page() -> None:  # the page's script runs once the app connects
                    page.goto(url)
                    expect(page.locator("h1").first).to_contain_text("Glee Studio", timeout=120_000)

                timed("first page", first_page, 120)
                nav("Data")
                page.get_by_text("Upload a CSV").first.click()
                page.locator('input[type="file"]').first.set_input_files(str(csv))
                use = page.get_by_role("button", name="Use this CSV")
                expect(use).to_be_visible(timeout=60_000)
                # the upload's own run first (its indicator, still on, was counted in the click)
                idle(page.evaluate("performance.now()"))
                timed("use this CSV", use.click)
                for label in ("Check the data's health", "Measure the label budget"):
                    button = page.get_by_role("button", name=re.compile(re.escape(label)))
                    timed(f"click: {label}", button.first.click)
                # the pool's own uploader, by its label (a rerun may not have drawn it yet)
                pool_input = page.get_by_role("region", name=re.compile("Unlabelled texts"))
                expect(pool_input).to_be_visible(timeout=60_000)
                pool_input.locator('input[type="file"]').set_input_files(str(pool))
                expect(pool_input).to_contain_text(pool.name, timeout=60_000)
                idle(page.evaluate("performance.now()"))
                suggest = page.get_by_role("button", name=re.compile("Suggest texts to label"))
                try:
                    expect(suggest).to_be_visible(timeout=120_000)  # the pool read when busy
                except AssertionError:
                    page.screenshot(path=str(shots / "no-suggest-button.png"), full_page=True)
                    raise
                timed("click: Suggest texts to label", suggest.click)
                expect(suggest).to_have_count(0, timeout=60_000)  # its bar took the button's place
                nav("Home")
                compare = page.get_by_role("button", name=re.compile("Quick compare on"))
                timed("click: Quick compare (its bar in place)", compare.click)
                for name in ("Results", "Data", "Home", "Train"):
                    nav(name)  # while the jobs run
                changed = re.compile("See the recommendation it changed")
                done = page.get_by_role("link", name=changed)
                expect(done.first).to_be_visible(timeout=1800_000)
                timed("click: See the recommendation it changed (Home)", done.first.click)
                main = page.locator('[data-testid="stMain"]').first
                expect(main).not_to_contain_text("Every job of this session", timeout=30_000)
                expect(main).to_contain_text("Use ", timeout=30_000)  # Home's recommendation
                text = main.inner_text()
                print(f"Home after the job shows {len(text)} characters: {text[:120]!r}")
                nav("Report")
                build = page.get_by_role("button", name=re.compile(r"Build the PDF \("))
                timed("click: Build the PDF", build.click)
                nav("Predictions")
                export = page.get_by_role("button", name=re.compile(r"Build the folder \("))
                timed("click: Build the folder", export.click)
                nav("Train")
                page.wait_for_timeout(3000)
                page.screenshot(path=str(shots / "jobs-panel.png"), full_page=True)
                browser.close()
        finally:
            if hog is not None:
                hog.kill()
    worst = max(timings, key=lambda t: t[1])
    clicks = [t for t in timings if t[0].startswith("click")]
    print(
        f"\nbeside: {args.beside}, GLEE_JOB_NICE {env.get('GLEE_JOB_NICE', job_nice())}; "
        f"clicks: {len(clicks)}, the slowest {max(t for _, t in clicks):.2f} s; "
        f"everything: the slowest {worst[0]} {worst[1]:.2f} s"
    )
    return 0


def server_draws(log: Path, since: float, seconds: float) -> str:
    """The draws the server logged from a click to the second of quiet after it (the script,
    ``app``; the page; the jobs' fragments): when each began and ended, seconds from the click
    (its CPU seconds in brackets)."""
    if not log.exists():
        return "no draw logged"
    shown = []
    for line in log.read_text().splitlines():
        ended, title, wall, cpu = line.split("\t")
        if since <= float(ended) <= since + seconds:
            end, cpu_s = float(ended) - since, float(cpu)
            shown.append(f"{title} {end - float(wall):.2f}-{end:.2f} ({cpu_s:.2f} CPU)")
    return "server draws: " + (", ".join(shown) or "none")


if __name__ == "__main__":
    raise SystemExit(main())
