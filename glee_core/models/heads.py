"""The heads a method spec composes (:mod:`glee_core.models.methods` is the registry): CLS-tuning's
MLP, prompt-tuning's MLM head at ``[MASK]``, the linear probe; and the label words' token ids.
The losses are :mod:`glee_core.models.losses`'; the model that puts a head on a backbone is
:mod:`glee_core.models.model`'s.

``HEADS`` maps a spec's ``predictor`` to its head class; each head knows which parts of the
backbone's MLM head it leaves unused (so fine-tuning keeps them out of the optimiser).
"""

from __future__ import annotations

import copy
import hashlib
from typing import Protocol

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits
from torch import nn

from ..core.errors import GleeError, first_few
from .backbone import Backbone
from .methods import MethodSpec

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
        fit_probe(self, features, labels, num_classes)  # lbfgs takes no seed

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


def fit_probe(head: ProbeHead, features: np.ndarray, labels: np.ndarray, num_classes: int) -> None:
    """Fit scikit-learn's ``LogisticRegression`` (L2, lbfgs; ``class_weight="balanced"`` where
    the head's method is class-balanced) and copy its coefficients into ``head``: the head's
    logits are the classifier's ``decision_function``. A class absent from training gets a zero
    row and a -1e4 bias. No seed enters: lbfgs is deterministic, so another seed on the same
    features is the same fit, taken from the last few fits of this process
    (:data:`_PROBE_FITS`)."""
    class_balanced = head.class_balanced
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
