"""The Train page's launch: the form (methods, mode, recipe, settings, backbone, executor) that
makes a :class:`TrainRequest`, its estimate in words, the Launch button, and the table of the
dataset's finished runs. The page only arranges them; the estimate is the job kind's
(``estimates``), the launch a job's (``jobs``)."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, replace

import pandas as pd
import streamlit as st

from glee_core.core.errors import GleeError
from glee_core.models.config import (
    ALL_POOLINGS,
    AUTO_POOLING,
    DEFAULT_EPOCHS,
    POOLINGS,
    TrainConfig,
)
from glee_core.models.fields import help_of, setting_of
from glee_core.models.methods import METHODS
from glee_core.models.modes import MODES
from glee_core.models.options import EXECUTORS, ExecutorOptions
from glee_core.models.recipes import (
    PAPER,
    RECIPE_DEFAULTS,
    RECIPE_LABELS,
    RECIPE_LINES,
    recipe_rates,
)
from glee_core.models.requests import TrainRequest
from glee_core.runs.rates import Estimate
from glee_core.runs.record import METRIC_KEYS, METRIC_TITLES

from .access import policy
from .choice import backbone_notice, current_choice, current_model
from .estimates import estimate_of, label_word_heads_left_out, trainable_parameters
from .jobs import launch as launch_job
from .jobs import launch_here, running_step
from .navigation import label_words_button
from .stores import dataset_runs
from .text import md
from .widgets import choose, choose_many, method_labels, setting_inputs

# the training fields the Train page draws from their declarations (label, bounds, step, "off"):
# the run's shape, and the recipe's switches a fine-tune may override
SHAPE_FIELDS = ("epochs", "batch_size", "max_length", "limit")
SWITCH_FIELDS = ("min_steps", "head_lr", "layer_decay", "self_distill", "supcon")


@dataclass
class Launch:
    """What the form made: the request (None while the form is incomplete or refused), its
    estimate, and the words the Launch button's job is titled with."""

    request: TrainRequest | None
    estimate: Estimate | None
    label: str
    frozen: bool


