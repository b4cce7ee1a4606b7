"""The twelve methods of Glee (Zhang et al., EMNLP 2022, "Making Pretrained Language Models Good
Long-tailed Learners"), Tables 2 and 3, as compositions of a few parts.

Every method is a backbone encoder, a position to read (``[CLS]`` or ``[MASK]``), a classifier
head, a loss and an optional evaluation-time calibration:

* CLS-tuning heads: ``Linear(h,h) -> act -> Dropout(0.1) [-> LayerNorm] -> Linear(h,C)``, with the
  activation Tanh (the usual BERT pooler) or ReLU, and the LayerNorm absent, fresh, or copied from
  the MLM head's transform ("pt. LN").
* The prompt head *is* the pretrained MLM head: its transform (dense + act + LayerNorm) and, as the
  predictor, the decoder rows of the verbalizer's label words. A label of several tokens scores the
  average of their logits, which equals one row: the average of their decoder rows.

``METHODS`` is the one registry the CLI, the app and the report list methods from.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.nn import functional as F

from .backbone import Backbone
from .errors import GleeError

FOCAL_GAMMA = 1.0  # the paper's gamma
ETA = 1.1  # eta-norm: eval logits divided by ||w_c|| ** ETA


@dataclass(frozen=True)
class MethodSpec:
    """One row of the paper's tables."""

    id: str
    paper_row: str
    input_format: str  # "plain": text as is, read [CLS]; "prompt": template, read [MASK]
    predictor: str  # "cls": fresh MLP head; "mlm": the pretrained MLM head + verbalizer
    activation: str | None = None  # cls heads: "tanh" or "relu"
    norm: str | None = None  # cls heads: None, "fresh" or "pretrained" (the MLM head's LayerNorm)
    loss: str = "ce"  # "ce" or "focal"
    eta_norm: bool = False
    decoupled_embedding: bool = False  # prompt-ed: untied copy of the embeddings as decoder
    group: str = "CLS-tuning"

    @property
    def uses_mlm_head(self) -> bool:
        """Does the method start from weights of the MLM head (so a pretrained head matters)?"""
        return self.predictor == "mlm" or self.norm == "pretrained"

    def to_dict(self) -> dict:
        return asdict(self)


def _cls(id, row, act, **kw):
    return MethodSpec(id, row, kw.pop("input_format", "plain"), "cls", activation=act, **kw)


def _prompt(id, row, **kw):
    return MethodSpec(id, row, "prompt", "mlm", group="Prompt-tuning", **kw)


METHODS: dict[str, MethodSpec] = {m.id: m for m in (
    _cls("cls-tanh", "CLS-tuning ∘ T", "tanh"),
    _cls("cls-tanh-eta-norm", "CLS-tuning ∘ T w/ η-norm", "tanh", eta_norm=True),
    _cls("cls-tanh-focal", "CLS-tuning ∘ T w/ focal loss", "tanh", loss="focal"),
    _cls("cls-relu", "CLS-tuning ∘ R", "relu"),
    _cls("cls-relu-eta-norm", "CLS-tuning ∘ R w/ η-norm", "relu", eta_norm=True),
    _cls("cls-relu-focal", "CLS-tuning ∘ R w/ focal loss", "relu", loss="focal"),
    _cls("cls-relu-prompt", "CLS-tuning ∘ R w/ prompt", "relu", input_format="prompt"),
    _cls("cls-relu-ln", "CLS-tuning ∘ R w/ LN", "relu", norm="fresh"),
    _cls("cls-relu-pt-ln", "CLS-tuning ∘ R w/ pt. LN", "relu", norm="pretrained"),
    _prompt("prompt", "Prompt-tuning"),
    _prompt("prompt-focal", "Prompt-tuning w/ focal loss", loss="focal"),
    _prompt("prompt-ed", "Prompt-tuning w/ ed.", decoupled_embedding=True),
)}


