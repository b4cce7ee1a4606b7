"""Data: choose or upload a dataset; its long tail, splits and a sample of each class."""

import time
from dataclasses import asdict, replace

import pandas as pd
import streamlit as st

import studio_ui
from glee_core.studio import (
    ACCEPTED_ENCODINGS,
    BUDGET_CSV,
    BUDGET_FILE,
    HEALTH_FILE,
    ISSUES_FILE,
    LABEL_COLUMN_NAMES,
    MAX_UPLOAD_BYTES,
    PAPER_DATASETS,
    POOLINGS,
    SOURCES,
    TEXT_COLUMN_NAMES,
    AdaptOptions,
    AdaptRequest,
    BudgetOptions,
    DataOptions,
    GleeError,
    HealthOptions,
    LabellingSession,
    LimitReached,
    adapted_backbones,
    adapted_folder_name,
    budget_line,
    chart_class_frequency,
    chart_label_budget,
    class_frequency_frame,
    csv_columns,
    data_health,
    default_of,
    disk_message,
    environment,
    find_column,
    first_few,
    help_of,
    label_budget,
    label_word_methods,
    list_jobs,
    read_budget,
    read_health,
    read_verbalizer_json,
    recommend,
    save_upload,
    size_text,
    slug,
    spreadsheet_csv,
    unreadable_words,
    verbalizer_json,
)

studio_ui.sidebar()
st.title("Data")


def guess_column(columns: list[str], names: tuple[str, ...]) -> int:
    """Preselect the column csv:PATH would pick by name (else the first)."""
    return columns.index(find_column(columns, names) or columns[0])


choices = studio_ui.dataset_choices()
choice = studio_ui.current_choice()
labels = list(choices)
current = next((i for i, k in enumerate(labels) if choices[k].dataset == choice.dataset), 0)
picked = st.selectbox(
    "Dataset",
    labels,
    index=current,
    help="The paper's datasets appear when GLEE_DATA_DIR (default ./data) "
    "holds them in the paper's TSV layout.",
)
rules = studio_ui.policy()
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
    where = "its data folder" if rules.public else f"`{environment.data_dir()}`"  # no server path
    st.caption(
        f"The paper's datasets appear in this list when {where} holds them (one folder "
        "per id in the paper's TSV layout; set `GLEE_DATA_DIR` to point elsewhere)."
    )
if (incomplete := studio_ui.incomplete_paper_datasets()) and not rules.public:
    st.caption(
        f"Not in this list: {', '.join(incomplete)}: their folders have no `train.tsv` "
        "(the paper's released data lacks it for these; the authors' repository says how "
        "to get the training split)."
    )
new = DataOptions(dataset=f"{hub.prefix}:{hf_name.strip()}") if hf_name.strip() else choices[picked]
if new.dataset != choice.dataset:
    try:  # the choice changes only to a dataset that loads, or whose runs are stored
        studio_ui.load_options(new)
    except GleeError as exc:
        if studio_ui.all_runs(new.dataset, report=False):
            studio_ui.choose_dataset(new)
            st.rerun()
        st.error(
            f"Cannot load {studio_ui.md(new.dataset)}: {studio_ui.md(exc)}. Still showing "
            f"{studio_ui.md(choice.dataset)}."
        )
    else:
        studio_ui.choose_dataset(new)
        st.rerun()

public = rules.public
limit = min(MAX_UPLOAD_BYTES, rules.upload_bytes) if public else MAX_UPLOAD_BYTES


