"""What a class-balanced batch costs a CPU step, padded once against forwarded in pieces of like
length (``data/encoding.padding_pieces``, what the training loop does on a CPU).

    python bench/balanced_batches.py [--dataset demo] [--model auto] [--steps 12] [--rounds 3]

Draws one epoch's class-balanced batches (what ``--supcon`` draws on long-tailed data, and
cRT), then times ``--steps`` of the training loop's own steps (``train.step.train_step``:
forward, supcon's term, backward, clipping, AdamW) on the same batches each way, alternating
the two ``--rounds`` times in one process so that the machine's pace moves both alike. Prints
the tokens each way pads to beside the texts' own, and s / step. Run by hand; CI never runs it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from glee_core.core.devices import resolve_precision  # noqa: E402
from glee_core.data.datasets import load_dataset  # noqa: E402
from glee_core.data.encoding import class_balanced_batches, encode, padding_pieces  # noqa: E402
from glee_core.models.backbone import load_backbone  # noqa: E402
from glee_core.models.config import TrainConfig  # noqa: E402
from glee_core.models.methods import get_method  # noqa: E402
from glee_core.models.model import build_model  # noqa: E402
from glee_core.train import step  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="demo")
    parser.add_argument("--model", default="auto")
    parser.add_argument("--method", default="cls-relu-pt-ln")
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    dataset = load_dataset(args.dataset)
    backbone = load_backbone(args.model)
    spec = get_method(args.method)
    split = encode(
        dataset.splits["train"],
        backbone.tokenizer,
        spec.input_format,
        dataset.template,
        args.max_length,
    )
    config = TrainConfig(supcon=0.3, precision="auto")
    batches = class_balanced_batches(split.labels, config.batch_size, np.random.default_rng(0))
    batches = (batches * (args.steps // len(batches) + 1))[: args.steps]
    lengths = split.lengths
    own = sum(int(lengths[b].sum()) for b in batches)
    padded = sum(len(b) * int(lengths[b].max()) for b in batches)
    cuts = [p for b in batches for p in padding_pieces(b, lengths[b])]
    cut = sum(len(p) * int(lengths[p].max()) for p in cuts)
    print(f"{args.dataset}: {len(split)} training texts, {len(batches)} class-balanced batches")
    print(
        f"tokens: own {own}, padded once {padded} (x{padded / own:.2f}), in pieces {cut} "
        f"(x{cut / own:.2f})"
    )

    torch.manual_seed(0)
    model = build_model(spec, backbone, dataset.classes, dataset.verbalizer).train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-5)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    state = step.TrainingState(
        model, spec, config, optimizer, schedule, params, None, torch.device("cpu"), 0
    )
    precision = resolve_precision(config.precision, state.device)
    pieces = step.padding_pieces
    timings: dict[str, list[float]] = {"padded once": [], "in pieces": []}

    def timed(label: str) -> None:
        step.padding_pieces = pieces if label == "in pieces" else (lambda index, _: [index])
        started = time.perf_counter()
        for index in batches:  # the product's step: forward, loss, backward, clip, AdamW
            step.train_step(state, split, index, precision)
        timings[label].append((time.perf_counter() - started) / len(batches))

    timed("in pieces")  # warm-up, not counted
    timings["in pieces"].clear()
    for _ in range(args.rounds):
        for label in timings:
            timed(label)
    step.padding_pieces = pieces
    for label, rates in timings.items():
        print(
            f"{label}: {statistics.median(rates):.3f} s / step (median of {args.rounds} rounds "
            f"of {len(batches)} steps; {', '.join(f'{r:.3f}' for r in rates)})"
        )
    ratio = statistics.median(timings["padded once"]) / statistics.median(timings["in pieces"])
    print(
        f"in pieces: x{ratio:.2f} the steps a second, precision {precision}, "
        f"{torch.get_num_threads()} threads"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
