"""SetFit beside Glee Studio on a long-tailed set: wall time, accuracy, macro / head / tail F1.

    pip install -e ".[bench]"          # setfit 1.2
    python bench/setfit_peer.py [--dataset demo] [--data-dir DIR] [--model auto]
        [--num-iterations 2] [--per-class 8] [--finetune-methods cls-relu-pt-ln,cls-tanh]
        [--skip quick,finetune,setfit-all,setfit-sampled]

One process, one after the other, on the same data, backbone, max length and machine:

1. Glee Studio's quick compare: every head on the frozen backbone (``--mode frozen --method
   all``); the row shows the head with the best *dev* macro-F1 (test never picks) and the wall
   time of the whole compare.
2. Glee Studio fine-tuning ``--finetune-methods`` (the defaults of ``train``: 10 epochs, the
   paper's early stopping); the best on dev, and the wall time of all of them.
3. SetFit (contrastive fine-tuning of the sentence-transformer body on pairs of training texts,
   then a logistic-regression head) on every training text, ``--num-iterations`` pair rounds,
   batch 16, one epoch, the dataset's max length.
4. SetFit's few-shot recipe: at most ``--per-class`` training texts a class (``sample_dataset``),
   which also balances the classes, ``--num-iterations-sampled`` rounds (default 20, SetFit's
   own).

Every row is scored by the same function
(``glee_core.runs.metrics.classification_metrics``) with the dataset's head / tail classes.
SetFit needs a sentence-transformers model: ``auto`` is one (all-MiniLM-L6-v2 with its mean
pooling); for a plain masked LM SetFit adds mean pooling itself.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from datasets import Dataset  # noqa: E402

try:
    from setfit import SetFitModel, Trainer, TrainingArguments, sample_dataset
except ImportError:
    raise SystemExit('bench/setfit_peer.py needs SetFit: pip install -e ".[bench]"') from None

from glee_core.data.datasets import LongTailDataset, load_dataset  # noqa: E402
from glee_core.models.backbone import resolve_model_source  # noqa: E402
from glee_core.models.config import TrainConfig  # noqa: E402
from glee_core.models.methods import parse_methods  # noqa: E402
from glee_core.runs.metrics import classification_metrics  # noqa: E402
from glee_core.runs.store import RunStore  # noqa: E402
from glee_core.train.experiment import run_launch  # noqa: E402
from glee_core.train.launch import Launch  # noqa: E402

ROWS = ("quick", "finetune", "setfit-all", "setfit-sampled")


def scores(dataset: LongTailDataset, pred) -> dict:
    gold = dataset.splits["test"]["label"].to_numpy()
    head, tail = dataset.head_tail()
    return classification_metrics(gold, np.asarray(pred), dataset.classes, head, tail)


def best_on_dev(
    dataset, methods, model: str, config: TrainConfig, store: RunStore, seed: int
) -> tuple[str, dict, float]:
    """Train ``methods`` (one seed); the method with the best dev macro-F1, its test scores
    and the wall time of training them all."""
    started = time.perf_counter()
    runs = run_launch(Launch(dataset, methods, [seed], model, config, store))
    seconds = time.perf_counter() - started
    best = max(runs, key=lambda run: run.metrics.best_dev_f1)
    return best.record.method.id, best.metrics, seconds


def setfit_row(
    dataset: LongTailDataset,
    model_path: str,
    *,
    iterations: int,
    per_class: int | None,
    seed: int,
    max_length: int,
) -> tuple[dict, float, int]:
    started = time.perf_counter()
    train = dataset.splits["train"]
    data = Dataset.from_dict({"text": list(train["text"]), "label": train["label"].tolist()})
    if per_class:
        data = sample_dataset(data, num_samples=per_class, seed=seed)
    model = SetFitModel.from_pretrained(model_path)
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(
            output_dir=out,
            batch_size=16,
            num_epochs=1,
            num_iterations=iterations,
            max_length=max_length,
            seed=seed,
            report_to="none",
            save_strategy="no",
            logging_strategy="no",
        )
        Trainer(model=model, args=args, train_dataset=data).train()
    pred = model.predict(
        list(dataset.splits["test"]["text"]), batch_size=128, show_progress_bar=False
    )
    return scores(dataset, pred), time.perf_counter() - started, len(data)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="demo")
    parser.add_argument("--data-dir")
    parser.add_argument("--model", default="auto")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--num-iterations",
        type=int,
        default=2,
        help="SetFit pair rounds on every training text (its default is 20)",
    )
    parser.add_argument("--per-class", type=int, default=8)
    parser.add_argument("--num-iterations-sampled", type=int, default=20)
    parser.add_argument("--finetune-methods", default="cls-relu-pt-ln,cls-tanh")
    parser.add_argument("--skip", default="", help=f"comma-separated, of {', '.join(ROWS)}")
    args = parser.parse_args(argv)
    skip = {name for name in args.skip.split(",") if name}
    if skip - set(ROWS):
        parser.error(f"--skip takes {', '.join(ROWS)}")
    dataset = load_dataset(args.dataset, data_dir=args.data_dir)
    model_path = str(resolve_model_source(args.model))
    max_length = dataset.max_length
    rows = []

    def row(name: str, seconds: float, metrics: dict, texts: int) -> None:
        rows.append((name, seconds, texts, metrics))
        print(f"  done: {name} in {seconds:.1f} s", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore(Path(tmp) / "runs")
        n_train = len(dataset.splits["train"])
        if "quick" not in skip:
            method, metrics, seconds = best_on_dev(
                dataset,
                parse_methods("all", "frozen"),
                args.model,
                TrainConfig(mode="frozen"),
                store,
                args.seed,
            )
            row(
                f"Glee Studio quick compare (all heads, frozen), best on dev: `{method}`",
                seconds,
                metrics,
                n_train,
            )
        if "finetune" not in skip:
            method, metrics, seconds = best_on_dev(
                dataset,
                parse_methods(args.finetune_methods, "finetune"),
                args.model,
                TrainConfig(),
                store,
                args.seed,
            )
            row(
                f"Glee Studio fine-tuned ({args.finetune_methods}), best on dev: `{method}`",
                seconds,
                metrics,
                n_train,
            )
    if "setfit-all" not in skip:
        metrics, seconds, texts = setfit_row(
            dataset,
            model_path,
            iterations=args.num_iterations,
            per_class=None,
            seed=args.seed,
            max_length=max_length,
        )
        row(
            f"SetFit, every training text, {args.num_iterations} pair rounds",
            seconds,
            metrics,
            texts,
        )
    if "setfit-sampled" not in skip:
        metrics, seconds, texts = setfit_row(
            dataset,
            model_path,
            iterations=args.num_iterations_sampled,
            per_class=args.per_class,
            seed=args.seed,
            max_length=max_length,
        )
        row(
            f"SetFit, ≤ {args.per_class} texts a class, {args.num_iterations_sampled} pair rounds",
            seconds,
            metrics,
            texts,
        )

    head, tail = dataset.head_tail()
    print(
        f"\n{args.dataset}: {n_train} training texts, {dataset.num_classes} classes "
        f"({len(head)} head, {len(tail)} tail), {len(dataset.splits['test'])} test texts, "
        f"model {args.model}, max length {max_length}, seed {args.seed}"
    )
    print("| path | training texts | wall s | acc | macro-F1 | head F1 | tail F1 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, seconds, texts, m in rows:
        print(
            f"| {name} | {texts} | {seconds:.0f} | {100 * m['acc']:.1f} | {100 * m['f1']:.1f} "
            f"| {100 * m['head_f1']:.1f} | {100 * m['tail_f1']:.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
