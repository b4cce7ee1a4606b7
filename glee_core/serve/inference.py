"""Score new text with a stored run (or, zero-shot, with a backbone's MLM head).

A :class:`Scorer` is a model ready to score plus what is needed to read its scores: classes,
label words, head classes, template and max length. ``Scorer.for_run`` rebuilds a run's model from
its record and loads its saved weights; the CLI's ``score`` and the app's Playground both use it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ..core.devices import resolve_device
from ..core.errors import GleeError, one_line
from ..data.csvfile import read_texts_csv
from ..data.datasets import LongTailDataset
from ..data.encoding import encode
from ..models.backbone import Backbone, load_backbone
from ..models.features import FeatureSplit, compute_hidden
from ..models.heads import head_of
from ..models.methods import get_method
from ..models.model import GleeModel, build_model
from ..models.scoring import Scoring, check_prompt, get_backbone, predict
from ..runs.record import RunRecord, group_of
from ..runs.store import Run, RunStore, load_checked


def load_run(ref: str | Path, runs_dir: str | Path | None = None) -> Run:
    """A finished run from its directory, or from its id in the run store (``runs_dir``, else
    ``$GLEE_RUNS_DIR``, else ``./runs``); a :class:`GleeError` saying what is wrong otherwise."""
    path = Path(ref).expanduser()
    store = RunStore(runs_dir)
    if not path.is_dir() and path.name == str(ref):  # a bare run id: the store's folder of it
        path = store.path(path.name)
    if not path.is_dir():
        raise GleeError(
            f"run not found: {ref} is neither a run directory nor a run id in the "
            f"store {store.root.absolute()} (pass the run's folder, or the store with "
            "--runs-dir or $GLEE_RUNS_DIR)"
        )
    run, problem = load_checked(path, whole=True)
    if problem:
        raise GleeError(f"{path} is not a finished run, or a broken one: {problem}")
    return run


@dataclass
class Scorer:
    model: GleeModel
    backbone: Backbone
    classes: list[str]
    verbalizer: dict[str, list[str]]
    head_classes: list[str]
    template: str
    max_length: int
    device: str = "cpu"
    precision: str = "auto"  # fp32 for exact scores (an export's parity); auto: bf16 where fast

    @classmethod
    def for_run(cls, run: Run, device: str = "cpu", precision: str = "auto") -> Scorer:
        """Rebuild a run's model from its record and load its saved weights (the head alone for
        a frozen-backbone run)."""
        if not run.weights_path.is_file():
            raise GleeError(
                f"{run.path}: model.safetensors missing - the run cannot score text; "
                "retrain it with --force"
            )
        record = run.record
        # A quick-mode run shares the process's backbone; the others hold a copy of their own (a
        # fine-tuned run overwrites every weight, peft wraps the encoder it is given).
        backbone = (
            get_backbone(record.model.name)
            if record.hyperparameters.frozen
            else load_backbone(record.model.name)
        )
        return cls.from_record(record, backbone, run.weights_path, device, precision)

    @classmethod
    def from_record(
        cls,
        record: RunRecord,
        backbone: Backbone,
        weights: Path,
        device: str = "cpu",
        precision: str = "auto",
    ) -> Scorer:
        """The run ``record`` describes, rebuilt on ``backbone`` with its trained weights from
        ``weights`` (a stored run's or an exported folder's), on ``device``, ready to score."""
        data = record.dataset
        model = build_model(
            record.method, backbone, data.classes, data.verbalizer, record.hyperparameters
        )
        try:
            model.load_trained(weights)
        except Exception as exc:  # a truncated or foreign file
            raise GleeError(f"{weights}: cannot load the weights ({exc})") from None
        model = model.to(resolve_device(device)).eval()
        return cls(
            model,
            backbone,
            data.classes,
            data.verbalizer,
            data.head_classes,
            data.template,
            record.hyperparameters.max_length,
            device,
            precision,
        )

    @classmethod
    def zero_shot(cls, backbone: Backbone, dataset: LongTailDataset) -> Scorer:
        """The untrained backbone's MLM head scoring the verbalizer's label words at
        ``[MASK]``; a template or label words too long for the backbone are a GleeError."""
        check_prompt(
            backbone.name, dataset.template, dataset.verbalizer, dataset.classes, dataset.max_length
        )
        model = build_model(get_method("prompt"), backbone, dataset.classes, dataset.verbalizer)
        return cls(
            model.eval(),
            backbone,
            dataset.classes,
            dataset.verbalizer,
            dataset.head_tail()[0],
            dataset.template,
            dataset.max_length,
        )

    @staticmethod
    def zero_shot_key(dataset: LongTailDataset) -> str:
        """What a zero-shot scorer of ``dataset`` is cached by: everything that changes its
        scores (the texts' fingerprint, the template, the label words)."""
        prompt = json.dumps(
            [dataset.template, dataset.verbalizer, dataset.classes, dataset.max_length],
            sort_keys=True,
            ensure_ascii=False,
        )
        return f"{dataset.fingerprint()}-{hashlib.sha256(prompt.encode()).hexdigest()[:16]}"

    @property
    def is_verbalizer(self) -> bool:
        """Are the scores label words at ``[MASK]`` (prompt methods) rather than a CLS head's?"""
        return self.model.head.verbalizer

    def logits(self, texts: list[str], texts_b: list[str] | None = None) -> np.ndarray:
        """Calibrated logits (as the run evaluated them), one row per text."""
        frame = pd.DataFrame(
            {
                "text": texts,
                "text_b": texts_b or [""] * len(texts),
                "label": np.zeros(len(texts), dtype=np.int64),
            }
        )
        split = encode(
            frame,
            self.backbone.tokenizer,
            self.model.spec.input_format,
            self.template,
            self.max_length,
        )
        device = resolve_device(self.device)
        if self.model.frozen:
            split = FeatureSplit(
                compute_hidden(self.backbone, split, device, self.model.pooling, self.precision),
                split.labels,
            )
        pad_id = self.backbone.tokenizer.pad_token_id or 0
        logits, _ = predict(self.model, split, device, Scoring(pad_id, precision=self.precision))
        return logits

    def probabilities(self, texts: list[str], texts_b: list[str] | None = None) -> pd.DataFrame:
        """Every class's probability for each text (rows: texts, columns: classes)."""
        probs = torch.softmax(torch.from_numpy(self.logits(texts, texts_b)), dim=1).numpy()
        return pd.DataFrame(probs, columns=self.classes)

    # The scikit-learn (and SetFit) convention, what users try first on a loaded classifier:
    # ``load_classifier(DIR).predict(["text"])`` -> labels.
    @property
    def classes_(self) -> np.ndarray:
        """The class labels, in the order of :meth:`predict_proba`'s columns."""
        return np.array(self.classes, dtype=object)

    def predict_proba(self, texts: list[str], texts_b: list[str] | None = None) -> np.ndarray:
        """Every class's probability per text, shape ``(len(texts), len(classes_))``."""
        return self.probabilities(texts, texts_b).to_numpy()

    def predict(self, texts: list[str], texts_b: list[str] | None = None) -> list[str]:
        """The most probable class of each text."""
        return list(self.classes_[self.predict_proba(texts, texts_b).argmax(axis=1)])

    def score_table(self, text: str, text_b: str | None = None) -> pd.DataFrame:
        """One text's scores, best first: class, probability, logit, label words, head/tail."""
        logits = self.logits([text], [text_b] if text_b else None)[0]
        probs = torch.softmax(torch.from_numpy(logits), dim=0).numpy()
        table = pd.DataFrame(
            {
                "class": self.classes,
                "score": probs,
                "logit": logits,
                "label words": [" | ".join(self.verbalizer.get(c, [])) for c in self.classes],
                "group": [group_of(c, self.head_classes) for c in self.classes],
            }
        )
        return table.sort_values("score", ascending=False, kind="stable").reset_index(drop=True)


ONNX_SPEC = "glee_onnx.json"  # what marks an ONNX classifier folder (export --format onnx)


@dataclass
class OnnxScorer:
    """``predict --engine onnx``: an ONNX classifier folder behind :class:`Scorer`'s interface
    (``classes``, ``logits``; the label words of a run scored at ``[MASK]``). Its scores are the
    run's in fp32 (the export's parity tests hold them within 1e-4); single texts only."""

    classifier: object
    classes: list[str]
    verbalizer: dict[str, list[str]]
    is_verbalizer: bool = False

    @classmethod
    def from_folder(cls, folder: str | Path, run: Run | None = None) -> OnnxScorer:
        from .onnx_classifier import OnnxClassifier  # noqa: PLC0415 (onnxruntime)

        folder = Path(folder).expanduser()
        if not (folder / ONNX_SPEC).is_file():
            raise GleeError(
                f"{folder} is not an ONNX classifier ({ONNX_SPEC} missing): export "
                "it with --format onnx, or use --engine torch"
            )
        try:  # onnxruntime's pool as large as this job's share of the cores (cpu_turn)
            classifier = OnnxClassifier(folder, threads=torch.get_num_threads())
        except Exception as exc:  # noqa: BLE001 (bad JSON, a missing key, onnxruntime's own)
            raise GleeError(
                f"{folder} is a damaged ONNX classifier ({one_line(exc)}); export it again"
            ) from None
        verbalizer = run.record.dataset.verbalizer if run is not None else {}
        return cls(
            classifier,
            list(classifier.classes_),
            verbalizer,
            bool(run is not None and head_of(run.record.method).verbalizer),
        )

    def logits(self, texts: list[str], texts_b: list[str] | None = None) -> np.ndarray:
        if texts_b and any(str(t).strip() for t in texts_b):
            raise GleeError(
                "the ONNX engine scores single texts, and this input has a second "
                "text column: use --engine torch"
            )
        return self.classifier.logits(texts)


PREDICT_CHUNK = 512  # texts encoded and scored per step of the progress bar


def predict_table(
    scorer: Scorer,
    texts: list[str],
    texts_b: list[str] | None = None,
    top_k: int = 3,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """One row per text, in input order: ``pred``, its ``probability``, the ``label_word`` that
    scored it (prompt methods), and the ``top{i}`` labels with ``top{i}_score``. Texts are scored
    sorted by length (little padding), ``PREDICT_CHUNK`` at a time; ``progress(done, total)``
    is called after each chunk. A blank text (nothing but spaces, its pair too) is not scored:
    its row is left empty and its 0-based index listed in ``table.attrs["blank_rows"]``; when
    every text is blank there is nothing to classify (GleeError)."""
    if top_k < 1:
        raise GleeError(f"--top-k must be at least 1, got {top_k}")
    top_k = min(top_k, len(scorer.classes))
    blank = np.array(
        [
            not str(t).strip() and not (texts_b and str(texts_b[i]).strip())
            for i, t in enumerate(texts)
        ],
        dtype=bool,
    )
    if len(texts) and blank.all():
        raise GleeError(
            f"every one of the {len(texts):,} texts is blank: nothing to classify "
            "(is the text column the right one?)"
        )
    order = np.argsort([len(t) for t in texts], kind="stable")
    order = order[~blank[order]]
    probs = np.zeros((len(texts), len(scorer.classes)), dtype=np.float32)
    for start in range(0, len(order), PREDICT_CHUNK):
        rows = order[start : start + PREDICT_CHUNK]
        logits = scorer.logits(
            [texts[i] for i in rows], [texts_b[i] for i in rows] if texts_b else None
        )
        probs[rows] = torch.softmax(torch.from_numpy(logits), dim=1).numpy()
        if progress:
            progress(start + len(rows), len(order))
    classes = np.asarray(scorer.classes, dtype=object)
    ranked = np.argsort(-probs, axis=1, kind="stable")[:, :top_k]
    rows = np.arange(len(texts))

    def label(column: np.ndarray) -> np.ndarray:
        return np.where(blank, "", column)

    def score(column: np.ndarray) -> np.ndarray:
        return np.where(blank, np.nan, column)

    table = pd.DataFrame(
        {"pred": label(classes[ranked[:, 0]]), "probability": score(probs[rows, ranked[:, 0]])}
    )
    if scorer.is_verbalizer:
        table["label_word"] = [" | ".join(scorer.verbalizer.get(c, [])) for c in table["pred"]]
    for k in range(top_k):
        table[f"top{k + 1}"] = label(classes[ranked[:, k]])
        table[f"top{k + 1}_score"] = score(probs[rows, ranked[:, k]])
    table.attrs["blank_rows"] = [int(i) for i in np.flatnonzero(blank)]
    return table


def blank_warning(table: pd.DataFrame, most: int = 10) -> str | None:
    """The warning for the blank texts :func:`predict_table` left unclassified (rows counted
    from 1, the first text), or None."""
    blank = table.attrs.get("blank_rows") or []
    if not blank:
        return None
    named = ", ".join(str(i + 1) for i in blank[:most]) + (" ..." if len(blank) > most else "")
    return (
        f"{len(blank):,} blank text{'s' if len(blank) > 1 else ''} left unclassified (text "
        f"row{'s' if len(blank) > 1 else ''} {named}, counting the first text as 1)"
    )


def predict_csv(
    scorer: Scorer,
    path: str | Path,
    text_column: str | None = None,
    text_b_column: str | None = None,
    top_k: int = 3,
    progress: Callable[[int, int], None] | None = None,
    max_rows: int | None = None,
) -> pd.DataFrame:
    """The input CSV's rows (every column, in order) with :func:`predict_table`'s columns after
    them. A missing column, an empty file, an unreadable encoding or more than ``max_rows`` rows
    is a GleeError."""
    frame, text_col, text_b_col = read_texts_csv(path, text_column, text_b_column)
    if max_rows is not None and len(frame) > max_rows:
        raise GleeError(
            f"this file has {len(frame):,} texts; here at most {max_rows:,} are "
            "classified at once: send a part of it, or use `python -m glee_core "
            "predict`, which classifies any size"
        )
    predictions = predict_table(
        scorer,
        frame[text_col].astype(str).tolist(),
        frame[text_b_col].astype(str).tolist() if text_b_col else None,
        top_k,
        progress,
    )
    clash = [c for c in predictions.columns if c in frame.columns]
    table = pd.concat(
        [frame, predictions.rename(columns={c: f"{c}_predicted" for c in clash})], axis=1
    )
    table.attrs["blank_rows"] = predictions.attrs["blank_rows"]
    return table


def score_texts(
    run: Run, texts: list[str], texts_b: list[str] | None = None, device: str = "cpu"
) -> pd.DataFrame:
    """Every class's probability for each text with a stored run."""
    return Scorer.for_run(run, device).probabilities(texts, texts_b)
