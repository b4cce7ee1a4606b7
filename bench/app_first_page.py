"""How long the app takes to show its first page, in Chromium.

    python bench/app_first_page.py [--visits 3]

Starts ``streamlit run app.py`` (a fresh process), then times, in headless Chromium: the server
answering its health check, and for each visit the page load until Home's "Quick start" heading
is on screen (the first visit pays the imports of the page's modules; later ones do not). Needs
the test extra (playwright) and Debian's chromium.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers.streamlit_server import CHROMIUM, FLAGS, serve  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--visits", type=int, default=3)
    args = parser.parse_args(argv)
    from playwright.sync_api import expect, sync_playwright  # noqa: PLC0415 (test extra)

    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        with serve({"GLEE_RUNS_DIR": f"{tmp}/runs", "GLEE_UPLOADS_DIR": f"{tmp}/uploads"}) as url:
            ready = time.perf_counter() - started
            print(f"server answering: {ready:.2f} s after `streamlit run`")
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
                for visit in range(1, args.visits + 1):
                    page = browser.new_page()
                    began = time.perf_counter()
                    page.goto(url)
                    expect(page.get_by_text("Quick start")).to_be_visible(timeout=60_000)
                    print(
                        f"visit {visit}: Home shown {time.perf_counter() - began:.2f} s "
                        "after the request"
                    )
                    page.close()
                browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
