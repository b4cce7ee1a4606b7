"""Results: the paper-style table, per-class F1 against frequency, head vs tail; and the paper
comparison that ``python -m glee_core reproduce`` wrote."""

from pathlib import Path

import pandas as pd
import streamlit as st

from glee_core.core.errors import GleeError
from glee_core.models.methods import registry_order
from glee_core.models.modes import MODES
from glee_core.runs.calibration import GRID, NAMES, SHOWN, Calibrator, calibrate
from glee_core.runs.findings import check_findings, findings_frame
from glee_core.runs.notes import merged_notes
from glee_core.runs.paper_tables import (
    comparison,
    comparison_block,
    comparison_markdown,
    reference_note,
)
from glee_core.runs.record import METRIC_TITLES, SHOT_TITLES
from glee_core.runs.store import slug
from glee_core.runs.tables import (
    SELECTION_NOTE,
    STD_NOTE,
    aggregate,
    comparison_csv,
    comparison_table,
    modes_table,
    spreadsheet_csv,
    twin_notes,
)
from glee_core.train.reproduce import header_lines, saved_comparisons, table_of
from glee_core.views.results_charts import (
    chart_calibration_curve,
    chart_calibration_delta,
    chart_head_tail,
    chart_per_class_f1,
    per_class_f1_frame,
)
from studio_ui.access import policy
from studio_ui.choice import backbone_notice, current_dataset_id
from studio_ui.navigation import sidebar
from studio_ui.recommendation import recommendation_panel, variant_runs
from studio_ui.stores import all_runs, dataset_runs, stores
from studio_ui.text import md
from studio_ui.widgets import choose, class_highlight, method_labels, run_labels, setting_runs

sidebar()
st.title("Results")
ours, paper, calibration_tab = st.tabs(
    ["This dataset", "Paper comparison (reproduce)", "Calibrate (post-hoc)"]
)


HIGHLIGHT = "font-weight: bold; background-color: #e8f0fe"


def bold_marked(value):
    return HIGHLIGHT if str(value).endswith("*") else ""


with paper:  # drawn first: the other tab stops the page when the dataset has no runs
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

with calibration_tab:  # drawn before the first tab, which stops the page without runs
    runs_here = dataset_runs(current_dataset_id())
    if not runs_here:
        st.info("No finished runs for this dataset yet.")
    else:
        st.caption(
            "The standard long-tail fixes on a stored run, with no retraining: logit "
            "adjustment (Menon et al. 2021), τ-norm (Kang et al. 2020), the paper's "
            "η-norm at any η. The strength is chosen on the dev split; the numbers "
            "are test. The same as `python -m glee_core calibrate --run RUN`."
        )
        run_id = choose("Run", run_labels(runs_here), key="calibrate-run")
        run = next(r for r in runs_here if r.run_id == run_id)
        c1, c2 = st.columns(2)
        method = choose("Calibration", NAMES, c1.radio, key="calibrate-method")
        select = c2.radio(
            "Choose the strength on dev by",
            ["f1", "tail_f1"],
            format_func=METRIC_TITLES.get,
            key="calibrate-select",
        )
        try:
            result = calibrate(run, method, select)
        except GleeError as exc:
            st.warning(md(exc))
        else:
            strength = st.select_slider(
                "Strength",
                options=GRID.tolist(),
                value=result.value,
                key=f"strength-{run_id}-{method}-{select}",
            )
            calibrator = Calibrator(run)
            before = calibrator.raw("test")
            after = calibrator.metrics("test", method, strength)
            rows = [
                {"test": "before", **{t: before.get(k) for k, t in SHOWN}},
                {
                    "test": f"after ({NAMES[method]} = {strength:g})",
                    **{t: after.get(k) for k, t in SHOWN},
                },
            ]
            table = pd.DataFrame(rows).set_index("test").astype(float)
            st.table((100 * table).style.format(precision=1, na_rep="–"))  # shows the dashes
            st.caption(
                f"Dev chose {result.value:g} by {METRIC_TITLES[select]}. Many / medium "
                "/ few: > 100, 20-100, < 20 training examples (– where no test class "
                "falls in a bucket)."
            )
            st.altair_chart(
                chart_calibration_curve(result.dev_curve, result.value, strength, select),
                width="stretch",
            )
            st.altair_chart(
                chart_calibration_delta(
                    run,
                    before,
                    after,
                    f"Per-class change in test F1 ({NAMES[method]} = {strength:g})",
                ),
                width="content",
            )

