"""The Results page's three tabs: this dataset's table and charts, the paper comparison a
``reproduce`` wrote, and post-hoc calibration of a stored run. The page calls them in order."""

import streamlit as st

from glee_core.core.errors import GleeError
from glee_core.models.methods import registry_order
from glee_core.models.modes import MODES
from glee_core.runs.calibration import GRID, NAMES, Calibrator, calibrate, calibration_frame
from glee_core.runs.notes import merged_notes
from glee_core.runs.record import METRIC_TITLES, SHOT_TITLES
from glee_core.runs.store import slug
from glee_core.runs.tables import (
    SELECTION_NOTE,
    STD_NOTE,
    aggregate,
    comparison_csv,
    comparison_table,
    modes_table,
    twin_notes,
)
from glee_core.views.results_charts import (
    chart_calibration_curve,
    chart_calibration_delta,
    chart_head_tail,
    chart_per_class_f1,
    per_class_f1_frame,
)

from .choice import current_dataset_id
from .recommendation import recommendation_panel, variant_runs
from .stores import dataset_runs
from .text import md
from .widgets import HIGHLIGHT, choose, class_highlight, method_labels, run_labels, setting_runs


def calibration_tab() -> None:
    """Post-hoc calibration of a stored run (logit adjustment, tau-norm, eta-norm): the
    strength dev chose, its test scores and per-class change."""
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
            table = calibration_frame(before, after, f"{NAMES[method]} = {strength:g}")
            st.table(table.style.format(precision=1, na_rep="–"))  # shows the dashes
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


def dataset_tab() -> None:
    """This dataset: the recommendation, the test table, its variants' runs, the per-class and
    head/tail charts, and the modes one head was tuned in."""
    every = dataset_runs(current_dataset_id())
    if every:
        st.subheader("Recommendation")
        recommendation_panel(every, key="results")
    runs = setting_runs(key="results-methods")
    _test_table(runs)
    _variants(runs)
    highlight = class_highlight(runs[0].record.dataset.order)
    st.altair_chart(chart_per_class_f1(runs, highlight), width="content")
    st.altair_chart(chart_head_tail(runs), width="content")
    with st.expander("Per-class numbers"):
        st.dataframe(per_class_f1_frame(runs), hide_index=True)

    _modes(every)


def _test_table(runs) -> None:
    """The setting's test table (the chosen head marked, tail first), its notes and its CSV."""
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


def _variants(runs) -> None:
    """The same setting on the dataset's variants (the same dev and test texts)."""
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


def _modes(every) -> None:
    """One head in every mode this dataset's store holds it in."""
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
