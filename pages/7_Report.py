"""Report: a PDF of the chosen dataset's runs, with the same charts as the app."""

import streamlit as st

import studio_ui
from glee_core import GleeError
from glee_core.report import build_report
from glee_core.store import slug

studio_ui.sidebar()
st.title("Report")

runs = studio_ui.setting_runs(key="report-methods")
st.caption("A4 PDF: configuration, the results table, class frequency, head vs tail, per-class "
           "F1, weight norms and feature histograms. The same report from the command line: "
           "`python -m glee_core report --runs-dir DIR --dataset ID --out report.pdf`.")
if runs and st.button("Build the PDF", type="primary"):
    try:
        with st.spinner("Rendering charts and laying out the PDF ..."):
            st.session_state["report_pdf"] = build_report(runs)
            st.session_state["report_name"] = (
                f"glee-report-{slug(runs[0].dataset)}-{runs[0].record.mode}-"
                f"{len({r.method for r in runs})}-methods.pdf")
    except GleeError as exc:
        st.error(studio_ui.md(exc))
if st.session_state.get("report_pdf"):
    pdf = st.session_state["report_pdf"]
    st.success(f"Report ready ({len(pdf) / 1024:.0f} KB).")
    st.download_button("Download the PDF report", pdf,
                       file_name=st.session_state.get("report_name", "glee-report.pdf"),
                       mime="application/pdf", type="primary")
