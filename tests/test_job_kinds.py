"""Every kind of long work is a job launched one way: its typed request, its command, its
estimate (a typed record saying how sure it is), one reducer for its progress, and what a
broken request, a stop or a second launch of the same work do."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from glee_core.cli import build_parser, main
from glee_core.core import environment
from glee_core.core.environment import (
    JOB_NICE,
    job_nice,
    niced_from_the_start,
    niced_work_yields,
)
from glee_core.core.errors import GleeError
from glee_core.core.events import Examining, FeaturePass, Working
from glee_core.core.progress import fold
from glee_core.health.options import HealthOptions
from glee_core.models.options import DataOptions
from glee_core.models.requests import HealthRequest
from glee_core.runs.job_estimates import Machine, settle
from glee_core.runs.rates import STARTUP_SECONDS, Estimate, about
from glee_core.runs.store import RunStore
from glee_core.train import priority
from glee_core.train.job_kinds import JOB_KINDS, kind_of
from glee_core.train.jobs import Job, JobRecord, launch, past_jobs
from tests.helpers.jobs import wait_for_jobs
from tests.helpers.waiting import wait_until


def test_every_kind_has_a_request_that_round_trips_and_a_command_that_takes_it(tmp_path):
    parser = build_parser()
    for kind in JOB_KINDS.values():
        args = parser.parse_args([kind.name, "--request", "r.json", "--progress-file", "p"])
        assert args.request == "r.json" and args.progress_file == "p"
        assert kind.request.WHAT.endswith("request")
    request = HealthRequest(DataOptions(dataset="demo"), HealthOptions(out=str(tmp_path)), "m")
    assert kind_of(request) is JOB_KINDS["health"]
    path = request.write(tmp_path / "r.json")
    assert HealthRequest.read(path) == request
    with pytest.raises(GleeError, match="no job runs a dict"):
        kind_of({})


@pytest.mark.parametrize(
    "text",
    ['{"data": {"dataset": "demo"}, "options": {"out": 5}', "[1, 2]", '{"options": {}}', ""],
)
def test_a_request_edited_by_hand_is_one_line_naming_it(tmp_path, capsys, text):
    path = tmp_path / "edited.request.json"
    path.write_text(text)
    with pytest.raises(GleeError, match=r"cannot read the health check request .*edited"):
        HealthRequest.read(path)
    assert main(["health", "--request", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: cannot read the health check request") and len(err) == 1


def test_the_estimate_is_a_typed_record_that_says_how_sure_it_is():
    measured = Estimate(200.0, "upper quartile of 3 finished runs", measured=True)
    assert measured.text == "about 3 min" == about(200.0) and measured.sure.startswith("measured")
    typical = Estimate(200.0, "backbone size on cpu")  # nothing measured here: a range
    assert (typical.low, typical.high) == (100.0, 400.0)
    assert typical.text == "2-7 min" and "not measured here yet" in typical.sure
    assert Estimate(30.0, "x").text == "15-60 s"
    assert Estimate.from_dict({**typical.to_dict(), "a newer field": 1}) == typical
    # a kind's finished jobs calibrate the next estimate: the median of real / estimated, n of
    # them trusted n / (n + 1) of the way (one job is one draw of its start-up's noise)
    past = {"health": [(10.0, 20.0), (10.0, 30.0), (20.0, 40.0)]}
    settled = settle(Estimate(50.0, "probe fits"), Machine("cpu", past=past), "health")
    assert settled.seconds == pytest.approx(50.0 * 2**0.75) and settled.base == 50.0
    assert settled.measured and settled.text == "about 84 s"
    assert "x1.68: what 3 finished health job(s) here took" in settled.basis
    assert "(x2.00), trusted 3/4 of the way" in settled.basis
    one = settle(Estimate(10.0, "x"), Machine("cpu", past={"predict": [(10.0, 7.5)]}), "predict")
    assert one.seconds == pytest.approx(10.0 * 0.75**0.5)
    busy = settle(Estimate(50.0, "probe fits"), Machine("cpu", busy=2.0, past=past), "health")
    assert busy.low < busy.seconds < busy.high  # the other work moves: a range


def test_one_threads_work_is_not_slowed_while_a_core_is_spare(monkeypatch):
    """The 2,000-class health check with its features cached took 34 s alone and 34 s beside a
    CPU hog on 2 cores (its probe fits and cleanlab run on one thread), where the estimate
    slowed all of it x1.4 (90 s: 0.37x). One thread's seconds are slowed only where no core is
    spare."""
    from glee_core.runs import job_estimates
    from glee_core.runs.busy import slowdown

    monkeypatch.setattr(job_estimates, "core_count", lambda: 2)
    report = Estimate(60.0, "a feature pass and probe fits", measured=True)
    hog = Machine("cpu", busy=slowdown(1.0, 2))
    start = min(STARTUP_SECONDS, 60.0)
    alone = settle(report, Machine("cpu"), "health").seconds
    assert alone == 60.0
    one = settle(report, hog, "health", serial=40.0).seconds
    assert one == pytest.approx(start + (60.0 - start - 40.0) * hog.busy + 40.0)
    two = Machine("cpu", busy=slowdown(2.0, 2))  # a hog on each core: no core spare
    assert settle(report, two, "health", serial=40.0).seconds > one


def test_a_job_without_runs_moves_its_bar_and_says_where_it_is():
    """Data reports, the PDF and exports have no runs: their feature pass and steps (or shares)
    are the one reducer's too, so one bar and one time-left rule serve every kind."""
    health = [FeaturePass(format="plain", done=50, total=100)]
    assert fold(health).share() == pytest.approx(0.3)  # the pass: 60% of a report
    health += [
        FeaturePass(format="plain", done=100, total=100),
        Examining(step=3, steps=5, what="fold 2/5", task="data health"),
    ]
    assert fold(health).share() == pytest.approx(0.6 + 0.4 * 2 / 5)
    assert fold(health).describe() == "data health: step 3/5, fold 2/5"
    cached = [Examining(step=2, steps=5, what="fold 1/5")]  # no pass: the steps are all of it
    assert fold(cached).share() == pytest.approx(1 / 5)
    pdf = [Working(what="per-class F1", share=0.4, task="the PDF report")]
    assert fold(pdf).share() == 0.4 and fold(pdf).describe() == "the PDF report: per-class F1"


