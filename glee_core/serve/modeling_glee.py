"""A Glee Studio classifier as a transformers model: ``GleeForSequenceClassification``.

This file is copied into a folder written by ``python -m glee_core export --format hf`` and loaded
from there through ``auto_map`` (``trust_remote_code=True``); it imports only torch,
transformers and ``adapters.py`` beside it (torch alone). Every head of the studio is the same
few parts:

* an encoder (any transformers ``AutoModel``: the run's fine-tuned one, its LoRA merged in, or the
  pretrained one of a quick-mode run), with P-tuning v2's trained prefixes as past keys and
  values, prompt tuning's trained virtual tokens before the text's embeddings, or bottleneck
  adapters inside its layers (``adapters.py``, copied beside this file), where the run has them;
* a read position: ``[CLS]`` (``cls``), the mean over the text's tokens (``mean``), or the
  ``[MASK]`` of the prompt template (``mask``);
* a transform: none, or ``dense -> activation -> [LayerNorm]`` (a CLS head's MLP, or the MLM
  head's transform a prompt head scores with);
* a linear predictor (a prompt head's averaged label-word rows; η-norm folded into it).

The model applies the run's truncation and, for prompt heads, its template itself: what the
tokenizer gives for the raw text (``pipeline("text-classification", model=DIR)``) is rebuilt into
the run's input, so the scores are the run's own.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import (
    AutoConfig,
    AutoModel,
    DynamicCache,
    PretrainedConfig,
    PreTrainedModel,
)
from transformers.activations import ACT2FN
from transformers.modeling_outputs import SequenceClassifierOutput

from .adapters import insert_adapters


class GleeConfig(PretrainedConfig):
    """What :class:`GleeForSequenceClassification` is made of (see the module's docstring).
    ``template``: the prompt's pieces in order, each ``["literal", [ids]]``, ``["slot", []]``
    (the text) or ``["mask", []]``; ``lead_ids``/``trail_ids``: the special tokens around one
    sequence ([CLS] / [SEP])."""

    model_type = "glee"

    def __init__(
        self,
        encoder: dict | None = None,
        read: str = "cls",
        transform: str = "none",
        activation: str | None = None,
        layer_norm: bool = False,
        layer_norm_eps: float = 1e-12,
        text_max_length: int = 128,
        template: list | None = None,
        lead_ids: list | None = None,
        trail_ids: list | None = None,
        mask_id: int | None = None,
        prefix_length: int = 0,
        prompt_length: int = 0,
        adapter_places: list | None = None,
        adapter_size: int = 0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.encoder = encoder or {}
        self.read, self.transform, self.activation = read, transform, activation
        self.layer_norm, self.layer_norm_eps = layer_norm, layer_norm_eps
        self.text_max_length, self.template = text_max_length, template
        self.lead_ids, self.trail_ids = lead_ids or [], trail_ids or []
        self.mask_id, self.prefix_length = mask_id, prefix_length
        self.prompt_length = prompt_length
        self.adapter_places, self.adapter_size = adapter_places or [], adapter_size


class GleeForSequenceClassification(PreTrainedModel):
    """Encoder, read position, transform, linear predictor: one class's logit each."""

    config_class = GleeConfig
    base_model_prefix = "glee"

    def __init__(self, config: GleeConfig):
        super().__init__(config)
        encoder_config = AutoConfig.for_model(**config.encoder)
        try:  # the studio's encoders carry no pooler: a masked LM's has none
            self.encoder = AutoModel.from_config(encoder_config, add_pooling_layer=False)
        except TypeError:  # a family without one
            self.encoder = AutoModel.from_config(encoder_config)
        if config.adapter_places:  # bottleneck adapters after the layers the run chose
            insert_adapters(self.encoder, tuple(config.adapter_places), config.adapter_size)
        h = encoder_config.hidden_size
        if config.transform == "mlp":
            self.dense = nn.Linear(h, h)
            self.norm = (
                nn.LayerNorm(h, eps=config.layer_norm_eps) if config.layer_norm else nn.Identity()
            )
        self.predictor = nn.Linear(h, config.num_labels)
        if config.prefix_length:  # P-tuning v2: every layer's keys and values of the prefix
            layers = encoder_config.num_hidden_layers
            heads = encoder_config.num_attention_heads
            self.prefix = nn.Parameter(
                torch.zeros(layers, 2, heads, config.prefix_length, h // heads)
            )
        if config.prompt_length:  # prompt tuning: the virtual tokens' embeddings
            self.soft_prompt = nn.Parameter(torch.zeros(config.prompt_length, h))
        self.post_init()

    def _init_weights(self, module):  # every weight comes from the run's file
        pass

    def rebuild(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The run's own input from a tokenizer's encoding of the raw text: the text's tokens
        truncated as the run truncated them and, for a prompt head, put into its template;
        returns (input_ids, attention_mask, read positions)."""
        config, rows, positions = self.config, [], []
        lead, trail = list(config.lead_ids), list(config.trail_ids)
        for ids, mask in zip(input_ids.tolist(), attention_mask.tolist(), strict=True):
            ids = ids[: sum(mask)]
            text = ids[len(lead) : len(ids) - len(trail)]
            if config.template is None:
                rows.append(lead + text[: config.text_max_length - len(lead) - len(trail)] + trail)
                positions.append(0)
                continue
            fixed = sum(len(p[1]) for p in config.template) + 1 + len(lead) + len(trail)
            keep = max(config.text_max_length - fixed, 1)
            body: list[int] = []
            for kind, piece in config.template:
                if kind == "literal":
                    body.extend(piece)
                elif kind == "mask":
                    positions.append(len(lead) + len(body))
                    body.append(config.mask_id)
                else:
                    body.extend(text[:keep])
            rows.append(lead + body + trail)
        width = max(len(r) for r in rows)
        pad = self.config.pad_token_id or 0
        ids = torch.full((len(rows), width), pad, dtype=torch.long, device=input_ids.device)
        mask = torch.zeros_like(ids)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = torch.tensor(row, device=ids.device)
            mask[i, : len(row)] = 1
        return ids, mask, torch.tensor(positions, device=ids.device)

    def scores(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, positions: torch.Tensor
    ) -> torch.Tensor:
        """The logits of inputs already in the run's form (:meth:`rebuild`'s output)."""
        inputs = {}
        if self.config.prefix_length:
            batch = input_ids.shape[0]
            attention_mask = torch.cat(
                [attention_mask.new_ones(batch, self.config.prefix_length), attention_mask], dim=1
            )
            inputs["past_key_values"] = self.prefix_cache(batch)
        if self.config.prompt_length:  # the virtual tokens before the text; their states dropped
            n, batch = self.config.prompt_length, input_ids.shape[0]
            embedded = self.encoder.get_input_embeddings()(input_ids)
            prompts = self.soft_prompt.to(embedded.dtype).unsqueeze(0).expand(batch, -1, -1)
            states = self.encoder(
                inputs_embeds=torch.cat([prompts, embedded], dim=1),
                attention_mask=torch.cat([attention_mask.new_ones(batch, n), attention_mask], 1),
            ).last_hidden_state[:, n:]
        else:
            states = self.encoder(
                input_ids=input_ids, attention_mask=attention_mask, **inputs
            ).last_hidden_state
        if self.config.read == "mean":
            mask = attention_mask[:, -states.shape[1] :].unsqueeze(-1).to(states.dtype)
            hidden = (states * mask).sum(1) / mask.sum(1).clamp_min(1.0)
        else:
            hidden = states[torch.arange(states.shape[0], device=states.device), positions]
        if self.config.transform == "mlp":
            hidden = self.norm(ACT2FN[self.config.activation](self.dense(hidden)))
        return self.predictor(hidden)

    def prefix_cache(self, batch: int):
        """P-tuning v2's prefix as the encoder's past keys and values, for ``batch`` rows."""
        cache = DynamicCache()
        for layer, (keys, values) in enumerate(self.prefix):
            cache.update(keys.expand(batch, -1, -1, -1), values.expand(batch, -1, -1, -1), layer)
        return cache

    def forward(
        self, input_ids=None, attention_mask=None, token_type_ids=None, labels=None, **kwargs
    ) -> SequenceClassifierOutput:
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        logits = self.scores(*self.rebuild(input_ids, attention_mask))
        loss = nn.functional.cross_entropy(logits, labels) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits)
