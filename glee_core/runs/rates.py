"""What an estimate is and the rates it is made from: the typed :class:`Estimate` (seconds, what
it is built from, how sure), the rates typical of a device where nothing was measured here, the
measured rates of finished runs (their upper quartile), a text's tokens and other work on the
CPU. ``runs.estimate`` estimates training with them, ``runs.job_estimates`` the other kinds."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

import numpy as np

from ..data.datasets import LongTailDataset
from .record import RunRecord
from .store import Run

# Real tokens per second x parameters (training: forward and backward; the frozen feature
# pass: forward only; adapt's masked-LM training, its head counted at the masked share), used
# without stored runs: typical of a CPU with native bf16 (AVX512-BF16), one with AMX tiles
# (its training and feature pass measured; adapting as the first's), one without bf16 (fp32) and
# a GPU (bench/results/benchmarks-log.md, "Where the estimates' typical rates come from"). The
# native-bf16 CPU's training rate: 2,100-4,500 tokens/s for MiniLM's 22.7M parameters in 9 demo
# fine-tunes on an EPYC, most beside other work (6e10 sits under their median; 4e10 made a new
# user's first fine-tune estimate 2.4x what it took).
TYPICAL_RATES = {
    "cpu": (6e10, 1.2e11, 6.7e10),
    "cpu-amx": (6.4e10, 1.9e11, 6.7e10),
    "cpu-fp32": (1.8e10, 3e10, 3e10),
    "cuda": (2e13, 6e13, 3.3e13),
}
# Before any run: importing torch/transformers, loading the data and the backbone, the vocabulary
# check; every launch pays it once (bench/quick_compare.py measures its phases).
STARTUP_SECONDS = 10.0
# A head on cached states, trained in a pack with the others, without stored frozen runs to
# measure: examples a second of its planned epochs (early stopping included) by the kinds of
# TYPICAL_RATES, and the seconds of its test pass and run folder; fitted to quick compares of
# four sets on the AMX Xeon, and of two (the demo, a new user's 572-text upload) on the EPYC
# with native bf16, whose packed heads cost 0.09-0.11 s each (BENCHMARKS.md, "How fast is a
# quick compare?")
HEAD_EXAMPLES_PER_S = {"cpu": 63_000.0, "cpu-amx": 32_000.0, "cpu-fp32": 16_000.0, "cuda": 16_000.0}
HEAD_OVERHEAD_SECONDS = {"cpu": 0.01, "cpu-amx": 0.1, "cpu-fp32": 0.1, "cuda": 0.1}
# ... at the demo's 20 classes: a head's cost a training example grows by 1 / HEAD_CLASS_SCALE a
# class (its classifier, loss and scoring over every class). Measured on 2 cores, every head for
# 2 epochs on 2,800 texts (features cached): 20 / 200 / 800 classes took 29 / 44 / 114 s of
# heads; a 2,000-class upload's compare had been estimated 10x short without it
TYPICAL_CLASSES = 20
HEAD_CLASS_SCALE = 270.0
# ... and one CLS head alone (the label budget's): 2.0 / 5.7 s at 20 / 800 classes, 2 epochs; the
# budget's 15 heads over 2,000 classes x 7 texts took 160 s where growing linearly said 356: its
# cost grows as (classes / 20) ** CLS_HEAD_CLASS_POWER (x2.8 at 800, x3.6 at 2,000)
CLS_HEAD_CLASS_POWER = 0.28
# Other work on the machine slows a run, nothing speeds it up: a measured rate is the upper
# quartile of the finished runs' rates, which runs slowed by other work do not move unless they
# are three in four, while one run cannot set it alone among several.
RATE_QUANTILE = 0.75
# A fold of a quick compare's cross-validation against the head's own training: its training on
# the training texts outside the fold, its epochs scored on the dev texts outside it, the
# held-out fold scored once, and the closed-form probes' refits (the four compares above:
# 0.93-1.21 when the held-out fold chose the epoch; r52-17's whole compare since, 0.70-0.82 of
# its estimate beside a CPU hog, bench/quick_estimate.py; a store's first compare then measures it)
CV_OVER_TRAINING = 1.2
# A training step's fixed cost, whatever its batch (the optimizer's update, the launch of every
# op): 0.18 s a step at batch 1 on 2 cores (a fine-tune of 64 demo texts: 0.195 s a step, its
# ~40 tokens a text 0.015 s of it at the typical rate; LoRA r512 0.154 s); a GPU's launches
STEP_SECONDS = {"cpu": 0.18, "cpu-amx": 0.18, "cpu-fp32": 0.18, "cuda": 0.03}
# Early stopping's share of a fine-tune's planned steps (the search's rounds included) before any
# finished run measured it here: the median of practical-recipe runs (BENCHMARKS.md)
UNMEASURED_STOP_SHARE = 0.7


# How far an estimate may be off where it cannot know: rates typical of the device (no run of
# this backbone measured here yet) or other work on the machine moving under it. The range it
# says is seconds / spread to seconds x spread (bench/quick_estimate.py --kinds measures them).
UNSURE_SPREAD = 2.0
BUSY_SPREAD = 1.5  # measured rates, other work on the CPU: the share it leaves moves


@dataclass
class Estimate:
    """What a job will cost here: ``seconds`` (the point the bar's time left starts from), what
    it is built from (``basis``, in words) and how sure it is (``measured``: from rates this
    machine measured; else typical of the device, and ``low`` / ``high`` say a range). Training
    adds ``stop`` (early stopping's expected share of the planned steps, which the bar reads),
    ``per_run``, ``runs`` (to train) and ``stored`` (opened, not trained), ``validated`` (the
    heads whose cross-validation is due, stored ones too) and ``left_out`` (the note on heads a
    launch leaves out)."""

    seconds: float
    basis: str
    measured: bool = False
    low: float | None = None
    high: float | None = None
    stop: float | None = None
    per_run: float = 0.0
    runs: int = 1
    stored: int = 0
    left_out: str = ""
    validated: int = 0
    base: float | None = None  # before the finished jobs of its kind calibrated it

    def __post_init__(self):
        if not self.measured and self.low is None and self.high is None:
            self.low, self.high = self.seconds / UNSURE_SPREAD, self.seconds * UNSURE_SPREAD

    @property
    def text(self) -> str:
        """``about 3 min``, ``about 40 s``; where it cannot know, its range (``1-4 min``)."""
        if self.low is None or self.high is None or self.high < 1.5 * self.low:
            return about(self.seconds)
        if self.high < 90:
            return f"{max(self.low, 1):.0f}-{self.high:.0f} s"
        return f"{max(self.low / 60, 1):.0f}-{self.high / 60:.0f} min"

    @property
    def sure(self) -> str:
        """How sure it is, in words (after its :attr:`basis`)."""
        if self.low is None or self.high is None or self.high < 1.5 * self.low:
            return "measured on this machine"
        return (
            "a range: "
            + ("measured here, with" if self.measured else "rates typical of the device, not")
            + (" the other work on this machine moving" if self.measured else " measured here yet")
        )

    def widened(self, spread: float, why: str) -> Estimate:
        """The same point, its range at least ``/ spread`` to ``x spread`` (``why``: what moves
        it, added to the basis)."""
        low = min(self.low if self.low is not None else self.seconds, self.seconds / spread)
        high = max(self.high if self.high is not None else self.seconds, self.seconds * spread)
        return replace(self, low=low, high=high, basis=self.basis + (f"; {why}" if why else ""))

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> Estimate:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})


def about(seconds: float) -> str:
    """``about 3 min`` / ``about 40 s``."""
    return f"about {seconds / 60:.0f} min" if seconds >= 90 else f"about {seconds:.0f} s"


def measured_rate(rates: list[float]) -> float:
    """The rate an estimate uses of finished runs' ``rates`` (higher is faster)."""
    return float(np.quantile(rates, RATE_QUANTILE))


def measured_basis(n: int, what: str, device: str) -> str:
    """How a measured rate was taken, for an estimate's basis."""
    return (
        f"upper quartile of {n} finished {what} with this backbone on {device}"
        if n > 1
        else f"from 1 finished {what} with this backbone on {device}"
    )


def typical_kind(device: str, precision: str) -> str:
    """Which of :data:`TYPICAL_RATES` ``device`` ("cpu" or "cuda") is at ``precision`` (a
    config's: ``auto`` is bf16 on CPUs that do it natively)."""
    if device == "cpu" and precision != "fp16":  # fp16 is refused on a CPU when training
        import torch  # noqa: PLC0415 (both: only an estimate without runs needs them)

        from ..core.devices import cpu_has_amx, resolve_precision  # noqa: PLC0415

        if resolve_precision(precision, torch.device("cpu")) == "fp32":
            return "cpu-fp32"
        if cpu_has_amx():
            return "cpu-amx"
    return device


def typical_rates(device: str, precision: str) -> tuple[float, float, float]:
    """(training, feature pass, adapting) tokens x parameters per second typical of ``device``
    at ``precision`` (:func:`typical_kind`)."""
    return TYPICAL_RATES[typical_kind(device, precision)]


def text_tokens(dataset: LongTailDataset, max_length: int) -> np.ndarray:
    """Each training example's approximate tokens: 4 characters a token and [CLS] and [SEP],
    capped at max length."""
    frame = dataset.splits["train"]
    chars = frame["text"].str.len() + frame["text_b"].str.len()
    return np.minimum(chars.to_numpy() / 4 + 2, max_length)


def mean_tokens(dataset: LongTailDataset, max_length: int) -> float:
    """Approximate tokens per training example (:func:`text_tokens`), as a run counts them when
    it records its ``train_tokens_per_second`` (batches are grouped by length, so their padding
    is small): within 6% of the offline MiniLM's tokenizer on the demo, r52-lt and a ticket CSV
    (a prompt template adds a few more)."""
    return float(text_tokens(dataset, max_length).mean())


def class_factor(classes: int, measured: int = TYPICAL_CLASSES, heads: str = "all") -> float:
    """How much more a quick-mode head costs a training example over ``classes`` classes than
    over ``measured``: ``heads`` ``all``, every head of a compare (:data:`HEAD_CLASS_SCALE`);
    ``cls``, a CLS head alone (:data:`CLS_HEAD_CLASS_POWER`)."""
    if heads == "cls":
        return (
            max(classes, TYPICAL_CLASSES) / max(measured, TYPICAL_CLASSES)
        ) ** CLS_HEAD_CLASS_POWER
    return (1 + classes / HEAD_CLASS_SCALE) / (1 + measured / HEAD_CLASS_SCALE)


def with_busy(
    estimate: Estimate, busy: float, device: str, serial: float = 0.0, serial_busy: float = 1.0
) -> Estimate:
    """``estimate`` on a CPU that other work slows ``busy`` times (the start, imports on one
    thread, excepted; ``serial`` seconds of one thread's work slowed ``serial_busy`` times):
    longer, and a range, since that work moves while the job runs."""
    if busy <= 1.05 or device != "cpu":
        return estimate
    start = min(STARTUP_SECONDS, estimate.seconds)

    def slowed(seconds: float | None) -> float | None:
        if seconds is None:
            return None
        one = min(serial, max(seconds - start, 0))
        return min(seconds, start) + max(seconds - start - one, 0) * busy + one * serial_busy

    return replace(
        estimate,
        seconds=slowed(estimate.seconds),
        per_run=estimate.per_run * busy,
        low=slowed(estimate.low),
        high=slowed(estimate.high),
    ).widened(
        BUSY_SPREAD,
        f"x{busy:.1f} for the other work on this CPU now (the cores it leaves the launch, "
        "measured as the estimate was made; it moves while the job runs)",
    )


def alike_records(
    runs: list[Run] | None, model_name: str, mode: str, device: str
) -> list[RunRecord]:
    """The records of ``runs`` that measure a launch here: the same backbone and mode, on the
    same kind of device."""
    return [
        run.record
        for run in runs or []
        if run.record.model.name == model_name
        and run.record.mode == mode
        and run.record.timing.device_type == device
    ]
