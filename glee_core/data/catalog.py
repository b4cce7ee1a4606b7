"""The datasets Glee Studio knows by name: the embedded demo and the paper's nine, with the
paper's set-up for each (template, head/tail threshold, max length, language, columns).

No pandas, no torch: ``python -m glee_core datasets`` lists them at once. Loading is
:mod:`glee_core.data.datasets`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .sources import source_of

DEFAULT_THRESHOLD = 0.65
DEFAULT_TEMPLATE = "{text} This is about [MASK] ."
PAPER_REPO = "https://github.com/GeneZC/Glee"


@dataclass(frozen=True)
class PaperDataset:
    """The paper's set-up for one of its datasets (``../shared/data/README.md``)."""

    template: str
    threshold: float
    max_length: int
    language: str
    columns: tuple[str, ...] = ("text", "label")
    batch_size: int | None = None  # few-shot sets use 2
    verbalizer_file: str | None = None  # defaults to the dataset id
    few_shot: bool = False


_RTE_TEMPLATE = "{text_a} Question: {text_b}? The answer: [MASK]."
PAPER_DATASETS: dict[str, PaperDataset] = {
    "r52": PaperDataset("{text} This is [MASK] news .", 0.55, 256, "en"),
    # Reuters-8 is a subset of R52's classes: same template and label words.
    "r8": PaperDataset(
        "{text} This is [MASK] news .", DEFAULT_THRESHOLD, 256, "en", verbalizer_file="r52"
    ),
    "cmid": PaperDataset("{text}？这个问题的意图是[MASK]。", 0.65, 64, "zh"),
    "iflytek": PaperDataset("{text}。这句话描述的物品属于[MASK]。", 0.65, 512, "zh"),
    "ctc": PaperDataset("{text}。这个标准的类别是[MASK]。", 0.80, 64, "zh"),
    "msra": PaperDataset(
        "{text}。这句话中的{entity}是[MASK]。", 0.55, 128, "zh", columns=("text", "entity", "label")
    ),
    "ecom": PaperDataset(
        "{text}。这个评论中的物品[MASK]好。",
        DEFAULT_THRESHOLD,
        64,
        "zh",
        batch_size=2,
        few_shot=True,
    ),
    "rte": PaperDataset(
        _RTE_TEMPLATE,
        DEFAULT_THRESHOLD,
        256,
        "en",
        columns=("text_a", "text_b", "label"),
        batch_size=2,
        few_shot=True,
    ),
    "boolq": PaperDataset(
        _RTE_TEMPLATE,
        DEFAULT_THRESHOLD,
        256,
        "en",
        columns=("text_a", "text_b", "label"),
        batch_size=2,
        few_shot=True,
    ),
}


def dataset_name(spec: str) -> str:
    """A dataset's name for people and metadata: its source's name for it (a CSV's file stem,
    never its path; an HF dataset's name), else the id."""
    found = source_of(spec)
    return found[0].name(found[1]) if found and found[1] else spec


def dataset_ids() -> list[str]:
    """The dataset ids the CLI lists: ``demo`` and the paper's datasets."""
    return ["demo", *PAPER_DATASETS]
