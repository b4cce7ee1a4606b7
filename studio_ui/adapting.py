"""The Data page's task-adaptive pretraining: adapt the backbone to the dataset's training texts
in the background (masked LM or SimCSE), then choose the adapted backbone as the model."""

from __future__ import annotations

import streamlit as st

from glee_core.models.fields import help_of
from glee_core.models.options import ADAPT_OBJECTIVES, AdaptOptions
from glee_core.models.requests import AdaptRequest
from glee_core.train.adapted import adapted_backbones, adapted_folder_name

from .access import policy
from .choice import (
    adapted_line,
    current_choice,
    current_model,
)
from .jobs import last_failure, work_button
from .stores import backbones_dir
from .text import md


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