def get_method(method_id: str) -> MethodSpec:
    try:
        return METHODS[method_id]
    except KeyError:
        raise GleeError(f"unknown method {method_id!r}; choose from {', '.join(METHODS)} "
                        "(python -m glee_core methods)") from None


def parse_methods(value: str) -> list[MethodSpec]:
    """``"prompt,cls-relu-pt-ln"`` or ``"all"`` -> specs."""
    if value.strip() == "all":
        return list(METHODS.values())
    ids = [v.strip() for v in value.split(",") if v.strip()]
    if not ids:
        raise GleeError("no method given; e.g. --method prompt,cls-relu-pt-ln (or all)")
    return [get_method(i) for i in ids]


# --------------------------------------------------------------------------------------------
# Losses and calibration


def focal_loss(logits: torch.Tensor, labels: torch.Tensor, gamma: float = FOCAL_GAMMA
               ) -> torch.Tensor:
    """Mean of ``-(1 - p_t) ** gamma * log p_t`` (Lin et al., 2017)."""
    log_p = F.log_softmax(logits.float(), dim=-1).gather(1, labels[:, None]).squeeze(1)
    return (-(1.0 - log_p.exp()) ** gamma * log_p).mean()


def classification_loss(spec: MethodSpec, logits: torch.Tensor, labels: torch.Tensor
                        ) -> torch.Tensor:
    if spec.loss == "focal":
        return focal_loss(logits, labels)
    return F.cross_entropy(logits.float(), labels)


def eta_normalise(logits: torch.Tensor, class_weight_norms: torch.Tensor, eta: float = ETA
                  ) -> torch.Tensor:
    """eta-norm calibration: logits of class c divided by ``||w_c|| ** eta``."""
    return logits / class_weight_norms.to(logits.dtype).clamp_min(1e-12) ** eta


# --------------------------------------------------------------------------------------------
# Heads. Both return (logits, features): features are the classifier's input, what the paper's
# Figure 4 histograms.


