"""Playground: type a text, see every class's score from a run or the zero-shot MLM head."""

import streamlit as st

import studio_ui
from glee_core import GleeError
from glee_core.charts import chart_class_scores
from glee_core.runs import (class_score_table, get_backbone, load_run_model, text_logits,
                            zero_shot_logits)

studio_ui.sidebar()
st.title("Playground")


@st.cache_resource(show_spinner="Loading the run's weights ...", max_entries=4)
def run_model(run_path: str):
    from glee_core.runs import load_run
    run = load_run(run_path)
    return load_run_model(run)


dataset = studio_ui.current_dataset()
if dataset is None:
    st.stop()
runs = studio_ui.dataset_runs(dataset.id)
options = {"zero-shot": "No trained run: zero-shot verbalizer scores of the backbone's MLM head"}
options.update(studio_ui.run_labels(runs))
choice = studio_ui.choose("Score with", options)
example = dataset.splits["test"]["text"].iloc[0]
text = st.text_area("Text", example, height=100)

if text.strip():
    head, _ = dataset.head_tail()
    try:
        if choice == "zero-shot":
            model_name = studio_ui.current_model()
            studio_ui.backbone_notice(model_name, ["prompt"])
            logits = zero_shot_logits(get_backbone(model_name), dataset, [text])
            table = class_score_table(logits[0], dataset.classes, dataset.verbalizer, head)
            title = f"Zero-shot: {model_name}'s MLM head at [MASK], label words averaged"
        else:
            run = next(r for r in runs if r.run_id == choice)
            model, backbone = run_model(str(run.path))
            config = run.config
            logits = text_logits(model, backbone, config["dataset"]["template"],
                                 config["hyperparameters"]["max_length"], [text])
            table = class_score_table(logits[0], run.classes, config["dataset"]["verbalizer"],
                                      config["dataset"]["head_classes"])
            kind = ("verbalizer scores (label words at [MASK])" if model.spec.predictor == "mlm"
                    else "class probabilities of the CLS head")
            title = f"{run.method}: {kind}"
    except GleeError as exc:
        st.error(str(exc))
        st.stop()
    top = table.sort_values("score", ascending=False).iloc[0]
    st.metric("Prediction", top["class"], f"{top['score']:.1%}")
    st.altair_chart(chart_class_scores(table, title), width="stretch")
    with st.expander("Scores as a table"):
        st.dataframe(table.sort_values("score", ascending=False), hide_index=True)
