"""Shared pieces of the Streamlit face: where things live, the chosen dataset, cached loads.

Pages only read runs, draw them with ``glee_core.views.charts``, and start work through
``glee_core``; everything they show is computed by the engine and stored with the runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from contextlib import contextmanager
from dataclasses import asdict, replace
from pathlib import Path

import streamlit as st
from filelock import FileLock
from streamlit.runtime.pages_manager import PagesManager  # the pages/ folder mode's flag

from glee_core.studio import (
    COOKIE,
    METHODS,
    PAPER_DATASETS,
    RARE_KEPT,
    SHARE_FILE,
    DataOptions,
    GleeError,
    LimitReached,
    Policy,
    RunStore,
    SlotQueue,
    Workspace,
    adapted_record,
    dataset_name,
    disk_message,
    environment,
    expire,
    launch_job,
    launch_training,
    list_jobs,
    list_uploads,
    literal,
    method_label,
    registry_order,
    size_text,
    source_of,
    unfinished_jobs,
    untrained_head_line,
    untrained_head_note,
    write_json_atomic,
)

DEMO = DataOptions(dataset="demo")
SHARE_PARAM = "share"  # public mode: ?share=TOKEN opens another visitor's runs, read-only
CHOICE_FILE = "studio-choice.json"  # the dataset last chosen, in the workspace (or the store)
LEGACY_WORKSPACE_PARAM = "ws"  # links of before the cookie carried the key: ignored, dropped
_EXPIRED_AT = [0.0]  # when workspaces were last swept for expiry (at most every 10 minutes)


def md(text) -> str:
    """User text (a class, file or dataset name, a message quoting one) made literal for the
    places Streamlit renders Markdown (``glee_core.core.markdown.literal``): a class named
    ``[Sign in](https://evil.example)`` reads as itself, not as a link."""
    return literal(text)


def policy() -> Policy:
    """What this deployment allows (public mode, read-only, per-session limits)."""
    return Policy.from_environment()


def workspace(create: bool = False) -> Workspace | None:
    """Public mode: this browser's workspace, None otherwise, or while it has none: a visit that
    only looks writes nothing, so visits cannot fill the machine's workspaces. It is made on the
    first write (``create``: an upload, a launch, scoring a file); a full machine, or too many
    made a minute, raise ``LimitReached`` with a plain message. The key lives in the session and
    in a cookie this browser holds (:func:`remember_workspace`), never in the URL: a link cannot
    hand anyone a workspace to write in. An old ``?ws=`` link opens nothing and is dropped from
    the address bar."""
    rules = policy()
    if not rules.public:
        return None
    if time.time() - _EXPIRED_AT[0] > 600:
        _EXPIRED_AT[0] = time.time()
        expire(ttl_seconds=rules.ttl_seconds)
    if LEGACY_WORKSPACE_PARAM in st.query_params:
        del st.query_params[LEGACY_WORKSPACE_PARAM]
    key = st.session_state.get("workspace_key") or st.context.cookies.get(COOKIE)
    found = Workspace.open(key)
    if found is None and create:
        found = Workspace.create(limit=rules.max_workspaces,
                                 per_minute=rules.workspaces_per_minute)
    if found is None:
        return None
    st.session_state["workspace_key"] = found.key
    if time.time() - found.last_used > 60:
        found.touch()
    return found


NOBODY = ".none"  # public mode before a visitor's first write: an empty store, never written


def own_store_or_nothing() -> RunStore:
    """Public mode without a workspace yet: an empty store in a folder nobody creates."""
    return RunStore(environment.workspaces_dir() / NOBODY / "runs")


# Sets the workspace cookie in this browser. The key comes as the mount's data (over the app's
# socket), so it is never written into the page, where a saved page or a screenshot of the
# source could carry it off. Our own code, never user text.
_SET_COOKIE = st.components.v2.component("glee_workspace_cookie", js="""
export default function({ data }) {
  const secure = location.protocol === "https:"
    ? "SameSite=None; Secure; Partitioned" : "SameSite=Lax";
  document.cookie = `${data.name}=${data.value}; path=/; max-age=${data.max_age}; ${secure}`;
}
""")


def remember_workspace(own: Workspace, rules: Policy) -> None:
    """Set this browser's workspace cookie when it did not hold the key as this session began
    (a first visit): a reload, or another tab, then opens the same workspace. On https the
    cookie is partitioned, so it also works inside the Space's iframe. It is set on every run
    of such a session, not once: a page switch can unmount the setter before the browser ran it
    (seen on a loaded machine), and setting the cookie twice is harmless."""
    if own.key == st.context.cookies.get(COOKIE):  # the cookies the session's connection sent
        return
    _SET_COOKIE(data={"name": COOKIE, "value": own.key, "max_age": int(rules.ttl_seconds)},
                key="workspace-cookie")


def shared_workspace() -> Workspace | None:
    """A workspace another visitor shared read-only (``?share=TOKEN``), or None."""
    if not policy().public:
        return None
    shared = Workspace.open_shared(st.query_params.get(SHARE_PARAM))
    own_key = st.session_state.get("workspace_key")
    return shared if shared is not None and shared.key != own_key else None


def shared_run_ids() -> set[str]:
    """The runs this session sees through another visitor's share link: their scores and charts
    are shown, never the texts in them (the sharer's data)."""
    shared = shared_workspace()
    return {run.run_id for run in cached_runs(shared.store)[0]} if shared is not None else set()


def store() -> RunStore:
    """Where this session's runs and jobs go: its workspace in public mode (an empty store
    before its first write), else the store."""
    own = workspace()
    if own is not None:
        return own.store
    return own_store_or_nothing() if policy().public else shared_store()


def launch(request, label: str, estimate: dict | None = None):
    """Launch a training job for this session, within its limits; None (after saying why) when
    a limit or read-only mode refuses it. ``estimate``: the launch's time estimate (public mode
    caps it; computed here when not given)."""
    rules = policy()
    if rules.read_only:
        st.error("Training is switched off on this deployment (read-only).")
        return None
    try:
        own = workspace(create=True)
    except LimitReached as exc:
        st.error(md(str(exc)))
        return None
    if own is None:  # one's own machine: no limits
        return launch_training(store(), request, label=label)
    if request.model not in rules.models:
        st.error(f"Backbone {md(request.model)} is not offered here; choose one of "
                 f"{md(', '.join(rules.models))}.")
        return None
    if estimate is None:
        try:
            estimate = time_estimate(load_options(request.data), request.methods,
                                     request.seeds, request.config, request.model)
        except GleeError as exc:
            st.error(md(str(exc)))
            return None
    seconds = estimate["seconds"]
    visitor = visitor_id()
    # every workspace queues for the machine's training slots, kept in the shared store; one
    # job of a session trains at a time; the disk limit holds while it trains
    env = {"GLEE_SLOTS_DIR": str(shared_store().locks_dir),
           "GLEE_SESSION_SLOT": str(own.session_lock),
           "GLEE_QUOTA_DIR": str(own.path), "GLEE_QUOTA_MB": str(rules.disk_bytes / 2**20)}
    try:
        # the checks and the launch under one lock, across the server's sessions and tabs:
        # three tabs clicking at once cannot pass the same check before one's job is recorded
        with launch_lock():
            mine = [job for job in list_jobs(own.store) if job.running]
            own.check_launch(rules, len(mine))
            check_machine(rules, visitor)
            rules.check_job(len(request.methods) * len(request.seeds), seconds,
                            sum(job.info.get("estimate_seconds", 0.0) for job in mine))
            return launch_training(own.store, request, label=label, env=env,
                                   estimate_seconds=seconds, visitor=visitor)
    except (LimitReached, GleeError) as exc:
        st.error(md(str(exc)))
        return None
    except OSError as exc:
        st.error(f"The job could not be started: {md(disk_message(exc))}.")
        return None


def visitor_id() -> str:
    """Who launches, as far as the server can tell without a cookie: the client's address
    (behind a Space's proxy, the first of X-Forwarded-For), hashed (no address is kept). A
    visitor who drops the cookie gets a new workspace, but the same id: the per-visitor limits
    hold."""
    forwarded = (st.context.headers.get("X-Forwarded-For") or "").split(",")[0].strip()
    address = forwarded or st.context.ip_address or "unknown"
    return hashlib.sha256(f"glee-visitor:{address}".encode()).hexdigest()[:16]


def check_machine(rules: Policy, visitor: str) -> None:
    """The machine's caps: its jobs training or waiting (every visitor's), and one visitor's
    share of them (their own limit, and at most half the machine's), however many workspaces
    they opened."""
    if unfinished_jobs() >= rules.max_jobs:
        raise LimitReached(f"This Space has {rules.max_jobs} jobs training or waiting, its "
                           "most: launch again in a few minutes.")
    theirs = unfinished_jobs(visitor=visitor)
    fair = min(rules.jobs + rules.queued, max(1, rules.max_jobs // 2))
    if theirs >= fair:
        raise LimitReached(f"You already have {theirs} job(s) training or waiting on this Space "
                           f"(from this address, in any tab or session); {fair} at once is "
                           "your share. Wait for one to finish, or stop one.")


@contextmanager
def launch_lock():
    """One launch at a time on this machine (a file lock: every server process, every tab)."""
    locks = shared_store().locks_dir
    locks.mkdir(parents=True, exist_ok=True)
    with FileLock(str(locks / "launch.lock"), timeout=60):
        yield


@contextmanager
def machine_turn(on_wait=None):
    """Public mode: hold one of the machine's training slots (in turn with every job, and with
    this session's own) while the page does heavy work; elsewhere, no waiting."""
    own = workspace(create=True)
    if own is None:
        yield
        return
    queue = SlotQueue(shared_store().locks_dir, environment.max_concurrent_runs(),
                      own.session_lock)
    with queue.slot(on_wait):
        yield


def shared_store() -> RunStore:
    """The owner's store (``GLEE_RUNS_DIR``); in public mode every visitor reads it, none
    writes it."""
    return RunStore(environment.runs_dir())


def stores() -> list[RunStore]:
    """Every store this session may read: its own, then (public mode) a workspace shared with
    it by a link (read-only), then the owner's."""
    own = store()
    if not policy().public:
        return [own]
    shared = shared_workspace()
    return [own, *([shared.store] if shared is not None else []), shared_store()]


def uploads_dir(create: bool = False):
    """Where this session's uploads are kept (``create``: to keep one, public mode makes the
    workspace first)."""
    own = workspace(create=create)
    if own is not None:
        return own.uploads_dir
    return environment.workspaces_dir() / NOBODY / "uploads" if policy().public \
        else environment.uploads_dir()


STORED_ONLY = "stored runs"  # a choice's label ending: a dataset known here only by its runs


def display_name(dataset_id: str) -> str:
    """A dataset as its user knows it: an upload by the file name it came as (``tickets.csv``,
    not ``upload:tickets-38b2aabc.csv``; a variant keeps its ending), anything else by its id."""
    for upload in list_uploads(uploads_dir()):
        spec = f"upload:{upload.path.name}"
        if dataset_id == spec or dataset_id.startswith(f"{spec}+"):
            return upload.original_name + dataset_id[len(spec):]
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
            choices[f"{dataset_id} (paper{where})"] = DataOptions(dataset=dataset_id,
                                                                  data_dir=str(data))
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
    return [d for d in PAPER_DATASETS if (data / d).is_dir()
            and not any((data / d / name).is_file() for name in ("train.tsv", "train.txt"))]


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
            write_json_atomic(path, {"dataset": options.dataset, "threshold": options.threshold,
                                     "keep_rare": options.keep_rare,
                                     "exclude": options.exclude})
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
    return found


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
            st.info(f"The texts of **{md(choice.dataset)}** are not here ({md(exc)}). Its "
                    f"{len(stored)} stored run(s) need none: see them on **Results**, "
                    "**Diagnostics**, **Predictions** and **Report**. Training and the "
                    "Playground need the texts.")
        else:
            st.error(f"Cannot load dataset {md(choice.dataset)}: {md(exc)}")
        return None


def current_dataset_id() -> str:
    """The id the current dataset's runs carry: the choice's, or with its rare classes kept in
    training (``keep_rare``), the loaded dataset's (``demo+rare``) when it loads."""
    choice = current_choice()
    if not choice.keep_rare:
        return choice.dataset
    try:
        return load_options(choice).id
    except GleeError:
        return choice.dataset


def current_model() -> str:
    return st.session_state.setdefault("model", environment.default_model())


def backbone_notice(model: str, methods: list[str] | None = None,
                    mlm_head_pretrained: bool | None = None, full: bool = False) -> None:
    """Say plainly when the MLM head the prompt / pt. LN methods rely on is untrained (known from
    a run's record, or, before any run, for the offline default backbone), where it matters: in
    one sentence where the user chooses, in ``full`` where the paper's effect is shown."""
    untrained = (not mlm_head_pretrained if mlm_head_pretrained is not None
                 else model == environment.AUTO_MODEL)
    relevant = [m for m in (methods or METHODS) if m in METHODS and METHODS[m].uses_mlm_head]
    if untrained and relevant:
        if full:
            st.warning(untrained_head_note(model, relevant), icon=":material/warning:")
        else:
            st.caption(untrained_head_line(model, relevant))
    adapted = adapted_record(model)
    if adapted:
        st.info(adapted_line(adapted), icon=":material/model_training:")


def adapted_line(record: dict) -> str:
    """One line on an adapted backbone: from what, on what, and its [MASK] accuracy."""
    before, after = record.get("held_out_before") or {}, record.get("held_out_after") or {}
    measured = (f"; held-out [MASK] top-1 {before['mask_top1']:.1%} → {after['mask_top1']:.1%}, "
                f"masked-LM loss {before['mlm_loss']:.2f} → {after['mlm_loss']:.2f}"
                if before.get("mask_top1") is not None and after.get("mask_top1") is not None
                else "")
    return (f"Adapted backbone: {md(record['adapted_from']['name'])} after "
            f"{record['options']['epochs']} epoch(s) of masked-LM training on "
            f"{md(dataset_name(record['dataset']['id']))}'s {record['dataset']['training_texts']}"
            f" training texts (its MLM head trained with it){measured}.")


def backbones_dir() -> Path:
    """Where the app keeps adapted backbones: in the run store, beside its runs."""
    return store().backbones_dir


def launch_adapt(request, label: str, seconds: float):
    """Launch an adaptation job (not offered to a public deployment's visitors: it writes a
    whole backbone)."""
    rules = policy()
    if rules.read_only or rules.public:
        st.error("Adapting a backbone is switched off on this deployment.")
        return None
    return launch_job(store(), "adapt", request, label=label, estimate_seconds=seconds)


# the app's pages, in the sidebar's order: (file in pages/, title, Material icon)
APP_PAGES = [("0_Home", "Home", "home"), ("1_Data", "Data", "bar_chart"),
             ("2_Train", "Train", "model_training"), ("3_Results", "Results", "table_chart"),
             ("4_Diagnostics", "Diagnostics", "troubleshoot"),
             ("5_Predictions", "Predictions", "search"),
             ("6_Playground", "Playground", "edit_note"),
             ("7_Report", "Report", "picture_as_pdf"), ("8_Paper", "Paper", "menu_book")]


def run_through_the_app() -> None:
    """Make sure the page runs inside ``app.py``'s navigation. When a page's own URL is the
    very first request a fresh server gets (a bookmark after a restart, a Space waking up),
    Streamlit runs the page as a pre-``st.navigation`` page of the ``pages/`` folder: no page
    config, no icons, "app" listed as a page. Streamlit drops that mode once ``st.navigation``
    has run; this drops it at once and reruns, so ``app.py`` lays the same page out. Only on a
    session's first run, which has no click to lose (Streamlit's AppTest restores the mode
    before every run of a test, and its clicks must reach the page)."""
    first_run = "studio_ran" not in st.session_state
    st.session_state["studio_ran"] = True
    if first_run and PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()


def sidebar() -> None:
    run_through_the_app()
    rules = policy()
    own = workspace()
    with st.sidebar:
        chosen = current_choice().dataset
        name = display_name(chosen)  # an upload's file name, and the id the CLI takes
        st.caption(f"Dataset: **{md(name)}**" + (f" ({md(chosen)})" if name != chosen else ""))
        st.caption(f"Backbone: **{md(current_model())}**")
        if rules.read_only:
            st.info("Read-only: this deployment shows its shipped runs; training and uploads are "
                    "switched off. Run Glee Studio yourself to train.")
        if not rules.public:
            st.caption(f"Runs: `{environment.runs_dir()}` · uploads: `{environment.uploads_dir()}`"
                       f" · paper data: `{environment.data_dir()}`")
        elif own is None:
            st.caption("Nothing of yours is kept here until you upload a file or launch a job: "
                       "then a private workspace is made for this browser.")
        else:
            remember_workspace(own, rules)
            shared = shared_workspace()
            if shared is not None:
                st.warning("You are viewing a **shared workspace, read-only**: its runs appear "
                           "beside yours on the Results, Diagnostics and Predictions pages. "
                           "What you upload or train stays in your own workspace.",
                           icon=":material/visibility:")
            workspace_panel(own, rules)


def workspace_panel(own: Workspace, rules: Policy) -> None:
    """Public mode's sidebar: what is private, the limits, the usage, a read-only link to
    share; delete what is yours (runs after a confirmation)."""
    with st.expander("Your workspace", expanded=False):
        st.caption(f"Your uploads and the runs you train are private to this browser (a cookie "
                   f"holds the workspace; the address bar never does). They are deleted after "
                   f"{rules.ttl_text} without use. The demo, the paper's datasets and the runs "
                   "shipped here are shared and read-only. A browser that blocks cookies starts "
                   "a new workspace on every reload.")
        st.caption(f"Limits: {rules.jobs} job(s) training and {rules.queued} waiting, "
                   f"{rules.job_runs} runs and {rules.job_seconds / 60:.0f} min (estimated) a "
                   f"launch, uploads up to {size_text(rules.upload_bytes)}, "
                   f"{size_text(rules.disk_bytes)} in all; used: {size_text(own.disk_bytes())}.")
        sharing = (own.path / SHARE_FILE).is_file()
        if st.toggle("Share my runs read-only", key="share-toggle", value=sharing,
                     help="A link that shows your runs' scores and charts (not your uploads, "
                          "nor the texts in them) to whoever opens it; they cannot upload, "
                          "train or delete in your workspace. Turning it off revokes the link."):
            st.code(f"?{SHARE_PARAM}={own.share_token()}", language=None)
            st.caption("Add this to the app's address to share your runs, read-only. Turning "
                       "the switch off revokes it; sharing again makes a new link.")
        elif sharing:
            own.revoke_share()
            st.caption("The share link is revoked: it opens nothing now.")
        for upload in list_uploads(own.uploads_dir):
            sure = st.checkbox(f"Yes, delete {md(upload.original_name)} for good",
                               key=f"del-sure-{upload.path.name}")
            if st.button(f"Delete upload {md(upload.original_name)}", disabled=not sure,
                         key=f"del-{upload.path.name}"):
                own.delete_upload(upload.path.name)
                st.rerun()
        mine, _ = cached_runs(own.store)
        if mine:
            sure = st.checkbox(f"Yes, delete my {len(mine)} run(s) for good", key="delete-sure")
            if st.button(f"Delete my {len(mine)} run(s)", key="delete-runs", disabled=not sure):
                for run in mine:
                    own.delete_run(run.run_id)
                st.rerun()


def duration(seconds: float) -> str:
    """``45 s``, ``3 min 20 s``, ``1 h 05 min``."""
    seconds = int(max(seconds, 0))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def job_progress(job, label: str | None = None) -> None:
    """A running job's bar: where it stands, the time it has run and the time left (from its
    launch estimate at first, then from its own pace: ``glee_core.core.events.time_left``)."""
    from glee_core.studio import time_left  # noqa: PLC0415 (the engine's, beside the bar)

    progress = job.progress()
    elapsed = time.time() - job.info.get("started", time.time())
    text = (f"{md(label)}: " if label else "") + progress.describe()
    if progress.loss is not None and job.command == "adapt":
        text += f" · loss {progress.loss:.3f}"
    text += f" · {duration(elapsed)} elapsed"
    left = time_left(progress.fraction, elapsed, job.info.get("estimate_seconds"))
    if left is not None:
        text += f" · about {duration(left)} left"
    st.progress(progress.fraction, text=text)


def store_state(root) -> tuple[int, int]:
    """What changes when a run lands in (or leaves) a store: its folder's modification time and
    entry count (a run lands by a rename into the folder)."""
    try:
        return os.stat(root).st_mtime_ns, len(os.listdir(root))
    except OSError:
        return 0, 0


@st.cache_resource(max_entries=16, show_spinner=False)
def _store_runs(root: str, state: tuple[int, int]):
    """A store's runs, read once per state of the store (pages re-render without re-reading
    thousands of run folders; a run landing changes the state and so the key)."""
    runs_store = RunStore(root)
    return runs_store.runs(), dict(runs_store.problems)


def cached_runs(runs_store: RunStore):
    """``(runs, problems)`` of a store, read once per state of the store."""
    root = str(runs_store.root)
    return _store_runs(root, store_state(root))


def all_runs(dataset_id: str | None = None, report: bool = True):
    """Finished runs (of a dataset) in every store this session may read, its own first; broken
    run folders are reported (``report``: in an expander here), not fatal."""
    runs, seen, problems = [], set(), {}
    for runs_store in stores():
        found, skipped = cached_runs(runs_store)
        for run in found:
            if (dataset_id is None or run.dataset == dataset_id) and run.run_id not in seen:
                seen.add(run.run_id)
                runs.append(run)
        problems.update(skipped)
    if problems and report:
        with st.expander(f"{len(problems)} unfinished or broken run folder(s) skipped"):
            for name, problem in problems.items():
                st.write(f"`{name}`: {md(problem)}")
    return runs


@st.cache_resource(show_spinner=False)
def device_kind() -> str:
    """``cuda`` or ``cpu``: where a launch here trains (imports torch once per server)."""
    from glee_core.studio import resolve_device  # noqa: PLC0415 (torch: not for every page)

    return resolve_device("auto").type


def time_estimate(dataset, methods: list[str], seeds: list[int], config,
                  model: str | None = None) -> dict:
    """The wall-time estimate of launching ``methods`` x ``seeds`` of ``config`` (a
    ``TrainConfig``; ``glee_core.runs.estimate``) with ``model`` (default: the current
    backbone), calibrated on the
    finished runs this session can read; the runs this session's store already holds are opened,
    not trained, and left out of it. Adds ``"text"`` ("about 3 min" / "about 40 s"), ``"runs"``
    (to train) and ``"stored"`` (already there)."""
    from glee_core.studio import (  # noqa: PLC0415 (heavy)
        estimate_parameters,
        estimate_seconds,
        get_method,
        plan_runs,
    )

    model = model or current_model()
    try:
        plan = plan_runs(dataset, [get_method(m) for m in methods], seeds, model, config)
    except GleeError:  # a method the mode refuses: the launch says so; estimate them all
        plan = None
    here = store()
    to_train = None if plan is None else unstored_jobs(here, plan)
    planned = len(methods) * len(seeds) if plan is None else len(plan)
    missing = planned if to_train is None else len(to_train)
    stored = planned - missing
    if to_train is not None and not missing:
        return {"seconds": 2.0, "per_run": 0.0, "runs": 0, "stored": stored,
                "text": "a few seconds", "basis": f"all {stored} run(s) are already stored"}
    passes = 2 if to_train is None or not config.frozen else uncached_passes(here, dataset,
                                                                             model, to_train)
    estimate = estimate_seconds(dataset, missing, config, model, estimate_parameters(model),
                                device_kind(), all_runs(report=False), feature_passes=passes,
                                lp_ft_stages=None if to_train is None or config.frozen
                                else len(unstored_stages(here, dataset, model, to_train)))
    basis = estimate["basis"] + (f"; {stored} of the runs already stored, not retrained"
                                 if stored else "")
    return {**estimate, "basis": basis, "runs": missing, "stored": stored,
            "text": about(estimate["seconds"])}


def unstored_jobs(here, plan) -> list:
    """The planned runs the store ``here`` does not hold finished (what a launch trains; the
    others it opens), judged by the store's cached listing of valid runs."""
    stored = {run.run_id for run in cached_runs(here)[0]}
    return [job for job in plan if job.run_id not in stored]


def unstored_stages(here, dataset, model: str, jobs) -> list:
    """The LP-FT heads (quick-mode runs) that fine-tuning ``jobs`` would still fit: those the
    store ``here`` does not hold (a quick compare stored them)."""
    from glee_core.studio import lp_ft_stage  # noqa: PLC0415 (heavy)

    if not jobs or not jobs[0].config.lp_ft:
        return []
    return unstored_jobs(here, [lp_ft_stage(job, dataset, model) for job in jobs])


def uncached_passes(here, dataset, model: str, jobs) -> int:
    """The feature passes a frozen launch of ``jobs`` (the runs it trains) still runs: one per
    input format whose features the store ``here`` has not cached."""
    from glee_core.studio import feature_file, model_fingerprint  # noqa: PLC0415

    formats = {job.spec.input_format: job.config for job in jobs}
    fingerprint = model_fingerprint(model)
    return sum(not feature_file(here.features_dir, dataset, fingerprint, fmt, cfg.max_length,
                                cfg.limit, cfg.limit_strategy).is_file()
               for fmt, cfg in formats.items())


def trainable_parameters(dataset, config) -> int:
    """About how many parameters a run of ``config`` trains on ``dataset`` with the current
    backbone (from its config alone: ``glee_core.models.backbone.estimate_trainable``)."""
    from glee_core.studio import estimate_trainable  # noqa: PLC0415 (transformers)

    resolved = config.resolved(dataset.max_length, dataset.batch_size)
    return estimate_trainable(current_model(), resolved, dataset.num_classes)


def about(seconds: float) -> str:
    """``about 3 min`` / ``about 40 s``."""
    return f"about {seconds / 60:.0f} min" if seconds >= 90 else f"about {seconds:.0f} s"


def adapt_estimate(dataset, options, measured: list[dict]) -> dict:
    """The wall-time estimate of adapting the current backbone (``glee_core.runs.estimate``), with
    ``"text"``."""
    from glee_core.studio import estimate_adapt_seconds, estimate_parameters  # noqa: PLC0415

    parameters = estimate_parameters(current_model(), mlm_positions=options.mlm_probability)
    estimate = estimate_adapt_seconds(dataset, options, parameters, device_kind(), measured)
    return {**estimate, "text": about(estimate["seconds"])}


def quick_compare_runs(dataset_id: str, model: str) -> list:
    """The frozen (quick compare) runs of a dataset and backbone: those of the protocol with the
    most runs, every pooling of it (the poolings are candidates of one compare)."""
    runs = [r for r in all_runs(dataset_id, report=False)
            if r.record.hyperparameters.frozen and r.record.model.name == model]
    protocols: dict[str, int] = {}
    for run in runs:
        key = replace(run.record.hyperparameters, pooling="cls", seed=1).protocol()
        protocols[key] = protocols.get(key, 0) + 1
    if not protocols:
        return []
    widest = max(protocols, key=protocols.get)
    return [r for r in runs
            if replace(r.record.hyperparameters, pooling="cls", seed=1).protocol() == widest]


def dataset_runs(dataset_id: str):
    """Finished runs of a dataset (see :func:`all_runs`)."""
    return all_runs(dataset_id)


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
    from glee_core.studio import recommended_first  # noqa: PLC0415 (pandas)

    ordered = recommended_first(list(runs)) if recommended else list(runs)
    first = (ordered[0].setting, ordered[0].method) if recommended and ordered else None
    labels = {}
    for r in ordered:
        reads = (f" ({r.record.hyperparameters.pooling})"
                 if r.record.method.input_format == "plain" else "")
        mark = " · recommended" if (r.setting, r.method) == first else ""
        labels[r.run_id] = (f"{r.method}{reads} · seed {r.seed} · {r.record.mode} · "
                            f"F1 {100 * r.metrics.f1:.1f}{mark} · {r.run_id[-10:]}")
    return labels


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
    dataset_id = current_dataset_id()
    runs = dataset_runs(dataset_id)
    if not runs:
        st.info(f"No finished runs for **{md(dataset_id)}** yet. Launch some on the **Train** page "
                "(the quick compare takes seconds).")
        st.stop()
    return runs


def setting_runs(key: str):
    """Runs of one setting (backbone, mode and protocol: never mixed in a table) and the chosen
    methods."""
    from glee_core.studio import recommended_first  # noqa: PLC0415 (pandas)

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


STEP_TEXTS = {  # a recommendation's next step: its button, and why
    "finetune-one": ("Fine-tune {heads}",
                     "fine-tuning is where the accuracy is (practical recipe: learning rate "
                     "chosen on dev, LP-FT from this very head)"),
    "finetune": ("Fine-tune the best of the top {n}: {heads}",
                 "the best head fine-tuned may not be the best quick one: the {n} race at one "
                 "learning rate (chosen once on dev), each round the better half on dev goes on, "
                 "and only the last one trains to the end - about half the time of {n} "
                 "fine-tunes"),
    "seeds": ("Run seeds 1-{seeds} for the top {n}: {heads}",
              "{seeds} seeds give the spread that says which gaps are noise"),
}


def next_step_request(step: str, heads, rec, runs, choice, dataset):
    """The ``TrainRequest`` of a recommendation's next step (fine-tuning its top heads, or more
    seeds of its setting), or None when the app cannot launch it in the same setting (runs made
    on the command line with other flags: the caption then names the command)."""
    from glee_core.studio import (  # noqa: PLC0415
        ENOUGH_SEEDS,
        TrainConfig,
        TrainRequest,
        plan_runs,
    )

    first = next(r for r in runs if r.setting == rec.chosen.setting)
    model = first.record.model.name
    pooling = first.record.hyperparameters.pooling  # the chosen candidate's (cls for [MASK])
    if step.startswith("finetune"):
        read = pooling if rec.chosen.pooling != "[MASK]" else "auto"
        return TrainRequest(data=choice, methods=list(heads), seeds=[1], model=model,
                            config=TrainConfig(pooling=read,
                                               heads="best" if len(heads) > 1 else None))
    config = TrainConfig(mode=rec.chosen.mode, pooling=pooling)
    try:  # the same setting only if its mode's default config gives its run ids
        planned = plan_runs(dataset, [first.record.method], [first.seed], model, config)
    except GleeError:
        return None
    if planned[0].run_id != first.run_id:
        return None
    return TrainRequest(data=choice, methods=list(heads),
                        seeds=list(range(1, ENOUGH_SEEDS + 1)), model=model, config=config)


def variant_runs(dataset_id: str) -> dict[str, list]:
    """The runs of this dataset and of its variants (the data health's "train without the
    flagged rows", ``+without-N-...``), by dataset id, the full data's first; {} without a
    variant with runs."""
    from glee_core.studio import WITHOUT, variant_base  # noqa: PLC0415

    base_id = variant_base(dataset_id)
    by_id: dict[str, list] = {}
    for run in all_runs(report=False):
        if run.dataset == base_id or run.dataset.startswith(base_id + WITHOUT):
            by_id.setdefault(run.dataset, []).append(run)
    if set(by_id) <= {base_id}:
        return {}
    return {key: by_id[key] for key in sorted(by_id, key=lambda k: (k != base_id, k))}


def variant_comparison(dataset_id: str) -> str | None:
    """Where the data health's "train without the flagged rows" made a variant of this dataset
    (or this is one): whether it wins on dev, a sentence for each variant with runs."""
    from glee_core.studio import recommend, variant_base, variant_line  # noqa: PLC0415

    base_id = variant_base(dataset_id)
    by_id = variant_runs(dataset_id)
    if not by_id:
        return None
    base = recommend(by_id.get(base_id, []))
    lines = [variant_line(base_id, base, v, recommend(runs)) for v, runs in by_id.items()
             if v != base_id]
    return " ".join(line for line in lines if line) or None


def dataset_budget(dataset_id: str) -> dict | None:
    """The newest label budget the Data page measured for this dataset (any backbone), from
    the stores this session reads; None when there is none."""
    found = [latest for runs_store in stores()
             if (latest := runs_store.latest_budget(dataset_id)) is not None]
    return max(found, key=lambda item: item[0])[2] if found else None


def budget_notice(dataset_id: str) -> None:
    """The label budget's sentence (the tail classes one more text helps most), where the Data
    page measured one for this dataset."""
    from glee_core.studio import budget_line  # noqa: PLC0415

    if (budget := dataset_budget(dataset_id)) and (line := budget_line(budget, md)):
        st.info(line, icon=":material/playlist_add:")


def recommendation_panel(runs, key: str) -> None:
    """The answer a compare ends on (``glee_core.runs.recommend``): the head to use among this
    dataset's ``runs``, chosen on dev, its test scores over seeds, the heads within noise, and
    each next step as one click (fine-tuning the top heads, more seeds)."""
    from glee_core.studio import (  # noqa: PLC0415
        ENOUGH_SEEDS,
        order_steps,
        recommend,
        recommendation_text,
    )

    rec = recommend(runs)
    if rec is None:
        return
    st.success(recommendation_text(rec, literal=md), icon=":material/recommend:")
    if line := variant_comparison(current_dataset_id()):
        st.info(line)
    budget_notice(current_dataset_id())
    if not rec.steps:
        st.caption(f"It is fine-tuned and has {ENOUGH_SEEDS} or more seeds: export it "
                   "(`python -m glee_core export`), or compare another mode on the Train page.")
        return
    choice = current_choice()
    try:  # the runs may outlive their data (a deleted upload): then the steps are only named
        dataset = load_options(choice)
    except GleeError:
        dataset = None
    requests = {step: next_step_request(step, heads, rec, runs, choice, dataset)
                if dataset is not None else None for step, heads in rec.steps}
    estimates = {step: time_estimate(dataset, request.methods, request.seeds, request.config,
                                     request.model)
                 for step, request in requests.items() if request is not None}
    steps = order_steps(rec.steps, {step: e["seconds"] / 60 for step, e in estimates.items()})
    if steps:
        st.markdown("**Next steps**, best value for the time first:")
    for number, (step, heads) in enumerate(steps):
        button, why = STEP_TEXTS[step]
        label = button.format(n=len(heads), heads=", ".join(heads), seeds=ENOUGH_SEEDS)
        why = why.format(seeds=ENOUGH_SEEDS, n=len(heads))
        if step == "finetune-one" and heads[0] != rec.chosen.method:
            why = (f"`{rec.chosen.method}` is fitted on the frozen features and cannot be "
                   f"fine-tuned; `{heads[0]}` is the best candidate that can. "
                   f"{why[0].upper()}{why[1:]}")
        request = requests[step]
        if request is None or policy().read_only:
            st.caption(f"Next: {label[0].lower() + label[1:]} ({why}); on the Train page or "
                       "with `python -m glee_core train`.")
            continue
        estimate = estimates[step]
        label = f"{label} ({estimate['text'].removeprefix('about ')})"
        if st.button(label, type="primary" if number == 0 else "secondary",
                     key=f"{key}-{step}"):
            job = launch(request, label=label, estimate=estimate)
            if job is not None:
                st.session_state["last_job"] = job.id
                st.switch_page("pages/2_Train.py")
        st.caption(f"Why: {why}. Estimated here: {estimate['text']} ({estimate['basis']}).")
