"""Every kind of work the app runs as a background job, in one registry (:data:`JOB_KINDS`):
its request (:mod:`glee_core.models.requests`), the command that runs it (``python -m glee_core
<name> --request FILE --progress-file F``), its estimate here and what a finished one made.

A page writes a request and returns; the job runs in a process of its own
(:mod:`glee_core.train.jobs`), reports typed progress events (:mod:`glee_core.core.events`) that
one reducer folds, and its bar's time left follows one rule (:func:`glee_core.core.pace.
time_left`). Each estimate is built from what the job will do and this machine's rates
(:class:`Here`): training from its plan (what it must train, the cross-validation due, the
feature passes not cached), the others from :mod:`glee_core.runs.job_estimates`. A new kind is
a request class, an entry here, and its command taking ``--request``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..core.errors import GleeError
from ..data.datasets import LongTailDataset
from ..models.methods import get_method
from ..models.requests import (
    AdaptRequest,
    BudgetRequest,
    ExportRequest,
    HealthRequest,
    PredictRequest,
    ReportRequest,
    SuggestRequest,
    TrainRequest,
)
from ..pool.files import PoolSize, pool_size
from ..runs.estimate import Workload, estimate_seconds
from ..runs.job_estimates import (
    Machine,
    ModelSize,
    estimate_adapt_seconds,
    estimate_export_seconds,
    estimate_pdf_seconds,
    estimate_pool_seconds,
    estimate_predict_seconds,
    estimate_report_seconds,
    estimate_suggest_seconds,
    settle,
)
from ..runs.rates import STARTUP_SECONDS, Estimate
from ..runs.store import Run, RunStore
from .adapted import adapted_backbones


@dataclass
class Here:
    """Where a job would run, as its estimate reads it: the store it writes into, the machine
    (device, other work, finished runs and jobs), the request's dataset where the caller has it
    loaded already, the store's finished runs by id as the caller read them (a launch opens
    them, it does not train them) and the folder of adapted backbones (adapting's measured
    rates)."""

    store: RunStore
    machine: Machine = field(default_factory=Machine)
    dataset: LongTailDataset | None = None
    stored: dict[str, Run] | None = None
    backbones: Path | None = None

    def data(self, request) -> LongTailDataset:
        return self.dataset if self.dataset is not None else request.data.load()


@dataclass
class Made:
    """What a finished job made, from its result line: a sentence, the files it wrote (path,
    the name to download it as, its MIME type), training's runs (each run's summary), and the
    lines that load an export."""

    summary: str = ""
    files: list[tuple[str, str, str]] = field(default_factory=list)
    runs: list[dict] = field(default_factory=list)
    code: str = ""


@dataclass(frozen=True)
class JobKind:
    """One kind of work: ``name`` (the command that runs it), its ``request`` class, the jobs
    panel's word for it (``title``), its ``estimate`` here, what a finished one ``made`` (from
    its result line), whether a public deployment's visitors may run it, and whether its
    command writes into a run store (``--runs-dir``)."""

    name: str
    request: type
    title: str
    estimate: Callable[[Any, Here], Estimate]
    made: Callable[[Any], Made]
    public: bool = True
    store: bool = True

    def planned_runs(self, request) -> int:
        """The runs a request plans (public mode caps them a launch): training's methods x
        seeds; one for the other kinds."""
        return len(request.methods) * len(request.seeds) if self.name == "train" else 1


def _cached(here: Here, dataset: LongTailDataset, model: str, max_length: int | None) -> bool:
    """Are the plain input's frozen features of ``dataset`` by ``model`` cached in the store?"""
    from ..models.backbone import model_fingerprint  # noqa: PLC0415 (torch: pages read kinds)
    from ..models.features import FeatureInputs, missing_share  # noqa: PLC0415

    try:
        fingerprint = model_fingerprint(model)
    except GleeError:  # a backbone that cannot be read: the job says so when it runs
        return False
    inputs = FeatureInputs("plain", max_length or dataset.max_length)
    return not missing_share(here.store.features_dir, dataset, fingerprint, inputs)


