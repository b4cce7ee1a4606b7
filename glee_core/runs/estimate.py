"""Rough wall-time estimates for a planned set of runs (the Train page shows them).

Calibrated on finished runs in the store with the same backbone, mode and device when there are
any (their measured training tokens per second, so that a run on short texts says what one on
long texts costs); otherwise from the backbone's size and a token throughput typical of the
device and its precision.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

import numpy as np
import pandas as pd

from ..data.datasets import LongTailDataset
from ..models.config import TrainConfig
from ..models.modes import MODE_LABELS
from ..models.search import search_cost
from .record import RunRecord
from .store import Run

__all__ = [  # what this module offers
    "BUSY_SPREAD",
    "CLS_HEAD_CLASS_POWER",
    "CV_OVER_TRAINING",
    "Estimate",
    "HEAD_EXAMPLES_PER_S",
    "HEAD_CLASS_SCALE",
    "HEAD_OVERHEAD_SECONDS",
    "RATE_QUANTILE",
    "STARTUP_SECONDS",
    "STEP_SECONDS",
    "TYPICAL_CLASSES",
    "TYPICAL_RATES",
    "UNMEASURED_STOP_SHARE",
    "UNSURE_SPREAD",
    "about",
    "alike_records",
    "class_factor",
    "estimate_seconds",
    "frozen_estimate",
    "mean_tokens",
    "measured_basis",
    "measured_rate",
    "text_tokens",
    "typical_kind",
    "typical_rates",
    "with_busy",
]

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


def estimate_seconds(
    dataset: LongTailDataset,
    n_runs: int,
    config: TrainConfig,
    model_name: str,
    parameters: int,
    device: str,
    runs: list[Run] | None = None,
    feature_passes: float = 2,
    lp_ft_stages: int | None = None,
    rate_searched: bool = False,
    busy: float = 1.0,
    validate: int | None = None,
) -> Estimate:
    """The :class:`Estimate` of ``n_runs`` runs of ``config`` (resolved here:
    the dataset's length and batch size, the recipe's search and floor on steps). Fine-tuning:
    its planned steps times early stopping's share of them (``stop``, also returned: the job's
    bar reads it, ``glee_core.core.events.ProgressState.share``), with the learning-rate
    search's extra rounds and LP-FT's quick-mode head; frozen: measured runs carry their early
    stopping. ``runs``: finished runs to calibrate on (the store's, as the app already holds
    them): those with the same backbone, mode and device give the measured rates.
    ``feature_passes``: the frozen backbone's passes still to run (one per input format whose
    features are not cached yet). ``lp_ft_stages``: the LP-FT heads still to fit (None: one a
    run; the quick compare's stored heads are re-used, so after it none). ``rate_searched``:
    the rate searched once for this backbone and data is stored already
    (``glee_core.train.plan.searched_rate``): no search to pay. ``busy``: how much slower
    the other work on this CPU makes it (:func:`glee_core.runs.busy.other_work`, measured by the
    caller). ``validate``: the quick-mode heads whose cross-validation is due (the plan's: stored
    runs made without it too; None: the ``n_runs`` trained)."""
    estimate = _estimate_seconds(
        dataset,
        n_runs,
        config,
        model_name,
        parameters,
        device,
        runs,
        feature_passes,
        lp_ft_stages,
        rate_searched,
        n_runs if validate is None else validate,
    )
    return with_busy(estimate, busy, device)


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


def _estimate_seconds(
    dataset,
    n_runs,
    config,
    model_name,
    parameters,
    device,
    runs,
    feature_passes,
    lp_ft_stages,
    rate_searched,
    validate,
) -> Estimate:
    config = config.resolved(dataset.max_length, dataset.batch_size)
    n_train = min(config.limit or len(dataset.splits["train"]), len(dataset.splits["train"]))
    tokens = mean_tokens(dataset, config.max_length)
    alike = {
        mode: alike_records(runs, model_name, mode, device)
        for mode in {"frozen", "finetune", config.mode}
    }
    if config.frozen:
        validated = [
            (run.metrics.cv, len(run.record.dataset.class_counts))
            for run in runs or []
            if run.record in alike["frozen"] and run.metrics.cv is not None
        ]
        return frozen_estimate(
            dataset,
            n_runs,
            config,
            parameters,
            device,
            alike["frozen"],
            passes=feature_passes,
            validated=validated,
            validate=validate,
        )
    # a parameter-efficient mode still runs the encoder forward and backward: without runs of
    # its own, fine-tuning's rate is its measure (an upper bound)
    measured = next(
        (
            (mode, records)
            for mode in (config.mode, "finetune")
            if (records := [r for r in alike[mode] if _plain_rate(r)])
        ),
        (config.mode, []),
    )
    # a run's tokens per second, in this dataset's examples; runs of releases that did not
    # record it: its examples per second, scaled by max length
    rates = [
        record.timing.train_tokens_per_second / tokens
        if record.timing.train_tokens_per_second
        else record.timing.train_examples_per_second
        * record.hyperparameters.max_length
        / config.max_length
        for record in measured[1]
    ]
    if rates:
        rate = measured_rate(rates)
        basis = measured_basis(len(rates), f"{MODE_LABELS[measured[0]]} run(s)", device)
    else:
        rate = typical_rates(device, config.precision)[0] / parameters / tokens
        basis = f"backbone size ({parameters / 1e6:.0f}M parameters) on {device}, no runs yet"
    epochs = config.planned_epochs(n_train)
    step, scoring, costs = _option_costs(config, dataset, device)
    basis += costs
    n_eval = len(dataset.splits["dev"]) * epochs * scoring + len(dataset.splits["test"])
    search = 0.0 if rate_searched else search_cost(config, n_train)
    # early stopping ends runs before their planned steps: the share measured on finished runs
    # (their steps over those they planned), else a typical one
    shares = [r.timing.stop_share for r in measured[1] if r.timing.stop_share is not None]
    stop = float(np.median(shares)) if shares else UNMEASURED_STOP_SHARE
    # a step's fixed cost (the optimizer, the launch of every op) over the batch: the rates are
    # of batches of the measured runs' size (32 for the typical ones); a smaller batch pays it
    # more often (LoRA at batch 1 was estimated 24 min for a job of hours)
    measured_batch = (
        float(np.median([r.hyperparameters.batch_size for r in measured[1]]))
        if measured[1]
        else 32.0
    )
    overhead = STEP_SECONDS[typical_kind(device, config.precision)] * max(
        0.0, 1 / config.batch_size - 1 / measured_batch
    )  # a larger batch than measured: its saving is in the rates' noise, never below them
    base = (n_train * epochs * (step / rate + overhead) + n_eval / (rate * 4)) * stop
    per_run = base * (1 + search)
    if epochs > config.epochs:
        basis += f"; {epochs} epochs to reach {config.min_steps} optimizer steps"
    basis += (
        f"; early stopping ends runs at {stop:.0%} of their planned steps (median of "
        f"{len(shares)} finished run(s))"
        if shares
        else f"; early stopping typically ends runs at {stop:.0%} of their planned steps"
    )
    searches = (1 if config.lr_search == "once" or config.races else n_runs) if search else 0
    if search:
        basis += (
            f"; the learning-rate search on dev ({len(config.lr_grid)} rates, successive "
            f"halving) adds up to {search:.0%} of a run"
            + (", once for the launch" if searches == 1 else " each")
        )
    if rate_searched and len(config.lr_grid) > 1:
        basis += "; the learning rate searched once before for this backbone and data, re-used"
    seconds = STARTUP_SECONDS + n_runs * base + searches * base * search
    if config.races and n_runs > 1:  # one head trains to the end; the others a round or two
        race = search_cost(config, n_train, candidates=n_runs)
        # the search's winner is the first head's trial in the race: its rounds count there
        seconds = STARTUP_SECONDS + base * (1 + race + search)
        basis += (
            f"; the {n_runs} heads race (successive halving on dev): about "
            f"{1 + race:.1f} runs' training, not {n_runs}"
        )
    stages = n_runs if lp_ft_stages is None else lp_ft_stages
    if config.lp_ft and stages:  # quick mode's heads first (one feature pass)
        stage = frozen_estimate(
            dataset, stages, config, parameters, device, alike["frozen"], passes=1
        )
        seconds += stage.seconds - STARTUP_SECONDS
        basis += "; LP-FT's heads on the frozen features first"
    elif config.lp_ft:
        basis += "; LP-FT's heads stored (the quick compare's), re-used"
    return Estimate(seconds, basis, measured=bool(rates), stop=stop, per_run=per_run, runs=n_runs)


def _plain_rate(record: RunRecord) -> bool:
    """Did the run record its training rate, and one of plain steps (the recipe options that
    cost more a step, :func:`_option_costs`, off)?"""
    hyper = record.hyperparameters
    return bool(record.timing.train_examples_per_second) and not (
        hyper.supcon or hyper.self_distill
    )


def _option_costs(config: TrainConfig, dataset: LongTailDataset, device: str):
    """What the recipe options add: (a step's cost, dev scoring's, the basis's words).
    Self-distillation's teacher forwards each batch again (about a third of a step: a backward
    costs two forwards); self-ensemble scores dev twice (the weights and their average);
    ``--supcon`` where a class is rare draws class-balanced batches, which pad more than
    length-grouped ones (a CPU forwards them in pieces; BENCHMARKS "How should I tune?")."""
    step, scoring, words = 1.0, 1.0, ""
    if config.self_distill:
        step += 1 / 3
        words += "; self-distillation's teacher forwards each batch again (+1/3 a step)"
    if config.self_ensemble:
        scoring = 2.0
        words += "; self-ensemble scores dev twice (the weights and their average)"
    if not config.supcon:
        return step, scoring, words
    from ..data.encoding import (  # noqa: PLC0415 (torch: estimates run in pages)
        balanced_padding,
        rare_for_pairs,
    )

    labels = pd.factorize(dataset.splits["train"]["label"])[0]
    if rare_for_pairs(labels, config.batch_size):
        lengths = text_tokens(dataset, config.max_length).astype(int)
        padding = balanced_padding(lengths, labels, config.batch_size, pieces=device == "cpu")
        step *= padding
        words += f"; supcon's class-balanced batches pad x{padding:.1f} the tokens a step"
    return step, scoring, words


def class_factor(classes: int, measured: int = TYPICAL_CLASSES, heads: str = "all") -> float:
    """How much more a quick-mode head costs a training example over ``classes`` classes than
    over ``measured``: ``heads`` ``all``, every head of a compare (:data:`HEAD_CLASS_SCALE`);
    ``cls``, a CLS head alone (:data:`CLS_HEAD_CLASS_POWER`)."""
    if heads == "cls":
        return (
            max(classes, TYPICAL_CLASSES) / max(measured, TYPICAL_CLASSES)
        ) ** CLS_HEAD_CLASS_POWER
    return (1 + classes / HEAD_CLASS_SCALE) / (1 + measured / HEAD_CLASS_SCALE)


def frozen_estimate(
    dataset: LongTailDataset,
    n_runs: int,
    config: TrainConfig,
    parameters: int,
    device: str,
    alike: list[RunRecord],
    passes: float = 2,
    validated: list | None = None,
    heads: str = "all",
    validate: int | None = None,
) -> Estimate:
    """The quick compare: one feature pass per input format (``passes``: plain and template)
    over every split, then heads on the cached states. Rates: those of finished frozen
    runs with this backbone on this device (their feature pass's tokens/s, their heads' seconds
    per training example and epoch, early stopping included), else typical ones of the device.
    ``validate``: the heads whose cross-validation is due (None: the ``n_runs``)."""
    epochs = config.epochs
    n_train = min(config.limit or len(dataset.splits["train"]), len(dataset.splits["train"]))
    tokens = mean_tokens(dataset, config.max_length)
    pass_rates = [
        r.timing.feature_pass_tokens_per_second
        for r in alike
        if r.timing.feature_pass_tokens_per_second
    ]
    # a head's whole run (training with its dev scoring and early stopping, test), per training
    # example and planned epoch: what the run measured, scaled to this launch (its classes too)
    classes = dataset.num_classes
    head_costs = [
        (r.timing.train_seconds + (r.timing.test_seconds or 0.0))
        / (
            min(r.hyperparameters.limit or r.dataset.sizes["train"], r.dataset.sizes["train"])
            * r.hyperparameters.epochs
        )
        * class_factor(classes, len(r.dataset.class_counts) or classes, heads)
        for r in alike
        if r.timing.train_seconds
        and r.timing.train_examples_per_second != 0  # by steps: not a closed-form probe
        and r.dataset.sizes.get("train")
    ]
    measured = []
    if pass_rates:
        pass_rate = measured_rate(pass_rates)
        measured.append(f"feature pass {pass_rate:,.0f} tokens/s")
    else:
        pass_rate = typical_rates(device, config.precision)[1] / parameters
    if head_costs:
        per_run = n_train * epochs / measured_rate([1 / cost for cost in head_costs])
        measured.append(f"heads {per_run:.1f} s each")
    else:
        kind = typical_kind(device, config.precision)
        per_run = HEAD_OVERHEAD_SECONDS[kind] + n_train * epochs / HEAD_EXAMPLES_PER_S[
            kind
        ] * class_factor(classes, heads=heads)
    n_all = n_train + len(dataset.splits["dev"]) + len(dataset.splits["test"])
    total = STARTUP_SECONDS + n_runs * per_run + passes * n_all * tokens / pass_rate
    cv = (
        _cross_validation(
            dataset,
            n_runs if validate is None else validate,
            config,
            n_train,
            per_run,
            validated or [],
        )
        if config.cross_validates(dataset) and (validate is None or validate)
        else None
    )
    passes_text = (
        "the features are cached, heads only"
        if not passes
        else f"{passes:g} feature pass(es) (one per input format not cached), then heads"
        if float(passes).is_integer()
        else f"the features of the texts not cached ({passes:.2f} of a pass), then heads"
    )
    basis = f"frozen backbone: {passes_text}; " + (
        f"{' and '.join(measured)} "
        f"({measured_basis(max(len(pass_rates), len(head_costs)), 'frozen run(s)', device)})"
        if measured
        else f"rates typical of {device}, no frozen runs with this backbone yet"
    )
    if len(measured) < 2 and measured:
        basis += ", the rest typical of the device"
    if cv is not None:
        total += cv.seconds
        basis += f"; then {cv.basis}"
    return Estimate(total, basis, measured=bool(measured), per_run=per_run, runs=n_runs)


def _cross_validation(
    dataset: LongTailDataset,
    n_runs: int,
    config: TrainConfig,
    n_train: int,
    per_run: float,
    validated: list,
) -> Estimate:
    """The quick compare's cross-validation of ``n_runs`` heads (a small dev split): each head
    trained ``folds`` times on (folds - 1) / folds of train + dev. From the seconds finished
    runs' cross-validations took a head, per text of train + dev, where there are any; else
    from a head's training (``per_run``) times :data:`CV_OVER_TRAINING` a fold. ``validated``:
    the (``CrossValidation`` record, classes) of finished frozen runs like these."""
    pooled = n_train + len(dataset.splits["dev"])
    costs = [
        cv.seconds / cv.texts * class_factor(dataset.num_classes, classes or dataset.num_classes)
        for cv, classes in validated
        if cv.texts and cv.folds == config.folds
    ]
    if costs:
        per_head = pooled / measured_rate([1 / c for c in costs])
        basis = (
            f"{config.folds}-fold cross-validation of each head, {per_head:.1f} s a head "
            f"({measured_basis(len(costs), 'cross-validation(s)', 'this machine')})"
        )
    else:
        per_head = (
            per_run
            * CV_OVER_TRAINING
            * config.folds
            * (config.folds - 1)
            / config.folds
            * pooled
            / max(n_train, 1)
        )
        basis = (
            f"{config.folds}-fold cross-validation of each head ({CV_OVER_TRAINING:g} x "
            "a head's training a fold, none measured yet)"
        )
    return Estimate(n_runs * per_head, basis, measured=bool(costs))
