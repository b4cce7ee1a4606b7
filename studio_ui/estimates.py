"""What a job costs here: its kind's estimate (``glee_core.train.job_kinds``) over this
session's stores, this machine's device and the other work on its CPU now."""

from __future__ import annotations

import json
from dataclasses import replace

import streamlit as st

from glee_core.core.errors import GleeError
from glee_core.models.config import TrainConfig
from glee_core.models.methods import METHODS
from glee_core.runs.job_estimates import Machine
from glee_core.train.job_kinds import Here, kind_of
from glee_core.train.jobs import past_jobs

from .choice import current_model
from .stores import all_runs, backbones_dir, runs_by_id, store, store_state, stores


@st.cache_resource(show_spinner=False)
def device_kind() -> str:
    """``cuda`` or ``cpu``: where a launch here trains (imports torch once per server)."""
    from glee_core.core.devices import resolve_device  # noqa: PLC0415 (torch: not for every page)

    return resolve_device("auto").type


@st.cache_resource(show_spinner=False)
def busy_sampler():
    """The server's one sampler of the other work on this CPU (``BusySampler``: every 5 s in
    the background, the median of the last minute)."""
    from glee_core.runs.busy import BusySampler  # noqa: PLC0415

    return BusySampler().start()


def machine_busy() -> float:
    """How much slower a launch runs for what else works on this CPU now
    (``glee_core.runs.busy.BusySampler``, the median of the last minute's samples: a page
    drawn by a browser on this machine is not work a launch runs beside)."""
    return busy_sampler().value() if device_kind() == "cpu" else 1.0


def here(dataset=None) -> Here:
    """This session's view of the machine for an estimate: its store, the device, the other work
    on the CPU now, the finished runs it can read (their measured rates) and the finished jobs
    of its store (each kind's real time against its estimate), ``dataset`` where the page has it
    loaded."""
    own = store()
    return Here(
        own,
        Machine(device_kind(), machine_busy(), all_runs(report=False), past_jobs(own)),
        dataset,
        runs_by_id(own),
        backbones_dir(),
    )


def estimate_of(request, dataset=None):
    """The ``Estimate`` of launching ``request`` (any kind of job) here, worked out once per state
    of what it reads (the stores' runs, the finished jobs, the other work on the CPU to a tenth)
    and at most every :data:`ESTIMATE_SECONDS`: a Data page draw asks for five (its draw went
    0.45 -> 0.37 s cached), and on a busy machine each draw is a click's wait."""
    key = (
        type(request).__name__,
        json.dumps(request.to_dict(), sort_keys=True, default=str),
        getattr(dataset, "id", None),
        tuple(store_state(str(runs_store.root)) for runs_store in stores()),
        store_state(str(store().jobs_dir)),
        round(machine_busy(), 1),
    )
    return replace(_estimate(key, request, dataset))  # a copy: the cache's stays as made


ESTIMATE_SECONDS = 30  # what the key does not see (a pool file rewritten, a feature cache)


@st.cache_resource(max_entries=256, ttl=ESTIMATE_SECONDS, show_spinner=False)
def _estimate(key: tuple, _request, _dataset):
    """The cache behind :func:`estimate_of` (``_request``, ``_dataset``: named by ``key``)."""
    return kind_of(_request).estimate(_request, here(_dataset))


def label_word_heads_left_out(dataset, model: str | None = None) -> tuple[list[str], str]:
    """The heads a quick compare of every head leaves out on ``dataset`` with ``model`` (default:
    the current backbone) because its vocabulary lacks the data's label words, and the note
    saying so (``glee_core.train.launch.unreadable_heads``); ``([], "")`` when none."""
    from glee_core.train.launch import Launch, unreadable_heads  # noqa: PLC0415 (torch)

    launch = Launch(
        dataset,
        list(METHODS.values()),
        [1],
        model or current_model(),
        TrainConfig(mode="frozen"),
        store(),
    )
    try:
        out, why = unreadable_heads(launch, stored=runs_by_id(store()))
    except GleeError:  # a backbone that cannot load: a launch says so
        return [], ""
    return [spec.id for spec in out], why


def trainable_parameters(dataset, config) -> int:
    """About how many parameters a run of ``config`` trains on ``dataset`` with the current
    backbone (from its config alone: ``glee_core.models.backbone.estimate_trainable``)."""
    from glee_core.models.backbone import estimate_trainable  # noqa: PLC0415 (transformers)

    resolved = config.resolved(dataset.max_length, dataset.batch_size)
    return estimate_trainable(current_model(), resolved, dataset.num_classes)
