"""A run's optimiser: AdamW's parameter groups (the encoder's rate, with layer-wise decay; the
head's own rate) and the linear warm-up schedule. The training loop
(:mod:`glee_core.train.loop`) steps it."""

from __future__ import annotations

import re

import torch
from transformers import get_linear_schedule_with_warmup

from ..core.devices import adamw
from ..core.errors import GleeError
from ..models.config import TrainConfig
from ..models.model import GleeModel


def parameter_groups(model: GleeModel, lr: float, config: TrainConfig) -> list[dict]:
    """AdamW's parameter groups: the encoder at ``lr`` (with ``layer_decay``, layer l of L at
    ``lr * decay ** (L + 1 - l)``, the embeddings at ``lr * decay ** (L + 1)``) and everything
    else that trains - the head, and for prompt methods the MLM head's transform - at
    ``head_lr`` (default ``lr``). The tied decoder rows are the word embeddings: encoder."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    if model.frozen:  # quick mode: the model is the head alone
        return [{"params": trainable, "lr": lr}]
    names = {id(p): name for name, p in model.encoder.named_parameters()}
    layers = {key: layer_of(name) for key, name in names.items()}
    depth = max([n for n in layers.values() if n is not None], default=0)  # L
    decay = config.layer_decay or 1.0
    rates: dict[float, list] = {}
    for p in trainable:
        if id(p) not in names:
            rate = config.head_lr or lr
        else:  # embeddings: layer 0; layer i: i + 1; anything else (a pooler): the top
            layer = layers[id(p)]
            rate = lr * decay ** (depth + 1 - (depth + 1 if layer is None else layer))
        rates.setdefault(rate, []).append(p)
    return [{"params": params, "lr": rate} for rate, params in rates.items()]


def layer_of(name: str) -> int | None:
    """The depth of an encoder parameter from its name: 0 for the embeddings, ``i + 1`` for
    transformer layer ``i`` (``encoder.layer.3.``, ``transformer.layer.3.``, ``layers.3.``),
    None for anything else."""
    if "embeddings" in name:
        return 0
    match = re.search(r"(?:^|\.)layers?\.(\d+)\.", name)
    return int(match.group(1)) + 1 if match else None


def make_optimizer(
    model: GleeModel,
    config: TrainConfig,
    device: torch.device,
    total_steps: int,
    lr: float | None = None,
):
    """AdamW (fused: :func:`~glee_core.core.devices.adamw`) over :func:`parameter_groups` at
    ``lr`` (default: the config's one rate), with linear warm-up over ``warmup_ratio`` of the
    steps, then decay."""
    lr = config.learning_rate if lr is None else lr
    if lr is None:
        raise GleeError(
            "this configuration searches its learning rate on dev: pass the candidate to train at"
        )
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = adamw(parameter_groups(model, lr, config), device, weight_decay=config.weight_decay)
    scheduler = get_linear_schedule_with_warmup(
        optimizer, int(config.warmup_ratio * total_steps), total_steps
    )
    return params, optimizer, scheduler
