"""Bottleneck adapters (Houlsby et al., ICML 2019) inside a transformers encoder: each chosen
linear layer's output goes on through a down-projection, GELU and an up-projection, added back
(``y + up(gelu(down(y)))``), the up-projection started at zero so the model starts as the
pretrained one. Ours because no well-kept library fits this stack (``adapters`` pins
transformers 4.57); ``--mode adapter`` (``models/modes.py``) puts them in."""

from __future__ import annotations

import torch
from torch import nn


class BottleneckAdapter(nn.Module):
    """``base`` (an ``nn.Linear``, frozen) followed by its adapter of bottleneck ``size``."""

    def __init__(self, base: nn.Linear, size: int):
        super().__init__()
        self.base = base
        width = base.out_features
        self.down = nn.Linear(width, size)
        self.up = nn.Linear(size, width)
        nn.init.normal_(self.down.weight, std=1e-2)
        nn.init.zeros_(self.down.bias)
        nn.init.zeros_(self.up.weight)  # the identity at the start
        nn.init.zeros_(self.up.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.base(x)
        return y + self.up(nn.functional.gelu(self.down(y)))


def adapter_place(name: str) -> str:
    """Where a linear layer named ``name`` (one ending in ``output.dense``) sits: after the
    attention (``attention.output.dense``) or the feed-forward (``output.dense``)."""
    return "attention.output.dense" if name.endswith("attention.output.dense") else "output.dense"


def insert_adapters(encoder: nn.Module, places: tuple[str, ...], size: int) -> list[str]:
    """Wrap every linear layer of ``encoder`` whose name ends in one of ``places`` (the
    attention's ``attention.output.dense``, the feed-forward's ``output.dense``) in a
    :class:`BottleneckAdapter`; the adapters train, nothing else of the encoder does. Returns
    the wrapped layers' names."""
    chosen = []
    for name, module in list(encoder.named_modules()):
        if (
            isinstance(module, nn.Linear)
            and name.endswith("output.dense")
            and adapter_place(name) in places
        ):
            chosen.append(name)
    for name in chosen:
        parent_name, _, child = name.rpartition(".")
        parent = encoder.get_submodule(parent_name)
        adapter = BottleneckAdapter(getattr(parent, child), size)
        adapter.base.requires_grad_(False)
        setattr(parent, child, adapter.to(adapter.base.weight.device))
    return chosen
