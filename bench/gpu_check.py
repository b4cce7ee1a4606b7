"""The GPU check: everything a lent GPU should tell us, in one command.

    python bench/gpu_check.py --out DIR [--dataset r8 --data-dir ../shared/data]
        [--model random:bert-base] [--sections methods,precision,throughput,...]
    python bench/gpu_check.py --dry --out DIR      # on a CPU, tiny sizes (CI runs this)

Sections (each timed, each failure recorded and the rest run on):

- ``methods``: every method of the registry a few steps on the device (fine-tuned, and the
  closed-form probes on frozen features): finite losses, the run stored, reloaded through
  :meth:`glee_core.serve.inference.Scorer.for_run` and scoring the test split to the stored
  predictions.
- ``precision``: one batch's logits under bf16 and fp16 autocast against fp32 (relative error).
- ``throughput``: training and evaluation examples/s of Glee Studio's path (as the device
  defaults it, and with each batch padded to its own length, and under ``--compile yes``) beside
  a plain PyTorch + transformers loop (padded to max length, fused AdamW, the same autocast;
  eager and ``torch.compile``) on the same texts; MFU over all tokens and over real tokens;
  peak memory. Each measurement runs in its own process.
- ``concurrency``: one ``train`` launch of N seeds with ``--runs-at-once N``, N = 1, 2, 4, 8:
  wall time and the throughput gain.
- ``quick``: the quick compare (every head, frozen backbone) on the dataset, one seed and
  three, with the feature pass and from cached features.
- ``modes``: how to tune at this size (issue #29): each way of tuning, w/ pt. LN under
  fine-tune, LoRA and P-tuning v2 (and prompt-tuning under P-tuning v2, its own setting) for
  one epoch of ``--mode-examples`` texts, its training examples/s, trainable parameters and
  peak GPU memory; then one epoch of task-adaptive pretraining (``adapt``) over as many
  training texts, its rate and what 10 and 100 epochs of it over the whole set would take.
- ``projection``: the paper's Table 2 R52 column (25 runs x 10 epochs) from the measured rates
  and the best concurrency gain.

It writes ``gpu_check.json`` and ``gpu_check.md`` (one table per section) to ``--out`` and prints
the Markdown last. ``--dry`` runs every section at tiny sizes on whatever device there is.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModelForSequenceClassification, AutoTokenizer  # noqa: E402

from bench.train_throughput import (  # noqa: E402
    PEAK_BF16,
    peak_memory_mb,
    resolve_model,
    training_sample,
)
from glee_core.core.devices import (  # noqa: E402
    autocast,
    batch_to,  # noqa: E402
    cpu_has_bf16,
    resolve_device,
    resolve_precision,
)
from glee_core.data.datasets import load_dataset  # noqa: E402
from glee_core.data.encoding import encode  # noqa: E402
from glee_core.data.splits import stratified_sample  # noqa: E402
from glee_core.models.backbone import load_backbone  # noqa: E402
from glee_core.models.config import TrainConfig  # noqa: E402
from glee_core.models.methods import METHODS, get_method  # noqa: E402
from glee_core.models.model import build_model  # noqa: E402
from glee_core.models.modes import MODES  # noqa: E402
from glee_core.models.options import AdaptOptions  # noqa: E402
from glee_core.models.scoring import get_backbone, model_inputs  # noqa: E402
from glee_core.runs.store import RunStore, slug  # noqa: E402
from glee_core.serve.inference import Scorer  # noqa: E402
from glee_core.train.adapt import adapt  # noqa: E402
from glee_core.train.experiment import run_launch  # noqa: E402
from glee_core.train.launch import Launch  # noqa: E402
from tests.helpers.tiny_models import dataset_vocabulary, save_tiny_mlm  # noqa: E402

SECTIONS = (
    "methods",
    "precision",
    "shapes",
    "throughput",
    "profile",
    "concurrency",
    "quick",
    "modes",
    "projection",
)
R52_TRAIN, R52_DEV, R52_TEST = 6532, 1000, 2568  # the paper's R52 split sizes
DRY_VOCAB_EXTRA = ("this", "is", "topic", "question", "answer")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="folder for gpu_check.json and gpu_check.md")
    p.add_argument(
        "--dry", action="store_true", help="tiny sizes on whatever device there is (the CI's run)"
    )
    p.add_argument("--dataset", help="default: r8 (dry: demo)")
    p.add_argument(
        "--data-dir", default=os.environ.get("GLEE_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    )
    p.add_argument("--model", help="default: random:bert-base (dry: a tiny random BERT)")
    p.add_argument("--quick-model", help="the quick compare's backbone (default: --model)")
    p.add_argument("--max-length", type=int, help="default 256 (dry: 64)")
    p.add_argument(
        "--quick-seeds",
        help="the quick compare's seed lists, ';'-separated (default '1;1,2,3'; dry: '1')",
    )
    p.add_argument("--device", default="auto")
    p.add_argument("--sections", default=",".join(SECTIONS))
    p.add_argument(
        "--train-examples",
        type=int,
        help="timed per throughput measurement (default 1,280; dry: 48)",
    )
    p.add_argument(
        "--variants",
        default=None,
        help="throughput variants to time (default all: plain, glee, glee-prompt, and "
        "on a GPU glee-own-length, glee-cudnn-attention, plain-compiled, "
        "glee-compiled, glee-graphs: compiled with CUDA graphs)",
    )
    p.add_argument("--concurrency", default=None, help="process counts (default 1,2,4,8; dry: 1,2)")
    p.add_argument(
        "--mode-examples",
        type=int,
        help="training texts per tuning mode's timing (default 1,024; dry: 32)",
    )
    p.add_argument(
        "--concurrency-examples",
        type=int,
        help="training texts per concurrent run (default 2,048; dry: 32)",
    )
    return p.parse_args(argv)


def defaults(args: argparse.Namespace) -> argparse.Namespace:
    dry = args.dry
    args.dataset = args.dataset or ("demo" if dry else "r8")
    args.max_length = args.max_length or (64 if dry else 256)
    args.train_examples = args.train_examples or (48 if dry else 1280)
    args.concurrency_examples = args.concurrency_examples or (32 if dry else 2048)
    args.mode_examples = args.mode_examples or (32 if dry else 1024)
    args.concurrency = [
        int(n) for n in (args.concurrency or ("1,2" if dry else "1,2,4,8")).split(",")
    ]
    args.sections = [s for s in args.sections.split(",") if s]
    args.variants = args.variants.split(",") if args.variants else None
    args.quick_seeds = [
        [int(seed) for seed in group.split(",")]
        for group in (args.quick_seeds or ("1" if dry else "1;1,2,3")).split(";")
    ]
    unknown = set(args.sections) - set(SECTIONS)
    if unknown:
        raise SystemExit(f"error: unknown sections {sorted(unknown)}; choose from {SECTIONS}")
    return args


def model_folder(args: argparse.Namespace) -> str:
    """The backbone every section uses: ``--model``, or (dry) a tiny random BERT whose
    vocabulary covers the dataset, or a bert-base-sized random one."""
    if args.model:
        return resolve_model(args.model)
    if not args.dry:
        return resolve_model("random:bert-base")

    dataset = load_dataset(args.dataset, data_dir=args.data_dir)
    folder = Path(tempfile.gettempdir()) / f"glee-gpu-check-tiny-{slug(dataset.id)}"
    if not (folder / "config.json").is_file():
        template = set(re.findall(r"\w+", dataset.template.lower()))
        save_tiny_mlm(
            folder, "bert", dataset_vocabulary(dataset) | template | set(DRY_VOCAB_EXTRA), seed=0
        )
    return str(folder)


def environment(args) -> dict:

    device = resolve_device(args.device)
    info = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": str(device),
        "cpu_cores": os.cpu_count(),
        "precision_auto": resolve_precision("auto", device),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(
            device_name=props.name,
            capability=".".join(map(str, props.major_minor()))
            if hasattr(props, "major_minor")
            else f"{props.major}.{props.minor}",
            memory_gib=round(props.total_memory / 2**30, 1),
            multiprocessors=props.multi_processor_count,
        )
    else:
        info.update(device_name=platform.processor() or "cpu", cpu_bf16=cpu_has_bf16())
    return info


# --- methods -------------------------------------------------------------------------------------


def check_methods(args, model: str) -> dict:
    """Every method a few steps, stored, reloaded, scored again; LoRA and P-tuning v2 on a CLS
    and a prompt head."""

    dataset = load_dataset(args.dataset, data_dir=args.data_dir)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        store = RunStore(folder)
        finetuned = [m for m in METHODS.values() if m.supports_finetune]
        frozen_only = [m for m in METHODS.values() if not m.supports_finetune]
        length = min(args.max_length, 128)
        plans = [
            (
                finetuned,
                TrainConfig(
                    recipe="paper",
                    lr=1e-4,
                    epochs=1,
                    limit=32 if args.dry else 96,
                    max_length=length,
                    device=args.device,
                ),
            ),
            # frozen: every training text (a closed-form probe needs two classes or more)
            (frozen_only, TrainConfig(mode="frozen", max_length=length, device=args.device)),
            # the parameter-efficient modes (peft), on a CLS head and a prompt head
            *[
                (
                    [METHODS["cls-relu-pt-ln"], METHODS["prompt"]],
                    TrainConfig(
                        recipe="paper",
                        mode=mode.name,
                        epochs=1,
                        limit=32 if args.dry else 96,
                        max_length=length,
                        device=args.device,
                    ),
                )
                for mode in MODES.values()
                if mode.parameter_efficient
            ],
        ]
        for methods, config in plans:
            for spec in methods:
                started = time.perf_counter()
                row = {"method": spec.id, "mode": config.mode}
                try:
                    run = run_launch(Launch(dataset, [spec], [1], model, config, store))[0]
                    losses = [r["train_loss"] for r in run.history]
                    scorer = Scorer.for_run(run, device=args.device)
                    test = dataset.splits["test"]
                    again = scorer.predict(
                        test["text"].tolist(),
                        test["text_b"].tolist() if test["text_b"].astype(bool).any() else None,
                    )
                    stored = run.predictions["pred"].tolist()
                    agree = float(np.mean([a == b for a, b in zip(again, stored, strict=True)]))
                    row.update(
                        finite_loss=all(math.isfinite(v) for v in losses),
                        train_loss=round(losses[-1], 4),
                        stored=run.path.is_dir(),
                        reloaded_agreement=round(agree, 4),
                        test_macro_f1=round(run.metrics.f1, 4),
                        precision=run.record.timing.precision,
                        trainable=run.record.tuning.trainable_parameters,
                        train_examples_per_s=run.record.timing.train_examples_per_second,
                    )
                    # bf16 rounding may flip a near-tie between two passes: allow 2%
                    row["ok"] = row["finite_loss"] and row["stored"] and agree >= 0.98
                except Exception as exc:  # recorded; the other methods go on
                    row.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
                row["seconds"] = round(time.perf_counter() - started, 2)
                rows.append(row)
    return {
        "rows": rows,
        "ok": all(r["ok"] for r in rows),
        "methods": len(rows),
        "failed": [r["method"] for r in rows if not r["ok"]],
    }


# --- precision -----------------------------------------------------------------------------------


def check_precision(args, model: str) -> dict:
    """One batch of 32 test texts through the prompt and cls-tanh models in each precision."""

    device = resolve_device(args.device)
    dataset = load_dataset(args.dataset, data_dir=args.data_dir)
    backbone = load_backbone(model)
    frame = dataset.splits["test"].head(32)
    precisions = ["bf16", "fp16"] if device.type == "cuda" else ["bf16"]
    rows = []
    for method in ("cls-tanh", "prompt"):
        spec = get_method(method)
        torch.manual_seed(0)
        net = build_model(spec, backbone, dataset.classes, dataset.verbalizer).to(device).eval()
        split = encode(
            frame, backbone.tokenizer, spec.input_format, dataset.template, args.max_length
        )
        batch = batch_to(
            split.batch(range(len(split)), backbone.tokenizer.pad_token_id or 0), device
        )
        with torch.inference_mode():
            reference, _ = net(**model_inputs(batch))
            reference = reference.double()
            for precision in precisions:
                with autocast(device, precision):
                    out, _ = net(**model_inputs(batch))
                out = out.double()
                error = float((out - reference).norm() / reference.norm().clamp_min(1e-12))
                agree = float((out.argmax(1) == reference.argmax(1)).float().mean())
                rows.append(
                    {
                        "method": method,
                        "precision": precision,
                        "relative_error": round(error, 6),
                        "argmax_agreement": agree,
                        "finite": bool(torch.isfinite(out).all()),
                        # bf16 operands: 1e-3 .. 1e-2 expected; fp16 tighter
                        "ok": bool(torch.isfinite(out).all()) and error < 3e-2,
                    }
                )
    return {"rows": rows, "ok": all(r["ok"] for r in rows)}


# --- shapes --------------------------------------------------------------------------------------


def check_shapes(args, model: str) -> dict:
    """What a new batch shape costs: a training step (forward, backward) of batch 32 at widths
    never seen before, timed at its first and its second call, with cuDNN's attention kernels
    allowed and not (fresh widths for each, so neither meets a planned shape)."""
    device = resolve_device(args.device)
    backbone = load_backbone(model)
    net = build_model(get_method("cls-tanh"), backbone, ["a", "b"], {"a": ["a"], "b": ["b"]})
    net = net.to(device).train()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    precision = resolve_precision("auto", device)
    vocab = backbone.tokenizer.vocab_size
    rows = []
    widths = iter(range(40, args.max_length, 8))
    for cudnn in (False, True) if device.type == "cuda" else (False,):
        if device.type == "cuda":
            torch.backends.cuda.enable_cudnn_sdp(cudnn)
        for _ in range(3):
            width = next(widths, None)
            if width is None:
                break
            ids = torch.randint(5, vocab, (32, width), device=device)
            mask = torch.ones_like(ids)
            mask[:16, width // 2 :] = 0  # padding, as real batches have
            times = []
            for _call in range(2):
                sync()
                started = time.perf_counter()
                with autocast(device, precision):
                    logits, _ = net(
                        input_ids=ids,
                        attention_mask=mask,
                        positions=torch.zeros(32, dtype=torch.long, device=device),
                    )
                logits.float().sum().backward()
                sync()
                times.append(time.perf_counter() - started)
            rows.append(
                {
                    "cudnn_attention": cudnn,
                    "width": width,
                    "first_ms": round(1000 * times[0], 1),
                    "second_ms": round(1000 * times[1], 1),
                }
            )
    if device.type == "cuda":
        torch.backends.cuda.enable_cudnn_sdp(os.environ.get("GLEE_CUDNN_SDPA") == "1")
    return {"rows": rows, "ok": True}


# --- throughput ----------------------------------------------------------------------------------


def _subprocess_json(command: list[str], timeout: float, env: dict | None = None) -> dict:
    out = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    if out.returncode != 0:
        raise RuntimeError(
            out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def plain_loop(args, model: str, compiled: bool) -> dict:
    """What a user writes in twenty lines: ``AutoModelForSequenceClassification`` on the same
    texts, padded to max length, fused AdamW (on CUDA), the device's autocast, one optimizer step
    per batch of 32; and a prediction pass in batches of 128."""

    device = resolve_device(args.device)
    precision = resolve_precision("auto", device)
    dataset = load_dataset(args.dataset, data_dir=args.data_dir)
    tokenizer = AutoTokenizer.from_pretrained(model)
    frame = training_sample(dataset.splits["train"], args.train_examples, np.random.default_rng(0))
    texts = frame["text"].tolist()
    enc = tokenizer(
        texts,
        truncation=True,
        max_length=args.max_length,
        padding="max_length",
        return_tensors="pt",
    )
    labels = torch.as_tensor(frame["label"].to_numpy())
    torch.manual_seed(0)
    net = AutoModelForSequenceClassification.from_pretrained(
        model, num_labels=dataset.num_classes
    ).to(device)
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-5, fused=device.type == "cuda")
    forward = torch.compile(net) if compiled else net
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def step(rows):
        ids = enc["input_ids"][rows].to(device, non_blocking=True)
        mask = enc["attention_mask"][rows].to(device, non_blocking=True)
        with autocast(device, precision):
            loss = forward(input_ids=ids, attention_mask=mask, labels=labels[rows].to(device)).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    batches = [slice(i, i + 32) for i in range(0, len(texts), 32) if i + 32 <= len(texts)]
    for rows in batches[:3]:  # warm-up (and compilation)
        step(rows)
    sync()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    for rows in batches:
        step(rows)
    sync()
    seconds = time.perf_counter() - started
    n = 32 * len(batches)
    net.eval()
    test = dataset.splits["test"].head(4 * n)["text"].tolist()
    tenc = tokenizer(
        test, truncation=True, max_length=args.max_length, padding="max_length", return_tensors="pt"
    )
    with torch.inference_mode(), autocast(device, precision):
        forward(
            input_ids=tenc["input_ids"][:128].to(device),
            attention_mask=tenc["attention_mask"][:128].to(device),
        )
        sync()
        started = time.perf_counter()
        for i in range(0, len(test), 128):
            forward(
                input_ids=tenc["input_ids"][i : i + 128].to(device),
                attention_mask=tenc["attention_mask"][i : i + 128].to(device),
            ).logits.cpu()
        sync()
        eval_seconds = time.perf_counter() - started
    real = int(enc["attention_mask"][:n].sum())
    padded = n * args.max_length
    params = sum(p.numel() for p in net.parameters())
    result = {
        "path": "plain, compiled" if compiled else "plain, eager",
        "padding": f"to {args.max_length}",
        "precision": precision,
        "train_examples": n,
        "train_examples_per_s": round(n / seconds, 1),
        "eval_examples": len(test),
        "eval_examples_per_s": round(len(test) / eval_seconds, 1),
        "peak_memory_mb": round(peak_memory_mb(device), 1),
        "real_tokens_per_s": round(real / seconds),
        "padded_tokens_per_s": round(padded / seconds),
    }
    if device.type == "cuda":
        peak = next((v for k, v in PEAK_BF16.items() if k in torch.cuda.get_device_name()), None)
        if peak:
            result["mfu_all_tokens"] = round(6 * params * padded / seconds / peak, 4)
            result["mfu_real_tokens"] = round(6 * params * real / seconds / peak, 4)
    return result


def ours(
    args,
    model: str,
    pad_multiple: int | None,
    compiled: bool,
    method: str,
    cudnn_attention: bool = False,
    profile: str | None = None,
    compile_mode: str | None = None,
) -> dict:
    """Glee Studio's training step and scorer (``bench/train_throughput.py --one``), after one
    untimed pass (whose rate is reported as the cold one: every batch shape met once)."""
    command = [
        sys.executable,
        str(ROOT / "bench" / "train_throughput.py"),
        "--dataset",
        args.dataset,
        "--data-dir",
        args.data_dir,
        "--model",
        model,
        "--max-length",
        str(args.max_length),
        "--device",
        args.device,
        "--train-examples",
        str(args.train_examples),
        "--eval-examples",
        str(4 * args.train_examples),
        "--warmup-steps",
        "0",
    ]
    if pad_multiple is not None:
        command += ["--pad-multiple", str(pad_multiple)]
    if compiled:
        command += ["--compile"] + (["--compile-mode", compile_mode] if compile_mode else [])
    if profile:
        command += ["--profile", profile]
    env = {**os.environ, "GLEE_CUDNN_SDPA": "1" if cudnn_attention else "0"}
    result = _subprocess_json(command + ["--one", method, "fast"], timeout=300, env=env)
    compiled_as = f", compiled {compile_mode or ''}".rstrip()
    label = (
        "glee"
        + (compiled_as if compiled else "")
        + (", cuDNN attention" if cudnn_attention else "")
    )
    padding = (
        "device default"
        if pad_multiple is None
        else "own longest"
        if pad_multiple == 1
        else f"multiple of {pad_multiple}"
    )
    return {
        "path": f"{label} ({method})",
        "padding": padding,
        "precision": result["precision"],
        "train_examples": result["train_examples"],
        "train_examples_per_s": result["train_examples_per_s"],
        "eval_examples": result["eval_examples"],
        "eval_examples_per_s": result["eval_examples_per_s"],
        "train_cold_examples_per_s": result.get("train_cold_examples_per_s"),
        "eval_cold_examples_per_s": result.get("eval_cold_examples_per_s"),
        "peak_memory_mb": result["peak_memory_mb"],
        "real_tokens_per_s": result["train_real_tokens_per_s"],
        "padded_tokens_per_s": result.get("train_padded_tokens_per_s"),
        **{k: result[k] for k in ("mfu_all_tokens", "mfu_real_tokens", "profile") if k in result},
    }


def check_throughput(args, model: str) -> dict:
    cuda = torch.cuda.is_available() and args.device != "cpu"
    plans = [
        ("plain", lambda: _in_process_child(args, model, "plain", False)),
        ("glee", lambda: ours(args, model, None, False, "cls-tanh")),
        ("glee-prompt", lambda: ours(args, model, None, False, "prompt")),
    ]
    if cuda:  # the GPU's variants (compiling on a CPU takes minutes and is not its path)
        plans += [
            ("glee-own-length", lambda: ours(args, model, 1, False, "cls-tanh")),
            (
                "glee-cudnn-attention",
                lambda: ours(args, model, None, False, "cls-tanh", cudnn_attention=True),
            ),
            ("plain-compiled", lambda: _in_process_child(args, model, "plain", True)),
            ("glee-compiled", lambda: ours(args, model, None, True, "cls-tanh")),
            (
                "glee-graphs",
                lambda: ours(args, model, None, True, "cls-tanh", compile_mode="reduce-overhead"),
            ),
        ]
    if args.variants:
        plans = [plan for plan in plans if plan[0] in args.variants]
    rows = []
    for name, measure in plans:
        started = time.perf_counter()
        try:
            row = measure()
        except Exception as exc:
            row = {"path": name, "error": f"{type(exc).__name__}: {exc}"[:300]}
        row["seconds"] = round(time.perf_counter() - started, 1)
        rows.append(row)
    plain = next((r for r in rows if r["path"] == "plain, eager" and "error" not in r), None)
    glee = next((r for r in rows if r["path"] == "glee (cls-tanh)" and "error" not in r), None)
    summary = {}
    if plain and glee:
        summary = {
            "train_vs_plain": round(
                glee["train_examples_per_s"] / plain["train_examples_per_s"], 2
            ),
            "eval_vs_plain": round(glee["eval_examples_per_s"] / plain["eval_examples_per_s"], 2),
        }
    return {"rows": rows, **summary, "ok": all("error" not in r for r in rows)}


def check_profile(args, model: str) -> dict:
    """Where glee's training step spends its time (``train_throughput.py --profile``): the
    operator tables, the device's busy share and the host-device sync sites, in
    ``--out``/profile.txt."""
    path = Path(args.out) / "profile.txt"
    row = ours(args, model, None, False, "cls-tanh", profile=str(path))
    return {"rows": [row], **row.pop("profile"), "file": path.name, "ok": True}


def _in_process_child(args, model: str, what: str, compiled: bool) -> dict:
    """Run one plain-loop measurement in a fresh process (its own peak memory)."""
    command = [
        sys.executable,
        __file__,
        "--out",
        args.out,
        "--child",
        what,
        "--dataset",
        args.dataset,
        "--data-dir",
        args.data_dir,
        "--model",
        model,
        "--max-length",
        str(args.max_length),
        "--device",
        args.device,
        "--train-examples",
        str(args.train_examples),
    ]
    if compiled:
        command.append("--child-compiled")
    return _subprocess_json(command, timeout=300)


# --- concurrency ---------------------------------------------------------------------------------


def check_concurrency(args, model: str) -> dict:
    """One ``train`` launch of N seeds with ``--runs-at-once N`` (N worker processes sharing the
    device, one store): the wall time, and the examples trained per second over all runs."""
    rows = []
    base = None
    for n in args.concurrency:
        with tempfile.TemporaryDirectory() as folder:
            command = [
                sys.executable,
                "-m",
                "glee_core",
                "train",
                "--dataset",
                args.dataset,
                "--data-dir",
                args.data_dir,
                "--model",
                model,
                "--method",
                "cls-tanh",
                "--recipe",
                "paper",
                "--epochs",
                "1",
                "--limit",
                str(args.concurrency_examples),
                "--max-length",
                str(args.max_length),
                "--device",
                args.device,
                "--seeds",
                ",".join(str(i + 1) for i in range(n)),
                "--runs-at-once",
                str(n),
                "--runs-dir",
                f"{folder}/runs",
            ]
            started = time.perf_counter()
            done = subprocess.run(
                command,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                cwd=ROOT,
                check=False,
            )
            wall = time.perf_counter() - started
            rate = n * args.concurrency_examples / wall
            base = base or rate
            rows.append(
                {
                    "runs_at_once": n,
                    "wall_seconds": round(wall, 1),
                    "train_examples_per_s_all_runs": round(rate, 1),
                    "gain_over_one": round(rate / base, 2),
                    **(
                        {"errors": done.stderr.strip().splitlines()[-2:]}
                        if done.returncode != 0
                        else {}
                    ),
                }
            )
    best = max(rows, key=lambda r: r["gain_over_one"])
    return {
        "rows": rows,
        "best_runs_at_once": best["runs_at_once"],
        "best_gain": best["gain_over_one"],
        "ok": not any("errors" in r for r in rows),
        "note": "one launch; with N > 1 each worker loads the backbone, tokenises and "
        "scores dev and test: start-up and scoring are part of the wall time",
    }


# --- quick compare -------------------------------------------------------------------------------


def check_quick(args, model: str) -> dict:

    model = args.quick_model or model
    get_backbone(model)  # loading is not part of the figure
    rows = []
    for name in dict.fromkeys([args.dataset, "demo"]):
        try:
            dataset = load_dataset(name, data_dir=args.data_dir)
        except Exception as exc:
            rows.append({"dataset": name, "error": f"{type(exc).__name__}: {exc}"[:200]})
            continue
        for seeds in args.quick_seeds:
            with tempfile.TemporaryDirectory() as folder:
                config = TrainConfig(mode="frozen", max_length=args.max_length, device=args.device)
                store = RunStore(f"{folder}/runs")  # its own feature cache: a cold start
                started = time.perf_counter()
                run_launch(Launch(dataset, list(METHODS.values()), seeds, model, config, store))
                cold = time.perf_counter() - started
                started = time.perf_counter()
                run_launch(
                    Launch(dataset, list(METHODS.values()), seeds, model, config, store, force=True)
                )
                warm = time.perf_counter() - started
            rows.append(
                {
                    "dataset": dataset.id,
                    "train_texts": len(dataset.splits["train"]),
                    "heads": len(METHODS),
                    "seeds": len(seeds),
                    "seconds_with_feature_pass": round(cold, 2),
                    "seconds_cached_features": round(warm, 2),
                }
            )
    return {"rows": rows, "model": model, "ok": all("error" not in r for r in rows)}


# --- tuning modes --------------------------------------------------------------------------------


def check_modes(args, model: str) -> dict:
    """Each tuning mode's cost at this size, then one epoch of task-adaptive pretraining."""
    dataset = load_dataset(args.dataset, data_dir=args.data_dir)
    device = resolve_device(args.device)
    plans = [
        ("finetune", "cls-relu-pt-ln"),
        ("lora", "cls-relu-pt-ln"),
        ("ptuning2", "cls-relu-pt-ln"),
        ("ptuning2", "prompt"),
    ]
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        store = RunStore(f"{folder}/runs")
        for mode, method in plans:
            row = {"what": f"{mode}, {method}"}
            config = TrainConfig(
                recipe="paper",
                mode=mode,
                epochs=1,
                limit=args.mode_examples,
                max_length=args.max_length,
                device=args.device,
            )
            try:
                _reset_peak_memory(device)
                run = run_launch(Launch(dataset, [get_method(method)], [1], model, config, store))[
                    0
                ]
                row.update(
                    trainable=run.record.tuning.trainable_parameters,
                    train_examples_per_s=run.record.timing.train_examples_per_second,
                    precision=run.record.timing.precision,
                    peak_gpu_gib=_peak_gpu_gib(device),
                )
            except Exception as exc:  # recorded; the other modes go on
                row["error"] = f"{type(exc).__name__}: {exc}"[:300]
            rows.append(row)
        row = {"what": "adapt (TAPT), 1 epoch"}
        train = dataset.splits["train"]
        sample = replace(
            dataset,
            splits={**dataset.splits, "train": stratified_sample(train, args.mode_examples)},
            _fingerprint=None,
        )
        options = AdaptOptions(
            out=f"{folder}/tapt", epochs=1, max_length=args.max_length, device=args.device
        )
        try:
            _reset_peak_memory(device)
            record = adapt(sample, model, options)
            texts = record["dataset"]["training_texts"] - record["dataset"]["held_out"]
            row.update(
                trainable=record["trainable_parameters"],
                train_examples_per_s=round(texts / record["seconds"], 1),
                precision=record["precision"],
                peak_gpu_gib=_peak_gpu_gib(device),
            )
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {exc}"[:300]
        rows.append(row)
    rate = rows[-1].get("train_examples_per_s")
    # what TAPT of every training text but the held-out share takes, at the measured rate
    epoch = (1 - options.held_out) * len(train) / rate if rate else None
    return {
        "rows": rows,
        "dataset": dataset.id,
        "max_length": args.max_length,
        **(
            {
                "tapt_10_epochs_minutes": round(10 * epoch / 60, 1),
                "tapt_100_epochs_minutes": round(100 * epoch / 60, 1),
            }
            if epoch
            else {}
        ),
        "ok": all("error" not in r for r in rows),
    }


