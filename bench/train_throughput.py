"""Training and evaluation throughput: the released implementation's strategy vs Glee Studio's.

    python bench/train_throughput.py [--dataset r8 --data-dir ../shared/data] [--model auto]
        [--max-length 256] [--device auto] [--json]

For ``cls-tanh`` and ``prompt`` it measures, on the same examples and model, the *reference*
strategy (every batch padded to max length, fp32, MLM logits over the whole vocabulary at every
position: what the paper's code does) and the *fast* one (dynamic padding over length-grouped
batches, label-word decoder rows only, bf16 autocast + fused AdamW on CUDA): training and
evaluation examples/s, peak memory, and on CUDA the model FLOPs utilisation. Then the quick mode:
all 12 heads on the frozen backbone, with and without cached features. Each (method, strategy)
runs in a fresh process, so peak memory is its own. Run by hand; CI never runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# Dense bf16 peak of the GPUs we time on (no sparsity), FLOP/s.
PEAK_BF16 = {"H100": 989e12, "H200": 989e12, "A100": 312e12}
R52_TRAIN, R52_DEV, R52_TEST = 6532, 1000, 2568  # the paper's R52 sizes for the projection


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="r8")
    p.add_argument(
        "--data-dir", default=os.environ.get("GLEE_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    )
    p.add_argument(
        "--model",
        default="auto",
        help="auto, HF id, path, or random:bert-base (random weights, for timing)",
    )
    p.add_argument("--max-length", type=int, default=256)
    p.add_argument("--device", default="auto")
    p.add_argument(
        "--precision",
        default="auto",
        choices=("auto", "fp32", "bf16", "fp16"),
        help="of the fast path (the reference is always fp32)",
    )
    p.add_argument(
        "--pad-multiple",
        type=int,
        default=None,
        help="of the fast path (default: the device's, see TrainConfig)",
    )
    p.add_argument("--compile", action="store_true", help="the fast path under torch.compile")
    p.add_argument(
        "--compile-mode",
        default=None,
        help="torch.compile's mode (reduce-overhead: CUDA graphs, one per width)",
    )
    p.add_argument("--methods", default="cls-tanh,prompt")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--train-examples", type=int, default=320, help="examples timed per strategy")
    p.add_argument("--eval-examples", type=int, default=640)
    p.add_argument(
        "--warmup-steps",
        type=int,
        default=2,
        help="steps before the timed pass; 0: a whole untimed pass first (every "
        "batch shape seen), its rate reported as the cold one",
    )
    p.add_argument("--peak-tflops", type=float, help="override the device's bf16 peak")
    p.add_argument("--skip-quick", action="store_true", help="skip the quick-mode timing")
    p.add_argument("--json", action="store_true", help="print one JSON object only")
    p.add_argument(
        "--profile",
        metavar="FILE",
        help="after the timings, profile a pass of the production loop (torch.profiler"
        " tables, the GPU's busy share, every host-device sync site) into FILE",
    )
    p.add_argument("--profile-steps", type=int, default=24)
    p.add_argument("--one", nargs=2, metavar=("METHOD", "STRATEGY"), help=argparse.SUPPRESS)
    return p.parse_args(argv)


def resolve_model(name: str) -> str:
    """``random:bert-base``: a bert-base-sized MLM with random weights and the MiniLM tokenizer
    (same vocabulary), saved once to a temp folder; anything else is passed through."""
    if not name.startswith("random:"):
        return name
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    from glee_core.models.backbone import resolve_model_source

    folder = Path(tempfile.gettempdir()) / "glee-bench-random-bert-base"
    if not (folder / "config.json").is_file():
        BertForMaskedLM(BertConfig()).save_pretrained(folder)
        AutoTokenizer.from_pretrained(resolve_model_source("auto")).save_pretrained(folder)
    return str(folder)


def peak_memory_mb(device) -> float:
    import torch

    if device.type == "cuda":
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def training_sample(frame, n: int, rng):
    """The ``n`` training texts a timing uses (all when fewer), drawn by ``rng`` (seed 0 here and
    in ``bench/peers.py``, so both benchmarks time the same texts), in split order."""
    n = min(n, len(frame))
    return frame.iloc[sorted(rng.choice(len(frame), n, replace=False))]


def measure_one(args) -> dict:
    """Time one (method, strategy) in this process: a training pass and an evaluation pass."""
    import copy
    from dataclasses import replace

    import numpy as np
    import torch

    from bench import reference
    from glee_core.core.devices import resolve_device, resolve_precision
    from glee_core.data.datasets import load_dataset
    from glee_core.data.encoding import encode, length_grouped_batches
    from glee_core.models.backbone import load_backbone
    from glee_core.models.config import TrainConfig
    from glee_core.models.methods import get_method
    from glee_core.models.model import build_model
    from glee_core.models.scoring import Scoring, batch_width, predict
    from glee_core.train.loop import DevSelection, Trial
    from glee_core.train.optim import make_optimizer
    from glee_core.train.step import TrainingState

    method, strategy = args.one
    device = resolve_device(args.device)
    spec = get_method(method)
    dataset = load_dataset(args.dataset, data_dir=args.data_dir)
    backbone = load_backbone(resolve_model(args.model))
    rng = np.random.default_rng(0)
    train_frame = training_sample(dataset.splits["train"], args.train_examples, rng)
    n_train = len(train_frame)
    eval_frame = dataset.splits["test"].head(args.eval_examples)
    train = encode(
        train_frame, backbone.tokenizer, spec.input_format, dataset.template, args.max_length
    )
    evaluation = encode(
        eval_frame, backbone.tokenizer, spec.input_format, dataset.template, args.max_length
    )
    own = replace(backbone, model=copy.deepcopy(backbone.model))
    model = build_model(spec, own, dataset.classes, dataset.verbalizer).to(device)
    # the reference strategy is the released code's: always fp32
    precision = "fp32" if strategy == "reference" else args.precision
    # one epoch, scored on dev never (an evaluation every 10**9 steps): the product's own loop
    config = TrainConfig(
        batch_size=args.batch_size,
        max_length=args.max_length,
        lr=1e-5,
        epochs=1,
        eval_every_steps=10**9,
        patience=2,
        log_every=10**9,
        device=args.device,
        precision=precision,
        pad_multiple=args.pad_multiple,
    )
    if args.compile and strategy == "fast":
        model.mlm.base_model.compile(mode=args.compile_mode)
    steps = -(-n_train // args.batch_size)
    params, optimizer, scheduler = make_optimizer(model, config, device, steps + args.warmup_steps)
    pad_id = backbone.tokenizer.pad_token_id or 0
    state = TrainingState(model, spec, config, optimizer, scheduler, params, rng, device, pad_id)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def train_pass(split):
        if strategy == "reference":
            reference.train_one_epoch(state, split, args.max_length)
        else:  # the production loop: a trial at one rate (glee_core.train.loop.Trial)
            quiet = lambda event: None  # noqa: E731
            selection = DevSelection(model, split, state, -(-len(split) // args.batch_size), quiet)
            Trial(config.lr, model, state, selection, split, quiet).advance()

    def eval_pass(split):
        if strategy == "reference":
            reference.predict(model, split, pad_id, device, args.max_length)
        else:
            predict(
                model,
                split,
                device,
                Scoring(pad_id, precision=precision, pad_multiple=args.pad_multiple),
            )

    cold = {}
    if args.warmup_steps:
        train_pass(train.subset(range(min(len(train), args.warmup_steps * args.batch_size))))
    else:  # a whole pass first: the GPU plans every batch shape once; timed as the cold rate
        sync()
        start = time.perf_counter()
        train_pass(train)
        sync()
        cold["train_cold_examples_per_s"] = round(len(train) / (time.perf_counter() - start), 2)
    # the widths the timed epoch's batches are padded to (drawn from a copy of its generator)
    widths = [
        len(index)
        * (
            batch_width(train, index, state.pad_multiple, args.max_length)
            or max(len(train.input_ids[i]) for i in index)
        )
        for index in length_grouped_batches(
            train.lengths, args.batch_size, copy.deepcopy(state.rng)
        )
    ]
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    sync()
    start = time.perf_counter()
    train_pass(train)
    sync()
    train_seconds = time.perf_counter() - start
    train_peak = peak_memory_mb(device)

    sync()
    start = time.perf_counter()
    eval_pass(
        evaluation if not args.warmup_steps else evaluation.subset(range(min(64, len(evaluation))))
    )  # warm-up
    sync()
    if not args.warmup_steps:
        cold["eval_cold_examples_per_s"] = round(len(evaluation) / (time.perf_counter() - start), 2)
    start = time.perf_counter()
    eval_pass(evaluation)
    sync()
    eval_seconds = time.perf_counter() - start

    real_tokens = int(train.lengths.sum())
    padded_tokens = len(train) * args.max_length if strategy == "reference" else int(sum(widths))
    n_params = sum(p.numel() for p in backbone.model.parameters())
    result = {
        "method": method,
        "strategy": strategy,
        "device": str(device),
        "device_name": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "threads": torch.get_num_threads(),
        "precision": resolve_precision(precision, device),
        "attention": getattr(backbone.model.config, "_attn_implementation", "?"),
        "parameters": n_params,
        "train_examples": len(train),
        "mean_tokens": round(real_tokens / len(train), 1),
        "max_length": args.max_length,
        "train_seconds": round(train_seconds, 3),
        "train_examples_per_s": round(len(train) / train_seconds, 2),
        "train_real_tokens_per_s": round(real_tokens / train_seconds, 1),
        "eval_examples": len(evaluation),
        "eval_examples_per_s": round(len(evaluation) / eval_seconds, 2),
        "peak_memory_mb": round(train_peak, 1),
        "peak_memory_kind": "cuda max_memory_allocated" if device.type == "cuda" else "RSS",
        "padded_tokens": padded_tokens,
        "train_padded_tokens_per_s": round(padded_tokens / train_seconds, 1),
        "pad_multiple": state.pad_multiple if strategy == "fast" else args.max_length,
        "compiled": bool(args.compile and strategy == "fast"),
        **cold,
    }
    if device.type == "cuda":
        name = torch.cuda.get_device_name()
        peak = (
            args.peak_tflops * 1e12
            if args.peak_tflops
            else next((v for k, v in PEAK_BF16.items() if k in name), None)
        )
        if peak:  # 6 N FLOPs per token trained, over the tokens computed / the real ones
            result["mfu_all_tokens"] = round(6 * n_params * padded_tokens / train_seconds / peak, 4)
            result["mfu_real_tokens"] = round(6 * n_params * real_tokens / train_seconds / peak, 4)
            result["mfu"] = result["mfu_real_tokens"]
            result["peak_flops_assumed"] = peak
    if args.profile and strategy == "fast":
        subset = train.subset(range(min(len(train), args.profile_steps * args.batch_size)))
        result["profile"] = profile_pass(
            lambda: train_pass(subset),
            device,
            Path(args.profile),
            -(-len(subset) // args.batch_size),
        )
    return result


def profile_pass(run, device, path: Path, steps: int) -> dict:
    """Where a training step's time goes: ``run`` (a pass of the production loop) under
    torch.profiler, then again under CUDA's sync debug mode. Writes one text file (the device
    tool brings back few files): the summary, the distinct call sites that made the host wait
    for the device (each one stalls the launch queue), and the operator tables by host and by
    device time; returns the summary figures."""
    import traceback
    import warnings

    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    sync()
    start = time.perf_counter()
    with profile(activities=activities) as prof:
        run()
        sync()
    wall = time.perf_counter() - start
    table = prof.key_averages()
    summary = {
        "steps": steps,
        "profiled_wall_seconds": round(wall, 3),
        "host_ms_per_step_profiled": round(1000 * wall / steps, 2),
        "ops_per_step": round(
            sum(
                e.count
                for e in table
                if e.device_type == DeviceType.CPU and e.key.startswith("aten::")
            )
            / steps,
            1,
        ),
    }
    sections = [("by host time", table.table(sort_by="self_cpu_time_total", row_limit=40))]
    if cuda:
        kernels = [e for e in table if e.device_type == DeviceType.CUDA]  # not their launchers
        busy = sum(e.self_device_time_total for e in kernels) / 1e6  # microseconds
        summary.update(
            device_busy_seconds=round(busy, 3),
            device_busy_share=round(busy / wall, 3),
            kernels_per_step=round(sum(e.count for e in kernels) / steps, 1),
        )
        sections.append(
            ("by device time", table.table(sort_by="self_device_time_total", row_limit=30))
        )
        sites: dict[str, int] = {}
        shown = warnings.showwarning

        def record(message, *rest, **kw):
            stack = [f for f in traceback.extract_stack()[:-1] if "warnings" not in f.filename]
            ours = [f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in stack[-6:]]
            key = f"{str(message)[:80]} <- " + " <- ".join(reversed(ours))
            sites[key] = sites.get(key, 0) + 1

        torch.cuda.set_sync_debug_mode("warn")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("always")
                warnings.showwarning = record
                run()
                sync()
        finally:
            warnings.showwarning = shown
            torch.cuda.set_sync_debug_mode(0)
        summary["syncs_per_step"] = round(sum(sites.values()) / steps, 2)
        sections.insert(
            0,
            (
                "sync sites",
                "\n".join(
                    f"{n:5d}  {site}" for site, n in sorted(sites.items(), key=lambda kv: -kv[1])
                ),
            ),
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(summary, indent=1)
        + "".join(f"\n\n## {title}\n\n{text}" for title, text in sections)
        + "\n"
    )
    return summary


def measure_quick(args) -> dict:
    """All 12 heads on the frozen backbone: once computing the features, once from the cache."""
    from glee_core.data.datasets import load_dataset
    from glee_core.models.config import TrainConfig
    from glee_core.models.methods import METHODS
    from glee_core.models.scoring import get_backbone
    from glee_core.runs.store import RunStore
    from glee_core.train.experiment import run_launch
    from glee_core.train.launch import Launch

    dataset = load_dataset(args.dataset, data_dir=args.data_dir)
    model = resolve_model(args.model)
    get_backbone(model)  # loading the model is not part of the figure
    config = TrainConfig(mode="frozen", max_length=args.max_length, device=args.device)
    with tempfile.TemporaryDirectory() as runs:
        store = RunStore(runs)
        start = time.perf_counter()
        run_launch(Launch(dataset, list(METHODS.values()), [1], model, config, store))
        cold = time.perf_counter() - start
        start = time.perf_counter()
        runs_ = run_launch(
            Launch(dataset, list(METHODS.values()), [1], model, config, store, force=True)
        )
        warm = time.perf_counter() - start
        f1 = {r.method: round(r.metrics.f1, 4) for r in runs_}
    return {
        "dataset": dataset.id,
        "train_examples": len(dataset.splits["train"]),
        "methods": len(METHODS),
        "seconds_with_feature_pass": round(cold, 2),
        "seconds_cached_features": round(warm, 2),
        "feature_pass_seconds": round(cold - warm, 2),
        "f1": f1,
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.one:
        print(json.dumps(measure_one(args)))
        return 0
    forwarded = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--json"]
    results = []
    for method in args.methods.split(","):
        for strategy in ("reference", "fast"):
            if not args.json:
                print(f"timing {method} / {strategy} ...", file=sys.stderr, flush=True)
            out = subprocess.run(
                [sys.executable, __file__, *forwarded, "--one", method, strategy],
                capture_output=True,
                text=True,
            )
            if out.returncode != 0:
                print(out.stderr, file=sys.stderr)
                return out.returncode
            results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    speedups = {}
    for method in args.methods.split(","):
        ref, fast = [
            next(r for r in results if r["method"] == method and r["strategy"] == s)
            for s in ("reference", "fast")
        ]
        speedups[method] = {
            "train": round(fast["train_examples_per_s"] / ref["train_examples_per_s"], 2),
            "eval": round(fast["eval_examples_per_s"] / ref["eval_examples_per_s"], 2),
        }
    report = {
        "command": " ".join([Path(sys.executable).name, "bench/train_throughput.py", *forwarded]),
        "results": results,
        "speedup": speedups,
    }
    fast_prompt = min(
        (r for r in results if r["strategy"] == "fast"),
        key=lambda r: r["train_examples_per_s"],
        default=None,
    )  # the slowest
    if fast_prompt:
        rate = fast_prompt["train_examples_per_s"]
        eval_rate = fast_prompt["eval_examples_per_s"]
        runs = 5 * 5  # Table 2, r52 column: 5 methods x 5 seeds
        seconds = runs * (10 * R52_TRAIN / rate + 10 * R52_DEV / eval_rate + R52_TEST / eval_rate)
        report["projection_table2_r52"] = {
            "runs": runs,
            "epochs": 10,
            "train_examples": R52_TRAIN,
            "assumes": f"{fast_prompt['method']} fast-path rates on this device, no early stop",
            "hours": round(seconds / 3600, 2),
        }
    if not args.skip_quick:
        if not args.json:
            print("timing quick mode (12 heads, frozen backbone) ...", file=sys.stderr, flush=True)
        report["quick_mode"] = measure_quick(args)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"\n{report['command']}\n")
    print(
        f"{'method':10} {'strategy':10} {'train ex/s':>11} {'eval ex/s':>10} "
        f"{'peak MB':>9} {'MFU':>6}  device"
    )
    for r in results:
        mfu = f"{100 * r['mfu']:.1f}%" if "mfu" in r else "-"
        print(
            f"{r['method']:10} {r['strategy']:10} {r['train_examples_per_s']:11.2f} "
            f"{r['eval_examples_per_s']:10.2f} {r['peak_memory_mb']:9.0f} {mfu:>6}  "
            f"{r['device_name']} ({r['threads']} threads, {r['attention']}, {r['precision']})"
        )
    for method, s in speedups.items():
        print(f"speed-up {method}: train x{s['train']}, eval x{s['eval']}")
    if "projection_table2_r52" in report:
        p = report["projection_table2_r52"]
        print(
            f"projected Table 2 r52 column ({p['runs']} runs x {p['epochs']} epochs): "
            f"{p['hours']} h ({p['assumes']})"
        )
    if "quick_mode" in report:
        q = report["quick_mode"]
        print(
            f"quick mode, {q['methods']} heads on {q['dataset']} ({q['train_examples']} train): "
            f"{q['seconds_with_feature_pass']} s with the feature pass, "
            f"{q['seconds_cached_features']} s from cached features"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
