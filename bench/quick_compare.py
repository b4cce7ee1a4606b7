"""Where the quick compare's time goes: every head on the demo, frozen backbone, cold process.

    python bench/quick_compare.py [--dataset demo] [--methods all] [--model auto] [--seeds 1]

Run in a fresh process with an empty store (the feature cache starts empty), as the Home page's
"Quick compare" launches it. Prints the wall time of each phase, from the trainer's own progress
events: importing the libraries, loading the backbone, each feature pass (one per input format:
plain and template), the heads' training (the heads on cached features in one loop, the
closed-form probes one by one) and each head's test and writing its run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

STARTED = time.perf_counter()
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from glee_core.core.events import FeaturePass, Loading, RunStarted, Testing  # noqa: E402
from glee_core.data.datasets import load_dataset  # noqa: E402
from glee_core.models.config import TrainConfig  # noqa: E402
from glee_core.models.methods import parse_methods  # noqa: E402
from glee_core.runs.store import RunStore  # noqa: E402
from glee_core.train.experiment import run_launch  # noqa: E402
from glee_core.train.launch import Launch  # noqa: E402

IMPORTED = time.perf_counter()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="demo")
    parser.add_argument("--methods", default="all")
    parser.add_argument("--model", default="auto")
    parser.add_argument("--seeds", type=int, default=1, help="seeds 1..N")
    args = parser.parse_args(argv)
    phases: list[tuple[str, float]] = [("import the libraries", IMPORTED - STARTED)]
    mark = [time.perf_counter(), "load the dataset"]

    def close(next_name: str) -> None:
        now = time.perf_counter()
        phases.append((mark[1], now - mark[0]))
        mark[:] = [now, next_name]

    def progress(event) -> None:
        if isinstance(event, Loading):
            close(f"load {event.what}")
        elif isinstance(event, FeaturePass) and event.done == event.total:
            name = mark[1]  # the time so far in this run went to the feature pass
            mark[1] = f"encode {event.total} texts ({event.format} input)"
            close(name)
        elif isinstance(event, RunStarted):
            close(
                f"train {event.together} heads together"
                if event.together > 1
                else f"train {event.method}"
            )
        elif isinstance(event, Testing):
            close(f"test + write {mark[1].split()[-1]}")

    dataset = load_dataset(args.dataset)
    methods = parse_methods(args.methods, "frozen")
    with tempfile.TemporaryDirectory() as tmp:
        run_launch(
            Launch(
                dataset,
                methods,
                range(1, args.seeds + 1),
                args.model,
                TrainConfig(mode="frozen"),
                RunStore(Path(tmp) / "runs"),
                progress=progress,
            )
        )
        close("end")
    total = time.perf_counter() - STARTED
    groups: dict[str, float] = {}
    for name, seconds in phases:
        key = (
            "heads: train"
            if name.startswith("train ")
            else "heads: test + write"
            if name.startswith("test + write")
            else name
        )
        groups[key] = groups.get(key, 0.0) + seconds
    print(
        f"{len(methods)} heads x {args.seeds} seed(s) on {args.dataset} "
        f"({len(dataset.splits['train'])} training texts), model {args.model}, frozen "
        f"backbone, cold process: {total:.1f} s"
    )
    for name, seconds in groups.items():
        print(f"  {name:<46} {seconds:6.1f} s  {100 * seconds / total:4.0f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
