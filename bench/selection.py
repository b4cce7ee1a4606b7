"""How well the quick compare's choice holds on test: dev against cross-validation, per set.

    python bench/selection.py [--datasets demo,r8-1500,r52-lt] [--seeds 3] [--work DIR]

On each long-tailed set (bench/baselines.py builds r8-1500 and r52-lt from ../shared/data) it
runs the quick compare as the app does - every head, each plain-input head on both poolings,
cross-validated where dev is small - over several seeds, then replays the choices a user would
have been given and prints each one's test macro-F1 and tail F1 (mean ± std over seeds) and how
far each falls behind the best candidate in hindsight (by mean test macro-F1: what no choice
can know):

* ``dev, [CLS] only``: the choice before pooling was a candidate (best mean dev score);
* ``dev, both poolings``: the same over both poolings;
* ``cross-validation``: what the recommendation chooses with every candidate at every seed;
* ``one-click flow``: the quick compare at seed 1, then "seeds 1-3 for the top 3" of the chosen
  candidate's setting: the recommendation over exactly those runs.

Prints a Markdown table for BENCHMARKS.md and the wall time of each compare. Run by hand; CI
never runs it.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.baselines import r8_subset, r52_long_tail  # noqa: E402
from glee_core.data.datasets import load_dataset  # noqa: E402
from glee_core.models.config import TrainConfig  # noqa: E402
from glee_core.models.methods import METHODS  # noqa: E402
from glee_core.runs.recommend import FINETUNE_TOP, ranked, recommend  # noqa: E402
from glee_core.runs.store import RunStore  # noqa: E402
from glee_core.runs.tables import markdown_table, mean_std  # noqa: E402
from glee_core.train.experiment import run_experiments  # noqa: E402


def candidate_scores(runs) -> pd.DataFrame:
    """Test macro-F1 and tail F1 (%) of each candidate (setting, method), mean and std over
    seeds."""
    frame = pd.DataFrame(
        [
            {
                "setting": r.setting,
                "method": r.method,
                "seed": r.seed,
                "f1": 100 * r.metrics.f1,
                "tail_f1": 100 * r.metrics.tail_f1,
                "dev": 100 * r.metrics.best_dev,
            }
            for r in runs
        ]
    )
    return frame.groupby(["setting", "method"]).agg(
        f1=("f1", "mean"),
        f1_std=("f1", "std"),
        tail_f1=("tail_f1", "mean"),
        tail_f1_std=("tail_f1", "std"),
        dev=("dev", "mean"),
        seeds=("seed", "size"),
    )


def without_cv(runs):
    """The runs as if the compare had not cross-validated (the choice on dev)."""
    return [_DevOnly(r) for r in runs]


class _DevOnly:
    def __init__(self, run):
        self._run = run

    def __getattr__(self, name):
        return getattr(self._run, name)

    @property
    def metrics(self):
        metrics = self._run.metrics
        return type(metrics)(**{**metrics.__dict__, "cv": None})


def one_click(runs):
    """The runs the one-click flow leaves: the compare at seed 1, then seeds 1-3 of the top
    heads of the chosen candidate's setting."""
    first = [r for r in runs if r.seed == 1]
    rec = recommend(first)
    same = [r for r in first if r.setting == rec.chosen.setting]
    top = list(ranked(same)["method"].head(FINETUNE_TOP))
    return first + [
        r for r in runs if r.seed != 1 and r.setting == rec.chosen.setting and r.method in top
    ]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="demo,r8-1500,r52-lt")
    parser.add_argument(
        "--data-dir", default=os.environ.get("GLEE_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    )
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--model", default="auto")
    parser.add_argument("--work", help="keep the runs here (default: a temporary folder)")
    args = parser.parse_args(argv)
    data_dir = Path(args.data_dir)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        builders = {
            "demo": lambda: "demo",
            "r8-1500": lambda: r8_subset(data_dir, work),
            "r52-lt": lambda: r52_long_tail(data_dir, work),
        }
        store = RunStore(work / "runs")
        table = []
        for name in args.datasets.split(","):
            dataset = load_dataset(builders[name]())
            config = TrainConfig(mode="frozen", max_length=args.max_length)
            methods = [m for m in METHODS.values() if m.supports_frozen]
            started = time.perf_counter()
            runs = run_experiments(
                dataset, methods, range(1, args.seeds + 1), args.model, config, store
            )
            seconds = time.perf_counter() - started
            scores = candidate_scores(runs)
            best = scores["f1"].idxmax()
            small = dataset.small_dev()
            print(
                f"{name}: {len(runs)} runs in {seconds:.0f} s; dev split: "
                f"{small or 'large enough to choose by'}; best in hindsight: {best[1]} "
                f"({scores.loc[best, 'f1']:.2f})",
                file=sys.stderr,
            )
            cls_only = [r for r in runs if "mean pooling" not in r.setting]
            choices = {
                "dev, [CLS] only": recommend(without_cv(cls_only)),
                "dev, both poolings": recommend(without_cv(runs)),
                "cross-validation": recommend(runs),
                "one-click flow": recommend(one_click(runs)),
            }
            for label, rec in choices.items():
                c = rec.chosen
                row = scores.loc[(c.setting, c.method)]
                table.append(
                    [
                        name,
                        label,
                        f"`{c.method}` ({c.pooling})",
                        mean_std(row["f1"], row["f1_std"]),
                        mean_std(row["tail_f1"], row["tail_f1_std"]),
                        f"{row['f1'] - scores.loc[best, 'f1']:+.2f}",
                        f"{rec.basis}" + (f" {c.wins}/{c.cells} folds" if c.cells else ""),
                    ]
                )
            row = scores.loc[best]
            spread = np.nanmean(scores["f1_std"])
            reads = (
                "[MASK]"
                if METHODS[best[1]].input_format == "prompt"
                else "mean"
                if "mean pooling" in best[0]
                else "cls"
            )
            table.append(
                [
                    name,
                    "best in hindsight (test)",
                    f"`{best[1]}` ({reads})",
                    mean_std(row["f1"], row["f1_std"]),
                    mean_std(row["tail_f1"], row["tail_f1_std"]),
                    "0",
                    f"mean seed std {spread:.2f}",
                ]
            )
        print(
            "\n".join(
                markdown_table(
                    ["set", "chosen by", "candidate", "test F1", "tail F1", "vs best", "basis"],
                    table,
                    left=3,
                )
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
