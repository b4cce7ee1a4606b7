"""A fine-tune's estimate on a busy CPU: the same small fine-tune alone, then beside 1 and 2
CPU hogs, each launch estimated as the app estimates it (the run alone as the measured rate,
times ``other_work()`` measured with the hogs running) and timed.

    python bench/busy_estimate.py [--dataset demo] [--limit 96] [--hogs 0,1,2] [--fixed-threads]

``--fixed-threads`` sets ``OMP_NUM_THREADS`` to every core (the share then leaves the pool
alone: what a run did before it shrank its pool beside other work). Prints, per launch, the
estimate, the wall time, their ratio and the run's seconds a step. Run by hand; CI never runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOG = "while True: pass"


def train(args, runs_dir: str, seed: int, env: dict) -> float:
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
        args.model,
        "--mode",
        "finetune",
        "--recipe",
        "paper",
        "--method",
        "cls-tanh",
        "--epochs",
        "1",
        "--limit",
        str(args.limit),
        "--seeds",
        str(seed),
        "--runs-dir",
        runs_dir,
        "--format",
        "json",
    ]
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"train failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - start


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="demo")
    p.add_argument(
        "--data-dir", default=os.environ.get("GLEE_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    )
    p.add_argument("--model", default="auto")
    p.add_argument("--limit", type=int, default=96)
    p.add_argument("--hogs", default="0,1,2")
    p.add_argument("--fixed-threads", action="store_true")
    args = p.parse_args(argv)

    from glee_core.data.datasets import load_dataset  # noqa: PLC0415
    from glee_core.models.backbone import estimate_parameters  # noqa: PLC0415
    from glee_core.runs.busy import other_work  # noqa: PLC0415
    from glee_core.runs.estimate import Workload, estimate_seconds  # noqa: PLC0415
    from glee_core.runs.store import RunStore  # noqa: PLC0415

    env = {**os.environ}
    if args.fixed_threads:
        env["OMP_NUM_THREADS"] = str(os.cpu_count() or 1)
    else:
        env.pop("OMP_NUM_THREADS", None)
    dataset = load_dataset(args.dataset, data_dir=args.data_dir)
    print(f"{os.cpu_count()} cores; fixed threads: {args.fixed_threads}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        env["GLEE_CPU_JOBS_DIR"] = f"{folder}/jobs"
        alone = f"{folder}/alone"
        train(args, f"{folder}/warm", 0, env)  # imports, tokenizer and backbone files warm
        train(args, alone, 1, env)
        runs = RunStore(alone).runs()
        record = runs[0].record
        config = record.hyperparameters
        parameters = estimate_parameters(record.model.name)
        for seed, hogs in enumerate(int(h) for h in args.hogs.split(",")):
            procs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(hogs)]
            try:
                time.sleep(1.0)
                busy = other_work()
                guess = estimate_seconds(
                    Workload(dataset, 1, config, record.model.name, parameters, "cpu"),
                    runs,
                    busy=busy,
                )
                took = train(args, f"{folder}/busy{hogs}", 10 + seed, env)
            finally:
                for proc in procs:
                    proc.kill()
                    proc.wait()
            (done,) = RunStore(f"{folder}/busy{hogs}").runs()
            steps = done.record.timing.steps or 0
            per_step = (done.record.timing.train_seconds or 0.0) / max(steps, 1)
            rows.append((hogs, busy, guess.seconds, took, per_step))
            print(
                json.dumps(
                    {
                        "hogs": hogs,
                        "busy": round(busy, 2),
                        "estimate_s": round(guess.seconds, 1),
                        "took_s": round(took, 1),
                        "took/estimate": round(took / guess.seconds, 2),
                        "s/step": round(per_step, 3),
                    }
                ),
                flush=True,
            )
    print("\n| CPU hogs beside it | other_work | estimate | took | took / estimate | s / step |")
    print("|---:|---:|---:|---:|---:|---:|")
    for hogs, busy, guess, took, per_step in rows:
        print(
            f"| {hogs} | x{busy:.2f} | {guess:.1f} s | {took:.1f} s | {took / guess:.2f} "
            f"| {per_step:.3f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
