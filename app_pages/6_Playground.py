"""Playground: type a text, see every class's score from a run or the zero-shot MLM head."""

import hashlib
from pathlib import Path

import pandas as pd
import streamlit as st

from glee_core.core.errors import GleeError
from glee_core.core.files import write_atomic
from glee_core.models.requests import PredictRequest
from glee_core.models.scoring import get_backbone
from glee_core.runs.store import slug
from glee_core.runs.tables import spreadsheet_csv
from glee_core.serve.ensemble import EnsembleScorer
from glee_core.serve.inference import Scorer, blank_warning, load_run
from glee_core.serve.policy import LimitReached
from glee_core.views.prediction_charts import chart_class_scores
from studio_ui.access import policy, workspace
from studio_ui.choice import backbone_notice, current_choice, current_dataset, current_model
from studio_ui.jobs import last_failure, last_made, newest_job, rebased, work_button
from studio_ui.navigation import sidebar
from studio_ui.stores import dataset_runs, store, stores
from studio_ui.text import md
from studio_ui.widgets import answer_labels, choose

sidebar()
st.title("Playground")


@st.cache_resource(show_spinner="Loading the run's weights ...", max_entries=4)
def run_scorer(run_path: str) -> Scorer:
    return Scorer.for_run(load_run(run_path))


@st.cache_resource(show_spinner="Loading the backbone ...", max_entries=2)
def zero_shot_scorer(model_name: str, _dataset, dataset_key: str) -> Scorer:
    """Keyed by :meth:`Scorer.zero_shot_key`: the texts, the template and the label words (a
    visitor's own words must never score another visitor's texts)."""
    return Scorer.zero_shot(get_backbone(model_name), _dataset)


dataset = current_dataset()
if dataset is None:
    st.stop()
# the recommended run first (the one Home and Results name); zero-shot last
runs = dataset_runs(dataset.id)
options = dict(answer_labels(runs)[0])  # the recommendation's average first
options["zero-shot"] = "No trained run: zero-shot verbalizer scores of the backbone's MLM head"
choice = choose("Score with", options)
example = dataset.splits["test"]["text"].iloc[0]
text = st.text_area("Text", example, height=100)

try:
    if choice == "zero-shot":
        model_name = current_model()
        backbone_notice(model_name, ["prompt"])
        scorer = zero_shot_scorer(model_name, dataset, Scorer.zero_shot_key(dataset))
        title = f"Zero-shot: {model_name}'s MLM head at [MASK], label words averaged"
        stem = f"{slug(dataset.id)}-zero-shot"
    elif "," in choice:  # the recommendation's ensemble: its members' probabilities averaged
        members = [next(r for r in runs if r.run_id == i) for i in choice.split(",")]
        scorer = EnsembleScorer([run_scorer(str(r.path)) for r in members])
        title = f"The average of {len(members)} heads' class probabilities"
        stem = f"{members[0].run_id}-average-of-{len(members)}"
    else:
        run = next(r for r in runs if r.run_id == choice)
        scorer = run_scorer(str(run.path))
        kind = (
            "verbalizer scores (label words at [MASK])"
            if scorer.is_verbalizer
            else "class probabilities of the CLS head"
        )
        title = f"{run.method}: {kind}"
        stem = run.run_id
    table = scorer.score_table(text) if text.strip() else None
except GleeError as exc:
    st.error(md(exc))
    st.stop()

if table is not None:
    top = table.iloc[0]
    # the probability as plain text: a metric's delta would read as an increase
    st.metric("Prediction", top["class"])
    st.caption(f"probability {top['score']:.1%} ({top['group']} class)")
    st.altair_chart(chart_class_scores(table, title), width="stretch")
    with st.expander("Scores as a table"):
        st.dataframe(
            table.assign(score=100 * table["score"]),
            hide_index=True,
            column_config={
                "score": st.column_config.NumberColumn("probability (%)", format="%.2f"),
                "logit": st.column_config.NumberColumn(format="%.2f"),
            },
        )

st.subheader("Classify a CSV of texts")
rules = policy()
if rules.read_only:
    st.caption("Classifying files is switched off on this deployment (read-only).")
    st.stop()
cap = rules.score_rows if rules.public else None
st.caption(
    "Every row of the file comes back with the predicted class, its probability, the top "
    "3 classes with scores (and the label word, for prompt methods). The same as "
    "`python -m glee_core predict`. A background job classifies it (this page stays usable); "
    "the file is kept beside your jobs" + (f", up to {cap:,} texts here." if cap else ".")
)
uploaded = st.file_uploader(
    "CSV of texts",
    type=["csv", "tsv", "txt"],
    key="predict-upload",
    max_upload_size=max(1, -(-rules.upload_bytes // 2**20)) if rules.public else None,
)
if uploaded is not None and rules.public:
    try:
        rules.check_upload_size(uploaded.size)  # before the file is read or parsed
    except LimitReached as exc:
        st.error(f"{md(exc)} (`python -m glee_core predict` classifies any size.)")
        uploaded = None
if uploaded is not None:
    data = uploaded.getvalue()
    digest = hashlib.sha256(data).hexdigest()[:12]
    folder = store().jobs_dir
    request = PredictRequest(
        input=str(folder / f"texts-{digest}.csv"),
        out=str(folder / f"{slug(stem)}-{digest}-predictions.csv"),
        run=None if choice == "zero-shot" else choice,
        stores=[str(s.root) for s in stores()],
        data=current_choice() if choice == "zero-shot" else None,
        model=current_model(),
        max_rows=cap,
    )
    if not Path(request.input).is_file():  # kept where the job reads it, once
        try:
            if rules.public:
                workspace(create=True).check_upload(rules, len(data))
                request = rebased(request, folder.parent, workspace().store.root)
            write_atomic(Path(request.input), data)
        except (GleeError, OSError) as exc:
            st.error(f"This CSV cannot be kept: {md(exc)}")
            st.stop()
    work_button(request, "Classify its texts", key=f"classify-{digest}-{stem}")
    if error := last_failure("predict", request):
        said = error.replace(request.input, uploaded.name)  # the file by the name it was sent as
        st.error(f"This CSV cannot be classified: {md(said)}")
    elif (made := last_made("predict", request)) is not None and made.files:
        predicted = pd.read_csv(made.files[0][0], dtype=str, keep_default_na=False)  # as sent
        predicted["probability"] = pd.to_numeric(predicted["probability"])
        predicted.attrs["blank_rows"] = newest_job("predict", request).result.get("blank_rows", [])
        if warning := blank_warning(predicted):
            st.warning(warning[0].upper() + warning[1:] + ".")
        st.dataframe(
            predicted,
            hide_index=True,
            column_config={
                "probability": st.column_config.NumberColumn("probability", format="percent")
            },
        )
        st.download_button(
            "Download the predictions (CSV)",
            spreadsheet_csv(predicted),
            f"{stem}-predictions.csv",
            "text/csv",
            type="primary",
        )
