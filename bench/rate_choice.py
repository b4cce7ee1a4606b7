"""Could anything on dev have chosen the fine-tune's learning rate? Stored runs that differ only by
their rate, side by side: what each dev criterion would pick, against test.

    python bench/rate_choice.py --runs-dir /tmp/b3-r52/runs [--mode finetune] [--method M]

Groups the store's runs of one mode and method by (dataset, seed) and by everything in their
identity but the rate (a searched run counts at the rate its search chose), and prints, for each
group with two rates or more, every run's rate, test macro-F1 and tail F1, and the scores of its
kept model on dev a choice could read: best dev macro-F1 (what the search and early stopping
read), dev cross-entropy, and the class-balanced dev cross-entropy (the mean over classes of
each class's mean loss, so one-text classes weigh as much as the head). Then, per criterion, how
often its pick was the rate best on test. Reads ``calibration.npz`` (the kept model's dev
logits); a run stored before runs kept it is skipped. Run by hand; CI never runs it.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy.special import log_softmax

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from glee_core.runs.store import RunStore  # noqa: E402

RATE_FIELDS = {"lr", "lr_candidates", "lr_search"}  # what a group's runs may differ by
OPTIONS = ("layer_decay", "self_ensemble", "self_distill", "supcon", "batch_size")  # shown


def options_of(rest: tuple) -> str:
    """The recipe options a group ran with (its identity's), for the table."""
    named = dict(rest)
    unset = (None, "None", "32")  # 32: the default batch
    shown = [f"{k} {named[k]}" for k in OPTIONS if named.get(k) not in unset]
    return ", ".join(shown)


def dev_losses(logits: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """Dev cross-entropy, and its class-balanced mean (each class's mean loss, averaged)."""
    loss = -log_softmax(logits.astype(np.float64), axis=1)[np.arange(len(labels)), labels]
    return float(loss.mean()), float(np.mean([loss[labels == c].mean() for c in np.unique(labels)]))


def rows_of(store: RunStore, mode: str, method: str | None) -> dict[tuple, list[dict]]:
    groups = defaultdict(list)
    for run in store.runs():
        record = run.record
        if record.mode != mode or (method and record.method.id != method):
            continue
        rate = record.tuning.lr or record.hyperparameters.lr
        data = run.calibration_data
        if rate is None or data is None:
            continue
        rest = tuple(
            sorted(
                (k, str(v))
                for k, v in record.identity.items()
                if k not in RATE_FIELDS and k != "seed"
            )
        )
        loss, balanced = dev_losses(data["dev_logits"], data["dev_labels"])
        groups[(record.dataset.id, record.seed, rest)].append(
            {
                "rate": float(rate),
                "searched": record.hyperparameters.lr is None,
                "test": run.metrics.f1,
                "tail": run.metrics.tail_f1,
                "dev_f1": run.metrics.best_dev_f1,
                "dev_loss": loss,
                "balanced_loss": balanced,
            }
        )
    return groups


CRITERIA = {  # criterion -> (column, higher is better)
    "best dev macro-F1": ("dev_f1", True),
    "dev cross-entropy": ("dev_loss", False),
    "class-balanced dev cross-entropy": ("balanced_loss", False),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs-dir", type=Path, required=True)
    parser.add_argument("--mode", default="finetune")
    parser.add_argument("--method", default=None)
    args = parser.parse_args(argv)
    groups = rows_of(RunStore(args.runs_dir), args.mode, args.method)
    right, tied = defaultdict(int), defaultdict(int)
    compared = 0
    print(
        "| set | seed | options | rate | test F1 | tail F1 | best dev F1 | dev CE | bal. dev CE |"
    )
    print("|---|---:|---|---|---:|---:|---:|---:|---:|")
    for (dataset, seed, rest), rows in sorted(groups.items(), key=lambda kv: kv[0][:2]):
        by_rate = {}
        for row in rows:  # one run a rate (a searched run and a fixed one at its rate: the fixed)
            if row["rate"] not in by_rate or not row["searched"]:
                by_rate[row["rate"]] = row
        if len(by_rate) < 2:
            continue
        compared += 1
        rows = sorted(by_rate.values(), key=lambda r: r["rate"])
        for row in rows:
            print(
                f"| {dataset} | {seed} | {options_of(rest)} | "
                f"{row['rate']:g}{' (searched)' if row['searched'] else ''}"
                f" | {100 * row['test']:.1f} | {100 * row['tail']:.1f} | "
                f"{100 * row['dev_f1']:.1f} | {row['dev_loss']:.3f} | {row['balanced_loss']:.3f} |"
            )
        best = max(rows, key=lambda r: r["test"])["rate"]
        for name, (column, higher) in CRITERIA.items():
            sign = 1 if higher else -1
            top = max(round(sign * r[column], 4) for r in rows)
            picks = [r["rate"] for r in rows if round(sign * r[column], 4) == top]
            if len(picks) > 1:  # the criterion cannot choose
                tied[name] += 1
            else:
                right[name] += picks[0] == best
    print()
    for name in CRITERIA:
        print(
            f"{name}: picked the rate best on test in {right[name]} of {compared} group(s)"
            f"; tied in {tied[name]}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