def test_a_launch_record_of_an_earlier_release_keeps_its_estimate(tmp_path):
    path = tmp_path / "j.json"
    path.write_text(json.dumps({"id": "j", "pid": 1, "estimate_seconds": 90, "stop_share": 0.7}))
    record = Job(path).record
    assert record.command == "train" and record.estimate.seconds == 90.0
    assert record.estimate.stop == 0.7
    values = JobRecord("j", 1, "x", "health", 5.0, estimate=Estimate(3.0, "b")).to_dict()
    assert JobRecord.from_dict(json.loads(json.dumps(values))).estimate == Estimate(3.0, "b")
    path.write_text(json.dumps({"id": "j", "pid": 1, "command": "fly"}))
    assert "a kind of job this release does not run" in Job(path).problem


@pytest.mark.slow
def test_the_same_report_twice_runs_once_and_a_stopped_one_can_run_again(
    tiny_bert, tmp_path, monkeypatch
):
    """Two tabs ask for the same health check at once: one job runs, the other attaches to it;
    stopped, it says so and nothing half-written is left; launched again, it finishes, and its
    real time calibrates the next estimate of its kind. With ``GLEE_JOB_NICE`` the job runs below
    the web process (its session's group niced where the kernel groups by session)."""
    monkeypatch.setenv("GLEE_JOB_NICE", str(JOB_NICE))
    store = RunStore(tmp_path / "runs")
    out = tmp_path / "health"
    request = HealthRequest(
        DataOptions(dataset="demo"), HealthOptions(out=str(out)), str(tiny_bert)
    )
    first = launch(store, request, "health", Estimate(20.0, "guess"))
    second = launch(store, request, "health again", Estimate(20.0, "guess"))
    assert second.id == first.id and second.attached and not first.attached
    wait_until(lambda: first.progress().phase != "starting", 60, "the job starting")
    assert job_priority(first.record.pid) == JOB_NICE  # GLEE_JOB_NICE, set above
    assert first.stop()
    wait_for_jobs(store.root)
    assert first.status == "stopped" and not (out / "health.json").exists()
    estimate = settle(Estimate(20.0, "guess"), Machine(), "health")
    again = launch(store, first.request(), first.label, estimate)
    assert again.id != first.id and not again.attached
    wait_for_jobs(store.root)
    assert again.status == "done", again.log()
    assert (out / "health.json").is_file()
    assert again.made().summary.startswith("the health report written")
    [(base, real)] = past_jobs(store)["health"]
    assert base == 20.0 and real == pytest.approx(again.seconds)


