"""What to label next from a pool of unlabelled texts: the query strategies, ``suggest`` on a
tiny random BERT where a rare class is findable in the pool, the labelled file back through
``train --add``, and every bad input as one line."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from glee_core.cli import main
from glee_core.core.errors import GleeError
from glee_core.data.datasets import load_dataset
from glee_core.models.heads import probe_classifier
from glee_core.pool.files import NONE_OF_THESE, read_labelled_texts, read_pool
from glee_core.pool.options import SuggestOptions
from glee_core.pool.pseudo import pseudo_labels
from glee_core.pool.strategies import (
    LEAN,
    QUERY_STRATEGIES,
    PoolFeatures,
    resolve_strategy,
    select,
)
from tests.conftest import FILLER

RARE = ("food", "tech_support")  # the toy set's two smallest classes (6 and 4 texts, x2)


def pool_rows(per_class: dict[str, int], offset: int = 500) -> pd.DataFrame:
    """New texts of the toy set's classes (its keyword among other words), none in it."""
    rows = []
    for c_index, (name, n) in enumerate(per_class.items()):
        keyword = name.split("_")[0]
        for i in range(n):
            words = [FILLER[(i * 3 + j + c_index) % len(FILLER)] for j in range(4)]
            words.insert(i % 4, keyword)
            rows.append({"text": " ".join(words) + f" {offset + i}", "truth": name})
    return pd.DataFrame(rows)


@pytest.fixture
def pool_file(tmp_path):
    frame = pool_rows({"sports": 60, "money": 30, "science": 10, "food": 6, "tech_support": 6})
    path = tmp_path / "pool.csv"
    frame[["text"]].to_csv(path, index=False)
    return path, frame


def test_the_strategies_pick_what_they_say():
    probs = np.array(
        [
            [0.9, 0.05, 0.05],  # sure, head
            [0.5, 0.45, 0.05],  # a near tie
            [0.2, 0.1, 0.7],  # likely the rare class
            [0.34, 0.33, 0.33],  # a tie of three
            [0.1, 0.8, 0.1],
        ]
    )
    labelled = np.array([100, 20, 2])
    assert set(select("margin", probs, labelled)[:2]) == {1, 3}
    assert select("rare", probs, labelled)[0] == 2
    # balanced: the fewest-labelled predicted class first, then the next, in turns
    assert list(select("balanced", probs, labelled)[:3]) == [2, 4, 3]
    assert sorted(select("random", probs, labelled)[:5]) == [0, 1, 2, 3, 4]
    assert len(select("margin", probs, labelled)) == 5  # every row, in the order to ask
    # rare-margin: of the likely tail texts, the least sure first (row 2's rare share is the
    # larger, row 5 - a near tie between the two rarest - wins on the margin)
    tied = np.vstack([probs, [0.02, 0.46, 0.52]])
    assert select("rare", tied, labelled)[0] == 2
    assert select("rare-margin", tied, labelled)[0] == 5
    assert resolve_strategy("auto", True) == "tail-margin"
    assert resolve_strategy("auto", False) == "margin"
    assert SuggestOptions.__dataclass_fields__["strategy"].metadata["choices"] == tuple(
        QUERY_STRATEGIES
    )
    with pytest.raises(GleeError, match="--strategy must be one of auto, random"):
        resolve_strategy("best", True)


def test_tail_margin_weighs_rarity_softly_and_reads_the_lengths_where_they_lean_to_the_tail():
    """tail-margin (auto where there is a tail): each class weighed by 1 / (labelled + 3), so
    the one-label class's sure text no longer outranks a middle class's near tie, as it does
    for rare-margin; times the pool texts' feature lengths only where the labelled texts show
    the rarer classes' texts are the longer ones."""
    labelled = np.array([100, 10, 1])
    probs = np.array([[0.05, 0.0, 0.95], [0.1, 0.55, 0.35]])  # sure and rarest; a middle tie
    assert select("rare-margin", probs, labelled)[0] == 0
    assert select("tail-margin", probs, labelled)[0] == 1
    labels = np.repeat([0, 1, 2], labelled)
    unit = np.ones((len(labels), 2)) / np.sqrt(2)
    pool = np.array([[10.0, 0.0], [1.0, 0.0]])  # the sure rarest text has the longer vector
    to_tail = PoolFeatures(pool, unit * (1.0 + labels[:, None]), labels)  # rarer: longer
    to_head = PoolFeatures(pool, unit * (3.0 - labels[:, None]), labels)  # rarer: shorter
    assert to_tail.norm_lean(labelled) > 0 > to_head.norm_lean(labelled)
    assert select("tail-margin", probs, labelled, features=to_tail)[0] == 0
    assert select("tail-margin", probs, labelled, features=to_head)[0] == 1
    # a lean too slight to read (the head's texts half short, half long; the tail's between)
    lengths = np.where(np.arange(len(labels)) % 2, 2.0, 1.0)
    lengths[labels > 0] = 1.5
    slight = PoolFeatures(pool, np.stack([lengths, 0 * lengths], 1), labels)
    assert 0 < slight.norm_lean(labelled) < LEAN
    assert select("tail-margin", probs, labelled, features=slight)[0] == 1
    # the strategies that read no features pick the same with them
    for name in ("margin", "rare", "rare-margin", "balanced", "random"):
        assert list(select(name, probs, labelled, features=to_tail)) == list(
            select(name, probs, labelled)
        )


