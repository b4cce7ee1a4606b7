"""Bad input, killed runs, concurrent launches: the tool keeps working and loses nothing."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from glee_core.cli import main
from glee_core.core.errors import GleeError
from glee_core.core.events import read_events
from glee_core.data.csvfile import MAX_CSV_BYTES, Columns
from glee_core.data.datasets import load_dataset
from glee_core.models.config import TrainConfig
from glee_core.models.heads import head_of
from glee_core.models.methods import METHODS, get_method
from glee_core.models.options import DataOptions
from glee_core.runs.store import RunStore
from glee_core.train.experiment import run_launch
from glee_core.train.launch import Launch, unreadable_heads
from glee_core.train.plan import plan_runs

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
GOOD = "text,label\n" + "".join(f"sample text {i},{'ab'[i % 2]}\n" for i in range(20))


def good_rows(n=20, sep=","):
    return "".join(f"sample text {i}{sep}{'ab'[i % 2]}\n" for i in range(n))


# (name, file bytes, extra args, expected error or None, expected warning or None)
CSV_CASES = [
    ("empty file", b"", {}, "the file is empty", None),
    ("header only", b"text,label\n", {}, "header only", None),
    (
        "no text column by name: taken by its contents",
        b"body,label\n" + good_rows().encode(),
        {},
        None,
        "the text is taken from 'body' by its contents",
    ),
    (
        "no label column by name: taken by its contents",
        b"text,kind\n" + good_rows().encode(),
        {},
        None,
        "the label is taken from 'kind' by its contents",
    ),
    (
        "no label column, nothing repeats as a label would",
        b"text,id\n" + "".join(f"sample text {i},{i}\n" for i in range(20)).encode(),
        {},
        "which column holds the label",
        None,
    ),
    (
        "one column",
        b"body\n" + "".join(f"sample text {i}\n" for i in range(20)).encode(),
        {},
        "which column holds the label",
        None,
    ),
    (
        "wrong text name given",
        GOOD.encode(),
        {"text_column": "body"},
        "no text column named 'body'",
        None,
    ),
    ("semicolons", ("text;label\n" + good_rows(sep=";")).encode(), {}, None, None),
    ("tabs", ("text\tlabel\n" + good_rows(sep="\t")).encode(), {}, None, None),
    (
        "latin-1",
        ("text,label\n" + good_rows().replace("sample", "café")).encode("latin-1"),
        {},
        None,
        "not UTF-8, read as latin-1",
    ),
    ("utf-16 bom", GOOD.encode("utf-16"), {}, None, None),
    ("utf-16 odd length", GOOD.encode("utf-16") + b"x", {}, "not valid UTF-16", None),
    (
        "utf-16 lone surrogate",
        GOOD.encode("utf-16") + b"\x00\xd8a\x00",
        {},
        "not valid UTF-16",
        None,
    ),
    ("utf-8 bom", GOOD.encode("utf-8-sig"), {}, None, None),
    ("binary garbage", bytes(range(256)) * 8, {}, "not a text file", None),
    (
        "newline inside quotes",
        ('text,label\n"two\nlines",a\n' + good_rows()).encode(),
        {},
        None,
        None,
    ),
    (
        "ragged rows",
        (GOOD + "x,a,extra,fields\ny\n").encode(),
        {},
        "line 22 has 4 fields, the header 2",
        None,
    ),
    ("whitespace-only texts", (GOOD + "   ,a\n,b\n").encode(), {}, None, "empty text or label"),
    ("missing labels", (GOOD + "orphan text,\n").encode(), {}, None, "empty text or label"),
    (
        "numeric labels",
        ("text,label\n" + "".join(f"t {i},{i % 2}\n" for i in range(20))).encode(),
        {},
        None,
        "labels are numbers",
    ),
    (
        "single class",
        ("text,label\n" + "".join(f"t {i},a\n" for i in range(9))).encode(),
        {},
        "only one class",
        None,
    ),
    (
        "class with one example",
        (GOOD + "lonely,c\n").encode(),
        {},
        None,
        "1 class(es) left out: too few distinct texts for a train, dev and test split (distinct "
        "texts in brackets): 'c' (1)",
    ),
    (
        "class with one example, kept",
        (GOOD + "lonely,c\n").encode(),
        {"keep_rare": True},
        None,
        "1 class(es) kept in training only",
    ),
    ("duplicate rows", (GOOD + "sample text 0,a\n").encode(), {}, None, "duplicate row"),
    (
        "unclosed quote on the first row",
        b'text,label\n"no end,a\n' + good_rows().encode(),
        {},
        'the " opened on line 2 is never closed',
        None,
    ),
    (
        "unclosed quote later",
        (GOOD + '"no end,a\nmore,b\n').encode(),
        {},
        'the " opened on line 22 is never closed',
        None,
    ),
    ("an inch mark is not a quote", (GOOD + 'a 5" screen,a\n').encode(), {}, None, None),
    (
        "every class of one text",
        ("text,label\n" + "".join(f"t {i},c{i}\n" for i in range(500))).encode(),
        {},
        "500 of the 500 classes have fewer than 3 distinct texts",
        None,
    ),
    (
        "every class of one text, kept",
        ("text,label\n" + "".join(f"t {i},c{i}\n" for i in range(500))).encode(),
        {"keep_rare": True},
        "none is left to test on",
        None,
    ),
    (
        "thousands of classes",
        ("text,label\n" + "".join(f"t {i},c{i % 1500}\n" for i in range(4500))).encode(),
        {},
        None,
        "1500 classes",
    ),
]


@pytest.mark.parametrize(
    "name, content, kwargs, error, warning", CSV_CASES, ids=[c[0] for c in CSV_CASES]
)
def test_csv_input_cases(tmp_path, capsys, name, content, kwargs, error, warning):
    path = tmp_path / "data.csv"
    path.write_bytes(content)
    before = sorted(p.name for p in tmp_path.iterdir())
    if error:
        with pytest.raises(GleeError, match=error):
            load_dataset(f"csv:{path}", **kwargs)
        args = ["inspect", "--dataset", f"csv:{path}"]
        args += [f"--{k.replace('_', '-')}={v}" for k, v in kwargs.items()]
        assert main(args) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and error in err[0]
    else:
        dataset = load_dataset(f"csv:{path}", **kwargs)
        assert dataset.num_classes >= 2
        if warning:
            assert any(warning in w for w in dataset.warnings), dataset.warnings
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written


def test_csv_over_the_size_limit(tmp_path, monkeypatch):
    path = tmp_path / "big.csv"
    path.write_text(GOOD)
    monkeypatch.setattr("glee_core.data.csvfile.MAX_CSV_BYTES", 10)
    with pytest.raises(GleeError, match="larger than the 0 MiB limit"):
        load_dataset(f"csv:{path}")
    assert MAX_CSV_BYTES == 200 * 2**20


@pytest.mark.parametrize("columns", [3_000, 14_500])
def test_a_wide_header_over_one_field_rows_is_refused_in_linear_memory(tmp_path, capsys, columns):
    """A header of N commas over N one-field rows (a few KB) was padded to an N x N frame
    (29 KB -> 2.5 GB): the reader now refuses it in memory and time bounded by the file's bytes."""
    import tracemalloc

    from glee_core.data.csvfile import read_csv_frame

    path = tmp_path / "wide.csv"
    path.write_text("," * (columns - 1) + "\n" + "x\n" * columns)
    size = path.stat().st_size
    tracemalloc.start()
    started = time.perf_counter()
    with pytest.raises(GleeError, match="header|columns") as caught:
        read_csv_frame(path)
    elapsed = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 400 * size + 50 * 2**20, (peak, size)  # not quadratic: 2.5 GB before
    assert elapsed < 5, elapsed
    assert "e.g. text,label" in str(caught.value)
    assert main(["inspect", "--dataset", f"csv:{path}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err


def test_rows_shorter_than_a_normal_header_are_still_padded(tmp_path):
    from glee_core.data.csvfile import read_csv_frame

    path = tmp_path / "short.csv"
    path.write_text("text,label,notes,source\n" + "".join(f"t {i},a\n" for i in range(5000)))
    frame, _ = read_csv_frame(path)
    assert frame.shape == (5000, 4) and set(frame["notes"]) == {""}


def test_very_long_text_is_truncated_with_a_note(tiny_bert, tmp_path, capsys):
    rows = "".join(f"{'news ' * (400 if i == 0 else 3)}{i},{'ab'[i % 2]}\n" for i in range(30))
    path = tmp_path / "long.csv"
    path.write_text("text,label\n" + rows)
    code = main(
        [
            "train",
            "--dataset",
            f"csv:{path}",
            "--method",
            "cls-relu",
            "--epochs",
            "1",
            "--model",
            str(tiny_bert),
            "--runs-dir",
            str(tmp_path / "runs"),
            "--max-length",
            "32",
        ]
    )
    err = capsys.readouterr().err
    assert code == 0 and "truncated to 32 tokens" in err


def test_a_folder_that_is_not_a_masked_lm(tmp_path, capsys):
    from transformers import GPT2Config

    GPT2Config(n_layer=1, n_embd=8, n_head=1).save_pretrained(tmp_path)
    assert main(["train", "--dataset", "demo", "--method", "prompt", "--model", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a masked language model" in err[0]


def test_label_word_outside_the_vocabulary_is_one_error_line(tiny_bert, toy_csv, tmp_path, capsys):
    verbalizer = tmp_path / "v.json"
    verbalizer.write_text(
        json.dumps(
            {
                "sports": "sports",
                "money": "money",
                "science": "zzqx",
                "food": "food",
                "tech_support": "tech support",
            }
        )
    )
    code = main(
        [
            "train",
            "--dataset",
            f"csv:{toy_csv}",
            "--method",
            "prompt",
            "--model",
            str(tiny_bert),
            "--verbalizer",
            str(verbalizer),
            "--runs-dir",
            str(tmp_path / "runs"),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "'science' -> 'zzqx'" in err[0]
    assert not list((tmp_path / "runs").glob("*-prompt-*"))


def test_a_compare_of_every_head_leaves_out_those_whose_label_words_the_model_lacks(
    tiny_bert, toy_csv, tmp_path, capsys
):
    """An upload whose class names the backbone cannot read (a language its vocabulary misses):
    the one-click compare of every head still trains the heads that need no label word, and a
    note says which were left out and why; naming such a head stays an error."""
    verbalizer = tmp_path / "v.json"
    verbalizer.write_text(
        json.dumps(
            {
                "sports": "sports",
                "money": "money",
                "science": "zzqx",
                "food": "food",
                "tech_support": "tech support",
            }
        )
    )
    runs = tmp_path / "runs"
    code = main(
        [
            "train",
            "--dataset",
            f"csv:{toy_csv}",
            "--method",
            "all",
            "--mode",
            "frozen",
            "--model",
            str(tiny_bert),
            "--verbalizer",
            str(verbalizer),
            "--runs-dir",
            str(runs),
            "--pooling",
            "cls",
        ]
    )
    err = capsys.readouterr().err
    worded = [m for m in METHODS.values() if head_of(m).verbalizer]
    assert code == 0 and "'science' -> 'zzqx'" in err and "are left out" in err
    assert all(m.id in err for m in worded)
    trained = {run.method for run in RunStore(runs).runs()}
    assert trained == {m.id for m in METHODS.values() if not head_of(m).verbalizer}
    # what Home's estimate reads: the compare done, nothing is left to train (the label-word
    # heads are left out again, with the same note), so its button no longer asks for work
    dataset = DataOptions(dataset=f"csv:{toy_csv}", verbalizer=str(verbalizer)).load()
    config = TrainConfig(mode="frozen", pooling="cls")
    out, why = unreadable_heads(
        Launch(dataset, list(METHODS.values()), [1], str(tiny_bert), config, RunStore(runs))
    )
    assert out == worded and "'science' -> 'zzqx'" in why and "are left out" in why
    rest = [m for m in METHODS.values() if m not in out]
    assert all(
        RunStore(runs).get(job.run_id)
        for job in plan_runs(dataset, rest, [1], str(tiny_bert), config)
    )
    named = [get_method("prompt"), get_method("cls-relu")]  # named heads: preflight's error
    launch = Launch(dataset, named, [1], str(tiny_bert), config, RunStore(runs))
    assert unreadable_heads(launch) == ([], "")


def _train_cmd(model, data, runs, *extra):
    """One fine-tuning run (the paper's recipe: no LP-FT stage, which is a run of its own)."""
    return [
        sys.executable,
        "-m",
        "glee_core",
        "train",
        "--dataset",
        f"csv:{data}",
        "--method",
        "cls-relu",
        "--model",
        str(model),
        "--runs-dir",
        str(runs),
        "--batch-size",
        "4",
        "--lr",
        "1e-3",
        "--recipe",
        "paper",
        *extra,
    ]


@pytest.mark.slow
def test_a_killed_run_leaves_nothing_that_looks_finished(tiny_bert, toy_csv, tmp_path):
    runs = tmp_path / "runs"
    proc = subprocess.Popen(
        _train_cmd(tiny_bert, toy_csv, runs, "--epochs", "200", "--patience", "200"),
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    seen = ""
    deadline = time.time() + 120
    while "epoch 2/" not in seen and time.time() < deadline:
        seen += proc.stderr.read(64)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert "epoch 2/" in seen
    store = RunStore(runs)
    assert store.runs() == [] and not store.problems
    assert main(["compare", "--runs-dir", str(runs)]) == 2  # "no finished runs"
    again = subprocess.run(
        _train_cmd(tiny_bert, toy_csv, runs, "--epochs", "1"),
        capture_output=True,
        text=True,
        env=ENV,
        timeout=300,
    )
    assert again.returncode == 0 and "training" in again.stderr  # trained, not "loading"
    assert len(store.runs()) == 1


@pytest.mark.slow
def test_two_launches_of_one_configuration_train_it_once(tiny_bert, toy_csv, tmp_path):
    runs = tmp_path / "runs"
    cmd = _train_cmd(tiny_bert, toy_csv, runs, "--epochs", "3")
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    trained = [err for _, err in outs if ": training (" in err]
    loaded = [err for _, err in outs if "stored, loading" in err]
    assert len(trained) == 1 and len(loaded) == 1
    results = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    assert results[0] == results[1]
    assert len(RunStore(runs).runs()) == 1


@pytest.mark.slow
def test_different_configurations_queue_for_the_training_slot(tiny_bert, toy_csv, tmp_path):
    runs = tmp_path / "runs"
    store = RunStore(runs)
    events = tmp_path / "events.jsonl"
    with store.training_slot():  # another process is training
        proc = subprocess.Popen(
            _train_cmd(tiny_bert, toy_csv, runs, "--epochs", "1", "--progress-file", str(events)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
        )
        deadline = time.time() + 120
        while (
            not any(e.stage == "queued" for e in read_events(events))
            and time.time() < deadline
            and proc.poll() is None
        ):
            time.sleep(0.2)
        assert proc.poll() is None  # still waiting for the slot
        assert any(e.stage == "queued" for e in read_events(events)), "never said it queued"
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0 and "waiting: another run is training" in err
    assert RunStore(runs, max_concurrent=3).max_concurrent == 3


@pytest.mark.parametrize(
    "name",
    ["../../etc/passwd", "/abs/path/data.csv", "..\\..\\win.csv", "a/../../b.csv", "....csv", ""],
)
def test_upload_names_cannot_escape_the_uploads_directory(tmp_path, name):
    from glee_core.serve.uploads import list_uploads, save_upload

    uploads = tmp_path / "uploads"
    upload, dataset = save_upload(uploads, name, GOOD.encode())
    assert upload.path.parent == uploads and upload.path.resolve().parent == uploads.resolve()
    assert dataset.num_classes == 2
    assert [u.path for u in list_uploads(uploads)] == [upload.path]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["uploads"]


def test_bad_or_oversized_uploads_keep_nothing(tmp_path, monkeypatch):
    from glee_core.serve import uploads as uploads_module
    from glee_core.serve.uploads import list_uploads, save_upload

    folder = tmp_path / "uploads"
    with pytest.raises(GleeError, match="only one class"):
        save_upload(folder, "one.csv", b"text,label\na,x\nb,x\nc,x\n")
    monkeypatch.setattr(uploads_module, "MAX_UPLOAD_BYTES", 10)
    with pytest.raises(GleeError, match="upload limit"):
        save_upload(folder, "big.csv", GOOD.encode())
    assert list(folder.iterdir()) == [] and list_uploads(folder) == []


def test_compare_and_the_app_survive_a_corrupt_run(
    tiny_bert, toy_dataset, tmp_path, capsys, monkeypatch
):
    from streamlit.testing.v1 import AppTest

    from glee_core.models.config import TrainConfig
    from glee_core.models.methods import get_method

    runs_dir = tmp_path / "runs"
    good, bad = run_launch(
        Launch(
            toy_dataset,
            [get_method("cls-relu"), get_method("prompt")],
            [1],
            str(tiny_bert),
            TrainConfig(epochs=1, batch_size=16, recipe="paper"),
            RunStore(runs_dir),
        )
    )
    weights = bad.path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    assert main(["compare", "--runs-dir", str(runs_dir), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert [r["method"] for r in json.loads(out)] == ["cls-relu"]
    assert f"warning: skipped broken run {bad.run_id}: model.safetensors: truncated" in err
    monkeypatch.setenv("GLEE_RUNS_DIR", str(runs_dir))
    at = AppTest.from_file(str(ROOT / "app_pages" / "3_Results.py"), default_timeout=60)
    at.session_state["dataset"] = DataOptions(dataset=toy_dataset.id)
    at.run()
    assert not at.exception
    assert set(at.dataframe[0].value["method"]) == {"cls-relu"}
    assert any("skipped" in e.label for e in at.expander)


def test_no_pickle_is_ever_loaded(tiny_bert, toy_dataset, tmp_path):
    import numpy as np

    from glee_core.models.config import TrainConfig
    from glee_core.models.methods import get_method

    run = run_launch(
        Launch(
            toy_dataset,
            [get_method("cls-relu")],
            [1],
            str(tiny_bert),
            TrainConfig(epochs=1, batch_size=16, recipe="paper"),
            RunStore(tmp_path),
        )
    )[0]
    np.savez(
        run.path / "features.npz",
        features=np.array([{"evil": 1}], dtype=object),
        labels=np.array([0]),
        rows=np.array([0]),
    )
    with pytest.raises(ValueError, match="features holds pickled objects"):
        _ = run.features
    source = "\n".join(p.read_text() for p in (ROOT / "glee_core").glob("*.py"))
    assert "torch.load(" not in source and "allow_pickle=True" not in source
    assert "trust_remote_code=True" not in source


def test_a_seed_out_of_range_is_one_error_line_before_any_work(tmp_path, capsys):
    from glee_core.cli import main

    for seeds in ("-1", "99999999999999999999"):
        code = main(
            [
                "train",
                "--dataset",
                "demo",
                "--seeds",
                seeds,
                "--runs-dir",
                str(tmp_path / "runs"),
                "--mode",
                "frozen",
                "--method",
                "probe",
            ]
        )
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("error: a seed must be a whole number from 0 to")
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_limit_is_stratified_and_the_first_rows_of_one_class_say_why(tmp_path, tiny_bert, capsys):
    """A class-sorted CSV cut by --limit: the default sample keeps every class (seeded, in the
    run's identity); --limit-strategy first (the paper recipe's) leaves one class, which the
    closed-form probe refuses (scikit-learn's error was a traceback) and a trained head warns
    it can only predict."""
    import json

    from glee_core.cli import main

    rows = (
        ["text,label"]
        + [f"sports news {i},sports" for i in range(40)]
        + [f"money report {i},money" for i in range(20)]
    )
    path = tmp_path / "sorted.csv"
    path.write_text("\n".join(rows) + "\n")
    common = [
        "train",
        "--dataset",
        f"csv:{path}",
        "--model",
        str(tiny_bert),
        "--mode",
        "frozen",
        "--limit",
        "10",
        "--runs-dir",
        str(tmp_path / "runs"),
    ]
    assert main([*common, "--method", "probe-balanced"]) == 0
    out, err = capsys.readouterr()
    run = RunStore(tmp_path / "runs").get(json.loads(out.splitlines()[-1])[0]["run_id"])
    assert run.record.hyperparameters.limit_strategy == "stratified"
    assert run.record.identity["limit_strategy"] == "stratified" and "one class" not in err
    code = main([*common, "--method", "probe-balanced", "--limit-strategy", "first"])
    err = capsys.readouterr().err
    assert code == 2 and "hold one class only (sports)" in err and "needs two classes" in err
    code = main([*common, "--method", "cls-tanh", "--limit-strategy", "first"])
    err = capsys.readouterr().err
    assert code == 0 and "warning: the first 10 texts kept by --limit" in err
    assert "can only learn to predict it" in err


def test_a_stratified_limit_keeps_every_class_its_share():
    import pandas as pd

    from glee_core.data.splits import stratified_sample

    frame = pd.DataFrame(
        {"text": [f"t{i}" for i in range(130)], "label": [0] * 100 + [1] * 20 + [2] * 9 + [3]}
    )
    sample = stratified_sample(frame, 26)
    assert len(sample) == 26 and sample["label"].value_counts().to_dict() == {
        0: 20,
        1: 4,
        2: 1,
        3: 1,
    }
    assert sample.equals(stratified_sample(frame, 26))  # the same rows every time
    assert list(sample.index) == sorted(sample.index)  # in their order
    assert set(stratified_sample(frame, 2)["label"]) == {0, 1}  # fewer rows than classes


def test_an_unexpected_exception_ends_in_an_error_line_a_job_reads_as_failed(monkeypatch, capsys):
    from glee_core import cli
    from glee_core.commands import stored

    def broken(args):
        raise TypeError("something no check caught")

    monkeypatch.setattr(stored, "compare", broken)
    assert cli.main(["compare"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err
    assert err.strip().splitlines()[-1].startswith("error: unexpected TypeError: something")


def test_stale_temp_folders_are_swept_and_live_ones_kept(tmp_path):
    """A kill while a run was saved left `.tmp-<run id>-<pid>-*` (91 MB) forever, counted in the
    quota. The store's listing sweeps those whose process is gone."""
    import os
    import subprocess
    import sys

    from glee_core.runs.store import UNOWNED_TEMP_SECONDS, RunStore

    store = RunStore(tmp_path)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    names = {
        "dead": f".tmp-demo-cls-tanh-s1-abc-{dead}-x1y2z3",
        "old_dead": f".old-demo-cls-tanh-s1-abc-{dead}-q9",
        "mine": f".tmp-demo-prompt-s2-def-{os.getpid()}-k7",
        "unowned_new": ".tmp-demo-prompt-s3-0ab1c2d3ef-zz",
        "unowned_old": ".tmp-demo-prompt-s4-0ab1c2d3ef-yy",
    }
    for name in names.values():
        (tmp_path / name).mkdir()
        (tmp_path / name / "model.safetensors").write_bytes(b"x" * 100)
    old = (tmp_path / names["unowned_old"]).stat().st_mtime - UNOWNED_TEMP_SECONDS - 10
    os.utime(tmp_path / names["unowned_old"], (old, old))
    store.runs()
    left = {p.name for p in tmp_path.iterdir()}
    assert left == {names["mine"], names["unowned_new"]}


SLOW_SAVE = """
import sys, time
from glee_core import cli
from glee_core.commands import stored
from glee_core.runs.store import RunStore

def slow(args):
    def write(folder):
        (folder / "model.safetensors").write_bytes(b"x" * 1000)
        print("writing", flush=True)
        time.sleep(60)
    RunStore(sys.argv[1]).write("demo-cls-tanh-s1-abc", write)
    return 0

stored.compare = slow
sys.exit(cli.main(["compare"]))
"""


def test_sigterm_while_a_run_is_saved_leaves_no_temp_folder_and_reads_as_stopped(tmp_path):
    import signal
    import subprocess
    import sys

    from glee_core.train.jobs import Job

    proc = subprocess.Popen(
        [sys.executable, "-c", SLOW_SAVE, str(tmp_path / "runs")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "writing"
    assert any(p.name.startswith(".tmp-") for p in (tmp_path / "runs").iterdir())
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert err.strip().endswith("launch the same again to go on from them")
    assert not list((tmp_path / "runs").iterdir())
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "j.json").write_text('{"id": "j", "pid": 4194303}')
    (jobs / "j.err").write_text(err)
    assert Job(jobs / "j.json").status == "stopped"


def test_an_upload_over_the_class_cap_keeps_nothing_and_is_parsed_once(tmp_path, monkeypatch):
    from glee_core.data import csvfile
    from glee_core.serve.uploads import list_uploads, save_upload

    reads = []
    real = csvfile.read_csv_frame
    monkeypatch.setattr(
        "glee_core.data.loaders.read_csv_frame", lambda path: reads.append(path) or real(path)
    )
    rows = "text,label\n" + "".join(f"text {i},c{i % 3}\n" for i in range(30))
    folder = tmp_path / "uploads"
    with pytest.raises(GleeError, match="3 classes; an upload here may have at most 2"):
        save_upload(folder, "three.csv", rows.encode(), max_classes=2)
    assert list(folder.iterdir()) == [] and list_uploads(folder) == []
    reads.clear()
    upload, dataset = save_upload(folder, "three.csv", rows.encode(), max_classes=3)
    assert dataset.num_classes == 3 and len(reads) == 1  # parsed once
    # the same file again, with columns that do not work: refused, the kept one untouched
    with pytest.raises(GleeError, match="no text column named 'nope'"):
        save_upload(folder, "three.csv", rows.encode(), Columns(text="nope"))
    assert [u.path for u in list_uploads(folder)] == [upload.path] and upload.path.is_file()


def test_look_alike_class_names_are_one_class_when_nfc_and_warned_about_otherwise(tmp_path):
    nfd = "cafe\u0301"  # "café" decomposed: NFC makes it the composed one
    labels = ["café", nfd, "ѕport", "sport", "news", "ne\u200bws"]
    rows = "text,label\n" + "".join(f"text {i},{labels[i % 6]}\n" for i in range(60))
    path = tmp_path / "alike.csv"
    path.write_text(rows, encoding="utf-8")
    dataset = load_dataset(f"csv:{path}")
    assert "café" in dataset.classes and nfd not in dataset.classes  # one class
    said = " ".join(dataset.warnings)
    assert "'sport', 'ѕport' look the same but are different classes" in said
    assert "'news', 'ne\\u200bws' look the same" in said  # the invisible one shown
