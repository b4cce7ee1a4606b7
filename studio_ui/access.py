"""Who may do what: public mode's policy, this browser's workspace and its cookie, a share link,
and the visitor as the server sees them."""

from __future__ import annotations

import hashlib
import time

import streamlit as st

from glee_core.core import environment
from glee_core.runs.store import RunStore
from glee_core.serve.policy import Policy
from glee_core.serve.workspaces import COOKIE, Workspace, expire

SHARE_PARAM = "share"  # public mode: ?share=TOKEN opens another visitor's runs, read-only


LEGACY_WORKSPACE_PARAM = "ws"  # links of before the cookie carried the key: ignored, dropped


_EXPIRED_AT = [0.0]  # when workspaces were last swept for expiry (at most every 10 minutes)


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
        found = Workspace.create(
            limit=rules.max_workspaces,
            per_minute=rules.workspaces_per_minute,
            visitor=visitor_id(),
            per_visitor=rules.visitor_share,
        )
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
_SET_COOKIE = st.components.v2.component(
    "glee_workspace_cookie",
    js="""
export default function({ data }) {
  const secure = location.protocol === "https:"
    ? "SameSite=None; Secure; Partitioned" : "SameSite=Lax";
  document.cookie = `${data.name}=${data.value}; path=/; max-age=${data.max_age}; ${secure}`;
}
""",
)


def remember_workspace(own: Workspace, rules: Policy) -> None:
    """Set this browser's workspace cookie when it did not hold the key as this session began
    (a first visit): a reload, or another tab, then opens the same workspace. On https the
    cookie is partitioned, so it also works inside the Space's iframe. It is set on every run
    of such a session, not once: a page switch can unmount the setter before the browser ran it
    (seen on a loaded machine), and setting the cookie twice is harmless."""
    if own.key == st.context.cookies.get(COOKIE):  # the cookies the session's connection sent
        return
    _SET_COOKIE(
        data={"name": COOKIE, "value": own.key, "max_age": int(rules.ttl_seconds)},
        key="workspace-cookie",
    )


def shared_workspace() -> Workspace | None:
    """A workspace another visitor shared read-only (``?share=TOKEN``), or None."""
    if not policy().public:
        return None
    shared = Workspace.open_shared(st.query_params.get(SHARE_PARAM))
    own_key = st.session_state.get("workspace_key")
    return shared if shared is not None and shared.key != own_key else None


def visitor_id() -> str:
    """Who launches, as far as the server can tell without a cookie: the client's address,
    hashed (no address is kept). Behind proxies, the entry of ``X-Forwarded-For`` the last of
    the trusted ones appended (``GLEE_TRUSTED_PROXIES`` from its end: the entries before it are
    the client's own words); without one, the connection's address. A visitor who drops the
    cookie gets a new workspace, but the same id: the per-visitor limits hold."""
    return hashed_address(
        st.context.headers.get("X-Forwarded-For"),
        st.context.ip_address,
        environment.trusted_proxies(),
    )


FORGED = "an address the client wrote itself"  # one visitor, however many it writes


def hashed_address(forwarded: str | None, connection: str | None, proxies: int) -> str:
    """:func:`visitor_id` of a request's ``X-Forwarded-For`` and connection address. With no
    trusted proxy, a connection address that is one of the header's entries was taken from it
    by the server (uvicorn trusts the header from 127.0.0.1 unless ``FORWARDED_ALLOW_IPS`` says
    otherwise): a client on the loopback wrote it, so every such request counts as one visitor
    (E3b: one client filled the machine's job cap alone, a new address a request)."""
    entries = [e.strip() for e in (forwarded or "").split(",") if e.strip()]
    if proxies:
        address = entries[-proxies] if len(entries) >= proxies else connection
    else:
        address = FORGED if connection and connection in entries else connection
    return hashlib.sha256(f"glee-visitor:{address or 'unknown'}".encode()).hexdigest()[:16]
