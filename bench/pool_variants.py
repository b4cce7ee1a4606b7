"""What to label next, round two (issue #80 item 2): variants of ``auto`` that might turn the
tail texts it finds into more tail F1, on the backtest's probe, features, splits and seeds
(``bench/pool_backtest.py``), each beside auto, paired by seed. ``auto`` is ``tail-margin``
(round four's, :mod:`glee_core.pool.strategies`); ``rare-margin`` was auto until then, and the
variants of rounds one to three build on its score (the one they were measured beside).

    python bench/pool_variants.py [--datasets demo,r8-1500,r52-lt] [--labelled 0.1] [--budget 200]
                                  [--seeds 1,2,3,4,5,6] [--variants NAME,...]

The variants (``rare-margin``: round one's auto; ``prior-margin``: ``tail-margin`` without the
features' length, the share the class weight ``1 / (labelled + 3)`` and ``1 - margin`` give;
``prior-1``, ``prior-10``, ``prior-30``: ``prior-margin`` with the class weight's 3 another
prior; ``rare``: each text's probability mass on the classes weighed by the inverse of their
labelled texts, as ``rare-margin``'s first factor):

* ``least-confidence``: 1 - the top probability (small-text's ``LeastConfidence``).
* ``round-robin``: rare-margin's score within each predicted class, the fewest-labelled class
  first, in turns (no class's texts crowd out another's).
* ``clusters``: diversity in the batch: the 3n best by rare-margin's score, k-means into n
  clusters of their features, the best of each (Cluster-Margin's idea, Citovsky et al. 2021).
* ``prob-clusters``: the same clusters in the space of the class probabilities.
* ``density``: rare-margin's score times the mean cosine similarity to the 10 nearest pool texts
  (information density, Settles and Craven 2008).
* ``rare-margin^2``: rare x (1 - margin)^2, uncertainty weighed more.
* ``rare-gradient``: rare x the expected length of the softmax weights' gradient
  (E_y ||p - e_y|| x ||x||, expected gradient length, Settles et al. 2008).
* ``error-rare``, ``error-sqrt``, ``error-only``: rare-margin's score with each class weighed by its
  error (1 - F1 in 2-fold cross-validation of the probe on the labelled texts) over its labelled
  texts to the power 1, 1/2 or 0: the tail classes still got wrong first (round three).
* ``auto-norm``: rare-margin's score times the features' norm (rare-gradient's lift on r52-lt
  was the norm's, round two found).
* ``norm-lean``, ``norm-lean-soft``: rare-margin's score times the norm to the power of the sign
  (or 2 x the strength) of the correlation of the norm with the class's rarity among the
  labelled texts.
* ``badge``: k-means++ seeding over the gradient embeddings (BADGE, Ash et al. 2020);
  ``rare-badge``: each embedding scaled by rare-margin's score (round three).

Printed: tail F1 (mean ± std over seeds) at once and in rounds of 50, and each variant's paired
lead over auto. A few seconds a dataset: the features are the backtest's, cached in ``--work``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.pool_backtest import (  # noqa: E402
    ROUND,
    backtest_of,
    labelled_start,
    mean_std,
)
from glee_core.core.devices import resolve_device  # noqa: E402
from glee_core.models.backbone import load_backbone, trained_pooling  # noqa: E402
from glee_core.models.heads import probe_classifier  # noqa: E402
from glee_core.pool.strategies import (  # noqa: E402
    PoolFeatures,
    TailMargin,
    in_turns,
    margins,
    select,
)
from glee_core.runs.tables import markdown_table  # noqa: E402


def rare(probs: np.ndarray, counts: np.ndarray) -> np.ndarray:
    return probs @ (1.0 / np.maximum(counts.astype(float), 1.0))


def rare_margin_score(probs: np.ndarray, counts: np.ndarray) -> np.ndarray:
    return rare(probs, counts) * (1 - margins(probs) / 2)


def best(score: np.ndarray, n: int) -> np.ndarray:
    return np.argsort(-score, kind="stable")[:n]


def clustered(score: np.ndarray, space: np.ndarray, n: int, seed: int) -> np.ndarray:
    """The best of each of n k-means clusters of the 3n best texts by ``score``."""
    from sklearn.cluster import KMeans  # noqa: PLC0415

    top = best(score, 3 * n)
    if len(top) <= n:
        return top
    groups = KMeans(n_clusters=n, n_init=1, random_state=seed).fit(space[top]).labels_
    chosen = [top[groups == g][np.argmax(score[top[groups == g]])] for g in np.unique(groups)]
    return np.array(chosen, dtype=np.int64)


def round_robin(score: np.ndarray, probs: np.ndarray, counts: np.ndarray, n: int) -> np.ndarray:
    predicted = probs.argmax(1)
    return in_turns(
        {
            c: np.flatnonzero(predicted == c)[np.argsort(-score[predicted == c], kind="stable")]
            for c in np.argsort(counts, kind="stable")
        },
        n,
    )


def density(features: np.ndarray) -> np.ndarray:
    unit = features / np.linalg.norm(features, axis=1, keepdims=True)
    similar = np.sort(unit @ unit.T, axis=1)[:, -11:-1]
    return np.clip(similar.mean(1), 1e-6, None)


def gradient_length(probs: np.ndarray, features: np.ndarray) -> np.ndarray:
    """E_y ||p - e_y|| x ||x||: the expected length of a softmax layer's weight gradient."""
    per_label = np.sqrt(np.clip((probs**2).sum(1)[:, None] - 2 * probs + 1, 0, None))
    return (probs * per_label).sum(1) * np.linalg.norm(features, axis=1)


