"""``reproduce``: the paper's tables as a command, our numbers beside the reference ones."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from glee_core import GleeError
from glee_core.cli import main
from glee_core.data.catalog import PAPER_DATASETS
from glee_core.models.methods import METHODS
from glee_core.runs.paper import PAPER_SEEDS, reference_results, reference_sources
from glee_core.runs.paper_tables import (
    comparison,
    comparison_block,
    comparison_markdown,
    comparison_text,
)
from glee_core.runs.store import Run, RunStore
from glee_core.train.reproduce import (
    PAPER_TABLES,
    get_table,
    paper_seeds,
    protocol_config,
    saved_comparisons,
)
from tests.conftest import toy_rows
from tests.helpers.runs import record_only_run

HYPER = {
    "epochs": 10,
    "batch_size": 32,
    "lr": 1e-5,
    "weight_decay": 0.0,
    "max_grad_norm": 1.0,
    "warmup_ratio": 0.1,
    "patience": 2,
    "max_length": 256,
    "limit": None,
    "backbone": "finetune",
}


def fake_run(
    root: Path,
    dataset: str,
    method: str,
    seed: int,
    metrics: dict,
    model: str = "bert-base-uncased",
    **hyper,
) -> Run:
    """A run folder with just what tables read: config.json and metrics.json."""
    folder = root / f"{dataset}-{method}-s{seed}-{model.replace('/', '-')}"
    config = {
        "dataset": {"id": dataset},
        "method": {"id": method},
        "seed": seed,
        "model": {"name": model},
        "backbone_mode": "finetune",
        "hyperparameters": {**HYPER, **hyper, "seed": seed},
    }
    return record_only_run(folder, config, metrics, ["a", "b"])


def metrics(acc, f1, head, tail):
    return {"acc": acc, "f1": f1, "head_f1": head, "tail_f1": tail}


@pytest.fixture
def fake_store(tmp_path):
    """Table 2 on r52 and cmid: known numbers per seed (fractions, as runs store them)."""
    runs = []
    for i, method in enumerate(PAPER_TABLES[2].methods):
        for seed, delta in ((775, 0.0), (776, 0.02)):
            base = 0.5 + 0.1 * i + delta
            runs.append(
                fake_run(
                    tmp_path,
                    "r52",
                    method,
                    seed,
                    metrics(base, base - 0.1, base + 0.05, base - 0.2),
                )
            )
            runs.append(
                fake_run(
                    tmp_path, "cmid", method, seed, metrics(base / 2, base / 3, base / 4, base / 5)
                )
            )
    return runs


def cell(frame, method, dataset, metric):
    row = frame[
        (frame["method"] == method) & (frame["dataset"] == dataset) & (frame["metric"] == metric)
    ]
    assert len(row) == 1
    return row.iloc[0]


def test_table_cells_hold_the_runs_numbers_mean_and_sample_std(fake_store):
    table = get_table(2)
    frame = comparison(fake_store, table, ["r52", "cmid"])
    # 5 methods x (2 datasets + AVG) x 4 metrics
    assert len(frame) == 5 * 3 * 4
    for i, method in enumerate(table.methods):
        base = 0.5 + 0.1 * i
        r52_acc = cell(frame, method, "r52", "acc")
        assert r52_acc["mean"] == pytest.approx(100 * (base + 0.01))
        assert r52_acc["std"] == pytest.approx(2**0.5)  # sample std (n - 1) of {b, b + 2}
        assert r52_acc["seeds"] == 2
        tail = cell(frame, method, "cmid", "tail_f1")
        assert tail["mean"] == pytest.approx(100 * np.mean([base / 5, (base + 0.02) / 5]))
        avg_f1 = cell(frame, method, "AVG", "f1")
        assert avg_f1["mean"] == pytest.approx(
            np.mean([cell(frame, method, d, "f1")["mean"] for d in ("r52", "cmid")])
        )
    # the last method has the highest numbers everywhere: best in every column, alone
    best = frame[frame["best"]]
    assert set(best["method"]) == {"prompt-focal"}
    assert len(best) == 3 * 4


def test_reference_values_and_differences_fill_the_cells_that_have_them(fake_store):
    frame = comparison(fake_store, get_table(2), ["r52", "cmid"])
    refs = reference_results().set_index(["dataset", "method"])
    r52 = cell(frame, "prompt", "r52", "tail_f1")
    assert r52["ref"] == refs.loc[("r52", "prompt"), "tail_f1"]
    assert r52["ref_source"] == refs.loc[("r52", "prompt"), "source"]
    assert r52["diff"] == pytest.approx(r52["mean"] - r52["ref"])
    assert (
        r52["ref_source"] == "paper"
        and r52["ref_std"] == refs.loc[("r52", "prompt"), "tail_f1_std"]
    )
    logs = reference_results("released-logs").set_index(["dataset", "method"])
    assert r52["logs"] == pytest.approx(logs.loc[("r52", "prompt"), "tail_f1"])
    cmid = cell(frame, "prompt", "cmid", "f1")  # the paper's Table 2 cell: 43.4 ± 0.7
    assert (cmid["ref"], cmid["ref_std"], cmid["ref_source"]) == (43.4, 0.7, "paper")
    assert np.isnan(cmid["logs"])  # the released logs are R52 only
    avg = cell(frame, "prompt", "AVG", "f1")  # AVG of the chosen datasets' references
    assert avg["ref"] == pytest.approx(
        (cmid["ref"] + cell(frame, "prompt", "r52", "f1")["ref"]) / 2
    )
    demo = comparison(
        [fake_run(fake_store[0].path.parent, "demo", "prompt", 775, metrics(0.5, 0.5, 0.5, 0.5))],
        get_table(2),
        ["demo"],
    )
    assert np.isnan(cell(demo, "prompt", "demo", "f1")["ref"])  # the paper has no demo
    assert np.isnan(cell(demo, "prompt", "AVG", "f1")["ref"])  # AVG only when all are there


def test_layout_is_the_papers_two_blocks_with_avg_last_and_best_marked(fake_store):
    table = get_table(2)
    frame = comparison(fake_store, table, ["r52", "cmid"])
    first = comparison_block(frame, ("acc", "f1"))
    assert list(first.columns) == ["R52 Acc", "R52 F1", "CMID Acc", "CMID F1", "AVG Acc", "AVG F1"]
    assert [name for name, kind in first.index if kind == "ours"] == [
        METHODS[m].paper_row for m in table.methods
    ]
    prompt_row = first.loc[(METHODS["prompt"].paper_row, "ours")]
    mean = cell(frame, "prompt", "r52", "acc")
    assert prompt_row["R52 Acc"] == f"{mean['mean']:.2f} ± {mean['std']:.2f}"
    assert first.loc[(METHODS["prompt-focal"].paper_row, "ours"), "AVG F1"].endswith("*")
    ref_row = first.loc[(METHODS["prompt"].paper_row, "ref")]
    ref_acc = reference_results().set_index(["dataset", "method"]).loc[("r52", "prompt"), "acc"]
    ref_std = reference_results().set_index(["dataset", "method"]).loc[("r52", "prompt"), "acc_std"]
    assert ref_row["R52 Acc"] == f"{ref_acc:.2f} ± {ref_std:.2f}"
    assert ref_row["CMID Acc"] != "–"  # the paper reports every Table 2 cell
    assert first.loc[(METHODS["prompt"].paper_row, "logs"), "CMID Acc"] == "–"
    second = comparison_block(frame, ("head_f1", "tail_f1"))
    assert list(second.columns)[:2] == ["R52 Head F1", "R52 Tail F1"]

    markdown = comparison_markdown(frame, table)
    assert "### Acc / F1" in markdown and "### Head F1 / Tail F1" in markdown
    best_cell = first.loc[(METHODS["prompt-focal"].paper_row, "ours"), "R52 Acc"]
    assert f"**{best_cell[:-1]}**" in markdown
    assert "Making Pretrained Language Models Good Long-tailed Learners" in markdown
    assert "released run logs" in markdown  # the source of each reference row is named
    assert "sample std" in markdown
    text = comparison_text(frame, table)
    assert prompt_row["R52 Acc"] in text and "AVG F1" in text


def test_blocks_without_any_reference_value_leave_out_the_ref_rows(tmp_path):
    runs = [fake_run(tmp_path, "demo", "prompt", 775, metrics(0.5, 0.4, 0.6, 0.3))]
    block = comparison_block(comparison(runs, get_table(2), ["demo"]), ("acc", "f1"))
    assert {kind for _, kind in block.index} == {"ours"}
    missing = block.loc[(METHODS["cls-tanh"].paper_row, "ours")]
    assert list(missing) == ["–"] * 4  # a method without runs shows dashes, not zeros


def test_runs_of_two_settings_for_one_dataset_are_refused(tmp_path):
    runs = [
        fake_run(tmp_path, "r52", "prompt", 775, metrics(0.5, 0.5, 0.5, 0.5)),
        fake_run(tmp_path, "r52", "prompt", 776, metrics(0.5, 0.5, 0.5, 0.5), epochs=1),
    ]
    with pytest.raises(GleeError, match="several settings"):
        comparison(runs, get_table(2), ["r52"])


def test_reference_file_names_a_source_for_every_row_and_only_known_ids():
    frame = reference_results()
    sources = reference_sources()
    assert {"paper", "released-logs"} <= set(sources)
    assert set(frame["source"]) <= set(sources)
    assert set(frame["method"]) <= set(METHODS) and set(frame["dataset"]) <= set(PAPER_DATASETS)
    values = frame[["acc", "f1", "head_f1", "tail_f1"]].to_numpy()
    assert ((values[~np.isnan(values)] > 0) & (values[~np.isnan(values)] <= 100)).all()
    assert set(frame[frame["dataset"] == "r52"]["method"]) == {
        m for m in METHODS if METHODS[m].paper
    }
    assert not np.isnan(frame["acc"]).any()  # Table 5 prints accuracy only; the rest all four
    # every table's rows and columns are the paper's own
    assert PAPER_TABLES[2].methods == (
        "cls-tanh",
        "cls-tanh-eta-norm",
        "cls-tanh-focal",
        "prompt",
        "prompt-focal",
    )
    assert len(PAPER_TABLES[3].methods) == 11 and "prompt-ed" not in PAPER_TABLES[5].methods
    assert PAPER_TABLES[5].datasets == ("ecom", "rte", "boolq")


PAPER_DIR = Path(__file__).resolve().parents[2] / "shared" / "paper"


@pytest.mark.skipif(not PAPER_DIR.is_dir(), reason="../shared/paper is not present")
def test_shipped_reference_data_is_the_checked_transcription():
    from glee_core.runs.paper import REFERENCE_DIR

    for name in ("glee_tables.csv", "glee_r52_logs.csv", "glee_scripts.csv"):
        shipped = pd.read_csv(REFERENCE_DIR / name)
        pd.testing.assert_frame_equal(shipped, pd.read_csv(PAPER_DIR / name))
    logs = pd.read_csv(PAPER_DIR / "glee_r52_logs.csv")
    assert sorted(set(logs["seed"])) == list(PAPER_SEEDS)
    assert set(logs["method"]) == {m for m in METHODS if METHODS[m].paper}


def test_protocols_follow_the_authors_run_scripts():
    long_tailed = protocol_config(get_table(2), "r52", "cls-tanh")
    assert (
        long_tailed.epochs,
        long_tailed.patience,
        long_tailed.select_metric,
        long_tailed.learning_rate,
        long_tailed.limit,
        long_tailed.batch_size,
        long_tailed.max_length,
        long_tailed.eval_every_steps,
    ) == (10, 2, "f1", 1e-5, None, 32, 256, 100)
    assert protocol_config(get_table(2), "msra", "prompt").eval_every_steps == 1000
    assert protocol_config(get_table(3), "r8", "cls-relu-pt-ln") == protocol_config(
        get_table(3), "r52", "cls-relu-pt-ln"
    )  # r8 runs as r52 does
    few = protocol_config(get_table(5), "rte", "cls-tanh")
    assert (
        few.epochs,
        few.patience,
        few.select_metric,
        few.limit,
        few.batch_size,
        few.max_length,
        few.eval_every_steps,
        few.lr,
    ) == (5, 5, "acc", 32, 2, 128, 1, 1e-5)
    assert protocol_config(get_table(5), "rte", "prompt").lr == 3e-5  # the script's own lr
    assert protocol_config(get_table(5), "boolq", "prompt").lr == 1e-5
    assert protocol_config(get_table(5), "rte", "cls-tanh", {"epochs": 2, "limit": 8}).limit == 8
    assert (
        protocol_config(get_table(5), "rte", "cls-tanh", {"limit": 1000}).limit == 32
    )  # few-shot stays few-shot
    quick = protocol_config(get_table(3), "r52", "prompt", {"mode": "frozen"})
    assert quick.learning_rate == 1e-3 and quick.eval_every_steps == 100  # heads alone: 1e-3
    demo = protocol_config(get_table(2), "demo", "prompt", {"epochs": 1})  # no script: defaults
    assert (demo.epochs, demo.eval_every_steps, demo.lr) == (1, None, None)
    assert paper_seeds(5) == list(PAPER_SEEDS) and paper_seeds(7)[-1] == 781
    with pytest.raises(GleeError, match="--table"):
        get_table(4)
    with pytest.raises(GleeError, match="--seeds"):
        paper_seeds(0)


def write_paper_layout(root: Path) -> Path:
    """A tiny ``r52`` folder in the paper's layout, labelled with the toy classes."""
    folder = root / "r52"
    folder.mkdir(parents=True)
    rows = toy_rows(scale=1)
    for name, part in (("train", rows), ("dev", rows.iloc[::3]), ("test", rows.iloc[1::2])):
        part.to_csv(folder / f"{name}.tsv", sep="\t", index=False)
    classes = list(dict.fromkeys(rows["label"]))
    (folder / "label2idx.json").write_text(json.dumps({c: i for i, c in enumerate(classes)}))
    (root / "verbalizers").mkdir()
    (root / "verbalizers" / "r52.verbalizer").write_text(
        json.dumps({c: c.split("_")[0] for c in classes})
    )
    return root


