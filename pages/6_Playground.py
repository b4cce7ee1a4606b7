"""Playground: type a text, see every class's score from a run or the zero-shot MLM head."""

import tempfile
from pathlib import Path

import streamlit as st

import studio_ui
from glee_core import GleeError
from glee_core.charts import chart_class_scores
from glee_core.experiment import get_backbone
from glee_core.inference import Scorer, load_run, predict_csv
from glee_core.store import slug
from glee_core.workspaces import LimitReached

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

try:
    if choice == "zero-shot":
        model_name = studio_ui.current_model()
        studio_ui.backbone_notice(model_name, ["prompt"])
        scorer = zero_shot_scorer(model_name, dataset, dataset.fingerprint())
        title = f"Zero-shot: {model_name}'s MLM head at [MASK], label words averaged"
        stem = f"{slug(dataset.id)}-zero-shot"
    else:
        run = next(r for r in runs if r.run_id == choice)
        scorer = run_scorer(str(run.path))
        kind = ("verbalizer scores (label words at [MASK])" if scorer.is_verbalizer
                else "class probabilities of the CLS head")
        title = f"{run.method}: {kind}"
        stem = run.run_id
    table = scorer.score_table(text) if text.strip() else None
except GleeError as exc:
    st.error(str(exc))
    st.stop()

if table is not None:
    top = table.iloc[0]
    # the probability as plain text: a metric's delta would read as an increase
    st.metric("Prediction", top["class"])
    st.caption(f"probability {top['score']:.1%} ({top['group']} class)")
    st.altair_chart(chart_class_scores(table, title), width="stretch")
    with st.expander("Scores as a table"):
        st.dataframe(table.assign(score=100 * table["score"]), hide_index=True,
                     column_config={"score": st.column_config.NumberColumn(
                         "probability (%)", format="%.2f"),
                         "logit": st.column_config.NumberColumn(format="%.2f")})

st.subheader("Classify a CSV of texts")
st.caption("Every row of the file comes back with the predicted class, its probability, the top "
           "3 classes with scores (and the label word, for prompt methods). The same as "
           "`python -m glee_core predict`. The file is read in memory, not kept.")
uploaded = st.file_uploader("CSV of texts", type=["csv", "tsv", "txt"], key="predict-upload")
rules = studio_ui.policy()
if uploaded is not None and rules.public:
    try:
        rules.check_upload_size(uploaded.size)
    except LimitReached as exc:
        st.error(f"{exc} (`python -m glee_core predict` classifies any size.)")
        uploaded = None
if uploaded is not None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "texts.csv"
        path.write_bytes(uploaded.getvalue())
        bar = st.progress(0.0, text="Classifying ...")
        try:
            predicted = predict_csv(scorer, path, progress=lambda done, total: bar.progress(
                done / total, text=f"Classifying: {done} of {total} texts"))
        except GleeError as exc:
            st.error(f"This CSV cannot be classified: {exc}")
            predicted = None
        bar.empty()
    if predicted is not None:
        st.dataframe(predicted, hide_index=True)
        st.download_button("Download the predictions (CSV)", predicted.to_csv(index=False),
                           f"{stem}-predictions.csv", "text/csv", type="primary")
