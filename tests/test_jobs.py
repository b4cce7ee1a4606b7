"""Background jobs as the app sees them: status and progress read from the job's files."""

import json

import pytest

from glee_core.core import events, progress  # its Testing by module: not a test class to collect
from glee_core.core.errors import INTERRUPTED
from glee_core.core.events import Evaluated, FeaturePass, RunStarted, TrainStep
from glee_core.core.pace import time_left
from glee_core.core.progress import fold
from glee_core.train.jobs import Job


def write_job(folder, events, pid=2**22 + 12345, out=None, err=None):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "j1.json").write_text(json.dumps({"id": "j1", "pid": pid, "label": "x"}))
    (folder / "j1.progress.jsonl").write_text(
        "".join(json.dumps(e.to_dict()) + "\n" for e in events) + '{"stage": "tr'
    )  # a torn last line
    if out is not None:
        (folder / "j1.out").write_text(out)
    if err is not None:
        (folder / "j1.err").write_text(err)
    return Job(folder / "j1.json")


def test_progress_of_the_second_of_two_runs_halfway_through_its_epochs(tmp_path):
    job = write_job(
        tmp_path,
        [
            RunStarted(run_id="r2", index=2, total=2, method="prompt", seed=1, cached=False),
            TrainStep(epoch=2, epochs=4, step=5, steps=10),
            Evaluated(epoch=1, epochs=4, dev_f1=0.4, dev_acc=0.5, best_dev=0.4, select_metric="f1"),
        ],
    )
    progress = job.progress()
    assert progress.method == "prompt" and progress.dev_f1 == 0.4
    assert progress.fraction == (1 + 15 / 40) / 2


def test_a_fine_tune_is_not_counted_done_by_its_lp_ft_stages_feature_pass():
    """LP-FT fits its head on the frozen features (a feature pass, then a few seconds of
    training) before the fine-tuning's hour: the pass's share of a quick run must not carry over."""
    quick = [
        RunStarted(run_id="r", index=1, total=1, method="cls-relu-pt-ln", seed=1, cached=False),
        FeaturePass(format="plain", done=50, total=100),
    ]
    share = progress.ENCODING_SHARE  # a quick run: its feature pass is most of its time
    assert fold(quick).fraction == pytest.approx(share / 2)
    quick += [
        FeaturePass(format="plain", done=100, total=100),
        TrainStep(epoch=1, epochs=10, step=5, steps=10),
    ]
    assert fold(quick).fraction == pytest.approx(share + (1 - share) * 5 / 100)
    # a fine-tune's LP-FT stage: the same events, said to be the stage: the bar stays put
    stage = [quick[0], events.Loading(what="LP-FT's head", lp_ft=True), *quick[1:]]
    assert fold(stage).fraction == 0.0
    tuning = stage + [events.Testing(), TrainStep(epoch=1, epochs=10, step=1, steps=10)]
    assert fold(tuning).fraction == pytest.approx(0.01)
    # its search and the rest of the run counted whole: 25 of 400 planned steps
    assert fold(
        tuning + [TrainStep(epoch=1, epochs=10, step=5, steps=10, done=25, total=400)]
    ).fraction == pytest.approx(25 / 400)


def test_a_fine_tunes_bar_expects_early_stopping_as_its_estimate_did():
    """Early stopping ends a fine-tune at about the estimate's share of its planned steps: the
    bar (and the time left, which reads it) counts steps toward that end, so it does not sit at
    two thirds when the job is nearly done (a Reuters upload's race read 373 s left with 61 to
    go); past that share it still nears the end, never passes it, and without a share (a
    quick compare) planned steps say it as before."""
    run = RunStarted(
        run_id="r",
        index=1,
        total=3,
        method="cls-relu-pt-ln",
        seed=1,
        cached=False,
        together=3,
        race=True,
    )

    def at(done: int):
        return fold([run, TrainStep(epoch=1, epochs=10, step=1, steps=10, done=done, total=400)])

    assert at(150).share(0.75) == pytest.approx(0.5)  # 150 of the 300 steps expected
    assert at(150).share() == at(150).fraction == pytest.approx(150 / 400)
    shares = [at(done).share(0.75) for done in range(0, 401, 10)]
    assert shares == sorted(shares) and shares[-1] == 1.0 and max(shares[:-1]) < 1.0
    assert at(240).share(0.75) == pytest.approx(progress.EARLY_STOP_TRUST)  # the knee: 0.8 x 300
    assert at(280).share(0.75) < 1.0  # trains on past the expected end: nears, not passes it
    assert progress.expected_share(0.3, None) == progress.expected_share(0.3, 1.0) == 0.3
    # what the bar says at 720 s of that race, 66% of its planned steps done: ~2.5 min, not 6
    assert time_left(progress.expected_share(0.659, 0.75), 720, 820) < 160
    assert time_left(0.659, 720, 820) > 360


