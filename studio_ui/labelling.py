"""Labelling the suggested texts in the app: each with one click (or key) for its class, another
class, none of these or skip, every answer appended to the session's log as it is given
(``glee_core.pool.labelling``), and adding them to the data as a ``+added-`` variant."""

from __future__ import annotations

import secrets
from dataclasses import replace
from pathlib import Path

import pandas as pd
import streamlit as st

from glee_core.core.errors import GleeError, disk_message
from glee_core.core.files import write_atomic
from glee_core.pool.files import NONE_OF_THESE
from glee_core.pool.labelling import SKIPPED, LabellingSession
from glee_core.runs.store import slug
from glee_core.runs.tables import spreadsheet_csv

from .access import policy, workspace
from .choice import choose_dataset, current_choice
from .stores import all_runs, store
from .text import code, md

SHOWN = 20  # unanswered suggestions shown at once (each is a row of buttons)


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
    frame = session.labelled().assign(strategy=session.strategy)  # what picked them
    choice = current_choice()
    added = choice.add
    try:  # a later round: this version's labelled texts and the new ones, one file
        if added:  # a text answered again keeps its newest answer, once
            before = pd.read_csv(added, dtype=str, keep_default_na=False)
            frame = pd.concat([before, frame.astype(str)], ignore_index=True)
            frame = frame.drop_duplicates("text", keep="last", ignore_index=True)
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


def head_name(run_id: str) -> str:
    """The head that scored a pool, as a person names it (its method and what it read), from
    its run among this session's runs (read once a change); else the run's id."""
    run = next((r for r in all_runs(report=False) if r.run_id == run_id), None)
    if run is None:
        return f"the head of run {code(run_id)}"
    reads = "" if run.reads == "[MASK]" else f" ({run.reads})"
    return f"the head `{run.method}`{reads}, seed {run.seed}"


def labelling_session(session: LabellingSession, dataset) -> None:
    """The session's suggestions to answer, what is answered (and by another tab), the labelled
    texts to download, and the button that adds them to the data."""
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
