"""How well the quick compare's choice holds on test: dev against cross-validation, per set.

    python bench/selection.py [--datasets demo,r8-1500,r52-lt,r52-short,r52-few,r8-steep,cmid-3000,
        ctc-1800] [--seeds 3] [--work DIR]

On each long-tailed set (``bench/baselines.dataset_spec`` builds all but the demo from
../shared/data: r8-1500, r52-lt, and four the choice was not tuned on - r52-short, headlines of
about 50 characters; r52-few, 28 classes of 5-10 training texts; r8-steep, an imbalance ratio of
100; cmid-3000, Chinese medical questions read a character at a time; ctc-1800, Chinese
clinical-trial criteria of 27 characters in 44 classes, shaped as a new user's upload, built
after the choice was) it runs the quick compare as the app does - every head, each plain-input
head on both poolings, cross-validated where dev is small - over several seeds, then replays the
choices a user would have been given and prints each one's test macro-F1 and tail F1 (mean ± std
over seeds) and how far each falls behind the best candidate in hindsight (by mean test
macro-F1: what no choice can know):

* ``dev, [CLS] only``: the choice before pooling was a candidate (best mean dev score);
* ``dev, both poolings``: the same over both poolings;
* ``cross-validation``: what the recommendation chooses with every candidate at every seed;
* ``one-click flow``: the quick compare at seed 1, then "seeds 1-3 for the top 3" of the chosen
  candidate's setting: the recommendation over exactly those runs;
* rules against the winner's curse, each shown every seed and the one-click flow's runs: ``one
  standard error, simpler`` (a closed-form probe within one standard error of the best before a
  trained head), ``shrunk`` (each score shrunk toward its family's mean by its noise) and
  ``ensemble of the contenders`` (the recommendation's own: ``glee_core.runs.ensemble``, the
  candidates within a standard error of the best, at most 5, their test probabilities averaged
  at each seed; the pick alone where none is within it).

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


from bench.baselines import dataset_spec  # noqa: E402
from glee_core.data.datasets import load_dataset  # noqa: E402
from glee_core.models.config import TrainConfig  # noqa: E402
from glee_core.models.methods import METHODS  # noqa: E402
from glee_core.runs.ensemble import ensemble_test_scores  # noqa: E402
from glee_core.runs.recommend import FINETUNE_TOP, cv_scale, ranked, recommend  # noqa: E402
from glee_core.runs.store import RunStore  # noqa: E402
from glee_core.runs.tables import markdown_table, mean_std  # noqa: E402
from glee_core.train.experiment import run_launch  # noqa: E402
from glee_core.train.launch import Launch, unreadable_heads  # noqa: E402


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


def cv_frame(runs) -> pd.DataFrame:
    """Each candidate's cross-validated score (%) over the seeds it has in ``runs``: ``score``
    (mean), ``se`` (its standard error: over seeds, or one seed's folds), ``seeds``, and whether
    it is a closed-form probe (``simple``)."""
    scale = cv_scale(runs)
    rows = []
    for (setting, method), group in pd.DataFrame(
        [{"setting": r.setting, "method": r.method, "run": r} for r in runs if r.run_id in scale]
    ).groupby(["setting", "method"], sort=False):
        members = list(group["run"])
        values = [scale[r.run_id] for r in members]
        if len(values) > 1:
            se = float(np.std(values, ddof=1) / np.sqrt(len(values)))
        else:
            folds = members[0].metrics.cv.fold_f1 if members[0].metrics.cv else []
            se = 100 * float(np.std(folds, ddof=1) / np.sqrt(len(folds))) if len(folds) > 1 else 0
        rows.append(
            {
                "setting": setting,
                "method": method,
                "score": float(np.mean(values)),
                "se": se,
                "seeds": len(values),
                "simple": method.startswith("probe"),
                "family": "probe"
                if method.startswith("probe")
                else METHODS[method].input_format
                if method in METHODS
                else "other",
            }
        )
    return pd.DataFrame(rows).sort_values("score", ascending=False, kind="stable")


def one_se_rule(frame: pd.DataFrame) -> tuple[str, str]:
    """The simplest candidate (a closed-form probe before a trained head) within one standard
    error of the best score; the best when none is simpler."""
    best = frame.iloc[0]
    near = frame[frame["score"] >= best["score"] - best["se"]]
    simple = near[near["simple"]]
    row = simple.iloc[0] if len(simple) else best
    return row["setting"], row["method"]


def shrunk_rule(frame: pd.DataFrame) -> tuple[str, str]:
    """The best score after shrinking each toward its family's mean (probes, plain-input heads,
    template heads) by how noisy it is against how far the family's scores spread (a James-Stein
    weight: tau^2 / (tau^2 + se^2))."""
    shrunk = []
    for _, group in frame.groupby("family"):
        mean = group["score"].mean()
        tau2 = max(float(group["score"].var(ddof=1)) - float((group["se"] ** 2).mean()), 0.0)
        tau2 = tau2 if len(group) > 1 else 0.0
        weight = tau2 / (tau2 + group["se"] ** 2).replace(0, np.nan)
        shrunk.append(group.assign(shrunk=mean + weight.fillna(1.0) * (group["score"] - mean)))
    row = pd.concat(shrunk).sort_values("shrunk", ascending=False, kind="stable").iloc[0]
    return row["setting"], row["method"]


def ensemble_scores(members: list[tuple[str, str]], all_runs) -> tuple[float, float]:
    """Test macro-F1 and tail F1 (%) of ``members``' probabilities averaged (the library's
    :func:`ensemble_test_scores`), mean over the seeds every member has."""
    by_seed: dict[int, list] = {}
    for run in all_runs:
        if (run.setting, run.method) in members:
            by_seed.setdefault(run.seed, []).append(run)
    scores = [ensemble_test_scores(runs) for runs in by_seed.values() if len(runs) == len(members)]
    return float(np.mean([s["f1"] for s in scores])), float(np.mean([s["tail_f1"] for s in scores]))


def table_row(name, label, candidate, scores, best, key=None, f1=None, tail_f1=None):
    """A row of the table: a candidate's test scores (``key``: a (setting, method) of
    ``scores``, mean ± std over seeds; or ``f1`` and ``tail_f1`` as given) and its gaps to the
    best in hindsight."""
    if key is not None:
        row = scores.loc[key]
        f1, tail_f1 = row["f1"], row["tail_f1"]
        shown = mean_std(f1, row["f1_std"]), mean_std(tail_f1, row["tail_f1_std"])
    else:
        shown = f"{f1:.2f}", f"{tail_f1:.2f}"
    return [
        name,
        label,
        candidate,
        *shown,
        f"{f1 - scores.loc[best, 'f1']:+.2f}",
        f"{tail_f1 - scores.loc[best, 'tail_f1']:+.2f}",
    ]


def rule_rows(name, label, seen, all_runs, dataset, scores, best) -> list[list[str]]:
    """The rows of the rules tried against the winner's curse, each choosing from ``seen``
    (the runs it is shown) and scored on test over every seed of ``all_runs``."""
    frame = cv_frame(seen)
    rows = []
    for rule, pick in (("one standard error, simpler", one_se_rule), ("shrunk", shrunk_rule)):
        setting, method = pick(frame)
        reads = "mean" if "mean pooling" in setting else "cls"
        rows.append(
            table_row(
                name, f"{rule} ({label})", f"`{method}` ({reads})", scores, best, (setting, method)
            )
        )
    rec = recommend(seen)  # the library's rule: the one-click answer where it averages
    members = [
        (p.setting, p.method) for p in (rec.ensemble.members if rec.ensemble else [rec.chosen])
    ]
    f1, tail_f1 = ensemble_scores(members, all_runs)
    candidate = " + ".join(
        f"`{m}` ({'mean' if 'mean pooling' in setting else 'cls'})" for setting, m in members
    )
    rows.append(
        table_row(
            name,
            f"ensemble of the contenders ({label})",
            candidate,
            scores,
            best,
            None,
            f1,
            tail_f1,
        )
    )
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--datasets", default="demo,r8-1500,r52-lt,r52-short,r52-few,r8-steep,cmid-3000,ctc-1800"
    )
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
        store = RunStore(work / "runs")
        table = []
        for name in args.datasets.split(","):
            dataset = load_dataset(dataset_spec(name, data_dir, work))
            config = TrainConfig(mode="frozen", max_length=args.max_length)
            methods = [m for m in METHODS.values() if m.supports_frozen]
            out, _ = unreadable_heads(Launch(dataset, methods, [1], args.model, config, store))
            methods = [m for m in methods if m not in out]  # label words the backbone lacks
            started = time.perf_counter()
            runs = run_launch(
                Launch(dataset, methods, range(1, args.seeds + 1), args.model, config, store)
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
                basis = rec.basis + (f", {c.wins}/{c.cells} folds" if c.cells else "")
                table.append(
                    table_row(
                        name,
                        f"{label} ({basis})",
                        f"`{c.method}` ({c.pooling})",
                        scores,
                        best,
                        (c.setting, c.method),
                    )
                )
            table += rule_rows(name, "every seed", runs, runs, dataset, scores, best)
            table += rule_rows(name, "one-click flow", one_click(runs), runs, dataset, scores, best)
            spread = np.nanmean(scores["f1_std"])
            reads = (
                "[MASK]"
                if METHODS[best[1]].input_format == "prompt"
                else "mean"
                if "mean pooling" in best[0]
                else "cls"
            )
            table.append(
                table_row(
                    name,
                    f"best in hindsight (test; mean seed std {spread:.2f})",
                    f"`{best[1]}` ({reads})",
                    scores,
                    best,
                    best,
                )
            )
            print(  # the table so far: a long bench stopped midway keeps what it measured
                "\n".join(
                    markdown_table(
                        [
                            "set",
                            "chosen by",
                            "candidate",
                            "test F1",
                            "tail F1",
                            "vs best",
                            "tail vs best",
                        ],
                        table,
                        left=3,
                    )
                ),
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
