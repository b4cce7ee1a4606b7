"""The data reports' estimates against their wall time: ``health`` and ``budget`` of a dataset
as the Data page runs them (the engine's functions, one process), each printed beside the
estimate the page shows (``glee_core.runs.estimate.estimate_report_seconds``).

    python bench/report_estimate.py --dataset demo --dataset csv:FILE [--model auto]

Each report runs twice: with the feature pass (a fresh cache) and with the features cached."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from glee_core.core.devices import resolve_device
from glee_core.data.datasets import load_dataset
from glee_core.models.backbone import estimate_parameters, hidden_size, load_backbone
from glee_core.models.options import BudgetOptions, HealthOptions
from glee_core.runs.estimate import estimate_report_seconds
from glee_core.train.examine import data_health
from glee_core.train.learning_curves import label_budget


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", action="append", required=True)
    parser.add_argument("--model", default="auto")
    args = parser.parse_args()
    backbone = load_backbone(args.model)
    device = resolve_device("auto")
    print("| dataset | classes | train | report | features | estimated s | took s | ratio |")
    print("|---|---:|---:|---|---|---:|---:|---:|")
    for spec in args.dataset:
        dataset = load_dataset(spec)
        with tempfile.TemporaryDirectory() as warm:
            for passes, kind in ((1, "health"), (1, "budget"), (0, "health"), (0, "budget")):
                # an encoded row gets a fresh cache of its own; the cached rows share ``warm``
                with tempfile.TemporaryDirectory() as fresh:
                    cache = fresh if passes else warm
                    out = str(Path(cache) / kind)
                    options = HealthOptions(out=out) if kind == "health" else BudgetOptions(out=out)
                    machine = {
                        "parameters": estimate_parameters(args.model),
                        "device": device.type,
                        "model": args.model,
                        "runs": [],
                        "passes": passes,
                    }
                    estimate = estimate_report_seconds(
                        dataset, kind, options, hidden_size(args.model), machine
                    )
                    started = time.perf_counter()
                    if not passes and not any(Path(warm).glob("*.npz")):
                        data_health(
                            dataset, backbone, args.model, HealthOptions(out=out), warm, device
                        )  # fills the cache, not timed
                        started = time.perf_counter()
                    if kind == "health":
                        data_health(dataset, backbone, args.model, options, cache, device)
                    else:
                        label_budget(dataset, backbone, args.model, options, cache)
                    took = time.perf_counter() - started
                    print(
                        f"| {dataset.id} | {dataset.num_classes} | "
                        f"{len(dataset.splits['train'])} | {kind} | "
                        f"{'encoded' if passes else 'cached'} | {estimate['seconds']:.0f} | "
                        f"{took:.0f} | {took / estimate['seconds']:.2f} |",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
