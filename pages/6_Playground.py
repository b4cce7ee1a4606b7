"""Playground: type a text, see every class's score from a run or the zero-shot MLM head."""

import streamlit as st

import studio_ui
from glee_core import GleeError
from glee_core.charts import chart_class_scores
from glee_core.experiment import get_backbone
from glee_core.inference import Scorer, load_run

studio_ui.sidebar()
st.title("Playground")


@st.cache_resource(show_spinner="Loading the run's weights ...", max_entries=4)
def run_scorer(run_path: str) -> Scorer:
    return Scorer.for_run(load_run(run_path))


@st.cache_resource(show_spinner="Loading the backbone ...", max_entries=2)
def zero_shot_scorer(model_name: str, _dataset, dataset_key: str) -> Scorer:
    return Scorer.zero_shot(get_backbone(model_name), _dataset)


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
    try:
        if choice == "zero-shot":
            model_name = studio_ui.current_model()
            studio_ui.backbone_notice(model_name, ["prompt"])
            scorer = zero_shot_scorer(model_name, dataset, dataset.fingerprint())
            title = f"Zero-shot: {model_name}'s MLM head at [MASK], label words averaged"
        else:
            run = next(r for r in runs if r.run_id == choice)
            scorer = run_scorer(str(run.path))
            kind = ("verbalizer scores (label words at [MASK])" if scorer.is_verbalizer
                    else "class probabilities of the CLS head")
            title = f"{run.method}: {kind}"
        table = scorer.score_table(text)
    except GleeError as exc:
        st.error(str(exc))
        st.stop()
    top = table.iloc[0]
    st.metric("Prediction", top["class"], f"{top['score']:.1%}")
    st.altair_chart(chart_class_scores(table, title), width="stretch")
    with st.expander("Scores as a table"):
        st.dataframe(table, hide_index=True)
