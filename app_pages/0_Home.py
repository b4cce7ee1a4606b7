"""Home: the question, the one-click answer on the current dataset, and the step after it."""

import streamlit as st

from glee_core.models.modes import MODES
from studio_ui.access import policy
from studio_ui.choice import (
    backbone_notice,
    current_choice,
    current_dataset,
    current_model,
    display_name,
)
from studio_ui.launch_buttons import quick_compare_button
from studio_ui.learning import added_panel
from studio_ui.navigation import sidebar
from studio_ui.recommendation import budget_notice, candidates_table, recommendation_panel
from studio_ui.stores import dataset_runs, quick_compare_runs, recommendation_of
from studio_ui.text import md, model_label

sidebar()

st.title("Glee Studio")
st.markdown(
    "**Which classifier head should I use on my long-tailed data, and how should I tune "
    "it?** One click compares every head on your data and recommends one; the next "
    "steps make it better, each with its time here."
)

choice = current_choice()
model = current_model()
dataset = current_dataset()
target = dataset.id if dataset is not None else choice.dataset
name = display_name(target)  # an upload by its file's name
if dataset is not None:
    head, tail = dataset.head_tail()
    st.caption(
        f"Dataset **{md(name)}**: {dataset.num_classes} classes, "
        f"{len(dataset.splits['train'])} training texts, {len(head)} head / {len(tail)} "
        f"tail classes · backbone **{md(model_label(model))}** · "
        "change either on the Data and Train pages."
    )

if dataset is not None or policy().read_only:
    quick_compare_button(dataset, name)

added_panel(dataset)  # pool texts labelled on the Data page: what they did

# After a compare: which head to use on this dataset, and the next step
runs = dataset_runs(target)  # runs need no texts: shown even when they are gone
if not runs:  # a label budget measured before any compare still says what the tail needs
    budget_notice(target)
if runs:
    st.subheader(f"Recommendation for {md(name)}")
    recommendation_panel(runs, key="home")
    if compared := quick_compare_runs(target, model):
        candidates_table(compared)

leading = []  # the recommendation's first heads: the backbone's sentence must be true of them
if runs and (shown_rec := recommendation_of(runs)) is not None:
    leading = [shown_rec.chosen.method, *[p.method for p in shown_rec.contenders[1:2]]]
backbone_notice(model, leading=leading)

with st.expander("What Glee Studio compares, and why"):
    st.markdown(
        "It compares the twelve methods of *Making Pretrained Language Models Good Long-tailed "
        "Learners* (Zhang et al., EMNLP 2022), the usual long-tail fixes and linear probes: "
        "CLS-tuning heads (Tanh / ReLU, η-norm, focal loss, LayerNorm, the MLM head's "
        "LayerNorm) against prompt-tuning, which lets the pretrained MLM head score a label word "
        "per class at `[MASK]`.\n\n"
        "1. **Data**: pick a dataset or upload a CSV, see its long tail and head/tail split.\n"
        "2. **Train**: launch methods x seeds in any mode ("
        + ", ".join(mode.label for mode in MODES.values())
        + ").\n"
        "3. **Results**: Acc, F1, Head F1, Tail F1 (mean ± std), per-class F1 against "
        "frequency.\n"
        "4. **Diagnostics**: the paper's weight-norm bars and feature histograms.\n"
        "5. **Predictions**, **Playground**, **Report** (PDF)."
    )
