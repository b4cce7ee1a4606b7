"""Predictions: a class's test examples with gold, prediction and confidence; confusion matrix."""

import streamlit as st

from glee_core.core.errors import GleeError
from glee_core.models.requests import ExportRequest
from glee_core.runs.tables import spreadsheet_csv
from glee_core.serve.export_formats import EXPORT_FORMATS
from glee_core.views.prediction_charts import chart_confusion, confusion_fits
from studio_ui.access import shared_workspace
from studio_ui.jobs import download, last_failure, last_made, work_button
from studio_ui.navigation import sidebar
from studio_ui.stores import shared_run_ids, store, stores
from studio_ui.text import md
from studio_ui.widgets import answer_labels, choose, runs_or_stop

sidebar()
st.title("Predictions")

runs = runs_or_stop()
labels, averaged = answer_labels(runs)  # the recommendation's average first
run_id = choose("Run", labels)
run = averaged if averaged is not None and run_id == averaged.run_id else None
run = run or next(r for r in runs if r.run_id == run_id)
members = run.run_id.split(",")  # an average's: its runs
stem = members[0] + (f"-average-of-{len(members)}" if len(members) > 1 else "")
if len(members) > 1:
    st.caption(
        f"The recommendation's answer: the {len(members)} candidates the data cannot tell apart, "
        f"their test probabilities averaged (seed {run.seed}); pick one of them to see its own."
    )
try:
    predictions = run.predictions
except GleeError as exc:  # a file the listing does not read in full: say which, and stop here
    st.error(
        f"This run is broken: {md(exc)}. Pick another run, or launch its setting "
        "again on the Train page: a broken run is trained anew.",
        icon=":material/broken_image:",
    )
    st.stop()
data = run.record.dataset
order = data.order  # head to tail

c1, c2 = st.columns([2, 1])
class_labels = {"(all classes)": "(all classes)"}
class_labels.update(
    {
        c: f"{c} ({data.group(c)}, "
        f"{run.metrics.per_class[c].support} test examples, "
        f"F1 {run.metrics.per_class[c].f1:.2f})"
        for c in order
    }
)
with c1:
    chosen = choose("Class", class_labels)
errors_only = c2.toggle("Errors only")
shown = predictions if chosen == "(all classes)" else predictions[predictions["gold"] == chosen]
if errors_only:
    shown = shown[~shown["correct"]]
st.caption(f"{len(shown)} example(s)")
columns = ["text", "gold", "pred", "confidence", "correct"]
if predictions["text_b"].astype(str).str.len().gt(0).any():
    columns.insert(1, "text_b")
shared = bool(set(members) & shared_run_ids())
if shared:  # another visitor's run, through their share link: their texts stay theirs
    columns = [c for c in columns if c not in ("text", "text_b")]
    st.caption("A shared run: its predictions without the texts, which are the sharer's.")
st.dataframe(
    shown[columns],
    hide_index=True,
    column_config={
        "confidence": st.column_config.ProgressColumn(
            "confidence", min_value=0.0, max_value=1.0, format="%.2f"
        )
    },
)
if not shared:
    st.download_button(
        "Download this run's test predictions (CSV)",
        spreadsheet_csv(predictions),
        f"{stem}-test-predictions.csv",
        "text/csv",
    )

st.subheader("Confusion matrix")
fits = confusion_fits()
full = st.toggle(
    "All classes", value=len(order) <= fits, help=f"Up to {fits} classes fit the page one by one."
)
keep = (
    None
    if full
    else st.slider("Rarest classes shown one by one", 2, len(order), min(fits, len(order)))
)
if keep and keep < len(order):
    st.caption(
        f"The {len(order) - keep} most frequent classes are pooled into the first row and "
        "column, so every tail class keeps its own (turn on All classes to see each)."
    )
st.altair_chart(chart_confusion(run, keep), width="content")

st.subheader("Take it with you")
if shared and not shared_workspace().shares_models:
    st.caption(
        "A shared run: its sharer has not let viewers download its model (a model "
        "carries what it was trained on)."
    )
    st.stop()
offered = {  # an average leaves as the studio's folder alone (the others hold one classifier)
    f.name: f.label
    for f in EXPORT_FORMATS.values()
    if f.refusal(run.record) is None and (len(members) == 1 or f.name == "glee")
}
form = choose("Format", offered, st.radio, key=f"export-form-{stem}")
quantize = EXPORT_FORMATS[form].quantizes and st.checkbox(
    "Also an int8 model (onnxruntime's dynamic quantization; its test F1 change goes in the card)",
    key=f"export-int8-{stem}",
)
request = ExportRequest(
    run=run.run_id,
    form=form,
    out=str(store().jobs_dir / f"{stem}-{form}{'-int8' if quantize else ''}.zip"),
    quantize="int8" if quantize else None,
    stores=[str(s.root) for s in stores()],
)
work_button(request, "Build the folder", key=f"export-{stem}")
if error := last_failure("export", request):
    st.error(f"The export failed: {md(error)}")
elif (made := last_made("export", request)) is not None:
    for path, name, mime in made.files:
        download(path, name, mime, key=f"export-zip-{stem}", primary=True)
    if made.code:
        st.caption("Load it so (the folder's README.md, its model card, says more):")
        st.code(made.code, language="python")
