"""The dataset and backbone chosen, kept across pages and a reload; the dataset loaded (cached)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, replace
from pathlib import Path

import streamlit as st

from glee_core.core import environment
from glee_core.core.errors import GleeError
from glee_core.core.files import write_atomic, write_json_atomic
from glee_core.data.catalog import PAPER_DATASETS, dataset_name
from glee_core.data.datasets import RARE_KEPT
from glee_core.data.sources import source_of
from glee_core.data.verbalizers import parse_verbalizer, verbalizer_json
from glee_core.models.methods import METHODS
from glee_core.models.options import DataOptions
from glee_core.runs.notes import untrained_head_line, untrained_head_note
from glee_core.serve.uploads import list_uploads
from glee_core.train.adapted import adapted_record

from .access import policy, workspace
from .stores import all_runs, store, uploads_dir
from .text import md

DEMO = DataOptions(dataset="demo")


CHOICE_FILE = "studio-choice.json"  # the dataset last chosen, in the workspace (or the store)


STORED_ONLY = "stored runs"  # a choice's label ending: a dataset known here only by its runs


def display_name(dataset_id: str) -> str:
    """A dataset as its user knows it: an upload by the file name it came as (``tickets.csv``,
    not ``upload:tickets-38b2aabc.csv``; a variant keeps its ending), anything else by its id."""
    for upload in list_uploads(uploads_dir()):
        spec = f"upload:{upload.path.name}"
        if dataset_id == spec or dataset_id.startswith(f"{spec}+"):
            return upload.original_name + dataset_id[len(spec) :]
    return dataset_id


def dataset_choices() -> dict[str, DataOptions]:
    """Label -> how to load it: demo, the paper's datasets found, kept uploads, and every other
    dataset the readable stores hold runs of (runs trained elsewhere, or of a deleted upload:
    their views need only the runs; training needs the texts)."""
    choices = {"demo (chatterbot corpus, embedded)": DEMO}
    data = environment.data_dir()
    where = "" if policy().public else f", {data}"  # a visitor sees no server path
    for dataset_id in PAPER_DATASETS:
        folder = data / dataset_id
        if (folder / "train.tsv").is_file() or (folder / "train.txt").is_file():
            choices[f"{dataset_id} (paper{where})"] = DataOptions(
                dataset=dataset_id, data_dir=str(data)
            )
    for upload in list_uploads(uploads_dir()):
        choices[f"{upload.original_name} (upload: {upload.path.name})"] = upload.options
    offered = {options.dataset for options in choices.values()}
    public = policy().public
    for dataset_id in sorted({run.dataset for run in all_runs(report=False)}):
        if dataset_id.removesuffix(RARE_KEPT) in offered:  # "+rare": the keep-rare switch
            continue
        source = source_of(dataset_id)
        if public and source is not None and not source[0].public:
            continue  # a csv: id names a path on the server, which a visitor never sees
        choices[f"{dataset_id} ({STORED_ONLY})"] = DataOptions(dataset=dataset_id)
    return choices


def incomplete_paper_datasets() -> list[str]:
    """The paper's datasets whose folder is in the data directory without a training file (the
    Data page names them rather than leaving them silently out of its list)."""
    data = environment.data_dir()
    return [
        d
        for d in PAPER_DATASETS
        if (data / d).is_dir()
        and not any((data / d / name).is_file() for name in ("train.tsv", "train.txt"))
    ]


def current_choice() -> DataOptions:
    """How the chosen dataset loads: kept across pages, and across a reload in the workspace
    (or, on one's own machine, beside the runs), so a Launch after a reload trains on it."""
    if "dataset" not in st.session_state:
        st.session_state["dataset"] = _remembered_choice() or DEMO
    return st.session_state["dataset"]


def choose_dataset(options: DataOptions) -> None:
    st.session_state["dataset"] = options
    _remember_choice(options)


def set_threshold(threshold: float | None) -> None:
    choose_dataset(replace(current_choice(), threshold=threshold))


def _choice_file() -> Path | None:
    own = workspace()
    if own is not None:
        return own.path / CHOICE_FILE
    return None if policy().read_only else environment.runs_dir() / f".{CHOICE_FILE}"


def _remember_choice(options: DataOptions) -> None:
    path = _choice_file()
    if path is not None:
        try:
            write_json_atomic(
                path,
                {
                    "dataset": options.dataset,
                    "threshold": options.threshold,
                    "keep_rare": options.keep_rare,
                    "exclude": options.exclude,
                    "template": options.template,
                    "verbalizer": options.verbalizer,
                    "add": options.add,
                },
            )
        except OSError:  # a read-only folder: the choice lasts the session
            pass


def _remembered_choice() -> DataOptions | None:
    """The last choice, if it is still offered (an upload may have been deleted since)."""
    path = _choice_file()
    try:
        saved = json.loads(path.read_text(encoding="utf-8")) if path else None
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict):
        return None
    offered = {o.dataset: o for o in dataset_choices().values()}
    found = offered.get(saved.get("dataset"))
    threshold = saved.get("threshold")
    if found is not None and isinstance(threshold, (int, float)) and 0 < threshold < 1:
        found = replace(found, threshold=float(threshold))
    if found is not None and saved.get("keep_rare") is True:
        found = replace(found, keep_rare=True)
    exclude = saved.get("exclude")
    if found is not None and isinstance(exclude, str) and Path(exclude).is_file():
        found = replace(found, exclude=exclude)  # the variant without flagged rows
    verbalizer = saved.get("verbalizer")
    if found is not None and isinstance(verbalizer, str) and Path(verbalizer).is_file():
        found = replace(found, verbalizer=verbalizer)  # label words given on the Data page
    template = saved.get("template")
    if found is not None and isinstance(template, str):
        found = replace(found, template=template)
    add = saved.get("add")
    if found is not None and isinstance(add, str) and Path(add).is_file():
        found = replace(found, add=add)  # pool texts labelled on the Data page
    return found


