"""Long-tailed text classification datasets: one loader, four sources.

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

import csv
import hashlib
import json
import os
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from ..core import environment
from ..core.errors import GleeError
from ..core.hub import hub_reachable
from .catalog import DEFAULT_TEMPLATE, DEFAULT_THRESHOLD, PAPER_DATASETS, PAPER_REPO, dataset_ids
from .csvfile import (
    LABEL_COLUMN_NAMES,
    TEXT_COLUMN_NAMES,
    find_column,
    pick_column,
    read_csv_frame,
    read_texts_csv,
)
from .pool import add_labelled, read_labelled_texts
from .sources import source_of, source_usages
from .splits import (
    dropped_warning,
    exclude_rows,
    read_excluded_rows,
    stratified_holdout,
    three_way_split,
)
from .verbalizers import (
    check_template,
    derive_verbalizer,
    load_verbalizer_file,
    parse_verbalizer,
    prompt_variant,
)

__all__ = [  # what this module offers (the app's door, glee_core.studio, reads it)
    "DEMO_MIN_TEST",
    "DEMO_THRESHOLD",
    "HEAD_TAIL_RULES",
    "INVISIBLE",
    "LABEL_COLUMN_NAMES",
    "LOOK_ALIKE",
    "LongTailDataset",
    "MIN_DEV_MEAN",
    "MIN_DEV_PER_CLASS",
    "RARE_KEPT",
    "SOURCE_ROW",
    "SPLITS",
    "TEXT_COLUMN_NAMES",
    "UPLOAD_NAME",
    "csv_source",
    "find_column",
    "hf_source",
    "load_csv_dataset",
    "load_dataset",
    "load_demo",
    "load_hf_dataset",
    "load_paper_dataset",
    "load_upload_dataset",
    "look_alike_warnings",
    "read_labelled_csv",
    "read_texts_csv",
    "resolve_data_dir",
    "split_head_tail",
    "upload_source",
]

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


# --------------------------------------------------------------------------------------------
# Sources


DEMO_THRESHOLD = 0.5  # two head classes (trivia, ai) on the demo
DEMO_MIN_TEST = 3  # distinct test texts every demo class keeps


def load_demo(threshold: float | None = None, keep_rare: bool = False) -> LongTailDataset:
    """The embedded demo: each whole chatterbot-corpus conversation (its utterances joined) ->
    its category.

    Conversations are deduplicated (the corpus repeats some, ``tech support`` 105 times over), so
    no text appears twice in or across splits; 20 English categories from ``trivia`` (261
    conversations) down to ``history`` (8); a deterministic stratified 70/10/20 split with at
    least 3 test texts per class. A category with too few conversations for that (``health``, 1)
    is reported in ``dropped_classes``. Head: ``trivia`` and ``ai`` (threshold 0.5)."""
    try:
        import chatterbot_corpus  # noqa: PLC0415 (optional: only for the demo)
    except ImportError:
        raise GleeError(
            "the demo dataset needs the 'chatterbot-corpus' package: "
            "pip install --no-deps chatterbot-corpus"
        ) from None
    folder = Path(chatterbot_corpus.__file__).parent / "data" / "english"
    labels_of: dict[str, set[str]] = {}
    for path in sorted(folder.glob("*.yml")):
        # libyaml's loader where present: 5x faster than the pure-Python one
        doc = yaml.load(
            path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        )
        label = str((doc.get("categories") or [path.stem])[0]).strip().lower()
        for conversation in doc.get("conversations") or []:
            parts = [
                str(u).strip()
                for u in conversation or []
                if isinstance(u, str | int | float) and str(u).strip()
            ]
            if parts:
                labels_of.setdefault(" ".join(parts), set()).add(label)
    # a conversation filed under two categories has no single label: left out
    kept = {text: next(iter(labels)) for text, labels in labels_of.items() if len(labels) == 1}
    splits, rare = three_way_split(
        _frame(list(kept), list(kept.values())), min_test=DEMO_MIN_TEST, keep_rare=keep_rare
    )
    return _from_labelled_frames(
        "demo",
        splits,
        template=DEFAULT_TEMPLATE,
        verbalizer=None,
        threshold=threshold or DEMO_THRESHOLD,
        max_length=128,
        warnings=dropped_warning(rare, kept=keep_rare),
        **_rare_fields(rare, keep_rare),
    )


def resolve_data_dir(data_dir: str | os.PathLike | None) -> Path:
    path = Path(data_dir).expanduser() if data_dir else environment.data_dir()
    if not path.is_dir():
        raise GleeError(
            f"data directory not found: {path} - pass --data-dir DIR or set "
            "GLEE_DATA_DIR (one folder per dataset id, the paper's TSV layout)"
        )
    return path


def _read_tsv(path: Path, columns: tuple[str, ...], warnings: list[str]) -> pd.DataFrame:
    """Read one of the paper's TSV files; malformed rows are counted and skipped, never fatal."""
    with path.open(encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    if not rows:
        raise GleeError(f"{path}: empty file; expected a header row {list(columns)}")
    header = [h.strip() for h in rows[0]]
    missing = [c for c in columns if c not in header]
    if missing:
        raise GleeError(f"{path}: missing column(s) {missing}; header is {header}")
    pos = [header.index(c) for c in columns]
    good, kept, ragged, empty = [], [], 0, 0
    for number, row in enumerate(rows[1:]):
        if len(row) != len(header):
            ragged += 1
            continue
        values = [row[i].strip() for i in pos]
        if not all(values):
            empty += 1
            continue
        good.append(values)
        kept.append(number)
    if ragged or empty:
        warnings.append(
            f"{path.name}: skipped {ragged} malformed row(s) and {empty} row(s) "
            "with an empty text or label"
        )
    frame = pd.DataFrame(good, columns=list(columns))
    text_b = frame[columns[1]] if len(columns) == 3 else None
    return _frame(frame[columns[0]], frame["label"], text_b, rows=kept)


def _read_r8(path: Path, warnings: list[str]) -> pd.DataFrame:
    texts, labels, kept, bad = [], [], [], 0
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            label, sep, text = line.rstrip("\n").partition("\t")
            if not sep or not label.strip() or not text.strip():
                bad += 1
                continue
            labels.append(label.strip())
            texts.append(text.strip())
            kept.append(number)
    if bad:
        warnings.append(f"{path.name}: skipped {bad} malformed line(s)")
    return _frame(texts, labels, rows=kept)


def _missing_split(dataset_id: str, path: Path) -> GleeError:
    return GleeError(
        f"{dataset_id}: {path} not found. The paper's datasets come from its repository "
        f"({PAPER_REPO}); put {path.name} in {path.parent}/"
    )


def load_paper_dataset(
    dataset_id: str, data_dir: str | os.PathLike | None = None, threshold: float | None = None
) -> LongTailDataset:
    """Read a paper dataset from ``<data_dir>/<id>/{train,dev,test}.tsv`` (r8: ``train/test.txt``).

    A missing dev split is made from 10% of train (stratified, fixed seed) as the paper does."""
    spec = PAPER_DATASETS[dataset_id]
    root = resolve_data_dir(data_dir)
    folder = root / dataset_id
    warnings: list[str] = []
    splits: dict[str, pd.DataFrame] = {}
    if dataset_id == "r8":
        for name in ("train", "test"):
            path = folder / f"{name}.txt"
            if not path.is_file():
                raise _missing_split(dataset_id, path)
            splits[name] = _read_r8(path, warnings)
    else:
        for name in SPLITS:
            path = folder / f"{name}.tsv"
            if path.is_file():
                splits[name] = _read_tsv(path, spec.columns, warnings)
            elif name != "dev":
                raise _missing_split(dataset_id, path)
    if "dev" not in splits:
        splits["train"], splits["dev"] = stratified_holdout(splits["train"], 0.1)
        warnings.append("no dev split: 10% of train (stratified, seed 42) is used as dev")

    classes = None
    label_file = folder / "label2idx.json"
    if label_file.is_file():
        label2idx = json.loads(label_file.read_text(encoding="utf-8"))
        classes = [k for k, _ in sorted(label2idx.items(), key=lambda kv: kv[1])]
        canonical = {c.strip().lower(): c for c in classes}
        for name, frame in splits.items():
            mapped = frame["label"].str.lower().map(canonical)
            unknown = int(mapped.isna().sum())
            if unknown:
                warnings.append(
                    f"{name}: skipped {unknown} row(s) whose label is not in label2idx.json"
                )
            splits[name] = frame.assign(label=mapped)[mapped.notna()]
    verbalizer_path = root / "verbalizers" / f"{spec.verbalizer_file or dataset_id}.verbalizer"
    verbalizer = None
    if verbalizer_path.is_file():
        verbalizer = json.loads(verbalizer_path.read_text(encoding="utf-8"))
    else:
        warnings.append(f"{verbalizer_path} not found: label words derived from class names")
    return _from_labelled_frames(
        dataset_id,
        splits,
        template=spec.template,
        verbalizer=verbalizer,
        threshold=threshold or spec.threshold,
        max_length=spec.max_length,
        warnings=warnings,
        language=spec.language,
        batch_size=spec.batch_size,
        classes=classes,
    )


# Characters that make two labels look the same: invisible ones, and the Cyrillic and Greek
# letters drawn like Latin ones (a short list of the usual confusables; Unicode's own list,
# confusables.txt, is longer)
INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad"))
LOOK_ALIKE = str.maketrans(
    "аеорсхуѕіјԁһⅼАВЕКМНОРСТХΑΒΕΗΙΚΜΝΟΡΤΥΧοα", "aeopcxysijdhlABEKMHOPCTXABEHIKMNOPTYXoa"
)


def look_alike_warnings(labels: pd.Series, source: str) -> list[str]:
    """A warning for each group of distinct labels that read the same (after NFC): they differ
    only by invisible characters, or by look-alike letters of another script."""
    groups: dict[str, set[str]] = {}
    for label in labels.unique():
        groups.setdefault(str(label).translate(INVISIBLE).translate(LOOK_ALIKE), set()).add(label)
    return [
        f"{source}: the labels {', '.join(repr(v) for v in sorted(same))} look the same but "
        "are different classes (invisible characters or letters of another script); fix "
        "them in the file if they are one class"
        for same in groups.values()
        if len(same) > 1
    ]


def read_labelled_csv(
    path: str | os.PathLike,
    text_column: str | None = None,
    label_column: str | None = None,
    text_b_column: str | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """Read a user's CSV into ``text, text_b, label`` rows (plus ``split`` if it has one).

    Rows with an empty text or label are dropped and reported (see :func:`read_csv_frame`)."""
    source = str(Path(path).expanduser())
    frame, warnings = read_csv_frame(path)
    columns = [str(c) for c in frame.columns]
    text_col = pick_column(columns, text_column, TEXT_COLUMN_NAMES, "text", source)
    label_col = pick_column(columns, label_column, LABEL_COLUMN_NAMES, "label", source)
    if text_b_column and text_b_column not in columns:
        raise GleeError(
            f"{source}: no second text column named {text_b_column!r}; columns are {columns}"
        )
    labels = frame[label_col].str.strip().map(lambda v: unicodedata.normalize("NFC", v))
    warnings += look_alike_warnings(labels, source)
    out = _frame(
        frame[text_col].str.strip(),
        labels,
        frame[text_b_column].str.strip() if text_b_column else None,
        rows=np.arange(len(frame)),
    )
    if "split" in (c.lower() for c in columns):
        split_col = next(c for c in columns if c.lower() == "split")
        out["split"] = frame[split_col].str.strip().str.lower().replace({"validation": "dev"})
    empty = (out["text"] == "") | (out["label"] == "")
    if empty.any():
        warnings.append(f"{source}: dropped {int(empty.sum())} row(s) with an empty text or label")
        out = out[~empty].reset_index(drop=True)
    if out.empty:
        raise GleeError(f"{source}: no row has both a text and a label")
    duplicates = int(out.duplicated(subset=["text", "text_b", "label"]).sum())
    if duplicates:
        warnings.append(
            f"{source}: {duplicates} duplicate row(s) kept (copies of a text never "
            "straddle train and test)"
        )
    if out["label"].str.fullmatch(r"-?\d+(\.\d+)?").all():
        warnings.append(
            f"{source}: the labels are numbers, so prompt methods' label words are "
            "digits; give real words with --verbalizer FILE.json"
        )
    n_classes = out["label"].nunique()
    if n_classes > 1000:
        warnings.append(
            f"{source}: {n_classes} classes - classes with fewer than 3 distinct "
            "texts are left out, and per-class charts will be dense"
        )
    return out, warnings


def load_csv_dataset(
    path: str,
    text_column: str | None = None,
    label_column: str | None = None,
    text_b_column: str | None = None,
    threshold: float | None = None,
    template: str | None = None,
    max_length: int = 128,
    keep_rare: bool = False,
) -> LongTailDataset:
    """``csv:PATH``: a CSV with a text and a label column; a ``split`` column (train/dev/test) is
    used when present, otherwise a stratified 70/10/20 split is made (``keep_rare``: a class
    with too few texts for it is trained on, not left out)."""
    frame, warnings = read_labelled_csv(path, text_column, label_column, text_b_column)
    rare: dict[str, int] = {}
    if "split" in frame and set(frame["split"]) <= set(SPLITS) and "train" in set(frame["split"]):
        splits = {
            s: frame[frame["split"] == s].drop(columns="split").reset_index(drop=True)
            for s in SPLITS
        }
        if splits["dev"].empty:
            splits["train"], splits["dev"] = stratified_holdout(splits["train"], 0.1)
        if splits["test"].empty:
            raise GleeError(f"{path}: the split column has no 'test' rows")
    else:
        frame = frame.drop(columns="split", errors="ignore")
        if frame["label"].nunique() < 2:
            raise GleeError(
                f"{path}: only one class ({frame['label'].iloc[0]!r}) - "
                "a classifier needs at least two"
            )
        splits, rare = three_way_split(frame, keep_rare=keep_rare)
        scored = splits["test"]["label"].nunique()  # the classes that reach every split
        if scored < 2:
            raise GleeError(
                f"{path}: {len(rare):,} of the {frame['label'].nunique():,} classes have fewer "
                "than 3 distinct texts, too few for a train, dev and test split, and "
                f"{'one class is' if scored else 'none is'} left to test on; "
                "merge rare classes, or give a split column (train/dev/test) yourself"
            )
        warnings += dropped_warning(rare, kept=keep_rare)
    return _from_labelled_frames(
        f"csv:{path}",
        splits,
        template=template or DEFAULT_TEMPLATE,
        verbalizer=None,
        threshold=threshold or DEFAULT_THRESHOLD,
        max_length=max_length,
        warnings=warnings,
        **_rare_fields(rare, keep_rare),
    )


def _rare_fields(rare: dict[str, int], kept: bool) -> dict:
    """The classes with too few texts for every split, as the dataset reports them."""
    return {"train_only": rare} if kept else {"dropped": rare}


UPLOAD_NAME = re.compile(r"[A-Za-z0-9_-]+\.csv")  # what uploads.safe_upload_name makes


def load_upload_dataset(
    name: str, uploads_dir: str | os.PathLike | None = None, **options
) -> LongTailDataset:
    """``upload:NAME``: a CSV kept by the app (``uploads.save_upload``) in ``uploads_dir``
    (default ``$GLEE_UPLOADS_DIR``). Its id and every message name the upload, never the folder
    it is kept in (in public mode that folder's name is the visitor's key)."""
    folder = Path(uploads_dir).expanduser() if uploads_dir else environment.uploads_dir()
    if not UPLOAD_NAME.fullmatch(name):
        raise GleeError(f"upload:{name}: not an upload name (letters, digits, '_', '-', .csv)")
    path = folder / name
    if not path.is_file():
        raise GleeError(f"upload:{name}: no such upload here; upload the CSV on the Data page")
    try:
        dataset = load_csv_dataset(str(path), **options)
    except GleeError as exc:
        raise GleeError(str(exc).replace(str(path), name)) from None
    dataset.id = f"upload:{name}"
    dataset.warnings = [w.replace(str(path), name) for w in dataset.warnings]
    return dataset


def load_hf_dataset(
    spec: str,
    text_column: str | None = None,
    label_column: str | None = None,
    text_b_column: str | None = None,
    threshold: float | None = None,
    template: str | None = None,
    max_length: int = 128,
) -> LongTailDataset:
    """``hf:NAME[:CONFIG]`` through ``datasets.load_dataset`` (NAME may be a local folder)."""
    try:
        import datasets as hf_datasets  # noqa: PLC0415 (heavy: only for hf: specs)
    except ImportError:
        raise GleeError("hf: datasets need the 'datasets' package: pip install datasets") from None
    name, _, config = spec.partition(":")
    if not Path(name).expanduser().is_dir() and not hub_reachable():
        raise GleeError(
            f"cannot load Hugging Face dataset {spec!r}: it is not a local folder and "
            "the hub is unreachable from this machine; use csv:PATH or a local folder"
        )
    try:
        loaded = hf_datasets.load_dataset(name, config or None)
    except Exception as exc:  # the hub raises many types; all mean "cannot load this"
        raise GleeError(
            f"cannot load Hugging Face dataset {spec!r}: {type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''} (is the hub reachable? "
            "offline, use a local folder or csv:PATH)"
        ) from None
    frames, names = {}, None
    for split_name, part in loaded.items():
        key = {"validation": "dev", "valid": "dev"}.get(split_name, split_name)
        if key not in SPLITS:
            continue
        feature = part.features.get(label_column or "label")
        if names is None and getattr(feature, "names", None):
            names = list(feature.names)
        frames[key] = part.to_pandas()
    if "train" not in frames:
        raise GleeError(f"{spec}: has no 'train' split (splits: {list(loaded)})")
    columns = [str(c) for c in frames["train"].columns]
    text_col = pick_column(columns, text_column, TEXT_COLUMN_NAMES, "text", spec)
    label_col = pick_column(columns, label_column, LABEL_COLUMN_NAMES, "label", spec)
    splits = {}
    for key, frame in frames.items():
        labels = frame[label_col]
        if names is not None:
            labels = labels.map(lambda i: names[int(i)] if int(i) >= 0 else "")
        splits[key] = _frame(
            frame[text_col],
            labels.astype(str),
            frame[text_b_column] if text_b_column else None,
            rows=np.arange(len(frame)),
        )
        splits[key] = splits[key][
            (splits[key]["text"].str.strip() != "") & (splits[key]["label"] != "")
        ]
    warnings: list[str] = []
    if "test" not in splits:
        splits["train"], splits["test"] = stratified_holdout(splits["train"], 0.2)
        warnings.append("no test split: 20% of train (stratified, seed 42) is used as test")
    if "dev" not in splits:
        splits["train"], splits["dev"] = stratified_holdout(splits["train"], 0.1)
        warnings.append("no dev split: 10% of train (stratified, seed 42) is used as dev")
    return _from_labelled_frames(
        f"hf:{spec}",
        splits,
        template=template or DEFAULT_TEMPLATE,
        verbalizer=None,
        threshold=threshold or DEFAULT_THRESHOLD,
        max_length=max_length,
        warnings=warnings,
    )


# The loaders of sources.SOURCES, one signature: (rest of the id, threshold, columns, uploads,
# keep_rare)
def csv_source(rest, threshold, columns, uploads_dir, keep_rare) -> LongTailDataset:
    return load_csv_dataset(rest, threshold=threshold, keep_rare=keep_rare, **columns)


def upload_source(rest, threshold, columns, uploads_dir, keep_rare) -> LongTailDataset:
    return load_upload_dataset(
        rest, uploads_dir, threshold=threshold, keep_rare=keep_rare, **columns
    )


def hf_source(rest, threshold, columns, uploads_dir, keep_rare) -> LongTailDataset:
    return load_hf_dataset(rest, threshold=threshold, **columns)  # the hub's own splits


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
    filled, :func:`glee_core.data.pool.read_labelled_texts`) adds texts to the training split,
    and the id then ends in ``+added-N-<digest>``."""
    if head_tail not in HEAD_TAIL_RULES:
        raise GleeError(
            f"--head-tail must be one of {', '.join(HEAD_TAIL_RULES)}, got {head_tail!r}"
        )
    column_args = dict(
        text_column=text_column, label_column=label_column, text_b_column=text_b_column
    )
    if spec == "demo":
        dataset = load_demo(threshold, keep_rare)
    elif spec in PAPER_DATASETS:
        dataset = load_paper_dataset(spec, data_dir, threshold)
    elif (found := source_of(spec)) is not None:
        source, rest = found
        dataset = source.load(rest, threshold, column_args, uploads_dir, keep_rare)
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
        dataset.splits["train"], ending = add_labelled(dataset.splits["train"], added)
        dataset.warnings.extend(notes)
        dataset.id += ending
        dataset._fingerprint = None  # its rows changed
    return dataset


RARE_KEPT = "+rare"  # a dataset id's ending when its rare classes are kept in training
