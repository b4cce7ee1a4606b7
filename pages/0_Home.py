"""Home: what Glee Studio does, the current dataset and backbone, a one-click quick start."""

import streamlit as st

import studio_ui
from glee_core.config import TrainConfig, TrainRequest
from glee_core.methods import METHODS

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
st.write(f"Compare all {len(METHODS)} heads (the paper's twelve, the baselines and the heads "
         "beyond the paper) on the embedded demo with the backbone frozen: the backbone encodes "
         "the data once, then each head trains in seconds.")
quick = TrainConfig(mode="frozen")
if studio_ui.policy().read_only:
    st.caption("Training is switched off on this deployment: browse the shipped runs on the "
               "Results, Diagnostics and Paper pages.")
else:
    if st.button("Quick compare on demo", type="primary"):
        request = TrainRequest(data=studio_ui.DEMO, methods=list(METHODS), seeds=[1],
                               model=model, config=quick)
        job = studio_ui.launch(request, label=f"Quick compare: {len(METHODS)} heads on demo")
        if job is not None:
            studio_ui.choose_dataset(studio_ui.DEMO)
            st.session_state["last_job"] = job.id
            st.switch_page("pages/2_Train.py")
    demo = studio_ui.load_options(studio_ui.DEMO)
    estimate = studio_ui.time_estimate(demo, len(METHODS), epochs=quick.epochs,
                                       max_length=quick.max_length or demo.max_length,
                                       mode="frozen")
    st.caption(f"Estimated here: {estimate['text']} with {model} "
               f"({estimate['basis']}; runs already in the store are opened, not retrained).")
