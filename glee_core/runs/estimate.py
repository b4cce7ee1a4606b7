"""Rough wall-time estimates for a planned set of runs (the Train page shows them).

Calibrated on finished runs in the store with the same backbone, mode and device when there are
any (their measured training tokens per second, so that a run on short texts says what one on
long texts costs); otherwise from the backbone's size and a token throughput typical of the
device and its precision.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ..data.datasets import LongTailDataset
from ..models.config import TrainConfig
from ..models.modes import MODE_LABELS
from ..models.search import search_cost
from .rates import (
    CV_OVER_TRAINING,
    HEAD_EXAMPLES_PER_S,
    HEAD_OVERHEAD_SECONDS,
    STARTUP_SECONDS,
    STEP_SECONDS,
    UNMEASURED_STOP_SHARE,
    Estimate,
    alike_records,
    class_factor,
    mean_tokens,
    measured_basis,
    measured_rate,
    text_tokens,
    typical_kind,
    typical_rates,
    with_busy,
)
from .record import RunRecord
from .store import Run


@dataclass(frozen=True)
class Workload:
    """What a launch does, as its estimate reads it (the launch's plan answers the last four):
    ``n_runs`` runs of ``config`` on ``dataset`` by a backbone of ``parameters`` parameters
    (``model_name``: whose finished runs calibrate the rates) on ``device``.
    ``feature_passes``: the frozen backbone's passes still to run (one per input format whose
    features are not cached yet). ``lp_ft_stages``: the LP-FT heads still to fit (None: one a
    run; the quick compare's stored heads are re-used, so after it none). ``rate_searched``:
    the rate searched once for this backbone and data is stored already
    (``glee_core.train.plan.searched_rate``): no search to pay. ``validate``: the quick-mode
    heads whose cross-validation is due (the plan's: stored runs made without it too; None: the
    ``n_runs`` trained)."""

    dataset: LongTailDataset
    n_runs: int
    config: TrainConfig
    model_name: str
    parameters: int
    device: str
    feature_passes: float = 2
    lp_ft_stages: int | None = None
    rate_searched: bool = False
    validate: int | None = None

    @property
    def validated(self) -> int:
        """The heads whose cross-validation the estimate counts."""
        return self.n_runs if self.validate is None else self.validate


def estimate_seconds(work: Workload, runs: list[Run] | None = None, busy: float = 1.0) -> Estimate:
    """The :class:`Estimate` of ``work`` (its config resolved here: the dataset's length and
    batch size, the recipe's search and floor on steps). Fine-tuning: its planned steps times
    early stopping's share of them (``stop``, also returned: the job's bar reads it,
    ``glee_core.core.progress.ProgressState.share``), with the learning-rate search's extra
    rounds and LP-FT's quick-mode head; frozen: measured runs carry their early stopping.
    ``runs``: finished runs to calibrate on (the store's, as the app already holds them): those
    with the same backbone, mode and device give the measured rates. ``busy``: how much slower
    the other work on this CPU makes it (:func:`glee_core.runs.busy.other_work`, measured by
    the caller)."""
    return with_busy(_estimate_seconds(work, runs), busy, work.device)


def _estimate_seconds(work: Workload, runs: list[Run] | None) -> Estimate:
    dataset, n_runs, device = work.dataset, work.n_runs, work.device
    config = work.config.resolved(dataset.max_length, dataset.batch_size)
    work = replace(work, config=config)
    parameters = work.parameters
    n_train = min(config.limit or len(dataset.splits["train"]), len(dataset.splits["train"]))
    tokens = mean_tokens(dataset, config.max_length)
    alike = {
        mode: alike_records(runs, work.model_name, mode, device)
        for mode in {"frozen", "finetune", config.mode}
    }
    if config.frozen:
        validated = [
            (run.metrics.cv, len(run.record.dataset.class_counts))
            for run in runs or []
            if run.record in alike["frozen"] and run.metrics.cv is not None
        ]
        return frozen_estimate(work, alike["frozen"], validated)
    rate, basis, measured = _training_rate(config, alike, tokens, parameters, device)
    epochs = config.planned_epochs(n_train)
    step, scoring, costs = _option_costs(config, dataset, device)
    basis += costs
    n_eval = len(dataset.splits["dev"]) * epochs * scoring + len(dataset.splits["test"])
    search = 0.0 if work.rate_searched else search_cost(config, n_train)
    stop, stop_words = _stop_share(measured)
    overhead = _step_overhead(config, measured, device)
    base = (n_train * epochs * (step / rate + overhead) + n_eval / (rate * 4)) * stop
    per_run = base * (1 + search)
    if epochs > config.epochs:
        basis += f"; {epochs} epochs to reach {config.min_steps} optimizer steps"
    basis += stop_words
    searches = (1 if config.lr_search == "once" or config.races else n_runs) if search else 0
    if search:
        basis += (
            f"; the learning-rate search on dev ({len(config.lr_grid)} rates, successive "
            f"halving) adds up to {search:.0%} of a run"
            + (", once for the launch" if searches == 1 else " each")
        )
    if work.rate_searched and len(config.lr_grid) > 1:
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
    stages = n_runs if work.lp_ft_stages is None else work.lp_ft_stages
    if config.lp_ft and stages:  # quick mode's heads first (one feature pass)
        heads = replace(work, n_runs=stages, feature_passes=1, validate=None)
        stage = frozen_estimate(heads, alike["frozen"])
        seconds += stage.seconds - STARTUP_SECONDS
        basis += "; LP-FT's heads on the frozen features first"
    elif config.lp_ft:
        basis += "; LP-FT's heads stored (the quick compare's), re-used"
    return Estimate(
        seconds, basis, measured=bool(measured), stop=stop, per_run=per_run, runs=n_runs
    )


def _training_rate(
    config: TrainConfig, alike: dict, tokens: float, parameters: int, device: str
) -> tuple[float, str, list[RunRecord]]:
    """(a training rate in this dataset's examples a second, the basis's words, the records
    measured): the finished runs of this mode with plain steps (a parameter-efficient mode
    without runs of its own: fine-tuning's, an upper bound, since it still runs the encoder
    forward and backward), else the device's typical rate over the backbone's size."""
    mode, records = next(
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
        for record in records
    ]
    if rates:
        basis = measured_basis(len(rates), f"{MODE_LABELS[mode]} run(s)", device)
        return measured_rate(rates), basis, records
    rate = typical_rates(device, config.precision)[0] / parameters / tokens
    return rate, f"backbone size ({parameters / 1e6:.0f}M parameters) on {device}, no runs yet", []


def _stop_share(measured: list[RunRecord]) -> tuple[float, str]:
    """Early stopping ends runs before their planned steps: the share the finished runs measured
    (their steps over those they planned), else a typical one; and the basis's words."""
    shares = [r.timing.stop_share for r in measured if r.timing.stop_share is not None]
    if not shares:
        stop = UNMEASURED_STOP_SHARE
        return stop, f"; early stopping typically ends runs at {stop:.0%} of their planned steps"
    stop = float(np.median(shares))
    return stop, (
        f"; early stopping ends runs at {stop:.0%} of their planned steps (median of "
        f"{len(shares)} finished run(s))"
    )


def _step_overhead(config: TrainConfig, measured: list[RunRecord], device: str) -> float:
    """A step's fixed cost (the optimizer, the launch of every op) a training example, over
    what the rates already hold: they are of batches of the measured runs' size (32 for the
    typical ones), and a smaller batch pays it more often (LoRA at batch 1 was estimated 24 min
    for a job of hours); a larger batch than measured: its saving is in the rates' noise, never
    below them."""
    measured_batch = (
        float(np.median([r.hyperparameters.batch_size for r in measured])) if measured else 32.0
    )
    return STEP_SECONDS[typical_kind(device, config.precision)] * max(
        0.0, 1 / config.batch_size - 1 / measured_batch
    )


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


def frozen_estimate(
    work: Workload, alike: list[RunRecord], validated: list | None = None, heads: str = "all"
) -> Estimate:
    """The quick compare: one feature pass per input format (``work.feature_passes``: plain and
    template) over every split, then heads on the cached states, then the cross-validation
    due. Rates: those of finished frozen runs with this backbone on this device (``alike``:
    their feature pass's tokens/s, their heads' seconds per training example and epoch, early
    stopping included; ``validated``: their cross-validations), else typical ones of the
    device. ``heads``: ``cls`` where one CLS head is trained (the label budget's)."""
    dataset, config, device, n_runs = work.dataset, work.config, work.device, work.n_runs
    passes = work.feature_passes
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
        pass_rate = typical_rates(device, config.precision)[1] / work.parameters
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
        _cross_validation(work, n_train, per_run, validated or [])
        if config.cross_validates(dataset) and (work.validate is None or work.validate)
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


def _cross_validation(work: Workload, n_train: int, per_run: float, validated: list) -> Estimate:
    """The quick compare's cross-validation of ``work.validated`` heads (a small dev split):
    each head trained ``folds`` times on (folds - 1) / folds of train + dev. From the seconds
    finished runs' cross-validations took a head, per text of train + dev, where there are any;
    else from a head's training (``per_run``) times :data:`CV_OVER_TRAINING` a fold.
    ``validated``: the (``CrossValidation`` record, classes) of finished frozen runs like these."""
    dataset, config = work.dataset, work.config
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
    return Estimate(work.validated * per_head, basis, measured=bool(costs))