def class_errors(f: PoolFeatures, k: int) -> np.ndarray:
    """1 - each class's F1 in 2-fold cross-validation of the probe on the labelled texts (how
    badly the classifier still does on it: where a label may move the tail F1)."""
    from sklearn.metrics import f1_score  # noqa: PLC0415
    from sklearn.model_selection import StratifiedKFold  # noqa: PLC0415

    features, labels = f.labelled, f.labels
    present = np.unique(labels)
    predicted = np.empty_like(labels)
    folds = StratifiedKFold(n_splits=2, shuffle=True, random_state=0)
    with warnings.catch_warnings():  # a class of one labelled text leaves one fold without it
        warnings.simplefilter("ignore", UserWarning)
        for fit_rows, held in folds.split(features, labels):
            clf = probe_classifier(features[fit_rows], labels[fit_rows], True)
            predicted[held] = clf.predict(features[held])
    errors = np.ones(k)
    errors[present] = 1 - f1_score(labels, predicted, labels=present, average=None, zero_division=0)
    return errors


def error_weighted(p, c, f: PoolFeatures, power: float) -> np.ndarray:
    """rare-margin's score with each class weighed by its cross-validated error over its
    labelled texts to ``power``: the tail classes the classifier still gets wrong first."""
    weight = class_errors(f, p.shape[1]) / np.maximum(c.astype(float), 1.0) ** power
    return (p @ weight) * (1 - margins(p) / 2)


def leaning(p, c, f: PoolFeatures, soft: bool) -> np.ndarray:
    """rare-margin's score times the norm to the power of the way (``soft``: 2 x the strength) it
    leans to the rare classes among the labelled texts (``PoolFeatures.norm_lean``)."""
    lean = f.norm_lean(c)
    power = 2 * lean if soft else np.sign(lean)
    return rare_margin_score(p, c) * np.linalg.norm(f.pool, axis=1) ** power


def badge(probs: np.ndarray, features: np.ndarray, n: int, seed: int, weight=None) -> np.ndarray:
    """BADGE (Ash et al. 2020): k-means++ seeding over each text's gradient embedding, the loss
    gradient of a softmax layer's weights at its predicted label ((p - e_y) x its features):
    uncertain and different texts. ``weight`` scales each embedding (rare-badge: rare-margin's
    score, so the likely tail texts are seeded more). The embeddings' inner products are those of
    the two factors multiplied, so the k x d embeddings are never built."""
    residual = probs.copy()
    residual[np.arange(len(probs)), probs.argmax(1)] -= 1
    gram = (residual @ residual.T) * (features @ features.T)
    if weight is not None:  # relative to its mean: the embeddings keep their scale
        gram *= np.outer(weight, weight) / weight.mean() ** 2
    norms = np.diag(gram).copy()
    rng = np.random.default_rng(seed)
    chosen = [int(np.argmax(norms))]
    nearest = np.clip(norms + norms[chosen[0]] - 2 * gram[:, chosen[0]], 0, None)
    while len(chosen) < min(n, len(probs)):
        if nearest.sum() <= 0:
            break
        pick = int(rng.choice(len(probs), p=nearest / nearest.sum()))
        chosen.append(pick)
        nearest = np.minimum(nearest, np.clip(norms + norms[pick] - 2 * gram[:, pick], 0, None))
    return np.array(chosen, dtype=np.int64)


