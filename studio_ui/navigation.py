"""The pages, the sidebar, and public mode's workspace panel in it."""

from __future__ import annotations

import logging
import secrets

import streamlit as st

from glee_core.core import environment
from glee_core.core.files import size_text
from glee_core.serve.policy import Policy
from glee_core.serve.uploads import list_uploads
from glee_core.serve.workspaces import SHARE_FILE, Workspace
from glee_core.train.priority import pages_drawing

from .access import SHARE_PARAM, policy, remember_workspace, shared_workspace, workspace
from .choice import current_dataset_id, current_model, display_name
from .jobs_panel import sidebar_jobs
from .stores import cached_runs
from .text import draw_logged, md, model_label

# the app's pages, in the sidebar's order: (file in app_pages/, title, Material icon). Not in a
# folder named pages/: Streamlit runs a page of such a folder on its own (no app.py, "app" listed
# as a page) when its URL is a fresh server's first request; elsewhere st.navigation lays out
# every page, however it is reached.
APP_PAGES = [
    ("0_Home", "Home", "home"),
    ("1_Data", "Data", "bar_chart"),
    ("2_Train", "Train", "model_training"),
    ("3_Results", "Results", "table_chart"),
    ("4_Diagnostics", "Diagnostics", "troubleshoot"),
    ("5_Predictions", "Predictions", "search"),
    ("6_Playground", "Playground", "edit_note"),
    ("7_Report", "Report", "picture_as_pdf"),
    ("8_Paper", "Paper", "menu_book"),
]


LOG = logging.getLogger("glee_studio")

# The charts are drawn at a fixed width (glee_core.views.style.APP_WIDTH, a laptop's window);
# in a narrower column (a phone, a split screen, the sidebar open at 800 px) a chart scrolls
# sideways inside its own box instead of being cut at the column's edge.
# The box is the chart itself, never its frame: the chart's toolbar (its full-screen button) sits
# above it in that frame, and a scrolling frame would clip the toolbar.
CHART_SCROLL = (
    "<style>[data-testid='stVegaLiteChart'] { max-width: 100%; overflow-x: auto;"
    " overflow-y: hidden; }</style>"
)


def run_page(page) -> None:
    """Run the chosen page (every chart scrolls sideways where the column is narrower than it,
    :data:`CHART_SCROLL`). In public mode an error no page foresaw reaches the visitor as one
    line with a reference, never a traceback (whose server paths and values are the owner's);
    the traceback goes to the server's log under that reference. Streamlit's own stop and rerun
    are not errors (BaseException) and pass through."""
    st.html(CHART_SCROLL)
    public = policy().public
    # an error no page foresaw (in a widget's callback too) shows a visitor no traceback, no
    # server path: Streamlit's own details off in public mode (the server's log keeps them)
    st.set_option("client.showErrorDetails", "none" if public else "full")
    with draw_logged(getattr(page, "title", "?")), pages_drawing():
        if not public:
            page.run()
            return
        try:
            page.run()
        except Exception as exc:  # noqa: BLE001 (the last guard between a visitor and a traceback)
            reference = secrets.token_hex(4)
            LOG.exception("page %s failed (reference %s)", getattr(page, "title", "?"), reference)
            st.error(
                f"This page hit an error it did not expect ({type(exc).__name__}, reference "
                f"{reference}); nothing of yours was lost. Try again, or another page; the "
                "Space's owner can find the reference in its log."
            )


