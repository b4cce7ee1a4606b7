"""Quick mode: encode a dataset once with the frozen backbone and cache the hidden states.

The paper's decoupling view is that the long tail bites in the classifier. With the backbone
frozen, every method is a head trained on the same few hidden states: the ``[CLS]`` state of the
plain input (CLS methods) or the ``[MASK]`` state of the template input (prompt methods and
``cls-relu-prompt``). They are cached by each text's content (:class:`FeatureSpace`: one
folder per model + input format + max length + template, ``.npz`` chunks loaded with
``allow_pickle=False``), so every head of the registry trains in seconds, and a version of the
data (``+added-``, ``+pseudo-``, ``+without-``) or the pool encodes only the texts never seen.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ..core.devices import (
    autocast,
    batch_to,
    padded_width,
    resolve_eval_batch_size,
    resolve_pad_multiple,
    resolve_precision,
)
from ..core.errors import GleeError
from ..core.events import FeaturePass, ProgressFn
from ..core.files import check_quota
from ..data.datasets import LongTailDataset
from ..data.encoding import encode, eval_batches
from ..data.splits import stratified_sample
from .backbone import Backbone
from .config import POOLINGS
from .model import encoder_hidden_states, pool


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


@torch.inference_mode()
def compute_states(
    backbone: Backbone,
    split,
    device: torch.device,
    progress: Callable[[int], None] | None = None,
    precision: str = "auto",
) -> dict[str, np.ndarray]:
    """The frozen encoder's states of every example, in one pass (batches the device's size for
    scoring: :func:`~glee_core.core.devices.resolve_eval_batch_size`): ``cls`` at its read
    position (``[CLS]``, or ``[MASK]`` for the template) and ``mean`` over its tokens."""
    model = backbone.model.to(device).eval()
    pad_id = backbone.tokenizer.pad_token_id or 0
    out = {p: np.zeros((len(split), backbone.hidden_size), dtype=np.float32) for p in POOLINGS}
    lengths = split.lengths
    multiple, cap = resolve_pad_multiple(None, device), int(lengths.max()) if len(split) else 0
    for index in eval_batches(lengths, resolve_eval_batch_size(None, device)):
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


# the cache files of a whole pass each, before texts were kept by content: read by nothing now
LEGACY_CACHE = re.compile(r"(plain|prompt|pool-plain|pool-prompt)-[0-9a-f]{16}\.npz")


def text_keys(frame, pairs: bool | None = None) -> np.ndarray:
    """Each row's key in a :class:`FeatureSpace`: a digest of what the encoder reads of it (its
    ``text``, its ``text_b`` and whether its split is read as pairs, which decides how an empty
    ``text_b`` is encoded)."""
    if pairs is None:
        pairs = _pairs(frame)
    second = frame["text_b"].astype(str) if "text_b" in frame else [""] * len(frame)
    return np.array(
        [
            hashlib.blake2b(f"{int(pairs)}\x1f{a}\x1f{b}".encode(), digest_size=16).hexdigest()
            for a, b in zip(frame["text"].astype(str), second, strict=True)
        ],
        dtype="S32",
    )


def _pairs(frame) -> bool:
    return "text_b" in frame and bool(frame["text_b"].astype(bool).any())


class FeatureSpace:
    """The frozen backbone's states of every text it has encoded with one input: the model
    (its fingerprint), the input format, the max length and (for the template) the template.
    Kept by each text's content (:func:`text_keys`) in ``.npz`` chunks, one a pass, each
    written whole (a killed pass leaves none); a damaged chunk is deleted (its texts encoded
    again)."""

    def __init__(self, root: Path, max_length: int | None = None, template: str | None = None):
        self.root = root
        self.max_length, self.template = max_length, template  # what encodes its texts
        self._rows: dict[bytes, tuple[int, int]] | None = None  # key -> (chunk, row)
        self._chunks: list[Path] = []
        self._read: dict[tuple[int, str], np.ndarray] = {}  # a chunk's states, once read
        self._tokens = self._seconds = 0.0

    def _index(self) -> dict[bytes, tuple[int, int]]:
        """Where each key's states are (its keys read from every chunk, not its states)."""
        if self._rows is not None:
            return self._rows
        self._rows, self._chunks, self._read = {}, [], {}
        self._tokens = self._seconds = 0.0
        for chunk in sorted(self.root.glob("*.npz")) if self.root.is_dir() else []:
            try:
                with np.load(chunk, allow_pickle=False) as data:
                    keys = data["keys"].tolist()
                    tokens, seconds = float(data["tokens"]), float(data["seconds"])
            except (OSError, ValueError, KeyError, zipfile.BadZipFile):
                chunk.unlink(missing_ok=True)
                continue
            number = len(self._chunks)
            self._chunks.append(chunk)
            self._rows.update({key: (number, row) for row, key in enumerate(keys)})
            self._tokens, self._seconds = self._tokens + tokens, self._seconds + seconds
        return self._rows

    @property
    def input_format(self) -> str:
        """The input its states read (``plain``, ``prompt``): its folder's name begins with it."""
        return self.root.name.split("-", 1)[0]

    def missing(self, keys: np.ndarray) -> np.ndarray:
        """Which of ``keys`` this space has not encoded (a mask)."""
        rows = self._index()
        return np.array([key not in rows for key in keys.tolist()], dtype=bool)

    @property
    def rate(self) -> float | None:
        """Tokens a second over every pass of this space (None before the first)."""
        self._index()
        return self._tokens / self._seconds if self._seconds else None

    def states(self, keys: np.ndarray, pooling: str, width: int) -> np.ndarray:
        """The states of ``keys`` (all encoded), one row each, in their order (``width``: a
        state's size). Only the chunks that hold them are read (a store's other data stay on
        disk); a chunk damaged since the index was read is deleted and the error says so."""
        rows = self._index()
        out = np.zeros((len(keys), width), dtype=np.float32)
        where = [rows[key] for key in keys.tolist()]
        for number in sorted({chunk for chunk, _ in where}):
            if (number, pooling) not in self._read:
                try:
                    with np.load(self._chunks[number], allow_pickle=False) as data:
                        self._read[number, pooling] = data[pooling]
                except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:
                    self._chunks[number].unlink(missing_ok=True)
                    self._rows = None
                    raise GleeError(
                        f"a cached feature file was damaged while being read "
                        f"({self._chunks[number].name}): it is deleted; run again to encode "
                        "its texts anew"
                    ) from error
            mine = [i for i, (chunk, _) in enumerate(where) if chunk == number]
            out[mine] = self._read[number, pooling][[where[i][1] for i in mine]]
        return out

    def add(self, keys, states: dict[str, np.ndarray], tokens: int, seconds: float, what: str):
        """Keep a pass's states of ``keys`` (within the workspace's quota: ``what`` names them
        in its error), written atomically."""
        arrays = {"keys": keys, **states, "tokens": np.array(tokens), "seconds": np.array(seconds)}
        check_quota(sum(a.nbytes for a in arrays.values()), what)  # before writing
        self.root.mkdir(parents=True, exist_ok=True)
        handle, tmp = tempfile.mkstemp(suffix=".tmp", dir=self.root)
        os.close(handle)
        with open(tmp, "wb") as out:
            np.savez(out, **arrays)
        digest = hashlib.sha256(keys.tobytes()).hexdigest()[:16]
        os.replace(tmp, self.root / f"{digest}.npz")
        self._rows = None
        for old in self.root.parent.glob("*.npz"):  # a pass a file, before content keys
            if LEGACY_CACHE.fullmatch(old.name):
                old.unlink(missing_ok=True)

    def encode_missing(
        self,
        frames: list,
        encoder: Encoder,
        what: str,
        progress: Callable[[int, int], None] | None = None,
    ) -> list[np.ndarray]:
        """Encode the rows of ``frames`` this space lacks (each text once) with ``encoder``, and
        keep them; the keys of each frame's rows (:func:`text_keys`), to read their states with.
        ``progress(done, total)`` as the pass goes."""
        fmt = self.input_format
        todo: dict[bool, list] = {}  # by how the rows' splits read text_b: one pass each
        seen: set[bytes] = set()
        every = []
        for frame in frames:
            pairs = _pairs(frame)
            keys = text_keys(frame, pairs)
            every.append(keys)
            fresh = []  # rows of texts not encoded yet, each text once
            for i, (key, gone) in enumerate(zip(keys.tolist(), self.missing(keys), strict=True)):
                if gone and key not in seen:
                    seen.add(key)
                    fresh.append(i)
            if fresh:
                todo.setdefault(pairs, []).append((frame.iloc[fresh], keys[fresh]))
        total, done = len(seen), 0

        def tick(n: int) -> None:
            nonlocal done
            done += n
            if progress:
                progress(done, total)

        for pairs, parts in todo.items():
            started = time.perf_counter()
            frame = pd.concat([part for part, _ in parts], ignore_index=True)
            keys = np.concatenate([k for _, k in parts])
            tokenizer = encoder.backbone.tokenizer
            split = encode(frame, tokenizer, fmt, self.template, self.max_length, pairs=pairs)
            states = compute_states(encoder.backbone, split, encoder.device, progress=tick)
            seconds = time.perf_counter() - started
            self.add(keys, states, int(split.lengths.sum()), seconds, what)
        return every