def _reset_peak_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def _peak_gpu_gib(device: torch.device) -> float | None:
    """The most GPU memory allocated since the last reset (None on a CPU: a process's peak
    resident memory cannot be reset between modes)."""
    return round(peak_memory_mb(device) / 1024, 2) if device.type == "cuda" else None


# --- projection ----------------------------------------------------------------------------------


def projection(results: dict) -> dict:
    """Table 2's R52 column: 25 runs (5 methods x 5 seeds) x 10 epochs, no early stop, from the
    prompt path's measured rates (the slowest head) and the best concurrency gain."""
    rows = results.get("throughput", {}).get("rows", [])
    prompt = next((r for r in rows if r.get("path") == "glee (prompt)"), None)
    if not prompt:
        return {"ok": False, "error": "no throughput measurement of the prompt path"}
    train, evaluation = prompt["train_examples_per_s"], prompt["eval_examples_per_s"]
    per_run = 10 * R52_TRAIN / train + 10 * R52_DEV / evaluation + R52_TEST / evaluation
    gain = results.get("concurrency", {}).get("best_gain", 1.0) or 1.0
    runs = 25
    return {
        "runs": runs,
        "epochs": 10,
        "per_run_seconds": round(per_run, 1),
        "one_at_a_time_minutes": round(runs * per_run / 60, 1),
        "concurrency_gain": gain,
        "packed_minutes": round(runs * per_run / gain / 60, 1),
        "assumes": "glee prompt-path rates at this check's sizes; no early stopping; the "
        "concurrency gain measured on cls-tanh runs",
        "ok": True,
    }


