"""Synthetic finished runs: a store of any number of classes, methods and seeds, in seconds.

For the chart-legibility screenshots (2 to 120 classes, 1 to 16 methods) and the store-scale
benchmark (thousands of runs), where training real runs would take hours. Every file a real run
writes is written, in the same format, through :meth:`RunStore.write`; the metrics are computed
from synthetic predictions with the same functions a real run uses, so they are consistent with
the stored predictions, logits and confusion matrix. The model file is a valid but tiny
safetensors file: a synthetic run cannot score new text. Record notes say "synthetic" so no view
can pass one off as a trained run.
"""

from __future__ import annotations

import zlib

import numpy as np
import pandas as pd
from safetensors.numpy import save_file

from glee_core.core.files import write_json
from glee_core.models.config import TrainConfig
from glee_core.models.methods import get_method
from glee_core.runs.metrics import classification_metrics, shot_f1
from glee_core.runs.record import DatasetRecord, ModelRecord, RunRecord
from glee_core.runs.store import Run, RunStore, make_run_id

SYNTHETIC_NOTE = (
    "synthetic run (tests/helpers/synthetic_runs.py): made-up predictions, not a trained model"
)


HIDDEN = 16  # a synthetic run's hidden size: its features and head are this wide


def zipf_counts(n_classes: int, largest: int = 600, smallest: int = 3) -> dict[str, int]:
    """Training counts falling from ``largest`` to ``smallest`` along a power law, head first."""
    ranks = np.arange(1, n_classes + 1)
    exponent = np.log(largest / smallest) / np.log(max(n_classes, 2))
    counts = np.maximum(smallest, np.round(largest / ranks**exponent)).astype(int)
    width = len(str(n_classes))
    return {f"class {i:0{width}d}": int(c) for i, c in enumerate(counts, 1)}