def test_reproduce_limit_end_to_end_on_a_tiny_model(tmp_path, tiny_bert, capsys):
    data = write_paper_layout(tmp_path / "data")
    runs_dir = tmp_path / "runs"
    argv = [
        "reproduce",
        "--table",
        "2",
        "--datasets",
        "r52",
        "--model",
        str(tiny_bert),
        "--seeds",
        "2",
        "--epochs",
        "1",
        "--limit",
        "40",
        "--data-dir",
        str(data),
        "--runs-dir",
        str(runs_dir),
        "--device",
        "cpu",
    ]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "Table 2" in out and "R52 Tail F1" in out and "released run logs" in out
    assert "The paper's findings on these runs" in out  # the checklist follows the table
    assert err.count("training") == 10  # 5 methods x 2 seeds
    assert "hold one class only" in err  # --limit 40 of a class-sorted set: warned
    store = RunStore(runs_dir)
    [manifest] = saved_comparisons(store)
    assert manifest["table"] == 2 and manifest["seeds"] == [775, 776]
    assert {f["verdict"] for f in manifest["findings"]} <= {
        "holds",
        "does not hold",
        "cannot judge",
    }
    assert len(manifest["run_ids"]) == 10
    runs = [store.get(i) for i in manifest["run_ids"]]
    assert all(r.record.hyperparameters.limit == 40 for r in runs)
    # the authors' protocol: their head/tail rule, dev every 100 steps (fewer here: scored at
    # the end), w/ pt. LN without dropout is a method of its own
    assert {r.record.dataset.head_tail_rule for r in runs} == {"released"}
    assert {r.record.hyperparameters.eval_every_steps for r in runs} == {100}
    frame = pd.read_csv(manifest["files"]["csv"])
    prompt = [r for r in runs if r.method == "prompt"]
    f1 = frame[
        (frame["method"] == "prompt") & (frame["dataset"] == "r52") & (frame["metric"] == "f1")
    ].iloc[0]
    assert f1["mean"] == pytest.approx(100 * np.mean([r.metrics.f1 for r in prompt]))
    assert (f1["ref"], f1["ref_std"]) == (85.3, 0.6)  # the paper's Table 2 cell
    assert Path(manifest["files"]["md"]).read_text().startswith("## Table 2")
    assert len(store.runs()) == 10 and store.problems == {}  # reproduce/ is not a broken run

    # again: every run comes from the store, the same table comes out
    assert main(argv) == 0
    out_again, err_again = capsys.readouterr()
    assert "training" not in err_again and err_again.count("stored, loading") == 10
    assert out_again.split("Command:")[0] == out.split("Command:")[0]