def estimate_training(request: TrainRequest, here: Here, fresh: bool = False) -> Estimate:
    """A training launch of ``request`` from its plan (:func:`glee_core.train.launch.plan_launch`,
    what the job runs): the runs the store lacks (``runs``; those it holds are opened:
    ``stored``), the heads the backbone cannot read left out (``left_out``), the feature passes
    not cached, the cross-validation due, the LP-FT heads still to fit and the rate searched
    once already, at this machine's rates. With the pool's self-training,
    :func:`estimate_self_training`. ``fresh``: on a dataset id the store has never seen (nothing
    stored, nothing cached)."""
    if request.self_train.pool and request.self_train.self_train != "no" and not fresh:
        return estimate_self_training(request, here)
    from ..models.backbone import estimate_parameters  # noqa: PLC0415 (torch: pages read kinds)
    from .launch import Launch  # noqa: PLC0415

    dataset, config, model = here.data(request), request.config, request.model
    stored = (
        {}  # --force, or a new dataset: every run trained
        if request.force or fresh
        else here.stored
    )
    try:
        plan = Launch(
            dataset,
            [get_method(m) for m in request.methods],
            request.seeds,
            model,
            config,
            here.store,
            request.force,
        ).planned(stored)
    except GleeError:  # an unknown method or one the mode refuses (the launch says so)
        plan = None
    if plan is None:
        planned = missing = len(request.methods) * len(request.seeds)
    else:
        planned, missing = len(plan.runs), len(plan.to_train)
    left_out = plan.note if plan is not None else ""
    if plan is not None and not missing and not plan.validate:
        return Estimate(
            2.0,
            f"all {planned} run(s) are already stored",
            measured=True,
            runs=0,
            stored=planned,
            left_out=left_out,
        )
    formats = None if plan is None else {job.spec.input_format for job in plan.to_train}
    machine = here.machine
    work = Workload(
        dataset,
        missing,
        config,
        model,
        estimate_parameters(model),
        machine.device,
        feature_passes=2 if plan is None else len(formats) if fresh else plan.feature_passes,
        lp_ft_stages=None if plan is None else plan.lp_ft_stages,
        rate_searched=plan is not None and not fresh and plan.rate_searched,
        validate=None if plan is None else len(plan.validate),
    )
    estimate = estimate_seconds(work, machine.runs, machine.busy)
    stored = planned - missing
    return replace(
        estimate,
        runs=missing,
        stored=stored,
        left_out=left_out,
        validated=0 if plan is None else len(plan.validate),
        basis=estimate.basis
        + (f"; {stored} of the runs already stored, not retrained" if stored else ""),
    )


def estimate_self_training(request: TrainRequest, here: Here) -> Estimate:
    """A launch with the pool's self-training: the pool's feature pass and its check, then the
    launch on the ``+pseudo-`` variant (a dataset id the store has never seen: every run and
    feature pass new). ``auto`` may leave the pseudo-labels out (cross-validation says they
    cost): then the launch on the data as it is, which is the range's low end."""
    plain = replace(request, self_train=replace(request.self_train, pool=None))
    variant = estimate_training(plain, here, fresh=True)
    without = estimate_training(plain, here)
    try:
        pool = pool_size(request.self_train.pool)
    except GleeError:  # the job says what is wrong with the file
        pool = PoolSize(0, 0)
    dataset = here.data(request)
    first = estimate_pool_seconds(  # self-training's probe, on the data's features
        dataset,
        pool,
        ModelSize.of(request.model),
        here.machine,
        0 if _cached(here, dataset, request.model, None) else 1,
    )
    # the variant trains on the labelled texts and the pseudo-labelled ones (at most the pool):
    # its heads and the training split's share of its feature pass grow with them, its dev and
    # test do not (growing all of it said 151-283 s for 90-198 s)
    n_train = len(dataset.splits["train"])
    n_all = n_train + len(dataset.splits["dev"]) + len(dataset.splits["test"])
    grown = 1 + min(pool.texts, n_train * 4) / max(n_train, 1)
    heads = min(variant.per_run * variant.runs, variant.seconds - STARTUP_SECONDS)
    passes = variant.seconds - STARTUP_SECONDS - heads
    seconds = variant.seconds + (grown - 1) * (heads + passes * n_train / n_all) + first.seconds
    return replace(
        variant,
        seconds=seconds,
        low=min(without.seconds + first.seconds, variant.low or seconds),
        high=max(variant.high or seconds, seconds),
        measured=False,
        basis=f"{first.basis}; then on the data with its pseudo-labels (a new version, up to "
        f"x{grown:.1f} its texts: its runs and features new): {variant.basis}; if "
        "self-training leaves them out, "
        f"{without.text} on the data as it is",
    )


def _adapt(request: AdaptRequest, here: Here) -> Estimate:
    from ..models.backbone import estimate_parameters  # noqa: PLC0415 (torch: pages read kinds)

    options = request.options
    masked = options.mlm_probability if options.objective == "mlm" else 0.0  # SimCSE: no head
    measured = [
        record
        for _, record in (adapted_backbones(here.backbones) if here.backbones else [])
        if record.get("adapted_from", {}).get("name") == request.model
    ]
    estimate = estimate_adapt_seconds(
        here.data(request),
        options,
        estimate_parameters(request.model, mlm_positions=masked),
        here.machine.device,
        measured,
    )
    return settle(estimate, here.machine, "adapt")


