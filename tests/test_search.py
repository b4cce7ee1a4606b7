"""The learning-rate search: kept as it goes, so a stopped launch resumes without training the
dropped rates again; searched once for a backbone and data, so the next heads train at once;
and counted whole in the progress, so the bar and the time left never start over."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from glee_core.core.events import Note, RunStarted, Searching, TrainStep
from glee_core.core.pace import time_left
from glee_core.core.progress import fold
from glee_core.models.backbone import load_backbone
from glee_core.models.config import TrainConfig
from glee_core.models.methods import get_method
from glee_core.models.search import halve
from glee_core.models.search_log import SURE, Cut, Round, SearchLog, sureness
from glee_core.runs.estimate import Workload, estimate_seconds
from glee_core.runs.store import RunStore
from glee_core.train.experiment import run_launch
from glee_core.train.launch import Launch
from glee_core.train.plan import plan_runs, searched_rate
from glee_core.train.setup import Setup, TrainingContext
from glee_core.train.training import train_and_evaluate

ROOT = Path(__file__).resolve().parents[1]
SEARCH = TrainConfig(
    lr_candidates="1e-5,1e-3,3e-3,1e-2",
    epochs=6,
    batch_size=16,
    patience=8,
    recipe="paper",
    seed=3,
    precision="fp32",
)


@pytest.fixture(scope="module")
def bert(tiny_bert):
    return load_backbone(str(tiny_bert))


@pytest.fixture
def trials(monkeypatch):
    """The rates every trial was started at (each trial starts from the run's weights)."""
    started = []
    new_trial = Setup.new_trial

    def counted(self, lr, work=None):
        started.append(lr)
        return new_trial(self, lr, work)

    monkeypatch.setattr(Setup, "new_trial", counted)
    return started


def train(dataset, bert, log=None, method="cls-relu", events=None):
    return train_and_evaluate(
        TrainingContext(dataset, bert, events.append if events is not None else None),
        get_method(method),
        SEARCH,
        search_log=log,
    )


def test_a_stopped_search_resumes_after_its_last_round_with_the_same_result(
    bert, toy_dataset, tmp_path, trials
):
    whole = train(toy_dataset, bert)
    rounds = whole.tuning.lr_search
    assert len(rounds) == 2 and [len(r.dev) for r in rounds] == [4, 2]
    # a launch stopped after round 1 left this behind
    log = SearchLog(tmp_path, "run-a")
    grid = [f"{lr:g}" for lr in SEARCH.lr_grid]
    log.write(grid, rounds[:1])
    trials.clear()
    resumed = train(toy_dataset, bert, log)
    assert sorted(trials) == sorted(float(lr) for lr in rounds[0].kept)  # not the dropped
    assert resumed.tuning.lr_search == rounds and resumed.tuning.lr == whole.tuning.lr
    np.testing.assert_allclose(resumed.logits, whole.logits, rtol=1e-5, atol=1e-6)
    # stopped after the search had ended: the chosen rate alone, the same model
    log.write(grid, rounds, f"{whole.tuning.lr:g}")
    trials.clear()
    again = train(toy_dataset, bert, log)
    assert trials == [whole.tuning.lr]
    np.testing.assert_allclose(again.logits, whole.logits, rtol=1e-5, atol=1e-6)
    # the log of another set of candidates is not this search's
    assert SearchLog(tmp_path, "run-a").resumed(["1e-05", "0.001"]) is None


def test_each_cut_of_the_search_says_how_sure_dev_is_and_a_close_call_is_noted(bert, toy_dataset):
    """Every round records the rate kept last against the best one dropped and on what share
    of dev's bootstrap resamples it scored above it; the chosen rate's note says so, and a run
    whose search made a cut dev cannot call keeps that in its notes (card, report, CLI)."""
    events = []
    result = train(toy_dataset, bert, events=events)
    rounds = result.tuning.lr_search
    for r in rounds:
        cut = r.sure
        assert cut.kept in r.kept and cut.over in r.dev
        assert cut.over not in r.kept and 0 <= cut.share <= 1
    chosen = [e.message for e in events if isinstance(e, Note) and "chosen on dev" in e.message]
    assert "how sure the search was" in chosen[0]
    assert f"round 2 kept {rounds[1].kept[0]} over {rounds[1].sure.over}" in chosen[0]
    close = any(r.sure.share < SURE for r in rounds)
    assert any("how sure the search was" in note for note in result.notes) == close


def test_the_words_for_how_sure_a_search_was():
    def cut(number, kept, over, share):
        return Round([kept], number, sure=Cut(kept, over, share))

    clear = sureness([cut(1, "2e-05", "0.0002", 0.97), cut(2, "2e-05", "5e-05", 0.95)])
    assert clear[1] is False and "round 1 kept 2e-05 over 0.0002 on 97%" in clear[0]
    close = sureness([cut(1, "5e-05", "0.0001", 0.58), cut(2, "2e-05", "5e-05", 0.97)])
    assert close[1] is True and "dev cannot tell the two apart" in close[0]
    assert sureness([Round(["a"], 1)]) is None  # a log from before it was kept
    # a record's round reads back as it was written, a cut that is not one kept and not believed
    old = {"round": 1, "kept": ["a"], "sure": {"kept": "a", "over": "b", "share": 2}}
    assert Round.from_dict(old).to_dict() == old and Round.from_dict(old).sure is None
    damaged = {"round": 2, "kept": "0.01"}  # not a list of names: kept as read, none believed
    assert Round.from_dict(damaged).to_dict() == damaged and Round.from_dict(damaged).kept == []


def test_a_rate_searched_once_serves_the_next_heads(bert, toy_dataset, tmp_path, trials):
    first = train(toy_dataset, bert, SearchLog(tmp_path, "run-first", shared="k"))
    assert len(trials) == 4
    trials.clear()
    log = SearchLog(tmp_path, "run-second", shared="k")
    once = TrainConfig(**{**SEARCH.__dict__, "lr_search": "once"})
    second = train_and_evaluate(
        TrainingContext(toy_dataset, bert), get_method("cls-tanh"), once, search_log=log
    )
    assert trials == [first.tuning.lr] and second.tuning.lr == first.tuning.lr
    assert second.tuning.lr_from == "run-first"
    # another backbone or data is another key: it searches
    trials.clear()
    train_and_evaluate(
        TrainingContext(toy_dataset, bert),
        get_method("cls-tanh"),
        once,
        search_log=SearchLog(tmp_path, "run-third", shared="other"),
    )
    assert len(trials) == 4


def test_the_progress_counts_every_trial_and_never_goes_back(bert, toy_dataset):
    events = [RunStarted(run_id="r", method="cls-relu", seed=3, index=1, total=1, cached=False)]
    train(toy_dataset, bert, events=events)
    steps = [e for e in events if isinstance(e, TrainStep)]
    # the plan: 4 trials a round (1 epoch), 2 a second round, the chosen one to 6 epochs
    per_epoch = steps[0].steps
    assert steps[0].total == per_epoch * (6 + 1 * (4 + 2 - 2))
    assert [e.done for e in steps] == list(range(1, len(steps) + 1))
    fractions = [fold(events[:i]).fraction for i in range(1, len(events) + 1)]
    assert fractions == sorted(fractions)
    last_step = events.index(steps[-1]) + 1
    assert fractions[last_step - 1] == pytest.approx(steps[-1].done / steps[-1].total)
    assert fractions[-1] == 1.0  # tested
    searching = [e for e in events if isinstance(e, Searching) and not e.chosen]
    assert [(e.round, e.candidate) for e in searching] == [
        (1, 1),
        (1, 2),
        (1, 3),
        (1, 4),
        (2, 1),
        (2, 2),
    ]


def test_fine_tuning_two_heads_searches_the_rate_once(tiny_bert, toy_dataset, tmp_path):
    """The practical recipe's default: the first head's search chooses, the second trains at
    its rate and says whose search it was; both runs record it."""
    config = TrainConfig(
        lr_candidates="1e-4,1e-2", epochs=2, batch_size=16, min_steps=1, lp_ft="no"
    )
    store = RunStore(tmp_path / "runs")
    first, second = run_launch(
        Launch(
            toy_dataset,
            [get_method("cls-relu"), get_method("cls-tanh")],
            [1],
            str(tiny_bert),
            config,
            store,
        )
    )
    assert first.record.hyperparameters.lr_search == "once"
    assert first.record.tuning.lr_search and first.record.tuning.lr_from is None
    assert second.record.tuning.lr_from == first.run_id
    assert second.record.tuning.lr == first.record.tuning.lr
    assert "rate searched once" in second.record.protocol
    assert not list((store.searches_dir).glob("*-s1-*.json"))  # stored runs: their logs go


@pytest.mark.slow
def test_a_killed_fine_tune_resumes_its_search_where_it_stopped(tiny_bert, toy_csv, tmp_path):
    runs = tmp_path / "runs"
    command = [
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
        "--lr-candidates",
        "1e-5,1e-4,1e-3,1e-2",
        "--epochs",
        "200",
        "--batch-size",
        "4",
        "--lp-ft",
        "no",
        "--patience",
        "10",
        "--precision",
        "fp32",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.time() + 240
    logs = runs / ".searches"
    while time.time() < deadline and not any(  # round 1 ended (round 2 takes seconds)
        json.loads(p.read_text()).get("rounds") for p in logs.glob("*-s1-*.json")
    ):
        assert child.poll() is None, child.communicate()
        time.sleep(0.05)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    [log] = logs.glob("*-s1-*.json")
    left = json.loads(log.read_text())
    assert left["chosen"] is None and len(left["rounds"]) == 1
    kept = left["rounds"][0]["kept"]
    finished = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert f"resumes after round 1 of 2: {', '.join(kept)}" in finished.stderr
    [run] = RunStore(runs).runs()
    assert [len(r.dev) for r in run.record.tuning.lr_search] == [4, 2]
    assert not list(logs.glob("*-s1-*.json"))  # the run's own log goes; the shared rate stays
    assert json.loads(next(logs.glob("shared-*.json")).read_text())["run_id"] == run.run_id


def test_the_time_left_starts_from_the_estimate_and_moves_to_the_pace():
    assert time_left(0.0, 10, None) is None  # nothing to go by yet
    assert time_left(0.01, 60, 1200) == pytest.approx(1140)  # the launch estimate, less elapsed
    assert time_left(0.5, 600, 1200) == pytest.approx(600)  # its own pace from 25% on
    # in between, a blend: at 12.5% done after 300 s, the pace says 2,100 s, the estimate 900 s
    assert time_left(0.125, 300, 1200) == pytest.approx(0.5 * 2100 + 0.5 * 900)
    assert time_left(0.2, 100, None) == pytest.approx(400)


class ScriptedTrial:
    """A trial whose dev scores are given: each evaluation it trains to takes the next one."""

    def __init__(self, scores: list[float], trained: int = 0):
        self.scores, self.trained_here = scores, 0
        self.selection = SimpleNamespace(
            history=[],
            best_score=-1.0,
            loss=float("inf"),
            config=SimpleNamespace(select_metric="f1"),
            standing=lambda n: (
                max((r["dev_f1"] for r in self.selection.history[:n]), default=-1.0),
                self.selection.history[n - 1]["dev_loss"],
            ),
            lead=lambda other, n: None,  # no dev predictions here: the cut's share unknown
        )
        self.state = SimpleNamespace(global_step=0)
        self._evaluate(trained)

    def _evaluate(self, n: int) -> None:
        for _ in range(n):
            score = self.scores[len(self.selection.history)]
            self.selection.history.append(
                {"dev_f1": score, "dev_loss": 1 - score, "eval_seconds": 0.0}
            )
            self.selection.best_score = max(self.selection.best_score, score)
            self.selection.loss = 1 - score
            self.state.global_step += 10

    def advance(self, evaluations=None) -> None:
        self.trained_here += evaluations
        self._evaluate(evaluations)


def test_a_trial_that_comes_trained_is_ranked_where_it_stood_and_trains_only_where_behind():
    """The race takes the rate search's winner on as its first head's trial (two rounds
    trained already): round 1 ranks it by its first evaluation, not its later better one, and
    it trains only past the point it had reached."""
    ahead = ScriptedTrial([0.5, 0.9, 0.95], trained=2)
    second, third = ScriptedTrial([0.6, 0.7]), ScriptedTrial([0.4, 0.8])
    rounds = []
    winner, steps, _ = halve(
        [ahead, second, third],
        ["a", "b", "c"],
        1,
        [3, 2],
        rounds,
        lambda done, left: None,
        lambda *a: None,
        lambda event: None,
    )
    assert rounds[0].dev == {"a": 0.5, "b": 0.6, "c": 0.4}  # where each stood at round 1
    assert rounds[0].kept == ["b", "a"] and rounds[1].kept == ["a"]
    assert winner is ahead and ahead.trained_here == 0  # never trained again
    assert (second.trained_here, third.trained_here) == (2, 1)
    assert steps == 20 + 10  # the dropped trials' steps: second's two rounds, third's one


def test_the_best_of_several_heads_races_and_is_what_it_would_be_alone(
    tiny_bert, toy_dataset, tmp_path
):
    """--heads best: three heads race at the rate searched once; the one left is the one run
    stored, its record holds the race; its weights are those it reaches trained alone."""
    config = TrainConfig(
        lr_candidates="1e-4,1e-2",
        epochs=4,
        batch_size=16,
        min_steps=1,
        heads="best",
        precision="fp32",
    )
    store = RunStore(tmp_path / "runs")
    events = []
    heads = ["cls-relu", "cls-tanh", "cls-relu-ln"]
    runs = run_launch(
        Launch(
            toy_dataset,
            [get_method(m) for m in heads],
            [1],
            str(tiny_bert),
            config,
            store,
            progress=events.append,
        )
    )
    [winner] = runs
    race = winner.record.tuning.race
    assert [len(r.dev) for r in race] == [3, 2] and race[-1].kept == [winner.method]
    # each cut says how sure dev was, in the race's note too; a close call stays with the run
    assert race[-1].sure.kept == winner.method and 0 <= race[-1].sure.share <= 1
    won = next(e.message for e in events if isinstance(e, Note) and "won the race" in e.message)
    assert "how sure the race was" in won
    close = any(r.sure.share < SURE for r in race)
    assert any("how sure the race was" in n for n in winner.record.notes) == close
    assert winner.record.tuning.lr_search  # the rate's search, on the first head
    assert winner.record.tuning.lr_from != winner.run_id
    assert [r.method for r in store.runs() if r.record.mode == "finetune"] == [winner.method]
    assert any(isinstance(e, Searching) and e.head == "cls-tanh" for e in events)
    # the first head's trial at the chosen rate is the rate search's winner: the race's first
    # round trains it no step (its search round was that round)
    first_round = next(
        i
        for i, e in enumerate(events)
        if isinstance(e, Searching) and e.head == "cls-relu" and e.round == 1
    )
    assert not isinstance(events[first_round + 1], TrainStep)
    assert (
        isinstance(events[first_round + 1], Searching)
        and events[first_round + 1].head == "cls-tanh"
    )
    started = next(e for e in events if isinstance(e, RunStarted) and e.race)
    assert fold([started]).describe().endswith("the best of 3 heads (a race on dev)")
    fractions = [fold(events[:i]).fraction for i in range(1, len(events) + 1)]
    assert fractions == sorted(fractions)
    # the winner trained alone at the rate the race ran at: the very same model
    alone = run_launch(
        Launch(
            toy_dataset,
            [get_method(winner.method)],
            [1],
            str(tiny_bert),
            TrainConfig(
                lr=winner.record.tuning.lr, epochs=4, batch_size=16, min_steps=1, precision="fp32"
            ),
            RunStore(tmp_path / "alone"),
        )
    )[0]
    np.testing.assert_allclose(alone.logits, winner.logits, rtol=1e-5, atol=1e-6)
    assert not list(store.searches_dir.glob("race-*.json"))  # stored: the race's log goes
    # the rate stays shared: another seed of these heads (raced or not) trains at it, and its
    # time estimate pays no search
    seed_two = TrainConfig(
        lr_candidates="1e-4,1e-2", epochs=4, batch_size=16, min_steps=1, precision="fp32"
    )
    [again] = plan_runs(toy_dataset, [get_method("cls-tanh")], [2], str(tiny_bert), seed_two)
    assert searched_rate(store, again) == winner.record.tuning.lr
    assert searched_rate(RunStore(tmp_path / "empty"), again) is None

    def estimate(**known):
        return estimate_seconds(
            Workload(
                toy_dataset, 1, seed_two, str(tiny_bert), 10_000, "cpu", lp_ft_stages=0, **known
            ),
            [],
        )

    assert estimate(rate_searched=True).seconds < estimate().seconds
    assert (
        "searched once before for this backbone and data, re-used"
        in estimate(rate_searched=True).basis
    )
    with pytest.raises(ValueError, match="another mode than --mode frozen"):
        TrainConfig(mode="frozen", heads="best")


def test_the_bar_shows_the_dev_score_of_the_trial_it_names():
    """During trial 2/4 of the rate search the bar showed trial 1's dev F1 (newcomer, round
    two, item 8): a new trial starts without one until it is evaluated."""
    from glee_core.core.events import Evaluated, Searching
    from glee_core.core.progress import ProgressState

    state = ProgressState()
    state.apply(Searching(lr=1e-5, candidate=1, candidates=4, round=1, rounds=2))
    state.apply(
        Evaluated(epoch=1, epochs=5, dev_f1=0.728, dev_acc=0.8, best_dev=0.728, select_metric="f1")
    )
    assert state.dev_f1 == 0.728
    state.apply(Searching(lr=5e-5, candidate=2, candidates=4, round=1, rounds=2))
    assert state.dev_f1 is None and "0.728" not in state.describe()
    state.apply(
        Evaluated(epoch=1, epochs=5, dev_f1=0.61, dev_acc=0.7, best_dev=0.61, select_metric="f1")
    )
    assert state.dev_f1 == 0.61


def test_the_rate_choice_bench_sets_runs_at_two_rates_side_by_side(
    tiny_bert, toy_dataset, tmp_path, capsys
):
    """bench/rate_choice.py: runs that differ only by their rate form one group, each rate a
    row (test, dev F1, dev losses), and each dev criterion's pick is scored against test."""
    from bench import rate_choice

    store = RunStore(tmp_path / "runs")
    for rate in (1e-4, 1e-2):
        config = TrainConfig(lr=rate, epochs=1, batch_size=16, precision="fp32")
        run_launch(
            Launch(toy_dataset, [get_method("cls-relu")], [1], str(tiny_bert), config, store)
        )
    assert rate_choice.main(["--runs-dir", str(store.root)]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith(f"| {toy_dataset.id} | 1 |")]
    assert [row.split(" | ")[3] for row in rows] == ["0.0001", "0.01"]
    for name in rate_choice.CRITERIA:
        assert re.search(rf"{name}: picked the rate best on test in [01] of 1 group\(s\)", out)
