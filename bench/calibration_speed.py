"""How long post-hoc calibration takes to recompute: 10,000 examples x 120 classes.

    python bench/calibration_speed.py [--examples 10000] [--classes 120] [--hidden 768]

Times, on one CPU thread, one recompute of the logits and predictions at one strength (what the
app's slider does) for each method, and the whole dev sweep (21 strengths with the metrics) that
``calibrate`` runs. Synthetic arrays; run by hand.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core, as the target says
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from glee_core.runs.calibration import GRID, eta_norm, logit_adjustment, tau_norm  # noqa: E402
from glee_core.runs.metrics import classification_metrics  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--classes", type=int, default=120)
    parser.add_argument("--hidden", type=int, default=768)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    n, c, h = args.examples, args.classes, args.hidden
    features = rng.normal(size=(n, h)).astype(np.float32)
    weight, bias = rng.normal(size=(c, h)).astype(np.float32), rng.normal(size=c)
    logits = features @ weight.T + bias
    counts = np.sort(rng.pareto(1.0, size=c) * 10 + 2)[::-1]
    prior = counts / counts.sum()
    labels = rng.integers(0, c, size=n)
    classes = [f"c{i}" for i in range(c)]
    head, tail = classes[: c // 10], classes[c // 10 :]
    steps = {
        "logit adjustment": lambda v: logit_adjustment(logits, v, prior),
        "eta-norm": lambda v: eta_norm(logits, weight, v),
        "tau-norm": lambda v: tau_norm(features, weight, bias, v),
    }
    print(f"{n:,} examples x {c} classes (hidden {h}), 1 thread")
    for name, step in steps.items():
        start = time.perf_counter()
        pred = step(1.0).argmax(1)
        classification_metrics(labels, pred, classes, head, tail)
        one = time.perf_counter() - start
        start = time.perf_counter()
        for value in GRID:
            classification_metrics(labels, step(float(value)).argmax(1), classes, head, tail)
        sweep = time.perf_counter() - start
        print(
            f"  {name:17} one strength (logits + metrics): {one * 1000:7.1f} ms;"
            f" dev sweep of {len(GRID)}: {sweep:5.2f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
