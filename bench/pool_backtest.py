"""What to label next, backtested: a share of every class's training texts labelled, the rest a
pool whose labels a simulated labeller gives back for the texts a strategy picks.

    python bench/pool_backtest.py [--datasets demo,r8-1500,r52-lt] [--labelled 0.1,0.25]
                                  [--budgets 50,100,200,400] [--seeds 1,2,3,4,5,6] [--work DIR]

One feature pass of the offline MiniLM a dataset (mean pooling, cached in ``--work``). Per
labelled share and seed: of every class, that share of its training texts (at least 2) is
labelled, the rest is the pool. The classifier is the class-balanced probe (``probe-balanced``,
the closed-form head the quick compare recommends most often on these sets; a whole compare a
step would take hours); it scores the pool, a strategy of :mod:`glee_core.pool.strategies` picks the
texts, their hidden labels join the labelled ones, and the probe is fitted again: once for the
whole budget (``one shot``) and in rounds of 50 (fitted again between rounds). Printed, mean ±
sample std over seeds: test macro-F1, tail F1 (the classes of the whole training split's tail)
and the tail texts among those picked, for each strategy and budget, for nothing added, and for
every pool text labelled (the ceiling: what no strategy can pass with this classifier).

``--peers``: small-text's strongest strategies beside ours on the same classifier, features,
splits and budgets (``BreakingTies``, ``SEALS(BreakingTies)``, ``LeastConfidence``; the
``bench`` extra installs small-text and hnswlib), and after each cell the paired lead of
``auto`` over the best peer there (mean ± std over seeds of auto's tail F1 minus the peer's).

``--one-click N``: instead, the learner the user keeps (issue #80 item 3). For the first N seeds,
at 10% labelled, 200 texts picked in rounds of 50 by auto and by random (the probe choosing, as
the app's suggestions do); on each, the whole quick compare and Home's choice among its
candidates (cross-validated where dev is small), its tail F1 on the same test (Home's answer:
the best few's average where the data cannot tell them apart; and the chosen head alone): auto's
gain over random with that answer beside its gain with the probe. ``--reference FILE``: each
cell's gains over nothing added as JSON (``glee_core/pool/backtest.json``, what Home's
before/after reads).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.baselines import dataset_spec  # noqa: E402
from glee_core.core.devices import resolve_device  # noqa: E402
from glee_core.core.files import write_json  # noqa: E402
from glee_core.data.datasets import load_dataset  # noqa: E402
from glee_core.models.backbone import load_backbone, trained_pooling  # noqa: E402
from glee_core.models.features import Encoder, FeatureInputs, cached_features  # noqa: E402
from glee_core.models.heads import probe_classifier  # noqa: E402
from glee_core.pool.pseudo import helps, pseudo_labels  # noqa: E402
from glee_core.pool.strategies import PoolFeatures, resolve_strategy, select  # noqa: E402
from glee_core.runs.metrics import classification_metrics  # noqa: E402
from glee_core.runs.tables import markdown_table  # noqa: E402

STRATEGIES = ("random", "margin", "balanced", "rare", "rare-margin", "tail-margin")
PEERS = ("BreakingTies", "SEALS(BreakingTies)", "LeastConfidence")  # small-text's
ROUND = 50


class _Features:
    """The training texts' features as small-text reads a dataset (rows by index)."""

    def __init__(self, x: np.ndarray):
        self.x = x

    def __getitem__(self, index) -> _Features:
        return _Features(self.x[index])

    def __len__(self) -> int:
        return len(self.x)


class _Scorer:
    """The backtest's probe as small-text reads a classifier: probabilities and embeddings."""

    def __init__(self, clf, k: int):
        self.clf, self.num_classes = clf, k

    def predict_proba(self, data: _Features) -> np.ndarray:
        return probabilities(self.clf, data.x, self.num_classes)

    def embed(self, data: _Features, **_) -> np.ndarray:
        return data.x


