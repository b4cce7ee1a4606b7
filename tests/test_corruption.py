"""Every file a run stores, corrupted every way a person or a crash leaves it: the store lists the
run as broken (or the one view that reads the bad file says so), and every page and command goes
on for the other runs. Valid JSON with the wrong contents counts as corrupt, not only bad JSON."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from glee_core.core.errors import GleeError
from glee_core.runs.runfiles import RUN_FILE_NAMES
from glee_core.runs.store import RunStore, load_checked
from tests.helpers.markdown import plain
from tests.helpers.synthetic_runs import synthetic_dataset, write_synthetic_run

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["app.py", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "app_pages").glob("*.py"))]


def _json(value) -> bytes:
    return json.dumps(value).encode()


def _edit_json(edit):
    def corrupt(path: Path) -> bytes:
        data = json.loads(path.read_text(encoding="utf-8"))
        edit(data)
        return _json(data)

    return corrupt


def _other_zip(path: Path) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("readme.txt", "not arrays")
    return out.getvalue()


def _pickled(path: Path) -> bytes:
    out = io.BytesIO()
    np.savez(out, weight=np.array([{"a": 1}], dtype=object), allow_pickle=True)
    return out.getvalue()


def _npz(**arrays):
    def corrupt(path: Path) -> bytes:
        out = io.BytesIO()
        np.savez(out, **arrays)
        return out.getvalue()

    return corrupt


def _npy(array):
    def corrupt(path: Path) -> bytes:
        out = io.BytesIO()
        np.save(out, array, allow_pickle=False)
        return out.getvalue()

    return corrupt


def _drop_last_norm(history):
    history[-1]["weight_norms"] = history[-1]["weight_norms"][:-1]


# (file, what is done to it): bytes written over the file, or None to delete it
CORRUPTIONS = {
    ("config.json", "null"): lambda p: b"null",
    ("config.json", "a list"): lambda p: b"[]",
    ("config.json", "a number"): lambda p: b"5",
    ("config.json", "a string"): lambda p: b'"x"',
    ("config.json", "classes a number"): _edit_json(lambda d: d["dataset"].update(classes=5)),
    ("config.json", "unknown head class"): _edit_json(
        lambda d: d["dataset"].update(head_classes=[*d["dataset"]["head_classes"], "nobody"])
    ),
    ("config.json", "unknown head family"): _edit_json(  # an id no longer registered
        lambda d: d["method"].update(id="mystery", predictor="telepathy")
    ),
    ("config.json", "seed a word"): _edit_json(lambda d: d.update(seed="one")),
    ("config.json", "nested thousands deep"): lambda p: b"[" * 100_000 + b"]" * 100_000,
    ("metrics.json", "null"): lambda p: b"null",
    ("metrics.json", "no per_class"): _edit_json(lambda d: d.pop("per_class")),
    ("metrics.json", "f1 a word"): _edit_json(lambda d: d.update(f1="oops")),
    ("metrics.json", "a class missing"): _edit_json(lambda d: d["per_class"].popitem()),
    ("metrics.json", "confusion not square"): _edit_json(
        lambda d: d.update(confusion_matrix=[[1, 2]])
    ),
    ("history.json", "bad JSON"): lambda p: b"[{",
    ("history.json", "null"): lambda p: b"null",
    ("history.json", "a class's norm missing"): _edit_json(_drop_last_norm),
    ("history.json", "dev_f1 a word"): _edit_json(lambda d: d[0].update(dev_f1="high")),
    ("weight_norms.json", "bad JSON"): lambda p: b"{",
    ("weight_norms.json", "a list"): lambda p: b"[]",
    ("weight_norms.json", "a class missing"): _edit_json(lambda d: d.popitem()),
    ("predictions.csv", "empty"): lambda p: b"",
    ("predictions.csv", "garbage"): lambda p: b"\x00\x01garbage,\n\xff\xfe",
    ("predictions.csv", "a column missing"): lambda p: p.read_bytes().replace(b"gold,", b"gild,"),
    ("predictions.csv", "rows missing"): lambda p: b"\n".join(p.read_bytes().split(b"\n")[:3]),
    ("logits.npy", "garbage"): lambda p: b"garbage",
    ("logits.npy", "wrong shape"): _npy(np.zeros((2, 2), np.float32)),
    ("features.npz", "another zip"): _other_zip,
    ("features.npz", "garbage"): lambda p: b"garbage",
    ("features.npz", "labels out of range"): _npz(
        features=np.zeros((2, 8), np.float16), labels=np.array([0, 99]), rows=np.array([0, 1])
    ),
    ("calibration.npz", "garbage"): lambda p: b"PK\x03\x04garbage",
    ("calibration.npz", "pickled data"): _pickled,
    ("calibration.npz", "another zip"): _other_zip,
    ("model.safetensors", "truncated"): lambda p: p.read_bytes()[:40],
    ("metrics.json", "deleted"): lambda p: None,
    ("history.json", "deleted"): lambda p: None,
}


@pytest.fixture(scope="module")
def corrupt_store(tmp_path_factory):
    """One good run (seed 1) and one run per corruption (seeds 2...), all on the 'demo' id."""
    root = tmp_path_factory.mktemp("corrupt")
    store = RunStore(root / "runs")
    dataset = synthetic_dataset(6, "demo")
    good = write_synthetic_run(store, dataset, "cls-relu", 1)
    cases = {}
    for seed, ((name, how), corrupt) in enumerate(CORRUPTIONS.items(), start=2):
        run = write_synthetic_run(store, dataset, "cls-relu" if seed % 2 else "prompt", seed)
        path = run.path / name
        data = corrupt(path)
        if data is None:
            path.unlink()
        else:
            path.write_bytes(data)
        cases[(name, how)] = run.run_id
    return root, store, good.run_id, cases


def read_everything(run) -> None:
    """Every file of a run, through the loaders the pages and commands use."""
    for name in RUN_FILE_NAMES:
        run.load(name)


def test_every_file_a_run_stores_is_covered():
    assert {name for name, _ in CORRUPTIONS} == set(RUN_FILE_NAMES)


@pytest.mark.parametrize("case", list(CORRUPTIONS), ids=lambda c: f"{c[0]}:{c[1]}")
def test_a_corrupt_file_makes_its_run_broken_with_the_file_named(corrupt_store, case):
    _, store, _, cases = corrupt_store
    run, problem = load_checked(store.path(cases[case]))
    # only the test texts are left to be checked when read (the listing reads headers)
    assert run is None or case[0] == "predictions.csv", case
    if run is not None:
        with pytest.raises(GleeError) as raised:
            read_everything(run)
        problem = str(raised.value)
    assert problem and case[0] in problem, problem
    assert "Traceback" not in problem


def test_the_good_run_reads_whole_and_the_store_lists_the_broken(corrupt_store):
    _, store, good, cases = corrupt_store
    runs = store.runs()
    assert good in {r.run_id for r in runs}
    read_everything(store.get(good))
    listed_broken = set(store.problems)
    assert listed_broken <= set(cases.values())
    assert all(
        f"{name}:" in store.problems[cases[(name, how)]]
        for (name, how) in cases
        if cases[(name, how)] in listed_broken
    )


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_over_a_store_of_corrupt_runs(corrupt_store, page, monkeypatch):
    root, _, good, cases = corrupt_store
    monkeypatch.setenv("GLEE_RUNS_DIR", str(root / "runs"))
    monkeypatch.setenv("GLEE_UPLOADS_DIR", str(root / "uploads"))
    monkeypatch.setenv("GLEE_DATA_DIR", str(root / "data"))
    at = AppTest.from_file(str(ROOT / page), default_timeout=120).run()
    assert not at.exception, [e.value for e in at.exception]
    if page.endswith("Results.py"):  # the broken runs are listed, each with its file
        listed = next(e for e in at.expander if "broken run folder" in e.label)
        text = plain(" ".join(m.value for m in listed.markdown))
        assert "weight_norms.json" in text and "config.json" in text, text[:500]
    if page.endswith("Predictions.py"):  # the view of one run at a time: pick each in turn
        box = next(s for s in at.selectbox if good in str(s.options) or s.label == "Run")
        for option in box.options:
            box.set_value(option).run()
            assert not at.exception, (option, [e.value for e in at.exception])
            box = next(s for s in at.selectbox if s.label == box.label)


COMMANDS = [
    ["compare", "--dataset", "demo"],
    ["calibrate", "--all"],
    ["report", "--dataset", "demo", "--out", "{root}/report.pdf"],
]


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_every_command_goes_on_over_a_store_of_corrupt_runs(corrupt_store, command):
    root, _, _, _ = corrupt_store
    argv = [a.format(root=root) for a in command]
    done = subprocess.run(
        [sys.executable, "-m", "glee_core", *argv, "--runs-dir", str(root / "runs")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("command", ["score", "export", "calibrate"])
def test_a_command_on_one_broken_run_is_one_error_line(corrupt_store, command, capsys, tmp_path):
    from glee_core.cli import main

    _, store, _, cases = corrupt_store
    for (name, how), run_id in cases.items():
        argv = {
            "score": ["score", "--run", str(store.path(run_id)), "--text", "hello"],
            "export": ["export", "--run", str(store.path(run_id)), "--out", str(tmp_path / run_id)],
            "calibrate": ["calibrate", "--run", str(store.path(run_id))],
        }[command]
        assert main(argv) == 2, (name, how)
        err = capsys.readouterr().err
        assert err.startswith("error: ") and name in err and "Traceback" not in err, (how, err)


@pytest.mark.parametrize("meta", ["null", "[]", '{"columns": 5}', "{"])
def test_a_damaged_upload_record_hides_that_upload_only(tmp_path, meta):
    from glee_core.serve.uploads import list_uploads, save_upload

    rows = "text,label\n" + "".join(f"text {i},{'ab'[i % 2]}\n" for i in range(20))
    kept, _ = save_upload(tmp_path, "kept.csv", rows.encode())
    damaged, _ = save_upload(tmp_path, "damaged.csv", rows.encode())
    damaged.path.with_suffix(".json").write_text(meta)
    assert [u.original_name for u in list_uploads(tmp_path)] == ["kept.csv"]
