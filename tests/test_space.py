"""Deployable as a Hugging Face Space: the README's metadata as the hub reads it, and the app
started the way Spaces start it (port 7860, address 0.0.0.0, ``SPACE_ID`` set: public mode),
driven by two browser sessions side by side (screenshots in test-artifacts/)."""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

import pytest
from huggingface_hub import RepoCard
from PIL import Image

from glee_core.runs.store import RunStore
from glee_core.serve.workspaces import COOKIE
from tests.helpers.streamlit_server import (
    CHROMIUM,
    FLAGS,
    serve,
    upload_in_browser,
    wait_for_cookie,
)
from tests.helpers.synthetic_runs import synthetic_dataset, write_synthetic_run

ROWS = "text,label\n" + "".join(f"ticket number {i},{'ab'[i % 2] * 3}\n" for i in range(30))

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
SPACE_PORT = 7860


def test_readme_carries_the_space_metadata():
    card = RepoCard.load(ROOT / "README.md")
    meta = card.data.to_dict()
    assert meta["sdk"] == "streamlit" and meta["app_file"] == "app.py"
    assert (ROOT / meta["app_file"]).is_file()
    # the SDK version Spaces install is the Streamlit the project pins and runs
    pinned = re.search(r"^streamlit==([\d.]+)$", (ROOT / "requirements.txt").read_text(), re.M)
    assert pinned and meta["sdk_version"] == pinned.group(1) == version("streamlit")
    assert f'"streamlit=={pinned.group(1)}"' in (ROOT / "pyproject.toml").read_text()
    assert meta["suggested_hardware"].startswith(("t4", "a10g", "l4", "a100", "h100"))
    assert meta["title"] and meta["license"] == "apache-2.0"
    assert card.text.lstrip().startswith("# Glee Studio")  # the body follows the metadata


@pytest.fixture
def space(tmp_path, tiny_bert, monkeypatch):
    """``streamlit run app.py`` as a Space runs it, with a shipped run in the owner's store."""
    runs = tmp_path / "runs"
    write_synthetic_run(RunStore(runs), synthetic_dataset(6, "demo"), "prompt", 1)
    monkeypatch.delenv("GLEE_PUBLIC", raising=False)  # on by default: SPACE_ID is set
    with serve(
        {
            "SPACE_ID": "glee/glee-studio",
            "GLEE_RUNS_DIR": str(runs),
            "GLEE_WORKSPACES_DIR": str(tmp_path / "workspaces"),
            "GLEE_DATA_DIR": str(tmp_path / "data"),
            "GLEE_DEFAULT_MODEL": str(tiny_bert),
        },
        port=SPACE_PORT,
        address="0.0.0.0",
    ) as url:
        yield url, tmp_path


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
def test_two_visitors_of_a_space_each_get_a_private_workspace(space):
    playwright = pytest.importorskip("playwright.sync_api")
    url, root = space
    ARTIFACTS.mkdir(exist_ok=True)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        keys = []
        for name in ("a", "b"):  # two browser contexts: two visitors, nothing shared
            context = browser.new_context(viewport={"width": 1300, "height": 900})
            page = context.new_page()
            page.goto(url)
            playwright.expect(page.get_by_role("heading", name="Glee Studio").first).to_be_visible(
                timeout=90_000
            )
            # a visit that only looks keeps nothing; the first upload makes the workspace
            upload_in_browser(page, f"mine-{name}.csv", ROWS.encode())
            page.locator('[data-testid="stSidebarNavLink"]', has_text="Train").first.click()
            playwright.expect(page.get_by_role("heading", name="Train").first).to_be_visible(
                timeout=90_000
            )
            page.get_by_text("Your workspace").first.click()
            playwright.expect(page.get_by_text("private to this browser").first).to_be_visible(
                timeout=30_000
            )
            page.wait_for_timeout(1500)
            assert not page.locator('[data-testid="stException"]').count()
            # the key is in this browser's cookie, never in the address bar
            cookie = wait_for_cookie(context, page, COOKIE)
            assert cookie and re.fullmatch(r"[A-Za-z0-9_-]{32}", cookie)
            assert cookie not in page.url
            keys.append(cookie)
            page.screenshot(path=str(ARTIFACTS / f"space-session-{name}.png"), full_page=True)
            context.close()
        browser.close()
    shots = [Image.open(ARTIFACTS / f"space-session-{name}.png") for name in ("a", "b")]
    side = Image.new(
        "RGB", (sum(i.width for i in shots) + 20, max(i.height for i in shots)), "white"
    )
    side.paste(shots[0], (0, 0))
    side.paste(shots[1], (shots[0].width + 20, 0))
    side.save(ARTIFACTS / "space-two-sessions.png")  # the two visitors, side by side
    assert keys[0] != keys[1]
    made = sorted(
        p.name
        for p in (root / "workspaces").iterdir()
        if re.fullmatch(r"[A-Za-z0-9_-]{32}", p.name)
    )
    assert made == sorted(keys)  # one workspace each, named by the key only that session has
