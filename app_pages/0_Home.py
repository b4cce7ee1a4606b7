"""Home: the question, the one-click answer on the current dataset, and the step after it."""

import streamlit as st

import studio_ui
from glee_core.studio import (
    METHODS,
    MODES,
    TrainConfig,
    TrainRequest,
    method_label,
    ranked,
    recommend,
)

studio_ui.sidebar()

st.title("Glee Studio")
st.markdown(
    "**Which classifier head should I use on my long-tailed data, and how should I tune "
    "it?** One click compares every head on your data and recommends one; the next "
    "steps make it better, each with its time here."
)

choice = studio_ui.current_choice()
model = studio_ui.current_model()
dataset = studio_ui.current_dataset()
target = dataset.id if dataset is not None else choice.dataset
name = studio_ui.display_name(target)  # an upload by its file's name
if dataset is not None:
    head, tail = dataset.head_tail()
    st.caption(
        f"Dataset **{studio_ui.md(name)}**: {dataset.num_classes} classes, "
        f"{len(dataset.splits['train'])} training texts, {len(head)} head / {len(tail)} "
        f"tail classes · backbone **{studio_ui.md(studio_ui.model_label(model))}** · "
        "change either on the Data and Train pages."
    )

quick = TrainConfig(mode="frozen")
read_only = studio_ui.policy().read_only
if read_only:
    st.caption(
        "Training is switched off on this deployment: browse the shipped runs on the "
        "Results, Diagnostics and Paper pages."
    )
elif dataset is not None:
    request = TrainRequest(data=choice, methods=list(METHODS), seeds=[1], model=model, config=quick)
    estimate = studio_ui.estimate_of(request, dataset)
    done = estimate.runs == 0
    if studio_ui.running_step(request, key="home-compare-running"):
        pass  # running: its bar, not a second launch
    elif st.button(
        f"Quick compare on {studio_ui.md(name)}",
        type="secondary" if done else "primary",
        help="Every head is already stored: this opens them." if done else None,
    ):
        job = studio_ui.launch(
            request, label=f"Quick compare: {len(METHODS)} heads on {name}", estimate=estimate
        )
        if job is not None:
            st.session_state["last_job"] = job.id
            st.switch_page("app_pages/2_Train.py")
    small = dataset.small_dev()
    chosen_by = (
        f"chosen by {quick.folds}-fold cross-validation on train + dev, since its dev "
        f"split is small ({studio_ui.md(small)})"
        if small
        else "chosen on dev"
    )
    st.caption(
        f"All {len(METHODS)} heads (the paper's twelve, the baselines and the heads "
        "beyond the paper), each on the `[CLS]` and the mean-pooled state where it reads "
        f"a plain input, on the frozen backbone; the best {chosen_by}, never on test. "
        f"Estimated here: {estimate.text} ({estimate.basis}; {estimate.sure})."
    )
    if estimate.left_out:
        st.caption(f"{studio_ui.md(estimate.left_out)}.")
        studio_ui.label_words_button("home-label-words")

studio_ui.added_panel(dataset)  # pool texts labelled on the Data page: what they did

# After a compare: which head to use on this dataset, and the next step
runs = studio_ui.dataset_runs(target)  # runs need no texts: shown even when they are gone
if not runs:  # a label budget measured before any compare still says what the tail needs
    studio_ui.budget_notice(target)
if runs:
    st.subheader(f"Recommendation for {studio_ui.md(name)}")
    studio_ui.recommendation_panel(runs, key="home")
    compared = studio_ui.quick_compare_runs(target, model)
    if compared:
        order = ranked(compared)
        shown = order.assign(  # the id first: a cut label keeps what tells heads apart
            method=lambda f: f["method"].map(
                lambda m: f"{m} · {METHODS[m].paper_row}" if m in METHODS else method_label(m)
            ),
            **{c: lambda f, c=c: f[c].round(1) for c in ("score", "dev", "f1", "tail_f1")},
        )
        by_cv = any(r.metrics.cv for r in compared)
        with st.expander(f"The quick compare's candidates, best first ({len(order)})"):
            st.dataframe(
                shown[["method", "pooling", "score", "dev", "f1", "tail_f1", "seeds"]].rename(
                    columns={
                        "method": "Method",
                        "pooling": "Reads",
                        "seeds": "Seeds",
                        "score": ("CV F1 (chooses, %)" if by_cv else "Dev F1 (chooses, %)"),
                        "dev": "Dev F1 (%)",
                        "f1": "Test macro-F1 (%)",
                        "tail_f1": "Test tail F1 (%)",
                    }
                ),
                hide_index=True,
                width="stretch",  # every column within 1440 px
                column_config={
                    "Method": st.column_config.TextColumn(width="medium"),
                    **{
                        c: st.column_config.NumberColumn(format="%.1f")
                        for c in (
                            "CV F1 (chooses, %)",
                            "Dev F1 (chooses, %)",
                            "Dev F1 (%)",
                            "Test macro-F1 (%)",
                            "Test tail F1 (%)",
                        )
                    },
                },
            )
            st.caption(
                "Ranked by "
                + ("cross-validation on train + dev" if by_cv else "dev")
                + ", never by test. The Results page has every setting side by side."
            )

leading = []  # the recommendation's first heads: the backbone's sentence must be true of them
if runs and (shown_rec := recommend(runs)) is not None:
    leading = [shown_rec.chosen.method, *[p.method for p in shown_rec.contenders[1:2]]]
studio_ui.backbone_notice(model, leading=leading)

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
