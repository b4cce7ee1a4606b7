"""Diagnostics: the paper's Figure 3 (weight norms) and Figure 4 (feature histograms)."""

import streamlit as st

from glee_core.models.methods import registry_order
from glee_core.views.diagnostics_charts import (
    FIGURE4_FEATURES,
    FIGURE4_METHODS,
    FIGURE4_MIN_EXAMPLES,
    chart_feature_distributions,
    default_feature_classes,
    feature_examples,
)
from glee_core.views.norm_charts import (
    chart_norm_evolution,
    chart_norm_vs_count,
    chart_weight_norms,
)
from studio_ui.navigation import sidebar
from studio_ui.text import md
from studio_ui.widgets import (
    choose,
    choose_many,
    class_highlight,
    method_labels,
    run_labels,
    setting_runs,
)

sidebar()
st.title("Diagnostics")

runs = setting_runs(key="diag-methods")

st.subheader("Per-class weight norms (Figure 3)")
st.caption(
    "The norm of each class's predictor row, classes ordered head to tail (for prompt "
    "methods: the average of the label words' decoder rows). A CLS head trained on a long "
    "tail grows large norms for head classes; the paper finds prompt-tuning's flatter."
)
highlight = class_highlight(runs[0].record.dataset.order)
st.altair_chart(chart_weight_norms(runs, highlight=highlight), width="content")

st.altair_chart(chart_norm_vs_count(runs), width="content")
st.caption(
    "The same norms against each class's training count (log scale), relative to the "
    "method's mean norm; each panel's title gives the method's fitted slope. Near 0: "
    "flat, the classifier does not favour frequent classes."
)
with st.expander("Weight norms while training (per dev evaluation)"):
    evolving = [r for r in runs if any(h.get("weight_norms") for h in r.history)]
    if evolving:
        run_id = choose("Run", run_labels(evolving), key="norm-evolution")
        st.altair_chart(
            chart_norm_evolution(next(r for r in evolving if r.run_id == run_id)), width="stretch"
        )
    else:
        st.caption("These runs were stored before histories kept the norms; retrain to see.")

st.subheader("Classifier-input features (Figure 4)")
head_default, tail_default = default_feature_classes(runs[0])
head_classes = runs[0].record.dataset.head_classes
tail_classes = runs[0].record.dataset.tail_classes
c1, c2, c3 = st.columns(3)
head_class = c1.selectbox("Head class", head_classes, index=head_classes.index(head_default))
tail_class = c2.selectbox(
    "Tail class",
    tail_classes,
    index=tail_classes.index(tail_default) if tail_default in tail_classes else 0,
)
dims = c3.slider("First features", 1, 20, FIGURE4_FEATURES)
examples = feature_examples(runs[0])
if examples[tail_class] < FIGURE4_MIN_EXAMPLES:
    st.caption(
        f"{md(tail_class)} has {examples[tail_class]} stored test example(s): its "
        "histograms are single spikes."
        + (
            ""
            if tail_class != tail_default
            else f" No tail class has {FIGURE4_MIN_EXAMPLES} or more; this one has the most."
        )
    )
present = registry_order(r.method for r in runs)
figure_rows = [m for m in present if m in FIGURE4_METHODS] or present
shown = choose_many(
    "Heads to compare",
    method_labels(present),
    figure_rows,
    key="figure4-methods",
    help="The paper's Figure 4 compares Tanh, ReLU, ReLU + LN, ReLU + pt. LN and prompt-tuning.",
)
st.caption(
    "The distribution (density) of each of the first features fed to the predictor, for "
    "the stored test examples of the two classes (up to 64 each, the lowest seed's run); "
    "head and tail overlaid. Dead features are zero for most of a class's examples: the "
    "paper finds ReLU kills many tail features, and a LayerNorm after it keeps them "
    "alive."
)
if shown:
    st.altair_chart(
        chart_feature_distributions(
            [r for r in runs if r.method in shown], head_class, tail_class, dims
        ),
        width="content",
    )
