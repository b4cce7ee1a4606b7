"""The docs a newcomer reads: README.md is a front door (at most 250 lines) whose every link
lands (a file, and a heading where it names one), and every command in README.md and docs/
parses as the command line reads it; the cheap ones run as written."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from glee_core.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "BENCHMARKS.md",
    ROOT / "bench" / "results" / "benchmarks-log.md",
]
FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", re.S | re.M)
LINK = re.compile(r"\]\(([^)\s]+)\)")
CHEAP = {"methods", "datasets", "inspect"}  # seconds, no training: run as written


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slug(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


def commands() -> list[tuple[str, str]]:
    """(page, command) for every ``python -m glee_core`` line of a fenced block, its
    continuation lines joined and its comment cut."""
    found = []
    for page in PAGES:
        for block in FENCE.findall(page.read_text(encoding="utf-8")):
            for line in block.replace("\\\n", " ").splitlines():
                line = line.strip()
                if line.startswith("python -m glee_core "):
                    found.append((page.name, line.split(" #", 1)[0].strip()))
    return found


def test_the_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250
    assert not [n for n, line in enumerate(lines, 1) if len(line) > 300]
    for page in ("app", "command-line", "data", "tuning", "deploy", "reproduce", "ARCHITECTURE"):
        assert f"(docs/{page}.md" in "\n".join(lines), page  # each page one click away


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_link_lands(page):
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        landing = (page.parent / path).resolve() if path else page
        assert landing.exists(), f"{page.name}: {target}"
        if anchor and landing.suffix == ".md":
            assert anchor in anchors(landing), f"{page.name}: {target}"


def test_every_command_in_the_docs_parses_and_the_cheap_ones_run(capsys):
    found = commands()
    assert len(found) >= 20  # the docs show the command line
    parser = build_parser()
    for page, command in found:
        argv = shlex.split(command)[3:]
        try:
            parser.parse_args(argv)
        except SystemExit as exc:
            raise AssertionError(f"{page}: {command}: {capsys.readouterr().err}") from exc
        if argv[0] in CHEAP and "--data-dir" not in argv:
            assert main(argv) == 0, f"{page}: {command}"
