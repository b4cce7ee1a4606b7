"""What follows a launch form and Home's one click: the launch's estimate in words, the Launch
button (the request as a job: ``jobs``), Home's quick compare button with how the best is
chosen, and the table of a dataset's finished runs."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from glee_core.models.config import TrainConfig
from glee_core.models.methods import METHODS
from glee_core.models.requests import TrainRequest
from glee_core.runs.record import METRIC_KEYS, METRIC_TITLES

from .access import policy
from .choice import current_choice, current_model
from .estimates import estimate_of, trainable_parameters
from .jobs import launch as launch_job
from .jobs import launch_here, running_step
from .launches import LaunchForm
from .navigation import label_words_button
from .stores import dataset_runs
from .text import md


def estimate_words(launch: LaunchForm, dataset, device: str) -> None:
    """The launch's estimate in words: its time and basis, or that its runs are stored (and what
    it still does with them), with a warning where a CPU would take long."""
    estimate = launch.estimate
    if launch.request is None or estimate is None:
        return
    bound = "" if launch.frozen else " (at most; early stopping shortens it)"  # frozen: measured
    if estimate.runs:
        trained = trainable_parameters(dataset, launch.request.config)
        message = (
            f"Estimated time: {estimate.text} for {estimate.runs} run(s) to train"
            f"{bound}. Basis: {estimate.basis} ({estimate.sure}). Each run trains about "
            f"{trained / 1e6:.2f}M parameters (a CLS head's count; each run records its own)."
        )
    elif estimate.validated:
        message = (
            f"All {estimate.stored} run(s) of this launch are already stored; Launch "
            f"cross-validates {estimate.validated} of them, as this data's small dev split "
            f"asks: {estimate.text}. Basis: {estimate.basis} ({estimate.sure})."
        )
    else:
        message = (
            f"All {estimate.stored} run(s) of this launch are already stored: Launch opens them "
            "(nothing to train). Change the methods, seeds or settings for a new run."
        )
    if estimate.left_out:
        message += f" {md(estimate.left_out)}."
    if device == "cpu" and not launch.frozen and estimate.seconds > 20 * 60:
        st.warning(
            message + " That is long for a CPU: try the quick compare, fewer epochs, a "
            "training limit, or a GPU machine."
        )
    else:
        st.info(message)


def launch_button(launch: LaunchForm, dataset) -> None:
    """Launch: the request as a job (none on a read-only deployment); the jobs panel shows it."""
    if policy().read_only:
        st.info("Training is switched off on this deployment (read-only): browse the shipped runs.")
    elif st.button("Launch", type="primary", disabled=launch.request is None):
        job = launch_job(
            launch.request,
            label=launch.label,
            estimate=launch.estimate,  # a cluster's: one run after another here, an upper bound
            dataset=dataset,
        )
        if job is not None:
            st.session_state["last_job"] = job.id
            st.toast(f"{'Already running' if job.attached else 'Launched'}: job {job.id}")
            st.rerun()  # the panel above shows it


def finished_runs(dataset) -> None:
    """The dataset's finished runs, a row each: method, seed, mode, metrics, backbone, time."""
    runs = dataset_runs(dataset.id)
    if not runs:
        st.caption("None yet.")
        return
    finished = pd.DataFrame(
        [
            {
                "Method": r.method,
                "Seed": r.seed,
                "Mode": r.record.mode,
                "Reads": r.reads,
                **{
                    METRIC_TITLES[k] + " (%)": round(100 * r.metrics.value(k), 1)
                    for k in METRIC_KEYS
                },
                "Backbone": r.record.model.name,
                "Training (s)": r.record.timing.train_seconds,
                "Created": r.record.created,
                "Run": r.run_id,
            }
            for r in runs
        ]
    )
    st.dataframe(
        finished,
        hide_index=True,
        column_config={"Training (s)": st.column_config.NumberColumn(format="%.1f")},
    )


def quick_compare_button(dataset, name: str) -> None:
    """Home's one click: every head on the frozen backbone, as a job (its bar while it runs),
    with how the best is chosen and its estimate here; none on a read-only deployment."""
    if policy().read_only:
        st.caption(
            "Training is switched off on this deployment: browse the shipped runs on the "
            "Results, Diagnostics and Paper pages."
        )
        return
    quick = TrainConfig(mode="frozen")
    request = TrainRequest(
        data=current_choice(), methods=list(METHODS), seeds=[1], model=current_model(), config=quick
    )
    estimate = estimate_of(request, dataset)
    done = estimate.runs == 0 and not estimate.validated
    slot = st.empty()
    if running_step(request, key="home-compare-running"):
        pass  # running: its bar, not a second launch
    elif slot.button(
        f"Quick compare on {md(name)}",
        type="secondary" if done else "primary",
        help="Every head is already stored: this opens them." if done else None,
    ):  # its bar in the button's place; Home shows the answer once it ends
        launch_here(slot, request, f"Quick compare: {len(METHODS)} heads on {name}", estimate)
    small = dataset.small_dev()
    chosen_by = (
        f"chosen by {quick.folds}-fold cross-validation on train + dev, since its dev "
        f"split is small ({md(small)})"
        if small
        else "chosen on dev"
    )
    st.caption(
        f"All {len(METHODS)} heads (the paper's twelve, the baselines and the heads "
        "beyond the paper), each on the `[CLS]` and the mean-pooled state where it reads "
        f"a plain input, on the frozen backbone; the best {chosen_by}, never on test. "
        f"Estimated here: {estimate.text} ({estimate.basis}; {estimate.sure})."
    )
    if estimate.left_out:
        st.caption(f"{md(estimate.left_out)}.")
        label_words_button("home-label-words")
