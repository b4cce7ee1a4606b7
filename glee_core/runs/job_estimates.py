"""What the jobs other than training cost here: adapting a backbone, the data reports (health,
the label budget), the pool's suggestions, the PDF report and an export.

Each estimate is built the same way: from what the job will do (texts to encode, folds, heads,
fractions x seeds, charts) at rates this machine measured where it has them (its finished frozen
runs' feature pass) and rates typical of the device where not (then the estimate says a range);
then :func:`settle` counts the other work on the CPU now (``Machine.busy``) and the finished jobs
of the same kind here (the median of their real over estimated time, which carries whatever
the formula misses). ``bench/quick_estimate.py --kinds`` launches each kind as the app does and
prints estimate against real."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..budget.options import BudgetOptions
from ..core.environment import core_count
from ..data.datasets import LongTailDataset
from ..models.config import TrainConfig
from ..pool.files import PoolSize
from .busy import one_thread_slowdown
from .estimate import Workload, frozen_estimate
from .rates import (
    BUSY_SPREAD,
    STARTUP_SECONDS,
    Estimate,
    alike_records,
    mean_tokens,
    measured_basis,
    measured_rate,
    typical_rates,
    with_busy,
)
from .store import Run

# The data health check's parts after its feature pass: each fold's probe (lbfgs over every
# class) costs PROBE_SECONDS a fit text x class x hidden unit, cleanlab's reading
# CLEANLAB_SECONDS a training text x class beyond CLEANLAB_OVERHEAD; fitted on a 2,000-class
# upload and demo (bench/quick_estimate.py --kinds; BENCHMARKS.md, "Data reports")
PROBE_SECONDS = 1.3e-9
PROBE_OVERHEAD = 0.05
CLEANLAB_SECONDS = 5.4e-7
CLEANLAB_OVERHEAD = 1.0
# The PDF report: its start (imports, fonts) and tables, each run chart drawn through vl-convert,
# and the per-class parts (the calibration's dev sweeps, the rows of a class table), a class
# counted up to the 120 the charts draw one by one (past them the rarer ones are pooled);
# measured on 2 cores (bench/report_scale.py: 8.1 s at 12 classes x 19 heads, 14-16 s at
# 1,000-1,500 classes x 3)
PDF_SECONDS = {"start": 3.0, "chart": 0.9, "run": 0.05, "class": 0.02}
PDF_CHARTS = 6  # the run charts a report draws (views.charts.RUN_CHARTS in the report)
# An export by format: seconds beyond the start, a million parameters (writing the weights, the
# ONNX graph's trace and check), and a test text scored for the card's parity check; ONNX's
# measured on 2 cores (bench/quick_estimate.py: 12-14 s in all for MiniLM, demo and r52-17)
EXPORT_SECONDS = {
    "glee": (0.01, 0.0),
    "transformers": (0.05, 0.002),
    "peft": (0.05, 0.002),
    "onnx": (0.15, 0.004),
}


@dataclass
class Machine:
    """This machine as an estimate reads it: its device (``cpu`` or ``cuda``), how much slower
    the other work on its CPU makes a job now (``busy``, 1: none), the finished runs whose
    measured rates calibrate it, and the finished jobs of each kind (``past``: kind -> (the
    estimate it launched with before this calibration, the seconds it took))."""

    device: str = "cpu"
    busy: float = 1.0
    runs: list[Run] = field(default_factory=list)
    past: dict[str, list[tuple[float, float]]] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelSize:
    """A backbone's size as its config says it (no weights loaded)."""

    name: str
    parameters: int
    hidden: int

    @classmethod
    def of(cls, name: str) -> ModelSize:
        from ..models.backbone import (  # noqa: PLC0415 (transformers: estimates run in pages)
            estimate_parameters,
            hidden_size,
        )

        return cls(name, estimate_parameters(name), hidden_size(name))


