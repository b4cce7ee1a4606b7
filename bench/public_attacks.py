"""Public mode's hostile files and words, in Chromium against ``streamlit run app.py``: each
attack's outcome as the visitor reads it, its time, and the web process's memory (resident set,
sampled every 50 ms by psutil) before and at its peak.

    python bench/public_attacks.py [--model auto] [--shots FOLDER]

The attacks: a CSV whose header has N commas over N one-field rows (the Data page's upload and
the Playground's "Classify a CSV of texts"), the largest such file the upload limit allows, a
700-word template, and label words of many tokens. Prints a Markdown table; ``--shots`` keeps a
screenshot of the page after each attack."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import psutil
from playwright.sync_api import expect, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from glee_core.data.datasets import load_dataset  # noqa: E402
from tests.helpers.streamlit_server import CHROMIUM, FLAGS, free_port  # noqa: E402


class Peak:
    """The resident set of a process and its children, sampled until stopped: the largest."""

    def __init__(self, pid: int):
        self.process, self.peak, self.running = psutil.Process(pid), 0, True
        self.thread = threading.Thread(target=self.sample, daemon=True)

    def rss(self) -> int:
        procs = [self.process, *self.process.children(recursive=True)]
        return sum(p.memory_info().rss for p in procs if p.is_running())

    def sample(self) -> None:
        while self.running:
            self.peak = max(self.peak, self.rss())
            time.sleep(0.05)

    def __enter__(self) -> Peak:
        self.before = self.rss()
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.running = False
        self.thread.join()


def wide_csv(columns: int, rows: int) -> bytes:
    return ("," * (columns - 1) + "\n" + "x\n" * rows).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="auto")
    parser.add_argument("--shots", type=Path)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="glee-attacks-"))
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "GLEE_PUBLIC": "1",
        "GLEE_RUNS_DIR": str(root / "runs"),
        "GLEE_WORKSPACES_DIR": str(root / "ws"),
        "GLEE_DATA_DIR": str(root / "data"),
        "GLEE_DEFAULT_MODEL": args.model,
        "GLEE_PUBLIC_MODELS": args.model,
    }
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            "app.py",
            "--server.headless",
            "true",
            "--server.port",
            str(port),
            "--server.address",
            "127.0.0.1",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        run_attacks(server, port, args)
    finally:  # a failed attack leaves no server behind
        server.terminate()
        server.wait(timeout=20)


def run_attacks(server: subprocess.Popen, port: int, args) -> None:
    """Each attack in a fresh browser context against the server on ``port``, a table row
    each (see the module's docstring)."""
    url = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            urllib.request.urlopen(f"{url}/_stcore/health", timeout=2)
            break
        except OSError:
            time.sleep(0.5)
    limit = 9_500_000  # under the uploader's 10 MB (decimal, as the browser counts it)
    biggest = wide_csv(1000, (limit - 1000) // 2 - 1)
    attacks = [
        (
            "Data page: 29 KB, 14,500-comma header over one-field rows",
            "Data",
            "upload",
            wide_csv(14_500, 7_250),
            "the header line has 14,500 columns",
        ),
        (
            "Data page: 88 KB, the same shape (MemoryError at 6 GB before)",
            "Data",
            "upload",
            wide_csv(44_000, 22_000),
            "the header line has 44,000 columns",
        ),
        (
            f"Data page: {len(biggest) / 2**20:.1f} MB, 1,000 columns over one-field rows",
            "Data",
            "upload",
            biggest,
            "rows hold far fewer fields",
        ),
        (
            "Playground: 15 KB wide header, Classify a CSV of texts",
            "Playground",
            "score",
            wide_csv(7_500, 3_750),
            "the header line has 7,500 columns",
        ),
        (
            "Data page: a 700-word template",
            "Data",
            "template",
            "{text} " + "about " * 700 + "[MASK] .",
            "the template has 4,215 characters",
        ),
        (
            "Data page: label words of 6 x 3 tokens for a class",
            "Data",
            "words",
            {"trivia": ["news today about"] * 6},
            "more than 16 tokens",
        ),
    ]
    print("| attack | the visitor reads | seconds | web process MB before | peak |")
    print("|---|---|---:|---:|---:|")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        for number, (name, page_name, kind, payload, expected) in enumerate(attacks, 1):
            context = browser.new_context(viewport={"width": 1440, "height": 900})
            page = context.new_page()
            page.goto(url)
            expect(page.get_by_role("heading", name="Glee Studio").first).to_be_visible(
                timeout=90_000
            )
            page.locator('[data-testid="stSidebarNavLink"]', has_text=page_name).first.click()
            expect(page.get_by_role("heading", name=page_name).first).to_be_visible(timeout=60_000)
            page.wait_for_timeout(2000)
            with Peak(server.pid) as peak:
                started = time.perf_counter()
                if kind == "upload":
                    page.get_by_text("Upload a CSV").first.click()
                    page.locator('input[type="file"]').first.set_input_files(
                        {"name": "attack.csv", "mimeType": "text/csv", "buffer": payload}
                    )
                elif kind == "score":
                    page.locator('input[type="file"]').last.set_input_files(
                        {"name": "attack.csv", "mimeType": "text/csv", "buffer": payload}
                    )
                else:
                    page.get_by_text("Label words").first.click()
                    if kind == "template":
                        box = page.get_by_label("Template", exact=True).and_(
                            page.get_by_test_id("stTextInputField")
                        )
                        box.fill(payload)
                        box.press("Enter")
                    else:
                        demo = load_dataset("demo").verbalizer  # every class, one too long
                        page.locator('input[type="file"]').nth(1).set_input_files(
                            {
                                "name": "words.json",
                                "mimeType": "application/json",
                                "buffer": json.dumps({**demo, **payload}).encode(),
                            }
                        )
                    page.wait_for_timeout(1500)
                    page.get_by_role("button", name="Use these label words").click()
                said = page.locator('[data-testid="stAlertContentError"]').filter(has_text=expected)
                try:
                    expect(said.first).to_be_visible(timeout=120_000)
                    text = said.first.inner_text().split("\n")[0][:110]
                except AssertionError:
                    text = (
                        "(not said: "
                        + (
                            page.locator('[data-testid="stAlertContentError"]').first.inner_text()[
                                :80
                            ]
                            if page.locator('[data-testid="stAlertContentError"]').count()
                            else "no error shown"
                        )
                        + ")"
                    )
                seconds = time.perf_counter() - started
            traceback = page.locator('[data-testid="stException"]').count()
            print(
                f"| {name} | {text.replace('|', '/')}{' + TRACEBACK' if traceback else ''} "
                f"| {seconds:.1f} | {peak.before / 2**20:.0f} | {peak.peak / 2**20:.0f} |",
                flush=True,
            )
            if args.shots:
                args.shots.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(args.shots / f"attack-{number}.png"), full_page=False)
            context.close()
        browser.close()


if __name__ == "__main__":
    main()