def feature_space(
    cache_dir: str | os.PathLike,
    model_fingerprint: str,
    input_format: str,
    max_length: int,
    template: str | None,
) -> FeatureSpace:
    """The :class:`FeatureSpace` of these inputs in ``cache_dir`` (a store's ``.features``)."""
    identity = {
        "model": model_fingerprint,
        "format": input_format,
        "max_length": max_length,
        "template": template if input_format == "prompt" else None,
    }
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    return FeatureSpace(Path(cache_dir) / f"{input_format}-{digest}", max_length, template)


@dataclass(frozen=True)
class FeatureInputs:
    """Which of a dataset's features a head reads: its input format, the length texts are cut
    to, the pooling, and the training texts kept (``limit`` of them, picked by ``strategy``:
    :func:`limited_splits`). Heads of equal inputs share one feature pass."""

    input_format: str
    max_length: int
    pooling: str = "cls"
    limit: int | None = None
    strategy: str = "first"

    @property
    def feature_pass(self) -> tuple:
        """What one feature pass encodes: these inputs but the pooling (a pass keeps both)."""
        return self.input_format, self.max_length, self.limit, self.strategy


@dataclass(frozen=True)
class Encoder:
    """The frozen ``backbone`` encoding on ``device`` and keeping what it encodes in the feature
    cache ``cache_dir`` (a store's ``.features``): every feature pass (training's, the health
    check's, the label budget's, the pool's) goes through one."""

    backbone: Backbone
    device: torch.device
    cache_dir: Path

    def space(self, input_format: str, max_length: int, template: str | None) -> FeatureSpace:
        """Where this backbone's states of these inputs are kept."""
        fingerprint = self.backbone.fingerprint
        return feature_space(self.cache_dir, fingerprint, input_format, max_length, template)


