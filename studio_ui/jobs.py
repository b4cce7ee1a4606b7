"""Starting work and watching it: every kind of job (``glee_core.train.job_kinds``: training,
adapting, the data reports, the pool's suggestions, the PDF report, an export) launched one way
(public mode within its limits, which ``glee_core.serve.workspaces`` owns), its bar, the button
that launches it or shows it running, and the jobs panel that lists every job of the session."""

from __future__ import annotations

import re
from pathlib import Path

import streamlit as st
from streamlit.errors import StreamlitAPIException

from glee_core.core.errors import GleeError, disk_message
from glee_core.runs.tables import tuning_gain
from glee_core.serve.policy import LimitReached
from glee_core.serve.workspaces import launch_in_workspace
from glee_core.train.job_kinds import kind_of
from glee_core.train.jobs import launch as launch_job
from glee_core.train.jobs import list_jobs, running_job

from .access import policy, visitor_id, workspace
from .estimates import estimate_of
from .stores import all_runs, recommendation_of, runs_by_id, shared_store, store
from .text import code, duration, logged, md

PANEL_JOBS = 8  # the jobs the panel lists, newest first


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


def job_result(job) -> None:
    """What a finished job made: training's runs (the head, its scores, what tuning gained over
    the quick head it started from, one click to the recommendation they change), a file to
    download, the lines that load an export, or a sentence and the page that shows it."""
    import pandas as pd  # noqa: PLC0415 (a training job's table only)

    from glee_core.runs.record import METRIC_KEYS, METRIC_TITLES  # noqa: PLC0415

    made = job.made()
    if made is None:
        return
    if made.runs:
        result = pd.DataFrame(made.runs)
        metrics = [c for c in METRIC_KEYS if c in result]
        result[metrics] = (100 * result[metrics]).round(1)  # percent, as Results shows
        # what a long-tail user looks for first: the head, its scores; the id last
        order = [
            c for c in ("method", "reads", "seed", *metrics, "dataset", "run_id") if c in result
        ]
        st.dataframe(
            result[order].rename(
                columns={
                    "run_id": "Run",
                    "dataset": "Dataset",
                    "method": "Method",
                    "seed": "Seed",
                    "reads": "Reads",
                    **{k: f"{METRIC_TITLES[k]} (%)" for k in metrics},
                }
            ),
            hide_index=True,
        )
        known = runs_by_id(store())
        for row in made.runs:  # what it gained: each tuned run against its quick-mode head
            tuned = known.get(row.get("run_id", ""))
            if tuned is not None and (gain := tuning_gain(tuned, known)):
                st.caption(f"Gained: {md(gain)}.")
        home_link(job.id)
        return
    st.caption(md(made.summary[0].upper() + made.summary[1:]) + ".")
    for number, (path, name, mime) in enumerate(made.files):
        download(path, name, mime, key=f"file-{job.id}-{number}")
    if made.code:
        st.code(made.code, language="python")


def home_link(key: str) -> None:
    """The way to Home from a finished training job: a link, not a button calling
    ``st.switch_page`` (in the panel's fragment, redrawn every 2 s, the button's click was lost
    in Chromium: the page stayed on Train). A page run on its own (``streamlit.testing``) has no
    navigation for a link to name: there, the button."""
    label = "See the recommendation it changed (Home)"
    try:
        st.page_link("app_pages/0_Home.py", label=label, icon=":material/recommend:")
    except StreamlitAPIException:
        if st.button(label, key=f"home-{key}"):
            st.switch_page("app_pages/0_Home.py")


def _recommendation_ahead(job) -> None:
    """The recommendation a training job changed, worked out as it ends (Home reads it from the
    cache): on the click to Home it cost 0.4 s of CPU beside a busy machine."""
    made = job.made() if job.status == "done" else None
    for dataset_id in {row["dataset"] for row in made.runs if "dataset" in row} if made else ():
        recommendation_of(all_runs(dataset_id, report=False))


def job_card(job, finished: set[str]) -> None:
    """One job in the panel: its title, kind and status; a running one's bar and Stop; a
    finished one's result (what it made, a download, training's runs), a failed one's error,
    one that died or was stopped, a relaunch; its log."""
    status = job.status
    if status != "running" and job.id not in finished:  # it ended while we watched: the page
        finished.add(job.id)  # picks up what it made, before its result's buttons are drawn
        _recommendation_ahead(job)
        st.rerun(scope="app")  # (a click on one drawn here was lost to this rerun)
    st.markdown(
        f"**{md(job_title(job))}** · {job.kind.title} · `{job.id}` · {status}"
        + (f" · took {duration(job.seconds)}" if job.seconds else "")
    )
    if status == "running":
        job_progress(job)
        if st.button("Stop", key=f"stop-{job.id}"):
            job.stop()
    elif status == "done":
        job_result(job)
    elif status == "failed":
        st.error(md(job.error))
    else:
        st.warning(
            (
                "Stopped before it finished."
                if status == "stopped"
                else "It ended without finishing or saying why (killed, out of memory, or "
                "the server restarted)."
            )
            + " What it finished is kept: training goes on from its stored runs and the "
            "finished rounds of a learning-rate search (the run that was training starts "
            "again); a report or an export starts afresh."
        )
        if not policy().read_only and st.button("Launch it again", key=f"again-{job.id}"):
            try:  # the same request, within the limits as any launch
                again = launch(job.request(), job.label, job.record.estimate)
            except GleeError as exc:  # its request cannot be read (edited by hand)
                st.error(md(exc))
            else:
                if again is not None:
                    st.rerun()
    log = job.log()
    if log:
        with st.expander("Its log"):
            st.code(log, language=None)


@st.fragment(run_every=2.0)
@logged
def jobs_panel(limit: int = PANEL_JOBS) -> None:
    """Every job of this session's store, newest first (each kind, each with its bar, Stop,
    log and what it made), the broken records listed apart; redrawn every 2 s."""
    from glee_core.train.jobs import broken_jobs  # noqa: PLC0415

    here = store()
    broken = broken_jobs(here)
    if broken:
        st.warning(
            "Left out, their records cannot be read: "
            + "; ".join(f"{md(name)}: {md(why)}" for name, why in broken.items())
        )
    jobs = list_jobs(here)[:limit]
    if not jobs:
        st.caption("No jobs yet.")
        return
    if "finished_jobs" not in st.session_state:  # jobs that ended before this visit
        st.session_state["finished_jobs"] = {j.id for j in jobs if j.status != "running"}
    for job in jobs:
        with st.container(border=True):
            job_card(job, st.session_state["finished_jobs"])


@st.fragment(run_every=3.0)
@logged
def sidebar_jobs() -> None:
    """The sidebar's line on the work running (every page): each running job's bar, and the way
    to the panel that lists them all."""
    running = [job for job in list_jobs(store()) if job.status == "running"]
    if not running:
        return
    st.caption(f"**Working** ({len(running)} job(s)):")
    for job in running[:3]:
        job_progress(job, job.kind.title)
    if st.button("All jobs (Train page)", key="sidebar-jobs"):
        st.switch_page("app_pages/2_Train.py")