def test_reproduce_says_which_datasets_are_missing_before_training(tmp_path, capsys):
    code = main(
        [
            "reproduce",
            "--table",
            "2",
            "--data-dir",
            str(tmp_path),
            "--runs-dir",
            str(tmp_path / "runs"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: cannot load cmid")
    assert "r52: r52:" not in err and "cmid: cmid:" not in err
    assert "msra" in err and "--datasets" in err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    assert main(["reproduce", "--table", "4"]) == 2
    assert main(["reproduce", "--table", "2", "--datasets", "demo"]) == 2
    assert "not one of the paper's datasets" in capsys.readouterr().err


def test_an_out_of_vocabulary_label_word_stops_before_any_run_trains(tmp_path, tiny_bert):
    from glee_core.data.datasets import load_dataset
    from glee_core.models.config import TrainConfig
    from glee_core.train.experiment import run_launch
    from glee_core.train.launch import Launch

    rows = toy_rows().assign(label=lambda f: f["label"].str.replace("food", "zymurgy"))
    path = tmp_path / "oov.csv"
    rows.to_csv(path, index=False)
    dataset = load_dataset(f"csv:{path}")
    store = RunStore(tmp_path / "runs")
    methods = [METHODS["cls-tanh"], METHODS["prompt"]]  # the CLS run would come first
    with pytest.raises(GleeError, match="zymurgy"):
        run_launch(
            Launch(
                dataset,
                methods,
                [1],
                str(tiny_bert),
                TrainConfig(epochs=1, batch_size=16, limit=20, recipe="paper"),
                store,
            )
        )
    assert store.runs() == []


def test_a_vocabulary_that_misses_the_datas_language_is_noted(tmp_path, tiny_bert):
    from glee_core.data.datasets import load_dataset
    from glee_core.models.config import TrainConfig
    from glee_core.runs.notes import unreadable_note
    from glee_core.train.experiment import run_launch
    from glee_core.train.launch import Launch

    rows = toy_rows().assign(text=lambda f: "病症治疗 " + f["text"])  # not in the vocabulary
    path = tmp_path / "zh.csv"
    rows.to_csv(path, index=False)
    events = []
    [run] = run_launch(
        Launch(
            load_dataset(f"csv:{path}"),
            [METHODS["cls-relu"]],
            [1],
            str(tiny_bert),
            TrainConfig(epochs=1, batch_size=16, limit=20, recipe="paper"),
            RunStore(tmp_path / "runs"),
            progress=events.append,
        )
    )
    [note] = [e.message for e in events if e.stage == "note" and "unknown token" in e.message]
    assert note in run.record.notes
    assert unreadable_note([run.record]) == note  # what Home shows beside its recommendation


def test_reproduce_runs_a_subset_of_the_rows_and_the_app_keeps_it(tmp_path, tiny_bert, capsys):
    data = write_paper_layout(tmp_path / "data")
    argv = [
        "reproduce",
        "--table",
        "3",
        "--datasets",
        "r52",
        "--methods",
        "prompt,cls-relu",
        "--model",
        str(tiny_bert),
        "--seeds",
        "1",
        "--epochs",
        "1",
        "--limit",
        "20",
        "--data-dir",
        str(data),
        "--runs-dir",
        str(tmp_path / "runs"),
        "--format",
        "md",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    table = out.split("The paper's findings")[0]  # the checklist names every finding's rows
    assert out.startswith("## Table 3") and "CLS-tuning ∘ R " in table
    assert "w/ pt. LN" not in table
    from glee_core.train.reproduce import table_of

    [manifest] = saved_comparisons(RunStore(tmp_path / "runs"))
    assert table_of(manifest).methods == ("cls-relu", "prompt")  # the table's order
    assert main(argv[:3] + ["--methods", "nope"]) == 2
    assert "Table 3 has" in capsys.readouterr().err
