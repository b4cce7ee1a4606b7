"""Every option of a run, declared once: a dataclass field with its help text.

``TrainConfig`` (the hyper-parameters, defaults: the paper's) and ``DataOptions`` (which dataset
and how to read it) are the single declaration of each knob. The command line's flags are derived
from their fields (:func:`add_arguments`), the app fills the same dataclasses, and a launch from
the app is a :class:`TrainRequest` written as JSON, not a rebuilt argument list.

The module imports neither torch nor pandas, so ``python -m glee_core --help`` stays fast.
(transformers' ``HfArgumentParser`` derives flags the same way, but importing it costs ~1.7 s.)
"""

from __future__ import annotations

import argparse
import json
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..core.environment import AUTO_MODEL
from ..core.errors import GleeError
from ..core.files import write_json_atomic
from ..data.sources import SOURCES
from .methods import get_method
from .modes import LORA_ALPHA, LORA_DROPOUT, LORA_R, MODES, PREFIX_LENGTH, TuningMode, get_mode

DEFAULT_EPOCHS = 10  # the paper's
PAPER, PRACTICAL = "paper", "practical"
LIMIT_STRATEGIES = ("stratified", "first")
RECIPES = (PRACTICAL, PAPER)
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
PRECISION_HELP = ("auto: bf16 autocast on GPUs and CPUs that do bf16 natively, fp16 with a "
                  "gradient scaler on older GPUs, else fp32")


@dataclass(frozen=True)
class Recipe:
    """What a fine-tuning recipe fills in where the user left a switch unset (``TrainConfig``'s
    ``None``). ``paper`` is the authors' scripts exactly; ``practical`` is what a user's small,
    long-tailed data needs, each value chosen by the sweep in BENCHMARKS.md
    (``bench/recipe_sweep.py``)."""

    search_lr: bool  # choose the rate on dev among the mode's candidates (else its one rate)
    lr_search: str | None  # each (every run searches) or once (for the backbone and data)
    lp_ft: bool
    head_lr: float | None  # None: the model's rate
    min_steps: int | None
    patience: int  # early stopping: dev evaluations without a gain


# How the app names the recipes, and the one line it says about each (the Train page)
RECIPE_LABELS = {PRACTICAL: "Practical (for your data)", PAPER: "Paper (to reproduce it)"}
RECIPE_LINES = {
    PRACTICAL: "Practical: the learning rate is chosen on dev among a few (successive halving: "
               "the better half of the rates goes on after each short round), the head is first "
               "fitted on the frozen features (LP-FT), and small data trains at least 300 "
               "optimizer steps; early stopping on dev after 4 evaluations without a gain. The "
               "test split is never read.",
    PAPER: "Paper: the authors' scripts exactly: one learning rate (1e-5), a fresh head, "
           "10 epochs with early stopping on dev. What `reproduce` uses; on a few hundred "
           "texts it may learn little.",
}
RECIPE_DEFAULTS = {
    PAPER: Recipe(search_lr=False, lr_search=None, lp_ft=False, head_lr=None, min_steps=None,
                  patience=2),
    # small dev sets are noisy: more patience, so a dip does not end a run that is still rising;
    # the rate searched once for the backbone and data (bench/recipe_sweep.py: a search per
    # head bought no F1, BENCHMARKS.md "The fine-tuning recipe")
    PRACTICAL: Recipe(search_lr=True, lr_search="once", lp_ft=True, head_lr=None, min_steps=300,
                      patience=4),
}


def recipe_rates(recipe: str, mode: str) -> tuple[float, tuple[float, ...] | None]:
    """The one rate and the candidates searched on dev that ``recipe`` gives ``mode`` (the
    candidates None: no search). Quick mode has its own protocol: one rate."""
    tuning = get_mode(mode)
    search = RECIPE_DEFAULTS[recipe].search_lr and not tuning.cached_features
    return tuning.lr, tuning.lr_candidates if search else None


SEED_MAX = 2**32 - 1  # what NumPy's generators accept
POOLINGS = ("cls", "mean")  # what a plain-input head can read (heads.pool computes each)
AUTO_POOLING, ALL_POOLINGS = "auto", "all"
CHOOSE_BY = ("auto", "dev", "cv")
LR_SEARCHES = ("each", "once")
HEAD_RACES = ("each", "best")
TUNED_MODES = tuple(name for name, mode in MODES.items() if not mode.cached_features)
CV_FOLDS = 5


def option(default: Any, help: str, *, choices: tuple | None = None,
           flag: str | tuple[str, ...] | None = None,
           cli: bool = True, protocol: str | None = None, finetune_only: bool = False,
           modes: tuple[str, ...] | None = None, **kwargs) -> Any:
    """A dataclass field carrying what the command line needs: help, choices, flag name.

    ``protocol`` is how the value reads in a run's protocol line (``"{} ep"``) when it departs
    from the default (or always, for the fields every protocol line shows); ``finetune_only``
    fields mean nothing to quick mode, whose protocol lines leave them out; ``modes`` names the
    only modes a field applies to (given with another, it is an error; their protocol lines
    always show it)."""
    meta = {"help": help, "choices": choices, "flag": flag, "cli": cli, "protocol": protocol,
            "finetune_only": finetune_only, "modes": modes}
    if callable(default):
        return field(default_factory=default, metadata=meta, **kwargs)
    return field(default=default, metadata=meta, **kwargs)


