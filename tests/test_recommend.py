"""The recommendation a compare ends on: chosen on dev (never test), the heads within the seeds'
spread, and the next steps; the results table highlights the same choice."""

from dataclasses import dataclass, replace
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from glee_core.models.config import TrainConfig
from glee_core.models.methods import get_method
from glee_core.pool.labelling import before_after
from glee_core.runs.metrics import within_noise
from glee_core.runs.recommend import NextStep, order_steps, ranked, recommend
from glee_core.runs.recommend_text import recommendation_text
from glee_core.runs.record import CrossValidation
from glee_core.runs.run_parts import Tuning
from glee_core.runs.store import Run
from glee_core.runs.tables import aggregate, comparison_table


@dataclass
class Metrics:
    dev: float
    f1: float
    tail_f1: float
    cv: CrossValidation | None = None

    @property
    def best_dev(self):
        return self.dev

    def value(self, key):
        return {
            "dev": self.dev,
            "f1": self.f1,
            "tail_f1": self.tail_f1,
            "acc": self.f1,
            "head_f1": self.f1,
            "cv": self.cv.f1 if self.cv else None,
        }.get(key)


@dataclass
class FakeRun:
    """What the recommendation reads of a run (its metrics, record, setting and method); a
    ``cv`` of fold scores makes it a cross-validated quick-mode run."""

    method: str
    seed: int
    dev: float
    test: float
    mode: str = "frozen"
    dataset: str = "d"
    folds: list[float] | None = None
    pooling: str = "cls"
    lp_ft_from: str = ""
    wrong: list[int] | None = None  # the test texts it gets wrong (default: by ``test``)

    @property
    def run_id(self):
        return f"{self.method}-{self.mode}-{self.pooling}-s{self.seed}"

    @property
    def setting(self):
        return f"m · {self.mode} · p · {self.pooling}"

    reads = Run.reads  # what its head reads, as a stored run says it

    @property
    def record(self):
        config = TrainConfig(mode=self.mode, seed=self.seed, pooling=self.pooling, max_length=64)
        return SimpleNamespace(
            mode=self.mode,
            setting_label=f"m · {self.mode}",
            hyperparameters=config,
            method=get_method(self.method),
            model=SimpleNamespace(name="m"),
            tuning=Tuning(lp_ft_from=self.lp_ft_from),
            dataset=SimpleNamespace(
                classes=["a", "b"],
                head_classes=["a"],
                tail_classes=["b"],
                class_counts={"a": 60, "b": 10},
            ),
        )

    classes = ["a", "b"]

    @property
    def predictions(self):  # 100 test texts, a and b in turn
        return pd.DataFrame({"gold": ["a", "b"] * 50})

    @property
    def logits(self):
        """Right on the first ``test`` share of the texts (or on those ``wrong`` does not
        name), wrong on the rest, each by a margin of 1."""
        gold = np.array([0, 1] * 50)
        wrong = self.wrong if self.wrong is not None else range(round(100 * self.test), 100)
        pred = gold.copy()
        pred[list(wrong)] = 1 - pred[list(wrong)]
        return np.eye(2)[pred]

    @property
    def metrics(self):
        cv = (
            None
            if self.folds is None
            else CrossValidation(
                folds=len(self.folds),
                f1=sum(self.folds) / len(self.folds),
                tail_f1=0.0,
                fold_f1=self.folds,
                texts=100,
            )
        )
        return Metrics(self.dev, self.test, self.test - 0.02, cv)


def runs_of(scores: dict[str, list[tuple[float, float]]], mode="frozen"):
    return [
        FakeRun(m, seed, dev, test, mode)
        for m, pairs in scores.items()
        for seed, (dev, test) in enumerate(pairs, 1)
    ]


