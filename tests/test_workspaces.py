"""Public mode: two browser sessions cannot see, open, score with or delete each other's uploads
and runs; the per-session limits refuse the next launch or upload with their message; read-only
mode shows no launch controls while the command line still trains; nothing from a request escapes
the workspaces folder; idle workspaces expire; a Space's storage is the default store."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from glee_core.cli import main
from glee_core.core import environment
from glee_core.core.errors import GleeError
from glee_core.models.options import DataOptions
from glee_core.runs.store import RunStore
from glee_core.serve.policy import LimitReached, Policy
from glee_core.serve.workspaces import Workspace, expire
from glee_core.train.jobs import process_start
from tests.helpers.markdown import plain
from tests.helpers.synthetic_runs import synthetic_dataset, write_synthetic_run

ROOT = Path(__file__).resolve().parents[1]
ROWS = "text,intent\n" + "".join(f"question number {i},{'ab'[i % 2] * 3}\n" for i in range(30))


@pytest.fixture
def public(monkeypatch, tmp_path, tiny_bert):
    """Public mode with its own folders; the owner's store holds one shared run on demo."""
    folders = {name: tmp_path / name for name in ("runs", "uploads", "workspaces", "data")}
    for name, path in folders.items():
        monkeypatch.setenv(f"GLEE_{name.upper()}_DIR", str(path))
    monkeypatch.setenv("GLEE_PUBLIC", "1")
    monkeypatch.setenv("GLEE_PUBLIC_MODELS", str(tiny_bert))
    shared = write_synthetic_run(
        RunStore(folders["runs"]), synthetic_dataset(4, "demo"), "cls-relu", 1
    )
    folders["shared_run"] = shared.run_id
    return folders


def session(page: str, tiny_bert, **state) -> AppTest:
    at = AppTest.from_file(str(ROOT / page), default_timeout=120)
    at.session_state["model"] = str(tiny_bert)
    for key, value in state.items():
        at.session_state[key] = value
    return at


def upload(at: AppTest, name: str = "mine.csv", data: bytes = ROWS.encode()) -> AppTest:
    """Upload a CSV and keep it (the button is there unless a limit refused the file)."""
    at.file_uploader[0].upload(name, data, "text/csv").run()
    for button in at.button:
        if button.label == "Use this CSV":
            button.click().run()
    return at