def test_pseudo_labels_keep_each_class_to_its_labelled_share_of_the_pool():
    """A class-balanced probe predicts the rare class for many pool texts; the pseudo-labels
    keep at most its labelled share (here 10 of 110 labelled: 10 of 110 pool texts), the most
    confident first, and the record counts each class."""
    rng = np.random.default_rng(0)
    centres = np.array([[3.0, 0.0], [0.0, 3.0]])
    labels = np.array([0] * 100 + [1] * 10)
    labelled = centres[labels] + rng.normal(0, 1.2, (110, 2))
    pool_labels = np.array([0] * 100 + [1] * 10)
    pool = centres[pool_labels] + rng.normal(0, 1.2, (110, 2))
    predicted = probe_classifier(labelled, labels, True).predict(pool)
    assert (predicted == 1).sum() > 10  # the balanced probe over-predicts the rare class
    found = pseudo_labels(labelled, labels, pool, 2)
    assert found.per_class[1] == 10 and found.per_class[0] <= 100
    assert sum(found.per_class.values()) == len(found.rows) == len(found.labels)
    kept = found.rows[found.labels == 1]  # its surest 10: right more often than all of them
    assert (pool_labels[kept] == 1).mean() > (pool_labels[predicted == 1] == 1).mean()
    assert found.generations == 1


