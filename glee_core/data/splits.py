"""How a dataset's rows are split and left out: stratified hold-outs and samples (by distinct
text), the train/dev/test split of a file without one, the classes too small for it, and the
training rows a user leaves out (``--exclude``)."""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.errors import GleeError, first_few

SPLIT_SEED = 42  # fixes derived dev/test splits, independent of the run seed
DEV_SHARE, TEST_SHARE = 0.1, 0.2  # a split made here: the shares of the distinct texts
WITHOUT = "+without-"  # a dataset id's part naming a variant without flagged training rows


def stratified_holdout(
    frame: pd.DataFrame, fraction: float, seed: int = SPLIT_SEED, minimum: int = 1
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Hold out ``fraction`` of every class (at least ``minimum`` distinct texts, keeping one).

    Rows are grouped by text first: copies of one text always land on the same side, so a
    duplicated text can never be both trained on and tested on. One sort of the whole frame,
    then a random permutation of each class's distinct texts (in class order, from one
    generator): linear in the rows, 10,000 classes in a tenth of a second."""
    rng = np.random.default_rng(seed)
    if frame.empty:
        return frame.reset_index(drop=True), frame.reset_index(drop=True)
    codes = [pd.factorize(frame[c], sort=True)[0] for c in ("label", "text", "text_b")]
    order = np.lexsort(codes[::-1])  # by class, then text, then second text
    label, text, text_b = (c[order] for c in codes)
    starts_group = np.r_[
        True, (label[1:] != label[:-1]) | (text[1:] != text[:-1]) | (text_b[1:] != text_b[:-1])
    ]
    group_of_row = np.cumsum(starts_group) - 1  # the distinct text of each row, along order
    group_label = label[np.flatnonzero(starts_group)]
    class_starts = np.flatnonzero(np.r_[True, group_label[1:] != group_label[:-1]])
    class_ends = np.r_[class_starts[1:], len(group_label)]
    held_group = np.zeros(len(group_label), dtype=bool)
    for start, end in zip(class_starts, class_ends, strict=True):
        n_keys = end - start
        permuted = rng.permutation(n_keys)
        n_hold = int(round(fraction * n_keys))
        n_hold = min(max(n_hold, minimum if n_keys >= 2 else 0), n_keys - 1)
        held_group[start + permuted[:n_hold]] = True
    held = np.zeros(len(frame), dtype=bool)
    held[order] = held_group[group_of_row]
    index = frame.index.to_numpy()
    return (
        frame.loc[np.sort(index[~held])].reset_index(drop=True),
        frame.loc[np.sort(index[held])].reset_index(drop=True),
    )


def stratified_sample(frame: pd.DataFrame, n: int, seed: int = SPLIT_SEED) -> pd.DataFrame:
    """``n`` rows of ``frame`` in which every class keeps its share (rounded down, the rows left
    to the largest remainders) and at least one row while ``n`` allows (taken from the largest
    classes; with fewer rows than classes, the most frequent classes get one); rows drawn at
    random with ``seed``, kept in their order. ``--limit``'s default."""
    if n >= len(frame):
        return frame
    counts = frame["label"].value_counts()
    counts = counts.loc[sorted(counts.index, key=lambda c: (-counts[c], str(c)))]
    exact = counts * n / counts.sum()
    take = np.maximum(np.floor(exact), 1).astype(int)
    take.iloc[n:] = 0  # fewer rows than classes: the rarest go without
    while take.sum() > n:  # the floor of one took rows: give them back from the largest
        take[take.idxmax()] -= 1
    for label in (exact - take).sort_values(ascending=False, kind="stable").index:
        if take.sum() == n:
            break
        if take[label] < counts[label]:
            take[label] += 1
    rng = np.random.default_rng(seed)
    labels = frame["label"].to_numpy()
    rows = [
        rng.choice(np.flatnonzero(labels == label), int(k), replace=False)
        for label, k in take.items()
        if k
    ]
    return frame.iloc[np.sort(np.concatenate(rows))]


DROPPED_NAMED = 12  # classes a dropped-classes message names before "and N more"


