"""The Data page's label words: the words the prompt heads score at [MASK] for each class and
their template, shown, checked against the backbone's vocabulary, and given anew (typed, or a JSON
file) as a ``+prompt-`` variant of the dataset."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import streamlit as st

from glee_core.core.errors import GleeError, disk_message, first_few
from glee_core.data.verbalizers import read_verbalizer_json, verbalizer_json
from glee_core.models.scoring import unreadable_words
from glee_core.runs.store import slug
from glee_core.train.preflight import label_word_methods

from .access import policy
from .choice import (
    backbone_notice,
    choose_dataset,
    choose_prompt,
    current_choice,
    current_model,
    display_name,
)
from .text import code, md


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
        _label_words_editor(dataset, model)


def _label_words_editor(dataset, model: str) -> None:
    """The label words as a table to edit (or read from a JSON file) with the template, used
    as a ``+prompt-`` variant, and downloaded as a JSON file."""
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
