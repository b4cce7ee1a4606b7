"""How the store's readers scale: 10, 100, 1,000 and 5,000 runs.

    python bench/store_scale.py [--sizes 10 100 1000 5000] [--pages Results Diagnostics ...]

Builds synthetic stores (``tests.helpers.synthetic_runs``: every file of a real run, made-up
numbers) of ``r8`` runs of Table 2's methods over as many seeds as it takes, then times, per
size: ``compare`` (the CLI, in-process), ``reproduce``'s table step (``comparison`` of Table 2
on the store's runs), and each app page's render with Streamlit's AppTest, first (cold: the page
reads the store) and again (warm: the app's cache keyed on the store's state). Prints one table
and the growth factor of each column from one size to the next (10x runs: linear is 10x).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from streamlit.testing.v1 import AppTest  # noqa: E402

from glee_core.cli import main as cli  # noqa: E402
from glee_core.models.options import DataOptions  # noqa: E402
from glee_core.runs.paper_tables import comparison  # noqa: E402
from glee_core.runs.store import RunStore  # noqa: E402
from glee_core.train.reproduce import get_table  # noqa: E402
from tests.helpers.synthetic_runs import synthetic_dataset, write_synthetic_run  # noqa: E402

PAGES = {
    "Home": "app_pages/0_Home.py",
    "Train": "app_pages/2_Train.py",
    "Results": "app_pages/3_Results.py",
    "Diagnostics": "app_pages/4_Diagnostics.py",
    "Predictions": "app_pages/5_Predictions.py",
    "Paper": "app_pages/8_Paper.py",
}


def build(root: Path, size: int) -> RunStore:
    """``size`` runs on one 8-class dataset named r8: Table 2's methods x seeds 1, 2, ..."""
    store = RunStore(root)
    dataset = synthetic_dataset(8, "r8")
    methods = list(get_table(2).methods)
    for i in range(size):
        write_synthetic_run(store, dataset, methods[i % len(methods)], i // len(methods) + 1)
    return store


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def render(page: str, dataset: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / page), default_timeout=600)
    at.session_state["dataset"] = DataOptions(dataset=dataset)
    return at


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000, 5000])
    parser.add_argument("--pages", nargs="*", default=list(PAGES))
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            root = Path(tmp) / f"store-{size}"
            build_s = timed(lambda root=root, size=size: build(root, size))
            os.environ["GLEE_RUNS_DIR"] = str(root)
            row = {"runs": size, "build s": build_s}
            with contextlib.redirect_stdout(io.StringIO()):
                row["compare"] = timed(
                    lambda root=root: cli(["compare", "--runs-dir", str(root), "--format", "csv"])
                )
            runs = RunStore(root).runs()
            row["table step"] = timed(lambda runs=runs: comparison(runs, get_table(2), ["r8"]))
            for name in args.pages:
                # Home and Train show the dataset itself, and r8 here is synthetic: the demo
                at = render(PAGES[name], "demo" if name in ("Home", "Train") else "r8")
                row[f"{name} cold"] = timed(at.run)
                if at.exception:
                    raise SystemExit(f"{name} at {size} runs: {at.exception[0].message}")
                row[f"{name} warm"] = timed(at.run)
            rows.append(row)
            print(
                f"{size} runs: " + ", ".join(f"{k} {v:.2f}" for k, v in row.items() if k != "runs"),
                file=sys.stderr,
            )
    columns = list(rows[0])
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print(
            "| "
            + " | ".join(f"{row[c]:.2f}" if c != "runs" else f"{row[c]:,}" for c in columns)
            + " |"
        )
    for before, after in zip(rows, rows[1:], strict=False):
        factor = after["runs"] / before["runs"]
        growth = {c: after[c] / max(before[c], 1e-3) for c in columns if c not in ("runs",)}
        print(
            f"\n{before['runs']:,} -> {after['runs']:,} runs (x{factor:g}): "
            + ", ".join(f"{c} x{g:.1f}" for c, g in growth.items())
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
