"""Results: the paper-style table, per-class F1 against frequency, head vs tail."""

import streamlit as st

import studio_ui
from glee_core.charts import chart_head_tail, chart_per_class_f1, per_class_f1_frame
from glee_core.store import aggregate
from glee_core.tables import METRIC_TITLES, comparison_table

studio_ui.sidebar()
st.title("Results")

runs = studio_ui.setting_runs(key="results-methods")

st.subheader("Test results (%, mean ± std over seeds)")
table = comparison_table(aggregate(runs))


def bold_best(row):
    return ["font-weight: bold; background-color: #e8f0fe" if col in row["best"] else ""
            for col in row.index]


shown = table[["paper row", "method", "seeds", *METRIC_TITLES.values(), "best"]]
st.dataframe(shown.style.apply(bold_best, axis=1), hide_index=True,
             column_config={"best": None})
st.caption("Highlighted: the best mean of each column. Head/Tail F1 average the per-class F1 of "
           "the head / tail classes (split on training counts).")
st.download_button("Download table (CSV)",
                   table.assign(best=table["best"].str.join(";")).to_csv(index=False),
                   file_name=f"results-{runs[0].run_id.split('-')[0]}.csv", mime="text/csv")

highlight = studio_ui.class_highlight(list(runs[0].config["dataset"]["class_counts"]))
st.altair_chart(chart_per_class_f1(runs, highlight), width="stretch")
st.altair_chart(chart_head_tail(runs), width="stretch")
with st.expander("Per-class numbers"):
    st.dataframe(per_class_f1_frame(runs), hide_index=True)
