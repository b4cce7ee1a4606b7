"""The Results page's paper comparison: the table a ``python -m glee_core reproduce`` wrote
beside the paper's, the findings on its runs, its notes and downloads."""

from pathlib import Path

import streamlit as st

from glee_core.runs.findings import check_findings, findings_frame
from glee_core.runs.paper_tables import (
    comparison,
    comparison_block,
    comparison_markdown,
    reference_note,
)
from glee_core.runs.record import METRIC_TITLES
from glee_core.runs.tables import spreadsheet_csv
from glee_core.train.reproduce import header_lines, saved_comparisons, table_of

from .access import policy
from .choice import backbone_notice
from .stores import all_runs, stores
from .widgets import HIGHLIGHT, choose


def bold_marked(value):
    return HIGHLIGHT if str(value).endswith("*") else ""


def paper_tab() -> None:
    """The paper comparison ``python -m glee_core reproduce`` wrote: its table beside the
    paper's, the findings on its runs, its notes and downloads."""
    readable = stores()
    manifests = [m for s in readable for m in saved_comparisons(s)]
    if not manifests:
        st.info(
            "No reproduction in this run store yet. Run one table of the paper from the "
            "command line, e.g. `python -m glee_core reproduce --table 2 --datasets r8 "
            "--mode frozen --data-dir DATA --runs-dir "
            f"{'DIR' if policy().public else readable[-1].root}`; it appears here."
        )
    else:
        labels = {
            m["path"]: f"Table {m['table']} · {', '.join(m['datasets'])} · "
            f"{', '.join(sorted(set(m['models'].values())))} ({m['backbone']}) · "
            f"{len(m['seeds'])} seed(s) · {m['created'][:16]}"
            for m in manifests
        }
        path = choose("Reproduction", labels)
        manifest = next(m for m in manifests if m["path"] == path)
        table = table_of(manifest)
        stored = {run.run_id: run for run in all_runs(report=False)}
        runs = [stored.get(run_id) for run_id in manifest["run_ids"]]
        if any(r is None for r in runs):
            st.warning(
                f"{sum(r is None for r in runs)} of its {len(runs)} runs are no longer in "
                "the store; the table shows the others."
            )
        runs = [r for r in runs if r is not None]
        for model in sorted(set(manifest["models"].values())):
            records = [r.record for r in runs if r.record.model.name == model]
            backbone_notice(
                model,
                list(table.methods),
                all(r.model.mlm_head_pretrained for r in records) if records else None,
                full=True,
            )
        frame = comparison(runs, table, manifest["datasets"])
        st.subheader(f"Table {table.number}: {table.title}")
        st.markdown("\n\n".join(line for line in header_lines(manifest) if line))
        for metrics in table.blocks:
            st.markdown(
                f"**{' / '.join(METRIC_TITLES[m] for m in metrics)}** "
                "(ours: mean ± sample std over seeds; ref: the paper's mean ± std; Δ = "
                "ours − ref; logs: the authors' released R52 runs; * best mean)"
            )
            block = comparison_block(frame, metrics).reset_index()
            st.dataframe(block.style.map(bold_marked), hide_index=True)
        st.caption(reference_note(frame).replace("\n", "  \n"))
        # judged on the runs still in the store; the findings are about long-tailed data
        findings = [] if table.few_shot else check_findings(runs)
        if findings:
            st.subheader("The paper's findings, on these runs")
            st.dataframe(
                findings_frame(findings),
                hide_index=True,
                column_config={
                    "claim": st.column_config.TextColumn(width="large"),
                    "evidence": st.column_config.TextColumn(width="large"),
                    "paper": st.column_config.TextColumn(width="large"),
                },
            )
        if manifest.get("notes"):
            with st.expander(f"Notes from the runs ({len(manifest['notes'])})", expanded=True):
                for note in manifest["notes"]:
                    st.markdown(f"- {note}")
        stem = Path(path).stem
        left, right = st.columns(2)
        left.download_button("Download (CSV)", spreadsheet_csv(frame), f"{stem}.csv", "text/csv")
        right.download_button(
            "Download (Markdown)",
            comparison_markdown(frame, table, header_lines(manifest), findings),
            f"{stem}.md",
            "text/markdown",
        )
