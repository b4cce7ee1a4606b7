"""The Data page's unlabelled texts: a pool kept beside the data, the texts to label next
(a background job: ``glee_core.pool.suggest``), labelling them here (every answer appended to
the session's log as it is given: ``glee_core.pool.labelling``), and adding them to the data as
a ``+added-`` variant."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import replace
from pathlib import Path

import pandas as pd
import streamlit as st

from glee_core.core.errors import GleeError, disk_message
from glee_core.core.files import write_atomic
from glee_core.models.requests import SuggestRequest
from glee_core.pool.files import NONE_OF_THESE
from glee_core.pool.labelling import SKIPPED, LabellingSession
from glee_core.pool.options import SuggestOptions
from glee_core.pool.strategies import QUERY_STRATEGIES
from glee_core.runs.store import slug
from glee_core.runs.tables import spreadsheet_csv

from .access import policy, workspace
from .choice import choose_dataset, current_choice, current_model, load_options
from .jobs import last_failure, newest_job, work_button
from .stores import all_runs, kept_pools, quick_compare_runs, recommendation_of, store
from .text import code, md

POOL_MB = 50  # a pool file the uploader takes (the public mode's upload limit is smaller)
SHOWN = 20  # unanswered suggestions shown at once (each is a row of buttons)


def keep_pool(uploaded) -> Path | None:
    """The uploaded pool kept in the store (the visitor's workspace in public mode, within its
    limits) as it came: it is read as a table by the job that scores it, never in this page (a
    10 MB pool must not hold the web process). A file without a text (empty, a byte-order mark
    alone) is refused here; None after saying why."""
    rules = policy()
    data = uploaded.getvalue()
    if not data.removeprefix(b"\xef\xbb\xbf").strip():
        st.error(
            f"{md(uploaded.name)} holds no text: give a CSV with a text column, or a .txt "
            "file of one text a line."
        )
        return None
    stem = re.sub(r"[^A-Za-z0-9_-]+", "-", Path(uploaded.name).stem)[:40] or "pool"
    suffix = ".txt" if uploaded.name.lower().endswith(".txt") else ".csv"
    name = f"{stem}-{hashlib.sha256(data).hexdigest()[:8]}.pool{suffix}"
    try:
        if rules.public:
            workspace(create=True).check_upload(rules, len(data))
        path = write_atomic(store().labelling_dir / name, data)  # the workspace's store
    except GleeError as exc:
        st.error(md(exc))
        return None
    except OSError as exc:
        st.error(f"The pool could not be kept: {md(disk_message(exc))}")
        return None
    return path


def suggest_request(dataset, pool_path: Path, n: int, strategy: str) -> SuggestRequest:
    """The job that scores the pool and keeps its suggestions as the dataset's labelling
    session (the answers already given to texts suggested again kept)."""
    return SuggestRequest(
        current_choice(),
        SuggestOptions(pool=str(pool_path), out="-", n=n, strategy=strategy),
        current_model(),
        session=True,
    )


def suggestion_note(request) -> str | None:
    """What the newest suggestion of ``request`` said once it finished (its strategy, the head
    that scored, the duplicates left out), or None."""
    job = newest_job("suggest", request)
    result = job.result if job is not None and job.status == "done" else None
    return result.get("summary") if isinstance(result, dict) else None


def tab_id() -> str:
    """This browser tab's id: who gave an answer (another tab's answers are said so)."""
    return st.session_state.setdefault("labelling-tab", secrets.token_hex(4))


def answer_rows(session: LabellingSession, dataset) -> None:
    """The unanswered suggestions, grouped by predicted class, tail first (its rarest class
    first): each with its text and one click for its class, another class, none of these or
    skip; every answer is written at once."""
    head, tail = dataset.head_tail()
    counts = dataset.class_counts("train").to_dict()
    order = sorted(dataset.classes, key=lambda c: (c not in tail, counts.get(c, 0), c))
    pending = [r for r in session.rows if str(int(r["pool_row"])) not in session.answers]
    pending.sort(
        key=lambda r: (
            order.index(r["predicted"]) if r["predicted"] in order else len(order),
            r["rank"],
        )
    )

    def keep(pool_row: int, label: str) -> None:
        try:
            session.answer(store(), pool_row, label, dataset.classes, by=tab_id())
        except GleeError as exc:  # a class the data no longer has, a row replaced meanwhile
            st.session_state["labelling-error"] = str(exc)
        except OSError as exc:
            st.session_state["labelling-error"] = disk_message(exc)

    shown_class = None
    for number, row in enumerate(pending[:SHOWN]):
        first = number == 0  # the keyboard answers the first one (Enter, N, S, a class's key)
        pool_row, predicted = int(row["pool_row"]), row["predicted"]
        if predicted != shown_class:
            shown_class = predicted
            group = "tail" if predicted in tail else "head"
            st.markdown(
                f"**Predicted {md(predicted)}** ({group}, {counts.get(predicted, 0)} "
                "training texts)"
            )
        with st.container(border=True):
            st.markdown(md(str(row["text"])[:1000]))
            yes, other, none, skip = st.columns([2, 3, 1.3, 1], vertical_alignment="center")
            if predicted in dataset.classes:  # a session of other data may predict another
                yes.button(
                    f"{md(predicted)} ({float(row.get('confidence', 0.0)):.0%})",
                    key=f"yes-{pool_row}",
                    help="Yes: this text is of the predicted class" + (" (Enter)" if first else ""),
                    type="primary",
                    on_click=keep,
                    args=(pool_row, predicted),
                    shortcut="Enter" if first else None,
                )
            other.selectbox(
                "Another class",
                [c for c in dataset.classes if c != predicted],
                index=None,
                key=f"other-{pool_row}",
                placeholder="Another class …",
                label_visibility="collapsed",
                on_change=lambda r=pool_row: keep(r, st.session_state[f"other-{r}"]),
            )
            none.button(
                "None of these",
                key=f"none-{pool_row}",
                on_click=keep,
                args=(pool_row, NONE_OF_THESE),
                help="It belongs to no class of this dataset: not added",
                shortcut="N" if first else None,
            )
            skip.button(
                "Skip",
                key=f"skip-{pool_row}",
                on_click=keep,
                args=(pool_row, SKIPPED),
                help="Not now: never added, asked again after a new suggestion",
                shortcut="S" if first else None,
            )
            if first:
                class_keys(pool_row, order, keep)
    if len(pending) > SHOWN:
        st.caption(f"{len(pending) - SHOWN} more after these.")


# a class's key: digits, then letters; C and R are Streamlit's, N and S answer "none" and "skip"
CLASS_KEYS = [*"1234567890", *(k for k in "ABDEFGHIJKLMOPQTUVWXYZ")]


def class_keys(pool_row: int, order: list[str], keep) -> None:
    """The first suggestion's classes, one key each (tail first, as the groups are): a row of
    small buttons, each showing its key; the classes past the keys are in the "Another class"
    list."""
    with st.container(horizontal=True, gap="small"):
        for key, name in zip(CLASS_KEYS, order, strict=False):
            st.button(
                md(name),  # Streamlit shows the key beside it
                key=f"key-{pool_row}-{key}",
                on_click=keep,
                args=(pool_row, name),
                shortcut=key,
                type="tertiary",
            )
    more = len(order) - len(CLASS_KEYS)
    st.caption(
        "Keys answer this text: Enter its predicted class, N none of these, S skip, or a "
        "class's key" + (f" ({more} classes past the keys: the list)." if more > 0 else ".")
    )


def add_to_data(session: LabellingSession) -> None:
    """Write the labelled texts beside the session and choose the dataset with them added (a
    ``+added-`` variant: Home's compare then offers itself on it)."""
    frame = session.labelled()
    choice = current_choice()
    added = choice.add
    try:  # a later round: this version's labelled texts and the new ones, one file
        if added:
            before = pd.read_csv(added, dtype=str, keep_default_na=False)
            frame = pd.concat([before, frame.astype(str)], ignore_index=True)
    except (OSError, ValueError) as exc:
        st.error(f"Not added: the texts added before cannot be read ({md(exc)})")
        return
    labels = frame["label"].astype(str).str.strip()
    count = int((labels.ne("") & labels.ne(NONE_OF_THESE)).sum())
    path = store().labelling_dir / (
        f"{slug(choice.dataset)}-{Path(session.pool).stem}-labelled-{count}.csv"
    )
    try:
        if policy().public:
            workspace(create=True).check_disk(policy(), len(frame.to_csv(index=False)))
        write_atomic(path, frame.to_csv(index=False))
        choice = replace(choice, add=str(path))
        choice.load()  # its errors said before it is chosen
    except GleeError as exc:
        st.error(f"Not added: {md(exc)}")
        return
    except OSError as exc:
        st.error(f"Not added: {md(disk_message(exc))}")
        return
    choose_dataset(choice)
    st.rerun()


def unlabelled_texts_section(dataset) -> None:
    """The section: keep a pool, suggest what to label, label, add."""
    st.subheader("Unlabelled texts: what to label next")
    st.caption(
        "Give the texts you have not labelled (a CSV with a text column, or a .txt file "
        "of one text a line): the recommended quick head scores them and a strategy "
        "picks the ones to label next - by default those most likely to be of the "
        "rarest classes, where a label pays most. Label them here; every answer is saved "
        "at once. Then add them to the data: a new version of it (its id ends in "
        "+added-…), which Home compares with the data as it was. The command line's "
        "`python -m glee_core suggest` and `train --add` do the same."
    )
    rules = policy()
    if rules.read_only:
        st.caption("Keeping texts writes files; it is switched off on this deployment (read-only).")
        return
    choice = current_choice()
    if choice.add:  # a round done: the next suggests from the texts still unlabelled
        st.info(
            f"This dataset has pool texts you labelled added to its training split "
            f"({code(Path(choice.add).name)}). Home compares it with the data as it was. "
            "Suggest again below for another round (the texts added are left out; adding "
            "keeps them), or learn from the rest with them."
        )
        if st.button("Back to the data without them"):
            choose_dataset(replace(choice, add=None))
            st.rerun()
    limit = max(1, -(-rules.upload_bytes // 2**20)) if rules.public else POOL_MB
    uploaded = st.file_uploader(
        f"Unlabelled texts (CSV or TXT, up to {limit} MB)",
        type=["csv", "tsv", "txt"],
        key=f"pool-upload-{dataset.id}",
        max_upload_size=limit,
    )
    if uploaded is not None and st.session_state.get("pool-kept-id") != uploaded.file_id:
        kept = keep_pool(uploaded)
        # marked after: a rerun that cut this one short (a job finishing) keeps it again
        st.session_state["pool-kept-id"] = uploaded.file_id  # refused or kept: said once
        if kept is not None:
            st.session_state["pool"] = str(kept)
    pools = kept_pools()
    if not pools:
        return
    names = {str(p): re.sub(r"-[0-9a-f]{8}\.pool\.", ".", p.name) for p in pools}
    chosen = st.session_state.get("pool")
    pool = Path(
        st.selectbox(
            "Pool",
            list(names),
            format_func=names.get,
            index=list(names).index(chosen) if chosen in names else 0,
        )
    )
    left, middle, right = st.columns([1, 2, 2], vertical_alignment="bottom")
    n = left.number_input("Texts to suggest", 5, 500, 20, 5)
    strategy = middle.selectbox(
        "Strategy", list(QUERY_STRATEGIES), format_func=lambda s: f"{s}: {QUERY_STRATEGIES[s].help}"
    )
    session_path = LabellingSession.path_for(store(), dataset.id, str(pool))
    session = LabellingSession.read(session_path)
    request = suggest_request(dataset, pool, int(n), strategy)
    with right:
        work_button(
            request,
            "Suggest texts to label" if session is None else "Suggest again",
            key="suggest",
            primary=session is None,
            dataset=dataset,
        )
    if error := last_failure("suggest", request):
        st.error(f"The suggestions failed: {md(error)}")
    elif note := suggestion_note(request):
        st.caption(md(note))
    self_training(dataset, pool)
    if session is None:
        return
    if error := st.session_state.pop("labelling-error", None):
        st.error(f"An answer could not be saved: {md(error)}")
    others = {k for k, by in session.answered_by.items() if by and by != tab_id()}
    if others:
        st.info(
            f"{len(others)} of these answers came from another tab or browser (the newest "
            "answer for a text counts; every answer is kept)."
        )
    answered = len(session.answers)
    st.caption(
        f"{answered} of {len(session.rows)} answered; {session.to_add} to add "
        f"(strategy `{session.strategy}`, {head_name(session.run_id)})."
    )
    answer_rows(session, dataset)
    left, right = st.columns([1, 1])
    left.download_button(
        "Download the labelled texts (CSV)",
        spreadsheet_csv(session.labelled()),
        f"{slug(dataset.id)}-labelled.csv",
        "text/csv",
        help="suggest's CSV with its label column filled: python -m glee_core train --add FILE",
    )
    if session.to_add and right.button(f"Add the {session.to_add} labelled texts", type="primary"):
        add_to_data(session)


def head_name(run_id: str) -> str:
    """The head that scored a pool, as a person names it (its method and what it read), from
    its run among this session's runs (read once a change); else the run's id."""
    run = next((r for r in all_runs(report=False) if r.run_id == run_id), None)
    if run is None:
        return f"the head of run {code(run_id)}"
    reads = "" if run.reads == "[MASK]" else f" ({run.reads})"
    return f"the head `{run.method}`{reads}, seed {run.seed}"


def self_training(dataset, pool: Path) -> None:
    """Learning from the pool with no label given: a quick compare of every head on the data
    with the pool's pseudo-labels, kept unless cross-validation on the labelled texts says they
    cost over 2 points (``train --pool --self-train auto``); Home then shows what it did.
    Once the data has a quick compare, its recommended head can be fine-tuned the same way."""
    from glee_core.models.config import TrainConfig  # noqa: PLC0415 (the engine's request types)
    from glee_core.models.methods import METHODS  # noqa: PLC0415 (the engine's request types)

    self_training_button(
        dataset,
        pool,
        list(METHODS),
        TrainConfig(mode="frozen"),
        "quick compare",
        "Learn from the rest: a quick compare with self-training",
    )
    head = finetunable_head(dataset)
    if head is not None:
        self_training_button(
            dataset,
            pool,
            [head],
            TrainConfig(mode="finetune"),
            "fine-tune",
            f"Fine-tune {head} with self-training",
        )


def finetunable_head(dataset) -> str | None:
    """The head the data's quick compare recommends fine-tuning (Home's "Fine-tune ..."
    step), or None before a quick compare."""
    runs = quick_compare_runs(dataset.id, current_model())
    rec = recommendation_of(runs) if runs else None
    step = rec.step("finetune-one") if rec is not None else None
    return step.heads[0] if step is not None else None


def self_training_button(dataset, pool: Path, methods, config, what: str, label: str) -> None:
    """One launch of ``methods`` with ``config`` on the data with the pool's pseudo-labels
    (``--self-train auto``): its button with the estimate, or its bar while it runs."""
    from glee_core.models.requests import TrainRequest  # noqa: PLC0415
    from glee_core.pool.options import SelfTrainOptions  # noqa: PLC0415

    request = TrainRequest(
        data=current_choice(),
        methods=methods,
        seeds=[1],
        model=current_model(),
        config=config,
        self_train=SelfTrainOptions(pool=str(pool), self_train="auto"),
    )
    work_button(
        request,
        f"{label} (and the pool's pass)",
        key=f"self-train-{config.mode}-{pool.name}",
        primary=False,
        dataset=dataset,
        help="Pseudo-labels of the pool (each class at most its labelled share) join the "
        "training texts - unless cross-validation on your labelled texts says they cost "
        "over 2 macro-F1 points (the job's log says which way). Measured at 10% labelled: "
        "tail F1 +4.6 / +5.5 / +2.1 on the demo / r8-1500 / r52-lt (BENCHMARKS.md).",
    )


def gain_table(
    base_runs,
    variant_runs,
    counts: dict,
    gained: dict,
    tail: list[str],
    what: str,
    suggested: bool = False,
) -> None:
    """Per class, the texts a variant added (``gained``) and the F1 before and after: each
    dataset's recommended quick-mode head on the same test texts, tail as the data was.
    ``suggested``: the texts were suggested and labelled (not pseudo-labels): what random ones
    would have been expected to give is said beside the gain."""
    from glee_core.pool.labelling import before_after, random_share  # noqa: PLC0415 (numpy)

    added = {c: n for c, n in gained.items() if n}
    st.caption(
        f"{sum(added.values())} {what} added: "
        + ", ".join(f"{md(c)} +{n}" for c, n in sorted(added.items(), key=lambda kv: -kv[1]))
        + "."
    )
    result = before_after(base_runs, variant_runs, counts, gained, tail)
    if result is None:
        return
    low, high = result.tail_f1, result.f1
    spreads = [
        f" ± {spread:.1f} over {n} seeds" if spread is not None else " (one seed)"
        for spread, n in zip(result.tail_spread, result.seeds, strict=True)
    ]
    if None in result.tail_spread:
        sure = (
            "one seed moves these by a point or two: train more seeds of both (the seeds "
            "step) to see the spread"
        )
    elif abs(low[1] - low[0]) <= max(result.tail_spread):
        sure = "the change is inside the seeds' spread: not a gain the data shows yet"
    else:
        sure = "the change is beyond the seeds' spread"
    st.markdown(
        f"Tail F1 **{low[0]:.1f}{spreads[0]} → {low[1]:.1f}{spreads[1]}** "
        f"({low[1] - low[0]:+.1f}), macro-F1 {high[0]:.1f} → {high[1]:.1f} "
        f"({high[1] - high[0]:+.1f}): {code(result.method_before)} before, "
        f"{code(result.method_after)} after, each the quick compare's recommendation, on the "
        f"same test texts; {sure}."
    )
    gain = low[1] - low[0]
    backtest = random_share(sum(added.values())) if suggested and gain > 0 else None
    if backtest is not None:
        st.caption(
            f"Texts picked at random would have been expected to give about "
            f"+{backtest.expected(gain):.1f} of this +{gain:.1f}: in the backtest "
            f"({', '.join(backtest.sets)}; {backtest.seeds} seeds; 10% of every class labelled, "
            f"{backtest.added} texts added in rounds of 50) random texts gained "
            f"{backtest.share:.0%} of the tail F1 the suggested ones gained "
            f"(`{backtest.command}`)."
        )
    frame = pd.DataFrame(result.rows).sort_values(["group", "added"], ascending=[False, False])
    st.dataframe(
        frame,
        hide_index=True,
        column_config={
            "F1 before": st.column_config.NumberColumn(format="%.1f"),
            "F1 after": st.column_config.NumberColumn(format="%.1f"),
        },
    )


def added_panel(dataset) -> None:
    """Home, on a dataset with labelled pool texts added: what they did (:func:`gain_table`),
    once both have a quick compare; on the data itself, what self-training did where a quick
    compare with it ran (:func:`pseudo_panel`)."""
    choice = current_choice()
    if dataset is None:
        return
    if not choice.add:
        pseudo_panel(dataset)
        return
    try:
        base = load_options(replace(choice, add=None))
    except GleeError:
        return
    model = current_model()
    st.subheader("What the labelled texts did")
    before, after = quick_compare_runs(base.id, model), quick_compare_runs(dataset.id, model)
    counts = base.class_counts("train").to_dict()
    gained = {c: int(n) - counts.get(c, 0) for c, n in dataset.class_counts("train").items()}
    if not before or not after:
        missing = "the data as it was" if not before else "the data with them"
        added = sum(n for n in gained.values() if n)
        st.caption(
            f"{added} labelled text(s) added. Run the quick compare on {missing} too: "
            "the gain per class shows here once both have one."
        )
        return
    tail = base.head_tail()[1]
    gain_table(before, after, counts, gained, tail, "labelled text(s)", suggested=True)
    split_moved(base.head_tail(), dataset.head_tail())


def split_moved(split: tuple[list, list], own: tuple[list, list]) -> None:
    """Where the texts added moved a class across the head/tail line (``own``: the version's
    head and tail, by its training counts; ``split``: the data's), say so: the before/after
    above stays over the data's own split."""
    (head, tail), (own_head, own_tail) = split, own
    if set(own_tail) == set(tail):
        return
    moved = [f"{md(c)} (tail → head)" for c in tail if c in own_head]
    moved += [f"{md(c)} (head → tail)" for c in head if c in own_tail]
    st.caption(
        f"With the texts added this version's own split is {len(own_head)} head / "
        f"{len(own_tail)} tail classes (the data's: {len(head)} / {len(tail)}): "
        + ", ".join(moved)
        + ". The tail F1 above stays over the data's own tail classes, so before and after "
        "are over the same classes; the Results page scores this version by its own split."
    )


def pseudo_panel(dataset) -> None:
    """Home: where a quick compare with self-training ran on this data (its runs are a
    ``+pseudo-`` variant's), what the pseudo-labels did against the data's own compare."""
    from glee_core.pool.files import PSEUDO  # noqa: PLC0415 (the pool's engine: torch)

    model = current_model()
    variants = sorted(
        {r.dataset for r in all_runs(report=False) if r.dataset.startswith(dataset.id + PSEUDO)}
    )
    before = quick_compare_runs(dataset.id, model)
    if not variants or not before:
        return
    after = quick_compare_runs(variants[-1], model)
    if not after:
        return
    st.subheader("What self-training did")
    counts = dataset.class_counts("train").to_dict()
    trained = after[0].record.dataset.class_counts
    gained = {c: int(trained.get(c, 0)) - counts.get(c, 0) for c in counts}
    gain_table(before, after, counts, gained, dataset.head_tail()[1], "pseudo-label(s)")
    version = after[0].record.dataset
    split_moved(dataset.head_tail(), (version.head_classes, version.tail_classes))
    for said in after[0].record.dataset.warnings:  # what the rule kept, and why
        if said.startswith("self-training kept"):
            st.caption(md(said[0].upper() + said[1:]) + ".")
    st.caption(
        f"The runs with the pseudo-labels are {code(variants[-1])}'s (Results, with that "
        "dataset chosen on the Data page, has them all)."
    )
