"""What a new version of the data costs (issue #80 item 5): a quick compare on ``D+added-50``,
after a quick compare on ``D`` and 50 suggestions from its pool, against the same compare with
every feature cached (the heads' own time), and how much the feature cache grew.

    python bench/version_cost.py [--data-dir ../shared/data] [--work DIR] [--n 50]

``D``: the 17-class R52 CSV (``bench/quick_estimate.py``'s ``r52-17``, ~1,800 texts); its pool:
300 of its training texts with a third of their words dropped, labelled here with their text's
class (the user's answers). Each step runs the command line as the app's jobs do. Prints each
step's wall seconds and the ratio; the target is the version's compare <= 1.2x the heads' own
time. Run by hand (minutes), never in CI.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.quick_estimate import r52_17  # noqa: E402
from glee_core.data.datasets import load_dataset  # noqa: E402


def cli(*args: str) -> float:
    """Run ``python -m glee_core ARGS``; its wall seconds."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "glee_core", *args], cwd=ROOT, capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(f"{' '.join(args[:3])} failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - started


def cache_bytes(runs: Path) -> int:
    return sum(p.stat().st_size for p in (runs / ".features").rglob("*.npz"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--work", help="a folder to keep the store and files in")
    parser.add_argument("--n", type=int, default=50, help="suggestions labelled and added")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.work or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        spec = r52_17(Path(args.data_dir), folder)
        dataset = load_dataset(spec)
        train = dataset.splits["train"].sample(300, random_state=1)
        shorter = [
            " ".join(w for i, w in enumerate(str(t).split()) if i % 3 != 1) for t in train["text"]
        ]
        answers = dict(zip(shorter, (dataset.classes[c] for c in train["label"]), strict=True))
        pool = folder / "pool.txt"
        pool.write_text("\n".join(shorter) + "\n", encoding="utf-8")
        runs = folder / "runs"
        compare = ["train", "--mode", "frozen", "--method", "all", "--seeds", "1"]
        base = cli(*compare, "--dataset", spec, "--runs-dir", str(runs))
        print(f"quick compare on D (its feature passes): {base:.1f} s", flush=True)
        suggested = folder / "next.csv"
        took = cli(
            "suggest", "--dataset", spec, "--pool", str(pool), "--n", str(args.n),
            "--out", str(suggested), "--runs-dir", str(runs),
        )  # fmt: skip
        print(f"suggest {args.n} from the pool of 300: {took:.1f} s", flush=True)
        table = pd.read_csv(suggested, keep_default_na=False)
        table["label"] = [answers[t.lstrip("'")] for t in table["text"]]
        labelled = folder / "labelled.csv"
        table.to_csv(labelled, index=False)
        before = cache_bytes(runs)
        version = cli(*compare, "--dataset", spec, "--add", str(labelled), "--runs-dir", str(runs))
        grown = cache_bytes(runs) - before
        print(f"quick compare on D+added-{args.n}: {version:.1f} s", flush=True)
        heads = folder / "heads-only"
        shutil.rmtree(heads, ignore_errors=True)
        shutil.copytree(runs / ".features", heads / ".features")
        alone = cli(*compare, "--dataset", spec, "--add", str(labelled), "--runs-dir", str(heads))
        print(f"the same compare, every feature cached (the heads' own time): {alone:.1f} s")
        new_bytes = args.n * 2 * 384 * 4  # a text's two poolings, float32, one input format
        print(
            f"\nD+added-{args.n} / heads alone: {version / alone:.2f} (target <= 1.2); "
            f"D's first compare / heads alone: {base / alone:.2f}\n"
            f"the feature cache grew {grown / 1e3:.1f} kB (the {args.n} new texts' features: "
            f"{new_bytes / 1e3:.1f} kB an input format)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
