"""The command line as users and the app call it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from glee_core.cli import main
from glee_core.models.methods import METHODS

ROOT = Path(__file__).resolve().parents[1]


def run_cli(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_methods_and_datasets_list_one_id_per_line(capsys):
    code, out, _ = run_cli(capsys, "methods")
    assert code == 0 and out.split() == list(METHODS) and out.split()[0] == "cls-tanh"
    code, out, _ = run_cli(capsys, "datasets")
    assert out.split() == [
        "demo",
        "r52",
        "r8",
        "cmid",
        "iflytek",
        "ctc",
        "msra",
        "ecom",
        "rte",
        "boolq",
    ]


@pytest.mark.slow
def test_a_reader_that_leaves_early_gets_no_traceback():
    """``python -m glee_core methods | head -1``: the pipe closed before the list is written is
    the reader's choice, not a bug to report."""
    child = subprocess.Popen(
        [sys.executable, "-m", "glee_core", "methods"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    child.stdout.close()
    error = child.stderr.read().decode()
    assert child.wait() == 141 and "Traceback" not in error and "error:" not in error


def test_inspect_prints_sizes_counts_and_head_tail(capsys):
    code, out, _ = run_cli(capsys, "inspect", "--dataset", "demo")
    info = json.loads(out)
    assert code == 0 and info["head_classes"][:2] == ["trivia", "ai"]
    assert info["repeated_texts"] == {"within": {"train": 0, "dev": 0, "test": 0}, "across": 0}
    assert set(info["head_classes"]) | set(info["tail_classes"]) == set(info["class_counts"])


@pytest.mark.slow
def test_cli_end_to_end_on_demo(tiny_bert, tmp_path):
    """train -> compare -> score through the real entry point, as a user runs it."""
    runs = tmp_path / "runs"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    train = subprocess.run(
        [
            sys.executable,
            "-m",
            "glee_core",
            "train",
            "--dataset",
            "demo",
            "--method",
            "prompt,cls-relu-pt-ln",
            "--epochs",
            "1",
            "--limit",
            "200",
            "--model",
            str(tiny_bert),
            "--runs-dir",
            str(runs),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert train.returncode == 0, train.stderr
    results = json.loads(train.stdout.strip().splitlines()[-1])
    assert [r["method"] for r in results] == ["prompt", "cls-relu-pt-ln"]
    assert set(results[0]) == {
        "run_id",
        "dataset",
        "method",
        "seed",
        "reads",
        "acc",
        "f1",
        "head_f1",
        "tail_f1",
    }
    assert [r["reads"] for r in results] == ["[MASK]", "cls"]  # a prompt head, a pooled one
    assert all((runs / r["run_id"] / "metrics.json").is_file() for r in results)
    assert "training" in train.stderr and "epoch 1/1" in train.stderr  # progress on stderr

    compare = subprocess.run(
        [sys.executable, "-m", "glee_core", "compare", "--runs-dir", str(runs), "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    rows = json.loads(compare.stdout)
    assert {r["method"] for r in rows} == {"prompt", "cls-relu-pt-ln"}
    f1 = 100 * results[0]["f1"]
    assert next(r for r in rows if r["method"] == "prompt")["F1"] == f"{f1:.2f}"  # 1 seed: no ±

    score = subprocess.run(
        [
            sys.executable,
            "-m",
            "glee_core",
            "score",
            "--run",
            str(runs / results[0]["run_id"]),
            "--text",
            "how do i sort a list",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    scores = json.loads(score.stdout)
    assert score.returncode == 0 and "trivia" in scores and "coding" in scores
    assert sum(scores.values()) == pytest.approx(1.0, abs=1e-4)


def test_second_train_call_loads_from_the_store(capsys, tiny_bert, tmp_path):
    args = [
        "train",
        "--dataset",
        "demo",
        "--method",
        "cls-relu",
        "--epochs",
        "1",
        "--limit",
        "64",
        "--model",
        tiny_bert,
        "--runs-dir",
        tmp_path,
    ]
    code, out, err = run_cli(capsys, *args)
    assert code == 0 and "training" in err
    code, out2, err2 = run_cli(capsys, *args)
    assert code == 0 and "stored, loading" in err2
    assert json.loads(out2.splitlines()[-1]) == json.loads(out.splitlines()[-1])


def test_compare_format_md_and_csv(capsys, tiny_bert, tmp_path):
    run_cli(
        capsys,
        "train",
        "--dataset",
        "demo",
        "--method",
        "cls-tanh",
        "--epochs",
        "1",
        "--limit",
        "64",
        "--model",
        tiny_bert,
        "--runs-dir",
        tmp_path,
    )
    code, out, _ = run_cli(capsys, "compare", "--runs-dir", tmp_path)
    assert code == 0 and "### demo" in out and "CLS-tuning ∘ T (`cls-tanh`)" in out
    code, out, _ = run_cli(capsys, "compare", "--runs-dir", tmp_path, "--format", "csv")
    assert out.splitlines()[0].startswith("dataset,setting,method,paper row,seeds,Dev,CV,Acc,F1")
    assert out.splitlines()[0].endswith(",selection,best")  # the head chosen on dev
    # a quick compare of two poolings and twin heads: one pick over both, the twins said
    run_cli(
        capsys,
        "train",
        "--dataset",
        "demo",
        "--method",
        "prompt,prompt-ed,cls-relu",
        "--mode",
        "frozen",
        "--epochs",
        "1",
        "--model",
        tiny_bert,
        "--runs-dir",
        tmp_path,
    )
    code, out, _ = run_cli(capsys, "compare", "--runs-dir", tmp_path)
    assert code == 0 and out.count("Use ") == 1  # the overall pick, once
    assert "note: prompt-ed and prompt are one model here" in " ".join(out.split())


BAD_INPUTS = [
    (["train", "--dataset", "nope", "--method", "prompt"], "unknown dataset 'nope'"),
    (["train", "--dataset", "demo", "--method", "nope"], "unknown method 'nope'"),
    (["train", "--dataset", "demo"], "--method"),
    (["train", "--dataset", "demo", "--method", "prompt", "--epochs", "0"], "--epochs must be"),
    (["train", "--dataset", "demo", "--method", "prompt", "--epochs", "x"], "invalid int value"),
    (["train", "--dataset", "demo", "--method", "prompt", "--seeds", "a,b"], "--seeds"),
    (["train", "--dataset", "demo", "--method", "prompt", "--device", "tpu"], "unknown device"),
    (
        ["train", "--dataset", "demo", "--method", "prompt", "--model", "/no/such/model"],
        "model path not found",
    ),
    (["train", "--dataset", "csv:/no/such.csv", "--method", "prompt"], "CSV file not found"),
    (["inspect", "--dataset", "demo", "--template", "no mask {text}"], "[MASK]"),
    (["inspect", "--dataset", "demo", "--verbalizer", "/no/v.json"], "verbalizer file not found"),
    (["compare", "--runs-dir", "/no/such/runs"], "no finished runs"),
    (["score", "--run", "/no/such/run", "--text", "hi"], "run not found"),
    (["frobnicate"], "invalid choice"),
]


@pytest.mark.parametrize("args, message", BAD_INPUTS, ids=[" ".join(a[:3]) for a, _ in BAD_INPUTS])
def test_bad_input_is_one_error_line_and_status_2(capsys, args, message):
    code, out, err = run_cli(capsys, *args)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert message in lines[0]
    assert "Traceback" not in err


def test_malformed_csv_is_an_error_line(capsys, tmp_path):
    binary = tmp_path / "garbage.csv"
    binary.write_bytes(bytes(range(256)) * 4)
    code, _, err = run_cli(capsys, "inspect", "--dataset", f"csv:{binary}")
    assert code == 2 and err.startswith("error: ") and "not a text file" in err
    one_class = tmp_path / "one.csv"
    one_class.write_text("text,label\na,x\nb,x\nc,x\n")
    code, _, err = run_cli(capsys, "inspect", "--dataset", f"csv:{one_class}")
    assert code == 2 and "only one class" in err


def test_missing_paper_split_is_an_error_line(capsys, tmp_path):
    folder = tmp_path / "data" / "r52"  # the paper's layout, without its training split
    folder.mkdir(parents=True)
    for split in ("dev", "test"):
        (folder / f"{split}.tsv").write_text("text\tlabel\nsome news\tearn\n")
    code, _, err = run_cli(capsys, "inspect", "--dataset", "r52", "--data-dir", tmp_path / "data")
    assert code == 2 and "train.tsv not found" in err


def test_progress_file_throttles_step_events_but_keeps_the_rest(tmp_path):
    from glee_core.core.events import Evaluated, ProgressLog, RunStarted, TrainStep

    path = tmp_path / "progress.jsonl"
    seen = []
    progress = ProgressLog(path, seen.append)
    progress(RunStarted(run_id="r", method="prompt", seed=1, index=1, total=1, cached=False))
    for step in range(1, 101):
        progress(TrainStep(epoch=1, epochs=1, step=step, steps=100))
    progress(
        Evaluated(epoch=1, epochs=1, dev_f1=0.5, dev_acc=0.5, best_dev=0.5, select_metric="f1")
    )
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(seen) == 102  # the progress bar sees everything
    assert lines[0]["stage"] == "run" and lines[-1]["stage"] == "eval"
    steps = [e["step"] for e in lines if e["stage"] == "train"]
    assert steps[-1] == 100 and len(steps) < 10  # throttled, the last step kept


def test_train_speaks_to_a_person_on_a_terminal_and_to_a_program_in_a_pipe(
    capsys, tiny_bert, tmp_path
):
    args = [
        "train",
        "--dataset",
        "demo",
        "--method",
        "cls-tanh,probe",
        "--mode",
        "frozen",
        "--epochs",
        "1",
        "--limit",
        "64",
        "--model",
        tiny_bert,
        "--runs-dir",
        tmp_path,
    ]
    code, out, _ = run_cli(capsys, *args)  # captured: not a terminal, so JSON
    assert code == 0 and json.loads(out.splitlines()[-1])[0]["method"] == "cls-tanh"
    code, out, _ = run_cli(capsys, *args, "--format", "table")
    assert code == 0 and "| Method | Seeds | Dev | CV | Acc | F1 | Head F1 | Tail F1 |" in out
    assert "CLS-tuning ∘ T (`cls-tanh`)" in out and "\nUse " in out
    assert "by 5-fold cross-validation on train + dev" in out and "**" not in out.split("\nUse ")[1]
