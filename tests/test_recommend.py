"""The recommendation a compare ends on: chosen on dev (never test), the heads within the seeds'
spread, and the next steps; the results table highlights the same choice."""

from dataclasses import dataclass, field, replace

import pytest

from glee_core.runs.recommend import recommend, recommendation_text, within_noise
from glee_core.runs.store import aggregate
from glee_core.runs.tables import comparison_table


@dataclass
class Metrics:
    dev: float
    f1: float
    tail_f1: float

    @property
    def best_dev(self):
        return self.dev

    def value(self, key):
        return {"dev": self.dev, "f1": self.f1, "tail_f1": self.tail_f1, "acc": self.f1,
                "head_f1": self.f1}.get(key)


@dataclass
class Record:
    mode: str
    setting_label: str = field(default="")


@dataclass
class FakeRun:
    """What the recommendation reads of a run (its metrics, setting and method)."""

    method: str
    seed: int
    dev: float
    test: float
    mode: str = "frozen"
    dataset: str = "d"

    @property
    def setting(self):
        return f"m · {self.mode} · p"

    @property
    def record(self):
        return Record(self.mode, f"m · {self.mode}")

    @property
    def metrics(self):
        return Metrics(self.dev, self.test, self.test - 0.02)


def runs_of(scores: dict[str, list[tuple[float, float]]], mode="frozen"):
    return [FakeRun(m, seed, dev, test, mode) for m, pairs in scores.items()
            for seed, (dev, test) in enumerate(pairs, 1)]


def test_the_choice_is_made_on_dev_never_on_test():
    # cls-tanh is best on test, cls-relu-pt-ln on dev: dev decides
    runs = runs_of({"cls-tanh": [(0.70, 0.95)], "cls-relu-pt-ln": [(0.80, 0.75)],
                    "prompt": [(0.60, 0.50)]})
    rec = recommend(runs)
    assert rec.chosen.method == "cls-relu-pt-ln" and rec.candidates == 3
    assert rec.chosen.f1 == pytest.approx(75.0)
    # one seed: no spread, so nothing is called "within noise", and the text says so
    assert rec.close == () and not rec.spread_known
    text = recommendation_text(rec)
    assert "Use `cls-relu-pt-ln`" in text and "spread between seeds is unknown" in text
    # a quick compare's next steps: fine-tune its top heads (prompt-ed/probes excluded by the
    # registry), then seeds 1-3 of the same heads
    assert [step for step, _ in rec.steps] == ["finetune", "seeds"]
    assert rec.steps[0][1] == ("cls-relu-pt-ln", "cls-tanh", "prompt")
    table = comparison_table(aggregate(runs))
    chosen = table[table["selection"] == "chosen on dev"]
    assert list(chosen["method"]) == ["cls-relu-pt-ln"] and "F1" in chosen.iloc[0]["best"]
    assert not table[table["method"] == "cls-tanh"].iloc[0]["best"]  # best test, not chosen


def test_heads_within_the_seeds_spread_are_named():
    runs = runs_of({"cls-relu-pt-ln": [(0.80, 0.8), (0.84, 0.8), (0.82, 0.8)],
                    "cls-tanh": [(0.79, 0.9), (0.81, 0.9), (0.80, 0.9)],
                    "prompt": [(0.50, 0.5), (0.52, 0.5), (0.51, 0.5)]}, mode="finetune")
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
    from studio_ui import md

    rec = recommend(runs_of({"cls-relu-pt-ln": [(0.8, 0.8)], "cls-tanh": [(0.7, 0.9)]}))
    name = "[x](https://e.example) my**model"
    rec = replace(rec, chosen=replace(rec.chosen, setting_label=name))
    assert f"(<{name}>)" in recommendation_text(rec, literal="<{}>".format)
    text = recommendation_text(rec, literal=md)
    assert text.startswith("**Use `cls-relu-pt-ln`** (") and "my\\*\\*model" in text
    assert "https://" not in text  # no autolink: the zero-width space md() puts in
