"""How far the one-click answer is from the best single candidate in hindsight in one store, and
whether its test split can tell: the paired bootstrap of the gap over the test texts.

    python bench/paired_gap.py RUNS_DIR [--dataset ID] [--seed 1] [--resamples 1000]

For one dataset and seed of a store (an app walk's, ``bench/app_clicks.py --keep``), it prints
the answer (the recommendation's average where it averages, else its pick) and the candidate
best on test, their test macro-F1, and the gap's mean and standard deviation over test texts
drawn with replacement (the same draws for both): a gap smaller than about two of those cannot be
told from the test's own noise. Run by hand; CI never runs it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from glee_core.runs.ensemble import average_probabilities  # noqa: E402
from glee_core.runs.metrics import classification_metrics  # noqa: E402
from glee_core.runs.recommend import recommend  # noqa: E402
from glee_core.runs.store import RunStore  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs_dir")
    parser.add_argument("--dataset")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args(argv)
    runs = [r for r in RunStore(args.runs_dir).runs() if r.seed == args.seed]
    dataset = args.dataset or runs[0].dataset
    runs = [r for r in runs if r.dataset == dataset]
    rec = recommend(runs)
    answer = list(rec.ensemble.runs) if rec.ensemble else None
    if answer is None:
        answer = [
            next(
                r for r in runs if (r.setting, r.method) == (rec.chosen.setting, rec.chosen.method)
            )
        ]
    best = max(runs, key=lambda r: r.metrics.f1)
    data = best.record.dataset
    gold = best.predictions["gold"].map({c: i for i, c in enumerate(data.classes)}).to_numpy()
    ours = average_probabilities([r.logits for r in answer]).argmax(1)
    theirs = best.logits.argmax(1)

    def f1(pred: np.ndarray, rows: np.ndarray) -> float:
        scores = classification_metrics(
            gold[rows], pred[rows], data.classes, data.head_classes, data.tail_classes
        )
        return 100 * scores["f1"]

    everything = np.arange(len(gold))
    rng = np.random.default_rng(0)
    gaps = []
    for _ in range(args.resamples):
        rows = rng.integers(0, len(gold), len(gold))
        gaps.append(f1(ours, rows) - f1(theirs, rows))
    name = f"the average of {len(answer)}" if len(answer) > 1 else f"`{answer[0].method}`"
    print(
        f"{dataset}, seed {args.seed}, {len(gold)} test texts: the answer ({name}) "
        f"{f1(ours, everything):.2f}, the best in hindsight (`{best.method}`, {best.reads}) "
        f"{f1(theirs, everything):.2f}; the gap over {args.resamples} resamples of the test "
        f"texts {np.mean(gaps):+.2f} ± {np.std(gaps):.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