def test_two_sessions_see_only_their_own_uploads_and_runs(public, tiny_bert):
    a = upload(session("app_pages/1_Data.py", tiny_bert).run())
    assert not a.exception and not a.error
    key_a = a.session_state["workspace_key"]
    own_a = Workspace.open(key_a)
    [kept] = list(own_a.uploads_dir.glob("*.csv"))
    # the dataset names the upload, never the folder (its name is the key) it is kept in
    assert a.session_state["dataset"].dataset == f"upload:{kept.name}"
    assert "ws" not in a.query_params  # the key is in no URL
    run_a = write_synthetic_run(
        own_a.store, synthetic_dataset(4, f"upload:{kept.name}"), "prompt", 1
    )
    demo_a = write_synthetic_run(own_a.store, synthetic_dataset(4, "demo"), "cls-tanh", 1)

    looking = session("app_pages/1_Data.py", tiny_bert).run()  # a visit that only looks: nothing
    assert "workspace_key" not in looking.session_state  # made, nothing kept
    assert any("Nothing of yours is kept here until" in c.value for c in looking.sidebar.caption)
    b = upload(
        session("app_pages/1_Data.py", tiny_bert).run(),
        "theirs.csv",
        ROWS.replace("question", "query").encode(),
    )
    key_b = b.session_state["workspace_key"]
    assert key_b != key_a
    own_b = Workspace.open(key_b)
    # B's dataset list has no upload of A's, and B's stores hold none of A's runs
    assert not any("mine.csv" in option for option in b.selectbox[0].options)
    assert own_b.store.get(run_a.run_id) is None and own_b.store.get(demo_a.run_id) is None
    # B's pages list the shared run and its own, never A's (Results, Playground on demo)
    demo = DataOptions(dataset="demo")
    results = session("app_pages/3_Results.py", tiny_bert, workspace_key=key_b, dataset=demo).run()
    assert not results.exception
    shown = {
        row
        for frame in results.dataframe
        for row in map(str, frame.value.to_dict("list").get("method", []))
    }
    assert "cls-relu" in shown and "cls-tanh" not in shown
    playground = session(
        "app_pages/6_Playground.py", tiny_bert, workspace_key=key_b, dataset=demo
    ).run()
    options = playground.selectbox[0].options
    assert any(public["shared_run"][-10:] in o for o in options)
    assert not any(demo_a.run_id[-10:] in o for o in options)
    # typing A's run id or upload name into B's workspace opens or deletes nothing
    with pytest.raises(GleeError, match="no run"):
        own_b.delete_run(run_a.run_id)
    with pytest.raises(GleeError, match="no upload"):
        own_b.delete_upload(kept.name)
    assert run_a.path.is_dir() and kept.is_file()
    # a key in a link opens nothing (A's own key too: links no longer carry write access)
    wrong = key_a[:-1] + ("A" if key_a[-1] != "A" else "B")
    for key in ("../" + key_a[3:], wrong, key_a[:-1], key_a, key_a + "\n"):
        c = session("app_pages/1_Data.py", tiny_bert)
        c.query_params["ws"] = key
        c.run()
        assert "workspace_key" not in c.session_state  # opened none, made none
        assert "ws" not in c.query_params
    assert Workspace.open(key_a + "\n") is None  # fullmatch: no trailing newline
    # A's own sidebar deletes its runs only once the confirmation is ticked
    a = session("app_pages/1_Data.py", tiny_bert, workspace_key=key_a).run()
    delete = next(b for b in a.sidebar.button if b.label.startswith("Delete my"))
    assert delete.disabled
    next(c for c in a.sidebar.checkbox if c.label.startswith("Yes, delete my")).check().run()
    next(b for b in a.sidebar.button if b.label.startswith("Delete my")).click().run()
    assert own_a.store.runs() == []


def _fake_running_job(store: RunStore) -> None:
    """A job record whose process is this one: it counts as running."""
    store.jobs_dir.mkdir(parents=True, exist_ok=True)
    (store.jobs_dir / "job-1.json").write_text(
        json.dumps(
            {
                "id": "job-1",
                "pid": os.getpid(),
                "pid_start": process_start(os.getpid()),
                "label": "busy",
            }
        )
    )


def test_the_job_limit_refuses_the_next_launch(public, tiny_bert, monkeypatch):
    monkeypatch.setenv("GLEE_SESSION_JOBS", "1")
    monkeypatch.setenv("GLEE_SESSION_QUEUED", "0")
    own = Workspace.create()
    at = session("app_pages/2_Train.py", tiny_bert, workspace_key=own.key).run()
    _fake_running_job(own.store)
    next(b for b in at.button if b.label == "Launch").click().run()
    assert any("a session may have 1 training and 0 waiting" in plain(e.value) for e in at.error)
    from glee_core.train.jobs import list_jobs

    assert [j.id for j in list_jobs(own.store)] == ["job-1"]
    # no Ray controls and no free-text backbone for visitors
    assert not any("Ray" in e.label for e in at.expander)
    assert at.selectbox[-1].options == [str(tiny_bert)]


def test_the_disk_and_upload_limits_refuse_with_their_message(public, tiny_bert, monkeypatch):
    monkeypatch.setenv("GLEE_SESSION_UPLOAD_MB", "0.0001")  # 105 bytes
    at = upload(session("app_pages/1_Data.py", tiny_bert).run())
    assert any("uploads here are limited to 104 bytes" in plain(e.value) for e in at.error)
    monkeypatch.setenv("GLEE_SESSION_UPLOAD_MB", "10")
    monkeypatch.setenv("GLEE_SESSION_DISK_MB", "0.001")  # 1 KB: a run does not fit
    assert "workspace_key" not in at.session_state  # a refused upload made no workspace
    own = Workspace.create()
    write_synthetic_run(own.store, synthetic_dataset(4, "demo"), "cls-tanh", 1)
    at = upload(session("app_pages/1_Data.py", tiny_bert, workspace_key=own.key).run())
    assert any(
        "Your workspace uses" in plain(e.value) and "of its 1.02 KB" in plain(e.value)
        for e in at.error
    )
    assert not list(own.uploads_dir.glob("*.csv"))  # nothing kept
    train = session("app_pages/2_Train.py", tiny_bert, workspace_key=own.key).run()
    next(b for b in train.button if b.label == "Launch").click().run()
    assert any("Your workspace uses" in plain(e.value) for e in train.error)