def dropped_warning(dropped: dict[str, int], kept: bool = False) -> list[str]:
    """One message for every class with too few distinct texts for a train, dev and test split
    (none when none has): left out, or (``kept``) kept in training only; how many, and the
    first :data:`DROPPED_NAMED` by name with their counts."""
    if not dropped:
        return []
    named = first_few([f"{c!r} ({n})" for c, n in dropped.items()], DROPPED_NAMED)
    what = (
        "kept in training only (learned and predicted, never scored: no dev or test text)"
        if kept
        else "left out"
    )
    return [
        f"{len(dropped)} class(es) {what}: too few distinct texts for a train, dev and "
        f"test split (distinct texts in brackets): {named}"
    ]


def three_way_split(
    frame: pd.DataFrame, min_test: int = 1, keep_rare: bool = False
) -> tuple[dict[str, pd.DataFrame], dict[str, int]]:
    """Stratified train/dev/test split (by distinct text: :data:`DEV_SHARE` and
    :data:`TEST_SHARE` of it, seeded with :data:`SPLIT_SEED`), at least ``min_test`` distinct test
    texts per class. Classes with fewer than ``min_test + 2`` distinct texts cannot appear in every
    split: they are left out (or, ``keep_rare``, put in train alone) and returned, so the caller
    reports them."""
    sizes = frame.drop_duplicates(subset=["text", "text_b", "label"])["label"].value_counts()
    too_small = {str(k): int(v) for k, v in sizes.items() if v < min_test + 2}
    rare = frame["label"].isin(list(too_small))
    dev, test, seed = DEV_SHARE, TEST_SHARE, SPLIT_SEED
    rest, test_part = stratified_holdout(
        frame[~rare].reset_index(drop=True), test, seed, minimum=min_test
    )
    train, dev_part = stratified_holdout(rest, dev / (1 - test), seed + 1)
    if keep_rare and rare.any():
        train = pd.concat([train, frame[rare]], ignore_index=True)
    return {"train": train, "dev": dev_part, "test": test_part}, too_small


def read_excluded_rows(path: str | os.PathLike) -> list[int]:
    """Training rows to leave out: the ``train_row`` of every ``suspected`` line of a health
    ``label_issues.csv`` (its ``row`` in reports written before it had one, when ``row`` was the
    training row), or a file of 0-based training-split row numbers, one a line."""
    path = Path(path).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise GleeError(f"--exclude {path}: cannot read it ({exc.strerror or exc})") from None
    first = text.split("\n", 1)[0]
    header = first.strip().split(",")
    if "row" in header and "suspected" in header:
        column = "train_row" if "train_row" in header else "row"
        issues = pd.read_csv(io.StringIO(text), usecols=[column, "suspected"])
        return sorted(int(r) for r in issues.loc[issues["suspected"].astype(str) == "True", column])
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            if not line.strip().isdigit():
                raise GleeError(
                    f"--exclude {path}, line {number}: {line.strip()[:40]!r} is not "
                    "a row number (one 0-based row of the training split a line, "
                    "or health's label_issues.csv)"
                )
            rows.append(int(line))
    return sorted(set(rows))


def exclude_rows(
    train: pd.DataFrame, rows: list[int], classes: list[str], dataset_id: str
) -> tuple[pd.DataFrame, str]:
    """The training split without ``rows`` (every class must keep a text), and the ending of
    the dataset id that says so (``+without-N-<digest of the rows>``)."""
    if rows and rows[-1] >= len(train):
        raise GleeError(
            f"--exclude names training row {rows[-1]}, but the training split of "
            f"{dataset_id} has {len(train)} rows (0 to {len(train) - 1})"
        )
    kept = train.drop(index=rows)
    lost = sorted(set(train["label"]) - set(kept["label"]))
    if lost:
        names = ", ".join(classes[c] for c in lost)
        raise GleeError(
            f"--exclude would leave no training text of {names}; keep at least "
            "one row of every class"
        )
    digest = hashlib.sha256(",".join(map(str, rows)).encode()).hexdigest()[:8]
    return kept.reset_index(drop=True), f"{WITHOUT}{len(rows)}-{digest}"
