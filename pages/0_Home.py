"""Home: what Glee Studio does, the current dataset and backbone, a one-click quick start."""

import streamlit as st

import studio_ui
from glee_core.studio import (
    METHODS,
    TrainConfig,
    TrainRequest,
    method_label,
    ranked_on_dev,
    top_for_finetuning,
)

FINETUNE_TOP = 3

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
         f"beyond the paper) on **{target}** with the backbone frozen: the backbone encodes the "
         "data once, then each head trains in seconds. Then fine-tune the best of them, where "
         "the accuracy is.")
quick = TrainConfig(mode="frozen")
read_only = studio_ui.policy().read_only
if read_only:
    st.caption("Training is switched off on this deployment: browse the shipped runs on the "
               "Results, Diagnostics and Paper pages.")
elif dataset is not None:
    if st.button(f"Quick compare on {studio_ui.md(target)}", type="primary"):
        request = TrainRequest(data=choice, methods=list(METHODS), seeds=[1], model=model,
                               config=quick)
        job = studio_ui.launch(request, label=f"Quick compare: {len(METHODS)} heads on {target}")
        if job is not None:
            st.session_state["last_job"] = job.id
            st.switch_page("pages/2_Train.py")
    estimate = studio_ui.time_estimate(dataset, len(METHODS), quick)
    st.caption(f"Estimated here: {estimate['text']} with {studio_ui.md(model)} "
               f"({estimate['basis']}; runs already in the store are opened, not retrained).")

# After a quick compare: the heads that did best on dev, and one click to fine-tune them
compared = studio_ui.quick_compare_runs(target, model) if dataset is not None else []
if compared:
    st.subheader("Next: fine-tune the best heads")
    ranked = ranked_on_dev(compared)
    top = top_for_finetuning(compared, FINETUNE_TOP)
    shown = ranked.head(8).assign(
        method=lambda f: f["method"].map(method_label),
        **{c: lambda f, c=c: (100 * f[c]).round(1) for c in ("dev", "f1", "tail_f1")})
    st.dataframe(shown.rename(columns={"method": "Method", "seeds": "Seeds",
                                       "dev": "Dev score (chooses)", "f1": "Test macro-F1",
                                       "tail_f1": "Test tail F1"}), hide_index=True)
    st.caption(f"Your quick compare on {studio_ui.md(target)} "
               f"({studio_ui.md(compared[0].record.setting_label)}), ranked on "
               "dev, never on test. Fine-tuning trains the whole model from each head "
               "(practical recipe: learning rate chosen on dev, LP-FT from these very heads).")
    if top and not read_only:
        finetune = TrainConfig()
        if st.button(f"Fine-tune the top {len(top)}: {', '.join(top)}", type="primary"):
            request = TrainRequest(data=choice, methods=top, seeds=[1], model=model,
                                   config=finetune)
            job = studio_ui.launch(request, label=f"Fine-tune the top {len(top)} on {target} "
                                                  "(practical recipe)")
            if job is not None:
                st.session_state["last_job"] = job.id
                st.switch_page("pages/2_Train.py")
        estimate = studio_ui.time_estimate(dataset, len(top), finetune)
        st.caption(f"Estimated here: {estimate['text']} (at most; {estimate['basis']}).")
