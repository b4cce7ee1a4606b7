"""Home: what Glee Studio does, the current dataset and backbone, a one-click quick start."""

import streamlit as st

import studio_ui
from glee_core.studio import (
    METHODS,
    TrainConfig,
    TrainRequest,
    method_label,
    ranked_on_dev,
)

studio_ui.sidebar()

st.title("Glee Studio")
st.markdown(
    "**Which classifier head should I use on my long-tailed data, and why?** Glee Studio "
    "compares the twelve methods of *Making Pretrained Language Models Good Long-tailed "
    "Learners* (Zhang et al., EMNLP 2022): CLS-tuning heads (Tanh / ReLU, η-norm, focal loss, "
    "LayerNorm, the MLM head's LayerNorm) against prompt-tuning, which lets the pretrained MLM "
    "head score a label word per class at `[MASK]`.\n\n"
    "1. **Data**: pick a dataset or upload a CSV, see its long tail and head/tail split.\n"
    "2. **Train**: launch methods x seeds (fine-tuning, or a quick compare on a frozen backbone).\n"
    "3. **Results**: Acc, F1, Head F1, Tail F1 (mean ± std), per-class F1 against frequency.\n"
    "4. **Diagnostics**: the paper's weight-norm bars and feature histograms.\n"
    "5. **Predictions**, **Playground**, **Report** (PDF).")

choice = studio_ui.current_choice()
model = studio_ui.current_model()
left, right = st.columns(2)
left.metric("Dataset", choice.dataset)
right.metric("Backbone", model)
studio_ui.backbone_notice(model)

dataset = studio_ui.current_dataset()
if dataset is not None:
    head, tail = dataset.head_tail()
    st.caption(f"{dataset.num_classes} classes · {len(dataset.splits['train'])} training examples "
               f"· {len(head)} head / {len(tail)} tail classes (threshold {dataset.threshold})")

st.subheader("Quick start")
target = dataset.id if dataset is not None else choice.dataset
st.write(f"Compare all {len(METHODS)} heads (the paper's twelve, the baselines and the heads "
         f"beyond the paper) on **{studio_ui.md(target)}** with the backbone frozen: the backbone "
         "encodes the data once, then each head trains in seconds. Then take the best of them "
         "further, where the accuracy is.")
quick = TrainConfig(mode="frozen")
read_only = studio_ui.policy().read_only
if read_only:
    st.caption("Training is switched off on this deployment: browse the shipped runs on the "
               "Results, Diagnostics and Paper pages.")
elif dataset is not None:
    estimate = studio_ui.time_estimate(dataset, list(METHODS), [1], quick)
    done = estimate["runs"] == 0
    if st.button(f"Quick compare on {studio_ui.md(target)}", type="secondary" if done else
                 "primary", help="Every head is already stored: this opens them." if done
                 else None):
        request = TrainRequest(data=choice, methods=list(METHODS), seeds=[1], model=model,
                               config=quick)
        job = studio_ui.launch(request, label=f"Quick compare: {len(METHODS)} heads on {target}",
                               estimate=estimate)
        if job is not None:
            st.session_state["last_job"] = job.id
            st.switch_page("pages/2_Train.py")
    st.caption(f"Estimated here: {estimate['text']} with {studio_ui.md(model)} "
               f"({estimate['basis']}).")

# After a compare: which head to use on this dataset, chosen on dev, and the next step
runs = studio_ui.dataset_runs(target)  # runs need no texts: shown even when they are gone
if runs:
    st.subheader(f"Recommendation for {studio_ui.md(target)}")
    studio_ui.recommendation_panel(runs, key="home")
    compared = studio_ui.quick_compare_runs(target, model)
    if compared:
        ranked = ranked_on_dev(compared)
        shown = ranked.assign(
            method=lambda f: f["method"].map(method_label),
            **{c: lambda f, c=c: (100 * f[c]).round(1) for c in ("dev", "f1", "tail_f1")})
        with st.expander(f"The quick compare's heads, best on dev first ({len(ranked)})"):
            st.dataframe(shown.rename(columns={"method": "Method", "seeds": "Seeds",
                                               "dev": "Dev F1 (chooses, %)",
                                               "f1": "Test macro-F1 (%)",
                                               "tail_f1": "Test tail F1 (%)"}),
                         hide_index=True)
            st.caption(f"{studio_ui.md(compared[0].record.setting_label)}; ranked on dev, never "
                       "on test. The Results page has every setting side by side.")