def peer(name: str):
    """A fresh small-text query strategy (SEALS keeps its nearest-neighbour index a run)."""
    from small_text.query_strategies import (  # noqa: PLC0415 (the bench extra)
        SEALS,
        BreakingTies,
        LeastConfidence,
    )

    made = {
        "BreakingTies": BreakingTies,
        "LeastConfidence": LeastConfidence,
        "SEALS(BreakingTies)": lambda: SEALS(BreakingTies()),
    }
    return made[name]()


def labelled_start(labels: np.ndarray, share: float, rng: np.random.Generator) -> np.ndarray:
    """Of every class, ``share`` of its texts (at least 2, at most all): the labelled rows."""
    rows = []
    for c in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == c))
        rows.extend(members[: min(len(members), max(2, round(share * len(members))))])
    return np.sort(np.array(rows, dtype=np.int64))


def probabilities(clf, features: np.ndarray, k: int) -> np.ndarray:
    out = np.zeros((len(features), k))
    out[:, clf.classes_] = clf.predict_proba(features)
    return out


class Backtest:
    """One dataset's features, classes and tail, and the scores of a labelled set."""

    def __init__(self, dataset, features):
        self.train, self.test = features["train"], features["test"]
        self.k = dataset.num_classes
        self.classes = dataset.classes
        self.head, self.tail = dataset.head_tail()
        self.tail_ids = {dataset.classes.index(c) for c in self.tail}

    def fit(self, rows: np.ndarray):
        return probe_classifier(self.train.hidden[rows], self.train.labels[rows], True)

    def head_f1(self, clf) -> float:
        metrics = classification_metrics(
            self.test.labels, clf.predict(self.test.hidden), self.classes, self.head, self.tail
        )
        return 100 * metrics["head_f1"]

    def score(self, clf) -> tuple[float, float]:
        pred = clf.predict(self.test.hidden)
        metrics = classification_metrics(self.test.labels, pred, self.classes, self.head, self.tail)
        return 100 * metrics["f1"], 100 * metrics["tail_f1"]

    def self_train(self, start: np.ndarray, auto: bool) -> tuple[float, float, float, bool]:
        """(macro-F1, tail F1, head F1, kept) after self-training on the pool (every text not in
        ``start``), nothing labelled; ``auto``: kept only where cross-validation on the labelled
        texts says the pseudo-labels help (else the labelled texts alone)."""
        pool = np.setdiff1d(np.arange(len(self.train)), start)
        labelled, labels = self.train.hidden[start], self.train.labels[start]
        keep = helps(labelled, labels, self.train.hidden[pool], self.k)[0] if auto else True
        if keep:
            found = pseudo_labels(labelled, labels, self.train.hidden[pool], self.k)
            clf = probe_classifier(
                np.concatenate([labelled, self.train.hidden[pool][found.rows]]),
                np.concatenate([labels, found.labels]),
                True,
            )
        else:
            clf = self.fit(start)
        pred = clf.predict(self.test.hidden)
        metrics = classification_metrics(self.test.labels, pred, self.classes, self.head, self.tail)
        return 100 * metrics["f1"], 100 * metrics["tail_f1"], 100 * metrics["head_f1"], keep

    def run(
        self, start: np.ndarray, strategy: str, budget: int, rounds: bool, seed: int
    ) -> tuple[float, float, int]:
        """(macro-F1, tail F1, tail texts picked) after ``budget`` pool texts are labelled."""
        labelled = self.label(start, strategy, budget, rounds, seed)
        added = np.setdiff1d(labelled, start)
        tail_found = int(np.isin(self.train.labels[added], list(self.tail_ids)).sum())
        return (*self.score(self.fit(labelled)), tail_found)

    def label(
        self, start: np.ndarray, strategy: str, budget: int, rounds: bool, seed: int
    ) -> np.ndarray:
        """The training rows labelled once ``strategy`` (a strategy's or a peer's name, or a
        function of the probabilities, labelled counts, n, seed and the texts' ``PoolFeatures``)
        has picked ``budget`` pool texts (the probe refitted between rounds of 50 where
        ``rounds``)."""
        labelled = start.copy()
        step = ROUND if rounds else budget
        other = peer(strategy) if strategy in PEERS else None
        while len(labelled) - len(start) < budget:
            pool = np.setdiff1d(np.arange(len(self.train)), labelled)
            if not len(pool):
                break
            clf = self.fit(labelled)
            counts = np.bincount(self.train.labels[labelled], minlength=self.k)
            take = min(step, budget - (len(labelled) - len(start)))
            if other is not None:  # small-text's own query, on the same classifier
                np.random.seed(seed)  # its ties and SEALS' index draw from numpy's global state
                picked = other.query(
                    _Scorer(clf, self.k),
                    _Features(self.train.hidden),
                    pool,
                    labelled,
                    self.train.labels[labelled],
                    n=take,
                )
            else:
                features = PoolFeatures(
                    self.train.hidden[pool],
                    self.train.hidden[labelled],
                    self.train.labels[labelled],
                )
                probs = probabilities(clf, self.train.hidden[pool], self.k)
                if callable(strategy):  # bench/pool_variants.py's
                    picked = pool[strategy(probs, counts, take, seed, features)]
                else:
                    picked = pool[select(strategy, probs, counts, seed, features)[:take]]
            labelled = np.concatenate([labelled, np.asarray(picked, dtype=np.int64)])
        return labelled


