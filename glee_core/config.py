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

from .errors import GleeError
from .files import write_json_atomic

FINETUNE_LR = 1e-5  # the paper's
FROZEN_LR = 1e-3  # heads alone on a frozen backbone need larger steps
MODES = ("finetune", "frozen")
AUTO_MODEL = "auto"


def option(default: Any, help: str, *, choices: tuple | None = None,
           flag: str | tuple[str, ...] | None = None,
           cli: bool = True, protocol: str | None = None, **kwargs) -> Any:
    """A dataclass field carrying what the command line needs: help, choices, flag name.

    ``protocol`` is how the value reads in a run's protocol line (``"{} ep"``) when it departs
    from the default (or always, for the fields every protocol line shows)."""
    meta = {"help": help, "choices": choices, "flag": flag, "cli": cli, "protocol": protocol}
    if callable(default):
        return field(default_factory=default, metadata=meta, **kwargs)
    return field(default=default, metadata=meta, **kwargs)


@dataclass
class TrainConfig:
    """Hyper-parameters of a run (defaults: the paper's)."""

    epochs: int = option(10, "training epochs (the paper's 10)", protocol="{} ep")
    batch_size: int | None = option(32, "batch size (default 32; the few-shot sets use 2)",
                                    protocol="bs {}")
    lr: float | None = option(None, "learning rate (default 1e-5, the paper's; 1e-3 with "
                              "--mode frozen)", protocol="lr {:g}")
    max_length: int | None = option(None, "max tokens per example (default: the dataset's, the "
                                    "paper's per-dataset length)", protocol="len {}")
    limit: int | None = option(None, "keep the first N training examples (smoke runs)",
                               protocol="first {} train")
    patience: int = option(2, "early stopping: epochs without a dev gain",
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
    pooling: str = option("cls", "what a plain-input head reads: cls (the [CLS] state, the "
                          "paper's) or mean (the mean of the token states, what sentence "
                          "encoders such as the offline MiniLM were trained for)",
                          choices=("cls", "mean"), protocol="{} pooling")
    mode: str = option("finetune", "finetune: train the whole model (the paper's set-up); "
                       "frozen: quick mode, heads alone on cached features", choices=MODES,
                       flag=("--mode", "--backbone"))
    seed: int = option(1, "random seed", cli=False)
    precision: str = option("auto", "auto: bf16 autocast on CUDA and on CPUs with native bf16",
                            choices=("auto", "fp32", "bf16"))
    device: str = option("auto", "auto, cpu or cuda")
    eval_batch_size: int = option(128, "evaluation batch size")
    micro_batch_size: int | None = option(
        None, "run each training batch's forward and backward passes in pieces of this many "
        "examples and step once: the same update with less memory (activations grow with batch "
        "x length^2 at long lengths; on a CPU with glibc, large blocks are also handed back to "
        "the system as soon as they are freed); default: the whole batch at once")
    log_every: int = option(20, "read the loss back every N steps", cli=False)

    # Fields that do not change a run's result, so stay out of its identity (and run id).
    NOT_IDENTITY = ("device", "eval_batch_size", "log_every", "precision", "micro_batch_size")
    # Fields added after runs were stored: left out of the identity at their default, so the
    # run ids of those runs stay as they were.
    ADDED_LATER = {"select_metric": "f1", "eval_every_steps": None, "pooling": "cls"}
    # Fields every protocol line shows; the others appear only when they depart from the default.
    ALWAYS_SHOWN = ("epochs", "batch_size", "lr", "max_length")

    def __post_init__(self):
        if self.mode not in MODES:
            raise GleeError(f"--mode must be finetune or frozen, got {self.mode!r}")
        for f in fields(self):
            choices = f.metadata.get("choices")
            if choices and getattr(self, f.name) not in choices:
                raise GleeError(f"--{f.name.replace('_', '-')} must be one of "
                                f"{', '.join(choices)}, got {getattr(self, f.name)!r}")
        for name in ("epochs", "batch_size", "max_length", "limit", "eval_every_steps",
                     "micro_batch_size"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise GleeError(f"--{name.replace('_', '-')} must be at least 1, got {value}")

    @property
    def frozen(self) -> bool:
        return self.mode == "frozen"

    @property
    def learning_rate(self) -> float:
        if self.lr is not None:
            return self.lr
        return FROZEN_LR if self.frozen else FINETUNE_LR

    def resolved(self, max_length: int, batch_size: int | None) -> TrainConfig:
        """Defaults that depend on the dataset (its max length and batch size) and the mode
        (the learning rate) filled in: what a run really uses."""
        return replace(self, max_length=self.max_length or max_length,
                       batch_size=self.batch_size or batch_size or 32, lr=self.learning_rate)

    def identity(self) -> dict:
        """The fields that change a run's result. ``mode`` is stored under its first name,
        ``backbone``, and fields added later are left out at their default, so run ids stay as they
        were."""
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
        """Read back what :meth:`identity` stored (older runs lack later fields)."""
        known = {f.name for f in fields(cls)}
        values = dict(values)
        if "backbone" in values:
            values["mode"] = values.pop("backbone")
        return cls(**{k: v for k, v in values.items() if k in known})

    def protocol(self) -> str:
        """The hyper-parameters but the seed, short: ``10 ep · bs 32 · lr 1e-05 · len 256``, then
        whatever departs from the paper's defaults (a training limit, patience, ...)."""
        parts = []
        for f in fields(self):
            form, value = f.metadata.get("protocol"), getattr(self, f.name)
            if form and value is not None and (f.name in self.ALWAYS_SHOWN or value != f.default):
                parts.append(form.format(value))
        return " · ".join(parts)


@dataclass
class DataOptions:
    """Which dataset, and how to read it."""

    dataset: str = option(MISSING, "demo, a paper id (r52 r8 cmid ...), csv:PATH or "
                          "hf:NAME[:CONFIG]")
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

    def load(self):
        """The dataset (see :func:`glee_core.datasets.load_dataset`)."""
        from .datasets import load_dataset  # noqa: PLC0415 (pandas: only to read a dataset)

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
    gpus_per_run: float | None = option(None, "Ray: GPUs each run reserves (default 1 when the "
                                        "cluster has GPUs, else 0)")

    def __post_init__(self):
        if self.executor not in ("local", "ray"):
            raise GleeError(f"--executor must be local or ray, got {self.executor!r}")
        if self.cpus_per_run <= 0 or (self.gpus_per_run is not None and self.gpus_per_run < 0):
            raise GleeError("--cpus-per-run must be > 0 and --gpus-per-run >= 0")


def _type_of(f) -> type:
    """int, float or str from a field's annotation (``"int | None"`` with postponed ones)."""
    annotation = str(f.type)
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


def from_args(cls: type, args: argparse.Namespace, **overrides):
    """An instance of ``cls`` from the flags given on the command line (others: defaults)."""
    given = {f.name: getattr(args, f.name) for f in fields(cls) if hasattr(args, f.name)}
    return cls(**{**given, **overrides})


@dataclass
class TrainRequest:
    """What ``train`` does: methods x seeds of one dataset with one backbone and config. The
    CLI builds it from its flags; the app writes it as a JSON file for the child process."""

    data: DataOptions
    methods: list[str]
    seeds: list[int]
    model: str = AUTO_MODEL
    config: TrainConfig = field(default_factory=TrainConfig)
    force: bool = False
    executor: ExecutorOptions = field(default_factory=ExecutorOptions)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> TrainRequest:
        return cls(data=DataOptions(**values["data"]), methods=list(values["methods"]),
                   seeds=[int(s) for s in values["seeds"]], model=values.get("model", AUTO_MODEL),
                   config=TrainConfig(**values.get("config", {})),
                   force=bool(values.get("force", False)),
                   executor=ExecutorOptions(**values.get("executor", {})))

    def write(self, path: str | Path) -> Path:
        return write_json_atomic(Path(path), self.to_dict())

    @classmethod
    def read(cls, path: str | Path) -> TrainRequest:
        try:
            values = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls.from_dict(values)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise GleeError(f"cannot read the training request {path}: {exc}") from None
