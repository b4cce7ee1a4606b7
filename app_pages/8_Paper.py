"""The paper: its Tables 2, 3 and 5 as charts from the shipped data, with your runs beside them.

This is what an offline user sees of the paper's effect: the default backbone here has no
pretrained MLM head, so the paper's own numbers show what prompt-tuning does with one.
"""

import streamlit as st

from glee_core.runs.paper import paper_cells
from glee_core.runs.record import METRIC_TITLES
from glee_core.train.reproduce import PAPER_TABLES
from glee_core.views.results_charts import chart_paper_head_tail_gap, chart_paper_results
from studio_ui.choice import backbone_notice
from studio_ui.navigation import sidebar
from studio_ui.stores import all_runs
from studio_ui.widgets import choose

sidebar()
st.title("Paper")
st.markdown(
    "The results of *Making Pretrained Language Models Good Long-tailed Learners* (Zhang et "
    "al., EMNLP 2022), from its Tables 2, 3 and 5: mean over 5 runs with bert-base-uncased "
    "(R52, RTE, BoolQ) or bert-base-chinese (the others), ± the sample standard deviation as "
    "printed. **The finding:** prompt-tuning beats CLS-tuning on long-tailed data, mostly on the "
    "tail classes; focal loss and η-norm help little; feeding the prompt to a CLS head does not "
    "help; a CLS head with ReLU and the MLM head's LayerNorm (w/ pt. LN) closes most of the gap."
)

tables = {number: f"Table {number}: {table.title}" for number, table in PAPER_TABLES.items()}
number = choose("Table", tables, st.radio, horizontal=False)
cells = paper_cells()
metrics = [m for m in METRIC_TITLES if m in set(cells.loc[cells["table"] == number, "metric"])]
preferred = "tail_f1" if "tail_f1" in metrics else metrics[0]
metric = choose(
    "Metric",
    {m: METRIC_TITLES[m] for m in metrics},
    st.radio,
    horizontal=True,
    index=metrics.index(preferred),
)

runs = []
if st.toggle("Overlay my runs (datasets the paper has, R8 beside R52)", value=True):
    store_runs = all_runs(report=False)
    covered = [r for r in store_runs if r.dataset in {*PAPER_TABLES[number].datasets, "r8"}]
    if covered:
        labels = dict(sorted({r.setting: r.record.setting_label for r in covered}.items()))
        setting = choose("Setting of my runs", labels)
        runs = [r for r in covered if r.setting == setting]
        backbone_notice(
            runs[0].record.model.name,
            sorted({r.method for r in runs}),
            runs[0].record.model.mlm_head_pretrained,
            full=True,
        )
    else:
        st.caption(
            "No runs of this table's datasets in the store yet (e.g. `python -m glee_core "
            f"reproduce --table {number} --datasets r8 --mode frozen`)."
        )
st.altair_chart(chart_paper_results(number, metric, runs), width="content")
if {"head_f1", "tail_f1"} <= set(metrics):
    st.altair_chart(chart_paper_head_tail_gap(number), width="content")
st.caption(
    "Source: the paper's tables as shipped in `glee_core/reference/glee_tables.csv` "
    "(transcribed and checked); the `reproduce` command puts your runs beside every cell."
)
