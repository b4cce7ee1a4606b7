"""The Data page's two reports on the data itself: the health check (suspected label errors,
duplicates and leaks, outliers, confused classes) and the label budget (the texts each class
needs), each measured by a background job (its button says the estimate, then its bar shows
where the page asked for it) and drawn from the report it wrote (``glee_core.health.report``,
``glee_core.budget.report``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import streamlit as st

from glee_core.budget.options import BudgetOptions
from glee_core.budget.report import BUDGET_CSV, BUDGET_FILE, budget_line, read_budget
from glee_core.health.options import HealthOptions
from glee_core.health.report import HEALTH_FILE, ISSUES_FILE, read_health
from glee_core.models.config import POOLINGS
from glee_core.models.fields import default_of, help_of
from glee_core.models.requests import BudgetRequest, HealthRequest
from glee_core.pool.labelling import LabellingSession
from glee_core.runs.store import slug
from glee_core.runs.tables import spreadsheet_csv
from glee_core.views.data_charts import chart_label_budget

from .access import policy
from .choice import choose_dataset, current_choice, current_model
from .jobs import last_failure, work_button
from .stores import all_runs, recommendation_of, store, store_state
from .text import code, md

WEAK_FLAGS_F1 = 75.0  # a model under this out-of-fold macro-F1 flags ambiguous texts as well


def health_folder(dataset, model: str):
    """Where this dataset's reports by ``model`` are kept (beside the runs)."""
    return store().data_report_dir(dataset.id, model)


def show_health(dataset, folder) -> None:
    """The health report kept in ``folder``: counts, the flags' strength, the class table,
    the flagged rows, and training without them."""
    health = read_health(folder)
    issues, summary = health.issues, health.summary()
    st.caption(
        f"{summary['suspected_label_errors']} suspected label error(s) among "
        f"{summary['training_texts']} training texts; "
        f"{summary['training_texts_with_duplicates']} with a near-duplicate in training, "
        f"{summary['training_texts_leaked_into_dev_or_test']} with one in dev or test "
        f"(a leak: it inflates the scores); {summary['outliers']} outlier(s). "
        f"{health.folds}-fold probabilities of `{health.method}` on the "
        f"{health.pooling}-pooled features of {code(health.model)}."
    )
    strength = health.oof_macro_f1
    if strength is not None:  # how far to trust the flags: the model behind them
        weak = strength < WEAK_FLAGS_F1
        st.caption(
            f"The flags come from a model that scores **{strength:.1f}** macro-F1 on the "
            "texts it did not train on (labels as given): "
            + (
                "a weak one, so many flags are texts it finds hard or ambiguous rather "
                "than wrong labels. "
                if weak
                else ""
            )
            + "Read them as a ranking (the lowest label quality first, in the table "
            "below) and look before you remove any."
        )
    header, rows = health.table()
    table = pd.DataFrame(rows, columns=header)
    table["suspected"] = table["suspected"].astype(str)  # a count, or "too few to judge"
    st.dataframe(table, hide_index=True)
    absorbed = health.absorbed()
    if absorbed:
        st.caption(
            "A head class absorbing a tail one: "
            + "; ".join(
                f"**{md(p['true'])}** → {md(p['predicted'])} "
                f"({p['texts']} text(s), {p['share']:.0%} of its own)"
                for p in absorbed
            )
            + "."
        )
    classes = ["(all classes)", *table["class"]]
    left, right = st.columns([3, 1], vertical_alignment="bottom")
    chosen = left.selectbox("Suspected rows of", classes, key="health-class")
    only = right.toggle("Suspected only", value=True, key="health-only")
    shown = issues if chosen == "(all classes)" else issues[issues["given_label"] == chosen]
    if only:
        shown = shown[shown["suspected"]]
    st.dataframe(
        shown[["row", "text", "given_label", "suggested_label", "label_quality", "duplicate_rows"]],
        hide_index=True,
    )
    st.download_button(
        "Download every training row's label quality (CSV)",
        spreadsheet_csv(issues),
        f"{slug(dataset.id)}-{ISSUES_FILE}",
        "text/csv",
    )
    flagged = health.flagged_rows()
    without = health.oof_macro_f1_without
    measured = (
        f" (measured: cross-validated macro-F1 {strength:.1f} → {without:.1f})"
        if strength is not None and without is not None
        else ""
    )
    if flagged and st.button(
        f"Train without the {len(flagged)} flagged row(s){measured}",
        help="A variant of this dataset without them: its id ends in "
        "+without-N-..., so its runs stay apart from the full data's; "
        "compare the two on the Results page. The figure: the probe "
        "behind the flags refitted without them on every fold, scored "
        "on the same held-out texts, labels as given.",
    ):
        rows_file = folder / f"excluded-{len(flagged)}.txt"
        rows_file.write_text("".join(f"{r}\n" for r in flagged), encoding="utf-8")
        choose_dataset(replace(current_choice(), exclude=str(rows_file)))
        st.rerun()


