"""The classifier leaves the lab: every head, in quick mode and fine-tuned, LoRA and P-tuning v2,
exported as a transformers folder and as an ONNX folder, loaded in a process where ``import
glee_core`` fails (for ONNX, ``import torch`` and ``import transformers`` too), gives the run's
own probabilities within 1e-4 on 40 texts - one longer than the max length, a batch of mixed
lengths - and the same top class on every one; a peft adapter loads with peft."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from huggingface_hub import ModelCard

from glee_core.cli import main
from glee_core.models.config import TrainConfig
from glee_core.models.methods import METHODS, get_method
from glee_core.runs.store import RunStore
from glee_core.serve.export import export_run
from glee_core.serve.inference import Scorer
from glee_core.train.experiment import run_launch
from glee_core.train.launch import Launch

ROOT = Path(__file__).resolve().parents[1]
# a process that cannot import these (the hub's cache and the network are off too)
BLOCK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Block())
"""
HF_LOAD = """
import json, sys, torch
from transformers import AutoTokenizer, pipeline
texts, out = json.loads(sys.argv[2]), {}
for folder in json.loads(sys.argv[1]):
    classify = pipeline("text-classification", model=folder, trust_remote_code=True,
                        truncation=True)
    rows = classify(texts, top_k=None, batch_size=16)
    labels = classify.model.config.id2label
    order = [labels[i] for i in range(len(labels))]
    out[folder] = [[{r["label"]: r["score"] for r in row}[c] for c in order] for row in rows]
print(json.dumps(out))
"""
ONNX_LOAD = """
import json, sys
texts, out = json.loads(sys.argv[2]), {}
for folder in json.loads(sys.argv[1]):
    sys.path.insert(0, folder)
    from onnx_classifier import OnnxClassifier
    classifier = OnnxClassifier(folder)
    out[folder] = classifier.predict_proba(texts).tolist()
    assert list(classifier.classes_) == json.load(open(folder + "/glee_onnx.json"))["classes"]
    sys.path.remove(folder)
    del sys.modules["onnx_classifier"]
print(json.dumps(out))
"""