def missing_share(
    cache_dir: str | os.PathLike,
    dataset: LongTailDataset,
    model_fingerprint: str,
    inputs: FeatureInputs,
) -> float:
    """The share of a feature pass over ``dataset`` (its splits as ``inputs`` cut them) still to
    run: its texts ``cache_dir`` has not encoded with these inputs (0: all cached; the estimate
    and the bar read it)."""
    space = feature_space(
        cache_dir, model_fingerprint, inputs.input_format, inputs.max_length, dataset.template
    )
    frames = list(limited_splits(dataset, inputs.limit, inputs.strategy).values())
    total = sum(len(frame) for frame in frames)
    missing = sum(int(space.missing(text_keys(frame)).sum()) for frame in frames)
    return missing / total if total else 0.0


def cached_features(
    dataset: LongTailDataset,
    encoder: Encoder,
    inputs: FeatureInputs,
    progress: ProgressFn | None = None,
) -> dict[str, FeatureSplit]:
    """Pooled hidden states of every split (as ``inputs`` read and cut them): the texts the
    cache holds read from it, the others encoded now (one pass for both poolings) and kept."""
    progress = progress or (lambda event: None)
    fmt = inputs.input_format
    space = encoder.space(fmt, inputs.max_length, dataset.template)
    splits = limited_splits(dataset, inputs.limit, inputs.strategy)
    keys = space.encode_missing(
        list(splits.values()),
        encoder,
        "the cached features",
        lambda done, total: progress(FeaturePass(format=fmt, done=done, total=total)),
    )
    width = encoder.backbone.hidden_size
    return {
        name: FeatureSplit(
            space.states(rows, inputs.pooling, width), frame["label"].to_numpy(), space.rate
        )
        for (name, frame), rows in zip(splits.items(), keys, strict=True)
    }
