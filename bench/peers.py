"""The path most users start from, on the same data, backbone, length and machine: Hugging Face
``Trainer`` with ``AutoModelForSequenceClassification``, random batches and length-grouped ones
(``train_sampling_strategy="group_by_length"``, transformers 5's name for ``group_by_length``).

    python bench/peers.py --dataset r8 --data-dir ../shared/data [--max-length 256]
        [--train-examples 320] [--eval-examples 640] [--model auto]

Times one epoch of training on ``--train-examples`` training texts (batch 32, bf16 where the
CPU has it, as Glee Studio's fast path) and a prediction pass over the first ``--eval-examples``
test texts (batch 128), and, in the same run, Glee Studio's fast path on the same texts
(``bench/train_throughput.py``'s measurement of ``cls-tanh``, in its own process): one table.
The training texts are the sample ``train_throughput.py`` draws (seed 0), so both sides see the
same ones.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import (  # noqa: E402
    AutoModelForSequenceClassification,
    AutoTokenizer,
    DataCollatorWithPadding,
    Trainer,
    TrainingArguments,
)

from bench.train_throughput import training_sample  # noqa: E402
from glee_core.core.devices import resolve_device, resolve_precision  # noqa: E402
from glee_core.data.datasets import load_dataset  # noqa: E402
from glee_core.models.backbone import resolve_model_source  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="r8")
    parser.add_argument("--data-dir")
    parser.add_argument("--model", default="auto")
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--train-examples", type=int, default=320)
    parser.add_argument("--eval-examples", type=int, default=640)
    args = parser.parse_args(argv)
    data = load_dataset(args.dataset, data_dir=args.data_dir)
    path = resolve_model_source(args.model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    device = resolve_device("auto")
    bf16 = resolve_precision("auto", device) == "bf16"

    def tokenized(split: str, n: int) -> Dataset:
        frame = (
            training_sample(data.splits["train"], n, np.random.default_rng(0))
            if split == "train"
            else data.splits[split].iloc[:n]
        )
        encoded = tokenizer(list(frame["text"]), truncation=True, max_length=args.max_length)
        return Dataset.from_dict({**encoded, "labels": frame["label"].tolist()})

    train, test = tokenized("train", args.train_examples), tokenized("test", args.eval_examples)
    print(
        f"{args.dataset}, {args.model}, max length {args.max_length}, {device}, "
        f"{'bf16' if bf16 else 'fp32'}, {torch.get_num_threads()} threads"
    )
    print("| peer | train examples/s | eval examples/s |")
    print("|---|---:|---:|")
    for group in (False, True):
        torch.manual_seed(1)
        model = AutoModelForSequenceClassification.from_pretrained(
            path, num_labels=data.num_classes
        )
        with tempfile.TemporaryDirectory() as out:
            trainer = Trainer(
                model=model,
                data_collator=DataCollatorWithPadding(tokenizer),
                train_dataset=train,
                args=TrainingArguments(
                    output_dir=out,
                    per_device_train_batch_size=32,
                    per_device_eval_batch_size=128,
                    num_train_epochs=1,
                    learning_rate=1e-5,
                    bf16=bf16,
                    report_to=[],
                    save_strategy="no",
                    train_sampling_strategy="group_by_length" if group else "random",
                    logging_strategy="no",
                    use_cpu=device.type == "cpu",
                    dataloader_num_workers=0,
                    disable_tqdm=True,
                ),
            )
            started = time.perf_counter()
            trainer.train()
            train_rate = len(train) / (time.perf_counter() - started)
            started = time.perf_counter()
            trainer.predict(test)
            eval_rate = len(test) / (time.perf_counter() - started)
        sampling = "length-grouped" if group else "random"
        print(
            f"| HF Trainer, {sampling} batches | {train_rate:.2f} | {eval_rate:.1f} |", flush=True
        )
    ours = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).with_name("train_throughput.py")),
            "--one",
            "cls-tanh",
            "fast",
            "--dataset",
            args.dataset,
            "--model",
            args.model,
            "--max-length",
            str(args.max_length),
            "--train-examples",
            str(args.train_examples),
            "--eval-examples",
            str(args.eval_examples),
            *(["--data-dir", args.data_dir] if args.data_dir else []),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    fast = json.loads(ours.stdout.strip().splitlines()[-1])
    print(
        f"| Glee Studio fast path, `cls-tanh` | {fast['train_examples_per_s']:.2f} | "
        f"{fast['eval_examples_per_s']:.1f} |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