def load_elsewhere(
    script: str, blocked: set[str], folders: list[Path], texts: list[str], cwd: Path
) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GLEE_", "PYTHONPATH"))}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            BLOCK.format(blocked=blocked) + script,
            json.dumps([str(f) for f in folders]),
            json.dumps(texts),
        ],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
        env={**env, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def exported(tiny_bert, toy_dataset, tmp_path_factory):
    """Every method in quick mode (one on mean pooling too), and a CLS head and a prompt head
    fine-tuned, with LoRA, with P-tuning v2, with IA³, with BitFit, with prompt tuning and with
    bottleneck adapters; each exported as hf and as onnx."""
    root = tmp_path_factory.mktemp("formats")
    store = RunStore(root / "runs")
    quick = TrainConfig(mode="frozen", epochs=2, batch_size=16, pooling="cls", choose_by="dev")
    runs = run_launch(
        Launch(
            toy_dataset,
            [m for m in METHODS.values() if m.supports_frozen],
            [1],
            str(tiny_bert),
            quick,
            store,
        )
    )
    runs += run_launch(
        Launch(
            toy_dataset,
            [get_method("cls-relu-pt-ln")],
            [1],
            str(tiny_bert),
            TrainConfig(mode="frozen", epochs=2, batch_size=16, pooling="mean", choose_by="dev"),
            store,
        )
    )
    for mode in ("finetune", "lora", "ptuning2", "ia3", "bitfit", "prompt-tuning", "adapter"):
        runs += run_launch(
            Launch(
                toy_dataset,
                [get_method("cls-relu-pt-ln"), get_method("prompt")],
                [1],
                str(tiny_bert),
                TrainConfig(mode=mode, epochs=1, batch_size=16, lr=1e-3, recipe="paper"),
                store,
            )
        )
    texts = (
        toy_dataset.splits["test"]["text"].tolist() + toy_dataset.splits["train"]["text"].tolist()
    )[:39] + ["sports news " * 200]
    folders = {"hf": [], "onnx": []}
    expected = {}
    for run in runs:
        expected[run.run_id] = Scorer.for_run(run, precision="fp32").predict_proba(texts)
        for form in folders:
            out = root / "out" / f"{run.run_id}-{form}"
            export_run(run, out, form=form)
            folders[form].append(out)
    return runs, texts, folders, expected, root


def check(runs, folders, got, expected, form):
    for run, folder in zip(runs, folders, strict=True):
        probs = np.asarray(got[str(folder)])
        assert probs.shape == expected[run.run_id].shape, (form, run.run_id)
        np.testing.assert_allclose(
            probs, expected[run.run_id], atol=1e-4, err_msg=(f"{form}: {run.run_id}")
        )
        assert (probs.argmax(1) == expected[run.run_id].argmax(1)).all(), (form, run.run_id)


@pytest.mark.slow
def test_every_head_and_mode_loads_in_plain_transformers_with_the_runs_scores(exported):
    runs, texts, folders, expected, root = exported
    assert len(runs) == sum(m.supports_frozen for m in METHODS.values()) + 1 + 14
    got = load_elsewhere(HF_LOAD, {"glee_core"}, folders["hf"], texts, root)
    check(runs, folders["hf"], got, expected, "hf")
    stock = [
        run.method
        for run, folder in zip(runs, folders["hf"], strict=True)
        if not (folder / "modeling_glee.py").exists()
    ]
    # CLS-tuning ∘ T on [CLS] (η-norm folded in; focal loss only trains) is BERT's own pooler
    # and classifier
    assert set(stock) == {"cls-tanh", "cls-tanh-eta-norm", "cls-tanh-focal"}
    config = json.loads((folders["hf"][0] / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"]
    assert config["id2label"]["0"] == runs[0].record.dataset.classes[0]


@pytest.mark.slow
def test_every_head_and_mode_loads_in_onnx_runtime_alone_with_the_runs_scores(exported):
    runs, texts, folders, expected, root = exported
    got = load_elsewhere(
        ONNX_LOAD, {"glee_core", "torch", "transformers"}, folders["onnx"], texts, root
    )
    check(runs, folders["onnx"], got, expected, "onnx")


def test_each_form_has_a_card_true_to_it(exported):
    runs, _, folders, _, _ = exported
    hf = ModelCard.load(folders["hf"][0] / "README.md")
    assert hf.data.pipeline_tag == "text-classification" and hf.data.library_name == "transformers"
    assert 'pipeline("text-classification", model="path/to/this/folder"' in hf.text
    assert "no remote code" in hf.text
    remote = ModelCard.load(
        next(f for f in folders["hf"] if (f / "modeling_glee.py").exists()) / "README.md"
    )
    assert "trust_remote_code=True" in remote.text
    onnx = ModelCard.load(folders["onnx"][0] / "README.md")
    assert onnx.data.pipeline_tag is None and onnx.data.library_name == "onnx"
    assert 'OnnxClassifier("path/to/this/folder")' in onnx.text


def test_every_line_of_each_card_is_true_of_its_folder(exported, tmp_path):
    """A card names only files its folder holds (an ONNX card promised `model.safetensors`, a
    quick-mode hf card said the backbone was referenced by name), no exported file carries a
    path of the machine that made it, every file has an ordinary mode, and the notes' code
    spans render as code, not as backslashes."""
    import re
    import stat

    runs, _, folders, _, _ = exported
    quick = next(i for i, r in enumerate(runs) if r.record.mode == "frozen")
    for form, expected in (("hf", "model.safetensors"), ("onnx", "model.onnx")):
        for folder in (folders[form][0], folders[form][quick]):
            card = (folder / "README.md").read_text()
            named = set(re.findall(r"`([\w.-]+\.(?:safetensors|onnx|json|py))`", card))
            assert expected in named and named <= {p.name for p in folder.iterdir()}, (form, named)
            assert "referenced by name" not in card
    lora = next(r for r in runs if r.record.mode == "lora")
    peft_card = (export_run(lora, tmp_path / "adapter", form="peft") / "README.md").read_text()
    assert "loaded by name" in peft_card and "glee_head.safetensors" in peft_card
    for folder in [*folders["hf"][:2], *folders["onnx"][:2], tmp_path / "adapter"]:
        for path in folder.rglob("*"):
            if path.is_file():
                assert stat.S_IMODE(path.stat().st_mode) & 0o044, path  # readable by others
                if path.suffix == ".json":  # no folder of the exporting machine
                    assert not re.search(r'name_or_path": "/', path.read_text()), path
    noted = next((f for f in folders["hf"] if "### Notes" in (f / "README.md").read_text()), None)
    if noted is not None:
        notes = (noted / "README.md").read_text().split("### Notes", 1)[1]
        assert "\\`" not in notes


def test_a_lora_run_leaves_as_a_peft_adapter_that_peft_loads(exported, tiny_bert, tmp_path):
    runs, texts, _, expected, _ = exported
    run = next(r for r in runs if r.record.mode == "lora" and r.method == "cls-relu-pt-ln")
    out = export_run(run, tmp_path / "adapter", form="peft")
    assert {
        "adapter_config.json",
        "adapter_model.safetensors",
        "glee_head.safetensors",
        "glee_head.json",
        "README.md",
    } <= {p.name for p in out.iterdir()}
    script = """
import json, sys, torch
from peft import PeftModel
from safetensors.torch import load_file
from transformers import AutoModel, AutoTokenizer
folder, base_name = sys.argv[1], sys.argv[3]
base = AutoModel.from_pretrained(base_name, add_pooling_layer=False)
encoder = PeftModel.from_pretrained(base, folder).eval()
head = load_file(folder + "/glee_head.safetensors")
spec = json.load(open(folder + "/glee_head.json"))
tok = AutoTokenizer.from_pretrained(base_name)
texts = json.loads(sys.argv[2])
enc = tok(texts, truncation=True, max_length=spec["max_length"], padding=True,
          return_tensors="pt")
with torch.no_grad():
    states = encoder(input_ids=enc["input_ids"],
                     attention_mask=enc["attention_mask"]).last_hidden_state
    x = states[:, 0] @ head["dense.weight"].T + head["dense.bias"]
    x = torch.relu(x)
    x = torch.nn.functional.layer_norm(x, x.shape[-1:], head["norm.weight"], head["norm.bias"],
                                       spec["layer_norm_eps"])
    logits = x @ head["predictor.weight"].T + head["predictor.bias"]
print(json.dumps(torch.softmax(logits, -1).tolist()))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GLEE_", "PYTHONPATH"))}
    done = subprocess.run(
        [sys.executable, "-c", script, str(out), json.dumps(texts[:20]), str(tiny_bert)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**env, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    np.testing.assert_allclose(
        np.asarray(json.loads(done.stdout.strip().splitlines()[-1])),
        expected[run.run_id][:20],
        atol=1e-4,
    )
    assert "PeftModel.from_pretrained" in (out / "README.md").read_text()


def test_a_form_a_run_cannot_take_is_one_error_line_naming_those_it_can(exported, tmp_path, capsys):
    runs, _, _, _, _ = exported
    tuned = next(r for r in runs if r.record.mode == "finetune")
    assert (
        main(["export", "--run", str(tuned.path), "--out", str(tmp_path / "x"), "--format", "peft"])
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "it leaves as glee, hf or onnx" in err[0]
    assert (
        main(
            [
                "export",
                "--run",
                str(tuned.path),
                "--out",
                str(tmp_path / "y"),
                "--format",
                "hf",
                "--quantize",
                "int8",
            ]
        )
        == 2
    )
    assert "--quantize is for --format onnx" in capsys.readouterr().err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    assert (
        main(
            [
                "export",
                "--run",
                str(tuned.path),
                "--out",
                str(tmp_path / "full"),
                "--format",
                "onnx",
            ]
        )
        == 2
    )
    assert "is not an empty folder" in capsys.readouterr().err


def test_int8_quantization_writes_its_f1_change_in_the_card(exported, tmp_path, capsys):
    runs, _, _, _, _ = exported
    run = next(r for r in runs if r.method == "cls-relu-pt-ln" and r.record.mode == "finetune")
    assert (
        main(
            [
                "export",
                "--run",
                str(run.path),
                "--out",
                str(tmp_path / "q"),
                "--format",
                "onnx",
                "--quantize",
                "int8",
            ]
        )
        == 0
    )
    listing = json.loads(capsys.readouterr().out)
    assert {"model.onnx", "model.int8.onnx", "onnx_classifier.py"} <= set(listing["files"])
    card = (tmp_path / "q" / "README.md").read_text()
    assert "`model.int8.onnx` (onnxruntime's dynamic int8 quantization): test macro-F1" in card
    # the matrix products only, each weight with a scale per output channel; the embedding
    # tables stay fp32
    graph = onnx.load(tmp_path / "q" / "model.int8.onnx").graph
    weights = {w.name: w for w in graph.initializer}
    products = [n for n in graph.node if n.op_type == "MatMulInteger"]
    assert products
    for node in products:
        scale = weights[node.input[1].removesuffix("_quantized") + "_scale"]
        assert list(scale.dims) == [weights[node.input[1]].dims[-1]], node.name
    tables = [w for w in graph.initializer if "embeddings" in w.name]
    assert tables and all(w.data_type == onnx.TensorProto.FLOAT for w in tables)


def test_bf16_scoring_asks_for_openvino_and_says_how_to_get_it(exported, monkeypatch):
    """``precision="bf16"`` runs the fp32 graph on OpenVINO's provider with bf16 matrix products;
    where onnxruntime lacks that provider (as here) it says which package brings it."""
    _, _, folders, _, _ = exported
    sys.path.insert(0, str(folders["onnx"][0]))
    try:
        import onnx_classifier  # noqa: PLC0415
    finally:
        sys.path.pop(0)
        sys.modules.pop("onnx_classifier", None)
    with pytest.raises(RuntimeError, match="pip install onnxruntime-openvino"):
        onnx_classifier.OnnxClassifier(folders["onnx"][0], precision="bf16")
    with pytest.raises(ValueError, match="'fp32' or 'bf16'"):
        onnx_classifier.OnnxClassifier(folders["onnx"][0], precision="fp16")
    monkeypatch.setattr(
        onnx_classifier.onnxruntime,
        "get_available_providers",
        lambda: ["OpenVINOExecutionProvider", "CPUExecutionProvider"],
    )
    [(name, options)] = onnx_classifier.providers("bf16", threads=2)
    assert name == "OpenVINOExecutionProvider" and options["num_of_threads"] == "2"
    assert json.loads(options["load_config"]) == {"CPU": {"INFERENCE_PRECISION_HINT": "bf16"}}
    assert onnx_classifier.providers("fp32", None) == ["CPUExecutionProvider"]


def test_push_to_hub_uses_the_clients_upload_and_offline_is_one_error_line(
    exported, tmp_path, capsys, monkeypatch
):
    from huggingface_hub import HfApi

    runs, _, _, _, _ = exported
    calls = []
    monkeypatch.setattr(
        HfApi,
        "create_repo",
        lambda self, repo, **kw: calls.append(("create", repo, kw.get("private"))),
    )
    monkeypatch.setattr(
        HfApi,
        "upload_folder",
        lambda self, **kw: (
            calls.append(
                ("upload", kw["repo_id"], sorted(p.name for p in Path(kw["folder_path"]).iterdir()))
            )
            or type("Info", (), {"commit_url": "https://huggingface.co/me/model/commit/1"})()
        ),
    )
    assert (
        main(
            [
                "export",
                "--run",
                str(runs[0].path),
                "--out",
                str(tmp_path / "a"),
                "--format",
                "hf",
                "--push-to-hub",
                "me/model",
                "--private",
            ]
        )
        == 0
    )
    assert calls[0] == ("create", "me/model", True) and calls[1][0] == "upload"
    assert "config.json" in calls[1][2] and "README.md" in calls[1][2]
    assert json.loads(capsys.readouterr().out)["hub"].startswith("https://huggingface.co/")

    monkeypatch.undo()  # the real client, offline as this machine is
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert (
        main(
            [
                "export",
                "--run",
                str(runs[0].path),
                "--out",
                str(tmp_path / "b"),
                "--format",
                "hf",
                "--push-to-hub",
                "me/model",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot push to the Hub as 'me/model'" in err[0]
    assert (tmp_path / "b" / "config.json").is_file()  # the folder is written all the same