def _data_report(request, here: Here) -> Estimate:
    """A health check's or a label budget's estimate (its options say which)."""
    dataset = here.data(request)
    cached = _cached(here, dataset, request.model, request.options.max_length)
    size = ModelSize.of(request.model)
    return estimate_report_seconds(dataset, request.options, size, here.machine, 0 if cached else 1)


def _suggest(request: SuggestRequest, here: Here) -> Estimate:
    dataset = here.data(request)
    quick = any(  # a quick compare stored the head that scores the pool: no probe to fit
        r.dataset == dataset.id
        and r.record.model.name == request.model
        and r.record.mode == "frozen"
        for r in here.machine.runs
    )
    passes = None if quick else 0 if _cached(here, dataset, request.model, None) else 1
    try:
        pool = pool_size(request.options.pool)
    except GleeError:  # the job says what is wrong with the file
        pool = PoolSize(0, 0)
    return estimate_suggest_seconds(
        dataset, pool, ModelSize.of(request.model), here.machine, passes
    )


def _report(request: ReportRequest, here: Here) -> Estimate:
    wanted = set(request.runs)
    runs = [r for r in here.machine.runs if r.run_id in wanted]
    classes = len(runs[0].record.dataset.class_counts) if runs else 0
    return estimate_pdf_seconds(len(request.runs), classes, here.machine)


def _export(request: ExportRequest, here: Here) -> Estimate:
    ids = request.run.split(",")  # several: an ensemble's members
    run = next((r for r in here.machine.runs if r.run_id == ids[0]), None)
    model = run.record.model.name if run is not None else "auto"
    texts = run.record.dataset.sizes.get("test", 0) if run is not None else 0
    return estimate_export_seconds(request.form, ModelSize.of(model), texts, here.machine, len(ids))


def _predict(request: PredictRequest, here: Here) -> Estimate:
    ids = (request.run or "").split(",")  # several: an ensemble's members, each scores
    run = next((r for r in here.machine.runs if r.run_id == ids[0]), None)
    model = run.record.model.name if run is not None else request.model
    length = (
        run.record.hyperparameters.max_length if run is not None else here.data(request).max_length
    )
    try:
        texts = pool_size(request.input)
    except GleeError:  # the job says what is wrong with the file
        texts = PoolSize(0, 0)
    return estimate_predict_seconds(texts, ModelSize.of(model), length, here.machine, len(ids))


def _runs_made(values) -> Made:
    runs = values if isinstance(values, list) else []
    return Made(summary=f"{len(runs)} run(s) trained or opened", runs=runs)


def _files_made(key: str, mime: str, what: str) -> Callable[[Any], Made]:
    def made(values) -> Made:
        if not isinstance(values, dict) or not isinstance(values.get(key), str):
            return Made(summary=what)
        path = Path(values[key])
        return Made(
            summary=what,
            files=[(str(path), path.name, mime)],
            code=str(values.get("code", "")),
        )

    return made


def _said(what: str) -> Callable[[Any], Made]:
    def made(values) -> Made:
        detail = values.get("summary", "") if isinstance(values, dict) else ""
        return Made(summary=f"{what}: {detail}" if detail else what)

    return made


JOB_KINDS = {
    kind.name: kind
    for kind in (
        JobKind("train", TrainRequest, "Training", estimate_training, _runs_made),
        JobKind(
            "adapt",
            AdaptRequest,
            "Adapting the backbone",
            _adapt,
            _said("the backbone adapted"),
            public=False,
            store=False,
        ),
        JobKind(
            "health",
            HealthRequest,
            "The health check",
            _data_report,
            _said("the health report written (the Data page shows it)"),
        ),
        JobKind(
            "budget",
            BudgetRequest,
            "The label budget",
            _data_report,
            _said("the label budget measured (the Data page shows it)"),
        ),
        JobKind(
            "suggest",
            SuggestRequest,
            "Texts to label",
            _suggest,
            _said("the texts to label next chosen (the Data page lists them)"),
        ),
        JobKind(
            "report",
            ReportRequest,
            "The PDF report",
            _report,
            _files_made("report", "application/pdf", "the PDF report"),
        ),
        JobKind(
            "predict",
            PredictRequest,
            "Classifying a file",
            _predict,
            _files_made("predictions", "text/csv", "the texts classified"),
        ),
        JobKind(
            "export",
            ExportRequest,
            "An export",
            _export,
            _files_made("zip", "application/zip", "the exported classifier"),
        ),
    )
}


def kind_of(request) -> JobKind:
    """The kind whose request ``request`` is."""
    for kind in JOB_KINDS.values():
        if type(request) is kind.request:
            return kind
    raise GleeError(f"no job runs a {type(request).__name__}")
