"""Public mode's limits hold while jobs run and across tabs: the work one launch and one session
may queue, training slots handed out in turn, the disk limit checked before each run is written,
global caps on jobs and workspaces, a queued job that loads nothing, the Playground's file
scoring capped, cached and queued, and no server path on the Data page."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from filelock import FileLock
from streamlit.testing.v1 import AppTest

from glee_core.core.files import folder_bytes
from glee_core.core.slots import SlotQueue
from glee_core.runs.store import RunStore
from glee_core.serve.policy import LimitReached, Policy
from glee_core.serve.workspaces import Workspace, check_machine
from tests.helpers.markdown import plain
from tests.helpers.synthetic_runs import synthetic_dataset, write_synthetic_run
from tests.helpers.waiting import wait_until

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def page(name: str, tiny_bert, **state) -> AppTest:
    at = AppTest.from_file(str(ROOT / name), default_timeout=120)
    at.session_state["model"] = str(tiny_bert)
    for key, value in state.items():
        at.session_state[key] = value
    return at


def launch_errors(at: AppTest) -> list[str]:
    next(b for b in at.button if b.label == "Launch").click().run()
    return [plain(e.value) for e in at.error]


def test_one_launch_and_one_session_are_capped(public, tiny_bert, monkeypatch):
    at = page("app_pages/2_Train.py", tiny_bert).run()
    at.text_input[0].set_value(",".join(str(s) for s in range(1, 501))).run()  # 500 seeds
    errors = launch_errors(at)
    assert any("plans 1500 runs; a launch here may plan at most 40" in e for e in errors)
    monkeypatch.setenv("GLEE_SESSION_JOB_MINUTES", "0.001")
    at = page("app_pages/2_Train.py", tiny_bert).run()
    assert any("a launch here may take at most 0.1 s" in e for e in launch_errors(at))
    assert "workspace_key" not in at.session_state  # refused before anything was made
    policy = Policy(session_seconds=600)
    with pytest.raises(LimitReached, match="still to run are estimated at 8 min"):
        policy.check_job(3, 300, session_seconds=480)


def test_the_machines_caps_hold_whatever_the_tabs(public, tiny_bert, monkeypatch):
    """A cap on jobs and one on workspaces: a new tab or browser does not reset them; visits that
    only look make no workspace, so they cannot fill the machine; a visitor refused for capacity
    reads a plain message, never a traceback."""
    monkeypatch.setenv("GLEE_MAX_JOBS", "1")
    other = Workspace.create()
    other.store.jobs_dir.mkdir(parents=True)
    (other.store.jobs_dir / "job-1.json").write_text(
        json.dumps({"id": "job-1", "pid": os.getpid(), "label": "someone else's"})
    )
    at = page("app_pages/2_Train.py", tiny_bert).run()
    assert any("This Space has 1 jobs training or waiting" in e for e in launch_errors(at))
    monkeypatch.setenv("GLEE_MAX_WORKSPACES", "2")  # other's and at's exist
    for _ in range(5):  # five more visitors who only look: nothing is made, nothing refused
        looking = page("app.py", tiny_bert).run()
        assert not looking.exception and not looking.error
    assert len(list((public / "workspaces").glob("?" * 32))) == 2
    full = page("app_pages/2_Train.py", tiny_bert).run()
    errors = launch_errors(full)
    assert not full.exception and any("holds 2 visitors' workspaces" in e for e in errors)
    with pytest.raises(LimitReached, match="try again later"):
        Workspace.create(limit=2)


def test_tabs_that_launch_at_once_cannot_pass_a_limit_together(public, tiny_bert, monkeypatch):
    """Four sessions of one visitor click Launch at the same moment: the check and the launch
    happen under one lock, so no more than the visitor's share (2 of a machine of 4) start, and
    the others read why."""
    monkeypatch.setenv("GLEE_MAX_JOBS", "4")
    tabs = [page("app_pages/2_Train.py", tiny_bert).run() for _ in range(4)]
    errors: list = [None] * len(tabs)
    start = threading.Barrier(len(tabs))

    def click(i: int) -> None:
        start.wait()
        errors[i] = launch_errors(tabs[i])

    threads = [threading.Thread(target=click, args=(i,)) for i in range(len(tabs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    launched = [
        job
        for job in (public / "workspaces").glob("*/runs/.jobs/*.json")
        if not job.name.endswith(".request.json")
    ]
    from glee_core.train.jobs import list_jobs

    for workspace in (public / "workspaces").glob("*/runs"):  # no job outlives the test
        for job in list_jobs(RunStore(workspace)):
            job.stop()
    assert all(e is not None for e in errors), errors  # every tab's click ran
    assert len(launched) <= 2, (launched, errors)  # never more than the share, however timed
    # a tab refused reads why (on a loaded machine a click can be lost in a rerun: no launch,
    # no message; it is not counted)
    assert all(any("job(s) training or waiting" in m for m in e) for e in errors if e), errors


def test_empty_workspaces_are_reclaimed_and_creation_is_rate_limited(public, monkeypatch):
    import glee_core.serve.workspaces as workspaces

    made = [Workspace.create(limit=3) for _ in range(3)]
    (made[0].uploads_dir).mkdir()  # one holds something
    (made[0].uploads_dir / "x.csv").write_text("text,label\n")
    for ws in made:
        os.utime(ws.path / workspaces.USED_MARKER, (time.time() - 7200,) * 2)
    fresh = Workspace.create(limit=3)  # full: the two empty, idle ones make room
    assert Workspace.open(made[0].key) is not None and Workspace.open(fresh.key) is not None
    assert Workspace.open(made[1].key) is None and Workspace.open(made[2].key) is None
    with pytest.raises(LimitReached, match="made 5 workspaces in the last minute"):
        for _ in range(6):
            Workspace.create(per_minute=5)


def test_a_visitor_who_drops_the_cookie_keeps_their_share_of_the_machine(public, monkeypatch):
    """Per-visitor limits follow the client's address (behind the Space's proxy), not the
    workspace: a new session of the same visitor cannot multiply them."""
    monkeypatch.setenv("GLEE_SESSION_JOBS", "1")
    monkeypatch.setenv("GLEE_SESSION_QUEUED", "0")
    first = Workspace.create()
    first.store.jobs_dir.mkdir(parents=True)
    (first.store.jobs_dir / "job-1.json").write_text(
        json.dumps({"id": "job-1", "pid": os.getpid(), "label": "mine", "visitor": "same-visitor"})
    )
    with pytest.raises(LimitReached, match="You already have 1 job"):
        check_machine(Policy.from_environment(), "same-visitor")
    check_machine(Policy.from_environment(), "someone-else")  # not theirs: fine


def test_training_slots_are_handed_out_in_turn():
    """Job A (three runs) releases its slot after each run and queues again at the back: job B,
    which arrived during A's first run, trains before A's second. (A holds its first slot until
    B's ticket is in the queue: conditions, not timings, order them.)"""
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"slots-{os.getpid()}-{time.time_ns()}"
    store, order = RunStore(folder, max_concurrent=1), []
    a_in = threading.Event()

    def tickets() -> int:
        return len(list(folder.rglob("*.ticket")))

    def job_a():
        for run in range(1, 4):
            with store.training_slot():
                order.append(f"A{run}")
                if run == 1:
                    a_in.set()
                    wait_until(lambda: tickets() >= 1, what="B queueing behind A's first run")

    def job_b():
        assert a_in.wait(30)
        with store.training_slot():
            order.append("B1")

    threads = [threading.Thread(target=job_a), threading.Thread(target=job_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert order == ["A1", "B1", "A2", "A3"]
    assert not list(folder.rglob("*.ticket"))  # every ticket cleaned up


def test_a_dead_processes_ticket_does_not_block_the_queue(tmp_path):
    queue = SlotQueue(tmp_path, 1)
    (tmp_path / "queue").mkdir()
    stale = tmp_path / "queue" / "00000000000000000001-1-aaaaaa.ticket"  # first in line, dead
    stale.write_text("")
    with queue.slot():
        pass
    assert not stale.exists()


def test_a_sessions_jobs_take_turns(tmp_path):
    """Two slots on the machine, but one session: its second run waits for its first."""
    session = tmp_path / ".session.lock"
    queue, events = SlotQueue(tmp_path / "slots", 2, session), []

    def run(name: str):
        with queue.slot(on_wait=lambda: events.append(f"{name} waits")):
            events.append(f"{name} in")
            if name == "a":  # a holds the session until b is seen waiting for it
                wait_until(lambda: "b waits" in events, what="b waiting for the session")
            events.append(f"{name} out")

    threads = [threading.Thread(target=run, args=(n,)) for n in ("a", "b")]
    threads[0].start()
    wait_until(lambda: "a in" in events, what="a starting")
    threads[1].start()
    for t in threads:
        t.join(timeout=30)
    assert events == ["a in", "b waits", "a out", "b in", "b out"]


def _cli(tiny_bert, toy_csv, runs: Path, env: dict, *extra: str):
    return [
        sys.executable,
        "-m",
        "glee_core",
        "train",
        "--dataset",
        f"csv:{toy_csv}",
        "--method",
        "cls-relu",
        "--model",
        str(tiny_bert),
        "--runs-dir",
        str(runs),
        "--mode",
        "frozen",
        "--pooling",
        "cls",
        "--epochs",
        "1",
        *extra,
    ], {**ENV, **env}


@pytest.mark.slow
def test_the_disk_limit_holds_while_a_job_trains(tiny_bert, toy_csv, tmp_path):
    workspace = tmp_path / "ws"
    runs = workspace / "runs"
    command, env = _cli(tiny_bert, toy_csv, runs, {})
    assert subprocess.run(command, env=env, capture_output=True, timeout=300).returncode == 0
    one_run = folder_bytes(RunStore(runs).runs()[0].path)
    used = folder_bytes(workspace)  # the run, the cached features, the locks
    orphan = runs / ".tmp-old-run-x"  # a killed save's leftovers: not counted
    orphan.mkdir()
    (orphan / "model.safetensors").write_bytes(b"0" * (10 * one_run))
    # room for one more run, not two: the launch passes, its second run is refused
    quota = {"GLEE_QUOTA_DIR": str(workspace), "GLEE_QUOTA_MB": str((used + 1.5 * one_run) / 2**20)}
    command, env = _cli(tiny_bert, toy_csv, runs, quota, "--seeds", "2,3")
    full = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert full.returncode == 2 and "error: disk limit reached" in full.stderr, full.stderr
    assert "Traceback" not in full.stderr
    assert sorted(r.seed for r in RunStore(runs).runs()) == [1, 2]
    assert [p.name for p in runs.glob(".tmp-*")] == [orphan.name]  # none half-written


@pytest.mark.slow
def test_a_queued_job_loads_nothing_until_its_turn(tiny_bert, toy_csv, tmp_path):
    session = tmp_path / ".session.lock"
    holder = FileLock(str(session))
    holder.acquire()  # this session's other job is training
    progress = tmp_path / "progress.jsonl"
    command, env = _cli(
        tiny_bert,
        toy_csv,
        tmp_path / "runs",
        {"GLEE_SESSION_SLOT": str(session), "GLEE_SLOTS_DIR": str(tmp_path / "slots")},
        "--progress-file",
        str(progress),
    )
    child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while time.time() < deadline and not progress.is_file():
        time.sleep(0.2)
    time.sleep(2)
    stages = [json.loads(line)["stage"] for line in progress.read_text().splitlines()]
    rss_kb = int(
        next(
            line
            for line in Path(f"/proc/{child.pid}/status").read_text().splitlines()
            if line.startswith("VmRSS")
        ).split()[1]
    )
    assert stages == ["queued"] and rss_kb < 150_000  # no torch, no backbone while it waits
    holder.release()
    out, err = child.communicate(timeout=300)
    assert child.returncode == 0, err.decode()
    stages = [json.loads(line)["stage"] for line in progress.read_text().splitlines()]
    assert stages[:2] == ["queued", "loading"] and "test" in stages


def test_the_playgrounds_file_scoring_is_capped_a_job_and_off_when_read_only(
    public, tiny_bert, monkeypatch
):
    """A file is classified by a job in the visitor's workspace (its rows capped), once per
    file: typing in the text box launches nothing again."""
    from glee_core.train.jobs import list_jobs
    from tests.helpers.jobs import finished, wait_for_jobs

    monkeypatch.setenv("GLEE_SESSION_SCORE_ROWS", "5")
    write_synthetic_run(RunStore(public / "runs"), synthetic_dataset(4, "demo"), "cls-relu", 1)
    at = page("app_pages/6_Playground.py", tiny_bert).run()
    # the synthetic run (scored first, best on dev) cannot score texts: the backbone's MLM head
    at.selectbox[0].select_index(len(at.selectbox[0].options) - 1).run()
    rows = "text\n" + "".join(f"text {i}\n" for i in range(4))

    def classify(name: str, data: str) -> Workspace:
        at.file_uploader[0].upload(name, data.encode(), "text/csv").run()
        next(b for b in at.button if b.label.startswith("Classify its texts (")).click().run()
        assert not at.exception
        own = Workspace.open(at.session_state["workspace_key"])
        wait_for_jobs(own.store.root)
        at.run()
        return own

    own = classify("four.csv", rows)
    job = finished(own.store.root, "predict")
    assert job.request().max_rows == 5 and job.record.visitor
    assert not at.exception and len(at.dataframe[-1].value) == 4
    at.text_area[0].input("another text").run()  # typing does not score the file again
    assert len(list_jobs(own.store)) == 1 and len(at.dataframe[-1].value) == 4
    classify("many.csv", rows + "a\nb\n")
    assert any("this file has 6 texts; here at most 5" in plain(e.value) for e in at.error)
    monkeypatch.setenv("GLEE_READ_ONLY", "1")
    off = page("app_pages/6_Playground.py", tiny_bert).run()
    off.selectbox[0].select_index(len(off.selectbox[0].options) - 1).run()
    assert not off.exception and len(off.file_uploader) == 0
    assert any("switched off" in c.value for c in off.caption)


def test_the_data_page_shows_no_server_path_to_a_visitor(public, tiny_bert):
    """Not the data folder, nor a CSV path that names a dataset of the owner's stored runs
    (whose uploads' runs are offered: their ids name no path)."""
    from glee_core.runs.store import RunStore
    from tests.helpers.synthetic_runs import write_synthetic_store

    (public / "data" / "r8").mkdir(parents=True)
    (public / "data" / "r8" / "train.txt").write_text("x\tearn\n")
    owners = RunStore(public / "runs")
    write_synthetic_store(owners, 4, ["cls-tanh"], name=f"csv:{public}/owner/tickets.csv")
    write_synthetic_store(owners, 4, ["cls-tanh"], name="upload:shipped-0123abcd.csv")
    at = page("app_pages/1_Data.py", tiny_bert).run()
    shown = [*at.selectbox[0].options, *(c.value for c in at.caption)]
    assert any(o.startswith("r8 (paper") for o in at.selectbox[0].options)
    assert "upload:shipped-0123abcd.csv (stored runs)" in at.selectbox[0].options
    assert not any(str(public) in text for text in shown)


def test_downloads_neutralise_formulas_and_messages_escape_markdown():
    import pandas as pd

    from glee_core.runs.tables import spreadsheet_csv
    from studio_ui.text import md

    frame = pd.DataFrame({"gold": ["=1+1", "+x", "-y", "@z", "\tq", "plain"], "score": [-1.5] * 6})
    rows = spreadsheet_csv(frame).splitlines()
    assert rows[1:] == [
        "'=1+1,-1.5",
        "'+x,-1.5",
        "'-y,-1.5",
        "'@z,-1.5",
        "'\tq,-1.5",
        "plain,-1.5",
    ]  # text cells only: a negative number stays a number
    link = md("[Session expired](https://evil.example/login) or www.evil.example, a@b.c")
    assert "](" not in link.replace("\\]", "").replace("\\(", "")
    assert "://" not in link and "www." not in link and "a@b" not in link
    assert plain(link).replace("\u200b", "") == (
        "[Session expired](https://evil.example/login) or www.evil.example, a@b.c"
    )
