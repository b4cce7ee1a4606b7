"""The Data page's own sections: the dataset picker, an upload, the long tail's view and its
rare classes, a sample of each class (the label words: ``label_words``; adapting the backbone:
``adapting``). Each reads the
session's choice and draws; the work behind them (loading, an upload's checks, adapting) is the
engine's or a job's."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import streamlit as st

from glee_core.core import environment
from glee_core.core.errors import GleeError, disk_message
from glee_core.core.files import size_text
from glee_core.data.catalog import PAPER_DATASETS
from glee_core.data.csvfile import LABEL_COLUMN_NAMES, TEXT_COLUMN_NAMES, Columns, find_column
from glee_core.data.sources import SOURCES
from glee_core.models.options import DataOptions
from glee_core.serve.uploads import ACCEPTED_ENCODINGS, MAX_UPLOAD_BYTES, csv_columns, save_upload
from glee_core.views.data_charts import chart_class_frequency, class_frequency_frame

from .access import policy, workspace
from .choice import (
    choose_dataset,
    current_choice,
    dataset_choices,
    incomplete_paper_datasets,
    load_options,
    set_threshold,
)
from .stores import all_runs, uploads_dir
from .text import md, visible
from .widgets import class_highlight


def guess_column(columns: list[str], names: tuple[str, ...], guessed: str | None) -> int:
    """Preselect the column csv:PATH would pick: by name, else by its contents, else the
    first."""
    return columns.index(find_column(columns, names) or guessed or columns[0])


def dataset_picker() -> None:
    """The dataset list (and a hub name where the deployment allows it): the choice changes
    only to a dataset that loads, or whose runs are stored."""
    choices = dataset_choices()
    choice = current_choice()
    labels = list(choices)
    current = next((i for i, k in enumerate(labels) if choices[k].dataset == choice.dataset), 0)
    picked = st.selectbox(
        "Dataset",
        labels,
        index=current,
        help="The paper's datasets appear when GLEE_DATA_DIR (default ./data) "
        "holds them in the paper's TSV layout.",
    )
    rules = policy()
    hub = SOURCES["hf"]
    hf_name = (
        ""
        if rules.public and not hub.public
        else st.text_input(
            f"…or {hub.help}: {hub.usage.partition(':')[2]}",
            value="",
            help="Needs the hub (or a local folder of CSV/JSON files).",
        )
    )
    if not any(options.dataset in PAPER_DATASETS for options in choices.values()):
        where = (
            "its data folder" if rules.public else f"`{environment.data_dir()}`"
        )  # no server path
        st.caption(
            f"The paper's datasets appear in this list when {where} holds them (one folder "
            "per id in the paper's TSV layout; set `GLEE_DATA_DIR` to point elsewhere)."
        )
    if (incomplete := incomplete_paper_datasets()) and not rules.public:
        st.caption(
            f"Not in this list: {', '.join(incomplete)}: their folders have no `train.tsv` "
            "(the paper's released data lacks it for these; the authors' repository says how "
            "to get the training split)."
        )
    new = (
        DataOptions(dataset=f"{hub.prefix}:{hf_name.strip()}")
        if hf_name.strip()
        else choices[picked]
    )
    if new.dataset != choice.dataset:
        try:  # the choice changes only to a dataset that loads, or whose runs are stored
            load_options(new)
        except GleeError as exc:
            if all_runs(new.dataset, report=False):
                choose_dataset(new)
                st.rerun()
            st.error(
                f"Cannot load {md(new.dataset)}: {md(exc)}. Still showing {md(choice.dataset)}."
            )
        else:
            choose_dataset(new)
            st.rerun()


def _upload_csv(rules, public: bool, limit: int) -> None:
    """Validate, keep (within the session's limits in public mode) and choose an uploaded CSV."""
    st.caption(
        f"Up to {size_text(limit)}; comma, semicolon, tab or pipe separated; "
        f"{ACCEPTED_ENCODINGS}. A `split` column (train/dev/test) is used if present, "
        "otherwise a stratified 70/10/20 split is made. Uploads are kept on disk"
        + (f", private to this session, for {rules.ttl_text} without use." if public else ".")
    )
    # a kept file clears the form (a new key), and says so in the run its button's callback began
    if kept := st.session_state.pop("upload-kept", None):
        st.success(kept)
    uploaded = st.file_uploader(
        "CSV file",
        type=["csv", "tsv", "txt"],
        key=f"upload-{st.session_state.get('uploads-kept', 0)}",
        max_upload_size=max(1, -(-limit // 2**20)),
    )
    if uploaded is not None:
        columns, guessed = [], {}
        try:
            if public:  # the size first: a file over the limit is never parsed
                rules.check_upload_size(uploaded.size)
            data = uploaded.getvalue()
            columns, guessed = csv_columns(data, uploaded.name)
        except GleeError as exc:
            st.error(md(exc))
        if columns:
            text_col = st.selectbox(
                "Text column",
                columns,
                index=guess_column(columns, TEXT_COLUMN_NAMES, guessed.get("text")),
            )
            label_col = st.selectbox(
                "Label column",
                columns,
                index=guess_column(columns, LABEL_COLUMN_NAMES, guessed.get("label")),
            )
            text_b_col = st.selectbox("Second text column (optional)", ["(none)", *columns])
            if text_col == label_col:
                st.error(
                    f"The text and the label are both the column "
                    f"'{md(text_col)}': pick the "
                    "column that holds each (a CSV needs at least two columns)."
                )
            else:
                if refused := st.session_state.pop("upload-refused", None):
                    st.error(refused)
                second = None if text_b_col == "(none)" else text_b_col
                st.button(
                    "Use this CSV",
                    type="primary",
                    on_click=_keep_upload,
                    args=(rules, public, uploaded.name, data, (text_col, label_col, second)),
                )


def _keep_upload(rules, public: bool, name: str, data: bytes, columns: tuple) -> None:
    """ "Use this CSV": keep the upload (within the session's limits in public mode) and choose
    it. A callback, run before the page's script: the one run that follows draws the whole
    page with the upload chosen (the picker above names it), where a rerun after the click drew
    the page twice (1.4 s beside a busy CPU). What refused it is said beside the button."""
    try:
        own = workspace(create=True)  # public mode: made on this write
        if own is not None:
            own.check_upload(rules, len(data))
        upload, dataset = save_upload(
            uploads_dir(),
            name,
            data,
            Columns(*columns),
            max_classes=rules.upload_classes if public else None,
        )
    except GleeError as exc:
        st.session_state["upload-refused"] = f"This CSV cannot be used: {md(exc)}"
    except OSError as exc:  # a full disk: nothing half-written is kept
        st.session_state["upload-refused"] = f"This CSV could not be kept: {md(disk_message(exc))}"
    else:
        choose_dataset(upload.options)
        st.session_state["upload-kept"] = (
            f"Kept as {md(upload.spec)}: {dataset.num_classes} classes. "
            "It is the dataset now (Home's quick compare is one click)."
        )
        st.session_state["uploads-kept"] = st.session_state.get("uploads-kept", 0) + 1


def upload_section() -> None:
    """An upload of a CSV, within the session's limits in public mode (none when read-only)."""
    rules = policy()
    public = rules.public
    limit = min(MAX_UPLOAD_BYTES, rules.upload_bytes) if public else MAX_UPLOAD_BYTES
    if rules.read_only:
        st.caption("Uploads are switched off on this deployment (read-only).")
    else:
        with st.expander("Upload a CSV", expanded=False):
            _upload_csv(rules, public, limit)


def rare_classes(dataset) -> None:
    """The dataset's warnings, and whether its rarest classes (too few for dev and test) train."""
    for warning in dataset.warnings:
        st.warning(md(warning))
    if dataset.dropped_classes or dataset.train_only_classes:
        choice = current_choice()
        keep = st.toggle(
            "Keep the rare classes in training",
            value=choice.keep_rare,
            help="Rare classes are the point of this tool: kept, they are learned and can be "
            "predicted, but with no dev or test text they are never scored. The dataset's id "
            "then ends in +rare, so its runs stay apart from those without them.",
        )
        if keep != choice.keep_rare:
            choose_dataset(replace(choice, keep_rare=keep))
            st.rerun()


def long_tail_view(dataset) -> None:
    """The head/tail threshold, the class-frequency chart, the split sizes and the class table."""
    left, right = st.columns([1, 3])
    threshold = left.number_input(
        "Head/tail threshold",
        min_value=0.05,
        max_value=0.95,
        value=float(dataset.threshold),
        step=0.05,
        help="Classes are head while the cumulative share of training examples stays at or "
        "under this.",
    )
    if abs(threshold - dataset.threshold) > 1e-9:
        set_threshold(threshold)
        st.rerun()
    log_scale = left.toggle("Log scale", value=False)
    sizes = {name: len(frame) for name, frame in dataset.splits.items()}
    left.metric("Classes", dataset.num_classes)
    left.dataframe(
        pd.DataFrame({"split": list(sizes), "examples": list(sizes.values())}), hide_index=True
    )
    head, tail = dataset.head_tail()
    counts = dataset.class_counts("train").to_dict()
    highlight = class_highlight(list(counts))
    right.altair_chart(
        chart_class_frequency(
            counts,
            head,
            log_scale=log_scale,
            highlight=highlight,
            left_out=len(dataset.dropped_classes),
        ),
        width="stretch",
    )
    st.caption(
        f"{len(head)} head classes, {len(tail)} tail classes, defined on the training split. "
        f"Template: {md(dataset.template)}"
    )

    with st.expander("Class table"):
        table = class_frequency_frame(counts, head)
        table["label words"] = [" | ".join(dataset.verbalizer[c]) for c in table["class"]]
        st.dataframe(table, hide_index=True)


def sample_rows(dataset) -> None:
    """A few training rows of each class."""
    st.subheader("Sample rows per class")
    per_class = st.slider("Rows per class", 1, 10, 3)
    train = dataset.splits["train"]
    sample = train.groupby("label", group_keys=False).head(per_class).copy()
    sample["class"] = [dataset.classes[i] for i in sample["label"]]
    sample["text"] = sample["text"].map(visible)  # a backspace drew as an empty box
    columns = ["class", "text"] + (["text_b"] if dataset.has_text_b else [])
    st.dataframe(sample.sort_values("label")[columns], hide_index=True)
