"""Data health: which training labels look wrong, which texts are repeated (within training, or
leaked into dev and test), which are outliers, and which classes the tail loses to the head.

Out-of-fold probabilities come from a closed-form probe on the cached frozen features (k folds
of the training split; every text is scored by a probe that never saw it), and cleanlab's
``Datalab`` reads them: confident learning for the label issues, its nearest-neighbour checks on
the features for near-duplicates and outliers (over every split at once, so a copy of a
training text in dev or test is found). Nothing of confident learning is written here. A class
with fewer training texts than folds is "too few to judge": its texts are always trained on,
never held out, and get no label quality.

``python -m glee_core health`` writes :data:`HEALTH_FILE` and :data:`ISSUES_FILE`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.errors import GleeError
from ..core.events import Examining, ProgressFn
from ..core.files import write_report_files
from ..data.datasets import LongTailDataset
from ..runs.metrics import macro_f1
from .issues import (
    confused_pairs,
    duplicate_groups,
    duplicates_and_outliers,
    issues_table,
    label_issues,
)
from .options import HealthOptions

# torch, transformers and scikit-learn load when a check runs: the app's Data page imports this
# module to read a written report

HEALTH_FILE, ISSUES_FILE = "health.json", "label_issues.csv"
ISSUE_COLUMNS = [
    "row",
    "split",
    "text",
    "given_label",
    "suggested_label",
    "label_quality",
    "suspected",
    "duplicate_rows",
    "outlier",
    "train_row",
]
CONFUSED_PAIRS = 10  # the pairs health.json lists, most confused first


@dataclass
class ClassHealth:
    """One class's line of the health table."""

    name: str
    group: str  # head or tail
    texts: int  # training texts
    judged: bool  # enough texts for the folds
    suspected: int  # training texts whose label cleanlab suspects
    duplicates: int  # training texts with a near-duplicate in training
    leaked: int  # training texts with a near-duplicate in dev or test
    conflicting: int  # training texts with a near-duplicate that carries another label
    outliers: int
    confused_with: str | None  # the class its held-out texts are most often predicted as
    confused_share: float  # the share of its judged texts predicted so