def one_click(dataset, rows: np.ndarray, store, model: str, tail: list[str]) -> tuple[float, float]:
    """The tail F1 (over ``tail``, the whole training split's tail classes, as the probe's) of
    the one-click answer on ``dataset``'s training ``rows``: every head of the quick compare on
    them, chosen by cross-validation as Home chooses (``recommend``), scored on the same test;
    the answer Home gives (the best few's average where the data cannot tell them apart) and
    the chosen head alone."""
    from dataclasses import replace  # noqa: PLC0415

    from glee_core.models.config import TrainConfig  # noqa: PLC0415
    from glee_core.models.methods import METHODS  # noqa: PLC0415
    from glee_core.runs.recommend import recommend  # noqa: PLC0415
    from glee_core.train.experiment import run_launch  # noqa: PLC0415
    from glee_core.train.launch import Launch  # noqa: PLC0415

    digest = hashlib.sha256(np.sort(rows).tobytes()).hexdigest()[:10]
    frame = dataset.splits["train"].iloc[np.sort(rows)].reset_index(drop=True)
    variant = replace(
        dataset,
        id=f"{dataset.id}+backtest-{len(rows)}-{digest}",
        splits={**dataset.splits, "train": frame},
        _fingerprint=None,
    )
    runs = run_launch(
        Launch(variant, list(METHODS.values()), [1], model, TrainConfig(mode="frozen"), store)
    )
    rec = recommend(runs)
    run = next(r for r in runs if r.setting == rec.chosen.setting and r.method == rec.chosen.method)
    answer = rec.ensemble.averaged if rec.ensemble is not None else run

    def tail_f1(scored) -> float:
        scores = scored.metrics.per_class
        return 100 * float(np.mean([scores[c].f1 for c in tail if c in scores]))

    return tail_f1(answer), tail_f1(run)


def backtest_of(name: str, args, backbone, device, pooling: str, work: Path):
    """A dataset of the backtest and its :class:`Backtest` (one feature pass, cached)."""
    dataset = load_dataset(dataset_spec(name, Path(args.data_dir), work))
    features = cached_features(
        dataset,
        Encoder(backbone, device, work / "features"),
        FeatureInputs("plain", dataset.max_length, pooling=pooling),
    )
    return dataset, Backtest(dataset, features)


