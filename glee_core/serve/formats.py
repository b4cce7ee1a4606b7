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

Every form is built from :func:`portable`: the run's model as an encoder, a read position, a
transform and one linear predictor (η-norm folded into it) - the same numbers the run computes.
A new form is a writer here and a record there.
"""

from __future__ import annotations

import copy
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file
from torch import nn

from ..core.errors import GleeError
from ..core.files import write_json
from ..data.encoding import _template_pieces
from ..models.adapters import BottleneckAdapter, adapter_place
from ..models.heads import ClsHead, ProbeHead, PromptHead
from ..models.methods import eta_scale
from ..runs.metrics import classification_metrics
from ..runs.store import Run
from .export_formats import EXPORT_FORMATS, FORMATS
from .inference import ONNX_SPEC, Scorer
from .modeling_glee import GleeConfig, GleeForSequenceClassification

__all__ = [  # what this module offers
    "HERE",
    "INT8_OPTIONS",
    "Portable",
    "export_hf",
    "export_onnx",
    "export_peft",
    "glee_model",
    "onnx_classifiers",
    "portable",
    "prompt_template",
    "quantization_change",
    "refusal",
    "scores_on_test",
    "special_tokens",
    "stock_model",
    "write_hf",
    "write_onnx",
    "write_peft",
]

HERE = Path(__file__).resolve().parent


@dataclass
class Portable:
    """A run's model in the plain parts every form is made of (``GleeConfig``'s fields and the
    state of a ``GleeForSequenceClassification``), and whether a stock transformers class
    computes it (``stock``: BertForSequenceClassification)."""

    config: GleeConfig
    state: dict[str, torch.Tensor]
    stock: bool
    encoder: nn.Module
    scorer: Scorer


def refusal(run: Run, form: str) -> str | None:
    """Why ``run`` cannot leave in ``form`` (a sentence naming the forms that can), or None."""
    if form not in EXPORT_FORMATS:
        return f"--format must be one of {', '.join(FORMATS)}, got {form!r}"
    return EXPORT_FORMATS[form].refusal(run.record)


def _encoder_of(scorer: Scorer, model, tuning):
    """The run's encoder as plain transformer weights (an adapter merged into it where it can
    be), and the P-tuning v2 prefix (every layer's past keys and values) or prompt tuning's
    virtual tokens it reads before the text (None without)."""
    prefix, prompt = None, None
    if model.frozen:
        encoder = scorer.backbone.model.base_model
    elif tuning.merges:  # the adapters merged into the encoder's weights
        encoder = copy.deepcopy(model.adapter).merge_and_unload()
    elif model.prefixes:  # P-tuning v2: its prefix carried as every layer's past keys and values
        encoder = model.adapter.base_model
        layers = model.adapter.get_prompt(1).layers
        prefix = torch.stack(
            [torch.stack([layer.keys[0], layer.values[0]]) for layer in layers]
        ).detach()
    elif model.prompt_tokens:  # prompt tuning: its virtual tokens' embeddings before the text
        encoder = model.adapter.base_model
        prompt = model.adapter.get_prompt(1)[0].detach()
    else:
        encoder = model.mlm.base_model
    return encoder, prefix, prompt


def _head_parts(head, spec, encoder):
    """A head as a plain classifier: (its transform: none or an MLP, the activation, the
    LayerNorm or None, the predictor's weight and bias)."""
    if isinstance(head, ProbeHead):
        transform, activation, norm = "none", None, None
        weight, bias = head.predictor.weight, head.predictor.bias
    elif isinstance(head, ClsHead):
        transform, activation = "mlp", spec.activation
        norm = head.norm if isinstance(head.norm, nn.LayerNorm) else None
        weight, bias = head.predictor.weight, head.predictor.bias
    elif isinstance(head, PromptHead):
        transform = "mlp"
        activation = getattr(encoder.config, "hidden_act", "gelu")
        norm = head.layer_norm
        weight, bias = head.linear_predictor()
    else:  # a head family the forms do not know yet
        raise GleeError(f"{spec.id}: its head cannot be exported outside the glee format")
    return transform, activation, norm, weight, bias


def portable(run: Run) -> Portable:
    """The run's model as :class:`Portable` parts, on the CPU in fp32."""
    scorer = Scorer.for_run(run, "cpu", precision="fp32")
    model, record = scorer.model.float().eval(), run.record
    tokenizer = scorer.backbone.tokenizer
    tuning = record.hyperparameters.tuning
    encoder, prefix, prompt = _encoder_of(scorer, model, tuning)
    encoder = encoder.float().eval()
    inserted = [  # bottleneck adapters: where each sits (the layer it follows) and its width
        (adapter_place(name), module.down.out_features)
        for name, module in encoder.named_modules()
        if isinstance(module, BottleneckAdapter)
    ]
    head, spec = model.head, record.method
    read = "mask" if spec.input_format == "prompt" else model.pooling
    transform, activation, norm, weight, bias = _head_parts(head, spec, encoder)
    weight, bias = weight.detach().float().clone(), bias.detach().float().clone()
    if spec.eta_norm:  # logits_c / ||w_c||^eta: the same as a predictor scaled row by row
        scale = eta_scale(model.class_weight_norms().detach().float())
        weight, bias = weight / scale[:, None], bias / scale
    lead, trail = special_tokens(tokenizer)
    template = None
    if spec.input_format == "prompt":
        template = prompt_template(tokenizer, record.dataset.template)
    classes = record.dataset.classes
    config = GleeConfig(
        encoder=encoder.config.to_dict(),
        read=read,
        transform=transform,
        activation=activation,
        layer_norm=norm is not None,
        layer_norm_eps=norm.eps if norm is not None else 1e-12,
        text_max_length=record.hyperparameters.max_length,
        template=template,
        lead_ids=lead,
        trail_ids=trail,
        mask_id=tokenizer.mask_token_id,
        prefix_length=0 if prefix is None else prefix.shape[3],
        prompt_length=0 if prompt is None else prompt.shape[0],
        adapter_places=sorted({place for place, _ in inserted}),
        adapter_size=next((size for _, size in inserted), 0),
        num_labels=len(classes),
        id2label=dict(enumerate(classes)),
        label2id={c: i for i, c in enumerate(classes)},
        pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0,
    )
    state = {f"encoder.{k}": v.detach().float().clone() for k, v in encoder.state_dict().items()}
    state.update({"predictor.weight": weight, "predictor.bias": bias})
    if transform == "mlp":
        dense = head.dense
        state.update(
            {
                "dense.weight": dense.weight.detach().float().clone(),
                "dense.bias": dense.bias.detach().float().clone(),
            }
        )
        if norm is not None:
            state.update(
                {
                    "norm.weight": norm.weight.detach().float().clone(),
                    "norm.bias": norm.bias.detach().float().clone(),
                }
            )
    if prefix is not None:
        state["prefix"] = prefix.float().clone()
    if prompt is not None:
        state["soft_prompt"] = prompt.float().clone()
    stock = (
        isinstance(head, ClsHead)
        and spec.activation == "tanh"
        and norm is None
        and read == "cls"
        and prefix is None
        and prompt is None
        and not inserted
        and encoder.config.model_type == "bert"
    )
    return Portable(config, state, stock, encoder, scorer)


def special_tokens(tokenizer) -> tuple[list[int], list[int]]:
    """The special tokens around one sequence ([CLS] .. [SEP]), read off the tokenizer."""
    probe = tokenizer(tokenizer.mask_token)["input_ids"]
    at = probe.index(tokenizer.mask_token_id)
    return probe[:at], probe[at + 1 :]


def prompt_template(tokenizer, template: str) -> list:
    """The template's pieces with their token ids, as ``encode_prompt`` builds them; a text
    slot after a space is refused where the tokenizer reads a leading space (byte-level BPE:
    the raw text's tokens would differ)."""
    pieces, out = _template_pieces(template), []
    for i, (kind, value) in enumerate(pieces):
        if kind == "literal":
            out.append(["literal", tokenizer(value, add_special_tokens=False)["input_ids"]])
        elif kind == "mask":
            out.append(["mask", []])
        else:
            if value != "text":
                raise GleeError("this template reads a second text: it leaves as glee only")
            after_space = (
                i > 0 and pieces[i - 1][0] == "literal" and pieces[i - 1][1][-1:].isspace()
            )
            probe = "sports news"
            if (
                after_space
                and tokenizer(" " + probe, add_special_tokens=False)["input_ids"]
                != tokenizer(probe, add_special_tokens=False)["input_ids"]
            ):
                raise GleeError(
                    "this template puts the text after a space, which this "
                    "tokenizer encodes differently: it leaves as glee only"
                )
            out.append(["slot", []])
    return out


def glee_model(parts: Portable) -> GleeForSequenceClassification:
    """The transformers model of ``parts``, its weights loaded (strictly)."""
    model = GleeForSequenceClassification(parts.config)
    model.load_state_dict(parts.state, strict=True)
    return model.eval()


def stock_model(parts: Portable):
    """BertForSequenceClassification computing ``parts`` exactly: BERT's pooler is CLS-tuning
    ∘ T's dense + tanh on ``[CLS]``, its classifier the predictor (dropout, at inference, is
    none)."""
    from transformers import BertConfig, BertForSequenceClassification  # noqa: PLC0415

    config = BertConfig(
        **{
            **parts.encoder.config.to_dict(),
            "num_labels": parts.config.num_labels,
            "id2label": parts.config.id2label,
            "label2id": parts.config.label2id,
        }
    )
    model = BertForSequenceClassification(config).eval()
    state = {
        f"bert.{k.removeprefix('encoder.')}": v
        for k, v in parts.state.items()
        if k.startswith("encoder.")
    }
    state.update(
        {
            "bert.pooler.dense.weight": parts.state["dense.weight"],
            "bert.pooler.dense.bias": parts.state["dense.bias"],
            "classifier.weight": parts.state["predictor.weight"],
            "classifier.bias": parts.state["predictor.bias"],
        }
    )
    model.load_state_dict(state, strict=True)
    return model


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
