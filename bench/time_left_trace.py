"""The job bar's time left along a fine-tune, as the app shows it: one practical-recipe fine-tune
(learning-rate search, LP-FT, early stopping) launched as the app launches it - a background job
with its launch estimate and expected stop - beside ``--hogs`` CPU hogs, its ``Job.timing()``
read every ``--every`` seconds.

    python bench/time_left_trace.py [--dataset demo] [--method cls-relu-pt-ln] [--hogs 1]
        [--calibrate RUNS_DIR] [--every 5] [--limit N]

Prints a row a reading (elapsed, share done, time left, and the end it implies: elapsed + left)
and, once the job ends, how far each reading's implied end was from the real one, and how much
the implied end rose between readings at most (a time left that climbs is a bar that lies).
``--calibrate``: a store of finished runs the estimate calibrates on, as the app calibrates on
every store it reads (default: none, the estimate's defaults). Run by hand; CI never runs it.
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
sys.path.insert(0, str(ROOT))
HOG = "while True: pass"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="demo")
    p.add_argument(
        "--data-dir", default=os.environ.get("GLEE_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    )
    p.add_argument("--model", default="auto")
    p.add_argument("--method", default="cls-relu-pt-ln")
    p.add_argument("--hogs", type=int, default=1)
    p.add_argument("--calibrate", default=None)
    p.add_argument("--every", type=float, default=5.0)
    p.add_argument("--limit", type=int, default=None, help="training texts (default: all)")
    args = p.parse_args(argv)

    from glee_core.models.backbone import estimate_parameters  # noqa: PLC0415
    from glee_core.models.config import TrainConfig  # noqa: PLC0415
    from glee_core.models.options import DataOptions  # noqa: PLC0415
    from glee_core.models.requests import TrainRequest  # noqa: PLC0415
    from glee_core.runs.busy import other_work  # noqa: PLC0415
    from glee_core.runs.estimate import Workload, estimate_seconds  # noqa: PLC0415
    from glee_core.runs.store import RunStore  # noqa: PLC0415
    from glee_core.train.jobs import launch as launch_job  # noqa: PLC0415

    data = DataOptions(dataset=args.dataset, data_dir=args.data_dir)
    dataset = data.load()
    config = TrainConfig(mode="finetune", limit=args.limit)
    calibration = RunStore(args.calibrate).runs() if args.calibrate else []
    hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(args.hogs)]
    readings = []
    try:
        time.sleep(1.0)
        busy = other_work()
        estimate = estimate_seconds(
            Workload(dataset, 1, config, args.model, estimate_parameters(args.model), "cpu"),
            calibration,
            busy=busy,
        )
        print(
            f"{os.cpu_count()} cores, {args.hogs} hog(s), other_work x{busy:.2f}: estimate "
            f"{estimate.seconds:.0f} s, expected stop at {estimate.stop or 1:.0%} of the steps",
            flush=True,
        )
        with tempfile.TemporaryDirectory() as folder:
            store = RunStore(Path(folder) / "runs")
            request = TrainRequest(
                data=data, methods=[args.method], seeds=[1], model=args.model, config=config
            )
            job = launch_job(store, request, label="trace", estimate=estimate)
            print("| elapsed | share done | time left | implied end |", flush=True)
            print("|---:|---:|---:|---:|", flush=True)
            while job.running:
                time.sleep(args.every)
                share, elapsed, left = job.timing()
                readings.append((elapsed, share, left))
                shown = "-" if left is None else f"{left:.0f} s"
                end = "-" if left is None else f"{elapsed + left:.0f} s"
                print(f"| {elapsed:.0f} s | {share:.1%} | {shown} | {end} |", flush=True)
            took = time.time() - job.record.started
            print(f"\n{job.status}: took {took:.0f} s (estimate {estimate.seconds:.0f} s)")
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    known = [(share, elapsed + left) for elapsed, share, left in readings if left is not None]
    if known:
        ends = [end for _, end in known]
        rises = [later - earlier for earlier, later in zip(ends, ends[1:], strict=False)]
        print(f"largest rise of the implied end between readings: {max(rises, default=0):.0f} s")
        for mark in (0.1, 0.25, 0.5, 0.75):
            end = next((end for share, end in known if share >= mark), None)
            if end is not None:
                print(f"at {mark:.0%} done the implied end was {end / took:.2f}x the real one")
    return 0


if __name__ == "__main__":
    sys.exit(main())
