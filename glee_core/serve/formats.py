"""The forms a classifier leaves the lab in, written (their records, which the command line, the
card and the Predictions page read: :mod:`glee_core.serve.export_formats`).

* ``glee``: the studio's own folder (``export.py`` writes it: ``load_classifier`` opens it).
* ``hf``: a folder plain transformers loads (``AutoModelForSequenceClassification``,
  ``pipeline("text-classification", model=DIR)``). Where a stock class computes the head exactly
  (CLS-tuning ∘ T on ``[CLS]``, a BERT encoder: BERT's pooler and classifier), that class, with no
  remote code; otherwise ``modeling_glee.py`` (and ``adapters.py``, the bottleneck adapters'
  module it imports) in the folder through ``auto_map`` (``trust_remote_code=True``), which
  applies the run's truncation and template itself.
* ``onnx``: ``model.onnx`` (dynamic batch and length), ``tokenizer.json``, ``glee_onnx.json`` and
  ``onnx_classifier.py`` (numpy, onnxruntime and tokenizers only); ``--quantize int8`` adds
  onnxruntime's dynamic quantization, its test F1 change measured and written in the card.
* ``peft``: a parameter-efficient run's adapter as peft saves it, the head's weights beside it.

Every form is built from ``serve.portable.portable``: the run's model as an encoder, a read
position, a transform and one linear predictor (η-norm folded into it) - the same numbers the run
computes. A new form is a writer here and a record there.
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file
from torch import nn

from ..core.files import write_json
from ..runs.metrics import classification_metrics
from ..runs.store import Run
from .export_formats import EXPORT_FORMATS, FORMATS
from .inference import ONNX_SPEC
from .modeling_glee import GleeConfig, GleeForSequenceClassification
from .portable import glee_model, portable, stock_model

HERE = Path(__file__).resolve().parent


def refusal(run: Run, form: str) -> str | None:
    """Why ``run`` cannot leave in ``form`` (a sentence naming the forms that can), or None."""
    if form not in EXPORT_FORMATS:
        return f"--format must be one of {', '.join(FORMATS)}, got {form!r}"
    return EXPORT_FORMATS[form].refusal(run.record)


def export_hf(run: Run, out: Path, card) -> list[str]:
    """Write ``run`` as a transformers folder at ``out`` (a stock class where one is exact,
    else ``modeling_glee.py`` through ``auto_map``); returns the loading lines for the card."""
    parts = portable(run)
    tokenizer = copy.deepcopy(parts.scorer.backbone.tokenizer)
    if parts.stock:
        model = stock_model(parts)
        tokenizer.model_max_length = parts.config.text_max_length  # truncation=True cuts there
        model.save_pretrained(out, safe_serialization=True)
        lines = [
            "from transformers import pipeline",
            "",
            f'classify = pipeline("text-classification", model="{out.name}", truncation=True)',
            'classify("a text to classify", top_k=None)',
        ]
    else:
        model = glee_model(parts)
        GleeConfig.register_for_auto_class()
        GleeForSequenceClassification.register_for_auto_class("AutoModelForSequenceClassification")
        model.save_pretrained(out, safe_serialization=True)
        shutil.copyfile(HERE / "modeling_glee.py", out / "modeling_glee.py")
        shutil.copyfile(HERE.parent / "models" / "adapters.py", out / "adapters.py")
        lines = [
            "from transformers import pipeline",
            "",
            f'classify = pipeline("text-classification", model="{out.name}", '
            "trust_remote_code=True)",
            'classify("a text to classify", top_k=None)',
        ]
    tokenizer.save_pretrained(out)
    return lines


# onnxruntime's dynamic int8 quantization, a scale per output channel, the matrix products only
# (the embedding lookups stay fp32): 0.1-0.5% of the top classes move against 0.8-1.2% with its
# defaults, at the same speed (bench/quantize_variants.py; BENCHMARKS.md, "Where a classifier is
# served")
INT8_OPTIONS = {"per_channel": True, "op_types_to_quantize": ["MatMul"]}


def export_onnx(run: Run, out: Path, quantize: str | None = None) -> tuple[list[str], dict]:
    """Write ``run`` as an ONNX folder at ``out``; returns the loading lines and, quantized,
    the test F1 change it brings (``{"f1": .., "tail_f1": ..}`` of each, in percent)."""
    import warnings  # noqa: PLC0415

    parts = portable(run)
    model = glee_model(parts)
    # eager attention traces as plain MatMul and Softmax, which ONNX Runtime's graph optimizations
    # fold (FusedMatMul); the SDPA trace keeps shape and mask ops they cannot (the texts/s of
    # each: BENCHMARKS.md, "Where a classifier is served")
    model.encoder.set_attn_implementation("eager")

    class Scores(nn.Module):  # the graph takes the run's own inputs, made by onnx_classifier.py
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, positions):
            return self.inner.scores(input_ids, attention_mask, positions)

    # a padded example: the traced graph keeps the attention mask (an all-ones one is dropped)
    ids = torch.full((2, 8), parts.config.pad_token_id, dtype=torch.long)
    ids[:, :8] = 5
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    positions = torch.zeros(2, dtype=torch.long)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Scores(model).eval(),
            (ids, mask, positions),
            str(out / "model.onnx"),
            input_names=["input_ids", "attention_mask", "positions"],
            output_names=["logits"],
            dynamic_axes={
                "input_ids": {0: "batch", 1: "length"},
                "attention_mask": {0: "batch", 1: "length"},
                "positions": {0: "batch"},
                "logits": {0: "batch"},
            },
            dynamo=False,
            opset_version=17,
        )
    parts.scorer.backbone.tokenizer.backend_tokenizer.save(str(out / "tokenizer.json"))
    c = parts.config
    write_json(
        out / ONNX_SPEC,
        {
            "classes": run.record.dataset.classes,
            "read": c.read,
            "max_length": c.text_max_length,
            "template": c.template,
            "lead_ids": c.lead_ids,
            "trail_ids": c.trail_ids,
            "mask_id": c.mask_id,
            "pad_id": c.pad_token_id,
            "model": "model.onnx",
        },
    )
    shutil.copyfile(HERE / "onnx_classifier.py", out / "onnx_classifier.py")
    change = {}
    if quantize == "int8":
        from onnxruntime.quantization import QuantType, quantize_dynamic  # noqa: PLC0415

        quantize_dynamic(
            str(out / "model.onnx"),
            str(out / "model.int8.onnx"),
            weight_type=QuantType.QInt8,
            **INT8_OPTIONS,
        )
        change = quantization_change(run, out)
    lines = [
        "from onnx_classifier import OnnxClassifier  # in this folder",
        "",
        f'classifier = OnnxClassifier("{out.name}"'
        + (', model="model.int8.onnx")' if quantize else ")"),
        'classifier.predict(["a text to classify"])',
        'classifier.predict_proba(["a text to classify"]), classifier.classes_',
        "# on a CPU with AMX or AVX512-BF16 units, bf16 scores ~3x faster than fp32 "
        "(probabilities within ~0.02):",
        "# pip install onnxruntime-openvino (in place of onnxruntime), then",
        f'# OnnxClassifier("{out.name}", precision="bf16")',
    ]
    return lines, change


def onnx_classifiers(out: Path, models: list[str]) -> dict:
    """An ``OnnxClassifier`` of the folder ``out`` (its own copy of ``onnx_classifier.py``,
    loaded once) for each graph file in ``models``, its thread pool this job's share of the
    cores (``cpu_turn``: onnxruntime's own default, every core, made a check beside a busy
    process wait on the thread that shares its core)."""
    import importlib.util  # noqa: PLC0415

    spec = importlib.util.spec_from_file_location("onnx_classifier", out / "onnx_classifier.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    threads = torch.get_num_threads()
    return {name: module.OnnxClassifier(out, model=name, threads=threads) for name in models}


def scores_on_test(run: Run, pred: np.ndarray) -> dict:
    """Test macro-F1 and tail F1 (percent) of class indices ``pred``, one per text of the run's
    stored test predictions, in their order."""
    data = run.record.dataset
    gold = np.array([data.classes.index(g) for g in run.predictions["gold"]])
    metrics = classification_metrics(gold, pred, data.classes, data.head_classes, data.tail_classes)
    return {"f1": 100 * metrics["f1"], "tail_f1": 100 * metrics["tail_f1"]}


def quantization_change(run: Run, out: Path) -> dict:
    """Test macro-F1 and tail F1 of the fp32 and the int8 graph on the run's test texts."""
    texts = run.predictions["text"].tolist()
    return {
        name: scores_on_test(run, classifier.predict_proba(texts).argmax(1))
        for name, classifier in onnx_classifiers(out, ["model.onnx", "model.int8.onnx"]).items()
    }