def choose_prompt(template: str, label_words: dict[str, list[str]], model: str) -> None:
    """Choose the current dataset with these label words and template in place of its own (a
    ``+prompt-<digest>`` variant, its runs apart), or its own again where they are its own. The
    words are kept as a ``--verbalizer`` JSON in the store (the visitor's workspace in public
    mode). Raises GleeError, keeping nothing, on an empty word, a template without ``[MASK]``
    or ``{text}``, or words ``model``'s vocabulary cannot read."""
    from glee_core.data.verbalizers import check_template, prompt_variant  # noqa: PLC0415 (torch)
    from glee_core.models.scoring import check_prompt  # noqa: PLC0415 (torch)

    choice = current_choice()
    own = load_options(replace(choice, template=None, verbalizer=None))
    words = parse_verbalizer(label_words, own.classes, "label words")
    template = check_template(template.strip())
    check_prompt(model, template, words, own.classes, own.max_length)
    if not prompt_variant(template, words, own.template, own.verbalizer):  # its own prompt
        choose_dataset(replace(choice, template=None, verbalizer=None))
        return
    text = verbalizer_json(words)
    visitor = workspace(create=True)  # public mode: the words are this visitor's
    if visitor is not None:  # and counted against the workspace's disk, as an upload is
        visitor.check_disk(policy(), len(text.encode()))
    path = store().label_words_dir / f"{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
    write_atomic(path, text)
    choose_dataset(
        replace(
            choice, verbalizer=str(path), template=None if template == own.template else template
        )
    )


@st.cache_resource(show_spinner="Loading the dataset ...", max_entries=8)
def _load(options: tuple):
    return DataOptions(**dict(options)).load()


def load_options(options: DataOptions):
    """The dataset ``options`` name (cached); raises GleeError when it cannot be loaded."""
    return _load(tuple(sorted(asdict(options).items())))


