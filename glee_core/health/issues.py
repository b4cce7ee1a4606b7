"""The data health check's kinds of issue, each found by a function of its own (as cleanlab's
Datalab keeps an issue type to a class): suspected label errors (:func:`label_issues`),
near-duplicates, leaks across splits and outliers (:func:`duplicates_and_outliers`,
:func:`duplicate_groups`), the most confused classes (:func:`confused_pairs`), and the table a
row a training text (:func:`issues_table`). :func:`glee_core.health.report.examine` runs them
and writes the report; a new kind of issue is a function here and its line there. cleanlab is
imported inside the functions that use it."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from ..data.datasets import SOURCE_ROW, SPLITS, LongTailDataset


class LabelIssues(NamedTuple):
    """Each training text's label quality (NaN where not judged), whether it is a suspected
    label error, and the label its out-of-fold probabilities suggest."""

    quality: np.ndarray
    suspected: np.ndarray
    suggested: np.ndarray


class Neighbours(NamedTuple):
    """Every split's texts together (train first): each text's near-duplicate set (indices into
    them), each index's split (``owner``) and row in it (``local``), its label, and whether it is
    an outlier."""

    sets: list
    owner: np.ndarray
    local: np.ndarray
    labels: np.ndarray
    outlier: np.ndarray


def issues_table(
    dataset: LongTailDataset, labels: np.ndarray, flagged: LabelIssues, duplicate_rows, outlier
) -> pd.DataFrame:
    """``label_issues.csv``: a row a training text, its label quality lowest first."""
    frame = dataset.splits["train"]
    # row: the text's row in the file it came from (where there is one: csv, upload, hf, the
    # paper's files); train_row: its row in the training split as loaded (--exclude's)
    source = frame[SOURCE_ROW].to_numpy() if SOURCE_ROW in frame else np.arange(len(labels))
    issues = pd.DataFrame(
        {
            "row": source,
            "split": "train",
            "text": frame["text"].to_numpy(),
            "given_label": [dataset.classes[c] for c in labels],
            "suggested_label": [dataset.classes[int(c)] for c in flagged.suggested],
            "label_quality": np.round(flagged.quality, 5),
            "suspected": flagged.suspected,
            "duplicate_rows": duplicate_rows,
            "outlier": outlier,
            "train_row": np.arange(len(labels)),
        }
    )
    return issues.sort_values(["label_quality", "train_row"], na_position="last", kind="stable")


def label_issues(probs: np.ndarray, judged: np.ndarray, labels: np.ndarray) -> LabelIssues:
    """Suspected label errors: cleanlab's Datalab on the judged texts' out-of-fold
    probabilities, over the classes they hold. Each training text's label quality (NaN where
    not judged), whether it is suspected, and the label its probabilities suggest."""
    from cleanlab import Datalab  # noqa: PLC0415 (a second's import, only here)

    present = np.unique(labels[judged])
    column = {c: i for i, c in enumerate(present)}
    compact = probs[judged][:, present]
    compact = compact / np.clip(compact.sum(1, keepdims=True), 1e-12, None)
    lab = Datalab(
        data={"label": np.array([column[c] for c in labels[judged]])},
        label_name="label",
        verbosity=0,
    )
    # one process: cleanlab's default forks a pool, and a fork of a process whose torch and BLAS
    # threads hold locks can hang for good (seen in the test suite: a child waiting forever)
    lab.find_issues(
        pred_probs=compact,
        issue_types={
            "label": {"clean_learning_kwargs": {"find_label_issues_kwargs": {"n_jobs": 1}}}
        },
    )
    found = lab.get_issues("label")
    quality = np.full(len(labels), np.nan)
    suspected = np.zeros(len(labels), dtype=bool)
    quality[judged] = found["label_score"].to_numpy()
    suspected[judged] = found["is_label_issue"].to_numpy()
    suggested = np.where(judged, np.nan_to_num(probs, nan=-1.0).argmax(1), labels)
    return LabelIssues(quality, suspected, suggested)


def duplicates_and_outliers(split_features: dict) -> Neighbours:
    """Near-duplicates and outliers: cleanlab's Datalab on every split's features together."""
    from cleanlab import Datalab  # noqa: PLC0415

    names = [s for s in SPLITS if s in split_features]
    every = np.concatenate([split_features[s].hidden for s in names])
    owner = np.concatenate([[s] * len(split_features[s]) for s in names])
    local = np.concatenate([np.arange(len(split_features[s])) for s in names])
    all_labels = np.concatenate([split_features[s].labels for s in names])
    whole = Datalab(data={"label": all_labels}, label_name="label", verbosity=0)
    whole.find_issues(features=every, issue_types={"near_duplicate": {}, "outlier": {}})
    sets = whole.get_info("near_duplicate")["near_duplicate_sets"]
    outlier = whole.get_issues("outlier")["is_outlier_issue"].to_numpy()
    return Neighbours(sets, owner, local, all_labels, outlier)


def duplicate_groups(dataset: LongTailDataset, labels: np.ndarray, near: Neighbours):
    """Per training text: its near-duplicates' rows (``split:row``), whether one is in train
    (a duplicate), in dev or test (a leak) or labelled otherwise (a conflict); and each group
    that leaks or conflicts once, with its texts."""
    sets, owner, local, all_labels = near.sets, near.owner, near.local, near.labels
    n = len(labels)
    rows, dup, leak, conflict = [], np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, bool)
    groups, seen = [], set()
    for i in range(n):
        members = [int(j) for j in sets[i]]
        rows.append(" ".join(f"{owner[j]}:{local[j]}" for j in members))
        dup[i] = any(owner[j] == "train" for j in members)
        leak[i] = any(owner[j] != "train" for j in members)
        conflict[i] = any(all_labels[j] != labels[i] for j in members)
        group = tuple(sorted({i, *members}))
        if (leak[i] or conflict[i]) and group not in seen:
            seen.add(group)
            groups.append(
                {
                    "texts": [
                        {
                            "split": str(owner[j]),
                            "row": int(local[j]),
                            "label": dataset.classes[all_labels[j]],
                            "text": str(dataset.splits[owner[j]]["text"].iloc[local[j]])[:200],
                        }
                        for j in group
                    ],
                    "across_splits": bool(leak[i]),
                    "labels_differ": bool(conflict[i]),
                }
            )
    return rows, dup, leak, conflict, groups


def confused_pairs(probs, judged, labels, class_names: list[str], head) -> tuple[list, dict]:
    """The most confused pairs, from the held-out predictions: every (true, predicted) pair
    with its texts and share of the true class's judged texts, the most confused first; and
    each class's most frequent wrong prediction with its share."""
    k = len(class_names)
    pairs, confused = [], {}
    prediction = np.nan_to_num(probs, nan=-1.0).argmax(1)
    for c in range(k):
        mine = judged & (labels == c)
        wrong = prediction[mine][prediction[mine] != c]
        if len(wrong):
            other = int(np.bincount(wrong, minlength=k).argmax())
            confused[c] = (other, int((wrong == other).sum()) / int(mine.sum()))
            pairs += [
                {
                    "true": class_names[c],
                    "predicted": class_names[d],
                    "texts": int(n),
                    "share": round(int(n) / int(mine.sum()), 4),
                    "head_absorbs_tail": class_names[c] not in head and class_names[d] in head,
                }
                for d, n in enumerate(np.bincount(wrong, minlength=k))
                if n
            ]
    pairs.sort(key=lambda p: (-p["share"], -p["texts"], p["true"]))
    return pairs, confused