# --- report --------------------------------------------------------------------------------------


def markdown(results: dict) -> str:
    env = results["environment"]
    lines = [
        f"# GPU check: {env.get('device_name')} ({env['device']}), "
        f"torch {env['torch']}, transformers {env['transformers']}",
        "",
        f"`{results['command']}` — {results['seconds']} s, "
        f"{'dry run, tiny sizes' if results['dry'] else 'full sizes'}, "
        f"precision auto = {env['precision_auto']}",
        "",
    ]
    for section in SECTIONS:
        part = results.get(section)
        if part is None:
            continue
        status = "ok" if part.get("ok") else "FAILED"
        lines += [f"## {section} ({status}, {part.get('seconds', '-')} s)", ""]
        if "error" in part and "rows" not in part:
            lines += [f"error: {part['error']}", ""]
            continue
        rows = part.get("rows")
        if rows:
            keys = list(dict.fromkeys(k for r in rows for k in r))
            lines.append("| " + " | ".join(keys) + " |")
            lines.append("|" + "---|" * len(keys))
            for r in rows:
                lines.append("| " + " | ".join(_cell(r.get(k, "")) for k in keys) + " |")
            lines.append("")
        extra = {k: v for k, v in part.items() if k not in ("rows", "ok", "seconds")}
        if extra:
            lines += ["; ".join(f"{k}: {_cell(v)}" for k, v in extra.items()), ""]
    return "\n".join(lines)


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value).replace("|", "/")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--child" in argv:  # one plain-loop measurement, in its own process
        child = argparse.ArgumentParser()
        child.add_argument("--child")
        child.add_argument("--child-compiled", action="store_true")
        known, rest = child.parse_known_args(argv)
        args = defaults(parse_args(rest))
        print(json.dumps(plain_loop(args, args.model, known.child_compiled)))
        return 0
    args = defaults(parse_args(argv))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results: dict = {
        "command": "python bench/gpu_check.py " + " ".join(argv),
        "dry": args.dry,
        "environment": environment(args),
    }
    model = model_folder(args)
    results["model"] = args.model or ("tiny random BERT" if args.dry else "random:bert-base")
    checks = {
        "methods": check_methods,
        "precision": check_precision,
        "shapes": check_shapes,
        "throughput": check_throughput,
        "profile": check_profile,
        "concurrency": check_concurrency,
        "quick": check_quick,
        "modes": check_modes,
    }
    for section in args.sections:
        print(f"gpu check: {section} ...", file=sys.stderr, flush=True)
        begun = time.perf_counter()
        try:
            part = projection(results) if section == "projection" else checks[section](args, model)
        except Exception as exc:
            part = {
                "ok": False,
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc()[-2000:],
            }
        part["seconds"] = round(time.perf_counter() - begun, 1)
        results[section] = part
        results["seconds"] = round(time.perf_counter() - started, 1)
        (out / "gpu_check.json").write_text(json.dumps(results, indent=1))  # as it goes
    results["ok"] = all(results[s].get("ok") for s in args.sections)
    results["seconds"] = round(time.perf_counter() - started, 1)
    (out / "gpu_check.json").write_text(json.dumps(results, indent=1))
    report = markdown(results)
    (out / "gpu_check.md").write_text(report + "\n")
    print(report)
    return 0 if results["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