def current_dataset():
    """The chosen dataset, or None after showing why it cannot be loaded."""
    choice = current_choice()
    try:
        return load_options(choice)
    except GleeError as exc:
        if stored := all_runs(choice.dataset, report=False):  # runs from elsewhere: expected
            st.info(
                f"The texts of **{md(choice.dataset)}** are not here ({md(exc)}). Its "
                f"{len(stored)} stored run(s) need none: see them on **Results**, "
                "**Diagnostics**, **Predictions** and **Report**. Training and the "
                "Playground need the texts."
            )
        else:
            st.error(f"Cannot load dataset {md(choice.dataset)}: {md(exc)}")
        return None


def current_dataset_id() -> str:
    """The id the current dataset's runs carry: the choice's, or where the choice makes a
    variant (rare classes kept, flagged rows left out, its own label words or template, pool
    texts labelled and added), the
    loaded dataset's (``demo+rare``, ``...+prompt-<digest>``) when it loads."""
    choice = current_choice()
    if not (
        choice.keep_rare or choice.exclude or choice.template or choice.verbalizer or choice.add
    ):
        return choice.dataset
    try:
        return load_options(choice).id
    except GleeError:
        return choice.dataset


def current_model() -> str:
    return st.session_state.setdefault("model", environment.default_model())


def backbone_notice(
    model: str,
    methods: list[str] | None = None,
    mlm_head_pretrained: bool | None = None,
    full: bool = False,
    leading: list[str] | None = None,
) -> None:
    """Say plainly when the MLM head the prompt / pt. LN methods rely on is untrained (known from
    a run's record, or, before any run, for the offline default backbone), where it matters: in
    one sentence where the user chooses, in ``full`` where the paper's effect is shown;
    ``leading``: the heads a recommendation beside it ranks first (the sentence is true of
    them)."""
    untrained = (
        not mlm_head_pretrained
        if mlm_head_pretrained is not None
        else model == environment.AUTO_MODEL
    )
    relevant = [m for m in (methods or METHODS) if m in METHODS and METHODS[m].uses_mlm_head]
    if untrained and relevant:
        if full:
            st.warning(untrained_head_note(model, relevant), icon=":material/warning:")
        else:
            st.caption(untrained_head_line(model, relevant, leading))
    adapted = adapted_record(model)
    if adapted:
        st.info(adapted_line(adapted), icon=":material/model_training:")


def adapted_line(record: dict) -> str:
    """One line on an adapted backbone: from what, on what, and its [MASK] accuracy."""
    before, after = record.get("held_out_before") or {}, record.get("held_out_after") or {}
    measured = (
        f"; held-out [MASK] top-1 {before['mask_top1']:.1%} → {after['mask_top1']:.1%}, "
        f"masked-LM loss {before['mlm_loss']:.2f} → {after['mlm_loss']:.2f}"
        if before.get("mask_top1") is not None and after.get("mask_top1") is not None
        else ""
    )
    if record.get("objective") == "simcse":
        loss = (
            f"; held-out SimCSE loss {before['simcse_loss']:.2f} → {after['simcse_loss']:.2f}"
            if before.get("simcse_loss") is not None and after.get("simcse_loss") is not None
            else ""
        )
        return (
            f"Adapted backbone: {md(record['adapted_from']['name'])} after "
            f"{record['options']['epochs']} epoch(s) of SimCSE on "
            f"{md(dataset_name(record['dataset']['id']))}'s "
            f"{record['dataset']['training_texts']} training texts (the encoder alone; its MLM "
            f"head as it came){loss}."
        )
    return (
        f"Adapted backbone: {md(record['adapted_from']['name'])} after "
        f"{record['options']['epochs']} epoch(s) of masked-LM training on "
        f"{md(dataset_name(record['dataset']['id']))}'s {record['dataset']['training_texts']}"
        f" training texts (its MLM head trained with it){measured}."
    )
