"""Quick mode: encode a dataset once with the frozen backbone and cache the hidden states.

The paper's decoupling view is that the long tail bites in the classifier. With the backbone
frozen, every method is a head trained on the same few hidden states: the ``[CLS]`` state of the
plain input (CLS methods) or the ``[MASK]`` state of the template input (prompt methods and
``cls-relu-prompt``). They are computed once per dataset + model + input format + max length and
cached as ``.npz`` (loaded with ``allow_pickle=False``), so every head of the registry trains in
seconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..core.devices import (
    autocast,
    batch_to,
    padded_width,
    resolve_eval_batch_size,
    resolve_pad_multiple,
    resolve_precision,
)
from ..core.events import FeaturePass, ProgressFn
from ..core.files import check_quota
from ..data.datasets import LongTailDataset
from ..data.encoding import encode, eval_batches
from ..data.splits import stratified_sample
from .backbone import Backbone
from .config import POOLINGS
from .model import encoder_hidden_states, pool

__all__ = [  # what this module offers
    "FeatureSplit",
    "cached_features",
    "compute_hidden",
    "compute_states",
    "feature_file",
    "feature_key",
    "limited_splits",
    "read_cache",
    "write_cache",
]


@dataclass
class FeatureSplit:
    """Cached hidden states of one split; batches are ``{"hidden", "labels"}``."""

    hidden: np.ndarray
    labels: np.ndarray
    # real tokens a second of the feature pass that made these states (None: a cache file of
    # before it was recorded); the Train and Home estimates read it off frozen runs
    pass_tokens_per_second: float | None = None

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def lengths(self) -> np.ndarray:
        return np.ones(len(self), dtype=np.int64)

    def subset(self, index) -> FeatureSplit:
        index = np.asarray(list(index), dtype=np.int64)
        return FeatureSplit(self.hidden[index], self.labels[index], self.pass_tokens_per_second)

    def batch(self, index, pad_id: int = 0, pad_to: int | None = None) -> dict[str, torch.Tensor]:
        index = np.asarray(index)
        return {
            "hidden": torch.from_numpy(self.hidden[index]),
            "labels": torch.from_numpy(self.labels[index]),
        }


def feature_key(
    dataset: LongTailDataset,
    model_fingerprint: str,
    input_format: str,
    max_length: int,
    limit: int | None = None,
    strategy: str = "first",
) -> str:
    """The name of a feature pass's cache file (without ``.npz``): what the pass encoded, with
    which model (``Backbone.fingerprint``, ``backbone.model_fingerprint``)."""
    identity = {
        "dataset": dataset.fingerprint(),
        "model": model_fingerprint,
        "format": input_format,
        "max_length": max_length,
        "template": dataset.template if input_format == "prompt" else None,
    }
    if limit:  # a limited pass holds only ``limit`` training examples
        identity["train_limit"] = limit
        if strategy != "first":
            identity["limit_strategy"] = strategy
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    return f"{input_format}-{digest}"


@torch.inference_mode()
def compute_states(
    backbone: Backbone,
    split,
    device: torch.device,
    batch_size: int | None = None,
    progress: Callable[[int], None] | None = None,
    precision: str = "auto",
) -> dict[str, np.ndarray]:
    """The frozen encoder's states of every example, in one pass: ``cls`` at its read position
    (``[CLS]``, or ``[MASK]`` for the template) and ``mean`` over its tokens."""
    model = backbone.model.to(device).eval()
    pad_id = backbone.tokenizer.pad_token_id or 0
    out = {p: np.zeros((len(split), backbone.hidden_size), dtype=np.float32) for p in POOLINGS}
    lengths = split.lengths
    multiple, cap = resolve_pad_multiple(None, device), int(lengths.max()) if len(split) else 0
    for index in eval_batches(lengths, resolve_eval_batch_size(batch_size, device)):
        width = padded_width(int(lengths[index].max()), multiple, cap)
        batch = batch_to(split.batch(index, pad_id, width), device)
        with autocast(device, resolve_precision(precision, device)):
            states = encoder_hidden_states(
                model,
                batch["input_ids"],
                batch["attention_mask"],
                batch.get("token_type_ids") if backbone.uses_token_type_ids else None,
            )
            for pooling in POOLINGS:
                pooled = pool(states, batch["attention_mask"], batch["positions"], pooling)
                out[pooling][index] = pooled.float().cpu().numpy()
        if progress:
            progress(len(index))
    return out


def compute_hidden(
    backbone: Backbone, split, device: torch.device, pooling: str = "cls", precision: str = "auto"
) -> np.ndarray:
    """The frozen encoder's pooled state of every example (see :func:`compute_states`)."""
    return compute_states(backbone, split, device, precision=precision)[pooling]