def synthetic_dataset(
    n_classes: int, name: str | None = None, threshold: float = 0.5
) -> DatasetRecord:
    """A long-tailed dataset record (head: cumulative training share at or under ``threshold``)."""
    counts = zipf_counts(n_classes)
    total = sum(counts.values())
    share = np.cumsum(list(counts.values())) / total
    head = [c for c, s in zip(counts, share, strict=True) if s <= threshold] or [next(iter(counts))]
    tail = [c for c in counts if c not in head]
    test = {c: max(3, n // 5) for c, n in counts.items()}
    return DatasetRecord(
        id=name or f"synthetic-{n_classes}",
        fingerprint=f"synthetic{n_classes}",
        classes=list(counts),
        head_classes=head,
        tail_classes=tail,
        threshold=threshold,
        template="[TEXT] It is about [MASK].",
        verbalizer={c: [c.split()[-1]] for c in counts},
        class_counts=counts,
        sizes={"train": total, "dev": sum(test.values()), "test": sum(test.values())},
    )


def _scores(dataset: DatasetRecord, skill: float, rng: np.random.Generator):
    """A run's test answers and scores: (gold, logits, predictions, metrics, each class's rarity
    in [0, 1]). A right answer's chance falls with rarity, lifted by the method's tail skill."""
    classes, counts = dataset.classes, dataset.class_counts
    n = len(classes)
    test_counts = [max(3, counts[c] // 5) for c in classes]
    gold = np.repeat(np.arange(n), test_counts)
    # chance of a right answer: falls with rarity, lifted by the method's tail skill
    rarity = np.log(np.array([counts[c] for c in classes], float))
    rarity = (rarity - rarity.min()) / max(np.ptp(rarity), 1e-9)
    right = np.clip(0.35 + 0.55 * rarity + skill * (1 - rarity) + rng.normal(0, 0.05, n), 0, 1)
    logits = rng.normal(0, 1, (len(gold), n)).astype(np.float32)
    logits[:, 0] += 0.5  # wrong answers lean to the head
    hit = rng.random(len(gold)) < right[gold]
    logits[np.arange(len(gold)), gold] += np.where(hit, 4.0, -1.0)
    pred = logits.argmax(1)
    metrics = classification_metrics(
        gold, pred, classes, dataset.head_classes, dataset.tail_classes
    )
    metrics.update({f"{k}_f1": v for k, v in shot_f1(metrics["per_class"], counts).items()})
    metrics.update(
        best_epoch=1,
        best_step=1,
        best_dev_f1=metrics["f1"],
        best_dev_acc=metrics["acc"],
        select_metric="f1",
    )
    return gold, logits, pred, metrics, rarity


def _record(dataset: DatasetRecord, method: str, seed: int) -> RunRecord:
    """The record of a synthetic run (its id from what it is made of, as a real run's)."""
    config = TrainConfig(mode="frozen", seed=seed, epochs=3)
    identity = {
        "synthetic": True,
        "method": method,
        "seed": seed,
        "dataset": dataset.id,
        "threshold": dataset.threshold,
    }
    return RunRecord(
        run_id=make_run_id(dataset.id, method, seed, identity),
        dataset=dataset,
        model=ModelRecord(
            name="synthetic",
            source="tests/helpers/synthetic_runs.py",
            family="bert",
            hidden_size=HIDDEN,
            mlm_head_pretrained=True,
        ),
        method=get_method(method),
        seed=seed,
        hyperparameters=config.resolved(128, 32),
        created="2026-01-01T00:00:00+0000",
        notes=[SYNTHETIC_NOTE],
        identity=identity,
    )


def write_synthetic_run(
    store: RunStore,
    dataset: DatasetRecord,
    method: str,
    seed: int,
    skill: float = 0.0,
) -> Run:
    """One finished quick-mode run of ``method`` on ``dataset`` (a backbone of :data:`HIDDEN`
    units). ``skill`` shifts how well it does on the tail (the head is easy for every method,
    the tail harder the rarer the class)."""
    hidden = HIDDEN
    rng = np.random.default_rng(zlib.crc32(f"{dataset.id}|{method}|{seed}".encode()))
    classes, n = dataset.classes, len(dataset.classes)
    gold, logits, pred, metrics, rarity = _scores(dataset, skill, rng)
    norms = np.clip(1.0 + 0.3 * rarity * (1 - skill) + rng.normal(0, 0.03, n), 0.1, None)
    record = _record(dataset, method, seed)
    run_id = record.run_id
    labels_rows = np.concatenate([np.flatnonzero(gold == c)[:64] for c in range(n)])
    features = rng.normal(0, 1, (len(gold), hidden)).astype(np.float32)
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    history = [
        {
            "epoch": e,
            "step": 10 * e,
            "train_loss": 1.0 / e,
            "dev_f1": metrics["f1"],
            "dev_acc": metrics["acc"],
            "eval_seconds": 0.1,
            "seconds": 1.0,
            "weight_norms": [round(float(v) * e / 3, 5) for v in norms],
        }
        for e in (1, 2, 3)
    ]

    def write(folder):
        save_file(
            {"head.weight": rng.normal(0, 1, (n, hidden)).astype(np.float32)},
            str(folder / "model.safetensors"),
        )
        np.save(folder / "logits.npy", logits, allow_pickle=False)
        np.savez(
            folder / "features.npz",
            features=features[labels_rows].astype(np.float16),
            labels=gold[labels_rows],
            rows=labels_rows,
        )
        pd.DataFrame(
            {
                "text": [f"text {i}" for i in range(len(gold))],
                "text_b": "",
                "gold": [classes[i] for i in gold],
                "pred": [classes[i] for i in pred],
                "confidence": probs.max(1).round(6),
                "correct": pred == gold,
            }
        ).to_csv(folder / "predictions.csv", index=False)
        write_json(
            folder / "weight_norms.json", dict(zip(classes, norms.round(5).tolist(), strict=True))
        )
        write_json(folder / "history.json", history)
        write_json(folder / "config.json", record.to_dict())
        write_json(folder / "metrics.json", metrics)

    return store.write(run_id, write)


def write_synthetic_store(
    store: RunStore,
    n_classes: int,
    methods: list[str],
    seeds: list[int] = (1,),
    name: str | None = None,
) -> list[Run]:
    """Runs of every method x seed on one synthetic dataset; later methods in the list get a
    little more tail skill, so the charts have differences to show."""
    dataset = synthetic_dataset(n_classes, name)
    return [
        write_synthetic_run(store, dataset, method, seed, skill=0.3 * i / max(len(methods) - 1, 1))
        for i, method in enumerate(methods)
        for seed in seeds
    ]
