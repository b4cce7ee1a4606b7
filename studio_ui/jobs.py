"""Starting work and watching it: every kind of job (``glee_core.train.job_kinds``: training,
adapting, the data reports, the pool's suggestions, the PDF report, an export) launched one way
(public mode within its limits, which ``glee_core.serve.workspaces`` owns), its bar, the button
that launches it or shows it running (the panel that lists every job of the session:
``jobs_panel``)."""

from __future__ import annotations

import re
from pathlib import Path

import streamlit as st

from glee_core.core.errors import GleeError, disk_message
from glee_core.serve.policy import LimitReached
from glee_core.serve.workspaces import launch_in_workspace
from glee_core.train.job_kinds import kind_of
from glee_core.train.jobs import launch as launch_job
from glee_core.train.jobs import list_jobs, running_job

from .access import policy, visitor_id, workspace
from .estimates import estimate_of
from .stores import shared_store, store
from .text import code, duration, logged, md


def launch(request, label: str, estimate=None, dataset=None):
    """Launch ``request`` (any kind of job) for this session, within its limits
    (``glee_core.serve.workspaces.launch_in_workspace``) and return its job (one already running
    the same request is attached to, not launched again: ``Job.attached``); None (after saying
    why) when a limit or read-only mode refuses it. ``estimate``: its ``Estimate`` where the
    page made it already (the button said it), else made now; kept with the job, so its bar
    shows time left from the start."""
    rules = policy()
    kind = kind_of(request)
    if rules.read_only:
        st.error(f"{kind.title} is switched off on this deployment (read-only).")
        return None
    try:
        estimate = estimate or estimate_of(request, dataset)
        if rules.public:  # a launch over its limits is refused before a workspace is made
            rules.check_job(kind.planned_runs(request), estimate.seconds)
        before = store().root
        own = workspace(create=True)
        if own is None:  # one's own machine: no limits
            return launch_job(store(), request, label, estimate)
        if before != own.store.root:  # made on this launch: its paths were the empty store's
            request = rebased(request, before, own.store.root)
        return launch_in_workspace(
            own, rules, request, label, estimate, (visitor_id(), shared_store())
        )
    except (LimitReached, GleeError) as exc:
        st.error(md(str(exc)))
        return None
    except OSError as exc:
        st.error(f"The job could not be started: {md(disk_message(exc))}.")
        return None


def rebased(request, old: Path, new: Path):
    """``request`` with every path under ``old`` (the empty store a visitor reads before their
    first write) moved under ``new`` (the workspace their first launch made): its report goes
    into their workspace, never a folder another visitor reads."""

    def move(value):
        if isinstance(value, dict):
            return {key: move(item) for key, item in value.items()}
        if isinstance(value, list):
            return [move(item) for item in value]
        if isinstance(value, str) and Path(value).is_relative_to(old):
            return str(new / Path(value).relative_to(old))
        return value

    return type(request).from_dict(move(request.to_dict()))


ESTIMATE_IN_LABEL = re.compile(r"\s*\((about )?[\d.]+(-[\d.]+)? (s|min|h)\)$")  # "... (15 min)"


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
    text = (f"{md(label)}: " if label else "") + md(progress.describe())
    if progress.loss is not None and job.command == "adapt":
        text += f" · loss {progress.loss:.3f}"
    text += f" · {duration(elapsed)} elapsed"
    if left is not None:
        text += f" · about {duration(left)} left"
    st.progress(min(max(share, 0.0), 1.0), text=text)


@st.fragment(run_every=2.0)
@logged
def watch(job_id: str, label: str | None = None) -> None:
    """A running job's bar, redrawn every 2 s; the whole page again once it ends (what it made
    shows where it was asked for, no reload needed)."""
    job = next((j for j in list_jobs(store()) if j.id == job_id), None)
    if job is None or job.status != "running":
        st.rerun(scope="app")
    job_progress(job, label)
    if st.button("Stop", key=f"watch-stop-{job.id}"):
        job.stop()
        st.rerun(scope="app")


def work_button(
    request, label: str, key: str, *, primary: bool = True, dataset=None, help=None, title=None
):
    """The button that launches ``request`` with its estimate in its label ("Check the data's
    health (about 40 s)"), or, while the same request runs, its bar (a second click attaches,
    never launches again). ``title``: the job's name in the jobs panel (default ``label``).
    Returns the job it launched, else None. A launch draws the job's bar where the button was
    (one draw of the page a click, not a second whole one); the page reruns only where the
    launch made the visitor's workspace (its pages read another store from then on)."""
    running = running_job(store(), request)
    if running is not None:
        watch(running.id)
        return None
    try:
        estimate = estimate_of(request, dataset)
    except GleeError as exc:  # what the job would fail on: said now, no button
        st.error(md(exc))
        return None
    slot = st.empty()
    if slot.button(
        f"{label} ({estimate.text})",
        key=key,
        type="primary" if primary else "secondary",
        help=(help + " " if help else "") + f"Estimated from {estimate.basis} ({estimate.sure}).",
    ):
        return launch_here(slot, request, title or label, estimate, dataset)
    return None


def launch_here(slot, request, label: str, estimate, dataset=None):
    """Launch ``request`` from a button drawn in ``slot`` (an ``st.empty``) and draw the job's
    live bar in the button's place: one run of the page a click, no switch to another page (a
    second whole page drawn on a busy machine was the slowest click of the walks). The page
    reruns only where the launch made the visitor's workspace (its pages read another store
    from then on). Returns the job, or None (said why) when refused."""
    before = store().root
    job = launch(request, label, estimate, dataset)
    if job is None:
        return None
    st.session_state["last_job"] = job.id
    if store().root != before:
        st.rerun()
    with slot.container():
        watch(job.id, f"Running: {job.label}")
    return job


def newest_job(kind: str, request):
    """The newest job of ``kind`` on ``request`` in this session's store, or None."""
    wanted = request.to_dict()
    for job in list_jobs(store(), kind):
        try:
            if job.request().to_dict() == wanted:
                return job
        except GleeError:  # a request of another release, or damaged: not this one
            continue
    return None


def last_failure(kind: str, request) -> str | None:
    """Why the newest job of ``kind`` on ``request`` failed, if it did and has not run again
    since (a page shows it where the work was asked for)."""
    job = newest_job(kind, request)
    return job.error if job is not None and job.status == "failed" else None


def last_made(kind: str, request):
    """What the newest job of ``kind`` on ``request`` made (``Made``), once it finished."""
    job = newest_job(kind, request)
    return job.made() if job is not None and job.status == "done" else None


def running_step(request, key: str) -> bool:
    """Where ``request`` already runs in this session's store: say so, with its bar and a way to
    the Train page, in place of the button that would launch it again (True); else False."""
    job = running_job(store(), request)
    if job is None:
        return False
    watch(job.id, f"Running: {job.label}")
    if st.button("Follow it on the Train page", key=key):
        st.session_state["last_job"] = job.id
        st.switch_page("app_pages/2_Train.py")
    return True


def download(path: str, name: str, mime: str, key: str, primary: bool = False) -> None:
    """A file a job made, offered for download and read only when clicked (a zip of hundreds of
    MB never sits in the web process for a page to draw)."""
    file = Path(path)
    if not file.is_file():
        st.caption(f"{code(name)} is gone (deleted, or its workspace expired): run it again.")
        return
    st.download_button(
        f"Download {name} ({file.stat().st_size / 2**20:.1f} MB)",
        data=file.read_bytes,  # read when clicked
        file_name=name,
        mime=mime,
        key=key,
        type="primary" if primary else "secondary",
        on_click="ignore",
    )