def test_read_only_mode_has_no_launch_controls_and_the_cli_still_trains(
    public, tiny_bert, toy_csv, monkeypatch, tmp_path, capsys
):
    monkeypatch.setenv("GLEE_READ_ONLY", "1")
    home = session("app.py", tiny_bert).run()
    assert not home.exception
    assert not any(b.label == "Quick compare on demo" for b in home.button)
    train = session("app_pages/2_Train.py", tiny_bert).run()
    assert not train.exception and not any(b.label == "Launch" for b in train.button)
    assert any("read-only" in i.value for i in train.info)
    data = session("app_pages/1_Data.py", tiny_bert).run()
    assert not data.exception and len(data.file_uploader) == 0
    assert len(data.get("vega_lite_chart")) == 1  # the rest of the page is still there
    # the owner's command line ignores the switch
    assert (
        main(
            [
                "train",
                "--dataset",
                f"csv:{toy_csv}",
                "--method",
                "cls-relu",
                "--model",
                str(tiny_bert),
                "--mode",
                "frozen",
                "--epochs",
                "1",
                "--runs-dir",
                str(tmp_path / "owner"),
            ]
        )
        == 0
    )
    assert len(RunStore(tmp_path / "owner").runs()) == 2  # a run a pooling


def test_nothing_from_a_request_escapes_the_workspaces_folder(tmp_path):
    root = tmp_path / "workspaces"
    own = Workspace.create(root)
    for key in ("../" + "a" * 29, "a" * 31 + "/", "..", "", None, "a" * 33, "%2e%2e" + "a" * 26):
        assert Workspace.open(key, root) is None
    with pytest.raises(GleeError):
        Workspace(root, "../../etc/passwd-xxxxxxxxxxxxxxx")
    for name in ("../../x.csv", "/etc/passwd", "..", "x.json"):
        with pytest.raises(GleeError):
            own.delete_upload(name)
    for run_id in ("../x", "..", ".locks", "reproduce", "/etc"):
        with pytest.raises(GleeError):
            own.delete_run(run_id)
    assert own.path.is_dir()


def test_limits_say_what_to_do():
    policy = Policy(public=True, jobs=1, queued=2, upload_bytes=2**20, disk_bytes=10 * 2**20)
    own = Workspace.create(Path(os.environ.get("TMPDIR", "/tmp")) / f"ws-{time.time_ns()}")
    with pytest.raises(LimitReached, match="limited to 1 MB. Upload a sample"):
        own.check_upload(policy, 3 * 2**20)
    with pytest.raises(LimitReached, match="3 job.*1 training and 2 waiting.*stop one"):
        own.check_launch(policy, 3)
    own.check_launch(policy, 2)  # room for one more


def test_idle_workspaces_expire_unless_a_job_still_runs(tmp_path):
    root = tmp_path / "workspaces"
    idle, busy, fresh = Workspace.create(root), Workspace.create(root), Workspace.create(root)
    _fake_running_job(busy.store)
    old = time.time() - 3 * 3600
    for workspace in (idle, busy):
        os.utime(workspace.path / ".last-used", (old, old))
    assert expire(root, ttl_seconds=3600) == [idle.key]
    assert not idle.path.exists() and busy.path.is_dir() and fresh.path.is_dir()


