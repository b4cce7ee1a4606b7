"""The recommendation's averaged answer (:mod:`glee_core.runs.ensemble`) outside the lab: an
:class:`EnsembleScorer` scores new text with several stored runs, or exported classifiers, and
averages their probabilities; :func:`glee_core.serve.export.export_ensemble` writes them as one
folder (each member the studio's own classifier folder, named by ``glee_ensemble.json``, which
this module writes and reads) that :func:`glee_core.serve.export.load_classifier` reads back.

    python -m glee_core predict --run ID1,ID2,ID3 --input texts.csv --out predictions.csv
    python -m glee_core export --run ID1,ID2,ID3 --out my-classifier

Only the studio's folder carries it: an ONNX graph, a transformers model or a peft adapter holds
one classifier (``export --format`` says so in one line).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import __version__
from ..core.errors import GleeError
from ..core.markdown import literal
from ..data.catalog import dataset_name
from ..runs.ensemble import average_probabilities
from ..runs.json_values import integer, mapping
from ..runs.store import Run
from .inference import Scorer

ENSEMBLE_FILE = "glee_ensemble.json"  # what marks an ensemble's folder
_FORMAT_VERSION = 1


def check_form(form: str, quantize: str | None, members: int) -> None:
    """A GleeError unless ``form`` can carry an ensemble of ``members`` runs: the studio's
    folder alone does (a folder a member), unquantized."""
    if form != "glee" or quantize:
        raise GleeError(
            f"--format {form} holds one classifier; an ensemble of {members} runs leaves as "
            "the studio's folder (--format glee), without --quantize"
        )


def run_ids(ref: str) -> list[str]:
    """The runs a ``--run`` names: one, or several joined by commas (an ensemble)."""
    ids = [part.strip() for part in str(ref).split(",")]
    if any(not part for part in ids):
        raise GleeError(f"--run {ref!r} names an empty run; join run ids with commas: A,B,C")
    if len(set(ids)) != len(ids):
        raise GleeError(f"--run {ref!r} names a run twice")
    return ids


def same_classes(classes: list[list[str]]) -> None:
    """A GleeError unless every member has the same classes in the same order."""
    for other in classes[1:]:
        if list(other) != list(classes[0]):
            raise GleeError(
                "these classifiers do not share their classes (in order): "
                f"{classes[0][:3]}... against {other[:3]}...; an ensemble averages runs of "
                "one dataset"
            )


@dataclass
class EnsembleScorer:
    """Several classifiers of one dataset's classes with their probabilities averaged, behind
    :class:`~glee_core.serve.inference.Scorer`'s interface (``logits`` is the log of the
    averaged probabilities, so a softmax of it gives them back)."""

    members: list[Scorer]

    def __post_init__(self):
        if len(self.members) < 2:
            raise GleeError("an ensemble needs two classifiers or more")
        same_classes([m.classes for m in self.members])

    @classmethod
    def for_runs(cls, runs: list[Run], device: str = "cpu", precision: str = "auto"):
        """The stored ``runs``' models, each rebuilt from its record and weights."""
        return cls([Scorer.for_run(run, device, precision) for run in runs])

    @property
    def classes(self) -> list[str]:
        return self.members[0].classes

    @property
    def head_classes(self) -> list[str]:
        return self.members[0].head_classes

    @property
    def verbalizer(self) -> dict[str, list[str]]:
        return self.members[0].verbalizer

    is_verbalizer = False  # its scores are the members' probabilities, not label words'

    def logits(self, texts: list[str], texts_b: list[str] | None = None) -> np.ndarray:
        """The log of the members' averaged probabilities, one row per text."""
        probs = average_probabilities([m.logits(texts, texts_b) for m in self.members])
        return np.log(np.clip(probs, 1e-30, None)).astype(np.float32)

    probabilities = Scorer.probabilities
    score_table = Scorer.score_table
    classes_ = Scorer.classes_
    predict_proba = Scorer.predict_proba
    predict = Scorer.predict


def ensemble_manifest(runs: list[Run], folders: list[str], scores: dict | None) -> dict:
    """What ``glee_ensemble.json`` says: the members' folders, their run ids, the dataset and the
    ensemble's test scores where known (the recommendation's, in %)."""
    if len(runs) < 2:
        raise GleeError("an ensemble needs two runs or more: join their ids with commas")
    datasets = {run.dataset for run in runs}
    if len(datasets) > 1:
        raise GleeError(
            f"an ensemble averages runs of one dataset; these are of {sorted(datasets)}"
        )
    same_classes([run.classes for run in runs])
    return {
        "format_version": _FORMAT_VERSION,
        "glee_core": __version__,
        "members": folders,
        "runs": [run.run_id for run in runs],
        "dataset": runs[0].dataset,
        "test": scores or {},
    }


def member_folders(folder: Path) -> list[Path]:
    """The members' folders an ensemble's ``glee_ensemble.json`` names (each inside it); a
    GleeError naming the file when it is damaged."""
    path = folder / ENSEMBLE_FILE
    try:
        manifest = mapping(json.loads(path.read_text(encoding="utf-8")), "the ensemble")
        if integer(manifest.get("format_version", 0), "format_version") > _FORMAT_VERSION:
            raise GleeError(f"{folder} was exported by a newer glee_core; upgrade to load it")
        members = manifest.get("members")
        if not isinstance(members, list) or not all(
            isinstance(m, str) and m and "/" not in m and "\\" not in m and m not in (".", "..")
            for m in members
        ):
            raise ValueError(f"members is {members!r}, not the members' folder names")
    except (OSError, ValueError) as exc:  # unreadable, bad JSON, a RecordError
        raise GleeError(f"{path} is damaged: {exc}; export the ensemble again") from None
    return [folder / m for m in members]


def _seeds(n: int) -> str:
    return "one seed" if n == 1 else f"mean over {n} seeds"


def ensemble_card(runs: list[Run], folders: list[str], scores: dict | None) -> str:
    """The folder's README: what it is, how to load it, its test scores and its members'."""
    record = runs[0].record
    name = literal(dataset_name(record.dataset.id), html_too=True)  # never a CSV's path

    def pct(value) -> str:
        return "-" if value is None else f"{100 * value:.1f}"

    rows = "\n".join(
        f"| `{folder}` | `{run.method}` | {run.reads} | "
        f"{literal(run.record.setting_label, html_too=True)} | "
        + " | ".join(pct(run.metrics.value(k)) for k in ("f1", "tail_f1"))
        + f" | `{run.run_id}` |"
        for run, folder in zip(runs, folders, strict=True)
    )
    together = (
        f"On the test split the average scored macro-F1 {scores['f1']:.1f} and tail F1 "
        f"{scores['tail_f1']:.1f} ({_seeds(scores['seeds'])} of the members' runs).\n\n"
        if scores
        else ""
    )
    return f"""---
library_name: glee-studio
tags:
- text-classification
- long-tail
- ensemble
---

# An ensemble of {len(runs)} classifiers of {name}

Glee Studio's quick compare found these {len(runs)} candidates within one standard error of the
best by cross-validation: the data could not tell them apart, so the answer averages their class
probabilities. Each folder `member-N/` is a classifier of its own (with its model card).

{together}| member | head | reads | setting | test macro-F1 | test tail F1 | run |
|---|---|---|---|---:|---:|---|
{rows}

```python
from glee_core.serve.export import load_classifier

classifier = load_classifier("path/to/this/folder")
classifier.predict(["a text to classify"])
```

Exported by glee_core {__version__}.
"""
