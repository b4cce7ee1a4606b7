"""Data health (``python -m glee_core health``): a planted mislabelled text is suspected, a text
copied from training into test is reported as a leak, a class too small for the folds is said
to be too few to judge, and the files hold one line per training text, the most suspect first."""

import json

import numpy as np
import pandas as pd
import pytest
import torch

from glee_core.cli import main
from glee_core.core.errors import GleeError
from glee_core.data.datasets import load_dataset
from glee_core.health.examine import data_health
from glee_core.health.options import HealthOptions
from glee_core.health.report import ISSUE_COLUMNS
from glee_core.models.backbone import load_backbone
from glee_core.models.features import Encoder
from tests.conftest import toy_rows

PLANTED = "sports sports the news sports today sports"  # a sports text labelled money
LEAKED = "science the report science said science 7"


@pytest.fixture
def planted_csv(tmp_path):
    rows = toy_rows(scale=2)
    rows["split"] = [
        "train" if i % 10 < 7 else "dev" if i % 10 == 7 else "test" for i in range(len(rows))
    ]
    extra = pd.DataFrame(
        [
            {"text": PLANTED, "label": "money", "split": "train"},
            {"text": LEAKED, "label": "science", "split": "train"},
            {"text": LEAKED, "label": "science", "split": "test"},
        ]
    )
    path = tmp_path / "planted.csv"
    pd.concat([rows, extra], ignore_index=True).to_csv(path, index=False)
    return path


def test_health_finds_the_planted_label_error_and_the_leak(
    planted_csv, tiny_bert, tmp_path, capsys
):
    out = tmp_path / "health"
    code = main(
        [
            "health",
            "--dataset",
            f"csv:{planted_csv}",
            "--model",
            str(tiny_bert),
            "--runs-dir",
            str(tmp_path / "runs"),
            "--out",
            str(out),
            "--folds",
            "3",
            "--device",
            "cpu",
        ]
    )
    assert code == 0
    issues = pd.read_csv(out / "label_issues.csv", keep_default_na=False)
    dataset = load_dataset(f"csv:{planted_csv}")
    assert list(issues.columns) == ISSUE_COLUMNS
    assert len(issues) == len(dataset.splits["train"])  # every training text, once
    assert sorted(issues["train_row"]) == list(range(len(issues)))
    # row: the text's row in the user's file (0-based data rows), so they can find it there
    source = pd.read_csv(planted_csv, keep_default_na=False)
    for _, line in issues.iterrows():
        assert source.loc[line["row"], "text"] == line["text"]
        assert source.loc[line["row"], "split"] == "train"
    assert dataset.splits["train"]["text"].iloc[issues["train_row"][0]] == issues["text"][0]
    quality = pd.to_numeric(issues["label_quality"])
    assert quality.is_monotonic_increasing  # the most suspect first
    planted = issues[issues["text"] == PLANTED].iloc[0]
    assert planted["given_label"] == "money" and planted["suggested_label"] == "sports"
    assert planted["suspected"] in (True, "True")
    assert quality.rank(pct=True)[planted.name] <= 0.05  # among the lowest 5%
    leaked = issues[issues["text"] == LEAKED].iloc[0]
    assert "test:" in leaked["duplicate_rows"]
    health = json.loads((out / "health.json").read_text())
    science = next(c for c in health["classes"] if c["name"] == "science")
    assert science["leaked"] >= 1
    assert any(
        g["across_splits"]
        and {t["split"] for t in g["texts"]} >= {"train", "test"}
        and LEAKED in {t["text"] for t in g["texts"]}
        for g in health["duplicate_groups"]
    )
    assert [c["name"] for c in health["classes"]] == dataset.classes  # head -> tail
    printed = capsys.readouterr().out
    assert "| class | group | texts | suspected |" in printed and "suspected label error" in printed


def test_a_class_too_small_for_the_folds_is_too_few_to_judge(toy_dataset, tiny_bert, tmp_path):
    report = data_health(
        toy_dataset,
        Encoder(load_backbone(str(tiny_bert)), torch.device("cpu"), tmp_path / "features"),
        str(tiny_bert),
        HealthOptions(out=str(tmp_path), folds=10, device="cpu"),
    )
    small = {c.name for c in report.classes if c.texts < 10}
    assert small and {c.name for c in report.classes if not c.judged} == small
    assert set(report.summary()["too_few_to_judge"]) == small
    rows = report.issues[report.issues["given_label"].isin(small)]
    assert len(rows) and rows["label_quality"].isna().all() and not rows["suspected"].any()
    header, table = report.table()
    assert all(row[3] == "too few to judge" for row in table if row[0] in small)