def one_click_table(args, backbone, device, pooling: str, work: Path) -> None:
    """Auto's tail-F1 gain over random with the one-click answer as the learner, beside the
    probe's, per dataset (paired over seeds): the gain the strategy finds, kept or lost in the
    model the user keeps. Printed as a table."""
    from glee_core.runs.store import RunStore  # noqa: PLC0415

    seeds = [int(s) for s in args.seeds.split(",")][: args.one_click]
    store = RunStore(work / "one-click-runs")
    rows = []
    for name in args.datasets.split(","):
        dataset, bench = backtest_of(name, args, backbone, device, pooling, work)
        gains = {"probe": [], "one-click": [], "chosen head": []}
        random_clicks = []  # random's texts' one-click tail F1, a seed
        for seed in seeds:
            start = labelled_start(bench.train.labels, 0.1, np.random.default_rng(seed))
            tails = {}
            for strategy in ("random", resolve_strategy("auto", bool(bench.tail))):
                picked = bench.label(start, strategy, 200, True, seed)
                tails[strategy] = (
                    bench.score(bench.fit(picked))[1],
                    *one_click(dataset, picked, store, args.model, bench.tail),
                )
                print(
                    f"{name} seed {seed} {strategy}: probe / one-click / chosen head tail F1 "
                    + " / ".join(f"{t:.1f}" for t in tails[strategy]),
                    file=sys.stderr,
                    flush=True,
                )
            random_tails, auto_tails = tails.values()
            random_clicks.append(random_tails[1])
            for what, r, a in zip(gains, random_tails, auto_tails, strict=True):
                gains[what].append(a - r)
        probe, click, head = (np.array(g) for g in gains.values())
        # every pool text labelled: the one-click answer's ceiling, and so the most any texts
        # could have gained over random's with it
        every = np.arange(len(bench.train))
        ceiling = (
            bench.score(bench.fit(every))[1],
            one_click(dataset, every, store, args.model, bench.tail)[0],
        )
        room = ceiling[1] - np.mean(random_clicks)
        rows.append(
            [
                name,
                str(len(seeds)),
                mean_std(list(probe)),
                mean_std(list(click)),
                mean_std(list(head)),
                f"{ceiling[0]:.1f} / {ceiling[1]:.1f} (room over random's: {room:+.1f})",
                "yes"
                if click.mean() >= probe.mean() - 1
                else ("above the ceiling" if probe.mean() - 1 > room else "no"),
            ]
        )
    header = [
        "dataset",
        "seeds",
        "auto - random, probe",
        "auto - random, one-click (Home's answer)",
        "the chosen head alone",
        "every pool text labelled: probe / one-click",
        "one-click >= probe - 1",
    ]
    print("\n200 texts in rounds of 50, 10% labelled: auto's tail-F1 gain over random, paired")
    print("\n".join(markdown_table(header, rows)))


