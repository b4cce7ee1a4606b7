"""A run's hyper-parameters, declared once: :class:`TrainConfig` (defaults: the paper's; the
practical recipe's where the user leaves a knob unset, ``recipes.Recipe``), each knob a field with
its help (``fields.option``), from which the command line's flags, the protocol line and the
run's identity all follow. The other commands' options and the app's requests are in
``options``. Imports neither torch nor pandas."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from .checks import check_config
from .fields import option
from .modes import MODES, mode_settings
from .recipes import PAPER, PRACTICAL, RECIPES
from .schedule import Schedule
from .tuning import TuningMode

LIMIT_STRATEGIES = ("stratified", "first")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
PRECISION_HELP = (
    "auto: bf16 autocast on GPUs and CPUs that do bf16 natively, fp16 with a "
    "gradient scaler on older GPUs, else fp32"
)


POOLINGS = ("cls", "mean")  # what a plain-input head can read (heads.pool computes each)
AUTO_POOLING, ALL_POOLINGS = "auto", "all"
CHOOSE_BY = ("auto", "dev", "cv")
LR_SEARCHES = ("each", "once")
HEAD_RACES = ("each", "best")
TUNED_MODES = tuple(name for name, mode in MODES.items() if not mode.cached_features)
CV_FOLDS = 5
RESAMPLES = 1000  # dev's bootstrap resamples behind how sure a choice on dev is


def with_mode_settings(cls):
    """Each way of tuning's settings (``models/modes.py``: a ``Setting`` carries its default,
    bounds, help and protocol form) as fields of ``cls`` after its own, so a new mode's settings
    are declared with the mode alone: each a flag, a place in the protocol line and in the run's
    identity (None, its default, keeps older runs' ids)."""
    for setting in mode_settings():
        cls.__annotations__[setting.field] = f"{setting.kind.__name__} | None"
        setattr(cls, setting.field, option(None, setting.help_text, protocol=setting.protocol))
    return cls


EMA_DECAY = 0.99  # self-ensemble's and self-distillation's average: about the last 100 steps
SUPCON_TEMPERATURE = 0.3  # Gunel et al. 2021's middle for fine-tuning a masked LM


@dataclass
@with_mode_settings
class TrainConfig(Schedule):
    """Hyper-parameters of a run: the paper's protocol, or the practical recipe's where the
    user leaves a switch unset (see :class:`Recipe`). What it plans for a run (the rate, the
    values the dataset, mode and recipe fill in, the steps) is :class:`Schedule`'s."""

    recipe: str = option(
        PRACTICAL,
        "fine-tuning recipe: practical (the learning rate chosen on dev, the head "
        "first fitted on the frozen features (LP-FT), a floor on optimizer steps for small data: "
        "what a user's data needs) or paper (the authors' scripts exactly: one rate, 1e-5, a "
        "fresh head; what reproduce uses). Each switch below overrides it. Quick mode (--mode "
        "frozen) has its own protocol",
        choices=RECIPES,
        protocol="{} recipe",
        finetune_only=True,
    )
    epochs: int | None = option(
        None,
        "training epochs (default 10, the paper's; given, exactly "
        "that many: the practical recipe's floor on steps applies to the "
        "default only)",
        protocol="{} ep",
        label="Epochs",
        low=1,
    )
    batch_size: int | None = option(
        32,
        "batch size (default 32; the few-shot sets use 2)",
        protocol="bs {}",
        label="Batch size",
        low=1,
    )
    lr: float | None = option(
        None,
        "learning rate; given, it turns the search off (default: "
        "practical recipe: chosen on dev; paper: "
        + ", ".join(f"{m.lr:g} {m.name}" for m in MODES.values())
        + ")",
        protocol="lr {:g}",
        low=0,
        high=1,
    )
    lr_candidates: str | None = option(
        None,
        "learning rates tried on dev, comma-separated: each trains a short budget from the "
        "same start, the better half continues (successive halving) until one is left, which "
        "trains on; the test split is never read (default: practical recipe: "
        + "; ".join(
            f"{m.name} {','.join(f'{r:g}' for r in m.lr_candidates)}"
            for m in MODES.values()
            if m.lr_candidates
        )
        + "; paper: none)",
        protocol="lr chosen on dev from {}",
    )
    lr_search: str | None = option(
        None,
        "with a learning-rate search: each (every head and seed searches its own rate) or "
        "once (the first run's search chooses the rate for the backbone and data; the other "
        "heads and seeds of them train at it, and say whose search chose it) (default: "
        "practical recipe once)",
        choices=LR_SEARCHES,
        protocol="rate searched {}",
        finetune_only=True,
    )
    head_lr: float | None = option(
        None,
        "the head's own learning rate (an AdamW parameter "
        "group; the encoder keeps --lr) (default: the model's rate)",
        protocol="head lr {:g}",
        finetune_only=True,
        label="Head learning rate (0 = the model's)",
        low=0,
        high=1,
        step=1e-4,
        off=0.0,
    )
    layer_decay: float | None = option(
        None,
        "layer-wise learning-rate decay: encoder layer l of L trains at lr x "
        "decay^(L+1-l), the embeddings at lr x decay^(L+1) (default: off)",
        protocol="layer decay {:g}",
        finetune_only=True,
        label="Layer-wise lr decay (1 = off)",
        low=0,
        above=True,
        high=1,
        step=0.05,
        off=1.0,
    )
    self_ensemble: bool | None = option(
        None,
        "self-ensemble (Xu et al. 2020): an exponential moving average of the weights "
        f"(decay {EMA_DECAY:g} a step) scored on dev beside them at every evaluation, and kept "
        "where it scores better: yes/no (default no)",
        protocol="self-ensemble",
        finetune_only=True,
    )
    self_distill: float | None = option(
        None,
        "self-distillation (Xu et al. 2020): the moving average of the weights as a teacher, "
        "this weight on the mean squared gap between its logits and the model's, beside the "
        "classifier's loss (default: off; 1 is the paper's)",
        protocol="self-distill {:g}",
        finetune_only=True,
        label="Self-distillation weight (0 = off)",
        low=0,
        above=True,
        high=10,
        step=0.5,
        off=0.0,
    )
    supcon: float | None = option(
        None,
        "a supervised contrastive term (Khosla et al. 2020; Gunel et al. 2021 for fine-tuning) "
        f"on the features the classifier reads, this weight beside its loss (temperature "
        f"{SUPCON_TEMPERATURE:g}); on long-tailed data the batches are then drawn class-balanced, "
        "so a rare class finds a partner (default: off)",
        protocol="supcon {:g}",
        finetune_only=True,
        label="Supervised contrastive weight (0 = off)",
        low=0,
        above=True,
        high=10,
        step=0.1,
        off=0.0,
    )
    lp_ft: bool | None = option(
        None,
        "LP-FT (Kumar et al. 2022): fit the head on the frozen backbone's features first "
        "(quick mode's run, re-used from the store when it holds it), then train from that "
        "head in the mode chosen (the whole model, or its LoRA / prefix weights): yes/no "
        "(default: practical recipe yes, paper no)",
        protocol="LP-FT",
        finetune_only=True,
    )
    min_steps: int | None = option(
        None,
        "a floor on optimizer steps: small data trains for more epochs (early stopping on "
        "dev still ends it) (default: practical recipe 300 unless --epochs is given, paper none)",
        protocol="≥ {} steps",
        label="At least N optimizer steps (0 = off)",
        low=1,
        off=0,
    )
    max_length: int | None = option(
        None,
        "max tokens per example (default: the dataset's, the paper's per-dataset length)",
        protocol="len {}",
        label="Max length",
        low=1,
    )
    limit: int | None = option(
        None,
        "train on N of the training examples (small or smoke "
        "runs; how they are picked: --limit-strategy)",
        protocol="limit {} train",
        label="Limit train examples (0 = all)",
        low=1,
        off=0,
    )
    limit_strategy: str | None = option(
        None,
        "how --limit picks its examples: stratified (every class keeps its share, at "
        "least one example each, drawn with a fixed seed: the same for every run) or first (the "
        "first N rows) (default: stratified; first under --recipe paper, as the authors' "
        "scripts and runs stored before this option)",
        choices=LIMIT_STRATEGIES,
        protocol="{} limit",
    )
    patience: int | None = option(
        None,
        "early stopping: dev evaluations (epochs) without a "
        "gain (default: paper recipe and quick mode 2, practical 4)",
        protocol="patience {}",
        low=1,
    )
    weight_decay: float = option(0.0, "AdamW weight decay", protocol="wd {:g}")
    warmup_ratio: float = option(0.1, "share of steps with linear warm-up", protocol="warm-up {:g}")
    max_grad_norm: float = option(1.0, "gradient norm clipping", protocol="clip {:g}")
    eval_every_steps: int | None = option(
        None,
        "score dev every N optimizer steps, keep the best step's weights and stop after "
        "patience x steps-per-epoch steps without a gain (the released scripts' --log_interval: "
        "100, 1000 for msra, 1 few-shot); default: after every epoch",
        protocol="dev every {} steps",
        low=1,
    )
    select_metric: str = option(
        "f1",
        "dev metric for early stopping and the kept weights: "
        "macro-F1 (the paper's long-tailed runs) or accuracy (its "
        "few-shot runs)",
        choices=("f1", "acc"),
        protocol="select on dev {}",
    )
    pooling: str = option(
        AUTO_POOLING,
        "what a plain-input head reads: cls (the [CLS] state, "
        "the paper's), mean (the mean of the token states, what sentence "
        "encoders such as the offline MiniLM were trained for), all (a run of "
        "each) or auto (quick mode: all, one encoder pass gives both and the "
        "compare chooses; fine-tuning: the pooling a sentence-transformers "
        "checkpoint declares it was trained with, else cls; the paper recipe: "
        "cls)",
        choices=(AUTO_POOLING, ALL_POOLINGS, *POOLINGS),
        protocol="{} pooling",
    )
    choose_by: str | None = option(
        None,
        "how the heads of a quick compare are told apart: dev (each head's best dev score), "
        "cv (k-fold cross-validation on train + dev over the cached features: every text scored "
        "once, by a head that never trained on it) or auto (cv where dev is small for its "
        "classes: a class with fewer than 5 dev texts, or fewer than 20 a class on average) "
        "(default auto)",
        choices=CHOOSE_BY,
        modes=("frozen",),
    )
    cv_folds: int | None = option(
        None,
        f"folds of that cross-validation (default {CV_FOLDS})",
        modes=("frozen",),
        low=2,
    )
    heads: str | None = option(
        None,
        "several heads of one launch, tuned: each (every head trains to the end, a run "
        "each) or best (they race at one rate, the rate searched once: every round the better "
        "half on dev goes on, the last trains to the end and is the one run stored, its record "
        "holding the others' dev scores; about half the time of each) (default each)",
        choices=HEAD_RACES,
        modes=TUNED_MODES,
    )
    mode: str = option(
        "finetune",
        "; ".join(f"{m.name}: {m.help}" for m in MODES.values()),
        choices=tuple(MODES),
        flag=("--mode", "--backbone"),
    )
    seed: int = option(1, "random seed", cli=False)
    precision: str = option("auto", PRECISION_HELP, choices=PRECISIONS)
    pad_multiple: int | None = option(
        None,
        "pad each batch to a multiple of this many tokens (at most max length); default: "
        "64 on a GPU (few tensor shapes), each batch's own longest text on a CPU",
        low=1,
    )
    compile: bool = option(
        False,
        "compile the model with torch.compile (on a GPU, after a "
        "warm-up of about a minute per batch shape)",
    )
    device: str = option("auto", "auto, cpu or cuda")
    eval_batch_size: int | None = option(
        None, "texts scored at once; default: 128 on a GPU, 32 on a CPU (faster there)"
    )
    micro_batch_size: int | None = option(
        None,
        "run each training batch's forward and backward passes in pieces of this many "
        "examples and step once: the same update with less memory (activations grow with batch "
        "x length^2 at long lengths; on a CPU with glibc, large blocks are also handed back to "
        "the system as soon as they are freed); default: the whole batch at once",
        low=1,
    )
    log_every: int = option(20, "read the loss back every N steps", cli=False)

    # Fields that do not change a run's result, so stay out of its identity (and run id).
    NOT_IDENTITY = (
        "device",
        "eval_batch_size",
        "log_every",
        "precision",
        "micro_batch_size",
        "pad_multiple",
        "compile",
        "choose_by",
        "cv_folds",
        "heads",
    )
    # Fields added after runs were stored, with the value those runs had: left out of the
    # identity at that value, so their run ids stay as they were, and filled in when read back.
    ADDED_LATER = {
        "select_metric": "f1",
        "eval_every_steps": None,
        "pooling": "cls",
        "recipe": PAPER,
        "lr_candidates": None,
        "head_lr": None,
        "layer_decay": None,
        "self_ensemble": None,
        "self_distill": None,
        "supcon": None,
        "lp_ft": False,
        "min_steps": None,
        "limit_strategy": "first",
        "lr_search": None,
        **{s.field: None for s in mode_settings()},
    }
    # The paper's values of the fields a protocol line names only when they depart from them
    PAPER_VALUES = {**ADDED_LATER, "patience": 2}
    # Fields every protocol line shows; the others appear only when they depart from the paper.
    ALWAYS_SHOWN = ("recipe", "epochs", "batch_size", "lr", "max_length")

    def __post_init__(self):
        check_config(self)

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
            if (
                f.name in self.ALWAYS_SHOWN
                or f.metadata.get("modes")
                or value != self.PAPER_VALUES.get(f.name, f.default)
            ):
                parts.append(form.format(value))
        return " · ".join(parts)
