"""Serve the app with ``streamlit run`` in a subprocess for the browser tests; Chromium flags."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# headless Chromium on a machine with no network (see the env tool's notes)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(
    env: dict[str, str], port: int | None = None, address: str = "127.0.0.1", own_session=False
):
    """``streamlit run app.py`` with ``env`` added; yields the URL once it answers.
    ``own_session``: the server leads a session of its own, as one started from a terminal does
    beside a desktop's browser (where the kernel groups processes by session, the harness that
    drives the browser then does not share the server's group)."""
    port = port or free_port()
    proc = subprocess.Popen(
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
            address,
            "--browser.gatherUsageStats",
            "false",
            "--server.fileWatcherType",
            "none",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=own_session,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:
        try:
            urllib.request.urlopen(f"{url}/_stcore/health", timeout=2)
            break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("streamlit did not start: " + proc.stdout.read().decode()[-2000:])
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def wait_for_cookie(context, page, name: str, seconds: float = 30.0) -> str | None:
    """The browser's cookie ``name`` once the page's script has set it (a loaded machine may
    take a few seconds), or None after ``seconds``."""
    for _ in range(int(seconds * 4)):
        value = {c["name"]: c["value"] for c in context.cookies()}.get(name)
        if value:
            return value
        page.wait_for_timeout(250)
    return None


def open_page(page, name: str, heading: str | None = None) -> None:
    """Open a page from the sidebar until its ``heading`` (its name) shows: the click is tried
    again if a rerun dropped it."""
    click_until(
        page,
        page.locator('[data-testid="stSidebarNavLink"]', has_text=name).first,
        page.get_by_role("heading", name=heading or name).first,
        f"go-{name}-failed",
    )


def go(page, name: str) -> None:
    """Open a page from the sidebar, let it finish, and check it raised nothing."""
    open_page(page, name)
    page.wait_for_timeout(1500)
    assert not page.locator('[data-testid="stException"]').count(), name


def upload_in_browser(page, filename: str, data: bytes) -> None:
    from playwright.sync_api import expect

    go(page, "Data")
    page.get_by_text("Upload a CSV").first.click()
    page.locator('input[type="file"]').first.set_input_files(
        {"name": filename, "mimeType": "text/csv", "buffer": data}
    )
    button = page.get_by_role("button", name="Use this CSV")
    expect(button).to_be_visible(timeout=60_000)
    # kept: the sidebar names it the dataset (the "Kept as ..." message lasts one rerun)
    stem = filename.rsplit(".", 1)[0]
    click_until(page, button, page.get_by_text(f"upload:{stem}-").first, "public-upload-failed")


def click_until(page, target, shown, name: str, seconds: float = 30) -> None:
    """Click ``target`` until ``shown`` is visible, three tries: a loaded machine may drop a
    click made while the page reruns (a screenshot ``name``.png when all three fail)."""
    from playwright.sync_api import expect

    for attempt in range(3):
        if target.count() and not shown.count():
            target.click()
        try:
            expect(shown).to_be_visible(timeout=seconds * 1000)
            return
        except AssertionError:
            if attempt == 2:
                ARTIFACTS.mkdir(exist_ok=True)
                page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
                raise