def test_suggest_finds_the_rare_class_in_the_pool_and_train_adds_it(
    tiny_bert, toy_csv, pool_file, tmp_path, capsys
):
    path, frame = pool_file
    runs = tmp_path / "runs"
    found = {}
    for strategy in ("random", "rare"):
        out = tmp_path / f"{strategy}.csv"
        assert (
            main(
                [
                    "suggest",
                    "--dataset",
                    f"csv:{toy_csv}",
                    "--pool",
                    str(path),
                    "--n",
                    "12",
                    "--strategy",
                    strategy,
                    "--model",
                    str(tiny_bert),
                    "--runs-dir",
                    str(runs),
                    "--out",
                    str(out),
                ]
            )
            == 0
        )
        summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        table = pd.read_csv(out, keep_default_na=False)
        assert list(table.columns) == [
            "pool_row",
            "text",
            "predicted",
            "confidence",
            "strategy",
            "rank",
            "label",
        ]
        assert list(table["rank"]) == list(range(1, 13)) and set(table["label"]) == {""}
        # pool_row is the text's row in the file
        assert (frame["text"].to_numpy()[table["pool_row"]] == table["text"]).all()
        found[strategy] = int(np.isin(frame["truth"].to_numpy()[table["pool_row"]], RARE).sum())
        assert summary["pool_texts"] == len(frame) and summary["left_out_as_duplicates"] == 0
    assert found["rare"] > found["random"], found  # 12 of 112 are of the two rarest classes
    # the suggestions labelled (the truth, one "none of these", one skipped) and added
    table = pd.read_csv(tmp_path / "rare.csv", keep_default_na=False)
    table["label"] = frame["truth"].to_numpy()[table["pool_row"]]
    table.loc[0, "label"], table.loc[1, "label"] = NONE_OF_THESE, ""
    labelled = tmp_path / "labelled.csv"
    table.to_csv(labelled, index=False)
    base = load_dataset(f"csv:{toy_csv}")
    added = load_dataset(f"csv:{toy_csv}", add=labelled)
    assert added.id.startswith(f"{base.id}+added-10-")
    assert len(added.splits["train"]) == len(base.splits["train"]) + 10
    assert added.splits["dev"].equals(base.splits["dev"])  # the same dev and test texts
    assert any("1 answered '(none of these)' are not added" in w for w in added.warnings)
    assert (
        main(
            [
                "train",
                "--dataset",
                f"csv:{toy_csv}",
                "--add",
                str(labelled),
                "--method",
                "cls-tanh",
                "--mode",
                "frozen",
                "--pooling",
                "cls",
                "--choose-by",
                "dev",
                "--epochs",
                "1",
                "--model",
                str(tiny_bert),
                "--runs-dir",
                str(runs),
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)[0]["dataset"] == added.id


def test_a_pool_that_is_all_duplicates_or_empty_is_one_line(tiny_bert, toy_csv, tmp_path, capsys):
    base = load_dataset(f"csv:{toy_csv}")
    copies = tmp_path / "copies.txt"
    copies.write_text("\n".join(base.splits["train"]["text"].head(30)) + "\n\n")
    common = [
        "suggest",
        "--dataset",
        f"csv:{toy_csv}",
        "--model",
        str(tiny_bert),
        "--runs-dir",
        str(tmp_path / "runs"),
        "--out",
        str(tmp_path / "s.csv"),
    ]
    assert main([*common, "--pool", str(copies)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "is already in the dataset" in err[-1] and err[-1].startswith("error: ")
    assert not (tmp_path / "s.csv").exists()  # nothing half-written
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n")
    assert main([*common, "--pool", str(empty)]) == 2
    assert "the pool holds no text" in capsys.readouterr().err
    assert main([*common, "--pool", str(tmp_path / "missing.csv")]) == 2
    assert "pool file not found" in capsys.readouterr().err
    assert main([*common, "--pool", str(copies), "--n", "0"]) == 2
    assert "--n must be at least 1" in capsys.readouterr().err


def test_a_pool_with_labels_and_a_labelled_file_with_other_classes(tmp_path, toy_csv):
    labelled_pool = tmp_path / "pool.csv"
    pd.DataFrame({"text": ["a b", "c d", ""], "label": ["x", "y", "z"]}).to_csv(
        labelled_pool, index=False
    )
    pool, notes = read_pool(labelled_pool)
    assert list(pool["pool_row"]) == [0, 1]
    assert any("its column 'label' is not read" in n for n in notes)
    assert any("1 empty row(s) left out" in n for n in notes)
    classes = load_dataset(f"csv:{toy_csv}").classes
    wrong = tmp_path / "wrong.csv"
    pd.DataFrame({"text": ["a", "b"], "label": ["sports", "Sport"]}).to_csv(wrong, index=False)
    with pytest.raises(GleeError, match="label\\(s\\) 'Sport' are not classes of the dataset"):
        read_labelled_texts(wrong, classes)
    unlabelled = tmp_path / "unlabelled.csv"
    pd.DataFrame({"text": ["a"], "label": [""]}).to_csv(unlabelled, index=False)
    with pytest.raises(GleeError, match="no labelled row to add"):
        read_labelled_texts(unlabelled, classes)


def test_suggests_spreadsheet_cells_read_back_as_they_were(tmp_path, toy_csv):
    """suggest writes its CSV for spreadsheets ('=... for a formula-looking text); train --add
    reads the texts back as they were in the pool, not with the quote."""
    from glee_core.runs.tables import spreadsheet_csv

    labelled = tmp_path / "labelled.csv"
    labelled.write_text(
        spreadsheet_csv(
            pd.DataFrame(
                {
                    "pool_row": [0, 1],
                    "text": ["=1+1 sums", "'quoted' text"],
                    "label": ["money", "food"],
                }
            )
        )
    )
    assert "'=1+1 sums" in labelled.read_text()
    added, _ = read_labelled_texts(labelled, load_dataset(f"csv:{toy_csv}").classes)
    assert list(added["text"]) == ["=1+1 sums", "'quoted' text"]


def test_self_training_adds_class_rebalanced_pseudo_labels_and_says_so(
    tiny_bert, toy_csv, pool_file, tmp_path, capsys
):
    """train --pool FILE --self-train yes: the pseudo-labels join the training split of a
    +pseudo- variant (its runs apart), the record says how many each class got; auto decides
    by cross-validation on the labelled texts and says which way."""
    path, _ = pool_file
    common = [
        "train",
        "--dataset",
        f"csv:{toy_csv}",
        "--pool",
        str(path),
        "--method",
        "cls-tanh",
        "--mode",
        "frozen",
        "--pooling",
        "cls",
        "--choose-by",
        "dev",
        "--epochs",
        "1",
        "--model",
        str(tiny_bert),
        "--runs-dir",
        str(tmp_path / "runs"),
    ]
    assert main([*common, "--self-train", "yes"]) == 0
    [run] = json.loads(capsys.readouterr().out)
    assert "+pseudo-" in run["dataset"]
    from glee_core.runs.store import RunStore

    [stored] = [r for r in RunStore(tmp_path / "runs").runs() if "+pseudo-" in r.dataset]
    said = next(w for w in stored.record.dataset.warnings if w.startswith("self-training"))
    assert re.search(r"^self-training kept \d+ of 112 pool texts \(\d+%\) as pseudo-labels", said)
    assert "up to its share of the labelled texts times the pool's size" in said
    assert "1 generation(s)): " in said
    base = load_dataset(f"csv:{toy_csv}")
    assert stored.record.dataset.sizes["train"] > len(base.splits["train"])
    assert main([*common, "--self-train", "auto"]) == 0
    assert "self-training " in capsys.readouterr().err  # kept or left out, and why
    assert main([*common, "--self-train", "yes", "--executor", "ray"]) == 2
    assert "--pool trains on this machine's executor only" in capsys.readouterr().err


@pytest.mark.slow
def test_a_suggest_killed_while_encoding_the_pool_leaves_nothing_and_runs_again(
    tiny_bert, toy_csv, tmp_path
):
    """A ``suggest`` killed midway (its pool half encoded): no suggestions file, no feature
    cache, nothing half-written; the relaunch starts clean and finishes."""
    import os
    import signal
    import subprocess
    import sys
    import time

    frame = pool_rows({"sports": 3000, "money": 1000, "food": 200})  # seconds to encode
    path = tmp_path / "pool.csv"
    frame[["text"]].to_csv(path, index=False)
    out, runs = tmp_path / "next.csv", tmp_path / "runs"
    command = [
        sys.executable,
        "-m",
        "glee_core",
        "suggest",
        "--dataset",
        f"csv:{toy_csv}",
        "--pool",
        str(path),
        "--n",
        "20",
        "--model",
        str(tiny_bert),
        "--runs-dir",
        str(runs),
        "--out",
        str(out),
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    job = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env)
    seen, deadline = b"", time.monotonic() + 120
    try:
        while b"(the pool)" not in seen and time.monotonic() < deadline:
            chunk = job.stderr.read1(4096) if hasattr(job.stderr, "read1") else b""
            if not chunk and job.poll() is not None:
                break
            seen += chunk
        assert b"(the pool)" in seen, seen.decode(errors="replace")[-2000:]
        job.send_signal(signal.SIGKILL)
    finally:
        job.kill()
        job.wait()
    from glee_core.models.features import FeatureSpace, text_keys

    written = sorted(p.name for p in runs.rglob("*") if p.is_file())
    assert not out.exists()
    assert not [n for n in written if n.endswith(".tmp") or n.startswith("tmp")], written
    keys = text_keys(frame.assign(text_b=""))
    spaces = [FeatureSpace(folder) for folder in (runs / ".features").glob("*-*")]
    assert all(space.missing(keys).all() for space in spaces)  # none of the pool's kept
    again = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    table = pd.read_csv(out, keep_default_na=False)
    assert len(table) == 20
    spaces = [FeatureSpace(folder) for folder in (runs / ".features").glob("*-*")]
    assert any(not space.missing(keys).any() for space in spaces)  # cached this time


def test_labelled_texts_in_dev_or_test_are_left_out_and_counted(toy_csv, tmp_path):
    """PC10: ``train --add`` with a labelled file holding 5 of the data's test texts and 5 of
    its dev texts added all 10 to training while they stayed in test and dev: a silent leak
    that inflated the "+added" gain."""
    base = load_dataset(f"csv:{toy_csv}")
    classes = base.classes
    leaked = pd.concat(
        [base.splits["test"].head(5), base.splits["dev"].head(5)], ignore_index=True
    ).assign(label=lambda f: [classes[c] for c in f["label"]])
    new = pd.DataFrame({"text": ["a new text one", "a new text two"], "label": classes[:2]})
    labelled = tmp_path / "labelled.csv"
    pd.concat([leaked[["text", "label"]], new]).to_csv(labelled, index=False)
    added = load_dataset(f"csv:{toy_csv}", add=labelled)
    assert added.id.startswith(f"{base.id}+added-2-")  # the two new texts, not the ten
    assert len(added.splits["train"]) == len(base.splits["train"]) + 2
    assert not set(added.splits["train"]["text"]) & set(base.splits["test"]["text"])
    assert any(
        "10 labelled text(s) left out: they are in the dev or test" in w for w in added.warnings
    )
    only = tmp_path / "only-leaked.csv"
    leaked[["text", "label"]].to_csv(only, index=False)
    with pytest.raises(GleeError, match="already in the data \\(training, dev or test\\)"):
        load_dataset(f"csv:{toy_csv}", add=only)
