"""Report: a PDF of the chosen dataset's runs, with the same charts as the app."""

from concurrent.futures import ThreadPoolExecutor

import streamlit as st

import studio_ui
from glee_core.studio import RUN_CHARTS, GleeError, build_report, slug


@st.cache_resource
def report_builder() -> ThreadPoolExecutor:
    """Builds PDFs off the pages' threads (hundreds of classes take tens of seconds): the page
    keeps answering and shows the build's progress; one server, two builds at a time."""
    return ThreadPoolExecutor(max_workers=2, thread_name_prefix="glee-report")


studio_ui.sidebar()
st.title("Report")

runs = studio_ui.setting_runs(key="report-methods")
in_report = [c.title.lower() for c in RUN_CHARTS.values() if c.in_report]
st.caption(
    f"A4 PDF: configuration, the results table, {', '.join(in_report)}, and post-hoc "
    "calibration. The same report from the command line: "
    "`python -m glee_core report --runs-dir DIR --dataset ID --out report.pdf`."
)
building = st.session_state.get("report_job")
if runs and st.button("Build the PDF", type="primary", disabled=building is not None):
    progress = {"fraction": 0.0, "what": "starting"}
    name = (
        f"glee-report-{slug(runs[0].dataset)}-{runs[0].record.mode}-"
        f"{len({r.method for r in runs})}-methods.pdf"
    )
    future = report_builder().submit(
        build_report,
        runs,
        None,
        lambda fraction, what: progress.update(fraction=fraction, what=what),
        studio_ui.dataset_runs(runs[0].dataset),
        studio_ui.dataset_budget(runs[0].dataset),
    )
    st.session_state["report_job"] = (future, progress, name)
    st.session_state.pop("report_pdf", None)
    st.rerun()  # drawn again with the button off while the build runs


@st.fragment(run_every=0.5)
def watch_the_build() -> None:
    """The build's progress bar, redrawn twice a second; the whole page again once it ends."""
    future, progress, name = st.session_state["report_job"]
    if not future.done():
        st.progress(progress["fraction"], text=f"Building the PDF: {progress['what']} ...")
        return
    del st.session_state["report_job"]
    try:
        st.session_state["report_pdf"], st.session_state["report_name"] = future.result(), name
    except GleeError as exc:
        st.session_state["report_error"] = str(exc)
    st.rerun()


if building is not None:
    watch_the_build()
if error := st.session_state.pop("report_error", None):
    st.error(studio_ui.md(error))
if st.session_state.get("report_pdf"):
    pdf = st.session_state["report_pdf"]
    st.success(f"Report ready ({len(pdf) / 1024:.0f} KB).")
    st.download_button(
        "Download the PDF report",
        pdf,
        file_name=st.session_state.get("report_name", "glee-report.pdf"),
        mime="application/pdf",
        type="primary",
    )
