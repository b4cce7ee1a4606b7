"""The Data page's unlabelled texts: a pool kept beside the data (as it came: the job that scores
it reads it, never the page), the texts to suggest from it (a background job:
``glee_core.pool.suggest``), then labelling them (``labelling``) and learning from the rest
(``learning``)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace
from pathlib import Path

import streamlit as st

from glee_core.core.errors import GleeError, disk_message
from glee_core.core.files import write_atomic
from glee_core.models.requests import SuggestRequest
from glee_core.pool.labelling import LabellingSession
from glee_core.pool.options import SuggestOptions
from glee_core.pool.strategies import QUERY_STRATEGIES

from .access import policy, workspace
from .choice import choose_dataset, current_choice, current_model
from .jobs import last_failure, newest_job, work_button
from .labelling import labelling_session
from .learning import self_training
from .stores import kept_pools, store
from .text import code, md

POOL_MB = 50  # a pool file the uploader takes (the public mode's upload limit is smaller)


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
    labelling_session(session, dataset)