def export_peft(run: Run, out: Path) -> list[str]:
    """A LoRA or P-tuning v2 run's adapter as peft writes it, and the head's weights beside it
    (``glee_head.safetensors``: the transform and the predictor of :func:`portable`)."""
    parts = portable(run)
    adapter = parts.scorer.model.adapter
    adapter.save_pretrained(str(out))
    head = {
        k: v.contiguous()
        for k, v in parts.state.items()
        if not k.startswith("encoder.") and k != "prefix"
    }
    save_file(head, str(out / "glee_head.safetensors"))
    c = parts.config
    write_json(
        out / "glee_head.json",
        {
            "read": c.read,
            "transform": c.transform,
            "activation": c.activation,
            "layer_norm": c.layer_norm,
            "layer_norm_eps": c.layer_norm_eps,
            "classes": run.record.dataset.classes,
            "max_length": c.text_max_length,
            "template": c.template,
            "base_model": run.record.model.name,
        },
    )
    return [
        "from peft import PeftModel",
        "from transformers import AutoModel",
        "",
        f'base = AutoModel.from_pretrained("{run.record.model.name}")',
        f'encoder = PeftModel.from_pretrained(base, "{out.name}")',
        "# the head: glee_head.safetensors (dense, norm, predictor) as glee_head.json says",
    ]


# --- the writers of the forms (glee_core.serve.export_formats names them) -----------------


def write_hf(run: Run, out: Path, quantize: str | None) -> tuple[list[str], str, dict]:
    """``hf``'s writer (:class:`ExportFormat`): the folder, its loading lines, what loads it."""
    lines = export_hf(run, out, None)
    stock = not (out / "modeling_glee.py").exists()
    kind = (
        "a stock transformers class (BertForSequenceClassification): no remote code"
        if stock
        else "transformers with this folder's modeling_glee.py and adapters.py "
        "(trust_remote_code=True; they import only torch and transformers)"
    )
    return lines, kind, {}


def write_onnx(run: Run, out: Path, quantize: str | None) -> tuple[list[str], str, dict]:
    """``onnx``'s writer: the folder (quantized too, with the test F1 change)."""
    lines, change = export_onnx(run, out, quantize)
    kind = (
        "ONNX Runtime: onnx_classifier.py in this folder (numpy, onnxruntime and tokenizers only)"
    )
    return lines, kind, change


def write_peft(run: Run, out: Path, quantize: str | None) -> tuple[list[str], str, dict]:
    """``peft``'s writer: the adapter and the head's weights."""
    kind = "a peft adapter (PeftModel.from_pretrained) and the head's weights"
    return export_peft(run, out), kind, {}
