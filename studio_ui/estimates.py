"""What a launch will cost here: the engine's time estimates over this session's stores."""

from __future__ import annotations

import contextlib

import streamlit as st

from glee_core.studio import (
    GleeError,
)

from .choice import current_model
from .stores import all_runs, cached_runs, store
from .text import about


@st.cache_resource(show_spinner=False)
def device_kind() -> str:
    """``cuda`` or ``cpu``: where a launch here trains (imports torch once per server)."""
    from glee_core.studio import resolve_device  # noqa: PLC0415 (torch: not for every page)

    return resolve_device("auto").type


@st.cache_resource(show_spinner=False)
def busy_sampler():
    """The server's one sampler of the other work on this CPU (``BusySampler``: every 5 s in
    the background, the median of the last minute)."""
    from glee_core.studio import BusySampler  # noqa: PLC0415

    return BusySampler().start()


def machine_busy() -> float:
    """How much slower a launch runs for what else works on this CPU now
    (``glee_core.runs.busy.BusySampler``, the median of the last minute's samples: a page
    drawn by a browser on this machine is not work a launch runs beside)."""
    return busy_sampler().value()


def time_estimate(
    dataset, methods: list[str], seeds: list[int], config, model: str | None = None
) -> dict:
    """The wall-time estimate of launching ``methods`` x ``seeds`` of ``config`` (a
    ``TrainConfig``; ``glee_core.runs.estimate``) with ``model`` (default: the current
    backbone), calibrated on the
    finished runs this session can read; the runs this session's store already holds are opened,
    not trained, and left out of it. Adds ``"text"`` ("about 3 min" / "about 40 s"), ``"runs"``
    (to train), ``"stored"`` (already there) and ``"left_out"`` (the note on the heads the launch
    leaves out, ``glee_core.train.experiment.unreadable_heads``; "" when none)."""
    from glee_core.studio import (  # noqa: PLC0415 (heavy)
        estimate_parameters,
        estimate_seconds,
        get_method,
        plan_runs,
        searched_rate,
        uncached_passes,
        unreadable_heads,
    )

    model = model or current_model()
    here = store()
    out, left_out = [], ""
    try:
        specs = [get_method(m) for m in methods]
        # the heads the launch leaves out (label words the backbone lacks) cost nothing; a
        # backbone that cannot load leaves none out (the launch says so)
        with contextlib.suppress(GleeError):
            out, left_out = unreadable_heads(dataset, specs, seeds, model, config, here)
        plan = plan_runs(dataset, [s for s in specs if s not in out], seeds, model, config)
    except GleeError:  # an unknown method or one the mode refuses (the launch says so):
        plan = None  # estimate them all
    to_train = None if plan is None else unstored_jobs(here, plan)
    planned = len(methods) * len(seeds) if plan is None else len(plan)
    missing = planned if to_train is None else len(to_train)
    stored = planned - missing
    if to_train is not None and not missing:
        return {
            "seconds": 2.0,
            "per_run": 0.0,
            "runs": 0,
            "stored": stored,
            "text": "a few seconds",
            "left_out": left_out,
            "basis": f"all {stored} run(s) are already stored",
        }
    passes = (
        2
        if to_train is None or not config.frozen
        else uncached_passes(here, dataset, model, to_train)
    )
    estimate = estimate_seconds(
        dataset,
        missing,
        config,
        model,
        estimate_parameters(model),
        device_kind(),
        all_runs(report=False),
        feature_passes=passes,
        lp_ft_stages=None
        if to_train is None or config.frozen
        else len(unstored_stages(here, dataset, model, to_train)),
        rate_searched=bool(to_train) and searched_rate(here, to_train[0]) is not None,
        busy=machine_busy() if device_kind() == "cpu" else 1.0,
    )
    basis = estimate["basis"] + (
        f"; {stored} of the runs already stored, not retrained" if stored else ""
    )
    return {
        **estimate,
        "basis": basis,
        "runs": missing,
        "stored": stored,
        "left_out": left_out,
        "text": about(estimate["seconds"]),
    }


