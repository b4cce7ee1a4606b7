"""The user's unlabelled texts (the pool) and the texts labelled from it.

A pool file is a CSV with a text column (the one reader of :mod:`glee_core.data.csvfile`, its
limits and its errors) or plain text, one text a line (``.txt``). Its rows keep their 0-based
data row (``pool_row``): what a suggestion names and a labelled file gives back. A pool file's
label column, where it has one, is not read (a labelled file goes through ``--add``).

A labelled file (``suggest``'s CSV with its ``label`` column filled, or the app's download) adds
its texts to the training split: a dataset variant whose id ends in ``+added-N-<digest>``, so
its runs stay apart from the dataset's own, as ``+prompt-`` and ``+without-`` do.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..core.errors import GleeError, first_few
from ..data.csvfile import LABEL_COLUMN_NAMES, MAX_CSV_BYTES, as_written, decode, read_texts_csv

ADDED = "+added-"  # a dataset id's ending when labelled pool texts joined its training split
PSEUDO = "+pseudo-"  # a dataset id's ending when pseudo-labelled pool texts joined its training
NONE_OF_THESE = "(none of these)"  # a pool text that belongs to no class: answered, not added
POOL_LIMIT = 200_000  # texts a pool may hold (the feature pass and the scores are linear in it)
MAX_TEXT_CHARS = 20_000  # a pool text's characters kept (512 tokens are ~2,000 of them)


def read_pool(
    path: str | os.PathLike, text_column: str | None = None
) -> tuple[pd.DataFrame, list[str]]:
    """The pool's texts as ``pool_row, text`` (every data row of the file, in order; empty
    texts are left out and counted) and notes for the user (a label column not read, empty
    rows). A ``.txt`` file is one text a line."""
    path = Path(path).expanduser()
    source = str(path)
    if not path.is_file():
        raise GleeError(f"pool file not found: {path}")
    notes: list[str] = []
    if path.suffix.lower() == ".txt":
        if path.stat().st_size > MAX_CSV_BYTES:
            raise GleeError(f"{source}: larger than the {MAX_CSV_BYTES // 2**20} MiB limit")
        lines = decode(path.read_bytes(), source, notes).splitlines()
        frame = pd.DataFrame({"pool_row": range(len(lines)), "text": pd.Series(lines, dtype=str)})
    else:
        read, column, _ = read_texts_csv(path, text_column)
        frame = pd.DataFrame({"pool_row": range(len(read)), "text": read[column].astype(str)})
        labels = [c for c in read.columns if str(c).strip().lower() in LABEL_COLUMN_NAMES]
        if labels:
            notes.append(
                f"{source}: its column {labels[0]!r} is not read (a pool is unlabelled; "
                "to add labelled texts, give them with --add)"
            )
    blank = frame["text"].astype(str).str.strip() == ""
    if blank.any():
        notes.append(f"{source}: {int(blank.sum())} empty row(s) left out of the pool")
        frame = frame[~blank]
    long = frame["text"].str.len() > MAX_TEXT_CHARS
    if long.any():  # a classifier reads a text's first max-length tokens: the rest costs only
        frame = frame.assign(text=frame["text"].str.slice(0, MAX_TEXT_CHARS))
        notes.append(
            f"{source}: {int(long.sum())} text(s) longer than {MAX_TEXT_CHARS:,} characters "
            "cut there (the classifier reads a text's first tokens only)"
        )
    if frame.empty:
        raise GleeError(
            f"{source}: the pool holds no text (give a CSV with a text column, or "
            "a .txt file of one text a line)"
        )
    if len(frame) > POOL_LIMIT:
        raise GleeError(
            f"{source}: {len(frame):,} texts; a pool may hold {POOL_LIMIT:,} (give a sample of it)"
        )
    return frame.reset_index(drop=True), notes


@dataclass(frozen=True)
class PoolSize:
    """The unlabelled texts as their file says, without reading them as a table (an estimate's
    measure, taken in a page): how many (its lines; a CSV's header and quoted line breaks only
    overcount) and their characters (its bytes)."""

    texts: int
    chars: int


def pool_size(path: str | os.PathLike) -> PoolSize:
    """The pool file's :class:`PoolSize`, read as bytes (a 50 MB file in ~0.05 s)."""
    path = Path(path).expanduser()
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise GleeError(f"pool file cannot be read: {path} ({exc.strerror})") from None
    lines = data.count(b"\n") + (not data.endswith(b"\n") and bool(data))
    return PoolSize(max(lines - (path.suffix.lower() != ".txt"), 0), len(data))


def _label_column(read: pd.DataFrame):
    """The first column of a suggestions file named as a label column is
    (:data:`~glee_core.data.csvfile.LABEL_COLUMN_NAMES`), or None."""
    return next((c for c in read.columns if str(c).strip().lower() in LABEL_COLUMN_NAMES), None)


def _filled_rows(path: str | os.PathLike) -> pd.DataFrame | None:
    """The rows of a suggestions file (``suggest``'s CSV) whose label is filled in; None for a
    file that is not one (no label column, unreadable)."""
    try:
        read, _, _ = read_texts_csv(Path(path).expanduser())
    except (GleeError, OSError):
        return None
    label = _label_column(read)
    if label is None:
        return None
    return read[read[label].astype(str).str.strip() != ""]