@pytest.mark.parametrize("command", ["health", "budget"])
def test_health_and_budget_refuse_what_they_cannot_judge(command, tmp_path, tiny_bert, capsys):
    with pytest.raises(GleeError, match="at least 2"):
        HealthOptions(out=str(tmp_path), folds=1)
    path = tmp_path / "one.csv"
    pd.DataFrame(
        {"text": [f"sports news {i}" for i in range(12)], "label": ["sports"] * 12}
    ).to_csv(path, index=False)
    code = main(
        [
            command,
            "--dataset",
            f"csv:{path}",
            "--model",
            str(tiny_bert),
            "--out",
            str(tmp_path / "out"),
            "--runs-dir",
            str(tmp_path / "runs"),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error:") and "one class" in err[-1]


def test_a_dataset_without_the_flagged_rows_is_a_variant_of_its_own(toy_csv, tmp_path):
    """--exclude leaves training rows out (health's CSV: its suspected rows; or row numbers);
    the id says so and differs with the rows, so the variant's runs stay apart; a bad file is
    one clear error."""
    from glee_core.models.options import DataOptions

    full = DataOptions(dataset=f"csv:{toy_csv}").load()
    rows = tmp_path / "rows.txt"
    rows.write_text("0\n3\n\n5\n")
    variant = DataOptions(dataset=f"csv:{toy_csv}", exclude=str(rows)).load()
    assert variant.id.startswith(f"{full.id}+without-3-")
    assert len(variant.splits["train"]) == len(full.splits["train"]) - 3
    assert (
        variant.splits["train"]["text"].tolist()
        == full.splits["train"].drop(index=[0, 3, 5])["text"].tolist()
    )
    assert variant.fingerprint() != full.fingerprint()
    issues = tmp_path / "label_issues.csv"
    pd.DataFrame(
        {
            "row": [4, 0, 3, 5],
            "split": "train",
            "text": "x",
            "given_label": "a",
            "suggested_label": "b",
            "label_quality": [0.1, 0.2, 0.3, 0.9],
            "suspected": [False, True, True, True],
        }
    ).to_csv(issues, index=False)
    assert DataOptions(dataset=f"csv:{toy_csv}", exclude=str(issues)).load().id == variant.id
    rows.write_text("0\nthe first\n")
    with pytest.raises(GleeError, match="line 2: 'the first' is not a row number"):
        DataOptions(dataset=f"csv:{toy_csv}", exclude=str(rows)).load()
    rows.write_text("100000\n")
    with pytest.raises(GleeError, match="names training row 100000"):
        DataOptions(dataset=f"csv:{toy_csv}", exclude=str(rows)).load()


def test_the_variant_line_judges_on_dev_with_the_seeds_spread():
    from glee_core.runs.recommend import Pick, Recommendation
    from glee_core.runs.variants import dev_winner, variant_base, variant_line

    def rec(dev, std):
        pick = Pick(
            setting="s",
            setting_label="s",
            mode="frozen",
            method="cls-tanh",
            pooling="cls",
            seeds=3,
            dev=dev,
            dev_std=std,
            f1=0.0,
            f1_std=0.0,
            tail_f1=0.0,
            tail_f1_std=0.0,
        )
        return Recommendation(chosen=pick, close=(), candidates=1, steps=())

    assert variant_line("d", None, "d+without-1-x", rec(80, 1)) is None
    assert "the data without them wins on dev" in variant_line("d", rec(80, 1), "v", rec(85, 1))
    assert "keep them" in variant_line("d", rec(85, 1), "v", rec(80, 1))
    assert "cannot tell them apart" in variant_line("d", rec(80, 2), "v", rec(81, 0.5))
    assert "(+1.0; the same dev texts)" in variant_line("d", rec(80, 2), "v", rec(81, 0.5))
    pseudo = "d+pseudo-9-abc"
    assert "the pseudo-labels win on dev" in variant_line("d", rec(80, 1), pseudo, rec(85, 1))
    assert "leave the pseudo-labels out" in variant_line("d", rec(85, 1), pseudo, rec(80, 1))
    # the winner on dev: a variant only beyond the seeds' spread, the best of several
    assert dev_winner(rec(80, 1), {pseudo: rec(85, 1), "d+pseudo-2-x": rec(83, 1)}) == pseudo
    assert dev_winner(rec(80, 2), {pseudo: rec(81, 0.5)}) == ""
    assert dev_winner(None, {pseudo: rec(85, 1)}) == "" and dev_winner(rec(80, 1), {}) == ""
    assert variant_base(pseudo) == "d" and variant_base("d+without-3-f") == "d"


def test_a_trained_head_gives_the_out_of_fold_probabilities_too(planted_csv, tiny_bert, tmp_path):
    """--method takes any quick-mode head: trained once a fold (as one pack), each scoring the
    texts it never saw; every judged text gets probabilities, the planted error is still
    suspected."""
    dataset = load_dataset(f"csv:{planted_csv}")
    steps = []
    report = data_health(
        dataset,
        Encoder(load_backbone(str(tiny_bert)), torch.device("cpu"), tmp_path / "features"),
        str(tiny_bert),
        HealthOptions(out=str(tmp_path), folds=3, method="cls-relu", device="cpu"),
        steps.append,
    )
    assert report.method == "cls-relu"
    judged = report.issues[report.issues["label_quality"].notna()]
    assert len(judged) == len(report.issues)  # every class of the toy set has 3 texts or more
    quality = pd.to_numeric(report.issues["label_quality"])
    planted = report.issues.index[report.issues["text"] == PLANTED][0]
    assert quality.rank(pct=True)[planted] <= 0.25  # a weak random model still doubts it
    assert any("cls-relu, 3 folds as one pack" in getattr(e, "what", "") for e in steps)
    probe = data_health(
        dataset,
        Encoder(load_backbone(str(tiny_bert)), torch.device("cpu"), tmp_path / "features"),
        str(tiny_bert),
        HealthOptions(out=str(tmp_path), folds=3, device="cpu"),
    )
    assert not np.allclose(
        pd.to_numeric(probe.issues.sort_values("train_row")["label_quality"]),
        pd.to_numeric(report.issues.sort_values("train_row")["label_quality"]),
    )  # the head's own probabilities
    with pytest.raises(GleeError, match="unknown method"):
        HealthOptions(out=str(tmp_path), method="no-such-head")