def test_a_space_keeps_its_stores_on_persistent_storage(monkeypatch, tmp_path):
    for name in ("GLEE_RUNS_DIR", "GLEE_UPLOADS_DIR", "GLEE_WORKSPACES_DIR", "GLEE_PUBLIC"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("SPACE_ID", raising=False)
    assert environment.runs_dir() == Path("runs") and not environment.public()
    monkeypatch.setenv("SPACE_ID", "someone/glee-studio")
    monkeypatch.setattr(environment, "SPACE_STORAGE", tmp_path / "missing")
    assert environment.runs_dir() == Path("runs")  # no persistent storage mounted
    monkeypatch.setattr(environment, "SPACE_STORAGE", tmp_path)
    assert environment.runs_dir() == tmp_path / "glee" / "runs"
    assert environment.workspaces_dir() == tmp_path / "glee" / "workspaces"
    assert environment.public()  # on by default on a Space
    monkeypatch.setenv("GLEE_PUBLIC", "0")  # the owner of a private Space turns it off
    assert not environment.public()


def test_a_share_shows_scores_not_texts_and_turning_it_off_revokes_it(public, tiny_bert):
    """What the share help says, page by page: a visitor opening the link sees the sharer's runs
    (Results, Predictions) but not the texts in them; the sharer turns sharing off and the link
    opens nothing; sharing again makes a new link."""
    owner = Workspace.create()
    dataset_id = "upload:private-0123abcd.csv"
    run = write_synthetic_run(owner.store, synthetic_dataset(4, dataset_id), "cls-tanh", 1)
    secret = run.predictions["text"].iloc[0]
    at = session("app_pages/3_Results.py", tiny_bert, workspace_key=owner.key).run()
    toggle = next(t for t in at.sidebar.toggle if t.label == "Share my runs read-only")
    toggle.set_value(True).run()
    token = owner.path.joinpath(".share").read_text().strip()
    assert Workspace.open_shared(token).key == owner.key
    visitor = session(
        "app_pages/5_Predictions.py", tiny_bert, dataset=DataOptions(dataset=dataset_id)
    )
    visitor.query_params["share"] = token
    visitor.run()
    assert not visitor.exception
    table = visitor.dataframe[0].value
    assert "text" not in table.columns and "gold" in table.columns
    assert secret not in str(visitor) and not visitor.get("download_button")
    results = session("app_pages/3_Results.py", tiny_bert, dataset=DataOptions(dataset=dataset_id))
    results.query_params["share"] = token
    results.run()
    assert not results.exception and secret not in str(results)
    # off: the link is revoked
    next(t for t in at.sidebar.toggle if t.label == "Share my runs read-only").set_value(
        False
    ).run()
    assert Workspace.open_shared(token) is None
    assert any("revoked" in c.value for c in at.sidebar.caption)
    next(t for t in at.sidebar.toggle if t.label == "Share my runs read-only").set_value(True).run()
    assert owner.path.joinpath(".share").read_text().strip() != token


def test_an_upload_is_deleted_only_once_the_confirmation_is_ticked(public, tiny_bert):
    at = upload(session("app_pages/1_Data.py", tiny_bert).run())
    own = Workspace.open(at.session_state["workspace_key"])
    [kept] = own.uploads_dir.glob("*.csv")
    delete = next(b for b in at.sidebar.button if b.label.startswith("Delete upload"))
    assert delete.disabled
    next(c for c in at.sidebar.checkbox if c.label.startswith("Yes, delete mine")).check().run()
    next(b for b in at.sidebar.button if b.label.startswith("Delete upload")).click().run()
    assert not kept.exists()


def test_work_is_refused_while_the_machines_disk_is_nearly_full(public, monkeypatch):
    import shutil as shutil_module

    import glee_core.serve.workspaces as workspaces

    own = Workspace.create()
    own.check_launch(Policy(), 0)  # room enough here
    usage = shutil_module.disk_usage(own.root)
    monkeypatch.setattr(
        workspaces.shutil,
        "disk_usage",
        lambda path: usage._replace(free=workspaces.FREE_RESERVE // 2),
    )
    with pytest.raises(LimitReached, match=r"disk is nearly full \(512 MB free\)"):
        own.check_launch(Policy(), 0)
    with pytest.raises(LimitReached, match="nearly full"):
        own.check_upload(Policy(), 100)