def labels_given(path: str | os.PathLike) -> int:
    """How many rows of a suggestions file have their label filled in: 0 for a file that is
    not one (no label column, unreadable)."""
    filled = _filled_rows(path)
    return 0 if filled is None else len(filled)


def picked_by(path: str | os.PathLike) -> set[str]:
    """The query strategies a labelled file's texts were picked by (its ``strategy`` column,
    as ``suggest`` and the app write it; the rows with a label only): empty where the file
    does not say (a file of another source, or of an older release)."""
    filled = _filled_rows(path)
    if filled is None:
        return set()
    column = next((c for c in filled.columns if str(c).strip().lower() == "strategy"), None)
    return set() if column is None else {s for s in filled[column].astype(str).str.strip() if s}


def read_labelled_texts(
    path: str | os.PathLike, classes: list[str]
) -> tuple[pd.DataFrame, list[str]]:
    """A labelled file's rows to add, as ``text, label`` (``label``: the class index), and
    notes: the rows left without a label or answered "none of these" are counted, not added; a
    label that is not one of ``classes`` is an error naming it."""
    path = Path(path).expanduser()
    source = str(path)
    if not path.is_file():
        raise GleeError(f"labelled file not found: {path}")
    read, column, _ = read_texts_csv(path)
    label_column = _label_column(read)
    if label_column is None:
        raise GleeError(
            f"{source}: no label column; fill the 'label' column of suggest's CSV "
            "(a class name a row) and give it again"
        )
    # suggest's CSV is written for spreadsheets ('=... for a formula-looking cell): read back
    labels = read[label_column].astype(str).str.strip().map(as_written)
    texts = read[column].astype(str).map(as_written)
    empty, none = labels == "", labels == NONE_OF_THESE
    index = {name: i for i, name in enumerate(classes)}
    unknown = sorted(set(labels[~empty & ~none]) - set(index))
    if unknown:
        raise GleeError(
            f"{source}: label(s) {first_few([repr(u) for u in unknown], 8)} are not "
            f"classes of the dataset ({first_few(classes, 8)}); fix them, or leave "
            "the cell empty to skip the row"
        )
    keep = ~empty & ~none & (texts.str.strip() != "")
    notes = []
    if (~keep).any():
        notes.append(
            f"{source}: {int(empty.sum())} row(s) without a label and {int(none.sum())} "
            f"answered {NONE_OF_THESE!r} are not added"
        )
    if not keep.any():
        raise GleeError(f"{source}: no labelled row to add (fill the label column)")
    added = pd.DataFrame(
        {
            "text": texts[keep].to_numpy(),
            "text_b": "",
            "label": labels[keep].map(index).astype("int64").to_numpy(),
        }
    )
    return added, notes


def add_labelled(
    splits: dict[str, pd.DataFrame], added: pd.DataFrame
) -> tuple[pd.DataFrame, str, list[str]]:
    """The training split with ``added`` rows after its own, the ending of the dataset id that
    says so (``+added-N-<digest of the rows>``) and notes. A text already in training is left
    out; one in dev or test too, and counted: trained on, it would leak into the scores the
    added texts are judged by (the same rule ``suggest`` keeps for the pool)."""
    train = splits["train"]
    held = {
        str(t).strip() for name in ("dev", "test") if name in splits for t in splits[name]["text"]
    }
    leaked = added["text"].astype(str).str.strip().isin(held)
    fresh = added[~added["text"].isin(set(train["text"])) & ~leaked].drop_duplicates(["text"])
    notes = (
        [
            f"{int(leaked.sum())} labelled text(s) left out: they are in the dev or test split "
            "(trained on, they would leak into the scores)"
        ]
        if leaked.any()
        else []
    )
    if fresh.empty:
        raise GleeError(
            "every labelled text is already in the data (training"
            + (", dev or test" if leaked.any() else "")
            + "): nothing to add"
        )
    rows, ending = append_rows(train, fresh, ADDED)
    return rows, ending, notes


def append_rows(train: pd.DataFrame, added: pd.DataFrame, marker: str) -> tuple[pd.DataFrame, str]:
    """The training split with ``added`` (``text, text_b, label``) after its own rows, and the
    ending of the dataset id that says so: ``marker`` (``+added-``, ``+pseudo-``), how many, and
    a digest of their texts and labels, so a variant's runs stay apart from the data's own."""
    hashed = pd.util.hash_pandas_object(added[["text", "label"]], index=False)
    digest = hashlib.sha256(hashed.to_numpy().tobytes()).hexdigest()[:8]
    # other columns (the text's row in the dataset's file): an added text has none, -1
    rows = added[["text", "text_b", "label"]].assign(
        **{
            c: -1 if pd.api.types.is_numeric_dtype(train[c]) else ""
            for c in train.columns
            if c not in ("text", "text_b", "label")
        }
    )
    return (
        pd.concat([train, rows], ignore_index=True)[list(train.columns)],
        f"{marker}{len(added)}-{digest}",
    )
