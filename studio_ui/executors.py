"""The launch form's executor (here, or a cluster of the executors' registry, not offered to a
public deployment's visitors) and how many fine-tuning runs share the device at once."""

from __future__ import annotations

import importlib.util

import streamlit as st

from glee_core.models.fields import help_of
from glee_core.models.options import EXECUTORS, ExecutorOptions

from .widgets import setting_inputs


def executor_options(at_once: str) -> ExecutorOptions:
    """The executor: here, or one of the remote ones, each in a section of its own (not offered
    to a public deployment's visitors); ``at_once``: the runs trained at once
    (:func:`runs_at_once`)."""
    for remote in (e for e in EXECUTORS.values() if e.remote):
        with st.expander(remote.title):
            there = remote.needs is None or importlib.util.find_spec(remote.needs) is not None
            if not there:
                st.caption(f"{remote.needs} is not installed here: `{remote.install}`.")
            on = st.toggle(
                f"Use {remote.name.capitalize()}",
                value=False,
                disabled=not there,
                help=help_of(ExecutorOptions, "executor"),
                key=f"executor-{remote.name}",
            )
            given = setting_inputs(remote.settings, ExecutorOptions, disabled=not on)
            st.caption(
                "The run store must be on storage every node sees (`GLEE_RUNS_DIR`); runs "
                "already in it are not submitted."
            )
        if on:
            return ExecutorOptions(executor=remote.name, runs_at_once=at_once, **given)
    return ExecutorOptions(runs_at_once=at_once)


def runs_at_once() -> str:
    """How many fine-tuning runs share the device at once (auto: 1 on a CPU)."""
    left, right = st.columns([1, 3])
    value = left.selectbox(
        "Runs at once", ("auto", "1", "2", "4", "8"), help=help_of(ExecutorOptions, "runs_at_once")
    )
    right.caption(
        "Several runs share the device, each in a process of its own (auto: one on "
        "a CPU, whose cores they would only split; on a GPU, as many as its memory "
        "holds). The estimate below is for one run after another."
    )
    return value
