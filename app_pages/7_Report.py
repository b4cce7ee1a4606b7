"""Report: a PDF of the chosen dataset's runs, with the same charts as the app."""

import hashlib

import streamlit as st

import studio_ui
from glee_core.studio import RUN_CHARTS, ReportRequest, slug

studio_ui.sidebar()
st.title("Report")

runs = studio_ui.setting_runs(key="report-methods")
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
        out=str(studio_ui.store().jobs_dir / f"{name}-{digest}.pdf"),
        stores=[str(s.root) for s in studio_ui.stores()],
    )
    studio_ui.work_button(request, "Build the PDF", key="report-build")
    if error := studio_ui.last_failure("report", request):
        st.error(f"The report failed: {studio_ui.md(error)}")
    elif (made := studio_ui.last_made("report", request)) is not None:
        for path, file_name, mime in made.files:
            studio_ui.download(path, file_name, mime, key="report-pdf", primary=True)