def test_a_fine_tune_whose_lp_ft_head_is_stored_counts_its_steps_from_the_first(
    tiny_bert, toy_dataset, tmp_path
):
    """The quick compare stored the LP-FT head: loading it is no stage, so the bar (and the time
    left, which reads it) moves with the fine-tune's first step, not only when the run ends."""
    from glee_core.models.config import TrainConfig
    from glee_core.models.methods import get_method
    from glee_core.runs.store import RunStore
    from glee_core.train.experiment import run_launch
    from glee_core.train.launch import Launch

    store = RunStore(tmp_path / "runs")
    spec, seen = get_method("cls-relu-pt-ln"), []
    config = TrainConfig(
        recipe="practical", lp_ft=True, lr=1e-4, epochs=1, min_steps=1, batch_size=16, max_length=16
    )
    run_launch(
        Launch(toy_dataset, [spec], [1], str(tiny_bert), config.linear_probe_stage(), store)
    )  # the quick compare's run: the LP-FT head, stored
    run_launch(
        Launch(toy_dataset, [spec], [1], str(tiny_bert), config, store, progress=seen.append)
    )
    loading = [e for e in seen if isinstance(e, events.Loading) and "LP-FT" in e.what]
    assert loading and "stored" in loading[0].what and not loading[0].lp_ft
    steps = [i for i, e in enumerate(seen) if isinstance(e, TrainStep)]
    assert fold(seen[: steps[0] + 1]).fraction > 0


def test_status_of_finished_failed_and_killed_jobs(tmp_path):
    assert write_job(tmp_path / "a", [], out='[{"run_id": "r"}]\n').status == "done"
    failed = write_job(tmp_path / "b", [], err="warning: x\nerror: unknown method 'y'\n")
    assert failed.status == "failed" and failed.error == "unknown method 'y'"
    killed = write_job(tmp_path / "c", [], out="", err="epoch 1/3 ...")
    assert killed.status == "died" and killed.progress().fraction == 0.0  # it said nothing
    killed.file(".stopped").write_text("1")  # ... its Stop button was pressed
    assert killed.status == "stopped"
    interrupted = write_job(tmp_path / "d", [], err=f"error: {INTERRUPTED}\n")
    assert interrupted.status == "stopped"


def test_a_reused_pid_is_neither_running_nor_signalled(tmp_path):
    """The job's pid now names another process (here: this test's own): the job reads as
    ended (it died, saying nothing) and stop() signals nothing."""
    import os

    from glee_core.train.jobs import process_start

    job = write_job(tmp_path, [], pid=os.getpid())
    record = json.loads(job.path.read_text())
    record["pid_start"] = "1"  # not when this process started
    job.path.write_text(json.dumps(record))
    job = Job(job.path)
    assert process_start(os.getpid()) not in (None, "1")
    assert job.status == "died" and job.stop() is False  # and we are still alive


def test_bad_job_records_are_left_out_and_listed_and_the_expiry_sweep_goes_on(tmp_path):
    """`.jobs/<id>.json` = `{"id": "x"}`, empty, a list or garbage: the job list, the Train page
    and the workspace sweep go on without it."""
    import time

    from glee_core.runs.store import RunStore
    from glee_core.serve.workspaces import Workspace, expire
    from glee_core.train.jobs import broken_jobs, list_jobs

    root = tmp_path / "workspaces"
    spaces = [Workspace.create(root) for _ in range(2)]
    for space in spaces:
        folder = space.store.jobs_dir
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "a.json").write_text('{"id": "x"}')
        (folder / "b.json").write_text("")
        (folder / "c.json").write_text("[1, 2]")
        (folder / "d.json").write_bytes(b"\xff\xfe garbage")
        (folder / "e.json").write_text(json.dumps({"id": "e", "pid": 2**22 + 12345}))
    store = RunStore(spaces[0].store.root)
    assert [job.id for job in list_jobs(store)] == ["e"]
    broken = broken_jobs(store)
    assert set(broken) == {"a.json", "b.json", "c.json", "d.json"}
    assert broken["a.json"] == "no process id (pid)" and "not a job record" in broken["c.json"]
    removed = expire(root, ttl_seconds=0, now=time.time() + 10)
    assert sorted(removed) == sorted(space.key for space in spaces)  # both, not just the first


def test_a_run_waiting_for_the_store_says_what_it_waits_for_and_how_long(tmp_path, capsys):
    """The command line waited 10 minutes behind the app's fine-tune saying only "another run
    is training" (newcomer, round two, item 2): it names the job and its time left, and how to
    train beside it."""
    import json as _json
    import os as _os
    import time as _time

    from glee_core.core.bars import TqdmProgress
    from glee_core.core.events import Queued
    from glee_core.runs.store import RunStore
    from glee_core.train.jobs import process_start, running_summary

    store = RunStore(tmp_path / "runs")
    store.jobs_dir.mkdir(parents=True)
    (store.jobs_dir / "job-1.json").write_text(
        _json.dumps(
            {
                "id": "job-1",
                "pid": _os.getpid(),
                "start": process_start(_os.getpid()),
                "label": "Fine-tune cls-relu-pt-ln",
                "started": _time.time() - 60,
                "estimate_seconds": 900,
            }
        )
    )
    said = running_summary(store)
    assert "the job 'Fine-tune cls-relu-pt-ln' (about 14 min left)" in said
    bars = TqdmProgress([])
    bars(Queued(run_id="r", behind=said))
    bars.close()
    err = capsys.readouterr().err
    assert "Fine-tune cls-relu-pt-ln" in err and "another --runs-dir" in err
