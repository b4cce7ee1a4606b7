"""Which run stores this session reads and writes, and their runs read once per change."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import streamlit as st

from glee_core.core import environment
from glee_core.runs.store import RunStore

from .access import NOBODY, own_store_or_nothing, policy, shared_workspace, workspace
from .text import md


def store() -> RunStore:
    """Where this session's runs and jobs go: its workspace in public mode (an empty store
    before its first write), else the store."""
    own = workspace()
    if own is not None:
        return own.store
    return own_store_or_nothing() if policy().public else shared_store()


def shared_store() -> RunStore:
    """The owner's store (``GLEE_RUNS_DIR``); in public mode every visitor reads it, none
    writes it."""
    return RunStore(environment.runs_dir())


def stores() -> list[RunStore]:
    """Every store this session may read: its own, then (public mode) a workspace shared with
    it by a link (read-only), then the owner's."""
    own = store()
    if not policy().public:
        return [own]
    shared = shared_workspace()
    return [own, *([shared.store] if shared is not None else []), shared_store()]


def uploads_dir(create: bool = False):
    """Where this session's uploads are kept (``create``: to keep one, public mode makes the
    workspace first)."""
    own = workspace(create=create)
    if own is not None:
        return own.uploads_dir
    return (
        environment.workspaces_dir() / NOBODY / "uploads"
        if policy().public
        else environment.uploads_dir()
    )


def backbones_dir() -> Path:
    """Where the app keeps adapted backbones: in the run store, beside its runs."""
    return store().backbones_dir


def store_state(root) -> tuple[int, int]:
    """What changes when a run lands in (or leaves) a store: its folder's modification time and
    entry count (a run lands by a rename into the folder)."""
    try:
        return os.stat(root).st_mtime_ns, len(os.listdir(root))
    except OSError:
        return 0, 0


@st.cache_resource(max_entries=16, show_spinner=False)
def _store_runs(root: str, state: tuple[int, int]):
    """A store's runs, read once per state of the store (pages re-render without re-reading
    thousands of run folders; a run landing changes the state and so the key)."""
    runs_store = RunStore(root)
    return runs_store.runs(), dict(runs_store.problems)


def cached_runs(runs_store: RunStore):
    """``(runs, problems)`` of a store, read once per state of the store."""
    root = str(runs_store.root)
    return _store_runs(root, store_state(root))


def runs_by_id(runs_store: RunStore) -> dict:
    """A store's runs by id, as :func:`cached_runs` read them (none opened again)."""
    return {run.run_id: run for run in cached_runs(runs_store)[0]}


def recommendation_of(runs: list):
    """``recommend(runs)`` (the candidate to use, its contenders and next steps), worked out once
    per set of runs and state of the stores: a page draw asks for it from several sections,
    and on a busy machine each asking cost a third of a second."""
    key = (
        tuple(str(run.path) for run in runs),
        tuple(store_state(str(runs_store.root)) for runs_store in stores()),
    )
    return _recommendation(key, runs)


@st.cache_resource(max_entries=64, show_spinner=False)
def _recommendation(key: tuple, _runs: list):
    """The cache behind :func:`recommendation_of` (``_runs`` is not hashed: ``key`` names them)."""
    from glee_core.runs.recommend import recommend  # noqa: PLC0415 (numpy, pandas)

    return recommend(_runs)


def all_runs(dataset_id: str | None = None, report: bool = True):
    """Finished runs (of a dataset) in every store this session may read, its own first; broken
    run folders are reported (``report``: in an expander here), not fatal."""
    runs, seen, problems = [], set(), {}
    for runs_store in stores():
        found, skipped = cached_runs(runs_store)
        for run in found:
            if (dataset_id is None or run.dataset == dataset_id) and run.run_id not in seen:
                seen.add(run.run_id)
                runs.append(run)
        problems.update(skipped)
    if problems and report:
        with st.expander(f"{len(problems)} unfinished or broken run folder(s) skipped"):
            for name, problem in problems.items():
                st.write(f"`{name}`: {md(problem)}")
    return runs


def dataset_runs(dataset_id: str):
    """Finished runs of a dataset (see :func:`all_runs`)."""
    return all_runs(dataset_id)


def shared_run_ids() -> set[str]:
    """The runs this session sees through another visitor's share link: their scores and charts
    are shown, never the texts in them (the sharer's data)."""
    shared = shared_workspace()
    return {run.run_id for run in cached_runs(shared.store)[0]} if shared is not None else set()


def quick_compare_runs(dataset_id: str, model: str) -> list:
    """The frozen (quick compare) runs of a dataset and backbone: those of the protocol with the
    most runs, every pooling of it (the poolings are candidates of one compare)."""
    runs = [
        r
        for r in all_runs(dataset_id, report=False)
        if r.record.hyperparameters.frozen and r.record.model.name == model
    ]
    protocols: dict[str, int] = {}
    for run in runs:
        key = replace(run.record.hyperparameters, pooling="cls", seed=1).protocol()
        protocols[key] = protocols.get(key, 0) + 1
    if not protocols:
        return []
    widest = max(protocols, key=protocols.get)
    return [
        r
        for r in runs
        if replace(r.record.hyperparameters, pooling="cls", seed=1).protocol() == widest
    ]


def kept_pools() -> list[Path]:
    """The pools kept in this session's store, newest first."""
    folder = store().labelling_dir
    return (
        sorted(
            (p for p in folder.glob("*.pool.*") if p.suffix in (".csv", ".tsv", ".txt")),
            key=lambda p: -p.stat().st_mtime,
        )
        if folder.is_dir()
        else []
    )
