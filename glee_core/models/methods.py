"""The methods: the twelve of Glee (Zhang et al., EMNLP 2022, "Making Pretrained Language Models
Good Long-tailed Learners"), Tables 2 and 3, five long-tail fixes beyond the paper and two
logistic-regression probes (19 in all), as compositions of a few parts.

Every method is a backbone encoder, a position to read (``[CLS]`` or ``[MASK]``), a classifier
head, a loss and an optional evaluation-time calibration:

* CLS-tuning heads: ``Linear(h,h) -> act -> Dropout(0.1) [-> LayerNorm] -> Linear(h,C)``, with the
  activation Tanh (the usual BERT pooler) or ReLU, and the LayerNorm absent, fresh, or copied from
  the MLM head's transform ("pt. LN").
* The prompt head *is* the pretrained MLM head: its transform (dense + act + LayerNorm) and, as the
  predictor, the decoder rows of the verbalizer's label words. A label of several tokens scores the
  average of their logits, which equals one row: the average of their decoder rows.

``METHODS`` is the one registry the CLI, the app and the report list methods from. This module is
only the registry (no torch); the heads that a spec's ``predictor`` names live in
:mod:`glee_core.models.heads`. A 13th method is one line here, plus a head there if it needs a
new one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields, replace

from ..core.errors import GleeError
from .modes import get_mode
from .tuning import TuningMode

ETA = 1.1  # η-norm: a logit of class c divided by ||w_c|| ** ETA (the paper's value)


def eta_scale(norms, eta: float = ETA):
    """η-norm's divisor of each class's logit, ``||w_c|| ** eta`` (Zhang et al. 2022; the
    paper's calibration), from the predictor's row norms: numpy or torch alike. The one home of
    the formula: a run scoring (``heads.eta_normalise``), an export folding it into the predictor
    and post-hoc calibration at any η all divide by this."""
    return norms.clip(1e-12) ** eta


@dataclass(frozen=True)
class MethodSpec:
    """One row of the paper's tables, and what it is made of."""

    id: str
    paper_row: str
    input_format: str  # "plain": text as is, read [CLS]; "prompt": template, read [MASK]
    predictor: str  # the head family: "cls" (fresh MLP head) or "mlm" (MLM head + verbalizer)
    activation: str | None = None  # cls heads: "tanh" or "relu"
    norm: str | None = None  # cls heads: None, "fresh" or "pretrained" (the MLM head's LayerNorm)
    dropout: bool = True  # cls heads: Dropout(0.1) after the activation
    loss: str = "ce"  # "ce", "focal", "la" (logit-adjusted) or "cb" (class-balanced)
    eta_norm: bool = False
    decoupled_embedding: bool = False  # prompt-ed: untied copy of the embeddings as decoder
    group: str = "CLS-tuning"
    supports_frozen: bool = True  # can train as a head on cached features (quick mode)
    supports_finetune: bool = True  # can train with the whole model
    class_balanced: bool = False  # probes: class weights; heads: class-balanced batch sampling
    paper: bool = True  # a row of the paper's tables (baselines are not)

    @property
    def uses_mlm_head(self) -> bool:
        """Does the method start from weights of the MLM head (so a pretrained head matters)?"""
        return self.predictor == "mlm" or self.norm == "pretrained"

    def trains_in(self, mode: TuningMode) -> bool:
        """Can the method train in ``mode``? A closed-form probe or a classifier re-trained on
        frozen features (cRT) needs the cached features; the rest train either way."""
        return self.supports_frozen if mode.cached_features else self.supports_finetune

    def twin_in(self, mode: TuningMode) -> str | None:
        """The method this one is the same model as in ``mode``, or None: on a frozen backbone
        every prompt head already trains its own copy of the label-word rows, which is all
        "w/ ed." (``decoupled_embedding``) adds, so ``prompt-ed`` is ``prompt`` in quick mode
        (the paper lists both: its table tunes the whole model)."""
        if not (self.decoupled_embedding and mode.cached_features):
            return None
        plain = [
            m.id
            for m in METHODS.values()
            if m.id != self.id
            and replace(m, id=self.id, paper_row=self.paper_row, decoupled_embedding=True) == self
        ]
        return plain[0] if plain else None

    @property
    def label(self) -> str:
        """How every view names the method: the paper's row, then the id."""
        return f"{self.paper_row} ({self.id})"

    def to_dict(self) -> dict:
        return {**asdict(self), "uses_mlm_head": self.uses_mlm_head}

    def identity(self) -> dict:
        """What of the spec enters a run's id: its id, and any part that changed after runs of
        that id were stored (so those runs are not taken for the new method)."""
        return {"method": self.id, **({} if self.dropout else {"head_dropout": False})}

    @classmethod
    def from_dict(cls, values: dict) -> MethodSpec:
        """The registry's spec for a stored id; a spec no longer registered is rebuilt from the
        stored fields (unknown keys ignored), so old runs still load."""
        if not isinstance(values, dict):
            raise GleeError(f"a method is a mapping of its parts, not {type(values).__name__}")
        if values.get("id") in METHODS:
            return METHODS[values["id"]]
        known = {f.name for f in fields(cls)}
        for part, allowed in PARTS.items():
            if values.get(part) not in allowed:
                raise GleeError(
                    f"method {values.get('id')!r}: {part} {values.get(part)!r} is "
                    f"not one of {', '.join(map(str, allowed))}"
                )
        try:
            return cls(**{k: v for k, v in values.items() if k in known})
        except TypeError as exc:  # a required part missing
            raise GleeError(f"method {values.get('id')!r}: {exc}") from None


# What each part of a spec may be (the heads module builds one class or function per value);
# a stored spec no longer registered is checked against these before it is rebuilt.
PARTS = {
    "input_format": ("plain", "prompt"),
    "predictor": ("cls", "mlm", "probe"),
    "activation": (None, "tanh", "relu"),
    "norm": (None, "fresh", "pretrained"),
    "loss": ("ce", "focal", "la", "cb"),
}


BEYOND = "[beyond the paper]"  # in the label of every method that is not one of its rows


def _cls(id, row, act, **kw):
    return MethodSpec(id, row, kw.pop("input_format", "plain"), "cls", activation=act, **kw)


def _prompt(id, row, **kw):
    return MethodSpec(id, row, "prompt", "mlm", **{"group": "Prompt-tuning", **kw})


def _probe(id, row, **kw):
    """A baseline, not a paper row: scikit-learn logistic regression on the frozen backbone's
    pooled states (what a practitioner tries first), fitted in quick mode."""
    return MethodSpec(
        id,
        row,
        "plain",
        "probe",
        group="Baseline (not in the paper)",
        supports_finetune=False,
        paper=False,
        **kw,
    )


METHODS: dict[str, MethodSpec] = {
    m.id: m
    for m in (
        _cls("cls-tanh", "CLS-tuning ∘ T", "tanh"),
        _cls("cls-tanh-eta-norm", "CLS-tuning ∘ T w/ η-norm", "tanh", eta_norm=True),
        _cls("cls-tanh-focal", "CLS-tuning ∘ T w/ focal loss", "tanh", loss="focal"),
        _cls("cls-relu", "CLS-tuning ∘ R", "relu"),
        _cls("cls-relu-eta-norm", "CLS-tuning ∘ R w/ η-norm", "relu", eta_norm=True),
        _cls("cls-relu-focal", "CLS-tuning ∘ R w/ focal loss", "relu", loss="focal"),
        _cls("cls-relu-prompt", "CLS-tuning ∘ R w/ prompt", "relu", input_format="prompt"),
        _cls("cls-relu-ln", "CLS-tuning ∘ R w/ LN", "relu", norm="fresh"),
        # the authors' w/ pt. LN head has no dropout (models/cls_tuning_w_init_norm.py); w/ LN has
        _cls(
            "cls-relu-pt-ln", "CLS-tuning ∘ R w/ pt. LN", "relu", norm="pretrained", dropout=False
        ),
        _prompt("prompt", "Prompt-tuning"),
        _prompt("prompt-focal", "Prompt-tuning w/ focal loss", loss="focal"),
        _prompt("prompt-ed", "Prompt-tuning w/ ed.", decoupled_embedding=True),
        # beyond the paper: the long-tail losses on its strongest CLS head and on prompt-tuning
        _cls(
            "cls-relu-pt-ln-la",
            f"CLS-tuning ∘ R w/ pt. LN + logit-adjusted loss {BEYOND}",
            "relu",
            norm="pretrained",
            dropout=False,
            loss="la",
            paper=False,
            group=BEYOND,
        ),
        _cls(
            "cls-relu-pt-ln-cb",
            f"CLS-tuning ∘ R w/ pt. LN + class-balanced loss {BEYOND}",
            "relu",
            norm="pretrained",
            dropout=False,
            loss="cb",
            paper=False,
            group=BEYOND,
        ),
        # cRT (Kang et al. 2020): the classifier re-trained on frozen features, classes sampled
        # equally often
        _cls(
            "cls-relu-pt-ln-crt",
            f"CLS-tuning ∘ R w/ pt. LN, classifier re-training {BEYOND}",
            "relu",
            norm="pretrained",
            dropout=False,
            class_balanced=True,
            paper=False,
            supports_finetune=False,
            group=BEYOND,
        ),
        _prompt(
            "prompt-la",
            f"Prompt-tuning + logit-adjusted loss {BEYOND}",
            loss="la",
            paper=False,
            group=BEYOND,
        ),
        _prompt(
            "prompt-cb",
            f"Prompt-tuning + class-balanced loss {BEYOND}",
            loss="cb",
            paper=False,
            group=BEYOND,
        ),
        _probe("probe", "Linear probe [baseline]"),
        _probe("probe-balanced", "Linear probe, class-balanced [baseline]", class_balanced=True),
    )
}


def get_method(method_id: str) -> MethodSpec:
    try:
        return METHODS[method_id]
    except KeyError:
        raise GleeError(
            f"unknown method {method_id!r}; choose from {', '.join(METHODS)} "
            "(python -m glee_core methods)"
        ) from None


def parse_methods(value: str, mode: str = "frozen") -> list[MethodSpec]:
    """``"prompt,cls-relu-pt-ln"`` or ``"all"`` (every method that trains in ``mode``: the
    baselines fit on a frozen backbone only) -> specs."""
    if value.strip() == "all":
        return [m for m in METHODS.values() if m.trains_in(get_mode(mode))]
    ids = [v.strip() for v in value.split(",") if v.strip()]
    if not ids:
        raise GleeError("no method given; e.g. --method prompt,cls-relu-pt-ln (or all)")
    return [get_method(i) for i in ids]


def method_label(method_id: str) -> str:
    """``paper row (id)`` for a registered method; the bare id for one no longer registered."""
    return METHODS[method_id].label if method_id in METHODS else method_id


def registry_order(method_ids: Iterable[str]) -> list[str]:
    """The distinct ids in the registry's (the paper's row) order; unregistered ones last."""
    present = set(method_ids)
    return [m for m in METHODS if m in present] + sorted(present - set(METHODS))
