"""The GPU-shaped path, tested without a GPU: precision chosen by the device's capability (faked),
fp16's gradient scaler, batches padded to a few widths, and the GPU check's dry mode."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from glee_core.core import devices
from glee_core.core.devices import (
    grad_scaler,
    padded_width,
    resolve_eval_batch_size,
    resolve_pad_multiple,
    resolve_precision,
)
from glee_core.core.errors import GleeError
from glee_core.data.encoding import encode, padding_pieces
from glee_core.models.backbone import load_backbone
from glee_core.models.config import TrainConfig
from glee_core.models.methods import get_method
from glee_core.models.model import build_model
from glee_core.models.modes import MODES
from glee_core.models.scoring import Scoring, predict
from glee_core.train.step import TrainingState, optimizer_step

ROOT = Path(__file__).resolve().parents[1]
CUDA = torch.device("cuda")  # a device object needs no GPU; nothing is allocated on it here
CPU = torch.device("cpu")


@pytest.mark.parametrize(
    "capability, expected",
    [((9, 0), "bf16"), ((8, 0), "bf16"), ((8, 6), "bf16"), ((7, 5), "fp16"), ((6, 0), "fp16")],
)
def test_auto_precision_follows_the_gpus_compute_capability(monkeypatch, capability, expected):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    assert resolve_precision("auto", CUDA) == expected
    assert resolve_precision("fp32", CUDA) == "fp32"
    assert resolve_precision("fp16", CUDA) == "fp16"


@pytest.mark.parametrize("native, expected", [(True, "bf16"), (False, "fp32")])
def test_auto_precision_on_a_cpu_is_bf16_only_where_it_is_native(monkeypatch, native, expected):
    monkeypatch.setattr(devices, "cpu_has_bf16", lambda: native)
    assert resolve_precision("auto", CPU) == expected


def test_fp16_on_a_cpu_is_refused_with_what_to_use_instead():
    with pytest.raises(GleeError, match="fp16 needs a CUDA GPU.*fp32"):
        resolve_precision("fp16", CPU)
    with pytest.raises(GleeError, match="--precision must be one of"):
        TrainConfig(precision="fp8")


@pytest.mark.filterwarnings("ignore:torch.cuda.amp.GradScaler is enabled")
def test_only_fp16_gets_a_gradient_scaler():
    assert isinstance(grad_scaler(CUDA, "fp16"), torch.amp.GradScaler)
    assert grad_scaler(CUDA, "bf16") is None and grad_scaler(CPU, "fp32") is None


def test_gpu_batches_are_padded_to_few_widths_never_past_max_length():
    assert resolve_pad_multiple(None, CUDA) == 64
    assert resolve_pad_multiple(None, CPU) == 1
    assert resolve_pad_multiple(16, CPU) == 16
    assert padded_width(70, 64, 256) == 128
    assert padded_width(64, 64, 256) == 64
    assert padded_width(250, 64, 256) == 256
    assert padded_width(130, 64, 150) == 150  # capped at max length
    assert padded_width(70, 1, 256) is None  # each batch its own longest text
    widths = {padded_width(n, 64, 256) for n in range(1, 257)}
    assert widths == {64, 128, 192, 256}


def test_evaluation_batches_are_large_on_a_gpu_and_cache_sized_on_a_cpu():
    assert resolve_eval_batch_size(None, CUDA) == 128
    assert resolve_eval_batch_size(None, CPU) == 32  # ~25% faster there than 128 (BENCHMARKS)
    assert resolve_eval_batch_size(64, CPU) == 64  # --eval-batch-size wins


def test_padding_to_a_multiple_changes_neither_the_scores_nor_the_run_id(tiny_bert, toy_dataset):
    """Padding is masked out: scored with batches padded to multiples of 16 (as a GPU pads to
    64), a model gives the scores of own-length padding; and the run is the same run."""
    backbone = load_backbone(str(tiny_bert))
    plain, padded = TrainConfig(recipe="paper"), TrainConfig(recipe="paper", pad_multiple=16)
    assert plain.identity() == padded.identity()
    for method in ("cls-tanh", "prompt"):
        spec = get_method(method)
        torch.manual_seed(0)
        model = build_model(spec, backbone, toy_dataset.classes, toy_dataset.verbalizer)
        split = encode(
            toy_dataset.splits["test"],
            backbone.tokenizer,
            spec.input_format,
            toy_dataset.template,
            64,
        )
        assert len({int(n) for n in split.lengths}) > 3  # batches of several widths
        own, _ = predict(model, split, CPU, Scoring(batch_size=8, precision="fp32"))
        wide, _ = predict(model, split, CPU, Scoring(0, 8, "fp32", pad_multiple=16))
        np.testing.assert_allclose(own, wide, atol=1e-5)


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler")  # the skipped step
def test_the_gradient_scaler_skips_an_overflowing_step_and_counts_it():
    """fp16's path through the optimizer step (run on the CPU's scaler: the same logic)."""
    model = torch.nn.Linear(3, 2)
    config = TrainConfig(recipe="paper")
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    state = TrainingState(
        model,
        get_method("cls-tanh"),
        config,
        optimizer,
        scheduler,
        list(model.parameters()),
        np.random.default_rng(0),
        CPU,
        0,
    )
    assert state.scaler is None  # fp32 on this CPU or bf16: no scaler
    state.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)
    state.skipped_steps = torch.zeros((), dtype=torch.long)
    before = model.weight.detach().clone()
    optimizer_step(state, (model(torch.ones(1, 3)) * float("inf")).sum())
    assert int(state.skipped_steps) == 1 and torch.equal(model.weight, before)
    optimizer_step(state, model(torch.ones(1, 3)).sum())
    assert int(state.skipped_steps) == 1 and not torch.equal(model.weight, before)


def test_compile_is_a_yes_no_flag_outside_the_run_identity():
    assert TrainConfig(compile="yes").compile is True
    assert TrainConfig(compile="no").compile is False
    assert "compile" not in TrainConfig(compile="yes").identity()
    with pytest.raises(GleeError, match="--compile"):
        TrainConfig(compile="maybe")


def test_the_gpu_check_runs_its_dry_mode_on_a_cpu(tmp_path):
    """``bench/gpu_check.py --dry``: every section at tiny sizes, one JSON and one Markdown."""
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "gpu_check.py"),
            "--dry",
            "--device",
            "cpu",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert report["ok"] and report["dry"]
    peft = [m.name for m in MODES.values() if m.parameter_efficient]  # a CLS and a prompt head
    assert report["methods"]["methods"] == 19 + 2 * len(peft) and not report["methods"]["failed"]
    assert {r["mode"] for r in report["methods"]["rows"]} == {"finetune", "frozen", *peft}
    assert all(
        r["finite_loss"] and r["reloaded_agreement"] >= 0.98 for r in report["methods"]["rows"]
    )
    assert {r["precision"] for r in report["precision"]["rows"]} == {"bf16"}
    paths = {r["path"] for r in report["throughput"]["rows"]}
    assert {"plain, eager", "glee (cls-tanh)", "glee (prompt)"} <= paths
    assert all(
        r["train_examples_per_s"] > 0 and r["eval_examples_per_s"] > 0
        for r in report["throughput"]["rows"]
    )
    profile = report["profile"]  # where a step's time goes, in one file the device tool returns
    assert profile["steps"] > 0 and profile["ops_per_step"] > 0
    assert "## by host time" in (tmp_path / profile["file"]).read_text()
    assert [r["runs_at_once"] for r in report["concurrency"]["rows"]] == [1, 2]
    assert report["quick"]["rows"][0]["heads"] == 19
    assert report["projection"]["packed_minutes"] > 0
    modes = {r["what"]: r for r in report["modes"]["rows"]}
    assert set(modes) == {
        "finetune, cls-relu-pt-ln",
        "lora, cls-relu-pt-ln",
        "ptuning2, cls-relu-pt-ln",
        "ptuning2, prompt",
        "adapt (TAPT), 1 epoch",
    }
    assert all(r["train_examples_per_s"] > 0 for r in modes.values())
    full = modes["finetune, cls-relu-pt-ln"]["trainable"]
    assert modes["lora, cls-relu-pt-ln"]["trainable"] < full / 10  # adapters and the head only
    assert modes["adapt (TAPT), 1 epoch"]["trainable"] > full  # the MLM head trains too
    assert report["modes"]["tapt_100_epochs_minutes"] > report["modes"]["tapt_10_epochs_minutes"]
    markdown = (tmp_path / "gpu_check.md").read_text()
    for section in (
        "methods",
        "precision",
        "shapes",
        "throughput",
        "profile",
        "concurrency",
        "quick",
        "modes",
        "projection",
    ):
        assert f"## {section} (ok" in markdown


def test_a_batch_of_mixed_lengths_trains_in_pieces_with_the_whole_batchs_loss(
    tiny_bert, toy_dataset, monkeypatch
):
    """On a CPU a class-balanced batch (random lengths) is forwarded in pieces of like length,
    each padded to its own: the loss, supcon's term over the whole batch included, and its
    gradients are those of the batch padded once."""
    from glee_core.train import step  # noqa: PLC0415

    backbone = load_backbone(str(tiny_bert))
    spec = get_method("cls-relu")
    frame = toy_dataset.splits["train"].head(16).copy()
    frame["text"] = [text + " the" * (40 * (i % 4 == 0)) for i, text in enumerate(frame["text"])]
    split = encode(frame, backbone.tokenizer, spec.input_format, toy_dataset.template, 64)
    index = np.arange(len(frame))
    assert len(padding_pieces(index, split.lengths)) > 1  # four long texts, twelve short
    config = TrainConfig(recipe="paper", supcon=0.5, precision="fp32")

    def loss_and_grads():
        torch.manual_seed(0)
        model = build_model(spec, backbone, toy_dataset.classes, toy_dataset.verbalizer).eval()
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.SGD(params, lr=0.0)
        optimizer.zero_grad(set_to_none=True)  # the backbone's weights are shared between calls
        state = TrainingState(model, spec, config, optimizer, None, params, None, CPU, 0)
        loss, _ = step.forward_loss(state, split, index, "fp32")
        loss.backward()
        return loss.item(), [p.grad.clone() for p in params]

    pieces, piece_grads = loss_and_grads()
    monkeypatch.setattr(step, "padding_pieces", lambda index, lengths: [index])
    whole, whole_grads = loss_and_grads()
    assert pieces == pytest.approx(whole, rel=1e-5)
    for piece, once in zip(piece_grads, whole_grads, strict=True):
        torch.testing.assert_close(piece, once, rtol=1e-4, atol=1e-6)


def test_a_batch_already_of_like_lengths_stays_whole():
    index = np.arange(8)
    assert [p.tolist() for p in padding_pieces(index, np.full(8, 20))] == [index.tolist()]
    mixed = padding_pieces(index, np.array([90, 5, 5, 5, 88, 5, 5, 6]))
    assert sorted(np.concatenate(mixed).tolist()) == index.tolist()
    assert sum(len(p) * max(np.array([90, 5, 5, 5, 88, 5, 5, 6])[p]) for p in mixed) < 8 * 90 / 2
