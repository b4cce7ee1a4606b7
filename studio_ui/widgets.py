"""Pickers the pages share: choices shown by label, runs by method and setting, a class to
highlight."""

from __future__ import annotations

import streamlit as st

from glee_core.models.methods import method_label, registry_order

from .choice import current_dataset_id
from .stores import dataset_runs, recommendation_of
from .text import md

HIGHLIGHT = "font-weight: bold; background-color: #e8f0fe"  # a table's best, bolded


def choose(label: str, options: dict, widget=None, **kwargs):
    """A select box (or radio) showing ``options``' labels and returning the chosen key.
    (Labels are the widget's options, so the widget state holds what the user sees.)"""
    widget = widget or st.selectbox
    keys = {text: key for key, text in options.items()}
    return keys[widget(label, list(keys), **kwargs)]


def choose_many(label: str, options: dict, default: list, **kwargs) -> list:
    """A multi-select showing ``options``' labels; returns the chosen keys."""
    keys = {text: key for key, text in options.items()}
    picked = st.multiselect(label, list(keys), default=[options[k] for k in default], **kwargs)
    return [keys[text] for text in picked]


def method_labels(methods) -> dict[str, str]:
    return {m: method_label(m) for m in methods}


def pick_runs(runs, key: str, label: str = "Methods to show"):
    """Multi-select of the methods present among ``runs``; returns the runs of the chosen ones."""
    present = registry_order(r.method for r in runs)
    chosen = choose_many(label, method_labels(present), present, key=key)
    return [r for r in runs if r.method in chosen]


def run_labels(runs, recommended: bool = True) -> dict[str, str]:
    """A run's label in a picker (its head, pooling, seed, mode and test F1; the id's end last),
    the recommended candidate's runs first and said so (``recommended``: ordered by
    ``glee_core.runs.recommend.recommended_first``)."""
    from glee_core.runs.recommend import recommended_first  # noqa: PLC0415 (pandas)

    ordered = recommended_first(list(runs)) if recommended else list(runs)
    first = (ordered[0].setting, ordered[0].method) if recommended and ordered else None
    labels = {}
    for r in ordered:
        reads = "" if r.reads == "[MASK]" else f" ({r.reads})"
        mark = " · recommended" if (r.setting, r.method) == first else ""
        labels[r.run_id] = (
            f"{r.method}{reads} · seed {r.seed} · {r.record.mode} · "
            f"F1 {100 * r.metrics.f1:.1f}{mark} · {r.run_id[-10:]}"
        )
    return labels


def answer_labels(runs) -> tuple[dict[str, str], object]:
    """:func:`run_labels` with the recommendation's average first where it averages (its key
    the members' ids joined by commas, as ``predict`` and ``export --run`` take them; the single
    runs then say "best alone"), and the average as a run (``AveragedRun``) or None."""
    labels = run_labels(runs)
    rec = recommendation_of(list(runs)) if runs else None
    if rec is None or rec.ensemble is None:
        return labels, None
    averaged = rec.ensemble.averaged
    labels = {k: v.replace(" · recommended", " · best alone") for k, v in labels.items()}
    return {
        averaged.run_id: f"The average of the top {len(averaged.members)} · recommended · "
        f"F1 {100 * averaged.metrics.f1:.1f} · seed {averaged.seed}",
        **labels,
    }, averaged


def class_highlight(classes: list[str]) -> str | None:
    """A sidebar choice of one class to bring forward in every chart (kept across pages)."""
    options = ["(none)", *classes]
    current = st.session_state.get("highlight_class", "(none)")
    chosen = st.sidebar.selectbox(
        "Highlight a class in the charts",
        options,
        index=options.index(current) if current in options else 0,
    )
    st.session_state["highlight_class"] = chosen
    return None if chosen == "(none)" else chosen


def runs_or_stop():
    """The current dataset's finished runs; with none, say how to get some and stop the page."""
    dataset_id = current_dataset_id()
    runs = dataset_runs(dataset_id)
    if not runs:
        st.info(
            f"No finished runs for **{md(dataset_id)}** yet. Launch some on the **Train** page "
            "(the quick compare takes seconds)."
        )
        st.stop()
    return runs


def setting_runs(key: str):
    """Runs of one setting (backbone, mode and protocol: never mixed in a table) and the chosen
    methods."""
    from glee_core.runs.recommend import recommended_first  # noqa: PLC0415 (pandas)

    runs = runs_or_stop()
    labels = dict(sorted({r.setting: r.record.setting_label for r in runs}.items()))
    best = recommended_first(list(runs))[0].setting  # the recommended candidate's, first
    labels = {best: f"{labels.pop(best)} · recommended", **labels}
    setting = choose("Setting", labels, st.radio)
    runs = [r for r in runs if r.setting == setting]
    runs = pick_runs(runs, key=f"{key}:{setting}")  # each setting keeps its own choice
    if not runs:
        st.stop()
    return runs


def setting_inputs(
    settings, options, disabled: bool = False, key: str = "setting", per_row: int = 4
) -> dict:
    """A widget for each setting (``Setting``: a mode's, an executor's, or a training field's
    from ``glee_core.models.fields.setting_of``: its label, default, bounds, step, its words
    where it takes one of a few, the value that means "off"; its help is the ``options``
    dataclass field's, the CLI flag's), ``per_row`` to a row; returns ``{field: value}``, a
    blank or "off" one as None (its default). ``key``: the widgets' keys start with it (a key
    of the recipe's resets them when the recipe changes)."""
    from glee_core.models.fields import help_of  # noqa: PLC0415

    values = {}
    columns = st.columns(per_row) if settings else []
    for number, setting in enumerate(settings):
        column = columns[number % len(columns)]
        shared = {
            "help": help_of(options, setting.field),
            "key": f"{key}-{setting.field}",
            "disabled": disabled,
            "placeholder": setting.placeholder or None,
        }
        if setting.choices:  # one of a few words: a picker, not a box to spell them in
            shared.pop("placeholder")
            words = list(setting.choices)
            index = words.index(setting.default) if setting.default in words else 0
            values[setting.field] = column.selectbox(setting.label, words, index, **shared)
            continue
        if setting.kind is str:
            values[setting.field] = (
                column.text_input(setting.label, setting.default or "", **shared).strip() or None
            )
            continue
        low, high, off = (
            None if bound is None else setting.kind(bound)
            for bound in (setting.low, setting.high, setting.off)
        )
        step = setting.kind(setting.step)
        if high is not None and setting.below:
            high -= step
        if low is not None and setting.above:
            low += step
        if off is not None:  # the widget reaches the value that means "off"
            low = off if low is None else min(low, off)
            high = None if high is None else max(high, off)
        value = column.number_input(
            setting.label,
            low,
            high,
            setting.default,
            step=step,
            format="%g" if setting.kind is float else None,
            **shared,
        )
        if value is not None and off is not None and setting.kind(value) == off:
            value = None
        values[setting.field] = None if value is None else setting.kind(value)
    return values