def launch_form(dataset) -> Launch:
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
    mode = choose(
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

    try:
        seeds = [int(s) for s in seeds_text.split(",") if s.strip()]
    except ValueError:
        seeds = []
        st.error("Seeds must be whole numbers separated by commas, e.g. 1,2,3.")

    config = None
    refused = [m for m in methods if not METHODS[m].trains_in(tuning)]
    if refused:
        st.error(
            f"{', '.join(refused)} fit(s) on the frozen features only (a closed-form probe, or "
            f"a classifier re-trained on fixed features): leave it out of a {tuning.label} run, "
            "or choose the quick compare."
        )
    elif methods and seeds:
        try:
            config = TrainConfig(
                lr=lr,
                lr_candidates=candidates,
                pooling=pooling,
                recipe=recipe,
                mode=mode,
                **shape,
                **switches,
                **peft_fields,
            )
        except GleeError as exc:
            st.error(str(exc))
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
    return Launch(request, estimate, label, frozen)


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


def executor_options(at_once: str) -> ExecutorOptions:
    """The executor: here, or one of the remote ones, each in a section of its own (not offered
    to a public deployment's visitors); ``at_once``: the runs trained at once
    (:func:`runs_at_once`)."""
    for remote in (e for e in EXECUTORS.values() if e.remote):
        with st.expander(remote.title):
            there = remote.needs is None or importlib.util.find_spec(remote.needs) is not None
            if not there:
                st.caption(f"{remote.needs} is not installed here: `{remote.install}`.")
            on = st.toggle(
                f"Use {remote.name.capitalize()}",
                value=False,
                disabled=not there,
                help=help_of(ExecutorOptions, "executor"),
                key=f"executor-{remote.name}",
            )
            given = setting_inputs(remote.settings, ExecutorOptions, disabled=not on)
            st.caption(
                "The run store must be on storage every node sees (`GLEE_RUNS_DIR`); runs "
                "already in it are not submitted."
            )
        if on:
            return ExecutorOptions(executor=remote.name, runs_at_once=at_once, **given)
    return ExecutorOptions(runs_at_once=at_once)


def runs_at_once() -> str:
    """How many fine-tuning runs share the device at once (auto: 1 on a CPU)."""
    left, right = st.columns([1, 3])
    value = left.selectbox(
        "Runs at once", ("auto", "1", "2", "4", "8"), help=help_of(ExecutorOptions, "runs_at_once")
    )
    right.caption(
        "Several runs share the device, each in a process of its own (auto: one on "
        "a CPU, whose cores they would only split; on a GPU, as many as its memory "
        "holds). The estimate below is for one run after another."
    )
    return value


def estimate_words(launch: Launch, dataset, device: str) -> None:
    """The launch's estimate in words: its time and basis, or that its runs are stored (and what
    it still does with them), with a warning where a CPU would take long."""
    estimate = launch.estimate
    if launch.request is None or estimate is None:
        return
    bound = "" if launch.frozen else " (at most; early stopping shortens it)"  # frozen: measured
    if estimate.runs:
        trained = trainable_parameters(dataset, launch.request.config)
        message = (
            f"Estimated time: {estimate.text} for {estimate.runs} run(s) to train"
            f"{bound}. Basis: {estimate.basis} ({estimate.sure}). Each run trains about "
            f"{trained / 1e6:.2f}M parameters (a CLS head's count; each run records its own)."
        )
    elif estimate.validated:
        message = (
            f"All {estimate.stored} run(s) of this launch are already stored; Launch "
            f"cross-validates {estimate.validated} of them, as this data's small dev split "
            f"asks: {estimate.text}. Basis: {estimate.basis} ({estimate.sure})."
        )
    else:
        message = (
            f"All {estimate.stored} run(s) of this launch are already stored: Launch opens them "
            "(nothing to train). Change the methods, seeds or settings for a new run."
        )
    if estimate.left_out:
        message += f" {md(estimate.left_out)}."
    if device == "cpu" and not launch.frozen and estimate.seconds > 20 * 60:
        st.warning(
            message + " That is long for a CPU: try the quick compare, fewer epochs, a "
            "training limit, or a GPU machine."
        )
    else:
        st.info(message)


def launch_button(launch: Launch, dataset) -> None:
    """Launch: the request as a job (none on a read-only deployment); the jobs panel shows it."""
    if policy().read_only:
        st.info("Training is switched off on this deployment (read-only): browse the shipped runs.")
    elif st.button("Launch", type="primary", disabled=launch.request is None):
        job = launch_job(
            launch.request,
            label=launch.label,
            estimate=launch.estimate,  # a cluster's: one run after another here, an upper bound
            dataset=dataset,
        )
        if job is not None:
            st.session_state["last_job"] = job.id
            st.toast(f"{'Already running' if job.attached else 'Launched'}: job {job.id}")
            st.rerun()  # the panel above shows it


def finished_runs(dataset) -> None:
    """The dataset's finished runs, a row each: method, seed, mode, metrics, backbone, time."""
    runs = dataset_runs(dataset.id)
    if not runs:
        st.caption("None yet.")
        return
    finished = pd.DataFrame(
        [
            {
                "Method": r.method,
                "Seed": r.seed,
                "Mode": r.record.mode,
                "Reads": r.reads,
                **{
                    METRIC_TITLES[k] + " (%)": round(100 * r.metrics.value(k), 1)
                    for k in METRIC_KEYS
                },
                "Backbone": r.record.model.name,
                "Training (s)": r.record.timing.train_seconds,
                "Created": r.record.created,
                "Run": r.run_id,
            }
            for r in runs
        ]
    )
    st.dataframe(
        finished,
        hide_index=True,
        column_config={"Training (s)": st.column_config.NumberColumn(format="%.1f")},
    )


def quick_compare_button(dataset, name: str) -> None:
    """Home's one click: every head on the frozen backbone, as a job (its bar while it runs),
    with how the best is chosen and its estimate here; none on a read-only deployment."""
    if policy().read_only:
        st.caption(
            "Training is switched off on this deployment: browse the shipped runs on the "
            "Results, Diagnostics and Paper pages."
        )
        return
    quick = TrainConfig(mode="frozen")
    request = TrainRequest(
        data=current_choice(), methods=list(METHODS), seeds=[1], model=current_model(), config=quick
    )
    estimate = estimate_of(request, dataset)
    done = estimate.runs == 0 and not estimate.validated
    slot = st.empty()
    if running_step(request, key="home-compare-running"):
        pass  # running: its bar, not a second launch
    elif slot.button(
        f"Quick compare on {md(name)}",
        type="secondary" if done else "primary",
        help="Every head is already stored: this opens them." if done else None,
    ):  # its bar in the button's place; Home shows the answer once it ends
        launch_here(slot, request, f"Quick compare: {len(METHODS)} heads on {name}", estimate)
    small = dataset.small_dev()
    chosen_by = (
        f"chosen by {quick.folds}-fold cross-validation on train + dev, since its dev "
        f"split is small ({md(small)})"
        if small
        else "chosen on dev"
    )
    st.caption(
        f"All {len(METHODS)} heads (the paper's twelve, the baselines and the heads "
        "beyond the paper), each on the `[CLS]` and the mean-pooled state where it reads "
        f"a plain input, on the frozen backbone; the best {chosen_by}, never on test. "
        f"Estimated here: {estimate.text} ({estimate.basis}; {estimate.sure})."
    )
    if estimate.left_out:
        st.caption(f"{md(estimate.left_out)}.")
        label_words_button("home-label-words")
