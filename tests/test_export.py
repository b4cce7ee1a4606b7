"""Using a trained classifier: batch prediction of a CSV, export with a model card, and loading
the export back offline with nothing but the folder."""

import json
import os
import pickle
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch
from huggingface_hub import ModelCard

from glee_core.cli import main
from glee_core.core.errors import GleeError
from glee_core.models.config import TrainConfig
from glee_core.models.methods import get_method
from glee_core.runs.ensemble import ensemble_test_scores
from glee_core.runs.store import RunStore
from glee_core.serve.export import export_run, load_classifier
from glee_core.serve.inference import score_texts
from glee_core.train.experiment import run_launch
from glee_core.train.launch import Launch

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def runs(tiny_bert, toy_dataset, tmp_path_factory):
    """A fine-tuned prompt run and a quick-mode (frozen) pt. LN run."""
    store = RunStore(tmp_path_factory.mktemp("export-runs"))
    [prompt] = run_launch(
        Launch(
            toy_dataset,
            [get_method("prompt")],
            [1],
            str(tiny_bert),
            TrainConfig(epochs=1, batch_size=16, lr=1e-3, recipe="paper"),
            store,
        )
    )
    [frozen] = run_launch(
        Launch(
            toy_dataset,
            [get_method("cls-relu-pt-ln")],
            [1],
            str(tiny_bert),
            TrainConfig(epochs=2, batch_size=16, mode="frozen", pooling="cls"),
            store,
        )
    )
    return {"finetune": prompt, "frozen": frozen}


