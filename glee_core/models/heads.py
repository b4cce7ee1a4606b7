"""The heads a method spec composes (:mod:`glee_core.models.methods` is the registry), its
losses and calibration, and the model that puts a head on a backbone.

``HEADS`` maps a spec's ``predictor`` to its head class; each head knows which parts of the
backbone's MLM head it leaves unused (so fine-tuning keeps them out of the optimiser).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import warnings
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
from safetensors.torch import load_file, load_model, save_file, save_model
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits
from torch import nn
from torch.nn import functional as F

from ..core.errors import GleeError, first_few
from .backbone import Backbone, trained_pooling
from .config import POOLINGS, TrainConfig
from .methods import ETA, MethodSpec, eta_scale

FOCAL_GAMMA = 1.0  # the paper's gamma


# --------------------------------------------------------------------------------------------
# Losses and calibration


def focal_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    counts: torch.Tensor | None = None,
    gamma: float = FOCAL_GAMMA,
) -> torch.Tensor:
    """Mean of ``-(1 - p_t) ** gamma * log p_t`` (Lin et al., 2017)."""
    log_p = F.log_softmax(logits.float(), dim=-1).gather(1, labels[:, None]).squeeze(1)
    return (-((1.0 - log_p.exp()) ** gamma) * log_p).mean()


def cross_entropy(
    logits: torch.Tensor, labels: torch.Tensor, counts: torch.Tensor | None = None
) -> torch.Tensor:
    return F.cross_entropy(logits.float(), labels)


LA_TAU = 1.0  # logit-adjusted loss, Menon et al. 2021's default
CB_BETA = 0.9999  # class-balanced loss, Cui et al. 2019's choice for long tails


def logit_adjusted_loss(
    logits: torch.Tensor, labels: torch.Tensor, counts: torch.Tensor, tau: float = LA_TAU
) -> torch.Tensor:
    """Menon et al., "Long-tail learning via logit adjustment" (ICLR 2021): cross-entropy of
    ``logits + tau * log(prior)``; at test time the plain logits are used."""
    prior = counts.float() / counts.sum()
    return F.cross_entropy(logits.float() + tau * torch.log(prior.clamp_min(1e-12)), labels)


def class_balanced_loss(
    logits: torch.Tensor, labels: torch.Tensor, counts: torch.Tensor, beta: float = CB_BETA
) -> torch.Tensor:
    """Cui et al., "Class-balanced loss based on effective number of samples" (CVPR 2019):
    cross-entropy weighted per class by ``(1 - beta) / (1 - beta ** n_c)``, normalised to sum to
    the number of classes."""
    return F.cross_entropy(logits.float(), labels, weight=class_balanced_weights(counts, beta))


def class_balanced_weights(counts: torch.Tensor, beta: float = CB_BETA) -> torch.Tensor:
    """Cui et al.'s per-class weights, ``(1 - beta) / (1 - beta ** n_c)`` summing to C."""
    effective = (1.0 - beta ** counts.double()).clamp_min(1e-12)
    weight = (1.0 - beta) / effective
    return (weight / weight.sum() * len(counts)).float()


# MethodSpec.loss -> loss function (logits, labels, training class counts)
LOSSES = {
    "ce": cross_entropy,
    "focal": focal_loss,
    "la": logit_adjusted_loss,
    "cb": class_balanced_loss,
}


def classification_loss(
    spec: MethodSpec, logits: torch.Tensor, labels: torch.Tensor, counts: torch.Tensor | None = None
) -> torch.Tensor:
    """The method's loss; ``counts`` (training examples per class) for the long-tail losses."""
    return LOSSES[spec.loss](logits, labels, counts)


def loss_share(
    spec: MethodSpec, part: torch.Tensor, whole: torch.Tensor, counts: torch.Tensor | None = None
) -> float:
    """The weight of a piece's mean loss in its batch's mean loss (micro-batching): its share of
    the examples, or for the class-balanced loss (a weighted mean) its share of the weights."""
    if spec.loss == "cb":
        weight = class_balanced_weights(counts).to(part.device)
        return float(weight[part].sum() / weight[whole].sum())
    return len(part) / len(whole)