def test_the_choice_is_made_on_dev_never_on_test():
    # cls-tanh is best on test, cls-relu-pt-ln on dev: dev decides
    runs = runs_of(
        {"cls-tanh": [(0.70, 0.95)], "cls-relu-pt-ln": [(0.80, 0.75)], "prompt": [(0.60, 0.50)]}
    )
    rec = recommend(runs)
    assert rec.chosen.method == "cls-relu-pt-ln" and rec.candidates == 3
    assert rec.chosen.f1 == pytest.approx(75.0)
    # one seed: no spread, so nothing is called "within noise", and the text says so
    assert rec.close == () and not rec.spread_known
    text = recommendation_text(rec)
    assert "Use `cls-relu-pt-ln`" in text and "spread between seeds is unknown" in text
    # a quick compare's next steps: fine-tune its top heads (prompt-ed/probes excluded by the
    # registry), then seeds 1-3 of the same heads
    assert [step.kind for step in rec.steps] == ["finetune-one", "finetune", "seeds"]
    assert rec.steps[0].heads == ("cls-relu-pt-ln",)
    assert rec.steps[1].heads == ("cls-relu-pt-ln", "cls-tanh", "prompt")
    table = comparison_table(aggregate(runs))
    chosen = table[table["selection"] == "chosen on dev"]
    assert list(chosen["method"]) == ["cls-relu-pt-ln"] and "F1" in chosen.iloc[0]["best"]
    assert not table[table["method"] == "cls-tanh"].iloc[0]["best"]  # best test, not chosen


def test_heads_within_the_seeds_spread_are_named():
    runs = runs_of(
        {
            "cls-relu-pt-ln": [(0.80, 0.8), (0.84, 0.8), (0.82, 0.8)],
            "cls-tanh": [(0.79, 0.9), (0.81, 0.9), (0.80, 0.9)],
            "prompt": [(0.50, 0.5), (0.52, 0.5), (0.51, 0.5)],
        },
        mode="finetune",
    )
    rec = recommend(runs)
    assert rec.chosen.method == "cls-relu-pt-ln" and rec.spread_known
    assert [p.method for p in rec.close] == ["cls-tanh"]  # 2 points behind, std 2 points
    assert rec.steps == ()  # fine-tuned with 3 seeds: nothing left to run
    assert "Within the seeds' spread of it on dev: `cls-tanh`" in recommendation_text(rec)
    table = comparison_table(aggregate(runs)).set_index("method")
    assert table.loc["cls-tanh", "selection"] == "within noise"
    assert table.loc["prompt", "selection"] == ""


def test_within_noise_needs_a_spread():
    nan = float("nan")
    assert not within_noise(80.0, nan, 79.9, nan)  # one seed each: nothing to judge by
    assert within_noise(80.0, nan, 79.0, 1.5) and not within_noise(80.0, 0.5, 79.0, 0.4)
    assert recommend([]) is None


def test_a_settings_label_holding_markdown_reads_as_itself_in_the_app():
    """A backbone folder named with Markdown (``my**model``, a link) is the user's text: the app
    escapes it, and only the recommendation's own bold and code spans stay Markdown."""
    from studio_ui.text import md

    rec = recommend(runs_of({"cls-relu-pt-ln": [(0.8, 0.8)], "cls-tanh": [(0.7, 0.9)]}))
    name = "[x](https://e.example) my**model"
    rec = replace(rec, chosen=replace(rec.chosen, setting_label=name))
    assert f"(<{name}>, cls pooling)" in recommendation_text(rec, literal="<{}>".format)
    text = recommendation_text(rec, literal=md)
    assert text.startswith("**Use `cls-relu-pt-ln`** (") and "my\\*\\*model" in text
    assert "https://" not in text  # no autolink: the zero-width space md() puts in


