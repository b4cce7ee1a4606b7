"""Public mode as a hostile visitor tries it, in Chromium against ``streamlit run app.py``: a
link cannot plant a workspace on a victim (write access is this browser's cookie; a shared link
is read-only and says so); no download, page or PDF carries the workspace key or a server path;
a class name is data, never Vega code or a Markdown link; formula-looking cells are
neutralised in downloads."""

from __future__ import annotations

import csv
import io
import re
from dataclasses import replace
from pathlib import Path

import pytest
from pypdf import PdfReader

from glee_core.data.datasets import load_dataset
from glee_core.serve.workspaces import COOKIE, Workspace
from tests.helpers.streamlit_server import (
    CHROMIUM,
    FLAGS,
    click_until,
    go,
    serve,
    upload_in_browser,
    wait_for_cookie,
)
from tests.helpers.synthetic_runs import synthetic_dataset, write_synthetic_run

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
LINK_CLASS = "[Session expired - sign in](https://evil.example/login)"
QUOTE_CLASS = "can't login"
FORMULA_CLASS = '=HYPERLINK("https://evil.example","x")'

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed"),
]


def public_env(root: Path, tiny_bert, **limits: str) -> dict[str, str]:
    """A public server's environment with its folders under ``root`` (and ``limits``)."""
    return {
        "GLEE_PUBLIC": "1",
        "GLEE_RUNS_DIR": str(root / "runs"),
        "GLEE_WORKSPACES_DIR": str(root / "workspaces"),
        "GLEE_DATA_DIR": str(root / "data"),
        "GLEE_DEFAULT_MODEL": str(tiny_bert),
        "GLEE_PUBLIC_MODELS": str(tiny_bert),
        **limits,
    }


@pytest.fixture(scope="module")
def server(tmp_path_factory, tiny_bert):
    root = tmp_path_factory.mktemp("public")
    with serve(public_env(root, tiny_bert)) as url:
        yield url, root / "workspaces"


@pytest.fixture(scope="module")
def browser():
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield chromium
        chromium.close()


def open_app(browser, url: str, upload: tuple[str, bytes] | None = None):
    """A new visitor (browser context) on ``url``: (context, page, workspace key). A visit that
    only looks makes no workspace; ``upload`` (name, bytes): the visitor's first write, which
    makes it (the key then comes back, set in the cookie by the page's script)."""
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1440, "height": 900}, accept_downloads=True)
    page = context.new_page()
    page.goto(url)
    expect(page.get_by_role("heading", name="Glee Studio").first).to_be_visible(timeout=90_000)
    if upload is None:
        return context, page, None
    upload_in_browser(page, *upload)
    return context, page, wait_for_cookie(context, page, COOKIE)


ROWS = "text,label\n" + "".join(f"salary review number {i},{'ab'[i % 2] * 3}\n" for i in range(30))


def test_a_link_cannot_plant_a_workspace_and_a_share_is_read_only(server, browser):
    from playwright.sync_api import expect

    url, workspaces = server
    attacker, attacker_page, key_a = open_app(browser, url, ("bait.csv", ROWS.encode()))
    victim, page, _ = open_app(browser, f"{url}/?ws={key_a}")  # the attacker's link
    assert "ws=" not in page.url  # the old key parameter is dropped, never obeyed
    upload_in_browser(page, "salaries.csv", ROWS.encode())
    key_v = wait_for_cookie(victim, page, COOKIE)
    assert key_a and key_v and key_v != key_a
    assert [p.name.split("-")[0] for p in (workspaces / key_v / "uploads").glob("*.csv")] == [
        "salaries"
    ]
    assert [p.name.split("-")[0] for p in (workspaces / key_a / "uploads").glob("*.csv")] == [
        "bait"
    ]  # nothing reached A
    attacker_page.reload()
    go(attacker_page, "Data")
    assert "salaries" not in attacker_page.content()
    # the owner makes a read-only link; whoever opens it sees that it is shared, read-only
    go(page, "Results")
    page.get_by_text("Your workspace").first.click()
    share = page.get_by_text("Share my runs read-only").first
    expect(share).to_be_visible(timeout=30_000)
    click_until(page, share, page.get_by_text("share=").first, "public-share-failed", 20)
    token = re.search(r"share=([A-Za-z0-9_-]{32})", page.content()).group(1)
    assert token != key_v and Workspace.open_shared(token, workspaces).key == key_v
    attacker_page.goto(f"{url}/?share={token}")
    expect(attacker_page.get_by_text("shared workspace, read-only").first).to_be_visible(
        timeout=90_000
    )
    assert {c["name"]: c["value"] for c in attacker.cookies()}.get(COOKIE) == key_a
    # the owner turns sharing off (the panel still open): the same link opens nothing of theirs
    toggle = page.get_by_text("Share my runs read-only").first
    click_until(page, toggle, page.get_by_text("The share link is revoked").first, "revoke", 20)
    assert Workspace.open_shared(token, workspaces) is None
    attacker_page.goto(f"{url}/?share={token}")
    expect(attacker_page.get_by_role("heading", name="Glee Studio").first).to_be_visible(
        timeout=90_000
    )
    attacker_page.wait_for_timeout(2000)
    assert "shared workspace, read-only" not in attacker_page.content()
    attacker.close()
    victim.close()


