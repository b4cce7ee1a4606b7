"""Peak memory of fine-tuning, set-up by set-up, each in a fresh ``python -m glee_core train``.

    python bench/memory_peak.py [--dataset r8] [--data-dir ../shared/data] [--max-length 256]
        [--limit 320] [--method cls-tanh]

Trains one epoch of ``--limit`` training texts (batch 32; dev and test in full, as every run
does) under each set-up below and prints the process's peak resident memory (the kernel's
``ru_maxrss`` of that child, the figure ``/usr/bin/time -f %M`` prints) and its wall time.
Linux only (``os.wait4``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETUPS = (  # (name, extra train flags, extra environment)
    ("as the defaults", [], {}),
    ("--micro-batch-size 8", ["--micro-batch-size", "8"], {}),
    (
        "--micro-batch-size 8 --eval-batch-size 32",
        ["--micro-batch-size", "8", "--eval-batch-size", "32"],
        {},
    ),
    (
        "--micro-batch-size 4 --eval-batch-size 32",
        ["--micro-batch-size", "4", "--eval-batch-size", "32"],
        {},
    ),
)
JEMALLOC = Path("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")  # Debian's libjemalloc2


def peak(command: list[str], env: dict) -> tuple[float, float, int]:
    """(peak RSS in GB, wall seconds, exit status) of ``command``."""
    started = time.perf_counter()
    child = subprocess.Popen(
        command,
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    if status:
        sys.stderr.write(child.stderr.read().decode(errors="replace")[-2000:])
    return usage.ru_maxrss / 1e6, wall, os.waitstatus_to_exitcode(status)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="r8")
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--limit", type=int, default=320)
    parser.add_argument("--method", default="cls-tanh")
    args = parser.parse_args(argv)
    print(
        f"{args.method} on {args.dataset}, max length {args.max_length}, batch 32, one epoch "
        f"of {args.limit} training texts, dev and test in full"
    )
    print("| set-up | peak RSS | wall |")
    print("|---|---:|---:|")
    setups = list(SETUPS)
    if JEMALLOC.exists():
        setups.append((f"{setups[-1][0]}, jemalloc", setups[-1][1], {"LD_PRELOAD": str(JEMALLOC)}))
    for name, flags, env in setups:
        with tempfile.TemporaryDirectory() as tmp:
            command = [
                sys.executable,
                "-m",
                "glee_core",
                "train",
                "--dataset",
                args.dataset,
                "--data-dir",
                args.data_dir,
                "--method",
                args.method,
                "--max-length",
                str(args.max_length),
                "--limit",
                str(args.limit),
                "--epochs",
                "1",
                "--runs-dir",
                f"{tmp}/runs",
                *flags,
            ]
            gigabytes, wall, code = peak(command, env)
        failed = "" if code == 0 else f" (exit {code})"
        print(f"| {name}{failed} | {gigabytes:.2f} GB | {wall:.0f} s |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
