"""A run's model as the plain parts every exported form is made of (``serve.formats``): an
encoder (an adapter merged into it where it can be, a P-tuning v2 prefix or prompt tuning's virtual
tokens carried beside it), a read position, a transform and one linear predictor (η-norm folded
into it) - the same numbers the run computes; and the two transformers models built from them
(``modeling_glee``'s, and BERT's own classifier where it computes the head exactly)."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn

from ..core.errors import GleeError
from ..data.encoding import _template_pieces
from ..models.adapters import BottleneckAdapter, adapter_place
from ..models.heads import ClsHead, ProbeHead, PromptHead
from ..models.methods import eta_scale
from ..runs.store import Run
from .inference import Scorer
from .modeling_glee import GleeConfig, GleeForSequenceClassification


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