def mean_std(values: list[float]) -> str:
    values = np.array(values, dtype=float)
    spread = f" ± {values.std(ddof=1):.1f}" if len(values) > 1 else ""
    return f"{values.mean():.1f}{spread}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="demo,r8-1500,r52-lt")
    parser.add_argument("--labelled", default="0.1,0.25")
    parser.add_argument("--budgets", default="50,100,200,400")
    parser.add_argument("--seeds", default="1,2,3,4,5,6")
    parser.add_argument("--model", default="auto")
    parser.add_argument(
        "--data-dir", default=os.environ.get("GLEE_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    )
    parser.add_argument("--work", default=str(ROOT / ".glee" / "bench-pool"))
    parser.add_argument("--peers", action="store_true", help="small-text's strategies beside")
    parser.add_argument(
        "--one-click",
        type=int,
        metavar="SEEDS",
        help="the one-click answer as the learner instead (issue #80 item 3): for the first SEEDS "
        "seeds, at 10%% labelled, 200 texts in rounds of 50 picked by auto and by random, the "
        "quick compare's recommended candidate on them (Home's choice, cross-validated), and "
        "auto's gain over random with it beside the probe's",
    )
    parser.add_argument(
        "--reference",
        help="write each cell's tail-F1 gains over nothing added (auto's and random's, paired "
        "by seed) to this JSON: glee_core/pool/backtest.json is what Home's before/after "
        "reads for what random texts would have been expected to give",
    )
    args = parser.parse_args(argv)
    cells = []  # the reference's cells
    strategies = STRATEGIES + (PEERS if args.peers else ())
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    backbone, device = load_backbone(args.model), resolve_device("cpu")
    pooling = trained_pooling(args.model) or "mean"
    seeds = [int(s) for s in args.seeds.split(",")]
    budgets = [int(b) for b in args.budgets.split(",")]
    if args.one_click:  # a measurement of its own
        one_click_table(args, backbone, device, pooling, work)
        return 0
    header = ["dataset", "labelled", "added", "strategy", "macro-F1", "tail F1", "tail texts found"]
    rows = []
    started = time.perf_counter()
    for name in args.datasets.split(","):
        dataset, bench = backtest_of(name, args, backbone, device, pooling, work)
        auto = resolve_strategy("auto", bool(bench.tail))
        for share in (float(s) for s in args.labelled.split(",")):
            starts = {
                seed: labelled_start(bench.train.labels, share, np.random.default_rng(seed))
                for seed in seeds
            }
            pool = len(bench.train) - np.mean([len(s) for s in starts.values()])
            nothing = [bench.score(bench.fit(starts[seed])) for seed in seeds]
            rows.append(
                [
                    name,
                    f"{share:.0%} ({np.mean([len(s) for s in starts.values()]):.0f};"
                    f" pool {pool:.0f})",
                    "nothing",
                    "-",
                    mean_std([f for f, _ in nothing]),
                    mean_std([t for _, t in nothing]),
                    "-",
                ]
            )
            every = bench.score(bench.fit(np.arange(len(bench.train))))
            rows.append(
                [name, f"{share:.0%}", "every pool text", "-", f"{every[0]:.1f}", f"{every[1]:.1f}"]
                + ["-"]
            )
            heads = [bench.head_f1(bench.fit(starts[seed])) for seed in seeds]
            for decide in (False, True):
                trained = [bench.self_train(starts[seed], decide) for seed in seeds]
                rows.append(
                    [
                        name,
                        f"{share:.0%}",
                        "the pool, unlabelled",
                        "self-training" + (" auto" if decide else " (shares matched)"),
                        mean_std([r[0] for r in trained]),
                        mean_std([r[1] for r in trained]),
                        f"head F1 {mean_std([r[2] for r in trained])} (none added: "
                        f"{mean_std(heads)})"
                        + (
                            f"; kept {sum(r[3] for r in trained)} of {len(trained)}"
                            if decide
                            else ""
                        ),
                    ]
                )
                print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
            for budget in budgets:
                for rounds in (False, True):
                    tails = {}  # strategy -> its tail F1 a seed
                    for strategy in strategies:
                        results = [
                            bench.run(starts[seed], strategy, budget, rounds, seed)
                            for seed in seeds
                        ]
                        tails[strategy] = np.array([r[1] for r in results])
                        if strategy in (auto, "random"):
                            gain = tails[strategy] - np.array([t for _, t in nothing])
                            cells.append(
                                {
                                    "dataset": name,
                                    "labelled": share,
                                    "added": budget,
                                    "rounds": rounds,
                                    "strategy": "auto" if strategy == auto else strategy,
                                    "tail_f1_gain": round(float(gain.mean()), 2),
                                    "spread": round(float(gain.std(ddof=1)), 2),
                                    "seeds": len(seeds),
                                }
                            )
                        label = strategy + (" = auto" if strategy == auto else "")
                        rows.append(
                            [
                                name,
                                f"{share:.0%}",
                                f"{budget}" + (f" in rounds of {ROUND}" if rounds else " at once"),
                                label,
                                mean_std([r[0] for r in results]),
                                mean_std([r[1] for r in results]),
                                mean_std([r[2] for r in results]),
                            ]
                        )
                        print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
                    if args.peers:
                        best = max(PEERS, key=lambda p: tails[p].mean())
                        lead = tails[auto] - tails[best]
                        rows.append(
                            [
                                name,
                                f"{share:.0%}",
                                rows[-1][2],
                                f"auto's lead over {best} (the best peer here), paired",
                                "-",
                                mean_std(list(lead)),
                                "-",
                            ]
                        )
                        print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    print("\n".join(markdown_table(header, rows)))
    if args.reference:
        command = "python bench/pool_backtest.py " + " ".join(argv or sys.argv[1:])
        write_json(
            Path(args.reference),
            {
                "command": command.strip(),
                "measured": time.strftime("%Y-%m-%d"),
                "classifier": "the class-balanced probe on the offline MiniLM's mean-pooled states",
                "auto": resolve_strategy("auto", True),  # what auto stood for: the ratio's
                "cells": cells,
            },
        )
    print(f"\n{len(seeds)} seeds; {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