@dataclass
class HealthReport:
    """What :func:`data_health` found; ``issues`` has one line per training text."""

    dataset: str
    model: str
    pooling: str
    method: str
    folds: int
    classes: list[ClassHealth]
    confused_pairs: list[dict]
    duplicate_groups: list[dict]  # near-duplicate sets spanning splits or labels
    issues: pd.DataFrame = field(repr=False)
    # how strong the model behind the flags is: the out-of-fold macro-F1 of its probabilities
    # on the judged texts (labels as given), and that of the probe fitted without the flagged
    # rows, on the same held-out texts (what "train without them" does; None: not measured)
    oof_macro_f1: float | None = None
    oof_macro_f1_without: float | None = None

    def summary(self) -> dict:
        judged = [c for c in self.classes if c.judged]
        return {
            "training_texts": int(len(self.issues)),
            "suspected_label_errors": int(self.issues["suspected"].sum()),
            "training_texts_with_duplicates": sum(c.duplicates for c in self.classes),
            "training_texts_leaked_into_dev_or_test": sum(c.leaked for c in self.classes),
            "outliers": int(self.issues["outlier"].sum()),
            "too_few_to_judge": [c.name for c in self.classes if not c.judged],
            "classes_judged": len(judged),
            "out_of_fold_macro_f1": self.oof_macro_f1,
            "out_of_fold_macro_f1_without_flagged": self.oof_macro_f1_without,
        }

    def to_json(self) -> dict:
        return {
            "dataset": self.dataset,
            "model": self.model,
            "pooling": self.pooling,
            "method": self.method,
            "folds": self.folds,
            "summary": self.summary(),
            "classes": [asdict(c) for c in self.classes],
            "confused_pairs": self.confused_pairs,
            "duplicate_groups": self.duplicate_groups,
        }

    def write(self, folder: str | Path) -> tuple[Path, Path]:
        return write_report_files(folder, HEALTH_FILE, self.to_json(), ISSUES_FILE, self.issues)

    @classmethod
    def read(cls, folder: str | Path) -> HealthReport:
        """A written report (``health.json`` and ``label_issues.csv``) read back as the report
        it was written from. A report of before ``train_row`` was written: its ``row`` was
        the training row, and is read as it."""
        folder = Path(folder)
        values = json.loads((folder / HEALTH_FILE).read_text(encoding="utf-8"))
        issues = pd.read_csv(folder / ISSUES_FILE, keep_default_na=False)
        if "train_row" not in issues:
            issues["train_row"] = issues["row"]
        for column in ("suspected", "outlier"):
            if column in issues:
                issues[column] = issues[column].astype(str) == "True"
        known = {f.name for f in fields(ClassHealth)}
        summary = values.get("summary", {})
        return cls(
            **{k: values[k] for k in ("dataset", "model", "pooling", "method", "folds")},
            classes=[
                ClassHealth(**{k: v for k, v in c.items() if k in known}) for c in values["classes"]
            ],
            confused_pairs=values.get("confused_pairs", []),
            duplicate_groups=values.get("duplicate_groups", []),
            issues=issues,
            oof_macro_f1=summary.get("out_of_fold_macro_f1"),
            oof_macro_f1_without=summary.get("out_of_fold_macro_f1_without_flagged"),
        )

    def flagged_rows(self) -> list[int]:
        """The training rows whose label is suspected (what "train without them" leaves out)."""
        return sorted(int(r) for r in self.issues.loc[self.issues["suspected"], "train_row"])

    def absorbed(self, count: int = 3) -> list[dict]:
        """The most confused pairs where a head class takes a tail one's texts."""
        return [p for p in self.confused_pairs if p["head_absorbs_tail"]][:count]

    def table(self) -> tuple[list[str], list[list]]:
        """The per-class table, head -> tail: header and rows (for a terminal or the app)."""
        header = [
            "class",
            "group",
            "texts",
            "suspected",
            "duplicates",
            "leaked",
            "outliers",
            "most confused with",
        ]
        rows = [
            [
                c.name,
                c.group,
                c.texts,
                c.suspected if c.judged else "too few to judge",
                c.duplicates,
                c.leaked,
                c.outliers,
                f"{c.confused_with} ({c.confused_share:.0%})" if c.confused_with else "-",
            ]
            for c in self.classes
        ]
        return header, rows


def out_of_fold_probabilities(
    train,
    num_classes: int,
    options: HealthOptions,
    progress: ProgressFn | None = None,
    left_out: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(probabilities, judged): each judged text's class probabilities from a probe (``train``:
    the training split's features and labels, a ``FeatureSplit``) fitted on the other folds
    (:func:`health_folds`, the options' folds and seed; class-balanced as ``probe-balanced``
    is); a text of a class with fewer than ``folds`` texts is not judged (its row is NaN) and is
    in every fold's training part. ``left_out`` (a mask): rows no fold trains on (they are
    still scored: what training without them does)."""
    from ..models.heads import probe_classifier  # noqa: PLC0415

    features, labels, folds = train.hidden, train.labels, options.folds
    class_balanced = options.method == "probe-balanced"
    progress = progress or (lambda event: None)
    probs = np.full((len(labels), num_classes), np.nan)
    judged, parts = health_folds(labels, num_classes, folds, options.seed)
    for number, (train, held) in enumerate(parts, 1):
        progress(
            Examining(
                step=number,
                steps=folds + 1,
                what=f"out-of-fold probabilities, fold {number}/{folds}",
            )
        )
        if left_out is not None:
            train = train[~left_out[train]]
        clf = probe_classifier(features[train], labels[train], class_balanced)
        scores = np.zeros((len(held), num_classes))
        scores[:, clf.classes_] = clf.predict_proba(features[held])
        probs[held] = scores
    return probs, judged


def health_folds(
    labels: np.ndarray, num_classes: int, folds: int, seed: int
) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """(judged, [(fit rows, held-out rows)] a fold): the judged texts (of classes with
    ``folds`` texts or more) in stratified folds; the others in every fold's fit rows."""
    from sklearn.model_selection import StratifiedKFold  # noqa: PLC0415

    counts = np.bincount(labels, minlength=num_classes)
    judged = counts[labels] >= folds
    rows, always = np.flatnonzero(judged), np.flatnonzero(~judged)
    if len(np.unique(labels[rows])) < 2:
        raise GleeError(
            f"no two classes have {folds} training texts or more: too few to judge "
            "any label (fewer --folds?)"
        )
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    return judged, [
        (np.concatenate([rows[fit], always]), rows[held])
        for fit, held in splitter.split(rows, labels[rows])
    ]