def settle(estimate: Estimate, machine: Machine, kind: str, serial: float = 0.0) -> Estimate:
    """``estimate`` with the other work on the CPU now counted (:func:`with_busy`) and, where
    ``n`` jobs of ``kind`` finished here, times the median of their real over estimated seconds
    taken ``n / (n + 1)`` of the way (in log terms): one job is one draw of a short job's
    start-up noise (a predict of 8 s took 12 s the next time), so it moves the estimate part of
    the way. It keeps the estimate before that as ``base``, which the next calibration reads.
    ``serial``: the seconds of it on one thread (:func:`one_thread_slowdown`)."""
    estimate = with_busy(
        estimate,
        machine.busy,
        machine.device,
        serial,
        one_thread_slowdown(machine.busy, core_count()),
    )
    estimate.base = estimate.seconds
    ratios = [real / base for base, real in machine.past.get(kind, []) if base > 0 and real > 0]
    if not ratios:
        return estimate
    measured = float(np.median(ratios))
    ratio = measured ** (len(ratios) / (len(ratios) + 1))
    spread = BUSY_SPREAD if machine.busy > 1.05 and machine.device == "cpu" else 1.0
    seconds = estimate.seconds * ratio
    return replace(
        estimate,
        seconds=seconds,
        measured=True,
        low=seconds / spread if spread > 1 else None,
        high=seconds * spread if spread > 1 else None,
        basis=estimate.basis + f"; x{ratio:.2f}: what {len(ratios)} finished {kind} job(s) "
        f"here took against their estimates (x{measured:.2f}), trusted "
        f"{len(ratios)}/{len(ratios) + 1} of the way",
    )


def _report_config(dataset: LongTailDataset, max_length: int | None) -> TrainConfig:
    return TrainConfig(
        mode="frozen", max_length=max_length or dataset.max_length, cv_folds=None, choose_by="dev"
    ).resolved(dataset.max_length, dataset.batch_size)


def estimate_report_seconds(
    dataset: LongTailDataset, options, size: ModelSize, machine: Machine, passes: int
) -> Estimate:
    """A data report of ``dataset`` (``options``: a ``HealthOptions`` or a ``BudgetOptions``,
    which says which) with the backbone of ``size``: the job's start, its
    feature pass (``passes``: 1, or 0 when the features are cached), then the health check's
    probe a fold (:data:`PROBE_SECONDS`) and cleanlab, or the budget's quick-mode head for each
    fraction and seed, each trained for the whole split's steps."""
    kind = "budget" if isinstance(options, BudgetOptions) else "health"
    config = _report_config(dataset, options.max_length)
    n_train = len(dataset.splits["train"])
    alike = alike_records(machine.runs, size.name, "frozen", machine.device)
    heads = len(options.fraction_list) * len(options.seed_list) if kind == "budget" else 0
    work = Workload(
        dataset, heads, config, size.name, size.parameters, machine.device, feature_passes=passes
    )
    frozen = frozen_estimate(work, alike, heads="cls")  # the budget retrains one CLS head
    seconds, basis, serial = frozen.seconds, frozen.basis, 0.0
    if kind == "budget":
        basis += (
            f"; {heads} heads ({len(options.fraction_list)} fractions x "
            f"{len(options.seed_list)} seeds), each trained for the whole split's steps"
        )
    else:
        fit = n_train * (options.folds - 1) / options.folds
        probe = options.folds * _probe_seconds(fit, dataset.num_classes, size)
        cleanlab = CLEANLAB_OVERHEAD + CLEANLAB_SECONDS * n_train * dataset.num_classes
        seconds += probe + cleanlab
        serial = probe + cleanlab
        basis += (
            f"; {options.folds} probe fits over {dataset.num_classes} classes (about "
            f"{probe:.0f} s) and cleanlab's reading (about {cleanlab:.0f} s), at the rates "
            "measured for them on 2 cores"
        )
    return settle(Estimate(seconds, basis, measured=frozen.measured), machine, kind, serial)


def _probe_seconds(texts: float, classes: int, size: ModelSize) -> float:
    """One fit of the closed-form class-balanced probe on ``texts`` texts' features over
    ``classes`` classes (:data:`PROBE_SECONDS` a text x class x hidden unit)."""
    return PROBE_OVERHEAD + PROBE_SECONDS * texts * classes * size.hidden


