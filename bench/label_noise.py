"""Noise found, measured: plant wrong labels in a training split and ask ``health`` to find them.

    python bench/label_noise.py [--datasets demo,r8-1500,r52-lt] [--rates 0.05,0.10]
                                [--seeds 1,2,3] [--model auto] [--work DIR]

For each dataset, one feature pass of the offline MiniLM (cached in ``--work``); then, per seed
and rate, that share of the training labels is flipped (``random``: to another class drawn
uniformly; ``confused``: to the class the clean labels' out-of-fold probe confuses it with most,
else at random) and :func:`glee_core.health.report.examine` runs on the flipped labels with the
default options (5 folds of the class-balanced probe). Printed per dataset, flip kind and rate,
as mean ± sample std over seeds: the AUROC of ``1 - label_quality`` for flipped against clean
texts (texts "too few to judge" left out), and the precision and recall of the texts it flags
(``suspected``), with the seconds of ``examine``. Run it alone for seconds that compare.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.baselines import dataset_spec  # noqa: E402
from glee_core.core.devices import resolve_device  # noqa: E402
from glee_core.data.datasets import load_dataset  # noqa: E402
from glee_core.health.options import HealthOptions  # noqa: E402
from glee_core.health.report import examine, out_of_fold_probabilities  # noqa: E402
from glee_core.models.backbone import load_backbone, trained_pooling  # noqa: E402
from glee_core.models.features import (  # noqa: E402
    Encoder,
    FeatureInputs,
    FeatureSplit,
    cached_features,
)
from glee_core.runs.tables import markdown_table  # noqa: E402


def most_confused(features: np.ndarray, labels: np.ndarray, k: int, folds: int) -> dict:
    """Each class's most frequent wrong prediction by the out-of-fold probe on clean labels."""
    options = HealthOptions(out="", folds=folds, method="probe-balanced", seed=0)
    probs, judged = out_of_fold_probabilities(FeatureSplit(features, labels), k, options)
    pred = np.nan_to_num(probs, nan=-1.0).argmax(1)
    out = {}
    for c in range(k):
        wrong = pred[judged & (labels == c)]
        wrong = wrong[wrong != c]
        if len(wrong):
            out[c] = int(np.bincount(wrong, minlength=k).argmax())
    return out


def flip(
    labels: np.ndarray, k: int, rate: float, kind: str, confused: dict, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(new labels, flipped mask): ``rate`` of the texts get another class."""
    chosen = rng.choice(len(labels), size=max(1, round(rate * len(labels))), replace=False)
    new = labels.copy()
    for i in chosen:
        c = labels[i]
        if kind == "confused" and c in confused:
            new[i] = confused[c]
        else:
            new[i] = rng.choice([d for d in range(k) if d != c])
    return new, new != labels


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="demo,r8-1500,r52-lt")
    parser.add_argument("--rates", default="0.05,0.10")
    parser.add_argument("--kinds", default="random,confused")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--model", default="auto")
    parser.add_argument(
        "--data-dir", default=os.environ.get("GLEE_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    )
    parser.add_argument("--work", default=str(ROOT / ".glee" / "bench-label-noise"))
    args = parser.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    backbone, device = load_backbone(args.model), resolve_device("cpu")
    pooling = trained_pooling(args.model) or "mean"
    options = HealthOptions(out=str(work))
    rows = []
    for name in args.datasets.split(","):
        dataset = load_dataset(dataset_spec(name, Path(args.data_dir), work))
        features = cached_features(
            dataset,
            Encoder(backbone, device, work / "features"),
            FeatureInputs("plain", dataset.max_length, pooling=pooling),
        )
        train, k = features["train"], dataset.num_classes
        confused = most_confused(train.hidden, train.labels, k, options.folds)
        for kind in args.kinds.split(","):
            for rate in (float(r) for r in args.rates.split(",")):
                scores = []
                for seed in (int(s) for s in args.seeds.split(",")):
                    labels, flipped = flip(
                        train.labels, k, rate, kind, confused, np.random.default_rng(seed)
                    )
                    noisy = {**features, "train": replace(train, labels=labels)}
                    started = time.perf_counter()
                    report = examine(dataset, noisy, replace(options, seed=seed))
                    seconds = time.perf_counter() - started
                    issues = report.issues.sort_values("row")
                    quality = issues["label_quality"].to_numpy()
                    judged = ~np.isnan(quality)
                    flagged = issues["suspected"].to_numpy(dtype=bool)
                    hits = int((flagged & flipped).sum())
                    scores.append(
                        [
                            roc_auc_score(flipped[judged], 1 - quality[judged]),
                            hits / max(int(flagged.sum()), 1),
                            hits / max(int(flipped.sum()), 1),
                            seconds,
                        ]
                    )
                    print(
                        f"{name} {kind} {rate:.0%} seed {seed}: AUROC {scores[-1][0]:.3f}",
                        file=sys.stderr,
                        flush=True,
                    )
                scores = np.array(scores)
                mean = scores.mean(0)
                std = scores.std(0, ddof=1) if len(scores) > 1 else np.zeros(4)
                rows.append(
                    [
                        name,
                        len(train),
                        k,
                        kind,
                        f"{rate:.0%}",
                        *(f"{m:.3f} ± {s:.3f}" for m, s in zip(mean[:3], std[:3], strict=True)),
                        f"{mean[3]:.1f}",
                    ]
                )
    print(
        "\n".join(
            markdown_table(
                [
                    "dataset",
                    "train texts",
                    "classes",
                    "flips",
                    "rate",
                    "AUROC",
                    "precision",
                    "recall",
                    "seconds",
                ],
                rows,
                left=1,
            )
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