def upload_csv() -> None:
    """Validate, keep (within the session's limits in public mode) and choose an uploaded CSV."""
    st.caption(
        f"Up to {size_text(limit)}; comma, semicolon, tab or pipe separated; "
        f"{ACCEPTED_ENCODINGS}. A `split` column (train/dev/test) is used if present, "
        "otherwise a stratified 70/10/20 split is made. Uploads are kept on disk"
        + (f", private to this session, for {rules.ttl_text} without use." if public else ".")
    )
    # a kept file clears the form (a new key), and says so after the rerun that chooses it
    if kept := st.session_state.pop("upload-kept", None):
        st.success(kept)
    uploaded = st.file_uploader(
        "CSV file",
        type=["csv", "tsv", "txt"],
        key=f"upload-{st.session_state.get('uploads-kept', 0)}",
        max_upload_size=max(1, -(-limit // 2**20)),
    )
    if uploaded is not None:
        columns = []
        try:
            if public:  # the size first: a file over the limit is never parsed
                rules.check_upload_size(uploaded.size)
            data = uploaded.getvalue()
            columns = csv_columns(data, uploaded.name)
        except GleeError as exc:
            st.error(studio_ui.md(exc))
        if columns:
            text_col = st.selectbox(
                "Text column", columns, index=guess_column(columns, TEXT_COLUMN_NAMES)
            )
            label_col = st.selectbox(
                "Label column", columns, index=guess_column(columns, LABEL_COLUMN_NAMES)
            )
            text_b_col = st.selectbox("Second text column (optional)", ["(none)", *columns])
            if text_col == label_col:
                st.error(
                    f"The text and the label are both the column "
                    f"'{studio_ui.md(text_col)}': pick the "
                    "column that holds each (a CSV needs at least two columns)."
                )
            elif st.button("Use this CSV", type="primary"):
                try:
                    own = studio_ui.workspace(create=True)  # public mode: made on this write
                    if own is not None:
                        own.check_upload(rules, uploaded.size)
                    upload, dataset = save_upload(
                        studio_ui.uploads_dir(),
                        uploaded.name,
                        data,
                        text_col,
                        label_col,
                        None if text_b_col == "(none)" else text_b_col,
                        max_classes=rules.upload_classes if public else None,
                    )
                except GleeError as exc:
                    st.error(f"This CSV cannot be used: {studio_ui.md(exc)}")
                except OSError as exc:  # a full disk: nothing half-written is kept
                    st.error(f"This CSV could not be kept: {studio_ui.md(disk_message(exc))}")
                else:
                    studio_ui.choose_dataset(upload.options)
                    st.session_state["upload-kept"] = (
                        f"Kept as {studio_ui.md(upload.spec)}: {dataset.num_classes} classes. "
                        "It is the dataset now (Home's quick compare is one click)."
                    )
                    st.session_state["uploads-kept"] = st.session_state.get("uploads-kept", 0) + 1
                    st.rerun()


if rules.read_only:
    st.caption("Uploads are switched off on this deployment (read-only).")
else:
    with st.expander("Upload a CSV", expanded=False):
        upload_csv()

dataset = studio_ui.current_dataset()
if dataset is None:
    st.stop()

for warning in dataset.warnings:
    st.warning(studio_ui.md(warning))
if dataset.dropped_classes or dataset.train_only_classes:
    choice = studio_ui.current_choice()
    keep = st.toggle(
        "Keep the rare classes in training",
        value=choice.keep_rare,
        help="Rare classes are the point of this tool: kept, they are learned and can be "
        "predicted, but with no dev or test text they are never scored. The dataset's id "
        "then ends in +rare, so its runs stay apart from those without them.",
    )
    if keep != choice.keep_rare:
        studio_ui.choose_dataset(replace(choice, keep_rare=keep))
        st.rerun()
left, right = st.columns([1, 3])
threshold = left.number_input(
    "Head/tail threshold",
    min_value=0.05,
    max_value=0.95,
    value=float(dataset.threshold),
    step=0.05,
    help="Classes are head while the cumulative share of training examples stays at or under this.",
)
if abs(threshold - dataset.threshold) > 1e-9:
    studio_ui.set_threshold(threshold)
    st.rerun()
log_scale = left.toggle("Log scale", value=False)
sizes = {name: len(frame) for name, frame in dataset.splits.items()}
left.metric("Classes", dataset.num_classes)
left.dataframe(
    pd.DataFrame({"split": list(sizes), "examples": list(sizes.values())}), hide_index=True
)
head, tail = dataset.head_tail()
counts = dataset.class_counts("train").to_dict()
highlight = studio_ui.class_highlight(list(counts))
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
    f"Template: {studio_ui.md(dataset.template)}"
)

with st.expander("Class table"):
    table = class_frequency_frame(counts, head)
    table["label words"] = [" | ".join(dataset.verbalizer[c]) for c in table["class"]]
    st.dataframe(table, hide_index=True)


def read_label_words(uploaded) -> dict[str, list[str]] | None:
    """A label-word JSON file (``--verbalizer``'s: label -> word or list of words) matched to
    the classes; None after saying what is wrong with it."""
    try:
        return read_verbalizer_json(uploaded.getvalue(), dataset.classes, uploaded.name)
    except GleeError as exc:  # too large, not JSON, other values, a class without a word
        st.error(studio_ui.md(exc))
    return None


def label_words_section() -> None:
    """The words the prompt heads score at [MASK] for each class, and their template: shown,
    checked against the backbone's vocabulary, and given anew (typed, or a JSON file)."""
    choice = studio_ui.current_choice()
    model = studio_ui.current_model()
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
        studio_ui.backbone_notice(model, [m.id for m in worded])
        if unreadable:
            st.warning(
                f"`{studio_ui.md(model)}` cannot read {len(unreadable)} of these words "
                f"({studio_ui.md(first_few(unreadable, 6))}): Home's compare leaves "
                "these heads out until words it reads are given here."
            )
        if choice.verbalizer or choice.template:
            st.info(
                f"This is **{studio_ui.md(studio_ui.display_name(dataset.id))}**: the "
                "label words or template given here, not the dataset's own."
            )
            if st.button("Back to the dataset's own label words"):
                studio_ui.choose_dataset(replace(choice, verbalizer=None, template=None))
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
        if uploaded is not None and (read := read_label_words(uploaded)) is not None:
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
                studio_ui.choose_prompt(template, given, model)
            except GleeError as exc:
                st.error(f"Not used: {studio_ui.md(exc)}")
            except OSError as exc:
                st.error(f"The label words could not be kept: {studio_ui.md(disk_message(exc))}")
            else:
                st.session_state["label-words-kept"] = True
                st.rerun()
        right.download_button(
            "Download these label words (JSON)",
            verbalizer_json(words),
            f"{slug(dataset.id)}-label-words.json",
            "application/json",
        )


label_words_section()

st.subheader("Sample rows per class")
per_class = st.slider("Rows per class", 1, 10, 3)
train = dataset.splits["train"]
sample = train.groupby("label", group_keys=False).head(per_class).copy()
sample["class"] = [dataset.classes[i] for i in sample["label"]]
sample["text"] = sample["text"].map(studio_ui.visible)  # a backspace drew as an empty box
columns = ["class", "text"] + (["text_b"] if dataset.has_text_b else [])
st.dataframe(sample.sort_values("label")[columns], hide_index=True)


WEAK_FLAGS_F1 = 75.0  # a model under this out-of-fold macro-F1 flags ambiguous texts as well


def health_folder(model: str):
    return studio_ui.store().data_report_dir(dataset.id, model)


def run_report(what: str, measure, estimate: dict) -> None:
    """Measure a data report here (in public mode in turn with the training jobs, within its
    limit): ``measure(progress)`` computes and writes it, a bar moving with the feature pass
    (where the texts are not encoded yet) and the report's steps, with the time left by the
    ``estimate``; an error says what to fix. In public mode the web process's work is
    refused above ``report_seconds`` estimated and stopped at twice that."""
    try:
        if rules.public:
            rules.check_report(what, estimate["seconds"])
            # the visitor's report, in their workspace (never the .none folder), within its disk
            studio_ui.workspace(create=True).check_disk(rules)
    except GleeError as exc:
        st.error(studio_ui.md(exc))
        return
    bar = st.progress(0.0, text=f"{what} ...")
    encoded, started = [], time.monotonic()

    def show(share: float, text: str) -> None:
        elapsed = time.monotonic() - started
        if rules.public and elapsed > 2 * rules.report_seconds:
            raise LimitReached(
                f"{what} was stopped after {elapsed / 60:.0f} min, twice the "
                "most work on this page may take here (the machine is busy, or "
                "the estimate was short). Run it on your own machine."
            )
        left = max(estimate["seconds"] - elapsed, elapsed * (1 - share) / max(share, 0.05))
        bar.progress(min(share, 1.0), text=f"{text} · {studio_ui.duration(left)} left")

    def progress(event) -> None:
        if getattr(event, "total", 0) and hasattr(event, "format"):  # the feature pass
            encoded.append(True)
            show(
                0.6 * event.done / event.total, f"Encoding the texts: {event.done} of {event.total}"
            )
        elif hasattr(event, "steps"):
            start = 0.6 if encoded else 0.0
            show(start + (1 - start) * (event.step - 1) / event.steps, event.what)

    try:
        with studio_ui.machine_turn(
            lambda: bar.progress(0.0, text="Waiting for the machine: training jobs go first ...")
        ):
            measure(progress)
    except GleeError as exc:
        st.error(studio_ui.md(exc))
    except OSError as exc:
        st.error(f"{what} could not be kept: {studio_ui.md(disk_message(exc))}")
    bar.empty()


def check_health(model: str, estimate: dict) -> None:
    """Run ``health`` here (:func:`run_report`), into the store of the workspace it makes."""
    from glee_core.studio import get_backbone, resolve_device  # noqa: PLC0415 (torch)

    run_report(
        "The health check",
        lambda progress: data_health(
            dataset,
            get_backbone(model),
            model,
            HealthOptions(out=str(health_folder(model))),
            studio_ui.store().features_dir,
            resolve_device("auto"),
            progress,
        ).write(health_folder(model)),
        estimate,
    )


def show_health(folder) -> None:
    health = read_health(folder)
    issues, summary = health.issues, health.summary()
    st.caption(
        f"{summary['suspected_label_errors']} suspected label error(s) among "
        f"{summary['training_texts']} training texts; "
        f"{summary['training_texts_with_duplicates']} with a near-duplicate in training, "
        f"{summary['training_texts_leaked_into_dev_or_test']} with one in dev or test "
        f"(a leak: it inflates the scores); {summary['outliers']} outlier(s). "
        f"{health.folds}-fold probabilities of `{health.method}` on the "
        f"{health.pooling}-pooled features of `{studio_ui.md(health.model)}`."
    )
    strength = health.oof_macro_f1
    if strength is not None:  # how far to trust the flags: the model behind them
        weak = strength < WEAK_FLAGS_F1
        st.caption(
            f"The flags come from a model that scores **{strength:.1f}** macro-F1 on the "
            "texts it did not train on (labels as given): "
            + (
                "a weak one, so many flags are texts it finds hard or ambiguous rather "
                "than wrong labels. "
                if weak
                else ""
            )
            + "Read them as a ranking (the lowest label quality first, in the table "
            "below) and look before you remove any."
        )
    table = pd.DataFrame([asdict(c) for c in health.classes])
    table["suspected"] = [
        str(s) if j else "too few to judge"
        for s, j in zip(table["suspected"], table["judged"], strict=True)
    ]
    table["most confused with"] = [
        f"{c} ({share:.0%})" if isinstance(c, str) else ""  # JSON's null reads as NaN
        for c, share in zip(table["confused_with"], table["confused_share"], strict=True)
    ]
    st.dataframe(
        table[
            [
                "name",
                "group",
                "texts",
                "suspected",
                "duplicates",
                "leaked",
                "outliers",
                "most confused with",
            ]
        ].rename(columns={"name": "class"}),
        hide_index=True,
    )
    absorbed = health.absorbed()
    if absorbed:
        st.caption(
            "A head class absorbing a tail one: "
            + "; ".join(
                f"**{studio_ui.md(p['true'])}** → {studio_ui.md(p['predicted'])} "
                f"({p['texts']} text(s), {p['share']:.0%} of its own)"
                for p in absorbed
            )
            + "."
        )
    classes = ["(all classes)", *table["name"]]
    left, right = st.columns([3, 1], vertical_alignment="bottom")
    chosen = left.selectbox("Suspected rows of", classes, key="health-class")
    only = right.toggle("Suspected only", value=True, key="health-only")
    shown = issues if chosen == "(all classes)" else issues[issues["given_label"] == chosen]
    if only:
        shown = shown[shown["suspected"]]
    st.dataframe(
        shown[["row", "text", "given_label", "suggested_label", "label_quality", "duplicate_rows"]],
        hide_index=True,
    )
    st.download_button(
        "Download every training row's label quality (CSV)",
        spreadsheet_csv(issues),
        f"{slug(dataset.id)}-{ISSUES_FILE}",
        "text/csv",
    )
    flagged = health.flagged_rows()
    without = health.oof_macro_f1_without
    measured = (
        f" (measured: cross-validated macro-F1 {strength:.1f} → {without:.1f})"
        if strength is not None and without is not None
        else ""
    )
    if flagged and st.button(
        f"Train without the {len(flagged)} flagged row(s){measured}",
        help="A variant of this dataset without them: its id ends in "
        "+without-N-..., so its runs stay apart from the full data's; "
        "compare the two on the Results page. The figure: the probe "
        "behind the flags refitted without them on every fold, scored "
        "on the same held-out texts, labels as given.",
    ):
        rows_file = folder / f"excluded-{len(flagged)}.txt"
        rows_file.write_text("".join(f"{r}\n" for r in flagged), encoding="utf-8")
        studio_ui.choose_dataset(replace(studio_ui.current_choice(), exclude=str(rows_file)))
        st.rerun()


def health_section() -> None:
    st.subheader("Data health")
    st.caption(
        "Which training labels look wrong, which texts repeat (within training, or "
        "copied into dev or test), which are outliers, and which classes the tail loses "
        "to: a probe on the frozen features gives every training text class "
        "probabilities from folds that did not hold it, and cleanlab reads them. The "
        "command line's `python -m glee_core health` does the same."
    )
    choice = studio_ui.current_choice()
    if choice.exclude:
        st.info(
            f"This is **{studio_ui.md(dataset.id)}**: the training split without the rows "
            "the health check flagged. Its runs are apart from the full data's."
        )
        if st.button("Back to every training row"):
            studio_ui.choose_dataset(replace(choice, exclude=None))
            st.rerun()
        return
    model = studio_ui.current_model()
    folder = health_folder(model)
    done = (folder / HEALTH_FILE).is_file()
    if rules.read_only:
        st.caption("Checking writes files; it is switched off on this deployment (read-only).")
    else:
        estimate = studio_ui.report_estimate(dataset, "health", HealthOptions(out=str(folder)))
        if st.button(
            ("Check again" if done else "Check the data's health") + f" ({estimate['text']})",
            type="secondary" if done else "primary",
            help=f"Estimated from {estimate['basis']}.",
            key="health-check",
        ):  # its estimate moves: the key keeps the click
            check_health(model, estimate)
            folder = health_folder(model)
            done = (folder / HEALTH_FILE).is_file()
    if done:
        show_health(folder)


health_section()


def budget_head() -> tuple[str, str | None]:
    """The head the label budget retrains, and its pooling: the quick compare's recommended
    candidate when there is one, else the command line's default."""
    quick = [
        r for r in studio_ui.all_runs(dataset.id, report=False) if r.record.hyperparameters.frozen
    ]
    rec = recommend(quick) if quick else None
    if rec is None:
        return default_of(BudgetOptions, "method"), None
    return rec.chosen.method, rec.chosen.pooling if rec.chosen.pooling in POOLINGS else None


def measure_budget(model: str, options, estimate: dict) -> None:
    """Run ``budget`` here (:func:`run_report`), into the store of the workspace it makes."""
    from glee_core.studio import get_backbone  # noqa: PLC0415 (torch)

    run_report(
        "The label budget",
        lambda progress: label_budget(
            dataset, get_backbone(model), model, options, studio_ui.store().features_dir, progress
        ).write(health_folder(model)),
        estimate,
    )


def show_budget(folder) -> None:
    report = read_budget(folder)
    st.caption(
        f"`{report.method}` on the {report.pooling}-pooled features "
        f"of `{studio_ui.md(report.model)}`, retrained on "
        f"{', '.join(f'{f:.0%}' for f in report.fractions)} of every class's training "
        f"texts, seeds {', '.join(map(str, report.seeds))}; each class's F1 on the "
        f"whole test split ({report.seconds:.0f} s). Forecasts extrapolate the "
        "measured curve: bench/budget_backtest.py measures how far they hold "
        '(BENCHMARKS.md, "Label budget").'
    )
    if line := budget_line(report, studio_ui.md):
        st.info(line)
    st.altair_chart(chart_label_budget(report), width="content")
    header, rows = report.table()
    table = pd.DataFrame(rows, columns=header)
    session = LabellingSession.latest(studio_ui.store(), dataset.id)
    if session is not None and session.pool_classes:  # what the unlabelled texts may give
        likely = session.likely()
        table["likely in the pool"] = [likely.get(c, "") for c in table["class"]]
        st.caption(
            f"Likely in the pool: of `{studio_ui.md(session.pool_name)}`'s texts, those "
            "the head predicts as the class, times its precision for that class on dev "
            "(Unlabelled texts, below)."
        )
    st.dataframe(table, hide_index=True)
    st.download_button(
        "Download the label budget (CSV)",
        spreadsheet_csv(pd.read_csv(folder / BUDGET_CSV, keep_default_na=False)),
        f"{slug(dataset.id)}-{BUDGET_CSV}",
        "text/csv",
    )


def budget_section() -> None:
    st.subheader("Label budget")
    st.caption(
        "How many more texts each class needs: the head is retrained on 10 to 100% of "
        "every class's training texts (quick mode: the button says how long here), each "
        "class's test F1 is measured at each size, and a curve fitted per class forecasts "
        "its F1 at twice and four times its texts, and the texts it needs to reach a "
        "target. "
        "The command line's `python -m glee_core budget` does the same."
    )
    model = studio_ui.current_model()
    folder = health_folder(model)
    done = (folder / BUDGET_FILE).is_file()
    method, pooling = budget_head()
    if rules.read_only:
        st.caption("Measuring writes files; it is switched off on this deployment (read-only).")
    else:
        left, right = st.columns([1, 3], vertical_alignment="bottom")
        target = left.number_input(
            "Target F1",
            0.05,
            1.0,
            default_of(BudgetOptions, "target_f1"),
            0.05,
            help=help_of(BudgetOptions, "target_f1"),
        )
        options = BudgetOptions(out=str(folder), method=method, pooling=pooling, target_f1=target)
        estimate = studio_ui.report_estimate(dataset, "budget", options)
        if right.button(
            ("Measure again" if done else "Measure the label budget")
            + f" (head: {method}, {estimate['text']})",
            type="secondary" if done else "primary",
            key="budget-measure",
            help="The head is the quick compare's recommended one when there is "
            "one (Home), else "
            + default_of(BudgetOptions, "method")
            + f". Estimated from {estimate['basis']}.",
        ):
            measure_budget(model, options, estimate)
            folder = health_folder(model)
            done = (folder / BUDGET_FILE).is_file()
    if done:
        show_budget(folder)


budget_section()
studio_ui.unlabelled_texts_section(dataset)


def adapt_section() -> None:
    """Task-adaptive pretraining: adapt the backbone to this dataset's texts in the background,
    then pick the adapted backbone as the model."""
    st.subheader("Adapt the backbone to this dataset")
    st.caption(
        "Task-adaptive pretraining (Gururangan et al. 2020) continues the masked-LM "
        "objective on the training texts (never dev or test), training the MLM head with "
        "the encoder: what the prompt methods and the pt. LN read. The offline MiniLM's "
        "MLM head starts untrained; this is the way to give it one. Measured on demo, "
        'r8-1500 and r52-lt (README, "How to tune"): it moves the CLS heads in quick '
        "mode by -2 to +8 points and does not revive prompt-tuning, which P-tuning "
        "v2, LoRA or fine-tuning (the Train page's mode) do. The adapted backbone is a "
        "new model: choose it below, then train as usual."
    )
    if rules.public or rules.read_only:
        st.info(
            "Adapting writes a whole backbone; it is switched off on this deployment. Run "
            "Glee Studio yourself to adapt: `python -m glee_core adapt --dataset ... "
            "--out DIR`, then `--model DIR`."
        )
        return
    model = studio_ui.current_model()
    objective = st.radio(
        "Objective",
        ["mlm", "simcse"],
        format_func={
            "mlm": "masked LM (TAPT: trains the MLM head the prompt heads read)",
            "simcse": "SimCSE (the encoder alone: for the heads that read a pooled vector)",
        }.get,
        horizontal=True,
        help=help_of(AdaptOptions, "objective"),
    )
    c1, c2 = st.columns([1, 3], vertical_alignment="bottom")
    epochs = int(
        c1.number_input(
            "Epochs",
            1,
            100,
            default_of(AdaptOptions, "epochs"),
            help=help_of(AdaptOptions, "epochs"),
        )
    )
    out = studio_ui.backbones_dir() / adapted_folder_name(dataset.id, model, epochs, objective)
    options = AdaptOptions(out=str(out), epochs=epochs, objective=objective)
    done = [
        record
        for _, record in adapted_backbones(studio_ui.backbones_dir())
        if record["adapted_from"]["name"] == model
    ]
    estimate = studio_ui.adapt_estimate(dataset, options, done)
    c2.caption(
        f"Adapting **{studio_ui.md(model)}** for {epochs} epoch(s): "
        f"{estimate['text']} here (basis: {estimate['basis']})."
    )
    if out.exists():
        st.caption(f"`{out.name}` exists already: choose it below, or another number of epochs.")
    elif st.button("Adapt", type="primary"):
        request = AdaptRequest(data=studio_ui.current_choice(), options=options, model=model)
        job = studio_ui.launch_adapt(
            request,
            f"adapt {model} to {dataset.id} ({objective}, {epochs} ep)",
            estimate["seconds"],
        )
        if job is not None:
            st.toast(f"Launched job {job.id}")
    adapt_jobs()
    found = adapted_backbones(studio_ui.backbones_dir())
    for path, record in found:
        left, right = st.columns([4, 1], vertical_alignment="center")
        left.caption(studio_ui.adapted_line(record))
        if str(path) == model:
            right.caption("in use")
        elif right.button("Use it", key=f"use-{path.name}"):
            st.session_state["model"] = str(path)
            st.rerun()


@st.fragment(run_every=2.0)
def adapt_jobs() -> None:
    for job in list_jobs(studio_ui.store(), "adapt")[:3]:
        status = job.status
        if status == "running":
            studio_ui.job_progress(job, job.label)
        elif status == "failed":
            st.error(f"{studio_ui.md(job.label)}: {studio_ui.md(job.error)}")


adapt_section()
