"""Rough wall-time estimates for a planned set of runs (the Train page shows them).

Calibrated on finished runs in the store with the same backbone, mode and device when there are
any (their measured training examples per second, scaled by max length); otherwise from the
backbone's size and a token throughput typical of the device.
"""

from __future__ import annotations

import numpy as np

from .datasets import LongTailDataset
from .store import Run

# Real tokens per second per parameter-count, measured here (MiniLM, 2 CPU cores: ~1,700 tok/s
# with bf16; bert-base on an H100 in bf16: several 100k tok/s). Used without stored runs.
TOKENS_X_PARAMS_PER_S = {"cpu": 4e10, "cuda": 2e13}
# Before any run: importing torch/transformers, loading the data and the backbone, the vocabulary
# check (bench/quick_compare.py and a profile of `train` on 2 CPU cores: 4-6 s imports, 2-5 s
# MiniLM and the check); every launch pays it once. With it, `train --dataset demo --method
# cls-relu --epochs 1` is estimated at 24 s and took 28 s (warm disk cache; 44 s cold).
STARTUP_SECONDS = 10.0


def mean_tokens(dataset: LongTailDataset, max_length: int) -> float:
    """Approximate tokens per example (4 characters a token, capped at max length)."""
    chars = dataset.splits["train"]["text"].str.len() + dataset.splits["train"]["text_b"].str.len()
    return float(np.minimum(chars.mean() / 4 + 10, max_length))


def estimate_seconds(dataset: LongTailDataset, n_runs: int, epochs: int, max_length: int,
                     model_name: str, parameters: int, device: str, mode: str,
                     runs: list[Run] | None = None, limit: int | None = None) -> dict:
    """``{"seconds", "per_run", "basis"}`` for ``n_runs`` runs (upper bound: no early stop);
    ``runs``: finished runs to calibrate on (the store's, as the app already holds them)."""
    n_train = min(limit or len(dataset.splits["train"]), len(dataset.splits["train"]))
    n_eval = len(dataset.splits["dev"]) * epochs + len(dataset.splits["test"])
    tokens = mean_tokens(dataset, max_length)
    rates = []
    for run in runs or []:
        record = run.record
        timing = record.timing
        if (record.model.name == model_name and record.mode == mode
                and timing.get("device", "").split(":")[0] == device
                and timing.get("train_examples_per_second")):
            scale = record.hyperparameters.max_length / max_length
            rates.append(timing["train_examples_per_second"] * scale)
    if mode == "frozen":
        encode_rate = TOKENS_X_PARAMS_PER_S[device] / parameters * 3 / tokens
        per_run = 1.5 + 0.002 * n_train * epochs / 32
        total = (STARTUP_SECONDS + n_runs * per_run
                 + 2 * (n_train + n_eval / max(epochs, 1)) / encode_rate)
        return {"seconds": total, "per_run": per_run,
                "basis": "frozen backbone: one feature pass per input format, then heads only"}
    if rates:
        rate = float(np.median(rates))
        basis = f"median of {len(rates)} finished run(s) with this backbone on {device}"
    else:
        rate = TOKENS_X_PARAMS_PER_S[device] / parameters / tokens
        basis = f"backbone size ({parameters / 1e6:.0f}M parameters) on {device}, no runs yet"
    per_run = n_train * epochs / rate + n_eval / (rate * 4)
    return {"seconds": STARTUP_SECONDS + n_runs * per_run, "per_run": per_run, "basis": basis}