def eta_normalise(
    logits: torch.Tensor, class_weight_norms: torch.Tensor, eta: float = ETA
) -> torch.Tensor:
    """η-norm calibration: logits of class c divided by :func:`~.methods.eta_scale` (the norms
    in the logits' precision)."""
    return logits / eta_scale(class_weight_norms.to(logits.dtype), eta)


# --------------------------------------------------------------------------------------------
# Heads. Each returns (logits, features): features are the classifier's input, what the paper's
# Figure 4 histograms.


class Head(Protocol):
    """What a head is to the rest of Glee Studio (the trainer, the scorer, the exporter and the
    charts ask it, never its class or the method's predictor name); :data:`HEADS` maps each
    ``MethodSpec.predictor`` to a class that is one, ``tests/test_methods.py`` checks it.

    ``closed_form``: fitted once on cached features by ``fit_closed_form(features, labels,
    num_classes, seed)`` (a probe), else trained by gradient steps and, for LP-FT, warm-started
    from a frozen fit's weights by ``warm_start(fitted)``; ``verbalizer``: its scores are label
    words at ``[MASK]`` (the vocabulary must hold them), not classes."""

    closed_form: bool
    verbalizer: bool

    def __init__(
        self,
        spec: MethodSpec,
        backbone: Backbone,
        classes: list[str],
        verbalizer: dict[str, list[str]],
        detached: bool = False,
    ) -> None: ...

    @staticmethod
    def unused_backbone_parameters(spec: MethodSpec, backbone: Backbone) -> list[nn.Parameter]:
        """The backbone's parameters the method never reads (frozen, left out of the
        optimiser)."""
        ...

    def forward(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(logits, the classifier's input features) of the pooled or ``[MASK]`` states."""
        ...

    def class_weights(self) -> torch.Tensor:
        """One row a class: the rows whose norms Figure 3 draws and η-norm divides by."""
        ...

    def linear_predictor(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(W, b) with ``logits = features @ W.T + b``: post-hoc calibration and the export."""
        ...


ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}


class ClsHead(nn.Module):
    """``Linear(h,h) -> act -> Dropout -> [LayerNorm] -> Linear(h,C)`` on one hidden state."""

    closed_form = False  # trained by gradient steps (a probe is fitted in closed form)
    verbalizer = False  # scores classes, not label words at [MASK]

    def __init__(
        self,
        spec: MethodSpec,
        backbone: Backbone,
        classes: list[str],
        verbalizer: dict[str, list[str]],
        detached: bool = False,
    ):
        super().__init__()
        h = backbone.hidden_size
        self.dense = nn.Linear(h, h)
        self.activation = ACTIVATIONS[spec.activation]()
        self.dropout = nn.Dropout(0.1) if spec.dropout else nn.Identity()
        if spec.norm is None:
            self.norm = nn.Identity()
        else:
            source = backbone.mlm_layer_norm
            self.norm = nn.LayerNorm(h, eps=source.eps)
            if spec.norm == "pretrained":  # w/ pt. LN: start from the MLM head's LayerNorm
                self.norm.load_state_dict(source.state_dict())
        self.predictor = nn.Linear(h, len(classes))

    @staticmethod
    def unused_backbone_parameters(spec: MethodSpec, backbone: Backbone) -> list[nn.Parameter]:
        """The MLM head's transform and decoder bias: a CLS head never reads them."""
        unused = [*backbone.mlm_dense.parameters(), *backbone.mlm_layer_norm.parameters()]
        return unused + (
            [backbone.mlm_decoder.bias] if backbone.mlm_decoder.bias is not None else []
        )

    def forward(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.norm(self.dropout(self.activation(self.dense(hidden))))
        return self.predictor(features), features

    def warm_start(self, fitted: dict[str, torch.Tensor]) -> None:
        """LP-FT: take every weight of the same head fitted on the frozen features."""
        self.load_state_dict(fitted)

    def class_weights(self) -> torch.Tensor:
        return self.predictor.weight

    def linear_predictor(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(W, b)``: the head's logits are ``features @ W.T + b`` (before any calibration)."""
        return self.predictor.weight, self.predictor.bias


class PromptHead(nn.Module):
    """The pretrained MLM head, scoring only the verbalizer's label-word tokens.

    ``label_token_ids`` holds every token of every label word (T of them); ``averaging`` (C x T)
    averages a class's tokens. Rather than the full vocabulary (V columns) it gathers the T decoder
    rows and builds one weight row per class, so the step costs O(C h) instead of O(V h).

    ``own_weights`` (w/ ed., and every prompt method on a frozen backbone) gives the head its own
    copies of the decoder's label-word rows and bias instead of the rows tied to the embeddings;
    ``detached`` (frozen backbone) also copies the transform, so the backbone is never changed."""

    closed_form = False
    verbalizer = True  # its scores are the label words' at [MASK]: the vocabulary must hold them

    def __init__(
        self,
        spec: MethodSpec,
        backbone: Backbone,
        classes: list[str],
        verbalizer: dict[str, list[str]],
        detached: bool = False,
    ):
        super().__init__()
        class_token_ids = label_word_token_ids(backbone.tokenizer, verbalizer, classes)
        # detached: the head's own copies, trainable whatever the backbone's parts are set to (a
        # parameter-efficient mode freezes the backbone before the head is built)
        share = (lambda m: copy.deepcopy(m).requires_grad_(True)) if detached else (lambda m: m)
        self.dense = share(backbone.mlm_dense)  # shared: trained with, and saved in, the backbone
        self.layer_norm = share(backbone.mlm_layer_norm)
        self._activation = share(backbone.mlm_activation)
        flat = [t for ids in class_token_ids for t in ids]
        averaging = torch.zeros(len(class_token_ids), len(flat))
        col = 0
        for c, ids in enumerate(class_token_ids):
            averaging[c, col : col + len(ids)] = 1.0 / len(ids)
            col += len(ids)
        self.register_buffer("label_token_ids", torch.tensor(flat, dtype=torch.long))
        self.register_buffer("averaging", averaging)
        decoder = backbone.mlm_decoder
        self.own_weights = spec.decoupled_embedding or detached
        if self.own_weights:
            # w/ ed.: an untied, separately trained copy of the input embeddings. Only label-word
            # rows ever reach the loss, so copying those rows is the same model as copying all.
            ids = self.label_token_ids
            rows = backbone.word_embeddings.weight.detach()[ids].clone()
            self.decoupled_rows = nn.Parameter(rows)
            bias = (
                decoder.bias.detach()[ids].clone()
                if decoder.bias is not None
                else torch.zeros(len(flat))
            )
            self.decoupled_bias = nn.Parameter(bias)
        else:
            self.decoder = decoder

    def freeze_label_words(self) -> None:
        """Keep the pretrained label-word rows and bias as they are (a parameter-efficient mode:
        P-tuning v2's frozen decoder); the transform still trains."""
        if self.own_weights:
            self.decoupled_rows.requires_grad_(False)
            self.decoupled_bias.requires_grad_(False)

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

    def warm_start(self, fitted: dict[str, torch.Tensor]) -> None:
        """LP-FT: start from the same method's head fitted on the frozen features (which has its
        own label-word rows). A head with its own rows (w/ ed.) takes every weight; a head whose
        rows are the tied word embeddings takes the transform and the label words' decoder bias,
        and keeps the pretrained rows (they are the input embeddings too)."""
        if not torch.equal(fitted["label_token_ids"].cpu(), self.label_token_ids.cpu()):
            raise GleeError("LP-FT: the frozen-fit head scores other label words than this run")
        if self.own_weights:
            self.load_state_dict(fitted)
            return
        with torch.no_grad():
            for name in ("dense", "layer_norm"):
                part = getattr(self, name)
                part.load_state_dict(
                    {k.split(".", 1)[1]: v for k, v in fitted.items() if k.startswith(f"{name}.")}
                )
            if self.decoder.bias is not None:
                self.decoder.bias[self.label_token_ids] = fitted["decoupled_bias"].to(
                    self.decoder.bias.dtype
                )

    def class_weights(self) -> torch.Tensor:
        return self.averaging @ self.token_rows()

    def linear_predictor(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(W, b)``: the averaged label-word rows and their averaged bias."""
        return self.class_weights(), self.averaging @ self.token_bias()

    def forward(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.transform(hidden)
        weight = self.class_weights().to(features.dtype)
        bias = (self.averaging @ self.token_bias()).to(features.dtype)
        return features @ weight.T + bias, features

    @staticmethod
    def unused_backbone_parameters(spec: MethodSpec, backbone: Backbone) -> list[nn.Parameter]:
        """w/ ed. trains its own decoder rows and bias, so the tied decoder's bias is unused."""
        bias = backbone.mlm_decoder.bias
        return [bias] if spec.decoupled_embedding and bias is not None else []


class ProbeHead(nn.Module):
    """A linear classifier on the pooled state, fitted by scikit-learn's logistic regression
    (:func:`fit_probe`), not by gradient steps: the baseline a practitioner tries first."""

    closed_form = True  # fitted once by fit_closed_form, no epochs, no fine-tuning
    verbalizer = False

    def __init__(
        self,
        spec: MethodSpec,
        backbone: Backbone,
        classes: list[str],
        verbalizer: dict[str, list[str]],
        detached: bool = False,
    ):
        super().__init__()
        self.predictor = nn.Linear(backbone.hidden_size, len(classes))
        self.class_balanced = spec.class_balanced

    unused_backbone_parameters = staticmethod(ClsHead.unused_backbone_parameters)

    def fit_closed_form(
        self, features: np.ndarray, labels: np.ndarray, num_classes: int, seed: int
    ) -> None:
        fit_probe(self, features, labels, num_classes, self.class_balanced, seed)

    def forward(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.predictor(hidden), hidden

    def class_weights(self) -> torch.Tensor:
        return self.predictor.weight

    linear_predictor = ClsHead.linear_predictor


# A probe's fit is a function of its features and labels alone (lbfgs takes no seed), so the
# seeds of a quick compare, which share the frozen features, share one fit: the last few fits
# are kept in the process, keyed by a digest of what they were fitted on.
_PROBE_FITS: dict[str, tuple[np.ndarray, np.ndarray]] = {}
PROBE_FITS_KEPT = 4


def _probe_key(
    features: np.ndarray, labels: np.ndarray, num_classes: int, class_balanced: bool
) -> str:
    digest = hashlib.blake2b(digest_size=16)
    for array in (features, labels):
        array = np.ascontiguousarray(array)
        digest.update(f"{array.dtype}{array.shape}".encode())
        digest.update(memoryview(array).cast("B"))
    digest.update(f"{num_classes}{class_balanced}".encode())
    return digest.hexdigest()


def probe_classifier(
    features: np.ndarray, labels: np.ndarray, class_balanced: bool
) -> LogisticRegression:
    """The probes' classifier fitted: scikit-learn's ``LogisticRegression`` (L2, lbfgs;
    ``class_weight="balanced"`` when asked), on one BLAS thread: lbfgs's products here are
    small, and a pool of threads spends more time waking than working on them (BENCHMARKS.md,
    "GPU check, second machine")."""
    clf = LogisticRegression(
        solver="lbfgs", max_iter=2000, class_weight="balanced" if class_balanced else None
    )
    with threadpool_limits(limits=1, user_api="blas"):
        return clf.fit(features, labels)


def fit_probe(
    head: ProbeHead,
    features: np.ndarray,
    labels: np.ndarray,
    num_classes: int,
    class_balanced: bool,
    seed: int,
) -> None:
    """Fit scikit-learn's ``LogisticRegression`` (L2, lbfgs; ``class_weight="balanced"`` when
    asked) and copy its coefficients into ``head``: the head's logits are the classifier's
    ``decision_function``. A class absent from training gets a zero row and a -1e4 bias.
    ``seed`` does not enter: lbfgs is deterministic, so another seed on the same features is
    the same fit, taken from the last few fits of this process (:data:`_PROBE_FITS`)."""
    key = _probe_key(features, labels, num_classes, class_balanced)
    if key not in _PROBE_FITS:
        clf = probe_classifier(features, labels, class_balanced)
        weight = np.zeros((num_classes, features.shape[1]), dtype=np.float32)
        bias = np.full(num_classes, -1e4, dtype=np.float32)
        coef, intercept = clf.coef_, clf.intercept_
        if len(clf.classes_) == 2:  # scikit-learn keeps one row for two classes
            coef, intercept = (
                np.vstack([-coef, coef]) / 2,
                np.array([-intercept[0], intercept[0]]) / 2,
            )
        weight[clf.classes_] = coef
        bias[clf.classes_] = intercept
        while len(_PROBE_FITS) >= PROBE_FITS_KEPT:
            _PROBE_FITS.pop(next(iter(_PROBE_FITS)))  # the oldest
        _PROBE_FITS[key] = weight, bias
    weight, bias = _PROBE_FITS[key]
    with torch.no_grad():
        head.predictor.weight.copy_(torch.from_numpy(weight))
        head.predictor.bias.copy_(torch.from_numpy(bias))


HEADS: dict[str, type[Head]] = {"cls": ClsHead, "mlm": PromptHead, "probe": ProbeHead}


def head_of(spec: MethodSpec) -> type[Head]:
    """The head class a method composes: the trainer, the scorer and the exporter ask it how it
    fits (``closed_form``) and what it scores (``verbalizer``), never the predictor's name."""
    return HEADS[spec.predictor]


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

    def tuning_record(self) -> dict:
        """What a run records of what it trained: the trainable parameters and, LoRA, the
        modules peft adapted (its default for the model type when none were named)."""
        record = {"trainable_parameters": self.trainable_parameters()}
        if self.adapter is not None:
            targets = getattr(self.adapter.peft_config["default"], "target_modules", None)
            if targets:
                record["adapted_modules"] = sorted(targets)
        return record

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


def label_word_token_ids(
    tokenizer, verbalizer: dict[str, list[str]], classes: list[str]
) -> list[list[int]]:
    """Token ids of each class's label words; an out-of-vocabulary word is an error naming it."""
    ids, problems = label_word_ids(tokenizer, verbalizer, classes)
    if problems:
        raise GleeError(
            f"label word(s) not in the model's vocabulary: "
            f"{first_few(problems, 10)} - give other words with --verbalizer "
            "FILE.json (in the app: the Data page's Label words)"
        )
    return ids


def unreadable_label_words(
    tokenizer, verbalizer: dict[str, list[str]], classes: list[str]
) -> list[str]:
    """The label words the tokenizer's vocabulary cannot read, as ``'class' -> 'word'``."""
    return label_word_ids(tokenizer, verbalizer, classes)[1]


def label_word_ids(
    tokenizer, verbalizer: dict[str, list[str]], classes: list[str]
) -> tuple[list[list[int]], list[str]]:
    """Each class's label-word token ids, and the words the vocabulary cannot read (as
    ``'class' -> 'word'``), from one batched tokenizer call."""
    unk = tokenizer.unk_token_id
    pairs = [(name, word) for name in classes for word in verbalizer[name]]
    # one batched call: 20,000 words one by one took 12 s in the web process
    encoded = (
        tokenizer([word for _, word in pairs], add_special_tokens=False)["input_ids"]
        if pairs
        else []
    )
    by_class: dict[str, list[int]] = {name: [] for name in classes}
    problems = []
    for (name, word), word_ids in zip(pairs, encoded, strict=True):
        if not word_ids or (unk is not None and unk in word_ids):
            problems.append(f"{name!r} -> {word!r}")
        by_class[name].extend(word_ids)
    return [by_class[name] for name in classes], problems


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