class ClsHead(nn.Module):
    """``Linear(h,h) -> act -> Dropout -> [LayerNorm] -> Linear(h,C)`` on one hidden state."""

    def __init__(self, spec: MethodSpec, backbone: Backbone, num_classes: int):
        super().__init__()
        h = backbone.hidden_size
        self.dense = nn.Linear(h, h)
        self.activation = nn.Tanh() if spec.activation == "tanh" else nn.ReLU()
        self.dropout = nn.Dropout(0.1)
        if spec.norm is None:
            self.norm = nn.Identity()
        else:
            source = backbone.mlm_layer_norm
            self.norm = nn.LayerNorm(h, eps=source.eps)
            if spec.norm == "pretrained":  # w/ pt. LN: start from the MLM head's LayerNorm
                self.norm.load_state_dict(source.state_dict())
        self.predictor = nn.Linear(h, num_classes)

    def forward(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.norm(self.dropout(self.activation(self.dense(hidden))))
        return self.predictor(features), features

    def class_weights(self) -> torch.Tensor:
        return self.predictor.weight


class PromptHead(nn.Module):
    """The pretrained MLM head, scoring only the verbalizer's label-word tokens.

    ``label_token_ids`` holds every token of every label word (T of them); ``averaging`` (C x T)
    averages a class's tokens. Rather than the full vocabulary (V columns) it gathers the T decoder
    rows and builds one weight row per class, so the step costs O(C h) instead of O(V h).

    ``own_weights`` (w/ ed., and every prompt method on a frozen backbone) gives the head its own
    copies of the decoder's label-word rows and bias instead of the rows tied to the embeddings;
    ``detached`` (frozen backbone) also copies the transform, so the backbone is never changed."""

    def __init__(self, spec: MethodSpec, backbone: Backbone, class_token_ids: list[list[int]],
                 detached: bool = False):
        super().__init__()
        share = (lambda m: copy.deepcopy(m)) if detached else (lambda m: m)
        self.dense = share(backbone.mlm_dense)  # shared: trained with, and saved in, the backbone
        self.layer_norm = share(backbone.mlm_layer_norm)
        self._activation = share(backbone.mlm_activation)
        flat = [t for ids in class_token_ids for t in ids]
        averaging = torch.zeros(len(class_token_ids), len(flat))
        col = 0
        for c, ids in enumerate(class_token_ids):
            averaging[c, col:col + len(ids)] = 1.0 / len(ids)
            col += len(ids)
        self.register_buffer("label_token_ids", torch.tensor(flat, dtype=torch.long))
        self.register_buffer("averaging", averaging)
        decoder = backbone.mlm_decoder
        self.own_weights = spec.decoupled_embedding or detached
        if self.own_weights:
            # w/ ed.: an untied, separately trained copy of the input embeddings. Only label-word
            # rows ever reach the loss, so copying those rows is the same model as copying all.
            ids = self.label_token_ids
            self.decoupled_rows = nn.Parameter(backbone.word_embeddings.weight.detach()[ids].clone())
            bias = decoder.bias.detach()[ids].clone() if decoder.bias is not None \
                else torch.zeros(len(flat))
            self.decoupled_bias = nn.Parameter(bias)
        else:
            self.decoder = decoder

    def token_rows(self) -> torch.Tensor:
        if self.own_weights:
            return self.decoupled_rows
        return self.decoder.weight[self.label_token_ids]

    def token_bias(self) -> torch.Tensor:
        if self.own_weights:
            return self.decoupled_bias
        if self.decoder.bias is None:
            return torch.zeros(len(self.label_token_ids), device=self.averaging.device)
        return self.decoder.bias[self.label_token_ids]

    def transform(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.layer_norm(self._activation(self.dense(hidden)))

    def class_weights(self) -> torch.Tensor:
        return self.averaging @ self.token_rows()

    def forward(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.transform(hidden)
        weight = self.class_weights().to(features.dtype)
        bias = (self.averaging @ self.token_bias()).to(features.dtype)
        return features @ weight.T + bias, features

    def full_vocabulary_logits(self, hidden_all: torch.Tensor, positions: torch.Tensor
                               ) -> torch.Tensor:
        """The straightforward path (the released code's): the MLM head over every position and
        the whole vocabulary, then the ``[MASK]`` row and the label-word columns."""
        features = self.transform(hidden_all)  # (B, L, h)
        if self.own_weights:
            vocab_logits = features @ self.token_rows().T + self.token_bias()  # (B, L, T)
            columns = slice(None)
        else:
            vocab_logits = self.decoder(features)  # (B, L, V)
            columns = self.label_token_ids
        at_mask = vocab_logits[torch.arange(len(positions), device=positions.device), positions]
        return at_mask[:, columns] @ self.averaging.T


class GleeModel(nn.Module):
    """Backbone encoder + the method's head, reading one position of the sequence.

    With ``frozen=True`` (quick mode) the model is the head alone: it is fed the cached hidden
    states of the frozen backbone and never holds or changes the backbone's weights."""

    def __init__(self, spec: MethodSpec, backbone: Backbone, num_classes: int,
                 class_token_ids: list[list[int]] | None = None, frozen: bool = False):
        super().__init__()
        self.spec = spec
        self.frozen = frozen
        if not frozen:
            self.mlm = backbone.model  # the whole *ForMaskedLM: its head is shared with PromptHead
            # Parts of the MLM head a method never uses get no gradient: keep them out of training
            # (data-parallel training refuses parameters without gradients).
            unused = []
            if spec.predictor == "cls":
                unused += [*backbone.mlm_dense.parameters(), *backbone.mlm_layer_norm.parameters()]
            if (spec.predictor == "cls" or spec.decoupled_embedding) \
                    and backbone.mlm_decoder.bias is not None:
                unused.append(backbone.mlm_decoder.bias)
            for parameter in unused:
                parameter.requires_grad_(False)
        self.pass_token_type_ids = backbone.uses_token_type_ids
        if spec.predictor == "mlm":
            if class_token_ids is None:
                raise ValueError("prompt methods need the label words' token ids")
            self.head = PromptHead(spec, backbone, class_token_ids, detached=frozen)
        else:
            self.head = ClsHead(spec, backbone, num_classes)

    def hidden_at(self, input_ids, attention_mask, positions, token_type_ids=None) -> torch.Tensor:
        return encoder_hidden_at(self.mlm, input_ids, attention_mask, positions,
                                 token_type_ids if self.pass_token_type_ids else None)

    def forward(self, input_ids=None, attention_mask=None, positions=None, token_type_ids=None,
                hidden=None, calibrate: bool = False, full_vocabulary: bool = False
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(logits, features)`` from token inputs or, frozen, from cached ``hidden``
        states. ``calibrate`` applies eta-norm for methods that use it (the trainer sets it at
        evaluation only); ``full_vocabulary`` takes the straightforward prompt path."""
        if full_vocabulary and isinstance(self.head, PromptHead) and hidden is None:
            hidden_all = encoder_hidden_states(self.mlm, input_ids, attention_mask,
                                               token_type_ids if self.pass_token_type_ids else None)
            logits, features = self.head.full_vocabulary_logits(hidden_all, positions), None
        else:
            if hidden is None:
                hidden = self.hidden_at(input_ids, attention_mask, positions, token_type_ids)
            logits, features = self.head(hidden)
        if calibrate and self.spec.eta_norm:
            logits = eta_normalise(logits, self.class_weight_norms())
        return logits, features

    def class_weight_norms(self) -> torch.Tensor:
        """Per-class L2 norm of the predictor's rows (prompt: the averaged label-word rows)."""
        return self.head.class_weights().float().norm(dim=-1)

    def trained_module(self) -> nn.Module:
        """What a run saves: the whole model, or the head alone when the backbone is frozen."""
        return self.head if self.frozen else self


def encoder_hidden_states(mlm: nn.Module, input_ids, attention_mask, token_type_ids=None
                          ) -> torch.Tensor:
    """The encoder's last hidden states, (batch, length, hidden)."""
    kwargs = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
    return mlm.base_model(input_ids=input_ids, attention_mask=attention_mask,
                          **kwargs).last_hidden_state


def encoder_hidden_at(mlm: nn.Module, input_ids, attention_mask, positions, token_type_ids=None
                      ) -> torch.Tensor:
    """The encoder's last hidden state at one position per sequence."""
    hidden = encoder_hidden_states(mlm, input_ids, attention_mask, token_type_ids)
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), positions]


def label_word_token_ids(tokenizer, verbalizer: dict[str, list[str]], classes: list[str]
                         ) -> list[list[int]]:
    """Token ids of each class's label words; an out-of-vocabulary word is an error naming it."""
    unk = tokenizer.unk_token_id
    out, problems = [], []
    for name in classes:
        ids: list[int] = []
        for word in verbalizer[name]:
            word_ids = tokenizer(word, add_special_tokens=False)["input_ids"]
            if not word_ids or (unk is not None and unk in word_ids):
                problems.append(f"{name!r} -> {word!r}")
            ids.extend(word_ids)
        out.append(ids)
    if problems:
        raise GleeError(f"label word(s) not in the model's vocabulary: {', '.join(problems[:10])}"
                        " - give other words with --verbalizer FILE.json")
    return out


def build_model(spec: MethodSpec, backbone: Backbone, classes: list[str],
                verbalizer: dict[str, list[str]], frozen: bool = False) -> GleeModel:
    """Compose the method on ``backbone``. Fine-tuning, the model owns and trains the backbone's
    weights (pass a copy); ``frozen``, it is the head alone and the backbone stays untouched."""
    token_ids = None
    if spec.predictor == "mlm":
        token_ids = label_word_token_ids(backbone.tokenizer, verbalizer, classes)
    return GleeModel(spec, backbone, len(classes), token_ids, frozen=frozen)