def estimate_pool_seconds(
    dataset: LongTailDataset,
    pool: PoolSize,
    size: ModelSize,
    machine: Machine,
    passes: int | None,
) -> Estimate:
    """Scoring the pool without the job's start: where no quick compare stored a head (``passes``
    given: 1 when the data's features are not cached either, else 0), the data's feature pass
    and a class-balanced probe fitted on it (:data:`PROBE_SECONDS` a text x class x hidden
    unit); then the pool's feature pass (its texts at their characters / 4 tokens, capped at
    the data's max length) and the near-duplicate search against the labelled texts
    (suggestions and self-training both run them). ``passes`` None: a stored head scores."""
    config = _report_config(dataset, None)
    alike = alike_records(machine.runs, size.name, "frozen", machine.device)
    seconds, basis = 0.0, ""
    if passes is not None:  # no stored head: the probe, on the data's features
        work = Workload(
            dataset, 0, config, size.name, size.parameters, machine.device, feature_passes=passes
        )
        frozen = frozen_estimate(work, alike)
        n_train = len(dataset.splits["train"])
        probe = _probe_seconds(n_train, dataset.num_classes, size)
        seconds += frozen.seconds - STARTUP_SECONDS + probe
        basis = (
            f"{frozen.basis}; a probe over {dataset.num_classes} classes (about {probe:.0f} s); "
        )
    encode, rate, measured = _encoding(pool, size, config.max_length, machine)
    labelled = sum(len(frame) for frame in dataset.splits.values())
    neighbours = 1e-9 * pool.texts * labelled * size.hidden  # one matrix product, both ways
    basis += (
        f"the pool's {pool.texts:,} text(s) encoded at {rate:,.0f} tokens/s "
        f"({'measured' if measured else 'typical of ' + machine.device}) and matched against "
        "the labelled texts"
    )
    return Estimate(seconds + encode + neighbours, basis, measured=measured)


def estimate_suggest_seconds(
    dataset: LongTailDataset, pool: PoolSize, size: ModelSize, machine: Machine, passes: int | None
) -> Estimate:
    """The pool's suggestions: the job's start and :func:`estimate_pool_seconds`."""
    scoring = estimate_pool_seconds(dataset, pool, size, machine, passes)
    estimate = Estimate(STARTUP_SECONDS + scoring.seconds, scoring.basis, scoring.measured)
    return settle(estimate, machine, "suggest")


def _encoding(
    texts: PoolSize, size: ModelSize, max_length: int, machine: Machine
) -> tuple[float, float, bool]:
    """(seconds, tokens a second, measured?) of the backbone's forward pass over ``texts``
    (characters / 4 tokens a text, capped at ``max_length``): the feature pass rate of this
    machine's frozen runs with the backbone where it has them, else typical of the device."""
    per_text = min(texts.chars / max(texts.texts, 1) / 4 + 2, max_length)
    rates = [
        r.timing.feature_pass_tokens_per_second
        for r in alike_records(machine.runs, size.name, "frozen", machine.device)
        if r.timing.feature_pass_tokens_per_second
    ]
    rate = (
        measured_rate(rates)
        if rates
        else typical_rates(machine.device, "auto")[1] / size.parameters
    )
    return texts.texts * per_text / rate, rate, bool(rates)


def estimate_predict_seconds(
    texts: PoolSize, size: ModelSize, max_length: int, machine: Machine, members: int = 1
) -> Estimate:
    """Classifying ``texts`` (a CSV's, as its file says) with a classifier on the backbone of
    ``size``: the job's start (the classifier loaded) and its forward pass over the texts; an
    ensemble's, one pass for each of its ``members``."""
    seconds, rate, measured = _encoding(texts, size, max_length, machine)
    basis = (
        f"{texts.texts:,} text(s) at {rate:,.0f} tokens/s "
        f"({'measured' if measured else 'typical of ' + machine.device})"
        + (f", once for each of {members} members" if members > 1 else "")
    )
    return settle(
        Estimate(STARTUP_SECONDS + members * seconds, basis, measured=measured), machine, "predict"
    )