def examine(
    dataset: LongTailDataset,
    split_features: dict,
    options: HealthOptions,
    progress: ProgressFn | None = None,
    probabilities: tuple[np.ndarray, np.ndarray] | None = None,
) -> HealthReport:
    """The check on features at hand (``{split: FeatureSplit}``; the training labels are
    theirs, so a benchmark can plant errors without a new feature pass): cleanlab on the
    out-of-fold ``probabilities`` given (``(probs, judged)``: a trained head's,
    ``glee_core.health.examine``), else on the probe's (:func:`out_of_fold_probabilities`):
    each kind of issue found by a function of its own (:func:`label_issues`,
    :func:`duplicates_and_outliers` and :func:`duplicate_groups`, :func:`confused_pairs`)."""
    progress = progress or (lambda event: None)
    train = split_features["train"]
    labels, k = train.labels, dataset.num_classes
    probs, judged = probabilities or out_of_fold_probabilities(train, k, options, progress)
    progress(
        Examining(
            step=options.folds + 1,
            steps=options.folds + 1,
            what="label issues, near-duplicates and outliers (cleanlab)",
        )
    )

    flagged = label_issues(probs, judged, labels)
    near = duplicates_and_outliers(split_features)
    outlier = near.outlier[: len(labels)]
    class_names, (head, _) = dataset.classes, dataset.head_tail()
    duplicate_rows, dup, leak, conflict, groups = duplicate_groups(dataset, labels, near)
    pairs, confused = confused_pairs(probs, judged, labels, class_names, head)
    counts = np.bincount(labels, minlength=k)
    suspected = flagged.suspected

    issues = issues_table(dataset, labels, flagged, duplicate_rows, outlier)
    classes = [
        ClassHealth(
            name=class_names[c],
            group="head" if class_names[c] in head else "tail",
            texts=int(counts[c]),
            judged=bool(counts[c] >= options.folds),
            suspected=int(suspected[labels == c].sum()),
            duplicates=int(dup[labels == c].sum()),
            leaked=int(leak[labels == c].sum()),
            conflicting=int(conflict[labels == c].sum()),
            outliers=int(outlier[labels == c].sum()),
            confused_with=class_names[confused[c][0]] if c in confused else None,
            confused_share=round(confused[c][1], 4) if c in confused else 0.0,
        )
        for c in range(k)
    ]  # the classes are stored head -> tail

    strength, without = strength_with_and_without(train, probs, judged, suspected, options)
    return HealthReport(
        dataset=dataset.id,
        model="",  # the features' backbone and pooling: data_health names them
        pooling="",
        method=options.method,
        folds=options.folds,
        classes=classes,
        confused_pairs=pairs[:CONFUSED_PAIRS],
        duplicate_groups=groups,
        issues=issues.reset_index(drop=True),
        oof_macro_f1=strength,
        oof_macro_f1_without=without,
    )


def strength_with_and_without(
    train, probs: np.ndarray, judged: np.ndarray, suspected: np.ndarray, options: HealthOptions
) -> tuple[float | None, float | None]:
    """The model's strength (the out-of-fold macro-F1 of the judged texts, labels as given), and
    what training without the flagged texts does to it (the probe's, refitted without them on
    every fold; scored on the same held-out texts); None where it cannot be said. ``train``:
    the training split's ``FeatureSplit``."""
    labels, k = train.labels, probs.shape[1]

    def oof_f1(found: np.ndarray) -> float | None:
        rows = np.flatnonzero(judged)
        if not len(rows):
            return None
        return round(
            100 * macro_f1(labels[rows], np.nan_to_num(found[rows], nan=-1.0).argmax(1), k), 2
        )

    if not (suspected.any() and options.method in ("probe", "probe-balanced")):
        return oof_f1(probs), None
    refit, _ = out_of_fold_probabilities(train, k, options, left_out=suspected)
    return oof_f1(probs), oof_f1(refit)


def read_health(folder: str | Path) -> HealthReport:
    """A written report, read back (:meth:`HealthReport.read`)."""
    return HealthReport.read(folder)
