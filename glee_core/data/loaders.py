"""The loaders of :func:`glee_core.data.datasets.load_dataset`: the demo (built offline from the
``chatterbot-corpus`` package), the paper's datasets (its TSV layout, ``r8``'s ``label<TAB>text``),
and a CSV on this machine or kept by the app (a Hugging Face dataset: ``hf_loader``); each ends as a
:class:`~glee_core.data.datasets.LongTailDataset`. ``load_dataset`` and
:data:`~glee_core.data.sources.SOURCES` name them as ``"module:function"`` (this module imports
``datasets``, so it is never imported back)."""

from __future__ import annotations

import csv
import json
import os
import re
import unicodedata
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from ..core import environment
from ..core.errors import GleeError
from .catalog import DEFAULT_TEMPLATE, DEFAULT_THRESHOLD, PAPER_DATASETS, PAPER_REPO
from .csvfile import (
    LABEL_COLUMN_NAMES,
    TEXT_COLUMN_NAMES,
    Columns,
    guess_columns,
    pick_column,
    read_csv_frame,
)
from .datasets import (
    SPLITS,
    LongTailDataset,
    _frame,
    _from_labelled_frames,
)
from .splits import (
    dropped_warning,
    stratified_holdout,
    three_way_split,
)

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
    path: str | os.PathLike, columns: Columns = Columns()
) -> tuple[pd.DataFrame, list[str]]:
    """Read a user's CSV into ``text, text_b, label`` rows (plus ``split`` if it has one), from
    the ``columns`` named (else found).

    Rows with an empty text or label are dropped and reported (see :func:`read_csv_frame`)."""
    source = str(Path(path).expanduser())
    frame, warnings = read_csv_frame(path)
    named, columns = columns, [str(c) for c in frame.columns]
    text_column, label_column, text_b_column = named.text, named.label, named.text_b
    guessed = guess_columns(frame)
    text_col = pick_column(
        columns, text_column, TEXT_COLUMN_NAMES, "text", source, guessed.get("text"), warnings
    )
    label_col = pick_column(
        columns, label_column, LABEL_COLUMN_NAMES, "label", source, guessed.get("label"), warnings
    )
    if text_col == label_col:
        raise GleeError(
            f"{source}: the text and the label are both the column {text_col!r}; name each "
            "(--text-column NAME --label-column NAME)"
        )
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
    columns: Columns = Columns(),
    threshold: float | None = None,
    keep_rare: bool = False,
) -> LongTailDataset:
    """``csv:PATH``: a CSV with a text and a label column (``columns``: named, else found); a
    ``split`` column (train/dev/test) is used when present, otherwise a stratified 70/10/20
    split is made (``keep_rare``: a class with too few texts for it is trained on, not left
    out)."""
    frame, warnings = read_labelled_csv(path, columns)
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
        template=DEFAULT_TEMPLATE,
        verbalizer=None,
        threshold=threshold or DEFAULT_THRESHOLD,
        max_length=128,
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


# The loaders of sources.SOURCES, one signature: (rest of the id, threshold, columns, uploads,
# keep_rare)
def csv_source(rest, threshold, columns: Columns, uploads_dir, keep_rare) -> LongTailDataset:
    return load_csv_dataset(rest, columns, threshold, keep_rare)


def upload_source(rest, threshold, columns: Columns, uploads_dir, keep_rare) -> LongTailDataset:
    return load_upload_dataset(
        rest, uploads_dir, columns=columns, threshold=threshold, keep_rare=keep_rare
    )
