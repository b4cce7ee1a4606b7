"""The Train page's launch form (methods, mode, recipe, settings, backbone, executor): it makes a
:class:`TrainRequest` and its estimate (the job kind's: ``estimates``); what follows it, the
estimate in words and the Launch button, is ``launch_buttons``'."""

from __future__ import annotations

from dataclasses import dataclass, replace

import streamlit as st

from glee_core.core.errors import GleeError
from glee_core.models.config import ALL_POOLINGS, AUTO_POOLING, POOLINGS, TrainConfig
from glee_core.models.fields import help_of, setting_of
from glee_core.models.methods import METHODS
from glee_core.models.modes import MODES
from glee_core.models.options import ExecutorOptions
from glee_core.models.recipes import (
    PAPER,
    RECIPE_DEFAULTS,
    RECIPE_LABELS,
    RECIPE_LINES,
    recipe_rates,
)
from glee_core.models.requests import TrainRequest
from glee_core.models.schedule import DEFAULT_EPOCHS
from glee_core.runs.rates import Estimate

from .access import policy
from .choice import backbone_notice, current_choice, current_model
from .estimates import estimate_of, label_word_heads_left_out
from .executors import executor_options, runs_at_once
from .navigation import label_words_button
from .text import md
from .widgets import choose, choose_many, method_labels, setting_inputs

# the training fields the Train page draws from their declarations (label, bounds, step, "off"):
# the run's shape, and the recipe's switches a fine-tune may override
SHAPE_FIELDS = ("epochs", "batch_size", "max_length", "limit")
SWITCH_FIELDS = ("min_steps", "head_lr", "layer_decay", "self_distill", "supcon")


@dataclass
class LaunchForm:
    """What the form made: the request (None while the form is incomplete or refused), its
    estimate, and the words the Launch button's job is titled with."""

    request: TrainRequest | None
    estimate: Estimate | None
    label: str
    frozen: bool


def launch_form(dataset) -> LaunchForm:
    """The launch's form, drawn: every choice a :class:`TrainRequest` holds, with what each
    trains; errors said where a choice is refused."""
    unread, why = label_word_heads_left_out(dataset)
    methods = choose_many(
        "Methods",
        method_labels(METHODS),
        [m for m in ("cls-tanh", "cls-relu-pt-ln", "prompt") if m not in unread],
    )
    if unread:
        st.caption(f"Not chosen by default: {md(why)}.")
        label_words_button("train-label-words")
    mode = _mode_input()
    tuning = MODES[mode]
    st.caption(f"{tuning.choice}: {tuning.help}.")
    frozen = tuning.cached_features
    recipe = PAPER
    if not frozen:
        recipe = choose(
            "Recipe", RECIPE_LABELS, st.radio, horizontal=True, help=help_of(TrainConfig, "recipe")
        )
        st.caption(RECIPE_LINES[recipe])
    preset = RECIPE_DEFAULTS[recipe]
    mode_rate, mode_candidates = recipe_rates(recipe, mode)
    peft_fields = setting_inputs(tuning.settings, TrainConfig)  # models/modes.py's
    seeds_text = st.columns(4)[0].text_input("Seeds", "1", help="comma-separated, e.g. 1,2,3,4,5")
    starts = {  # where the dataset's own values differ from the fields' defaults
        "epochs": DEFAULT_EPOCHS,
        "batch_size": dataset.batch_size or 32,
        "max_length": dataset.max_length,
    }
    shape = setting_inputs(
        [setting_of(TrainConfig, name, starts.get(name)) for name in SHAPE_FIELDS],
        TrainConfig,
        key="shape",
    )
    searched, lr, candidates = _rate_inputs(mode, recipe, mode_rate, mode_candidates)
    switches = {} if frozen else _recipe_switches(recipe, preset, searched)
    pooling = st.radio(
        "Pooling of plain-input heads",
        [AUTO_POOLING, ALL_POOLINGS, *POOLINGS],
        horizontal=True,
        help=help_of(TrainConfig, "pooling"),
    )
    model = _backbone_input(methods)
    rules = policy()

    # quick-mode heads train together in one process anyway; a public deployment trains a visitor's
    # runs one at a time (its sessions take turns)
    at_once = "1" if rules.public or frozen else runs_at_once()
    executor = ExecutorOptions(runs_at_once=at_once) if rules.public else executor_options(at_once)

    seeds = _seeds(seeds_text)
    config = None
    if methods and seeds:
        config = _train_config(
            methods,
            tuning,
            lr=lr,
            lr_candidates=candidates,
            pooling=pooling,
            recipe=recipe,
            mode=mode,
            **shape,
            **switches,
            **peft_fields,
        )
    request = None
    if config is not None:
        request = TrainRequest(
            data=replace(current_choice(), threshold=dataset.threshold),
            methods=methods,
            seeds=seeds,
            model=model,
            config=config,
            executor=executor,
        )

    estimate = estimate_of(request, dataset) if request is not None else None
    label = (
        f"{len(methods)} method(s) x {len(seeds)} seed(s) on {dataset.id} ({tuning.label}"
        f"{'' if frozen else f', {recipe} recipe'})"
        f"{f' on {executor.executor}' if executor.remote else ''}"
    )
    return LaunchForm(request, estimate, label, frozen)


