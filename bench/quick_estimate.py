"""The quick compare's time estimate (Home, Train) against the real wall time, and a first
fine-tune's.

    python bench/quick_estimate.py [--dataset demo] [--model auto] [--finetune cls-relu-ln]

In a temporary store: the estimate with no runs (rates typical of the device), a real
``train --mode frozen --method all`` (a fresh process, empty feature cache), then the estimate
calibrated on the runs it wrote, and a second real run with the feature cache deleted and
``--force`` (the same work again). Prints each estimate with its basis and each real time.
``--finetune METHOD``: then the first fine-tune of METHOD (the practical recipe, as Home's next
step launches it after the compare), estimated as the app does it (typical rates, the quick
compare's heads re-used, ``other_work`` the median of 6 samples) and timed, with its seconds a
step. Every estimate counts the other work on the machine as the app does.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from glee_core.core.devices import resolve_device  # noqa: E402
from glee_core.data.datasets import load_dataset  # noqa: E402
from glee_core.models.backbone import estimate_parameters  # noqa: E402
from glee_core.models.config import TrainConfig  # noqa: E402
from glee_core.models.methods import METHODS  # noqa: E402
from glee_core.runs.busy import other_work  # noqa: E402
from glee_core.runs.estimate import estimate_seconds  # noqa: E402
from glee_core.runs.store import RunStore  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="demo")
    parser.add_argument("--model", default="auto")
    parser.add_argument("--finetune", default="", help="a method to fine-tune after the compare")
    args = parser.parse_args(argv)
    dataset = load_dataset(args.dataset)
    quick = TrainConfig(mode="frozen")
    device = resolve_device("auto").type
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "runs"

        def busy() -> float:
            return statistics.median(other_work() for _ in range(6)) if device == "cpu" else 1.0

        def estimate(label: str, config=quick, n_runs=len(METHODS), **extra) -> None:
            found = estimate_seconds(
                dataset,
                n_runs,
                config,
                args.model,
                estimate_parameters(args.model),
                device,
                RunStore(root).runs(),
                busy=busy(),
                **extra,
            )
            print(f"estimate, {label}: {found['seconds']:.1f} s ({found['basis']})", flush=True)

        def real(label: str, *extra: str, mode: str = "frozen", method: str = "all") -> None:
            started = time.perf_counter()
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "glee_core",
                    "train",
                    "--dataset",
                    args.dataset,
                    "--model",
                    args.model,
                    "--mode",
                    mode,
                    "--method",
                    method,
                    "--runs-dir",
                    str(root),
                    *extra,
                ],
                cwd=ROOT,
                check=True,
                capture_output=True,
            )
            print(f"real, {label}: {time.perf_counter() - started:.1f} s", flush=True)

        estimate("empty store")
        real("empty store, no feature cache")
        shutil.rmtree(root / ".features")
        estimate(f"calibrated on the {len(METHODS)} runs just written")
        real("feature cache deleted, --force", "--force")
        if args.finetune:
            label = f"first fine-tune of {args.finetune}"
            estimate(label, TrainConfig(mode="finetune"), 1, lp_ft_stages=0)
            real(label, mode="finetune", method=args.finetune)
            for run in RunStore(root).runs():
                timing = run.record.timing
                if run.record.mode == "finetune" and timing.get("steps"):
                    seconds = timing["train_seconds"] / timing["steps"]
                    print(
                        f"  {timing['steps']} of {timing['planned_steps']} planned steps, "
                        f"{seconds:.3f} s / step, {timing['train_tokens_per_second']:.0f} tokens/s",
                        flush=True,
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
