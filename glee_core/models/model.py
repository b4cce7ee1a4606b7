"""The model that puts a method's head on a backbone (``GleeModel``), in the mode's way: the head
alone on cached states, the whole masked LM, or peft's adapters, prefixes or prompt; and how an
encoder's states are read (one position, or the mean)."""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path

import torch
from safetensors.torch import load_file, load_model, save_file, save_model
from torch import nn

from ..core.errors import GleeError
from .backbone import Backbone, trained_pooling
from .config import POOLINGS, TrainConfig
from .heads import head_of
from .losses import eta_normalise
from .methods import MethodSpec


class GleeModel(nn.Module):
    """Backbone encoder + the method's head, reading one position of the sequence; what trains
    is the mode's (:mod:`glee_core.models.modes`):

    * quick mode (cached features): the model is the head alone, fed the cached hidden states
      of the frozen backbone; it never holds or changes the backbone's weights;
    * fine-tuning: the whole masked LM and the head;
    * a parameter-efficient mode: ``peft``'s adapters (LoRA) or prefixes (P-tuning v2) on the
      encoder, and the head, which trains its own copies of what it starts from; the backbone's
      weights, its MLM head included, do not change (a prompt head keeps the pretrained
      label-word rows unless it is w/ ed.)."""

    def __init__(
        self,
        spec: MethodSpec,
        backbone: Backbone,
        classes: list[str],
        verbalizer: dict[str, list[str]],
        config: TrainConfig | None = None,
    ):
        super().__init__()
        config = config or TrainConfig()
        tuning = config.tuning
        self.spec = spec
        self.frozen = tuning.cached_features
        self.pooling = (
            config.pooling
            if config.pooling in POOLINGS
            else config.read_pooling(spec.input_format, trained_pooling(backbone.name))
        )
        self.adapter: nn.Module | None = None
        head = head_of(spec)
        if not self.frozen:
            self.mlm = backbone.model  # the whole *ForMaskedLM: its head is shared with PromptHead
            if tuning.parameter_efficient:
                from peft import get_peft_model  # noqa: PLC0415 (only these modes need it)

                self.mlm.requires_grad_(False)
                with peft_deprecations():
                    self.adapter = get_peft_model(self.mlm.base_model, tuning.peft_config(config))
            else:
                # Parts of the MLM head a method never uses get no gradient: keep them out of
                # training (data-parallel training refuses parameters without gradients).
                for parameter in head.unused_backbone_parameters(spec, backbone):
                    parameter.requires_grad_(False)
            tuning.prepare(self, backbone, classes, verbalizer, config)
        self.pass_token_type_ids = backbone.uses_token_type_ids
        self.head = head(spec, backbone, classes, verbalizer, detached=tuning.own_head)
        if (
            (self.adapter is not None or tuning.partial or tuning.inserts)
            and self.head.verbalizer
            and not spec.decoupled_embedding
        ):
            self.head.freeze_label_words()

    @property
    def encoder(self) -> nn.Module:
        """What turns token ids into hidden states: the backbone's encoder, or peft's model
        around it."""
        return self.adapter if self.adapter is not None else self.mlm.base_model

    def hidden_at(self, input_ids, attention_mask, positions, token_type_ids=None) -> torch.Tensor:
        types = token_type_ids if self.pass_token_type_ids else None
        with peft_deprecations() if self.adapter is not None else contextlib.nullcontext():
            if self.prefixes is not None:
                states = self.prefixed_encoder_output(input_ids, attention_mask, types)
            elif self.prompt_tokens is not None:
                states = self.prompted_encoder_output(input_ids, attention_mask, types)
            else:
                states = encoder_output(self.encoder, input_ids, attention_mask, types)
        return pool(states, attention_mask, positions, self.pooling)

    def _virtual_tokens(self, peft_type: str) -> int | None:
        config = getattr(self.adapter, "active_peft_config", None)
        return (
            config.num_virtual_tokens if getattr(config, "peft_type", None) == peft_type else None
        )

    @property
    def prefixes(self) -> int | None:
        """The number of virtual tokens of a prefix-tuned (P-tuning v2) encoder, else None."""
        return self._virtual_tokens("PREFIX_TUNING")

    @property
    def prompt_tokens(self) -> int | None:
        """The number of virtual input tokens of a prompt-tuned encoder, else None."""
        return self._virtual_tokens("PROMPT_TUNING")

    def prompted_encoder_output(self, input_ids, attention_mask, token_type_ids) -> torch.Tensor:
        """The encoder's hidden states of the text under its trained virtual input tokens
        (prompt tuning): the tokens' embeddings put before the text's, the mask and the segment
        ids widened over them, and their own states dropped from the output, so the read
        positions (``[CLS]``, ``[MASK]``) stay where the text has them. (peft's
        feature-extraction model does the same but drops a pair's segment ids.)"""
        batch, n = input_ids.shape[0], self.prompt_tokens
        encoder = self.adapter.base_model
        embedded = encoder.get_input_embeddings()(input_ids)
        prompts = self.adapter.get_prompt(batch).to(embedded.dtype)
        inputs = {
            "inputs_embeds": torch.cat([prompts, embedded], dim=1),
            "attention_mask": torch.cat([attention_mask.new_ones(batch, n), attention_mask], 1),
        }
        if token_type_ids is not None:
            inputs["token_type_ids"] = torch.cat(
                [token_type_ids.new_zeros(batch, n), token_type_ids], dim=1
            )
        return encoder(**inputs).last_hidden_state[:, n:]

    def prefixed_encoder_output(self, input_ids, attention_mask, token_type_ids) -> torch.Tensor:
        """The encoder's hidden states under its trained prefixes: what peft's feature-extraction
        model does (the prefixes as every layer's past keys and values, the mask widened over
        them), but with the pair's segment ids kept, which that model drops with a warning
        ("Token type ids are not supported") although a prefix leaves the input's length as it
        is (peft's sequence-classification model keeps them)."""
        batch = input_ids.shape[0]
        mask = torch.cat([attention_mask.new_ones(batch, self.prefixes), attention_mask], dim=1)
        return encoder_output(
            self.adapter.base_model,
            input_ids,
            mask,
            token_type_ids,
            past_key_values=self.adapter.get_prompt(batch),
        )

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        positions=None,
        token_type_ids=None,
        hidden=None,
        calibrate: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(logits, features)`` from token inputs or, frozen, from cached ``hidden``
        states. ``calibrate`` applies eta-norm for methods that use it (the trainer sets it at
        evaluation only)."""
        if hidden is None:
            hidden = self.hidden_at(input_ids, attention_mask, positions, token_type_ids)
        logits, features = self.head(hidden)
        if calibrate and self.spec.eta_norm:
            logits = eta_normalise(logits, self.class_weight_norms())
        return logits, features

    def class_weight_norms(self) -> torch.Tensor:
        """Per-class L2 norm of the predictor's rows (prompt: the averaged label-word rows)."""
        return self.head.class_weights().float().norm(dim=-1)

    def trainable_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    def tuning_record(self) -> tuple[int, list[str] | None]:
        """What a run records of what it trained: the trainable parameters and, LoRA, the
        modules peft adapted (its default for the model type when none were named; else None)."""
        targets = None
        if self.adapter is not None:
            targets = getattr(self.adapter.peft_config["default"], "target_modules", None)
        return self.trainable_parameters(), sorted(targets) if targets else None

    def save_trained(self, path: str | Path) -> None:
        """Write what the run trained: the whole model (fine-tuning), the head alone (quick
        mode), or the adapter's or prefix's weights and the head (a parameter-efficient mode)."""
        if self.adapter is None:
            save_model(self.head if self.frozen else self, str(path))
            return
        from peft import get_peft_model_state_dict  # noqa: PLC0415

        tensors = {f"{ADAPTER}.{k}": v for k, v in get_peft_model_state_dict(self.adapter).items()}
        tensors.update({f"{HEAD}.{k}": v for k, v in self.head.state_dict().items()})
        save_file({k: v.detach().contiguous() for k, v in tensors.items()}, str(path))

    def load_trained(self, path: str | Path) -> None:
        """Read back what :meth:`save_trained` wrote (strictly: every tensor, no other)."""
        if self.adapter is None:
            load_model(self.head if self.frozen else self, str(path))
            return
        from peft import get_peft_model_state_dict, set_peft_model_state_dict  # noqa: PLC0415

        tensors = load_file(str(path))
        parts = {HEAD: {}, ADAPTER: {}}
        for key, value in tensors.items():
            part, _, name = key.partition(".")
            if part not in parts:
                raise GleeError(f"{path}: unexpected tensor {key!r} in a {self.spec.id} run")
            parts[part][name] = value
        expected = set(get_peft_model_state_dict(self.adapter))
        if set(parts[ADAPTER]) != expected:
            raise GleeError(
                f"{path}: the adapter's weights do not fit this model (expected "
                f"{len(expected)} tensors, found {len(parts[ADAPTER])})"
            )
        self.head.load_state_dict(parts[HEAD])
        set_peft_model_state_dict(self.adapter, parts[ADAPTER])