def _mode_input() -> str:
    return choose(
        "Mode",
        {name: m.choice for name, m in MODES.items()},
        st.radio,
        horizontal=True,
        help="Quick compare encodes the data once with the frozen backbone and trains only the "
        "heads: seconds on a CPU. Fine-tuning trains the whole model: minutes on a CPU, where "
        "the accuracy is. The others train a small part beside the head - LoRA, P-tuning v2, "
        "IA³, prompt tuning and adapters add their own few weights and keep the backbone as it "
        "is (a run stores a few MB); BitFit trains the backbone's biases. The caption under "
        "this says what the chosen one trains.",
    )


def _seeds(text: str) -> list[int]:
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        st.error("Seeds must be whole numbers separated by commas, e.g. 1,2,3.")
        return []


def _train_config(methods: list[str], tuning, **fields) -> TrainConfig | None:
    """The form's config, or None after saying why it is refused (a method that cannot train
    in the chosen mode, a setting out of bounds)."""
    refused = [m for m in methods if not METHODS[m].trains_in(tuning)]
    if refused:
        st.error(
            f"{', '.join(refused)} fit(s) on the frozen features only (a closed-form probe, or "
            f"a classifier re-trained on fixed features): leave it out of a {tuning.label} run, "
            "or choose the quick compare."
        )
        return None
    try:
        return TrainConfig(**fields)
    except GleeError as exc:
        st.error(str(exc))
        return None


def _rate_inputs(
    mode: str, recipe: str, rate: float, candidates
) -> tuple[bool, float | None, str | None]:
    """The learning rate: chosen on dev among ``candidates`` (the mode's and recipe's, editable)
    or one ``rate``; (searched, the rate or None, the candidates or None). The rate's bounds are
    the field's (``TrainConfig.lr``): a value out of them is the form's error, said below."""
    r1, r2 = st.columns([1.3, 2.7], vertical_alignment="bottom")
    searched = candidates is not None and r1.toggle(
        "Learning rate chosen on dev",
        value=True,
        key=f"search-{mode}-{recipe}",
        help=help_of(TrainConfig, "lr_candidates"),
    )
    if searched:
        tried = r2.text_input(
            "Learning rates tried (comma-separated)",
            ",".join(f"{v:g}" for v in candidates),
            help=help_of(TrainConfig, "lr_candidates"),
            key=f"candidates-{mode}",
        )
        return True, None, tried
    bounds = setting_of(TrainConfig, "lr")
    lr = r2.number_input(
        "Learning rate",
        float(bounds.low),
        float(bounds.high),
        rate,
        format="%.0e",
        step=rate,
        help=help_of(TrainConfig, "lr"),
        key=f"lr-{mode}-{recipe}",
    )
    return False, lr, None


def _backbone_input(methods: list[str]) -> str:
    """The backbone: among those the owner offers (public mode) or any (auto, an id, a folder);
    kept for the session, with what it means for the chosen heads."""
    rules = policy()
    if rules.public:  # visitors pick among the backbones the owner offers
        offered = list(rules.models)
        current = current_model()
        model = st.selectbox(
            "Backbone", offered, index=offered.index(current) if current in offered else 0
        )
    else:
        model = st.text_input(
            "Backbone (auto, a Hugging Face id, or a local folder)", current_model()
        )
    st.session_state["model"] = model.strip() or "auto"
    backbone_notice(st.session_state["model"], methods)
    return st.session_state["model"]


def _recipe_switches(recipe: str, preset: TrainConfig, searched: bool) -> dict:
    """The recipe's switches a fine-tune may override (LP-FT, a floor on steps, the head's
    rate, layer decay, self-ensembling, self-distillation, supcon, the rate searched once)."""
    switches: dict = {}
    with st.expander("Recipe switches (each overrides the recipe)"):
        s1, s2 = st.columns(2)
        switches["lp_ft"] = s1.toggle(
            "LP-FT (head fitted first)",
            value=preset.lp_ft,
            key=f"lpft-{recipe}",
            help=help_of(TrainConfig, "lp_ft"),
        )
        switches["self_ensemble"] = (
            s2.toggle(
                "Self-ensemble (keep the moving average where it scores better)",
                value=False,
                key=f"ensemble-{recipe}",
                help=help_of(TrainConfig, "self_ensemble"),
            )
            or None
        )
        starts = {"min_steps": preset.min_steps, "head_lr": preset.head_lr}
        switches |= setting_inputs(
            [setting_of(TrainConfig, name, starts.get(name)) for name in SWITCH_FIELDS],
            TrainConfig,
            key=f"switch-{recipe}",
            per_row=5,
        )
        if searched:
            switches["lr_search"] = (
                "once"
                if st.toggle(
                    "Search the rate once for this backbone and data (the other heads and seeds "
                    "train at it)",
                    value=preset.lr_search != "each",
                    key=f"once-{recipe}",
                    help=help_of(TrainConfig, "lr_search"),
                )
                else "each"
            )
    return switches
