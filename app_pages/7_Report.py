"""Report: a PDF of the chosen dataset's runs, with the same charts as the app."""

import hashlib

import streamlit as st

from glee_core.models.requests import ReportRequest
from glee_core.runs.store import slug
from glee_core.views.charts import RUN_CHARTS
from studio_ui.jobs import download, last_failure, last_made, work_button
from studio_ui.navigation import sidebar
from studio_ui.stores import store, stores
from studio_ui.text import md
from studio_ui.widgets import setting_runs

sidebar()
st.title("Report")

runs = setting_runs(key="report-methods")
in_report = [c.title.lower() for c in RUN_CHARTS.values() if c.in_report]
st.caption(
    f"A4 PDF: configuration, the results table, {', '.join(in_report)}, and post-hoc "
    "calibration. It is built by a background job: this page, and the others, stay usable "
    "meanwhile. The same report from the command line: "
    "`python -m glee_core report --runs-dir DIR --dataset ID --out report.pdf`."
)
if runs:
    ids = sorted(r.run_id for r in runs)
    name = (
        f"glee-report-{slug(runs[0].dataset)}-{runs[0].record.mode}-"
        f"{len({r.method for r in runs})}-methods"
    )
    digest = hashlib.sha256("\n".join(ids).encode()).hexdigest()[:10]
    request = ReportRequest(
        dataset=runs[0].dataset,
        runs=ids,
        out=str(store().jobs_dir / f"{name}-{digest}.pdf"),
        stores=[str(s.root) for s in stores()],
    )
    work_button(request, "Build the PDF", key="report-build")
    if error := last_failure("report", request):
        st.error(f"The report failed: {md(error)}")
    elif (made := last_made("report", request)) is not None:
        for path, file_name, mime in made.files:
            download(path, file_name, mime, key="report-pdf", primary=True)
