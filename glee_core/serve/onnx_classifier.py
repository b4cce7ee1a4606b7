"""A Glee Studio classifier on ONNX Runtime: ``OnnxClassifier(folder)``.

This file is copied into a folder written by ``python -m glee_core export --format onnx`` and
imports only numpy, onnxruntime and tokenizers (no torch, no transformers, no glee_core). It
tokenizes as the run did (``tokenizer.json``), truncates as the run did, puts a prompt head's text
into its template, and runs ``model.onnx``::

    from onnx_classifier import OnnxClassifier

    classifier = OnnxClassifier("my-classifier")
    classifier.predict(["my printer is broken"])        # ["tech support"]
    classifier.predict_proba(texts)                     # columns in classifier.classes_ order

``precision="bf16"`` runs the same graph through OpenVINO's execution provider with bf16 matrix
products (``pip install onnxruntime-openvino`` in place of ``onnxruntime``): on a CPU with AMX it
scored r8 texts about 3x faster than fp32 with the same top class on 99.95-100% of them and
probabilities within ~0.02 (Glee Studio's BENCHMARKS.md, "Where a classifier is served"). It is
never chosen for you: the default is the exported fp32 scores.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime
from tokenizers import Tokenizer

BATCH = 32  # texts scored at once, sorted by length (little padding)


def providers(precision: str, threads: int | None) -> list:
    """onnxruntime's providers for ``precision``: its own CPU kernels for fp32, OpenVINO's with
    bf16 matrix products for bf16."""
    if precision == "fp32":
        return ["CPUExecutionProvider"]
    if precision != "bf16":
        raise ValueError(f"precision must be 'fp32' or 'bf16', not {precision!r}")
    if "OpenVINOExecutionProvider" not in onnxruntime.get_available_providers():
        raise RuntimeError(
            "precision='bf16' runs on OpenVINO's execution provider, which this onnxruntime "
            "lacks: pip uninstall onnxruntime && pip install onnxruntime-openvino (bf16 pays "
            "on a CPU with AMX or AVX512-BF16 units; elsewhere it can be slower than fp32)"
        )
    options = {
        "device_type": "CPU",
        "load_config": json.dumps({"CPU": {"INFERENCE_PRECISION_HINT": "bf16"}}),
    }
    if threads:
        options["num_of_threads"] = str(threads)
    return [("OpenVINOExecutionProvider", options)]


class OnnxClassifier:
    """scikit-learn's interface: ``classes_``, ``predict_proba``, ``predict``."""

    def __init__(
        self,
        folder: str | Path,
        model: str | None = None,
        threads: int | None = None,
        precision: str = "fp32",
    ):
        folder = Path(folder)
        self.spec = json.loads((folder / "glee_onnx.json").read_text(encoding="utf-8"))
        self.classes_ = np.array(self.spec["classes"], dtype=object)
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        options = onnxruntime.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        self.session = onnxruntime.InferenceSession(
            str(folder / (model or self.spec["model"])),
            options,
            providers=providers(precision, threads),
        )
        self.inputs = {i.name for i in self.session.get_inputs()}  # mean pooling reads no position

    def encode(self, text: str) -> tuple[list[int], int]:
        """The run's input for one text, and the position its head reads."""
        spec = self.spec
        lead, trail = spec["lead_ids"], spec["trail_ids"]
        ids = self.tokenizer.encode(str(text), add_special_tokens=False).ids
        if spec["template"] is None:
            return lead + ids[: spec["max_length"] - len(lead) - len(trail)] + trail, 0
        fixed = sum(len(piece) for _, piece in spec["template"]) + 1 + len(lead) + len(trail)
        keep = max(spec["max_length"] - fixed, 1)
        body, position = [], 0
        for kind, piece in spec["template"]:
            if kind == "literal":
                body.extend(piece)
            elif kind == "mask":
                position = len(lead) + len(body)
                body.append(spec["mask_id"])
            else:
                body.extend(ids[:keep])
        return lead + body + trail, position

    def logits(self, texts) -> np.ndarray:
        """One row of class scores per text, in the order given."""
        texts = list(texts)
        encoded = [self.encode(t) for t in texts]
        out = np.zeros((len(texts), len(self.classes_)), dtype=np.float32)
        order = np.argsort([len(ids) for ids, _ in encoded], kind="stable")
        for start in range(0, len(order), BATCH):
            rows = order[start : start + BATCH]
            width = max(len(encoded[i][0]) for i in rows)
            ids = np.full((len(rows), width), self.spec["pad_id"], dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for row, i in enumerate(rows):
                ids[row, : len(encoded[i][0])] = encoded[i][0]
                mask[row, : len(encoded[i][0])] = 1
            positions = np.array([encoded[i][1] for i in rows], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": mask, "positions": positions}
            out[rows] = self.session.run(
                ["logits"], {k: v for k, v in feed.items() if k in self.inputs}
            )[0]
        return out

    def predict_proba(self, texts) -> np.ndarray:
        logits = self.logits(texts)
        logits = np.exp(logits - logits.max(axis=1, keepdims=True))
        return logits / logits.sum(axis=1, keepdims=True)

    def predict(self, texts) -> list:
        return list(self.classes_[self.predict_proba(texts).argmax(axis=1)])