def label_word_heads_left_out(dataset, model: str | None = None) -> tuple[list[str], str]:
    """The heads a quick compare of every head leaves out on ``dataset`` with ``model`` (default:
    the current backbone) because its vocabulary lacks the data's label words, and the note
    saying so (``glee_core.train.experiment.unreadable_heads``); ``([], "")`` when none."""
    from glee_core.studio import METHODS, TrainConfig, unreadable_heads  # noqa: PLC0415

    try:
        out, why = unreadable_heads(
            dataset,
            list(METHODS.values()),
            [1],
            model or current_model(),
            TrainConfig(mode="frozen"),
            store(),
        )
    except GleeError:  # a backbone that cannot load: a launch says so
        return [], ""
    return [spec.id for spec in out], why


def unstored_jobs(here, plan) -> list:
    """The planned runs the store ``here`` does not hold finished (what a launch trains; the
    others it opens), judged by the store's cached listing of valid runs."""
    stored = {run.run_id for run in cached_runs(here)[0]}
    return [job for job in plan if job.run_id not in stored]


def unstored_stages(here, dataset, model: str, jobs) -> list:
    """The LP-FT heads (quick-mode runs) that fine-tuning ``jobs`` would still fit: those the
    store ``here`` does not hold (a quick compare stored them)."""
    from glee_core.studio import lp_ft_stage  # noqa: PLC0415 (heavy)

    if not jobs or not jobs[0].config.lp_ft:
        return []
    return unstored_jobs(here, [lp_ft_stage(job, dataset, model) for job in jobs])


def trainable_parameters(dataset, config) -> int:
    """About how many parameters a run of ``config`` trains on ``dataset`` with the current
    backbone (from its config alone: ``glee_core.models.backbone.estimate_trainable``)."""
    from glee_core.studio import estimate_trainable  # noqa: PLC0415 (transformers)

    resolved = config.resolved(dataset.max_length, dataset.batch_size)
    return estimate_trainable(current_model(), resolved, dataset.num_classes)


def adapt_estimate(dataset, options, measured: list[dict]) -> dict:
    """The wall-time estimate of adapting the current backbone (``glee_core.runs.estimate``), with
    ``"text"``."""
    from glee_core.studio import estimate_adapt_seconds, estimate_parameters  # noqa: PLC0415

    masked = options.mlm_probability if options.objective == "mlm" else 0.0  # SimCSE: no head
    parameters = estimate_parameters(current_model(), mlm_positions=masked)
    estimate = estimate_adapt_seconds(dataset, options, parameters, device_kind(), measured)
    return {**estimate, "text": about(estimate["seconds"])}


def report_estimate(dataset, kind: str, options) -> dict:
    """The wall-time estimate of a data report (``kind``: ``health`` or ``budget``, with its
    options) of ``dataset`` with the current backbone, here (``glee_core.runs.estimate``), with
    ``"text"``: its feature pass counted only where the features are not cached yet."""
    from glee_core.studio import (  # noqa: PLC0415 (transformers)
        estimate_parameters,
        estimate_report_seconds,
        feature_file,
        hidden_size,
        model_fingerprint,
    )

    model = current_model()
    max_length = options.max_length or dataset.max_length
    try:
        cached = feature_file(
            store().features_dir, dataset, model_fingerprint(model), "plain", max_length
        ).is_file()
    except GleeError:  # a backbone that cannot be read: the report says so when it runs
        cached = False
    machine = {
        "parameters": estimate_parameters(model),
        "device": device_kind(),
        "model": model,
        "runs": all_runs(report=False),
        "passes": 0 if cached else 1,
    }
    estimate = estimate_report_seconds(dataset, kind, options, hidden_size(model), machine)
    return {**estimate, "text": about(estimate["seconds"])}