def job_priority(pid: int) -> int:
    """How far process ``pid`` yields the CPU: its session's group's nice where the kernel
    groups by session and let it be set, else its own."""
    group = 0 if niced_work_yields() else environment.group_nice(pid)
    return group or os.getpriority(os.PRIO_PROCESS, pid)


def test_a_command_run_from_a_shell_keeps_its_priority_whatever_the_jobs_setting():
    """``GLEE_JOB_NICE`` lowers the priority of a job the app started (a session of its own);
    a command run from a shell, with it set or not, keeps its shell's."""
    code = "import os; from glee_core.cli import main; main(['methods']); print(os.nice(0))"
    env = {**os.environ, "GLEE_JOB_NICE": "7"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert out.split()[-1] == str(os.getpriority(os.PRIO_PROCESS, 0))


@pytest.mark.parametrize("by_group", [True, False], ids=["session group", "process"])
def test_a_job_is_niced_from_its_first_instruction_not_after_its_imports(by_group, monkeypatch):
    """The launch lowers a job's priority before its interpreter starts (its start and imports
    took a second of CPU at the web process's priority, and a click waited on them): its
    session's group where the kernel groups by session, else the process. The process keeps
    its pid (the shell becomes it), so the job's record still finds it."""
    if by_group and niced_work_yields():
        pytest.skip("the kernel here does not group processes by session")
    monkeypatch.setattr("glee_core.core.environment.niced_work_yields", lambda: not by_group)
    code = "import os; print(os.getpid())"
    process = subprocess.Popen(
        niced_from_the_start([sys.executable, "-c", code + "; import time; time.sleep(5)"], 7),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        pid = int(process.stdout.readline())
        assert pid == process.pid
        assert job_priority(pid) == 7
    finally:
        process.kill()
        process.wait()
    assert niced_from_the_start(["x"], 0) == ["x"]


def test_the_jobs_yield_while_a_page_draws_and_get_their_share_back_after(monkeypatch):
    """Outside public mode a job runs at the web process's priority, except while a page draws
    and :data:`priority.GRACE` seconds after (the browser draws it): then its session's group is
    niced; one launched by the draw (a click's) starts niced. In public mode (niced always)
    nothing changes."""
    if niced_work_yields():
        pytest.skip("the kernel here does not group processes by session")
    monkeypatch.delenv("GLEE_JOB_NICE", raising=False)
    monkeypatch.setenv("GLEE_PUBLIC", "0")
    monkeypatch.setattr(priority, "GRACE", 0.5)
    monkeypatch.setattr(priority._PAGES, "children", [])
    wait_until(lambda: priority.start_nice() == 0, 10, "the grace of an earlier draw over")
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    with priority.pages_drawing():
        nice = priority.start_nice()  # a click's launch
        assert nice == priority.DRAW_NICE
        child = subprocess.Popen(niced_from_the_start(sleeper, nice), start_new_session=True)
        priority.started(child, nice)
        assert priority.started_here() == [child]
    try:
        assert job_priority(child.pid) == priority.DRAW_NICE  # the browser still draws it
        wait_until(lambda: job_priority(child.pid) == 0, 10, "the job's share back")
        assert priority.start_nice() == 0
        with priority.pages_drawing():
            assert job_priority(child.pid) == priority.DRAW_NICE
        wait_until(lambda: job_priority(child.pid) == 0, 10, "the job's share back again")
        monkeypatch.setenv("GLEE_JOB_NICE", "3")  # niced by the setting: a draw nices more
        environment.set_group_nice(child.pid, 3)
        with priority.pages_drawing():
            assert job_priority(child.pid) == priority.DRAW_NICE
        wait_until(lambda: job_priority(child.pid) == 3, 10, "the job's own nice back")
        monkeypatch.setenv("GLEE_PUBLIC", "1")  # niced all the time: left as it is
        monkeypatch.delenv("GLEE_JOB_NICE")
        with priority.pages_drawing():
            assert job_priority(child.pid) == 3
            assert priority.start_nice() == JOB_NICE
    finally:
        child.kill()
        child.wait()
    assert priority.started_here() == []  # reaped


def test_jobs_yield_to_the_pages_by_default_only_where_the_machine_is_the_apps(monkeypatch):
    monkeypatch.delenv("GLEE_JOB_NICE", raising=False)
    monkeypatch.setenv("GLEE_PUBLIC", "1")
    assert job_nice() == JOB_NICE
    monkeypatch.setenv("GLEE_PUBLIC", "0")
    assert job_nice() == 0  # a shared machine: niced, it would yield to every other program
    monkeypatch.setenv("GLEE_JOB_NICE", "7")
    assert job_nice() == 7


def test_self_trainings_estimate_grows_its_heads_and_training_texts_not_dev_and_test(
    tiny_bert, tmp_path
):
    """Self-training's estimate multiplied the whole new variant's compare by how much the pool
    grows the training texts (151-283 s said for 90-198 s): the dev and test splits' feature
    pass and the start do not grow. Its range's low end is the launch without the pseudo-labels."""
    from dataclasses import replace

    from glee_core.data.datasets import load_dataset
    from glee_core.models.config import TrainConfig
    from glee_core.models.requests import TrainRequest
    from glee_core.pool.options import SelfTrainOptions
    from glee_core.train.job_kinds import Here, estimate_self_training, estimate_training

    train = load_dataset("demo").splits["train"]
    pool = tmp_path / "pool.txt"
    pool.write_text("\n".join(f"{t} again" for t in train["text"]) + "\n")  # doubles the texts
    request = TrainRequest(
        DataOptions("demo"),
        ["cls-relu", "probe"],
        [1],
        str(tiny_bert),
        TrainConfig(mode="frozen"),
        self_train=SelfTrainOptions(pool=str(pool), self_train="auto"),
    )
    here = Here(RunStore(tmp_path / "runs"), Machine("cpu"))
    plain = replace(request, self_train=replace(request.self_train, pool=None))
    variant = estimate_training(plain, here, fresh=True)
    estimate = estimate_self_training(request, here)
    assert variant.seconds < estimate.seconds < 2 * variant.seconds
    assert estimate.low < variant.seconds < estimate.high
    assert "if self-training leaves them out" in estimate.basis


def test_a_launch_is_planned_once_and_its_estimate_reads_what_the_job_runs(
    tiny_bert, toy_csv, tmp_path, monkeypatch
):
    """One planning: stored quick-compare heads made without cross-validation still have it due
    when a launch asks for it. The estimate counted only the runs to train ("all 4 run(s) are
    already stored") while the job cross-validated them; now both read one
    :class:`LaunchPlan`, and the job plans it once."""
    from glee_core.models.config import TrainConfig
    from glee_core.models.options import DataOptions
    from glee_core.models.requests import TrainRequest
    from glee_core.train import executors, launch
    from glee_core.train.job_kinds import Here, estimate_training

    store = RunStore(tmp_path / "runs")

    def request(choose_by: str) -> TrainRequest:
        return TrainRequest(
            DataOptions(f"csv:{toy_csv}"),
            ["cls-relu", "probe"],
            [1],
            str(tiny_bert),
            TrainConfig(mode="frozen", choose_by=choose_by, cv_folds=3),
        )

    dataset = request("dev").data.load()
    executors.execute(request("dev"), store, dataset=dataset)
    assert all(run.metrics.cv is None for run in store.runs())
    here = Here(store, Machine("cpu"), dataset, {run.run_id: run for run in store.runs()})

    estimate = estimate_training(request("cv"), here)
    assert (estimate.runs, estimate.stored, estimate.validated) == (0, 4, 4)  # two poolings
    assert "cross-validation" in estimate.basis and estimate.seconds > 2.0

    calls = []
    real = launch.plan_launch

    def counted(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(launch, "plan_launch", counted)
    executors.execute(request("cv"), store, dataset=dataset)
    assert len(calls) == 1  # planned once in the job's process
    assert all(run.metrics.cv is not None and run.metrics.cv.folds == 3 for run in store.runs())
    done = Here(store, Machine("cpu"), dataset, {run.run_id: run for run in store.runs()})
    assert estimate_training(request("cv"), done).basis == "all 4 run(s) are already stored"