VARIANTS = {  # name -> (probs, counts, n, seed, PoolFeatures) -> the pool rows picked
    "auto": lambda p, c, n, s, f: select("tail-margin", p, c, s, f)[:n],
    "rare-margin": lambda p, c, n, s, f: select("rare-margin", p, c, s)[:n],
    "prior-margin": lambda p, c, n, s, f: select("tail-margin", p, c, s)[:n],
    "prior-1": lambda p, c, n, s, f: best(TailMargin(1).score(p, c), n),
    "prior-10": lambda p, c, n, s, f: best(TailMargin(10).score(p, c), n),
    "prior-30": lambda p, c, n, s, f: best(TailMargin(30).score(p, c), n),
    "least-confidence": lambda p, c, n, s, f: best(1 - p.max(1), n),
    "round-robin": lambda p, c, n, s, f: round_robin(rare_margin_score(p, c), p, c, n),
    "clusters": lambda p, c, n, s, f: clustered(rare_margin_score(p, c), f.pool, n, s),
    "prob-clusters": lambda p, c, n, s, f: clustered(rare_margin_score(p, c), p, n, s),
    "density": lambda p, c, n, s, f: best(rare_margin_score(p, c) * density(f.pool), n),
    "rare-margin^2": lambda p, c, n, s, f: best(rare(p, c) * (1 - margins(p)) ** 2, n),
    "rare-gradient": lambda p, c, n, s, f: best(rare(p, c) * gradient_length(p, f.pool), n),
    "error-rare": lambda p, c, n, s, f: best(error_weighted(p, c, f, 1.0), n),
    "error-sqrt": lambda p, c, n, s, f: best(error_weighted(p, c, f, 0.5), n),
    "error-only": lambda p, c, n, s, f: best(error_weighted(p, c, f, 0.0), n),
    "auto-norm": lambda p, c, n, s, f: best(
        rare_margin_score(p, c) * np.linalg.norm(f.pool, axis=1), n
    ),
    "norm-lean": lambda p, c, n, s, f: best(leaning(p, c, f, False), n),
    "norm-lean-soft": lambda p, c, n, s, f: best(leaning(p, c, f, True), n),
    "badge": lambda p, c, n, s, f: badge(p, f.pool, n, s),
    "rare-badge": lambda p, c, n, s, f: badge(p, f.pool, n, s, rare_margin_score(p, c)),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="demo,r8-1500,r52-lt")
    parser.add_argument("--labelled", type=float, default=0.1)
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--seeds", default="1,2,3,4,5,6")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--model", default="auto")
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--work", default=str(ROOT / ".glee" / "bench-pool"))
    args = parser.parse_args(argv)
    variants = ["auto"] + [v for v in args.variants.split(",") if v != "auto"]
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        parser.error(
            f"unknown variant(s) {', '.join(sorted(unknown))}; known: {', '.join(VARIANTS)}"
        )
    seeds = [int(s) for s in args.seeds.split(",")]
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    backbone, device = load_backbone(args.model), resolve_device("cpu")
    pooling = trained_pooling(args.model) or "mean"
    rows, started = [], time.perf_counter()
    for name in args.datasets.split(","):
        _, bench = backtest_of(name, args, backbone, device, pooling, work)
        ceiling = bench.score(bench.fit(np.arange(len(bench.train))))[1]
        for rounds in (False, True):
            way = f"in rounds of {ROUND}" if rounds else "at once"
            tails = {}
            for variant in variants:
                tails[variant] = np.array(
                    [
                        bench.score(
                            bench.fit(
                                bench.label(
                                    labelled_start(
                                        bench.train.labels, args.labelled, np.random.default_rng(s)
                                    ),
                                    VARIANTS[variant],
                                    args.budget,
                                    rounds,
                                    s,
                                )
                            )
                        )[1]
                        for s in seeds
                    ]
                )
                lead = "-" if variant == "auto" else mean_std(list(tails[variant] - tails["auto"]))
                rows.append(
                    [name, way, variant, mean_std(list(tails[variant])), lead, f"{ceiling:.1f}"]
                )
                print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    header = ["dataset", "labelled", "variant", "tail F1", "lead over auto, paired", "ceiling"]
    print(f"\n{args.budget} texts, {args.labelled:.0%} labelled, {len(seeds)} seeds")
    print("\n".join(markdown_table(header, rows)))
    print(f"\n{time.perf_counter() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