with ours:
    every = dataset_runs(current_dataset_id())
    if every:
        st.subheader("Recommendation")
        recommendation_panel(every, key="results")
    runs = setting_runs(key="results-methods")
    st.subheader("Test results (%, mean ± std over seeds)")
    table = comparison_table(aggregate(runs))

    def bold_best(row):
        return [HIGHLIGHT if col in row["best"] else "" for col in row.index]

    by_cv = bool((table["CV"] != "–").all())
    # what a long-tail user looks for first: the head (its short id, whole) and whether it is
    # the one chosen (a column at the end was cut at 1440 px), its scores, tail first; the
    # paper's long row name after them
    shown = table[
        [
            "method",
            "selection",
            "seeds",
            *METRIC_TITLES.values(),
            *SHOT_TITLES.values(),
            *(["CV"] if by_cv else []),
            "Dev",
            "paper row",
            "best",
        ]
    ]
    numbers = st.column_config.TextColumn(width="small")
    st.dataframe(
        shown.style.apply(bold_best, axis=1),
        hide_index=True,
        height=35 * (len(shown) + 1) + 3,  # every row, no inner scroll
        column_config={
            "best": None,
            "paper row": "Paper row",
            "method": "Method",
            "seeds": st.column_config.NumberColumn("Seeds", width="small"),
            **{t: numbers for t in (*METRIC_TITLES.values(), *SHOT_TITLES.values())},
            "Dev": "Dev" if by_cv else "Dev (selects)",
            "CV": "CV (selects)",
            "selection": "Selection",
        },
    )
    st.caption(
        f"{SELECTION_NOTE}; {STD_NOTE}. Head/Tail F1 average "
        f"the per-class F1 of the head / tail classes; Many/Medium/Few F1 those of the "
        f"classes with > 100, 20-100, < 20 training examples (– where there is none). "
        f"{runs[0].record.dataset.head_tail_caption}."
    )
    for note in twin_notes(runs):
        st.caption(f"{note}.")
    run_notes = merged_notes([run.record for run in runs])
    if run_notes:  # what a run said of itself (a rate dev could not choose, truncated texts)
        with st.expander(f"Notes from these runs ({len(run_notes)})"):
            for note in run_notes:
                st.markdown(f"- {note}")
    st.download_button(
        "Download table (CSV)",
        comparison_csv(table),
        file_name=f"results-{slug(runs[0].dataset)}.csv",
        mime="text/csv",
    )
    for other, other_runs in variant_runs(runs[0].dataset).items():
        if other == runs[0].dataset:
            continue
        same = [r for r in other_runs if r.setting == runs[0].setting]
        with st.expander(
            f"The same setting on **{md(other)}** ({len(same)} run(s): "
            "the same dev and test texts, another training split)",
            expanded=bool(same),
        ):
            if not same:
                st.caption(
                    "No run of this setting there yet; choose it on the Data page and "
                    "train the same heads to compare."
                )
                continue
            theirs = comparison_table(aggregate(same))
            st.dataframe(
                theirs[["method", "seeds", *METRIC_TITLES.values(), "Dev", "paper row"]],
                hide_index=True,
                height=35 * (len(theirs) + 1) + 3,
                column_config={"paper row": "Paper row", "method": "Method"},
            )

    highlight = class_highlight(runs[0].record.dataset.order)
    st.altair_chart(chart_per_class_f1(runs, highlight), width="content")
    st.altair_chart(chart_head_tail(runs), width="content")
    with st.expander("Per-class numbers"):
        st.dataframe(per_class_f1_frame(runs), hide_index=True)

    tuned = {}
    for run in every:
        tuned.setdefault(run.method, set()).add(run.record.mode)
    several = [m for m in registry_order(tuned) if len(tuned[m]) > 1]
    st.subheader("How to tune: one head, every mode")
    if not several:
        st.caption(
            "Train a head in a second mode on the Train page ("
            + ", ".join(mode.label for mode in MODES.values())
            + ") to see the modes side by side here."
        )
    else:
        head = choose("Head", method_labels(several), key="modes-head")
        st.dataframe(
            modes_table(every, head),
            hide_index=True,
            column_config={"mode": st.column_config.TextColumn("mode", width="medium")},
        )
        st.caption(
            f"Every setting this dataset's store holds for this head, test %; {STD_NOTE}. "
            "Options: what sets a row apart from its mode's other rows (the whole protocol "
            "is the last column). Trainable: the parameters a run trained (quick compare and "
            "the parameter-efficient modes keep the backbone as it is)."
        )