@dataclass
class TrainConfig:
    """Hyper-parameters of a run: the paper's protocol, or the practical recipe's where the
    user leaves a switch unset (see :class:`Recipe`)."""

    recipe: str = option(
        PRACTICAL, "fine-tuning recipe: practical (the learning rate chosen on dev, the head "
        "first fitted on the frozen features (LP-FT), a floor on optimizer steps for small data: "
        "what a user's data needs) or paper (the authors' scripts exactly: one rate, 1e-5, a "
        "fresh head; what reproduce uses). Each switch below overrides it. Quick mode (--mode "
        "frozen) has its own protocol", choices=RECIPES, protocol="{} recipe", finetune_only=True)
    epochs: int | None = option(None, "training epochs (default 10, the paper's; given, exactly "
                                "that many: the practical recipe's floor on steps applies to the "
                                "default only)", protocol="{} ep")
    batch_size: int | None = option(32, "batch size (default 32; the few-shot sets use 2)",
                                    protocol="bs {}")
    lr: float | None = option(None, "learning rate; given, it turns the search off (default: "
                              "practical recipe: chosen on dev; paper: "
                              + ", ".join(f"{m.lr:g} {m.name}" for m in MODES.values()) + ")",
                              protocol="lr {:g}")
    lr_candidates: str | None = option(
        None, "learning rates tried on dev, comma-separated: each trains a short budget from the "
        "same start, the better half continues (successive halving) until one is left, which "
        "trains on; the test split is never read (default: practical recipe: "
        + "; ".join(f"{m.name} {','.join(f'{r:g}' for r in m.lr_candidates)}"
                    for m in MODES.values() if m.lr_candidates) + "; paper: none)",
        protocol="lr chosen on dev from {}")
    lr_search: str | None = option(
        None, "with a learning-rate search: each (every head and seed searches its own rate) or "
        "once (the first run's search chooses the rate for the backbone and data; the other "
        "heads and seeds of them train at it, and say whose search chose it) (default: "
        "practical recipe once)", choices=LR_SEARCHES, protocol="rate searched {}",
        finetune_only=True)
    head_lr: float | None = option(None, "the head's own learning rate (an AdamW parameter "
                                   "group; the encoder keeps --lr) (default: the model's rate)",
                                   protocol="head lr {:g}", finetune_only=True)
    layer_decay: float | None = option(
        None, "layer-wise learning-rate decay: encoder layer l of L trains at lr x "
        "decay^(L+1-l), the embeddings at lr x decay^(L+1) (default: off)",
        protocol="layer decay {:g}", finetune_only=True)
    lp_ft: bool | None = option(
        None, "LP-FT (Kumar et al. 2022): fit the head on the frozen backbone's features first "
        "(quick mode's run, re-used from the store when it holds it), then train from that "
        "head in the mode chosen (the whole model, or its LoRA / prefix weights): yes/no "
        "(default: practical recipe yes, paper no)",
        protocol="LP-FT", finetune_only=True)
    min_steps: int | None = option(
        None, "a floor on optimizer steps: small data trains for more epochs (early stopping on "
        "dev still ends it) (default: practical recipe 300 unless --epochs is given, paper none)",
        protocol="≥ {} steps")
    max_length: int | None = option(None, "max tokens per example (default: the dataset's, the "
                                    "paper's per-dataset length)", protocol="len {}")
    limit: int | None = option(None, "train on N of the training examples (small or smoke "
                               "runs; how they are picked: --limit-strategy)",
                               protocol="limit {} train")
    limit_strategy: str | None = option(
        None, "how --limit picks its examples: stratified (every class keeps its share, at "
        "least one example each, drawn with a fixed seed: the same for every run) or first (the "
        "first N rows) (default: stratified; first under --recipe paper, as the authors' "
        "scripts and runs stored before this option)", choices=LIMIT_STRATEGIES,
        protocol="{} limit")
    patience: int | None = option(None, "early stopping: dev evaluations (epochs) without a "
                                  "gain (default: paper recipe and quick mode 2, practical 4)",
                                  protocol="patience {}")
    weight_decay: float = option(0.0, "AdamW weight decay", protocol="wd {:g}")
    warmup_ratio: float = option(0.1, "share of steps with linear warm-up",
                                 protocol="warm-up {:g}")
    max_grad_norm: float = option(1.0, "gradient norm clipping", protocol="clip {:g}")
    eval_every_steps: int | None = option(
        None, "score dev every N optimizer steps, keep the best step's weights and stop after "
        "patience x steps-per-epoch steps without a gain (the released scripts' --log_interval: "
        "100, 1000 for msra, 1 few-shot); default: after every epoch",
        protocol="dev every {} steps")
    select_metric: str = option("f1", "dev metric for early stopping and the kept weights: "
                                "macro-F1 (the paper's long-tailed runs) or accuracy (its "
                                "few-shot runs)", choices=("f1", "acc"),
                                protocol="select on dev {}")
    pooling: str = option(AUTO_POOLING, "what a plain-input head reads: cls (the [CLS] state, "
                          "the paper's), mean (the mean of the token states, what sentence "
                          "encoders such as the offline MiniLM were trained for), all (a run of "
                          "each) or auto (quick mode: all, one encoder pass gives both and the "
                          "compare chooses; fine-tuning: the pooling a sentence-transformers "
                          "checkpoint declares it was trained with, else cls; the paper recipe: "
                          "cls)", choices=(AUTO_POOLING, ALL_POOLINGS, *POOLINGS),
                          protocol="{} pooling")
    choose_by: str | None = option(
        None, "how the heads of a quick compare are told apart: dev (each head's best dev score), "
        "cv (k-fold cross-validation on train + dev over the cached features: every text scored "
        "once, by a head that never trained on it) or auto (cv where dev is small for its "
        "classes: a class with fewer than 5 dev texts, or fewer than 20 a class on average) "
        "(default auto)", choices=CHOOSE_BY, modes=("frozen",))
    cv_folds: int | None = option(None, f"folds of that cross-validation (default {CV_FOLDS})",
                                  modes=("frozen",))
    heads: str | None = option(
        None, "several heads of one launch, tuned: each (every head trains to the end, a run "
        "each) or best (they race at one rate, the rate searched once: every round the better "
        "half on dev goes on, the last trains to the end and is the one run stored, its record "
        "holding the others' dev scores; about half the time of each) (default each)",
        choices=HEAD_RACES, modes=TUNED_MODES)
    mode: str = option("finetune", "; ".join(f"{m.name}: {m.help}" for m in MODES.values()),
                       choices=tuple(MODES), flag=("--mode", "--backbone"))
    lora_r: int | None = option(None, f"LoRA's rank (default {LORA_R}, the LoRA paper's)",
                                protocol="LoRA r {}", modes=("lora",))
    lora_alpha: int | None = option(None, f"LoRA's scaling alpha (default {LORA_ALPHA})",
                                    protocol="alpha {}", modes=("lora",))
    lora_dropout: float | None = option(None, f"dropout on LoRA's input (default {LORA_DROPOUT})",
                                        protocol="LoRA dropout {:g}", modes=("lora",))
    lora_targets: str | None = option(
        None, "the modules LoRA adapts, comma-separated names (default: peft's for the model "
        "type: the attention's query and value for BERT)", protocol="on {}", modes=("lora",))
    prefix_length: int | None = option(
        None, f"P-tuning v2's prefix: virtual tokens per layer (default {PREFIX_LENGTH})",
        protocol="prefix {}", modes=("ptuning2",))
    seed: int = option(1, "random seed", cli=False)
    precision: str = option("auto", PRECISION_HELP, choices=PRECISIONS)
    pad_multiple: int | None = option(
        None, "pad each batch to a multiple of this many tokens (at most max length); default: "
        "64 on a GPU (few tensor shapes), each batch's own longest text on a CPU")
    compile: bool = option(False, "compile the model with torch.compile (on a GPU, after a "
                           "warm-up of about a minute per batch shape)")
    device: str = option("auto", "auto, cpu or cuda")
    eval_batch_size: int | None = option(
        None, "texts scored at once; default: 128 on a GPU, 32 on a CPU (faster there)")
    micro_batch_size: int | None = option(
        None, "run each training batch's forward and backward passes in pieces of this many "
        "examples and step once: the same update with less memory (activations grow with batch "
        "x length^2 at long lengths; on a CPU with glibc, large blocks are also handed back to "
        "the system as soon as they are freed); default: the whole batch at once")
    log_every: int = option(20, "read the loss back every N steps", cli=False)

    # Fields that do not change a run's result, so stay out of its identity (and run id).
    NOT_IDENTITY = ("device", "eval_batch_size", "log_every", "precision", "micro_batch_size",
                    "pad_multiple", "compile", "choose_by", "cv_folds", "heads")
    # Fields added after runs were stored, with the value those runs had: left out of the
    # identity at that value, so their run ids stay as they were, and filled in when read back.
    ADDED_LATER = {"select_metric": "f1", "eval_every_steps": None, "pooling": "cls",
                   "recipe": PAPER, "lr_candidates": None, "head_lr": None, "layer_decay": None,
                   "lp_ft": False, "min_steps": None, "limit_strategy": "first", "lora_r": None,
                   "lora_alpha": None, "lora_dropout": None, "lora_targets": None,
                   "prefix_length": None, "lr_search": None}
    # The paper's values of the fields a protocol line names only when they depart from them
    PAPER_VALUES = {**ADDED_LATER, "patience": 2}
    # Fields every protocol line shows; the others appear only when they depart from the paper.
    ALWAYS_SHOWN = ("recipe", "epochs", "batch_size", "lr", "max_length")

    def __post_init__(self):
        get_mode(self.mode)
        for f in fields(self):
            choices = f.metadata.get("choices")
            allowed = (*choices, None) if choices and f.default is None else choices
            if choices and getattr(self, f.name) not in allowed:
                raise GleeError(f"--{f.name.replace('_', '-')} must be one of "
                                f"{', '.join(choices)}, got {getattr(self, f.name)!r}")
        if self.cv_folds is not None and self.cv_folds < 2:
            raise GleeError(f"--cv-folds must be at least 2, got {self.cv_folds}")
        for name in ("epochs", "batch_size", "max_length", "limit", "eval_every_steps",
                     "micro_batch_size", "min_steps", "patience", "pad_multiple", "lora_r",
                     "lora_alpha", "prefix_length"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise GleeError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
        if not isinstance(self.seed, int) or not 0 <= self.seed <= SEED_MAX:
            raise GleeError(f"a seed must be a whole number from 0 to {SEED_MAX}, got "
                            f"{self.seed!r}")
        for name in ("lr", "head_lr"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= 1:
                raise GleeError(f"--{name.replace('_', '-')} must be between 0 and 1, got {value}")
        if self.lora_dropout is not None and not 0 <= self.lora_dropout < 1:
            raise GleeError(f"--lora-dropout must be in [0, 1), got {self.lora_dropout}")
        elsewhere = [f"--{f.name.replace('_', '-')}" for f in fields(self)
                     if f.metadata.get("modes") and getattr(self, f.name) is not None
                     and self.mode not in f.metadata["modes"]]
        if elsewhere:
            raise GleeError(f"{', '.join(elsewhere)} appl{'ies' if len(elsewhere) == 1 else 'y'} "
                            f"to another mode than --mode {self.mode}")
        if self.layer_decay is not None and not 0 < self.layer_decay <= 1:
            raise GleeError(f"--layer-decay must be in (0, 1], got {self.layer_decay}")
        if isinstance(self.lp_ft, str):
            self.lp_ft = _boolean(self.lp_ft, "--lp-ft")
        if isinstance(self.compile, str):
            self.compile = _boolean(self.compile, "--compile")
        if self.lr_candidates is not None:
            self.lr_candidates = _rate_list(self.lr_candidates)
            if self.lr is not None:
                raise GleeError("give --lr (one rate, no search) or --lr-candidates (a search "
                                "on dev), not both")
        if self.lr_search is not None and self.lr is not None:
            raise GleeError("--lr-search applies to a search on dev; --lr gives one rate")
        if self.frozen:
            asked = [f"--{n.replace('_', '-')}" for n in ("head_lr", "layer_decay", "lr_search")
                     if getattr(self, n) is not None] + (["--lp-ft yes"] if self.lp_ft else [])
            if asked:
                raise GleeError(f"{', '.join(asked)} appl{'ies' if len(asked) == 1 else 'y'} "
                                "to fine-tuning: with --mode frozen the model is the head alone")

    @property
    def tuning(self) -> TuningMode:
        """What the mode trains (see :mod:`glee_core.models.modes`)."""
        return MODES[self.mode]

    @property
    def frozen(self) -> bool:
        """Quick mode: heads alone on cached features."""
        return self.tuning.cached_features

    def cross_validates(self, dataset) -> bool:
        """Whether a quick compare of this configuration on ``dataset`` (a LongTailDataset)
        cross-validates its heads (:mod:`glee_core.train.selection`): asked to (``--choose-by
        cv``), or by default where its dev split is small (``dataset.small_dev()``)."""
        if not self.frozen or self.choose_by == "dev":
            return False
        return self.choose_by == "cv" or dataset.small_dev() is not None

    @property
    def races(self) -> bool:
        """Do the heads of a launch race, the best stored (``--heads best``)?"""
        return self.heads == "best"

    @property
    def folds(self) -> int:
        return self.cv_folds or CV_FOLDS

    @property
    def learning_rate(self) -> float | None:
        """The one rate this configuration trains at; None when it searches one on dev."""
        if self.lr is not None or self.lr_candidates is not None:
            return self.lr
        rate, candidates = recipe_rates(self.recipe, self.mode)
        return None if candidates else rate

    @property
    def lr_grid(self) -> tuple[float, ...]:
        """The rates a run tries on dev: the candidates, or the one rate (a resolved config)."""
        if self.lr_candidates:
            return tuple(float(v) for v in self.lr_candidates.split(","))
        return (self.learning_rate,)

    def poolings(self, trained: str | None) -> tuple[str, ...]:
        """The poolings the plain-input runs of this (unresolved) configuration read, a run each;
        ``trained``: the pooling the backbone was trained with (a sentence-transformers
        checkpoint says so; None for a plain masked LM). ``auto`` is every pooling in quick mode
        (one encoder pass gives them all, the compare chooses), the trained one when fine-tuning,
        and ``cls`` under the paper's recipe (what ``reproduce`` runs, run ids unchanged)."""
        if self.pooling in POOLINGS:
            return (self.pooling,)
        ordered = tuple(sorted(POOLINGS, key=lambda p: p != trained))  # the trained one first
        if self.pooling == ALL_POOLINGS:
            return ordered
        if self.recipe == PAPER:
            return ("cls",)
        return ordered if self.frozen else (trained if trained in POOLINGS else "cls",)

    def read_pooling(self, input_format: str, trained: str | None) -> str:
        """The one pooling a lone run of this (unresolved) configuration reads on
        ``input_format``: a template input is read at ``[MASK]`` (``cls``, its read position)
        whatever the pooling; otherwise the first of :meth:`poolings`."""
        return "cls" if input_format == "prompt" else self.poolings(trained)[0]

    def resolved(self, max_length: int, batch_size: int | None) -> TrainConfig:
        """Defaults that depend on the dataset (its max length and batch size), the mode and the
        recipe filled in: what a run really uses. Quick mode keeps its own protocol (heads at
        1e-3): the fine-tuning recipe does not apply to it."""
        strategy = "first" if not self.limit else (  # "first": nothing to pick without one
            self.limit_strategy or ("first" if self.recipe == PAPER else "stratified"))
        base = replace(self, max_length=self.max_length or max_length,
                       batch_size=self.batch_size or batch_size or 32,
                       epochs=self.epochs or DEFAULT_EPOCHS, limit_strategy=strategy)
        if self.frozen:
            return replace(base, recipe=PAPER, lr=self.learning_rate, lp_ft=False,
                           patience=self.patience or RECIPE_DEFAULTS[PAPER].patience)
        preset = RECIPE_DEFAULTS[self.recipe]
        candidates = self.lr_candidates
        searched = recipe_rates(self.recipe, self.mode)[1]
        if candidates is None and self.lr is None and searched:
            candidates = _rate_list(",".join(map(str, searched)))
        if self.tuning.peft == "lora":
            base = replace(base, lora_r=self.lora_r or LORA_R,
                           lora_alpha=self.lora_alpha or LORA_ALPHA,
                           lora_dropout=LORA_DROPOUT if self.lora_dropout is None
                           else self.lora_dropout)
        if self.tuning.peft == "prefix":
            base = replace(base, prefix_length=self.prefix_length or PREFIX_LENGTH)
        min_steps = self.min_steps
        if min_steps is None and self.epochs is None:  # given epochs are exact
            min_steps = preset.min_steps
        return replace(base, lr=self.learning_rate, lr_candidates=candidates,
                       lr_search=(self.lr_search or preset.lr_search or "each") if candidates
                       else None,
                       lp_ft=preset.lp_ft if self.lp_ft is None else self.lp_ft,
                       head_lr=preset.head_lr if self.head_lr is None else self.head_lr,
                       min_steps=min_steps, patience=self.patience or preset.patience)

    def steps_per_epoch(self, n_train: int) -> int:
        """Optimizer steps of one epoch over ``n_train`` examples (a resolved config)."""
        return -(-n_train // self.batch_size)

    def planned_epochs(self, n_train: int) -> int:
        """The epochs a run plans (a resolved config): ``epochs``, or more where ``min_steps``
        asks for them on small data."""
        floor = -(-(self.min_steps or 0) // self.steps_per_epoch(n_train))
        return max(self.epochs, floor)

    def planned_evaluations(self, n_train: int) -> int:
        """Dev evaluations a run plans (what one round of the learning-rate search is a share
        of): one an epoch, or one every ``eval_every_steps`` steps."""
        epochs = self.planned_epochs(n_train)
        if self.eval_every_steps:
            return max(1, self.steps_per_epoch(n_train) * epochs // self.eval_every_steps)
        return epochs

    def linear_probe_stage(self) -> TrainConfig:
        """LP-FT's first stage: quick mode's run of the same method on the same inputs (max
        length, pooling, training limit, seed, dev metric) with quick mode's own protocol, so a
        quick compare's stored run is the one re-used."""
        return TrainConfig(mode="frozen", seed=self.seed, max_length=self.max_length,
                           pooling=self.pooling, limit=self.limit,
                           limit_strategy=self.limit_strategy,
                           select_metric=self.select_metric, device=self.device,
                           precision=self.precision, eval_batch_size=self.eval_batch_size,
                           pad_multiple=self.pad_multiple)

    def identity(self) -> dict:
        """The fields that change a run's result. ``mode`` is stored under its first name,
        ``backbone``, and fields added later are left out at their earlier value, so run ids stay
        as they were."""
        values = asdict(self)
        for key in self.NOT_IDENTITY:
            values.pop(key)
        values["backbone"] = values.pop("mode")
        for name, default in self.ADDED_LATER.items():
            if values[name] == default:
                values.pop(name)
        return values

    @classmethod
    def from_identity(cls, values: dict) -> TrainConfig:
        """Read back what :meth:`identity` stored (older runs lack later fields: they had the
        value ``ADDED_LATER`` gives, e.g. the paper's recipe)."""
        known = {f.name for f in fields(cls)}
        values = {**cls.ADDED_LATER, **values}
        if "backbone" in values:
            values["mode"] = values.pop("backbone")
        return cls(**{k: v for k, v in values.items() if k in known})

    def protocol(self) -> str:
        """The hyper-parameters but the seed, short: ``paper recipe · 10 ep · bs 32 · lr 1e-05 ·
        len 256``, then whatever departs from the paper's protocol (a training limit, a learning
        rate searched on dev, LP-FT, ...). Quick mode's lines leave out what only fine-tuning
        reads."""
        parts = []
        for f in fields(self):
            form, value = f.metadata.get("protocol"), getattr(self, f.name)
            if not form or value is None or (self.frozen and f.metadata.get("finetune_only")):
                continue
            if f.name == "pooling" and value not in POOLINGS:  # not a run's: plan_runs reads it
                continue
            if (f.name in self.ALWAYS_SHOWN or f.metadata.get("modes")
                    or value != self.PAPER_VALUES.get(f.name, f.default)):
                parts.append(form.format(value))
        return " · ".join(parts)


def _rate_list(text: str) -> str:
    """``"2e-5, 5e-5"`` -> ``"2e-05,5e-05"``: learning rates, checked, in one spelling (a run's
    identity must not depend on how the user wrote them)."""
    try:
        rates = sorted({float(v) for v in str(text).split(",") if v.strip()})
    except ValueError:
        raise GleeError(f"--lr-candidates must be comma-separated numbers, got {text!r}") from None
    if len(rates) < 2 or not all(0 < r < 1 for r in rates):
        raise GleeError(f"--lr-candidates needs two or more rates between 0 and 1, got {text!r} "
                        "(for one rate, use --lr)")
    return ",".join(f"{r:g}" for r in rates)


def _boolean(text: str, flag: str) -> bool:
    value = str(text).strip().lower()
    if value in ("yes", "true", "on", "1"):
        return True
    if value in ("no", "false", "off", "0"):
        return False
    raise GleeError(f"{flag} must be yes or no, got {text!r}")


@dataclass
class DataOptions:
    """Which dataset, and how to read it."""

    dataset: str = option(MISSING, "demo, a paper id (r52 r8 cmid ...), "
                          + ", ".join(f"{s.usage} ({s.help})" for s in SOURCES.values()))
    data_dir: str | None = option(None, "folder of the paper's datasets (default "
                                  "$GLEE_DATA_DIR, else ./data)")
    threshold: float | None = option(None, "head/tail threshold on the cumulative training "
                                     "share (default: the paper's)")
    template: str | None = option(None, "prompt template with {text} and [MASK]")
    verbalizer: str | None = option(None, "JSON file: label -> label word(s)")
    head_tail: str = option("train", "head/tail rule: train (training counts, <= threshold: "
                            "what a user's data needs, the test split never decides) or "
                            "released (the authors' code: the test labels, < threshold)",
                            choices=("train", "released"))
    text_column: str | None = option(None, "CSV/HF: the text column")
    label_column: str | None = option(None, "CSV/HF: the label column")
    text_b_column: str | None = option(None, "CSV/HF: an optional second text column")
    uploads_dir: str | None = option(None, "folder of upload:NAME datasets (default "
                                     "$GLEE_UPLOADS_DIR, else ./uploads)")
    keep_rare: bool = option(False, "demo/CSV/upload: keep the classes with too few texts for a "
                             "dev and test split in training (learned and predicted, never "
                             "scored; the dataset id ends in +rare): yes/no")
    exclude: str | None = option(None, "a file of training rows to leave out: health's "
                                 "label_issues.csv (its suspected rows) or one 0-based row of "
                                 "the training split a line; the dataset id ends in "
                                 "+without-N-<digest>, so its runs stay apart")

    def __post_init__(self):
        self.keep_rare = _boolean(self.keep_rare, "--keep-rare")

    def load(self):
        """The dataset (see :func:`glee_core.data.datasets.load_dataset`)."""
        from ..data.datasets import load_dataset  # noqa: PLC0415 (pandas: only to read a dataset)

        return load_dataset(self.dataset, **{k: v for k, v in asdict(self).items()
                                             if k != "dataset"})


@dataclass
class ExecutorOptions:
    """Where the planned runs train: one after another here, or as tasks on a Ray cluster."""

    executor: str = option("local", "local (one after another here) or ray (one Ray task per "
                           "run; pip install -e '.[cluster]')", choices=("local", "ray"))
    ray_address: str | None = option(None, "Ray cluster to join: auto (a running one, as `ray "
                                     "start --head` leaves) or HOST:PORT (default: start a "
                                     "local Ray)")
    cpus_per_run: float = option(1.0, "Ray: CPUs each run reserves")
    runs_at_once: str = option(
        "auto", "runs trained at once, each in a process of its own sharing the device: a "
        "number, or auto (1 on a CPU; on a GPU as many as its free memory holds at 6 GB a run, "
        "up to 8); with Ray, each run then reserves 1/N of a GPU. Quick-mode heads always "
        "train together in one process")
    gpus_per_run: float | None = option(None, "Ray: GPUs each run reserves (default 1 when the "
                                        "cluster has GPUs, 1/N with --runs-at-once N, else 0)")

    def __post_init__(self):
        if self.executor not in ("local", "ray"):
            raise GleeError(f"--executor must be local or ray, got {self.executor!r}")
        if self.cpus_per_run <= 0 or (self.gpus_per_run is not None and self.gpus_per_run < 0):
            raise GleeError("--cpus-per-run must be > 0 and --gpus-per-run >= 0")
        self.runs_at_once = str(self.runs_at_once).strip().lower()
        if self.runs_at_once != "auto" and (not self.runs_at_once.isdigit()
                                            or int(self.runs_at_once) < 1):
            raise GleeError(f"--runs-at-once must be auto or a number of 1 or more, got "
                            f"{self.runs_at_once!r}")


@dataclass
class AdaptOptions:
    """Task-adaptive pretraining (Gururangan et al., ACL 2020): the masked-LM objective continued
    on the task's own texts before tuning (``python -m glee_core adapt``)."""

    out: str = option(MISSING, "the folder to write the adapted backbone to (a new or empty "
                      "folder; --model OUT loads it)")
    texts: str | None = option(None, "a file of unlabelled texts, one a line, added to the "
                               "training split's texts (never dev or test)")
    epochs: int = option(3, "passes over the texts (TAPT's paper: 100 on its small sets, on a "
                         "GPU)")
    batch_size: int = option(32, "texts per optimizer step")
    lr: float = option(1e-4, "AdamW's learning rate (TAPT's)")
    max_length: int | None = option(None, "max tokens per text (default: the dataset's)")
    mlm_probability: float = option(0.15, "the share of tokens masked (BERT's)")
    whole_word: bool = option(True, "mask whole words where the tokenizer marks them (a fast "
                              "tokenizer's offsets; every piece of a masked word becomes "
                              "[MASK]): yes/no")
    held_out: float = option(0.1, "the share of the training texts held out to measure the "
                             "masked-LM loss and [MASK] top-1 accuracy before and after")
    seed: int = option(1, "random seed (the held-out texts, masks and order)")
    precision: str = option("auto", PRECISION_HELP, choices=PRECISIONS)
    device: str = option("auto", "auto, cpu or cuda")

    def __post_init__(self):
        if isinstance(self.whole_word, str):
            self.whole_word = _boolean(self.whole_word, "--whole-word")
        for name in ("epochs", "batch_size", "max_length"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise GleeError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
        if not 0 < self.mlm_probability < 1:
            raise GleeError(f"--mlm-probability must be in (0, 1), got {self.mlm_probability}")
        if not 0 <= self.held_out < 0.5:
            raise GleeError(f"--held-out must be in [0, 0.5), got {self.held_out}")
        if not 0 < self.lr < 1:
            raise GleeError(f"--lr must be between 0 and 1, got {self.lr}")


@dataclass
class HealthOptions:
    """``python -m glee_core health``: the probe, its folds, and where the results go."""

    out: str = option(MISSING, "the folder to write health.json and label_issues.csv to")
    folds: int = option(5, "k of the k-fold out-of-fold probabilities on the training split")
    method: str = option("probe-balanced", "what gives the out-of-fold probabilities: a "
                         "closed-form probe (probe-balanced, probe: seconds) or any quick-mode "
                         "head, trained once a fold (e.g. cls-relu-pt-ln, the head the lab "
                         "recommends)")
    pooling: str | None = option(None, "the frozen state read: cls or mean (default: the "
                                 "backbone's own pooling, else mean)", choices=POOLINGS)
    max_length: int | None = option(None, "max tokens per text (default: the dataset's)")
    seed: int = option(1, "random seed of the folds")
    device: str = option("auto", "auto, cpu or cuda")

    def __post_init__(self):
        if self.folds < 2:
            raise GleeError(f"--folds must be at least 2, got {self.folds}")
        get_method(self.method)  # an unknown id: the error lists the known ones


def parse_seeds(value: str) -> list[int]:
    """``"1,2,3"`` -> ``[1, 2, 3]`` (``--seeds`` of ``train`` and ``budget``)."""
    try:
        seeds = [int(s) for s in value.split(",") if s.strip()]
    except ValueError:
        raise GleeError(f"--seeds must be comma-separated integers, got {value!r}") from None
    if not seeds:
        raise GleeError("--seeds is empty; e.g. --seeds 1,2,3")
    return seeds


BUDGET_FRACTIONS = "0.1,0.2,0.4,0.7,1"


@dataclass
class BudgetOptions:
    """``python -m glee_core budget``: per-class learning curves in quick mode (the head
    retrained on stratified fractions of every class's training texts) and the label budget
    they forecast."""

    out: str = option(MISSING, "the folder to write budget.json and budget.csv to")
    method: str = option("cls-relu-pt-ln", "the head retrained on each fraction (a quick-mode "
                         "method: python -m glee_core methods); the app passes the head it "
                         "recommends")
    seeds: str = option("1,2,3", "seeds, comma-separated: each draws its own nested subsets "
                        "and trains its own head")
    fractions: str = option(BUDGET_FRACTIONS, "the shares of every class's training texts "
                            "trained on (at least one text a class), comma-separated, ending "
                            "at 1")
    target_f1: float = option(0.8, "the test F1 a class should reach: the texts it needs are "
                              "forecast")
    pooling: str | None = option(None, "the frozen state read: cls or mean (default: the "
                                 "backbone's own pooling, else cls)", choices=POOLINGS)
    max_length: int | None = option(None, "max tokens per text (default: the dataset's)")
    device: str = option("auto", "auto, cpu or cuda")

    def __post_init__(self):
        get_method(self.method)  # an unknown id: the error lists the known ones
        self.seed_list = tuple(parse_seeds(self.seeds))
        try:
            shares = sorted({float(f) for f in str(self.fractions).split(",") if f.strip()})
        except ValueError:
            raise GleeError(f"--fractions takes numbers like {BUDGET_FRACTIONS}, got "
                            f"{self.fractions!r}") from None
        if len(shares) < 2 or shares[0] <= 0 or shares[-1] != 1:
            raise GleeError("--fractions needs two shares or more in (0, 1], the last 1 (the "
                            f"whole training split), got {self.fractions!r}")
        self.fraction_list = tuple(shares)
        if not 0 < self.target_f1 <= 1:
            raise GleeError(f"--target-f1 must be in (0, 1], got {self.target_f1}")


def _type_of(f) -> type:
    """int, float or str from a field's annotation (``"int | None"`` with postponed ones)."""
    annotation = str(f.type)
    if annotation.startswith("bool"):  # --lp-ft yes|no (TrainConfig checks the word)
        return str
    for name, kind in (("int", int), ("float", float)):
        if annotation.split(" ")[0] == name:
            return kind
    return str


def add_arguments(parser: argparse.ArgumentParser, cls: type, only: tuple[str, ...] | None = None,
                  help_overrides: dict[str, str] | None = None, show_defaults: bool = True,
                  optional: bool = False) -> None:
    """One flag per field of ``cls`` (``--batch-size`` for ``batch_size``), with its help,
    choices and default. Unset flags stay unset (``SUPPRESS``), so the dataclass's own default
    applies: each default has one home, the field. ``optional`` makes required fields optional
    (when another flag can supply them)."""
    for f in fields(cls):
        if not f.metadata.get("cli", True) or (only is not None and f.name not in only):
            continue
        flags = f.metadata.get("flag") or f"--{f.name.replace('_', '-')}"
        flags = (flags,) if isinstance(flags, str) else flags
        text = (help_overrides or {}).get(f.name, f.metadata.get("help", ""))
        if show_defaults and f.default not in (None, MISSING):
            text += f" (default {f.default})"
        kwargs: dict[str, Any] = {"dest": f.name, "help": text, "type": _type_of(f),
                                  "default": argparse.SUPPRESS}
        if f.default is MISSING and f.default_factory is MISSING and not optional:
            kwargs["required"] = True
        if f.metadata.get("choices"):
            kwargs["choices"] = f.metadata["choices"]
        parser.add_argument(*flags, **kwargs)


def help_of(cls: type, name: str) -> str:
    """A field's help text (the app's widgets show the same words as the CLI's flags)."""
    return next(f.metadata.get("help", "") for f in fields(cls) if f.name == name)


def default_of(cls: type, name: str) -> Any:
    """A field's default (the app's widgets start where the CLI's flags do)."""
    return next(f.default for f in fields(cls) if f.name == name)


def from_args(cls: type, args: argparse.Namespace, **overrides):
    """An instance of ``cls`` from the flags given on the command line (others: defaults)."""
    given = {f.name: getattr(args, f.name) for f in fields(cls) if hasattr(args, f.name)}
    return cls(**{**given, **overrides})


class _Request:
    """A request the app writes as JSON for a child process (``--request FILE``)."""

    WHAT = "request"

    def to_dict(self) -> dict:
        return asdict(self)

    def write(self, path: str | Path) -> Path:
        return write_json_atomic(Path(path), self.to_dict())

    @classmethod
    def read(cls, path: str | Path):
        try:
            values = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls.from_dict(values)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise GleeError(f"cannot read the {cls.WHAT} {path}: {exc}") from None


@dataclass
class TrainRequest(_Request):
    """What ``train`` does: methods x seeds of one dataset with one backbone and config. The
    CLI builds it from its flags; the app writes it as a JSON file for the child process."""

    WHAT = "training request"

    data: DataOptions
    methods: list[str]
    seeds: list[int]
    model: str = AUTO_MODEL
    config: TrainConfig = field(default_factory=TrainConfig)
    force: bool = False
    executor: ExecutorOptions = field(default_factory=ExecutorOptions)

    @classmethod
    def from_dict(cls, values: dict) -> TrainRequest:
        return cls(data=DataOptions(**values["data"]), methods=list(values["methods"]),
                   seeds=[int(s) for s in values["seeds"]], model=values.get("model", AUTO_MODEL),
                   config=TrainConfig(**values.get("config", {})),
                   force=bool(values.get("force", False)),
                   executor=ExecutorOptions(**values.get("executor", {})))


@dataclass
class AdaptRequest(_Request):
    """What ``adapt`` does: one backbone adapted to one dataset's texts."""

    WHAT = "adaptation request"

    data: DataOptions
    options: AdaptOptions
    model: str = AUTO_MODEL

    @classmethod
    def from_dict(cls, values: dict) -> AdaptRequest:
        return cls(data=DataOptions(**values["data"]), options=AdaptOptions(**values["options"]),
                   model=values.get("model", AUTO_MODEL))