HEAD, ADAPTER = "head", "adapter"  # the parts of a parameter-efficient run's weights file


@contextlib.contextmanager
def peft_deprecations():
    """Silence the FutureWarnings that peft's own calls into transformers raise, which a user
    can do nothing about: it asks the model ``is_gradient_checkpointing``, and its prefix tuning
    hands the prefixes over as ``past_key_values`` (transformers 5.24: "use ``cache``")."""
    with warnings.catch_warnings():
        for message in ("`is_gradient_checkpointing`", "`past_key_values` is deprecated"):
            warnings.filterwarnings("ignore", message, FutureWarning)
        yield


def encoder_output(
    encoder: nn.Module, input_ids, attention_mask, token_type_ids=None, **inputs
) -> torch.Tensor:
    """An encoder's last hidden states, (batch, length, hidden); ``inputs``: more keyword
    inputs for it (P-tuning v2's ``past_key_values``)."""
    if token_type_ids is not None:
        inputs["token_type_ids"] = token_type_ids
    return encoder(input_ids=input_ids, attention_mask=attention_mask, **inputs).last_hidden_state


def encoder_hidden_states(
    mlm: nn.Module, input_ids, attention_mask, token_type_ids=None
) -> torch.Tensor:
    """The masked LM's encoder's last hidden states, (batch, length, hidden)."""
    return encoder_output(mlm.base_model, input_ids, attention_mask, token_type_ids)


def pool(
    states: torch.Tensor,
    attention_mask: torch.Tensor,
    positions: torch.Tensor,
    pooling: str = "cls",
) -> torch.Tensor:
    """One vector per sequence: the state at its read position (``cls``: ``[CLS]``, or
    ``[MASK]`` for a template), or the mean over its tokens (``mean``: what sentence-transformers
    such as all-MiniLM-L6-v2 were trained to produce)."""
    if pooling == "mean":
        mask = attention_mask.unsqueeze(-1).to(states.dtype)
        return (states * mask).sum(1) / mask.sum(1).clamp_min(1.0)
    return states[torch.arange(states.shape[0], device=states.device), positions]


def build_model(
    spec: MethodSpec,
    backbone: Backbone,
    classes: list[str],
    verbalizer: dict[str, list[str]],
    config: TrainConfig | None = None,
) -> GleeModel:
    """Compose the method on ``backbone`` for ``config``'s mode and pooling (default: fine-tuning,
    ``[CLS]``). Fine-tuning or a parameter-efficient mode, the model holds the backbone's
    weights (pass a copy); quick mode, it is the head alone and the backbone stays untouched."""
    return GleeModel(spec, backbone, classes, verbalizer, config)