def test_fine_tuning_steps_say_which_better_heads_they_pass_over_and_why():
    """A probe and cRT (fitted on the frozen features) rank above the heads that can be
    fine-tuned: the fine-tuning steps take the best that can, and name the ones passed over
    (each step those ranked above its own last head)."""
    runs = runs_of(
        {
            "probe-balanced": [(0.90, 0.80)],
            "cls-relu": [(0.85, 0.80)],
            "cls-relu-pt-ln-crt": [(0.84, 0.80)],
            "cls-tanh": [(0.80, 0.80)],
            "prompt": [(0.70, 0.80)],
        }
    )
    rec = recommend(runs)
    assert rec.chosen.method == "probe-balanced"
    assert rec.step("finetune-one").heads == ("cls-relu",)
    assert rec.step("finetune").heads == ("cls-relu", "cls-tanh", "prompt")
    assert rec.step("finetune-one").passed_over == ("probe-balanced",)
    assert rec.step("finetune").passed_over == ("probe-balanced", "cls-relu-pt-ln-crt")


def test_where_the_compare_cross_validated_the_choice_follows_it_not_dev():
    """Dev favours cls-tanh (one lucky small split); the pooled out-of-fold scores favour
    cls-relu-pt-ln-cb on mean pooling: cross-validation decides, says so, and counts who wins
    in how many folds."""
    runs = [
        FakeRun("cls-tanh", 1, 0.76, 0.64, folds=[0.60, 0.62, 0.70, 0.61, 0.63]),
        FakeRun(
            "cls-relu-pt-ln-cb", 1, 0.73, 0.68, pooling="mean", folds=[0.66, 0.67, 0.65, 0.69, 0.68]
        ),
        FakeRun("prompt", 1, 0.70, 0.50, folds=[0.50, 0.52, 0.48, 0.51, 0.49]),
    ]
    rec = recommend(runs)
    assert rec.basis == "cv" and rec.chosen.method == "cls-relu-pt-ln-cb"
    assert rec.chosen.pooling == "mean" and rec.chosen.score == pytest.approx(67.0)
    assert (rec.chosen.wins, rec.chosen.cells) == (4, 5)  # cls-tanh won fold 3
    assert rec.spread_known  # one seed, but the folds give a spread
    text = recommendation_text(rec)
    assert "Use `cls-relu-pt-ln-cb`** (m · frozen, mean pooling)" in text
    assert "by 5-fold cross-validation on train + dev (67.0 ± 0.7)" in text
    assert "best in 4 of the 5 folds where the top 3 met; `cls-tanh` (cls) in 1" in text
    assert list(ranked(runs)["method"]) == ["cls-relu-pt-ln-cb", "cls-tanh", "prompt"]
    # its fine-tuning keeps to its pooling; the seeds step to its setting
    assert rec.step("finetune-one").heads == ("cls-relu-pt-ln-cb",)
    table = comparison_table(aggregate(runs)).set_index("method")
    assert table.loc["cls-relu-pt-ln-cb", "selection"] == "chosen by CV"


def test_a_tuned_run_is_placed_on_the_cross_validation_scale_by_its_lift_on_dev():
    """Fine-tuned cls-relu-pt-ln gained 8 dev points over its own quick-mode run (its LP-FT
    stage): 62 + 8 = 70 on the cross-validation scale, ahead of the best quick head (66), though
    a frozen head's inflated dev score (the best of many on a small split) is higher than the
    fine-tuned one's."""
    stage = FakeRun("cls-relu-pt-ln", 1, 0.70, 0.60, folds=[0.62] * 5)
    tuned = FakeRun("cls-relu-pt-ln", 1, 0.78, 0.74, mode="finetune", lp_ft_from=stage.run_id)
    lucky = FakeRun("cls-tanh-focal", 1, 0.83, 0.62, folds=[0.66, 0.65, 0.67, 0.66, 0.66])
    rec = recommend([stage, tuned, lucky])
    assert rec.chosen.method == "cls-relu-pt-ln" and rec.chosen.mode == "finetune"
    assert rec.chosen.score == pytest.approx(70.0)
    assert "with fine-tuning's lift on dev" in recommendation_text(rec)
    assert rec.steps == (NextStep("seeds", ("cls-relu-pt-ln",)),)  # fine-tuned: more seeds next
    # on dev alone the lucky frozen head would have been chosen
    assert (
        recommend([replace(r, folds=None) for r in (stage, tuned, lucky)]).chosen.method
        == "cls-tanh-focal"
    )


