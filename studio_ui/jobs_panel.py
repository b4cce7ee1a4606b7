"""The jobs panel (the Train page's list of every job of the session, each with its bar, Stop,
log and what it made) and the sidebar's line on the work running."""

from __future__ import annotations

import streamlit as st
from streamlit.errors import StreamlitAPIException

from glee_core.core.errors import GleeError
from glee_core.runs.tables import tuning_gain
from glee_core.train.jobs import list_jobs

from .access import policy
from .jobs import download, job_progress, job_title, launch
from .stores import all_runs, recommendation_of, runs_by_id, store
from .text import duration, logged, md

PANEL_JOBS = 8  # the jobs the panel lists, newest first


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
