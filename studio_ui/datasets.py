"""The Data page's own sections: the dataset picker, an upload, the long tail's view and its
rare classes, the label words, a sample of each class and adapting the backbone. Each reads the
session's choice and draws; the work behind them (loading, an upload's checks, adapting) is the
engine's or a job's."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import streamlit as st

from glee_core.core import environment
from glee_core.core.errors import GleeError, disk_message, first_few
from glee_core.core.files import size_text
from glee_core.data.catalog import PAPER_DATASETS
from glee_core.data.csvfile import LABEL_COLUMN_NAMES, TEXT_COLUMN_NAMES, find_column
from glee_core.data.sources import SOURCES
from glee_core.data.verbalizers import read_verbalizer_json, verbalizer_json
from glee_core.models.fields import help_of
from glee_core.models.options import ADAPT_OBJECTIVES, AdaptOptions, DataOptions
from glee_core.models.requests import AdaptRequest
from glee_core.models.scoring import unreadable_words
from glee_core.runs.store import slug
from glee_core.serve.uploads import ACCEPTED_ENCODINGS, MAX_UPLOAD_BYTES, csv_columns, save_upload
from glee_core.train.adapted import adapted_backbones, adapted_folder_name
from glee_core.train.preflight import label_word_methods
from glee_core.views.data_charts import chart_class_frequency, class_frequency_frame

from .access import policy, workspace
from .choice import (
    adapted_line,
    backbone_notice,
    choose_dataset,
    choose_prompt,
    current_choice,
    current_model,
    dataset_choices,
    display_name,
    incomplete_paper_datasets,
    load_options,
    set_threshold,
)
from .jobs import last_failure, work_button
from .stores import all_runs, backbones_dir, uploads_dir
from .text import code, md, visible
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
            *columns,
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


def _read_label_words(dataset, uploaded) -> dict[str, list[str]] | None:
    """A label-word JSON file (``--verbalizer``'s: label -> word or list of words) matched to
    the classes; None after saying what is wrong with it."""
    try:
        return read_verbalizer_json(uploaded.getvalue(), dataset.classes, uploaded.name)
    except GleeError as exc:  # too large, not JSON, other values, a class without a word
        st.error(md(exc))
    return None


def label_words_section(dataset) -> None:
    """The words the prompt heads score at [MASK] for each class, and their template: shown,
    checked against the backbone's vocabulary, and given anew (typed, or a JSON file)."""
    rules = policy()
    choice = current_choice()
    model = current_model()
    worded = label_word_methods()
    try:
        unreadable = unreadable_words(model, dataset.verbalizer, dataset.classes)
    except GleeError:  # a backbone that cannot load: the Train page says why
        unreadable = []
    kept = st.session_state.pop("label-words-kept", False)
    title = "Label words" + (": the backbone cannot read some" if unreadable else "")
    with st.expander(title, expanded=bool(unreadable) or kept):
        st.caption(
            f"The {len(worded)} heads that score a word at [MASK] ("
            + ", ".join(f"`{m.id}`" for m in worded)
            + ") read each class as its label "
            "words, put in the template. Other words (a language the class names are "
            "not in, clearer words for terse names) make a variant of this dataset: its "
            "id ends in +prompt-…, so its runs stay apart from these; a compare on it "
            "trains every head."
        )
        backbone_notice(model, [m.id for m in worded])
        if unreadable:
            st.warning(
                f"{code(model)} cannot read {len(unreadable)} of these words "
                f"({md(first_few(unreadable, 6))}): Home's compare leaves "
                "these heads out until words it reads are given here."
            )
        if choice.verbalizer or choice.template:
            st.info(
                f"This is **{md(display_name(dataset.id))}**: the "
                "label words or template given here, not the dataset's own."
            )
            if st.button("Back to the dataset's own label words"):
                choose_dataset(replace(choice, verbalizer=None, template=None))
                st.rerun()
        if rules.read_only:
            st.caption(
                "Giving label words writes a file; it is switched off on this "
                "deployment (read-only)."
            )
            return
        uploaded = st.file_uploader(
            "A JSON file of label -> label word(s) (optional)",
            type=["json"],
            key=f"label-words-file-{dataset.id}",
            max_upload_size=1,
        )
        words = dataset.verbalizer
        if uploaded is not None and (read := _read_label_words(dataset, uploaded)) is not None:
            words = read
        table = pd.DataFrame(
            {
                "class": dataset.classes,
                "label words": [" | ".join(words[c]) for c in dataset.classes],
            }
        )
        edited = st.data_editor(
            table,
            hide_index=True,
            disabled=["class"],
            width="stretch",
            key=f"label-words-{dataset.id}-{uploaded.file_id if uploaded else ''}",
            column_config={
                "label words": st.column_config.TextColumn(
                    help="One word or a few, several choices separated by |"
                )
            },
        )
        template = st.text_input(
            "Template",
            dataset.template,
            key=f"template-{dataset.id}",
            help="Holds [MASK] once and {text} (and {text_b} where the data has a second text).",
        )
        left, right = st.columns([1, 3], vertical_alignment="center")
        if left.button("Use these label words", type="primary"):
            given = {
                name: [
                    w.strip() for w in ("" if pd.isna(cell) else str(cell)).split("|") if w.strip()
                ]  # a cleared cell: no word (said, nothing kept)
                for name, cell in zip(edited["class"], edited["label words"], strict=True)
            }
            try:
                choose_prompt(template, given, model)
            except GleeError as exc:
                st.error(f"Not used: {md(exc)}")
            except OSError as exc:
                st.error(f"The label words could not be kept: {md(disk_message(exc))}")
            else:
                st.session_state["label-words-kept"] = True
                st.rerun()
        right.download_button(
            "Download these label words (JSON)",
            verbalizer_json(words),
            f"{slug(dataset.id)}-label-words.json",
            "application/json",
        )


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


def adapt_section(dataset) -> None:
    """Task-adaptive pretraining: adapt the backbone to this dataset's texts in the background,
    then pick the adapted backbone as the model."""
    rules = policy()
    st.subheader("Adapt the backbone to this dataset")
    st.caption(
        "Task-adaptive pretraining continues the backbone's training on this dataset's "
        "training texts (never dev or test); you then train on the adapted backbone. "
        "**Masked LM** (Gururangan et al. 2020) trains the MLM head with the encoder: what "
        "the prompt methods and the pt. LN read - the offline MiniLM's MLM head starts "
        "untrained, and this gives it one. Measured on demo, r8-1500 and r52-lt "
        "(docs/tuning.md): it moves the CLS heads in quick mode by -2 to +8 points and does "
        "not revive prompt-tuning, which P-tuning v2, LoRA or fine-tuning do. **SimCSE** "
        "(Gao et al. 2021) trains the encoder alone, contrastively, for the heads that read "
        "a pooled vector: at its paper's settings (1 epoch at 3e-5 on each text's first 32 "
        "tokens, the default) it lifted the w/ pt. LN head in quick mode on the demo's short "
        "texts from 82.9 to 88.0 macro-F1, and lowered it on the news sets, r8-1500 from 89.4 "
        "to 87.5 and r52-lt from 68.6 to 62.9 (3 seeds each): compare the quick compare "
        "before and after on your data. The adapted backbone is a new model: choose it below, "
        "then train as usual."
    )
    if rules.public or rules.read_only:
        st.info(
            "Adapting writes a whole backbone; it is switched off on this deployment. Run "
            "Glee Studio yourself to adapt: `python -m glee_core adapt --dataset ... "
            "--out DIR`, then `--model DIR`."
        )
        return
    model = current_model()
    objective = st.radio(
        "Objective",
        list(ADAPT_OBJECTIVES),
        format_func=lambda name: ADAPT_OBJECTIVES[name].label,
        horizontal=True,
        help=help_of(AdaptOptions, "objective"),
    )
    c1, c2 = st.columns([1, 3], vertical_alignment="bottom")
    epochs = int(
        c1.number_input(
            "Epochs",
            1,
            100,
            ADAPT_OBJECTIVES[objective].epochs,
            help=help_of(AdaptOptions, "epochs"),
            key=f"adapt-epochs-{objective}",  # each objective starts from its own
        )
    )
    out = backbones_dir() / adapted_folder_name(dataset.id, model, epochs, objective)
    options = AdaptOptions(out=str(out), epochs=epochs, objective=objective)
    request = AdaptRequest(data=current_choice(), options=options, model=model)
    c2.caption(f"Adapting **{md(model)}** for {epochs} epoch(s).")
    if out.exists():
        st.caption(f"`{out.name}` exists already: choose it below, or another number of epochs.")
    else:
        work_button(
            request,
            "Adapt",
            key="adapt",
            dataset=dataset,
            title=f"Adapt {model} to {dataset.id} ({objective}, {epochs} ep)",
        )
        if error := last_failure("adapt", request):
            st.error(f"Adapting failed: {md(error)}")
    found = adapted_backbones(backbones_dir())
    for path, record in found:
        left, right = st.columns([4, 1], vertical_alignment="center")
        left.caption(adapted_line(record))
        if str(path) == model:
            right.caption("in use")
        elif right.button("Use it", key=f"use-{path.name}"):
            st.session_state["model"] = str(path)
            st.rerun()