def test_next_steps_lead_with_a_fine_tune_that_fits_half_an_hour_else_with_the_cheap_ones():
    steps = [
        NextStep("finetune-one", ("a",)),
        NextStep("finetune", ("a", "b", "c")),
        NextStep("seeds", ("a",)),
    ]
    assert [
        s.kind for s in order_steps(steps, {"finetune-one": 12, "finetune": 30, "seeds": 0.5})
    ] == ["finetune-one", "finetune", "seeds"]
    assert [
        s.kind for s in order_steps(steps, {"finetune-one": 45, "finetune": 100, "seeds": 0.5})
    ] == ["seeds", "finetune-one", "finetune"]


def test_the_untrained_head_sentence_is_true_of_the_recommendation_beside_it():
    """Home said the prompt-style heads "start half-untrained and trail here" under a
    recommendation of one of them (newcomer, round two, item 4)."""
    from glee_core.runs.notes import untrained_head_line

    heads = ["prompt", "cls-relu-pt-ln"]
    assert "trail here" in untrained_head_line("auto", heads, ["cls-relu"])
    said = untrained_head_line("auto", heads, ["cls-relu-pt-ln", "cls-relu"])
    assert "trail" not in said and "`cls-relu-pt-ln` still ranks first" in said


def test_a_tie_keeps_the_frozen_head_and_names_every_candidate_it_ties_with():
    """Saturated evidence (a new user's easy tickets: every head 100 by cross-validation and on
    dev, the fine-tune no better on dev, 13 points worse on test): the fine-tuned run showed no
    lift, so the quick head it started from stays the answer, and the text names the ties
    though one seed gives no spread."""
    stage = FakeRun("cls-relu-pt-ln-la", 1, 1.0, 0.929, folds=[1.0] * 5)
    tuned = FakeRun("cls-relu-pt-ln-la", 1, 1.0, 0.797, mode="finetune", lp_ft_from=stage.run_id)
    other = FakeRun("cls-relu-ln", 1, 1.0, 0.817, folds=[1.0] * 5)
    rec = recommend([tuned, other, stage])
    assert rec.chosen.mode == "frozen" and rec.chosen.score == pytest.approx(100.0)
    assert {(p.method, p.mode) for p in rec.close} == {
        ("cls-relu-pt-ln-la", "frozen"),
        ("cls-relu-pt-ln-la", "finetune"),
    }
    text = recommendation_text(rec)  # the three averaged, each named (the tuned one's mode)
    assert (
        "**Use the average of the top 3**: `cls-relu-ln` (cls), `cls-relu-pt-ln-la` (cls), " in text
    )
    assert "`cls-relu-pt-ln-la` (cls) (m · finetune) are within one standard error" in text
    assert "the data cannot tell them apart" in text
    # chosen on dev with one seed (no spread known): the ties are still named
    on_dev = recommend([replace(r, folds=None) for r in (tuned, other, stage)])
    text = recommendation_text(on_dev)
    assert on_dev.chosen.mode == "frozen" and "spread between seeds is unknown" in text
    assert "2 other candidate(s) score the same" in text and "cannot tell them apart" in text
    # a lift on dev, however small, is evidence: the tuned run is chosen then
    lifted = replace(tuned, dev=1.0 + 1e-3)
    assert recommend([lifted, other, stage]).chosen.mode == "finetune"


