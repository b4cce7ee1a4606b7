"""The quick compare's time estimate (Home, Train) against the real wall time.

    python bench/quick_estimate.py [--dataset demo] [--model auto]

In a temporary store: the estimate with no runs (rates typical of the device), a real
``train --mode frozen --method all`` (a fresh process, empty feature cache), then the estimate
calibrated on the runs it wrote, and a second real run with the feature cache deleted and
``--force`` (the same work again). Prints each estimate with its basis and each real time.
"""

from __future__ import annotations

import argparse
import shutil
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
from glee_core.runs.estimate import estimate_seconds  # noqa: E402
from glee_core.runs.store import RunStore  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="demo")
    parser.add_argument("--model", default="auto")
    args = parser.parse_args(argv)
    dataset = load_dataset(args.dataset)
    quick = TrainConfig(mode="frozen")
    device = resolve_device("auto").type
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "runs"

        def estimate(label: str) -> None:
            found = estimate_seconds(
                dataset,
                len(METHODS),
                quick,
                args.model,
                estimate_parameters(args.model),
                device,
                RunStore(root).runs(),
            )
            print(f"estimate, {label}: {found['seconds']:.1f} s ({found['basis']})", flush=True)

        def real(label: str, *extra: str) -> None:
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
                    "frozen",
                    "--method",
                    "all",
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
