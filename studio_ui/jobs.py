"""Starting work: a training or adaptation job (public mode within its limits, which
``glee_core.serve.workspaces`` owns), a turn on the machine for heavy page work, a job's bar."""

from __future__ import annotations

import re
from contextlib import contextmanager

import streamlit as st

from glee_core.studio import (
    GleeError,
    LimitReached,
    SlotQueue,
    disk_message,
    environment,
    launch_in_workspace,
    launch_job,
    launch_training,
)

from .access import policy, visitor_id, workspace
from .choice import load_options
from .estimates import time_estimate
from .stores import shared_store, store
from .text import duration, md


def launch(request, label: str, estimate: dict | None = None):
    """Launch a training job for this session, within its limits
    (``glee_core.serve.workspaces.launch_in_workspace``); None (after saying why) when a limit or
    read-only mode refuses it. ``estimate``: the launch's time estimate, kept with the job so its
    bar shows time left from the start (public mode also caps it, and computes it when not
    given)."""
    rules = policy()
    if rules.read_only:
        st.error("Training is switched off on this deployment (read-only).")
        return None
    try:
        own = workspace(create=True)
        if own is None:  # one's own machine: no limits
            return launch_training(
                store(),
                request,
                label=label,
                estimate_seconds=estimate["seconds"] if estimate else None,
                stop_share=estimate.get("stop") if estimate else None,
            )
        rules.check_model(request.model)
        if estimate is None:
            estimate = time_estimate(
                load_options(request.data),
                request.methods,
                request.seeds,
                request.config,
                request.model,
            )
        return launch_in_workspace(
            own,
            rules,
            request,
            label,
            estimate["seconds"],
            visitor_id(),
            shared_store(),
            estimate.get("stop"),
        )
    except (LimitReached, GleeError) as exc:
        st.error(md(str(exc)))
        return None
    except OSError as exc:
        st.error(f"The job could not be started: {md(disk_message(exc))}.")
        return None


def launch_adapt(request, label: str, seconds: float):
    """Launch an adaptation job (not offered to a public deployment's visitors: it writes a
    whole backbone)."""
    rules = policy()
    if rules.read_only or rules.public:
        st.error("Adapting a backbone is switched off on this deployment.")
        return None
    return launch_job(store(), "adapt", request, label=label, estimate_seconds=seconds)


@contextmanager
def machine_turn(on_wait=None):
    """Public mode: hold one of the machine's training slots (in turn with every job, and with
    this session's own) while the page does heavy work; elsewhere, no waiting."""
    own = workspace(create=True)
    if own is None:
        yield
        return
    queue = SlotQueue(shared_store().locks_dir, environment.max_concurrent_runs(), own.session_lock)
    with queue.slot(on_wait):
        yield


ESTIMATE_IN_LABEL = re.compile(r"\s*\((about )?[\d.]+ (s|min|h)\)$")  # "Fine-tune X (15 min)"


def job_title(job) -> str:
    """A job's label as its panel heads it: a running job's launch estimate ("(15 min)") gives
    way to what its own pace says now, elapsed and left together (a 54-min fine-tune kept its
    "(15 min)" to the end)."""
    label = job.label
    if job.status != "running" or not ESTIMATE_IN_LABEL.search(label):
        return label
    _, elapsed, left = job.timing()
    if left is None:
        return label
    return ESTIMATE_IN_LABEL.sub("", label) + f" (now about {duration(elapsed + left)} in all)"


def job_progress(job, label: str | None = None) -> None:
    """A running job's bar: where it stands, the time it has run and the time left (from its
    launch estimate at first, then from its own pace: ``Job.timing``)."""
    progress = job.progress()
    share, elapsed, left = job.timing(progress)  # early stopping expected
    text = (f"{md(label)}: " if label else "") + progress.describe()
    if progress.loss is not None and job.command == "adapt":
        text += f" · loss {progress.loss:.3f}"
    text += f" · {duration(elapsed)} elapsed"
    if left is not None:
        text += f" · about {duration(left)} left"
    st.progress(share, text=text)


def running_step(request, key: str) -> bool:
    """Where ``request`` already runs in this session's store: say so, with its bar and a way to
    the Train page, in place of the button that would launch it again (True); else False."""
    from glee_core.studio import running_job  # noqa: PLC0415 (the job records)

    job = running_job(store(), request)
    if job is None:
        return False
    job_progress(job, f"Running: {job.label}")
    if st.button("Follow it on the Train page", key=key):
        st.session_state["last_job"] = job.id
        st.switch_page("app_pages/2_Train.py")
    return True