def test_candidates_within_a_standard_error_of_the_best_are_averaged_and_that_is_the_answer():
    """The winner's curse (issue #81): three heads within one standard error of the best by
    cross-validation over two seeds, each wrong on a different fifth of the test texts; their
    probabilities averaged are right wherever two of them are, so the answer is the average,
    scored on test at every seed all three have, and the text says the data cannot tell them
    apart. A head
    outside the error is not a member; one seed shared is enough, none is no ensemble."""
    folds = {
        "cls-relu-pt-ln": [0.70, 0.68, 0.72, 0.69, 0.71],  # 70, seed 2 72: 71 ± 1.0 (its error)
        "probe-balanced": [0.69, 0.70, 0.68, 0.71, 0.67],  # 70: within it
        "cls-tanh": [0.70, 0.66, 0.69, 0.70, 0.70],  # 70
        "prompt": [0.60, 0.61, 0.59, 0.60, 0.60],  # 61: out
    }
    wrong = {
        "cls-relu-pt-ln": range(0, 20),
        "probe-balanced": range(20, 40),
        "cls-tanh": range(40, 60),
        "prompt": range(0, 60),
    }
    runs = [
        FakeRun(m, seed, 0.7, 0.8, folds=[x + (seed - 1) / 50 for x in f], wrong=list(wrong[m]))
        for m, f in folds.items()
        for seed in (1, 2)
    ]
    rec = recommend(runs)
    e = rec.ensemble
    assert rec.chosen.method == "cls-relu-pt-ln" and e is not None
    # best first; a tie keeps the registry's order
    assert [p.method for p in e.members] == ["cls-relu-pt-ln", "cls-tanh", "probe-balanced"]
    assert e.seeds == 2 and e.f1 == pytest.approx(100.0) and e.tail_f1 == pytest.approx(100.0)
    assert e.run_ids == [
        "cls-relu-pt-ln-frozen-cls-s1",
        "cls-tanh-frozen-cls-s1",
        "probe-balanced-frozen-cls-s1",
    ]
    text = recommendation_text(rec)
    assert text.startswith(
        "**Use the average of the top 3**: `cls-relu-pt-ln` (cls), `cls-tanh` (cls), "
        "`probe-balanced` (cls) are within one standard error of the best of 4 by 5-fold "
        "cross-validation on train + dev (71.0 ± 1.4)"
    )
    assert (
        "averages their probabilities: on test, macro-F1 100.0 ± 0.0 and tail F1 100.0 ± 0.0 "
        "over 2 seeds; the best, `cls-relu-pt-ln` (cls), alone: 80.0 ± 0.0 and 78.0 ± 0.0 over "
        "2 seeds. `cls-relu-pt-ln` (cls) scored best in" in text
    )
    assert "Within its spread" not in text  # the members are the ones within it
    # read as a run (the Predictions page): its test predictions and scores, averaged
    averaged = e.averaged
    assert averaged.run_id == ",".join(e.run_ids) and averaged.seed == 1
    assert averaged.metrics.f1 == pytest.approx(1.0) and averaged.predictions["correct"].all()
    assert list(averaged.predictions["pred"]) == ["a", "b"] * 50
    # Home's before/after of adding texts compares this answer, the one the user keeps, not
    # the best head alone (issue #80): a seed each, so the spread is the average's
    said = before_after(runs, runs, {"a": 60, "b": 10}, {"b": 5}, ["b"])
    assert said.method_before == (
        "the average of cls-relu-pt-ln (cls) + cls-tanh (cls) + probe-balanced (cls)"
    )
    assert said.tail_f1 == (100.0, 100.0) and said.seeds == (2, 2)
    # the members share no seed: nothing to average
    apart = [r for r in runs if not (r.method == "cls-tanh" and r.seed == 1)]
    apart = [r for r in apart if not (r.method != "cls-tanh" and r.seed == 2)]
    assert recommend(apart).ensemble is None
    # alone at the top: no ensemble; chosen on dev: none either
    assert recommend([r for r in runs if r.method in ("cls-relu-pt-ln", "prompt")]).ensemble is None
    assert recommend([replace(r, folds=None) for r in runs]).ensemble is None