def limited_splits(dataset: LongTailDataset, limit: int | None, strategy: str = "first") -> dict:
    """The dataset's split frames, the training one cut to ``limit`` rows (``--limit``: what is
    not trained on is not encoded either): a stratified sample, or its first rows."""
    splits = dict(dataset.splits)
    if limit:
        train = splits["train"]
        splits["train"] = (
            stratified_sample(train, limit) if strategy == "stratified" else train.iloc[:limit]
        )
    return splits


def feature_file(
    cache_dir: str | os.PathLike,
    dataset: LongTailDataset,
    model_fingerprint: str,
    input_format: str,
    max_length: int,
    limit: int | None = None,
    strategy: str = "first",
) -> Path:
    """Where a feature pass of these inputs is cached (:func:`feature_key` ``.npz`` in
    ``cache_dir``): :func:`cached_features` reads and writes it, the app's estimate asks whether
    it is there."""
    return Path(cache_dir) / (
        feature_key(dataset, model_fingerprint, input_format, max_length, limit, strategy) + ".npz"
    )


def read_cache(path: Path, read: Callable):
    """``read(data)`` of the cached arrays at ``path`` (an ``.npz``), or None when there is no
    cache there; a damaged one (truncated, a missing array) is deleted: computed again."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            return read(data)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):
        path.unlink(missing_ok=True)
        return None


def write_cache(path: Path, arrays: dict[str, np.ndarray], what: str) -> None:
    """Cache ``arrays`` at ``path``, within the workspace's quota (``what`` names them in its
    error), atomically: a killed pass leaves no half-written cache."""
    check_quota(sum(a.nbytes for a in arrays.values()), what)  # before writing
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(suffix=".npz", dir=path.parent)
    os.close(handle)
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


def cached_features(
    dataset: LongTailDataset,
    backbone: Backbone,
    input_format: str,
    max_length: int,
    cache_dir: str | os.PathLike,
    device: torch.device,
    progress: ProgressFn | None = None,
    pooling: str = "cls",
    limit: int | None = None,
    strategy: str = "first",
) -> dict[str, FeatureSplit]:
    """Pooled hidden states of every split, from the cache or computed (and cached) now; one
    pass caches both poolings. ``limit`` encodes only N training examples, picked by
    ``strategy`` (:func:`limited_splits`)."""
    progress = progress or (lambda event: None)
    cache_dir = Path(cache_dir)
    path = feature_file(
        cache_dir, dataset, backbone.fingerprint, input_format, max_length, limit, strategy
    )

    def read(data) -> dict[str, FeatureSplit]:
        rate = float(data["pass_tokens_per_second"]) if "pass_tokens_per_second" in data else None
        return {
            name: FeatureSplit(data[f"{name}_{pooling}"], data[f"{name}_labels"], rate)
            for name in dataset.splits
        }

    if (found := read_cache(path, read)) is not None:
        return found
    started = time.perf_counter()
    encoded = {
        name: encode(frame, backbone.tokenizer, input_format, dataset.template, max_length)
        for name, frame in limited_splits(dataset, limit, strategy).items()
    }
    total, done = sum(len(s) for s in encoded.values()), 0
    tokens = sum(int(split.lengths.sum()) for split in encoded.values())
    arrays = {}
    for name, split in encoded.items():

        def tick(n, name=name):
            nonlocal done
            done += n
            progress(FeaturePass(format=input_format, done=done, total=total))

        for key, states in compute_states(backbone, split, device, progress=tick).items():
            arrays[f"{name}_{key}"] = states
        arrays[f"{name}_labels"] = split.labels
    rate = tokens / max(time.perf_counter() - started, 1e-9)
    arrays["pass_tokens_per_second"] = np.array(rate)
    write_cache(path, arrays, "the cached features")
    return {
        name: FeatureSplit(arrays[f"{name}_{pooling}"], arrays[f"{name}_labels"], rate)
        for name in dataset.splits
    }