def sidebar() -> None:
    rules = policy()
    own = workspace()
    with st.sidebar:
        chosen = current_dataset_id()  # a variant's (+rare, +prompt-..., +without-...) too
        name = display_name(chosen)  # an upload's file name, and the id the CLI takes
        st.caption(f"Dataset: **{md(name)}**" + (f" ({md(chosen)})" if name != chosen else ""))
        st.caption(f"Backbone: **{md(model_label(current_model()))}**")
        if rules.read_only:
            st.info(
                "Read-only: this deployment shows its shipped runs; training and uploads are "
                "switched off. Run Glee Studio yourself to train."
            )
        if not rules.public:
            st.caption(
                f"Runs: `{environment.runs_dir()}` · uploads: `{environment.uploads_dir()}`"
                f" · paper data: `{environment.data_dir()}`"
            )
        elif own is None:
            st.caption(
                "Nothing of yours is kept here until you upload a file or launch a job: "
                "then a private workspace is made for this browser."
            )
        else:
            remember_workspace(own, rules)
            shared = shared_workspace()
            if shared is not None:
                st.warning(
                    "You are viewing a **shared workspace, read-only**: its runs appear "
                    "beside yours on the Results, Diagnostics and Predictions pages. "
                    "What you upload or train stays in your own workspace.",
                    icon=":material/visibility:",
                )
            workspace_panel(own, rules)
        if not rules.read_only:
            sidebar_jobs()  # the work running, on every page


LABEL_WORDS_BUTTON = "Give label words the backbone reads (Data page)"


def label_words_button(key: str) -> None:
    """Where heads are left out for label words the backbone cannot read: one click to the Data
    page, where its "Label words" section (open there) takes others."""
    if st.button(LABEL_WORDS_BUTTON, key=key, icon=":material/translate:"):
        st.switch_page("app_pages/1_Data.py")


def workspace_panel(own: Workspace, rules: Policy) -> None:
    """Public mode's sidebar: what is private, the limits, the usage, a read-only link to
    share; delete what is yours (runs after a confirmation)."""
    with st.expander("Your workspace", expanded=False):
        st.caption(
            f"Your uploads and the runs you train are private to this browser (a cookie "
            f"holds the workspace; the address bar never does). They are deleted after "
            f"{rules.ttl_text} without use. The demo, the paper's datasets and the runs "
            "shipped here are shared and read-only. A browser that blocks cookies starts "
            "a new workspace on every reload."
        )
        st.caption(
            f"Limits: {rules.jobs} job(s) training and {rules.queued} waiting, "
            f"{rules.job_runs} runs and {rules.job_seconds / 60:.0f} min (estimated) a "
            f"launch, uploads up to {size_text(rules.upload_bytes)}, "
            f"{size_text(rules.disk_bytes)} in all; used: {size_text(own.disk_bytes())}."
        )
        sharing = (own.path / SHARE_FILE).is_file()
        if st.toggle(
            "Share my runs read-only",
            key="share-toggle",
            value=sharing,
            help="A link that shows your runs' scores and charts (not your uploads, "
            "nor the texts in them) to whoever opens it; they cannot upload, "
            "train or delete in your workspace. Turning it off revokes the link.",
        ):
            st.code(f"?{SHARE_PARAM}={own.share_token()}", language=None)
            st.caption(
                "Add this to the app's address to share your runs, read-only. Turning "
                "the switch off revokes it; sharing again makes a new link."
            )
            models = st.checkbox(
                "Let them download my models too",
                value=own.shares_models,
                key="share-models",
                help="Off: they see scores and charts but cannot build or "
                "download your runs' models (Predictions, Take it with "
                "you): a model carries what it was trained on.",
            )
            if models != own.shares_models:
                own.share_models(models)
        elif sharing:
            own.revoke_share()
            st.caption("The share link is revoked: it opens nothing now.")
        for upload in list_uploads(own.uploads_dir):
            sure = st.checkbox(
                f"Yes, delete {md(upload.original_name)} for good",
                key=f"del-sure-{upload.path.name}",
            )
            if st.button(
                f"Delete upload {md(upload.original_name)}",
                disabled=not sure,
                key=f"del-{upload.path.name}",
            ):
                own.delete_upload(upload.path.name)
                st.rerun()
        mine, _ = cached_runs(own.store)
        if mine:
            sure = st.checkbox(f"Yes, delete my {len(mine)} run(s) for good", key="delete-sure")
            if st.button(f"Delete my {len(mine)} run(s)", key="delete-runs", disabled=not sure):
                for run in mine:
                    own.delete_run(run.run_id)
                st.rerun()
