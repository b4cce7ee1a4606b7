"""A new user's path, clicked in Chromium: upload a CSV, Home's quick compare, then one of Home's
next steps (default: "Fine-tune the best of the top 3"), watched to the end.

    python bench/upload_flow.py --csv FILE [--step "Fine-tune the best of the top"] --work DIR

Serves the app from this tree (a fresh store, uploads and data folder under ``--work``, the
offline backbone) and drives it as the tests' browser does (the test extra's playwright and
Debian's chromium). Prints, as it goes: each step's seconds, the recommendation, the next steps
Home offers with their estimates, and the running job's bar once a minute; at the end the time
left each reading showed against what the job then took (as a share of the whole) and the
fine-tuned run's test macro-F1 / tail F1. Screenshots land in ``--work``/shots. Run it alone:
the seconds are the measure.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from glee_core.runs.store import RunStore  # noqa: E402
from glee_core.train.jobs import list_jobs  # noqa: E402
from tests.helpers.streamlit_server import (  # noqa: E402
    CHROMIUM,
    FLAGS,
    click_until,
    open_page,
    serve,
    upload_in_browser,
)

LEFT = re.compile(
    r"(?:(\d+) h )?(?:(\d+) min )?(\d+) s elapsed · about (?:(\d+) h )?"
    r"(?:(\d+) min )?(\d+) s left"
)


def seconds_of(*parts) -> int:
    h, m, s = (int(p or 0) for p in parts)
    return 3600 * h + 60 * m + s


def watch(page, store: RunStore, job_id: str, shots: Path, name: str) -> tuple[float, list]:
    """Wait for the job to end, reading its bar once a minute; (seconds, [(elapsed, left)])."""
    started, readings, n = time.time(), [], 0
    while True:
        job = next(j for j in list_jobs(store) if j.id == job_id)
        if job.status != "running":
            if job.status != "done":
                raise SystemExit(f"{name}: the job ended {job.status}: {job.error}")
            return time.time() - started, readings
        bars = page.locator('[data-testid="stProgress"]').all_inner_texts()
        print(f"  {name} {time.time() - started:5.0f} s: {' | '.join(bars)}", flush=True)
        for bar in bars:
            if found := LEFT.search(bar):
                readings.append((seconds_of(*found.groups()[:3]), seconds_of(*found.groups()[3:])))
        if n % 5 == 0:
            page.screenshot(path=str(shots / f"{name}-{n:03d}.png"), full_page=True)
        n += 1
        page.wait_for_timeout(60_000)


def launched(store: RunStore, before: set[str]) -> str:
    for _ in range(120):
        new = [j.id for j in list_jobs(store) if j.id not in before]
        if new:
            return new[0]
        time.sleep(0.5)
    raise SystemExit("the click launched no job")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", required=True, type=Path)
    parser.add_argument(
        "--step",
        default="Fine-tune the best of the top",
        help="the start of the next step's button to click after the compare",
    )
    parser.add_argument("--work", required=True, type=Path)
    args = parser.parse_args(argv)
    from playwright.sync_api import expect, sync_playwright  # noqa: PLC0415 (the test extra)

    work = args.work
    shots = work / "shots"
    shots.mkdir(parents=True, exist_ok=True)
    store = RunStore(work / "runs")
    env = {
        "GLEE_RUNS_DIR": str(store.root),
        "GLEE_UPLOADS_DIR": str(work / "uploads"),
        "GLEE_DATA_DIR": str(work / "data"),
    }
    with serve(env) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        t0 = time.time()
        page.goto(url)
        upload_in_browser(page, args.csv.name, args.csv.read_bytes())
        print(f"upload: {time.time() - t0:.0f} s", flush=True)
        open_page(page, "Home", "Glee Studio")
        compare = page.get_by_role("button", name=f"Quick compare on {args.csv.name}")
        expect(compare).to_be_visible(timeout=60_000)
        before = {j.id for j in list_jobs(store)}
        click_until(
            page,
            compare,
            page.get_by_text(re.compile(r"Quick compare: \d+ heads on")).first,
            "flow-compare",
        )
        took, _ = watch(page, store, launched(store, before), shots, "compare")
        print(f"quick compare: {took:.0f} s", flush=True)
        open_page(page, "Home", "Glee Studio")
        step = page.get_by_role("button", name=re.compile("^" + re.escape(args.step)))
        expect(step).to_be_visible(timeout=120_000)
        page.screenshot(path=str(shots / "home-recommendation.png"), full_page=True)
        advice = page.locator('[data-testid="stAlert"]').filter(has_text="Use ")
        print(
            "recommendation: " + (advice.first.inner_text() if advice.count() else "none"),
            flush=True,
        )
        print(
            "next steps: "
            + "; ".join(
                b
                for b in page.get_by_role("button").all_inner_texts()
                if re.search(r"\((about )?[\d.]+ (s|min)\)$", b)
            )
        )
        before = {j.id for j in list_jobs(store)}
        label = step.inner_text()
        step.click()
        job_id = launched(store, before)
        open_page(page, "Train")
        took, readings = watch(page, store, job_id, shots, "step")
        print(f"{label}: {took:.0f} s; whole path {time.time() - t0:.0f} s", flush=True)
        for elapsed, left in readings:
            print(
                f"  at {elapsed:5d} s ({elapsed / took:4.0%}): {left:5d} s left, "
                f"{took - elapsed:5.0f} s in fact ({(left - (took - elapsed)) / took:+.0%} "
                "of the whole)"
            )
        job = next(j for j in list_jobs(store) if j.id == job_id)
        for row in job.result or []:
            print(
                f"  {row['method']}: test macro-F1 {100 * row['f1']:.2f}, tail F1 "
                f"{100 * row['tail_f1']:.2f}"
            )
        open_page(page, "Home", "Glee Studio")
        page.wait_for_timeout(5000)
        page.screenshot(path=str(shots / "home-after.png"), full_page=True)
        browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
