"""Threads per job on a CPU: N quick-mode jobs at once, each sizing its thread pool to its share of
the cores (the default) or each taking every core (``--no-share``: what happened before).

    python bench/cpu_share.py [--jobs 3] [--dataset demo] [--model auto] [--no-share]

Each job is a ``train --mode frozen`` process with a store of its own (so each computes its own
feature pass); the figure is each job's feature pass in tokens per second (what its run records)
and the wall time of all of them. Run by hand; CI never runs it.
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=3)
    p.add_argument("--dataset", default="demo")
    p.add_argument(
        "--data-dir", default=os.environ.get("GLEE_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    )
    p.add_argument("--model", default="auto")
    p.add_argument("--method", default="cls-tanh")
    p.add_argument(
        "--no-share",
        action="store_true",
        help="every job takes every core (OMP_NUM_THREADS = cores): the old way",
    )
    args = p.parse_args(argv)
    env = {**os.environ}
    if args.no_share:
        env["OMP_NUM_THREADS"] = str(len(os.sched_getaffinity(0)))
    else:
        env.pop("OMP_NUM_THREADS", None)
    with tempfile.TemporaryDirectory() as folder:
        env["GLEE_CPU_JOBS_DIR"] = f"{folder}/jobs"
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
            "frozen",
            "--method",
            args.method,
            "--seeds",
            "1",
        ]
        started = time.perf_counter()
        procs = [
            subprocess.Popen(
                command + ["--runs-dir", f"{folder}/runs{i}"],
                env=env,
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(args.jobs)
        ]
        errors = [proc.communicate()[1] for proc in procs]
        wall = time.perf_counter() - started
        rates = []
        for i, (proc, err) in enumerate(zip(procs, errors, strict=True)):
            if proc.returncode:
                print(err[-2000:], file=sys.stderr)
                return proc.returncode
            config = next(Path(f"{folder}/runs{i}").glob("*/config.json"))
            timing = json.loads(config.read_text())["timing"]
            rates.append(timing["feature_pass_tokens_per_second"])
    mode = "every job takes every core" if args.no_share else "each job its share"
    print(
        f"{args.jobs} quick-mode jobs at once on {len(os.sched_getaffinity(0))} cores "
        f"({mode}): feature pass tokens/s per job {', '.join(f'{r:,.0f}' for r in rates)}; "
        f"all done in {wall:.1f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