def estimate_pdf_seconds(runs: int, classes: int, machine: Machine) -> Estimate:
    """The PDF report of ``runs`` runs (one setting: its seeds and heads) over ``classes``
    classes: its start, the run charts, and the per-run and per-class parts
    (:data:`PDF_SECONDS`)."""
    shown = min(classes, 120)
    seconds = (
        PDF_SECONDS["start"]
        + PDF_CHARTS * PDF_SECONDS["chart"]
        + runs * PDF_SECONDS["run"]
        + runs * shown * PDF_SECONDS["class"] / 10
    )
    basis = (
        f"{PDF_CHARTS} charts, {runs} run(s) over {classes} classes at the rates "
        "measured for a report on 2 cores"
    )
    return settle(Estimate(seconds, basis), machine, "report")


def estimate_export_seconds(
    form: str, size: ModelSize, texts: int, machine: Machine, members: int = 1
) -> Estimate:
    """An export in ``form`` of a run on the backbone of ``size``: the job's start, writing
    (and for ONNX tracing and checking) the model, and scoring ``texts`` test texts for the
    card's parity check (:data:`EXPORT_SECONDS`); an ensemble's, each of its ``members``."""
    per_million, per_text = EXPORT_SECONDS.get(form, EXPORT_SECONDS["transformers"])
    seconds = STARTUP_SECONDS + members * (per_million * size.parameters / 1e6 + per_text * texts)
    basis = (
        f"a {size.parameters / 1e6:.0f}M-parameter backbone written as {form}"
        + (f" for each of {members} members" if members > 1 else "")
        + f", {texts} test text(s) scored for the parity check"
    )
    return settle(Estimate(seconds, basis), machine, "export")


def estimate_adapt_seconds(
    dataset: LongTailDataset,
    options,
    parameters: int,
    device: str,
    measured: list[dict] | None = None,
) -> Estimate:
    """Adapting a backbone (``options``: ``AdaptOptions``) to ``dataset``'s training texts:
    from finished adaptations of the same backbone on this device (``measured``: their
    records; tokens per second) when there are any, else from ``parameters``: for the masked
    LM counted with the MLM head at the masked share of the positions
    (``estimate_parameters(name, mlm_positions=options.mlm_probability)``: the head's transform
    and vocabulary decoder run only where a token is masked); SimCSE's, the encoder's alone
    (``mlm_positions=0``)."""
    max_length = options.max_length or dataset.max_length
    tokens = (
        len(dataset.splits["train"]) * (1 - options.held_out) * mean_tokens(dataset, max_length)
    )
    # an adaptation's real tokens; those of releases before length-grouped batches (no
    # "tokens_per_epoch") padded each text to its batch's longest and are not comparable
    objective = getattr(options, "objective", "mlm")
    rates = [
        r["tokens_per_epoch"] * r["options"]["epochs"] / r["seconds"]
        for r in measured or []
        if r.get("seconds")
        and r.get("tokens_per_epoch")
        and r.get("objective", "mlm") == objective  # SimCSE runs each text twice
    ]
    if rates:
        rate = measured_rate(rates)
        what = "adaptation(s)" if objective == "mlm" else f"{objective} adaptation(s)"
        basis = measured_basis(len(rates), what, device)
    elif objective == "simcse":  # two passes of the encoder a text, no MLM head
        rate = typical_rates(device, "auto")[2] / parameters / 2
        basis = f"backbone size ({parameters / 1e6:.0f}M parameters) on {device}; SimCSE's two "
        basis += "passes a text"
    else:
        rate = typical_rates(device, "auto")[2] / parameters
        basis = (
            f"backbone size with its MLM head at the masked tokens ({parameters / 1e6:.0f}M "
            f"parameters computed a token) on {device}"
        )
    return Estimate(STARTUP_SECONDS + tokens * options.epochs / rate, basis, measured=bool(rates))
