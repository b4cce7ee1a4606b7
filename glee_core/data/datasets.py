"""Long-tailed text classification datasets: the record every source ends as, head and tail,
and ``load_dataset``, which loads any of them (the loaders themselves: ``loaders``) and makes its
variants (another template, rare classes kept, rows left out, labelled texts added).

``load_dataset(spec)`` understands

* ``demo`` - built from the ``chatterbot-corpus`` package (offline, always available);
* a paper dataset id (``r52 r8 cmid iflytek ctc msra ecom rte boolq``) read from a data directory
  in the paper's TSV layout (``r8`` in the ``label<TAB>text`` layout);
* ``csv:PATH`` - a user's CSV;
* ``hf:NAME[:CONFIG]`` - a Hugging Face dataset through ``datasets.load_dataset``.

Every source ends as a :class:`LongTailDataset`: three splits (train/dev/test) of
``text, text_b, label`` rows, a fixed class order, the prompt template and verbalizer, and the
head/tail threshold. Head and tail classes are defined on the **training split's** class counts.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..core.errors import GleeError
from ..core.plugins import named
from ..pool.files import add_labelled, read_labelled_texts
from .catalog import DEFAULT_THRESHOLD, PAPER_DATASETS, dataset_ids
from .csvfile import Columns
from .sources import source_of, source_usages
from .splits import exclude_rows, read_excluded_rows
from .verbalizers import (
    check_template,
    derive_verbalizer,
    load_verbalizer_file,
    parse_verbalizer,
    prompt_variant,
)

SPLITS = ("train", "dev", "test")


# A dev split smaller than this for its classes cannot choose a head (LongTailDataset.small_dev)
MIN_DEV_PER_CLASS = 5  # dev texts of the rarest scored class
MIN_DEV_MEAN = 20  # dev texts a class, on average


@dataclass
class LongTailDataset:
    """A loaded dataset: splits of ``text, text_b, label`` (label = index into ``classes``)."""

    id: str
    classes: list[str]
    splits: dict[str, pd.DataFrame]
    template: str
    verbalizer: dict[str, list[str]]
    threshold: float = DEFAULT_THRESHOLD
    max_length: int = 128
    batch_size: int | None = None
    language: str = "en"
    warnings: list[str] = field(default_factory=list)
    dropped_classes: dict[str, int] = field(default_factory=dict)
    # classes with too few texts for dev and test, kept in training when asked (--keep-rare)
    train_only_classes: dict[str, int] = field(default_factory=dict)
    head_tail_rule: str = "train"  # see HEAD_TAIL_RULES
    _fingerprint: str | None = field(default=None, repr=False, compare=False)

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def has_text_b(self) -> bool:
        return bool(self.splits["train"]["text_b"].astype(bool).any())

    def class_counts(self, split: str = "train") -> pd.Series:
        """Examples per class in ``split``, sorted head to tail (ties by class order)."""
        counts = np.bincount(self.splits[split]["label"].to_numpy(), minlength=self.num_classes)
        series = pd.Series(counts, index=self.classes, name=split)
        order = sorted(range(self.num_classes), key=lambda i: (-counts[i], i))
        return series.iloc[order]

    def small_dev(self) -> str | None:
        """Why the dev split is too small to choose a head by (a sentence), or None: a scored
        class with fewer than :data:`MIN_DEV_PER_CLASS` dev texts, or fewer than
        :data:`MIN_DEV_MEAN` a class on average. Then the best epoch and the best head picked on
        dev are picked on noise (a quick compare cross-validates instead)."""
        scored = [c for c in self.classes if c not in self.train_only_classes]
        counts = self.class_counts("dev").reindex(scored)
        if not len(counts):
            return None
        fewest = counts.idxmin()
        if counts[fewest] < MIN_DEV_PER_CLASS:
            return (
                f"{int((counts < MIN_DEV_PER_CLASS).sum())} of its {len(counts)} classes "
                f"have fewer than {MIN_DEV_PER_CLASS} dev texts ({fewest}: "
                f"{int(counts[fewest])})"
            )
        if counts.mean() < MIN_DEV_MEAN:
            return f"{counts.mean():.1f} dev texts a class on average, under {MIN_DEV_MEAN}"
        return None

    def head_tail(self) -> tuple[list[str], list[str]]:
        """The head/tail split of the classes by :attr:`head_tail_rule` (``HEAD_TAIL_RULES``)."""
        if self.head_tail_rule == "released":
            return split_head_tail(self.class_counts("test").to_dict(), self.threshold, strict=True)
        return split_head_tail(self.class_counts("train").to_dict(), self.threshold)

    def fingerprint(self) -> str:
        """A short hash of the content (rows of every split, classes): names the data in run ids.
        Computed once: the rows and classes do not change after loading."""
        if self._fingerprint is None:
            digest = hashlib.sha256("\x1f".join(self.classes).encode())
            for name in SPLITS:
                frame = self.splits[name][["text", "text_b", "label"]]
                digest.update(name.encode())
                digest.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
            self._fingerprint = digest.hexdigest()[:16]
        return self._fingerprint

    def info(self) -> dict:
        """What ``inspect`` prints: sizes, class counts head to tail, head and tail classes."""
        head, tail = self.head_tail()
        counts = {s: {k: int(v) for k, v in self.class_counts(s).items()} for s in SPLITS}
        return {
            "dataset": self.id,
            "num_classes": self.num_classes,
            "sizes": {s: int(len(self.splits[s])) for s in SPLITS},
            "class_counts": counts["train"],
            "class_counts_by_split": counts,
            "head_tail_split": self.head_tail_rule,
            "threshold": self.threshold,
            "head_classes": head,
            "tail_classes": tail,
            "imbalance_ratio": _imbalance_ratio(counts["train"]),
            "template": self.template,
            "verbalizer": self.verbalizer,
            "max_length": self.max_length,
            "dropped_classes": self.dropped_classes,
            "train_only_classes": self.train_only_classes,
            "repeated_texts": self.repeated_texts(),
            "warnings": self.warnings,
            "fingerprint": self.fingerprint(),
        }

    def repeated_texts(self) -> dict:
        """Data health: ``within`` each split, how many rows repeat an earlier row's text (and
        second text); ``across``, how many distinct texts sit in more than one split (a test
        text also trained on inflates every score)."""
        keys = {
            s: self.splits[s]["text"].astype(str) + "\x1f" + self.splits[s]["text_b"].astype(str)
            for s in SPLITS
        }
        within = {s: int(k.duplicated().sum()) for s, k in keys.items()}
        seen = pd.concat([k.drop_duplicates() for k in keys.values()])
        return {"within": within, "across": int(seen.duplicated().sum())}


def _imbalance_ratio(counts: Mapping[str, int]) -> float | None:
    values = [v for v in counts.values() if v > 0]
    return round(max(values) / min(values), 2) if values else None


HEAD_TAIL_RULES = {
    "train": "on the training counts, head while the cumulative share stays at or under the "
    "threshold (the top class always head, the rarest always tail)",
    "released": "on the test labels, head while the cumulative share stays strictly under the "
    "threshold (the authors' released code, metrics.py split_f1)",
}


def split_head_tail(
    counts: Mapping[str, int], threshold: float, strict: bool = False
) -> tuple[list[str], list[str]]:
    """Split classes into head and tail as the paper does.

    Classes are sorted by frequency; a class is *head* while the cumulative share of examples up
    to and including it does not exceed ``threshold``, the rest are *tail*; the most frequent
    class is always head and, with two or more classes, the least frequent always tail.
    ``strict`` is the released code's rule instead: head while the share stays strictly under
    ``threshold``, with no guard (a dominant top class leaves the head empty).
    """
    if not 0.0 < threshold < 1.0:
        raise GleeError(f"head/tail threshold must be between 0 and 1, got {threshold}")
    ordered = sorted(counts.items(), key=lambda kv: -kv[1])  # stable: ties keep given order
    total = sum(c for _, c in ordered) or 1
    head, tail, cumulative = [], [], 0
    for name, count in ordered:
        cumulative += count
        share = cumulative / total
        is_head = share < threshold if strict else (not head or share <= threshold + 1e-12)
        (head if is_head and not tail else tail).append(name)
    if not strict and len(ordered) > 1 and not tail:
        tail.append(head.pop())
    return head, tail


# --------------------------------------------------------------------------------------------
# Splitting


SOURCE_ROW = "source_row"  # a text's 0-based row in the file it was read from (health's `row`)


def _frame(texts, labels, texts_b=None, rows=None) -> pd.DataFrame:
    """``text, text_b, label`` rows; ``rows``: each one's row in its input file
    (:data:`SOURCE_ROW`, carried through the splits; not part of the data's fingerprint)."""
    texts = [str(t) for t in texts]
    frame = pd.DataFrame(
        {
            "text": texts,
            "text_b": [str(t) for t in texts_b] if texts_b is not None else [""] * len(texts),
            "label": list(labels),
        }
    )
    if rows is not None:
        frame[SOURCE_ROW] = np.asarray(rows, dtype=np.int64)
    return frame


def _index_labels(splits: dict[str, pd.DataFrame], classes: list[str]) -> dict[str, pd.DataFrame]:
    index = {c: i for i, c in enumerate(classes)}
    out = {}
    for name, frame in splits.items():
        frame = frame.copy()
        frame["label"] = frame["label"].map(index).astype(np.int64)
        out[name] = frame.reset_index(drop=True)
    return out


def _classes_head_to_tail(frame: pd.DataFrame) -> list[str]:
    counts = frame["label"].value_counts()
    return sorted(counts.index.astype(str), key=lambda c: (-counts[c], c))


def _from_labelled_frames(
    dataset_id: str,
    splits: dict[str, pd.DataFrame],
    *,
    template: str,
    verbalizer: Mapping | None,
    threshold: float,
    max_length: int,
    warnings: list[str],
    dropped: dict[str, int] | None = None,
    language: str = "en",
    batch_size: int | None = None,
    classes: list[str] | None = None,
    train_only: dict[str, int] | None = None,
) -> LongTailDataset:
    """Common end of every loader: fix the class order, index labels, attach prompt set-up."""
    classes = classes or _classes_head_to_tail(splits["train"])
    if len(classes) < 2:
        raise GleeError(
            f"{dataset_id}: only one class ({classes[0] if classes else 'none'}) - "
            "a classifier needs at least two"
        )
    for name in ("dev", "test"):
        unseen = sorted(set(splits[name]["label"]) - set(classes))
        if unseen:
            warnings.append(
                f"{name}: {len(unseen)} class(es) absent from train were dropped: {unseen[:5]}"
            )
            splits[name] = splits[name][splits[name]["label"].isin(classes)]
    verbalizer = (
        parse_verbalizer(verbalizer, classes, f"{dataset_id} verbalizer")
        if verbalizer
        else derive_verbalizer(classes)
    )
    return LongTailDataset(
        id=dataset_id,
        classes=classes,
        splits=_index_labels(splits, classes),
        template=check_template(template),
        verbalizer=verbalizer,
        threshold=threshold,
        max_length=max_length,
        batch_size=batch_size,
        language=language,
        warnings=warnings,
        dropped_classes=dropped or {},
        train_only_classes=train_only or {},
    )


# the loaders, named (glee_core.data.loaders imports this module), as sources.SOURCES names its own
DEMO_LOADER = "glee_core.data.loaders:load_demo"
PAPER_LOADER = "glee_core.data.loaders:load_paper_dataset"


def load_dataset(
    spec: str,
    *,
    data_dir: str | os.PathLike | None = None,
    threshold: float | None = None,
    template: str | None = None,
    verbalizer: str | os.PathLike | None = None,
    text_column: str | None = None,
    label_column: str | None = None,
    text_b_column: str | None = None,
    head_tail: str = "train",
    uploads_dir: str | os.PathLike | None = None,
    keep_rare: bool = False,
    exclude: str | os.PathLike | None = None,
    add: str | os.PathLike | None = None,
) -> LongTailDataset:
    """Load any dataset by spec: ``demo``, a paper id, or an id of a source
    (:data:`glee_core.data.sources.SOURCES`: ``csv:PATH``, ``upload:NAME``, ``hf:NAME[:CONFIG]``).

    ``template`` and ``verbalizer`` (a JSON file) override the dataset's own (a prompt that
    differs from it ends the id in ``+prompt-<digest>``, so its runs stay apart); ``head_tail``
    picks the head/tail rule (``HEAD_TAIL_RULES``); ``keep_rare`` keeps the classes with too few
    texts for a dev and test split in training (demo, CSV, upload), and then the dataset's id
    ends in :data:`RARE_KEPT`, so its runs are never averaged with those of the split without
    them; ``exclude`` (:func:`read_excluded_rows`) leaves training rows out, and the id then ends
    in ``+without-N-<digest>``; ``add`` (a labelled file: ``suggest``'s CSV with its labels
    filled, :func:`glee_core.pool.files.read_labelled_texts`) adds texts to the training split,
    and the id then ends in ``+added-N-<digest>``."""
    if head_tail not in HEAD_TAIL_RULES:
        raise GleeError(
            f"--head-tail must be one of {', '.join(HEAD_TAIL_RULES)}, got {head_tail!r}"
        )
    columns = Columns(text_column, label_column, text_b_column)
    if spec == "demo":
        dataset = named(DEMO_LOADER)(threshold, keep_rare)
    elif spec in PAPER_DATASETS:
        dataset = named(PAPER_LOADER)(spec, data_dir, threshold)
    elif (found := source_of(spec)) is not None:
        source, rest = found
        dataset = source.load(rest, threshold, columns, uploads_dir, keep_rare)
    else:
        raise GleeError(
            f"unknown dataset {spec!r}; use one of {', '.join(dataset_ids())}, {source_usages()}"
        )
    own_template, own_verbalizer = dataset.template, dataset.verbalizer
    if template:
        dataset.template = check_template(template)
    if verbalizer:
        dataset.verbalizer = load_verbalizer_file(verbalizer, dataset.classes)
    dataset.head_tail_rule = head_tail
    if dataset.train_only_classes:
        dataset.id += RARE_KEPT
    dataset.id += prompt_variant(dataset.template, dataset.verbalizer, own_template, own_verbalizer)
    if exclude:
        dataset.splits["train"], without = exclude_rows(
            dataset.splits["train"], read_excluded_rows(exclude), dataset.classes, dataset.id
        )
        dataset.id += without
    if add:
        added, notes = read_labelled_texts(add, dataset.classes)
        dataset.splits["train"], ending, left_out = add_labelled(dataset.splits, added)
        dataset.warnings.extend(notes + left_out)
        dataset.id += ending
        dataset._fingerprint = None  # its rows changed
    return dataset


RARE_KEPT = "+rare"  # a dataset id's ending when its rare classes are kept in training
