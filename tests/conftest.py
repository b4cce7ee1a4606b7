"""Shared fixtures: tiny random masked LMs on disk and a small long-tailed dataset."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from glee_core.data.catalog import DEFAULT_TEMPLATE  # noqa: E402
from glee_core.data.datasets import load_dataset  # noqa: E402
from tests.helpers.tiny_models import dataset_vocabulary, save_tiny_mlm  # noqa: E402

# the cores shared out among pytest-xdist's workers (two workers on CI's two cores: one thread
# each, not two fighting over each core)
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
torch.set_num_threads(max(1, min(2, (os.cpu_count() or 2) // WORKERS)))
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the app's pages import studio_ui from the project root
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

# Five classes, long-tailed 40/20/10/6/4 (x test/dev copies); each class has a keyword.
TOY_CLASSES = {"sports": 40, "money": 20, "science": 10, "food": 6, "tech_support": 4}
FILLER = ["the", "a", "news", "today", "about", "report", "said", "it", "was", "new"]


def toy_rows(scale: int = 1) -> pd.DataFrame:
    rows = []
    for c_index, (name, n) in enumerate(TOY_CLASSES.items()):
        keyword = name.split("_")[0]
        for i in range(n * scale):
            words = [FILLER[(i + j + c_index) % len(FILLER)] for j in range(3 + i % 4)]
            words.insert(i % len(words), keyword)
            rows.append({"text": " ".join(words) + f" {i}", "label": name})
    return pd.DataFrame(rows)


def demo_vocabulary() -> set[str]:
    return dataset_vocabulary(load_dataset("demo"))


TEMPLATE_WORDS = set(re.findall(r"\w+", DEFAULT_TEMPLATE.lower())) - {"text", "mask"}
TOY_WORDS = (
    set(FILLER)
    | {c.split("_")[0] for c in TOY_CLASSES}
    | {"support", "tech"}
    | {str(i) for i in range(200)}
    | TEMPLATE_WORDS
    | {"question", "answer"}
)


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> Path:
    """A tiny random BERT MLM whose vocabulary covers the demo set and the toy set."""
    return save_tiny_mlm(
        tmp_path_factory.mktemp("tiny-bert"), "bert", TOY_WORDS | demo_vocabulary(), seed=0
    )


@pytest.fixture(scope="session")
def tiny_roberta(tmp_path_factory) -> Path:
    return save_tiny_mlm(tmp_path_factory.mktemp("tiny-roberta"), "roberta", TOY_WORDS, seed=1)


@pytest.fixture(scope="session")
def toy_csv(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "toy.csv"
    toy_rows(scale=2).to_csv(path, index=False)
    return path


@pytest.fixture(scope="session")
def toy_dataset(toy_csv):
    return load_dataset(f"csv:{toy_csv}")


@pytest.fixture
def runs_dir(tmp_path) -> Path:
    return tmp_path / "runs"


@pytest.fixture
def public(monkeypatch, tmp_path, tiny_bert) -> Path:
    """Public mode with folders of its own under ``tmp_path`` (returned); visitors may pick the
    tiny BERT."""
    for name in ("runs", "uploads", "workspaces", "data"):
        monkeypatch.setenv(f"GLEE_{name.upper()}_DIR", str(tmp_path / name))
    monkeypatch.setenv("GLEE_PUBLIC", "1")
    monkeypatch.setenv("GLEE_PUBLIC_MODELS", str(tiny_bert))
    return tmp_path