def test_a_visitor_sees_the_launch_cap_as_one_line_and_nothing_runs(tmp_path, tiny_bert, browser):
    """The cap as a visitor meets it (D-rows of round four): a launch estimated over this
    Space's minutes a launch is refused on the page, in one line that says what to change,
    and no job starts."""
    from playwright.sync_api import expect

    # 0.3 s a launch: every launch is over it
    with serve(public_env(tmp_path, tiny_bert, GLEE_SESSION_JOB_MINUTES="0.005")) as url:
        context, page, key = open_app(browser, url, ("salaries.csv", ROWS.encode()))
        go(page, "Data")
        check = page.get_by_role("button", name=re.compile(r"Check the data's health \("))
        refused = page.get_by_text("a launch here may take at most").first
        click_until(page, check, refused, "public-cap", 30)
        page.screenshot(path=str(ARTIFACTS / "public-launch-cap.png"), full_page=True)
        assert "Traceback" not in page.content() and "at most 0 min" not in page.content()
        expect(page.get_by_text("at most 0.3 s").first).to_be_visible()
        jobs = Workspace.open(key, tmp_path / "workspaces").store.jobs_dir
        assert not jobs.is_dir() or not any(jobs.iterdir())  # nothing launched
        context.close()


def nasty_dataset(dataset_id: str):
    """A synthetic record whose classes are named as a visitor could name them."""
    base = synthetic_dataset(6, dataset_id)
    names = dict(zip(base.classes, [f"class {i}" for i in range(6)], strict=True))
    names[base.classes[1]] = FORMULA_CLASS
    names[base.classes[4]] = LINK_CLASS
    names[base.classes[5]] = QUOTE_CLASS  # the rarest: Figure 4's tail class by default
    rename = [names[c] for c in base.classes]
    return replace(
        base,
        classes=rename,
        head_classes=[names[c] for c in base.head_classes],
        tail_classes=[names[c] for c in base.tail_classes],
        verbalizer={names[c]: w for c, w in base.verbalizer.items()},
        class_counts={names[c]: n for c, n in base.class_counts.items()},
    )


def test_no_key_or_path_leaves_the_server_and_class_names_stay_data(server, browser):
    from playwright.sync_api import expect

    url, workspaces = server
    rows = (
        ROWS
        + "".join(f"login trouble {i},{QUOTE_CLASS}\n" for i in range(12))
        + f'one lonely text,"{LINK_CLASS}"\n'
    )
    context, page, key = open_app(browser, url, ("salaries.csv", rows.encode()))
    own = Workspace.open(key, workspaces)
    [kept] = own.uploads_dir.glob("*.csv")  # the upload, chosen as the dataset
    dataset = load_dataset(f"upload:{kept.name}", uploads_dir=str(own.uploads_dir))
    assert key not in dataset.id and dataset.id == f"upload:{kept.name}"
    runs = [
        write_synthetic_run(own.store, nasty_dataset(dataset.id), m, 1)
        for m in ("cls-relu", "prompt")
    ]
    assert all(key not in r.run_id for r in runs)
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    go(page, "Data")
    page.wait_for_timeout(2500)
    # the dropped class's name is shown as text: no link to where it points
    expect(page.get_by_text("Session expired").first).to_be_visible(timeout=60_000)
    assert not page.locator('a[href*="evil.example"]').count()
    seen = [page.content()]
    downloads = {}
    for name, button in (
        ("Results", "Download table (CSV)"),
        ("Predictions", "Download this run's test predictions (CSV)"),
    ):
        go(page, name)
        seen.append(page.content())
        with page.expect_download() as got:
            page.get_by_role("button", name=button).first.click()
        downloads[name] = Path(got.value.path()).read_text(encoding="utf-8")
    go(page, "Diagnostics")
    page.wait_for_timeout(3000)
    seen.append(page.content())
    page.screenshot(path=str(ARTIFACTS / "public-nasty-class-names.png"), full_page=True)
    assert not [e for e in errors if "Expression parse error" in e]  # a name is data, not code
    go(page, "Report")
    page.get_by_role("button", name=re.compile(r"Build the PDF \(")).click()
    with page.expect_download(timeout=180_000) as got:  # a job: its download once it is built
        page.get_by_role("button", name=re.compile(r"Download glee-report-.+\.pdf")).click(
            timeout=180_000
        )
    pdf = PdfReader(got.value.path())
    text = "\n".join(p.extract_text() for p in pdf.pages)
    assert "salaries" in text  # the report names the upload ...
    for where, content in [
        *downloads.items(),
        ("pdf", text),
        *((f"page {i}", html) for i, html in enumerate(seen)),
    ]:
        assert key not in content, where  # ... never the key,
        assert str(workspaces) not in content, where  # nor a server path
    predictions = list(csv.DictReader(io.StringIO(downloads["Predictions"])))
    gold = {row["gold"] for row in predictions}
    assert "'" + FORMULA_CLASS in gold and FORMULA_CLASS not in gold  # no live formula
    assert QUOTE_CLASS in gold
    context.close()