def softmax(logits):
    e = np.exp(logits - logits.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def test_predict_keeps_the_rows_in_order_and_scores_like_score(runs, toy_dataset, tmp_path, capsys):
    run = runs["finetune"]
    texts = toy_dataset.splits["test"]["text"].tolist()[:7] + ["sports news today"]
    source = pd.DataFrame({"id": range(len(texts), 0, -1), "body": texts, "note": "x"})
    path = tmp_path / "in.csv"
    source.to_csv(path, sep=";", index=False)
    out = tmp_path / "out.csv"
    code = main(
        [
            "predict",
            "--run",
            str(run.path),
            "--input",
            str(path),
            "--text-column",
            "body",
            "--out",
            str(out),
            "--top-k",
            "2",
            "--device",
            "cpu",
        ]
    )
    assert code == 0 and json.loads(capsys.readouterr().out)["rows"] == len(texts)
    table = pd.read_csv(out, keep_default_na=False)
    assert list(table["id"]) == list(source["id"]) and list(table["body"]) == texts
    assert list(table.columns[:3]) == ["id", "body", "note"]
    expected = score_texts(run, texts)  # the same run, text by text
    assert list(table["pred"]) == list(expected.idxmax(axis=1))
    np.testing.assert_allclose(table["probability"], expected.max(axis=1), rtol=1e-4, atol=1e-5)
    second = [row.sort_values(ascending=False).index[1] for _, row in expected.iterrows()]
    assert list(table["top2"]) == second and (table["top1"] == table["pred"]).all()
    verbalizer = run.record.dataset.verbalizer  # a prompt method says which label word won
    assert list(table["label_word"]) == [" | ".join(verbalizer[c]) for c in table["pred"]]


@pytest.mark.parametrize("kind", ["finetune", "frozen"])
def test_predicts_onnx_engine_gives_the_runs_fp32_scores_from_one_export(
    runs, toy_dataset, tmp_path, capsys, kind
):
    """--engine onnx exports the run once (beside the store's runs) and scores with
    onnxruntime: the same rows, top classes and label words as the run's own fp32 scores,
    probabilities within 1e-4; an ONNX folder given as --classifier is scored so by default."""
    from glee_core.serve.inference import Scorer

    run = runs[kind]
    texts = toy_dataset.splits["test"]["text"].tolist()[:12] + ["sports " * 200]  # truncated
    path = tmp_path / "in.csv"
    pd.DataFrame({"text": texts}).to_csv(path, index=False)
    out = tmp_path / "onnx.csv"
    args = ["predict", "--run", str(run.path), "--input", str(path), "--device", "cpu"]
    assert main([*args, "--out", str(out), "--engine", "onnx"]) == 0
    capsys.readouterr()
    table = pd.read_csv(out, keep_default_na=False)
    exact = softmax(Scorer.for_run(run, "cpu", precision="fp32").logits(texts))
    classes = np.asarray(run.record.dataset.classes, dtype=object)
    assert list(table["pred"]) == list(classes[exact.argmax(1)])
    np.testing.assert_allclose(table["probability"], exact.max(1), atol=1e-4)
    assert ("label_word" in table) == (kind == "finetune")  # a prompt run names its words
    folder = run.path.parent / ".exports" / f"{run.run_id}-onnx"
    made = (folder / "model.onnx").stat().st_mtime_ns
    assert main([*args, "--out", str(tmp_path / "again.csv"), "--engine", "onnx"]) == 0
    assert (folder / "model.onnx").stat().st_mtime_ns == made  # exported once
    by_folder = tmp_path / "folder.csv"
    assert (
        main(
            ["predict", "--classifier", str(folder), "--input", str(path), "--out", str(by_folder)]
        )
        == 0
    )  # auto: an ONNX folder is scored by onnx
    pd.testing.assert_series_equal(pd.read_csv(by_folder)["probability"], table["probability"])
    pairs = tmp_path / "pairs.csv"
    pd.DataFrame({"text": ["a"], "text_b": ["b"]}).to_csv(pairs, index=False)
    assert (
        main(
            [
                *args[:3],
                "--input",
                str(pairs),
                "--text-b-column",
                "text_b",
                "--out",
                str(tmp_path / "p.csv"),
                "--engine",
                "onnx",
            ]
        )
        == 2
    )
    assert "use --engine torch" in capsys.readouterr().err


ISSUE_FILE = (
    "text\nmy laptop will not turn on\nwho wrote hamlet, the play\n"
    '"a quoted, fine row"\ntell me a joke\nwhat is your favourite food\n'
)
ISSUE_TEXTS = [
    "my laptop will not turn on",
    "who wrote hamlet, the play",
    "a quoted, fine row",
    "tell me a joke",
    "what is your favourite food",
]
# (file, the texts predict must give back, in order, or the error it must say)
CSV_CATALOGUE = {
    "one column, commas in its texts": (ISSUE_FILE, ISSUE_TEXTS),
    "one column, CRLF and a blank line at the end": (
        ISSUE_FILE.replace("\n", "\r\n") + "\r\n",
        ISSUE_TEXTS,
    ),
    "one column, semicolons and a pipe in its texts": ("text\na; b\nc | d\n", ["a; b", "c | d"]),
    "one column, a quote doubled and a line break": (
        'text\n"say ""hi"" now"\n"two\nlines"\n',
        ['say "hi" now', "two\nlines"],
    ),
    "one column, an inch mark": (
        'text\na 5" screen, not a quote\nb\n',
        ['a 5" screen, not a quote', "b"],
    ),
    "tab-separated, commas in its texts": ("id\ttext\n1\ta, b\n2\tc\n", ["a, b", "c"]),
    "comma-separated, a quoted comma": ('id,text\n1,"a, b"\n2,c\n', ["a, b", "c"]),
    "a row with a field too many": (
        "id,text\n1,a\n2,b,c\n",
        "line 3 has 3 fields, the header 2 (comma-separated)",
    ),
    "a quote never closed": ('text\na\n"b\nc\n', 'the " opened on line 3 is never closed'),
}


@pytest.mark.parametrize("name", list(CSV_CATALOGUE))
def test_predict_gives_back_every_row_of_a_file_whole_or_refuses(runs, tmp_path, capsys, name):
    """The same reader serves training data, uploads, the Playground and predict: a file of one
    column is one column, whatever its texts hold; a row with more fields than the header is an
    error naming its line; nothing is dropped or split silently."""
    content, expected = CSV_CATALOGUE[name]
    path, out = tmp_path / "in.csv", tmp_path / "out.csv"
    path.write_bytes(content.encode())
    code = main(
        [
            "predict",
            "--run",
            str(runs["frozen"].path),
            "--input",
            str(path),
            "--out",
            str(out),
            "--device",
            "cpu",
        ]
    )
    captured = capsys.readouterr()
    if isinstance(expected, str):
        assert code == 2 and expected in captured.err and not out.exists()
        return
    assert code == 0 and json.loads(captured.out)["rows"] == len(expected)
    table = pd.read_csv(out, keep_default_na=False, dtype=str)
    assert list(table["text"]) == expected


def test_a_run_is_found_by_its_id_in_the_store(runs, toy_dataset, tmp_path, capsys, monkeypatch):
    run = runs["frozen"]
    path = tmp_path / "in.csv"
    toy_dataset.splits["test"][["text"]].head(3).to_csv(path, index=False)
    store = str(run.path.parent)
    by_folder, by_flag, by_env = (tmp_path / f"{n}.csv" for n in ("folder", "flag", "env"))
    assert (
        main(
            [
                "predict",
                "--run",
                str(run.path),
                "--input",
                str(path),
                "--out",
                str(by_folder),
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "predict",
                "--run",
                run.run_id,
                "--runs-dir",
                store,
                "--input",
                str(path),
                "--out",
                str(by_flag),
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    monkeypatch.setenv("GLEE_RUNS_DIR", store)
    assert (
        main(
            [
                "predict",
                "--run",
                run.run_id,
                "--input",
                str(path),
                "--out",
                str(by_env),
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    expected = by_folder.read_text()
    assert by_flag.read_text() == expected and by_env.read_text() == expected
    capsys.readouterr()
    monkeypatch.setenv("GLEE_RUNS_DIR", str(tmp_path / "empty-store"))
    code = main(["predict", "--run", run.run_id, "--input", str(path), "--out", str(by_env)])
    err = capsys.readouterr().err
    assert code == 2 and "neither a run directory nor a run id in the store" in err
    assert str(tmp_path / "empty-store") in err and "--runs-dir" in err


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "empty"),
        (b"id,other\n1,a\n", "which column holds the text"),
        (bytes(range(256)) * 4, "not a text file"),
    ],
)
def test_predict_bad_input_is_one_error_line(runs, tmp_path, capsys, content, message):
    path = tmp_path / "bad.csv"
    path.write_bytes(content)
    code = main(
        [
            "predict",
            "--run",
            str(runs["finetune"].path),
            "--input",
            str(path),
            "--out",
            str(tmp_path / "out.csv"),
            "--device",
            "cpu",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and message in err
    assert not (tmp_path / "out.csv").exists()


def test_predict_on_blank_texts_only_is_an_error_not_a_confident_guess(runs, tmp_path, capsys):
    path = tmp_path / "blank.csv"
    path.write_text('id,text\n1,"   "\n2,\n3," "\n', encoding="utf-8")
    code = main(
        [
            "predict",
            "--run",
            str(runs["finetune"].path),
            "--input",
            str(path),
            "--out",
            str(tmp_path / "out.csv"),
            "--device",
            "cpu",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and "blank" in err
    assert not (tmp_path / "out.csv").exists()


def test_predict_leaves_blank_rows_empty_and_names_them(runs, toy_dataset, tmp_path, capsys):
    texts = ["sports news today", "  ", "money report", ""]
    path = tmp_path / "some.csv"
    pd.DataFrame({"id": [1, 2, 3, 4], "text": texts}).to_csv(path, index=False)
    out = tmp_path / "out.csv"
    code = main(
        [
            "predict",
            "--run",
            str(runs["finetune"].path),
            "--input",
            str(path),
            "--out",
            str(out),
            "--device",
            "cpu",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0
    assert "warning: 2 blank texts left unclassified (text rows 2, 4" in captured.err
    table = pd.read_csv(out, keep_default_na=False)
    assert list(table["pred"] == "") == [False, True, False, True]
    assert list(table["probability"] == "") == [False, True, False, True]
    expected = score_texts(runs["finetune"], ["sports news today", "money report"])
    assert list(table["pred"][[0, 2]]) == list(expected.idxmax(axis=1))


def test_an_export_loads_in_a_fresh_process_from_the_folder_alone(runs, tmp_path, capsys):
    run = runs["finetune"]
    out = tmp_path / "classifier"
    assert main(["export", "--run", str(run.path), "--out", str(out)]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert {
        "model.safetensors",
        "glee_classifier.json",
        "README.md",
        "backbone/config.json",
    } <= set(listing["files"])
    texts = run.predictions["text"].tolist()[:5]
    code = (
        "import json, sys; from glee_core import load_classifier; "
        "c = load_classifier(sys.argv[1]); "
        "print(json.dumps(c.probabilities(json.loads(sys.argv[2])).values.tolist()))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("GLEE_")}
    done = subprocess.run(
        [sys.executable, "-c", code, str(out), json.dumps(texts)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        env={**env, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    probs = np.asarray(json.loads(done.stdout))
    np.testing.assert_allclose(probs, softmax(run.logits[:5]), rtol=1e-4, atol=1e-5)

    card = ModelCard.load(out / "README.md")
    assert card.data.library_name == "glee-studio" and "prompt" in card.data.tags
    assert card.data.datasets == ["toy"]  # the CSV's name, never its path
    assert "/" not in card.data.datasets[0] and str(run.path.parent) not in card.text
    for fact in (
        run.run_id,
        "Tail F1",
        "Few-shot F1",
        run.record.dataset.fingerprint,
        "Prompt-tuning (prompt)",
        "MLM head pretrained: yes",
    ):
        assert fact in card.text, fact


def test_a_quick_mode_export_references_or_includes_its_backbone(runs, tmp_path):
    run = runs["frozen"]
    texts = run.predictions["text"].tolist()[:4]
    referenced = export_run(run, tmp_path / "ref")
    assert not (referenced / "backbone" / "model.safetensors").exists()
    np.testing.assert_allclose(
        load_classifier(referenced).probabilities(texts),
        softmax(run.logits[:4]),
        rtol=1e-4,
        atol=1e-5,
    )
    # the scikit-learn convention: classes_, predict_proba, predict
    classifier = load_classifier(referenced)
    assert list(classifier.classes_) == run.record.dataset.classes
    np.testing.assert_allclose(
        classifier.predict_proba(texts), softmax(run.logits[:4]), rtol=1e-4, atol=1e-5
    )
    assert classifier.predict(texts) == run.predictions["pred"].tolist()[:4]
    included = export_run(run, tmp_path / "inc", include_backbone=True)
    assert (included / "backbone" / "model.safetensors").is_file()
    np.testing.assert_allclose(
        load_classifier(included).probabilities(texts),
        softmax(run.logits[:4]),
        rtol=1e-4,
        atol=1e-5,
    )
    manifest = json.loads((referenced / "glee_classifier.json").read_text())
    manifest["backbone"]["fingerprint"] = "0" * 16  # trained on another backbone than found
    (referenced / "glee_classifier.json").write_text(json.dumps(manifest))
    with pytest.raises(GleeError, match="--include-backbone"):
        load_classifier(referenced)
    with pytest.raises(GleeError, match="not an empty folder"):
        export_run(run, included)
    with pytest.raises(GleeError, match="keep the pretrained backbone"):
        export_run(runs["finetune"], tmp_path / "x", include_backbone=True)


def test_loading_an_export_never_unpickles(runs, tmp_path, monkeypatch):
    out = export_run(runs["finetune"], tmp_path / "c")

    def refuse(*args, **kwargs):
        raise AssertionError("unpickling attempted")

    for target, name in ((pickle, "load"), (pickle, "loads"), (torch, "load")):
        monkeypatch.setattr(target, name, refuse)
    assert load_classifier(out).probabilities(["sports"]).shape == (1, 5)


@pytest.mark.parametrize(
    "damage",
    [
        "{",
        "null",
        "[]",
        '{"format_version": "x"}',
        '{"format_version": 1, "record": 5}',
        '{"format_version": 1, "record": {}, "backbone": null}',
    ],
)
def test_a_damaged_export_manifest_is_one_error_naming_it(runs, tmp_path, damage):
    out = export_run(runs["frozen"], tmp_path / "c")
    (out / "glee_classifier.json").write_text(damage)
    with pytest.raises(GleeError, match="glee_classifier.json is damaged"):
        load_classifier(out)


def test_predict_reads_one_long_row_and_writes_no_live_formula(tiny_bert, tmp_path, capsys):
    """A single 300 KB text is one row (not "header only"); a class named like a formula comes
    back as text in predict's CSV, as in the app's downloads."""
    rows = "text,label\n" + "".join(
        f"report {i} about sports,{'=cmd|calc' if i % 2 else 'ok'}\n" for i in range(40)
    )
    data = tmp_path / "formula.csv"
    data.write_text(rows)
    assert (
        main(
            [
                "train",
                "--dataset",
                f"csv:{data}",
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
        )
        == 0
    )
    capsys.readouterr()
    [run] = RunStore(tmp_path / "runs").runs()
    long = tmp_path / "long.csv"
    long.write_text("text\n" + "sports " * 45_000 + "\n")
    out = tmp_path / "out.csv"
    assert (
        main(
            [
                "predict",
                "--run",
                str(run.path),
                "--input",
                str(long),
                "--out",
                str(out),
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["rows"] == 1
    texts = tmp_path / "texts.csv"
    texts.write_text(
        "text\n"
        + "".join(f"report {i} about sports\n" for i in range(20))
        + '=HYPERLINK("http://evil.example")\n'
    )
    assert (
        main(
            [
                "predict",
                "--run",
                str(run.path),
                "--input",
                str(texts),
                "--out",
                str(out),
                "--device",
                "cpu",
                "--top-k",
                "2",
            ]
        )
        == 0
    )
    table = pd.read_csv(out, keep_default_na=False, dtype=str)
    cells = set(table["pred"]) | set(table["top1"]) | set(table["top2"])
    assert "'=cmd|calc" in cells and "=cmd|calc" not in cells
    # B5b: the input's own texts too (tickets, messages: anyone's words)
    assert (
        not any(t.startswith("=") for t in table["text"])
        and "'=HYPERLINK(" in table["text"].iloc[-1]
    )


def test_the_model_card_escapes_hostile_class_names_and_promises_no_pipeline(tmp_path):
    """Class names are the user's text: a link, an HTML tag, a '|' or a line break in one must
    read as itself on the Hub (which renders HTML), never break the per-class table; a glee
    folder is not a pipeline() folder, so the card declares no pipeline_tag."""
    from glee_core.serve.card import model_card
    from tests.helpers.synthetic_runs import synthetic_dataset, write_synthetic_run

    base = synthetic_dataset(4, "demo")
    hostile = [
        "[Sign in](https://evil.example)",
        "<img src=x onerror=alert(1)>",
        "a|b",
        "two\nlines",
    ]
    names = dict(zip(base.classes, hostile, strict=True))
    dataset = replace(
        base,
        classes=hostile,
        head_classes=[names[c] for c in base.head_classes],
        tail_classes=[names[c] for c in base.tail_classes],
        verbalizer={names[c]: w for c, w in base.verbalizer.items()},
        class_counts={names[c]: n for c, n in base.class_counts.items()},
    )
    run = write_synthetic_run(RunStore(tmp_path), dataset, "cls-relu", 1)
    card = model_card(run)
    assert "pipeline_tag" not in card
    assert "](https://" not in card and "<img" not in card and "&lt;img" in card
    table = card[card.index("| class | group |") :].split("\n\n")[0].splitlines()
    assert len(table) == 2 + len(hostile)  # one row a class: nothing split or broken
    assert all(row.count(" | ") == 7 for row in table[2:])  # eight cells each


def test_an_ensemble_of_runs_predicts_exports_and_loads_as_their_probabilities_averaged(
    runs, toy_dataset, tmp_path, capsys
):
    """The recommendation's ensemble outside the lab (issue #81): ``predict --run A,B`` scores
    with the runs' probabilities averaged; ``export --run A,B`` writes one folder that
    ``load_classifier`` reads back as the same average; the forms that hold one classifier
    refuse in one line, and a damaged ensemble manifest is one error naming it."""
    a, b = runs["finetune"], runs["frozen"]
    texts = toy_dataset.splits["test"]["text"].tolist()[:6]
    expected = (score_texts(a, texts) + score_texts(b, texts)) / 2
    path = tmp_path / "in.csv"
    pd.DataFrame({"text": texts}).to_csv(path, index=False)
    both = f"{a.path},{b.path}"
    assert (
        main(["predict", "--run", both, "--input", str(path), "--out", str(tmp_path / "p.csv")])
        == 0
    )
    capsys.readouterr()
    table = pd.read_csv(tmp_path / "p.csv", keep_default_na=False)
    assert list(table["pred"]) == list(expected.idxmax(axis=1))
    np.testing.assert_allclose(table["probability"], expected.max(axis=1), rtol=1e-4, atol=1e-5)
    assert "label_word" not in table  # averaged probabilities, no one label word scored them

    out = tmp_path / "ensemble"
    assert main(["export", "--run", both, "--out", str(out)]) == 0
    files = json.loads(capsys.readouterr().out)["files"]
    assert {"glee_ensemble.json", "README.md", "member-1/model.safetensors"} <= set(files)
    card = (out / "README.md").read_text()
    assert "An ensemble of 2 classifiers" in card and a.run_id in card and b.run_id in card
    measured = ensemble_test_scores([a, b])  # the average's own test scores, from the stored logits
    assert (
        f"the average scored macro-F1 {measured['f1']:.1f} and tail F1 "
        f"{measured['tail_f1']:.1f} (one seed of the members' runs)"
    ) in card
    loaded = load_classifier(out)
    np.testing.assert_allclose(loaded.predict_proba(texts), expected.to_numpy(), atol=1e-5)
    assert loaded.predict(texts) == list(expected.idxmax(axis=1))

    assert main(["export", "--run", both, "--out", str(tmp_path / "o"), "--format", "onnx"]) == 2
    assert "--format onnx holds one classifier; an ensemble of 2 runs leaves as the studio's" in (
        capsys.readouterr().err
    )
    assert main(["export", "--run", f"{a.path},{a.path}", "--out", str(tmp_path / "t")]) == 2
    assert "names a run twice" in capsys.readouterr().err
    (out / "glee_ensemble.json").write_text('{"format_version": 1, "members": ["../x"]}')
    with pytest.raises(GleeError, match="glee_ensemble.json is damaged"):
        load_classifier(out)


def test_the_apps_jobs_export_and_classify_with_an_ensemble(runs, toy_dataset, tmp_path, capsys):
    """Home's "Build the averaged classifier's folder" and the Playground's "Classify its
    texts" with the average: their requests name the members' ids joined by commas, the jobs
    find each in the stores and write the zip of one ensemble folder and the averaged
    predictions; a member missing from the stores is one line naming it."""
    import zipfile

    from glee_core.models.requests import ExportRequest, PredictRequest

    a, b = runs["finetune"], runs["frozen"]
    stores = [str(a.path.parent)]
    ids = f"{a.run_id},{b.run_id}"
    request = ExportRequest(run=ids, form="glee", out=str(tmp_path / "e.zip"), stores=stores)
    assert main(["export", "--request", str(request.write(tmp_path / "e.json"))]) == 0
    names = zipfile.ZipFile(tmp_path / "e.zip").namelist()
    assert f"{a.run_id}-average-of-2/glee_ensemble.json" in names
    assert f"{a.run_id}-average-of-2/member-2/model.safetensors" in names

    texts = toy_dataset.splits["test"]["text"].tolist()[:4]
    pd.DataFrame({"text": texts}).to_csv(tmp_path / "in.csv", index=False)
    request = PredictRequest(
        input=str(tmp_path / "in.csv"), out=str(tmp_path / "p.csv"), run=ids, stores=stores
    )
    assert main(["predict", "--request", str(request.write(tmp_path / "p.json"))]) == 0
    expected = (score_texts(a, texts) + score_texts(b, texts)) / 2
    table = pd.read_csv(tmp_path / "p.csv")
    assert list(table["pred"]) == list(expected.idxmax(axis=1))
    capsys.readouterr()
    request = replace(request, run=f"{a.run_id},gone-run")
    assert main(["predict", "--request", str(request.write(tmp_path / "q.json"))]) == 2
    assert "run gone-run is not in the stores" in capsys.readouterr().err