def health_section(dataset) -> None:
    """The Data page's health check: its button with the estimate, then the report."""
    st.subheader("Data health")
    st.caption(
        "Which training labels look wrong, which texts repeat (within training, or "
        "copied into dev or test), which are outliers, and which classes the tail loses "
        "to: a probe on the frozen features gives every training text class "
        "probabilities from folds that did not hold it, and cleanlab reads them. The "
        "command line's `python -m glee_core health` does the same."
    )
    choice = current_choice()
    if choice.exclude:
        st.info(
            f"This is **{md(dataset.id)}**: the training split without the rows "
            "the health check flagged. Its runs are apart from the full data's."
        )
        if st.button("Back to every training row"):
            choose_dataset(replace(choice, exclude=None))
            st.rerun()
        return
    model = current_model()
    folder = health_folder(dataset, model)
    done = (folder / HEALTH_FILE).is_file()
    if policy().read_only:
        st.caption("Checking writes files; it is switched off on this deployment (read-only).")
    else:
        request = HealthRequest(current_choice(), HealthOptions(out=str(folder)), model)
        work_button(
            request,
            "Check again" if done else "Check the data's health",
            key="health-check",  # its estimate moves: the key keeps the click
            primary=not done,
            dataset=dataset,
        )
        if error := last_failure("health", request):
            st.error(f"The health check failed: {md(error)}")
    if done:
        show_health(dataset, folder)


def budget_head(dataset) -> tuple[str, str | None]:
    """The head the label budget retrains, and its pooling: the quick compare's recommended
    candidate when there is one, else the command line's default."""
    quick = [r for r in all_runs(dataset.id, report=False) if r.record.hyperparameters.frozen]
    rec = recommendation_of(quick) if quick else None
    if rec is None:
        return default_of(BudgetOptions, "method"), None
    return rec.chosen.method, rec.chosen.pooling if rec.chosen.pooling in POOLINGS else None


@st.cache_resource(max_entries=8, show_spinner=False)
def _budget_view(folder: str, state: tuple[int, int]):
    """The label budget kept in ``folder`` and its chart, read and drawn once per state of the
    folder (a job writing it anew changes the state): a page draw does not redraw it."""
    report = read_budget(Path(folder))
    return report, chart_label_budget(report)


def show_budget(dataset, folder) -> None:
    """The label budget kept in ``folder``: what was measured, the chart, the table."""
    report, chart = _budget_view(str(folder), store_state(str(folder)))
    st.caption(
        f"`{report.method}` on the {report.pooling}-pooled features "
        f"of {code(report.model)}, retrained on "
        f"{', '.join(f'{f:.0%}' for f in report.fractions)} of every class's training "
        f"texts, seeds {', '.join(map(str, report.seeds))}; each class's F1 on the "
        f"whole test split ({report.seconds:.0f} s). Forecasts extrapolate the "
        "measured curve: bench/budget_backtest.py measures how far they hold "
        '(BENCHMARKS.md, "Label budget").'
    )
    if line := budget_line(report, md):
        st.info(line)
    st.altair_chart(chart, width="content")
    header, rows = report.table()
    table = pd.DataFrame(rows, columns=header)
    session = LabellingSession.latest(store(), dataset.id)
    if session is not None and session.pool_classes:  # what the unlabelled texts may give
        likely = session.likely()
        table["likely in the pool"] = [likely.get(c, "") for c in table["class"]]
        st.caption(
            f"Likely in the pool: of {code(session.pool_name)}'s texts, those "
            "the head predicts as the class, times its precision for that class on dev "
            "(Unlabelled texts, below)."
        )
    st.dataframe(table, hide_index=True)
    st.download_button(
        "Download the label budget (CSV)",
        spreadsheet_csv(pd.read_csv(folder / BUDGET_CSV, keep_default_na=False)),
        f"{slug(dataset.id)}-{BUDGET_CSV}",
        "text/csv",
    )


def budget_section(dataset) -> None:
    """The Data page's label budget: the target, its button with the estimate, the report."""
    st.subheader("Label budget")
    st.caption(
        "How many more texts each class needs: the head is retrained on 10 to 100% of "
        "every class's training texts (quick mode: the button says how long here), each "
        "class's test F1 is measured at each size, and a curve fitted per class forecasts "
        "its F1 at twice and four times its texts, and the texts it needs to reach a "
        "target. "
        "The command line's `python -m glee_core budget` does the same."
    )
    model = current_model()
    folder = health_folder(dataset, model)
    done = (folder / BUDGET_FILE).is_file()
    method, pooling = budget_head(dataset)
    if policy().read_only:
        st.caption("Measuring writes files; it is switched off on this deployment (read-only).")
    else:
        left, right = st.columns([1, 3], vertical_alignment="bottom")
        target = left.number_input(
            "Target F1",
            0.05,
            1.0,
            default_of(BudgetOptions, "target_f1"),
            0.05,
            help=help_of(BudgetOptions, "target_f1"),
        )
        options = BudgetOptions(out=str(folder), method=method, pooling=pooling, target_f1=target)
        request = BudgetRequest(current_choice(), options, model)
        with right:
            work_button(
                request,
                ("Measure again" if done else "Measure the label budget") + f" (head: {method})",
                key="budget-measure",
                primary=not done,
                dataset=dataset,
                help="The head is the quick compare's recommended one when there is "
                "one (Home), else " + default_of(BudgetOptions, "method") + ".",
            )
        if error := last_failure("budget", request):
            st.error(f"The label budget failed: {md(error)}")
    if done:
        show_budget(dataset, folder)
