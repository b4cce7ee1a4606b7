"""Scoring with a model, below training: what the trainer's dev and test passes and the scorer of
new text share.

The backbone loaded once per process (:func:`get_backbone`), a batch moved to the device
(:func:`batch_to`) and fed to the model (:func:`model_inputs`), and batched, length-sorted
prediction (:func:`predict`). :mod:`glee_core.train.training` and :mod:`glee_core.serve.inference` /
:mod:`glee_core.serve.export` both import this module; neither scorer imports the trainer.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
import torch

from ..core.devices import (
    autocast,
    batch_to,
    padded_width,
    release_freed_memory,
    resolve_eval_batch_size,
    resolve_pad_multiple,
    resolve_precision,
)
from ..core.errors import GleeError, first_few
from ..data.encoding import (
    EncodedSplit,
    check_label_tokens,
    check_template_fits,
    eval_batches,
)
from .backbone import Backbone, load_backbone, load_tokenizer
from .features import FeatureSplit
from .heads import label_word_ids, unreadable_label_words
from .model import GleeModel


@cache
def get_backbone(name: str) -> Backbone:
    """Load a backbone once per process (fine-tuning trains deep copies of it)."""
    return load_backbone(name)


@cache
def get_tokenizer(name: str):
    """A backbone's tokenizer once per process, without its weights."""
    return load_tokenizer(name)


def unreadable_words(
    model_name: str, verbalizer: dict[str, list[str]], classes: list[str]
) -> list[str]:
    """The label words ``model_name``'s vocabulary cannot read, as ``'class' -> 'word'`` (the
    tokenizer alone is loaded): the heads that score label words cannot train on them."""
    return unreadable_label_words(get_tokenizer(model_name), verbalizer, classes)


def check_prompt(
    model_name: str,
    template: str,
    verbalizer: dict[str, list[str]],
    classes: list[str],
    max_length: int,
) -> None:
    """Everything a template and label words must pass on ``model_name``'s tokenizer (the
    tokenizer alone is loaded) before they are kept or scored: words its vocabulary reads, a
    class's words in a few tokens, a template that leaves the text room within
    ``max_length``. Raises GleeError naming what to change."""
    tokenizer = get_tokenizer(model_name)
    ids, unreadable = label_word_ids(tokenizer, verbalizer, classes)
    if unreadable:
        raise GleeError(
            f"`{model_name}` cannot read {first_few(unreadable, 10)}: give words its "
            "vocabulary holds (the heads that score label words cannot train on "
            "these)"
        )
    check_label_tokens(dict(zip(classes, ids, strict=True)))
    check_template_fits(tokenizer, template, max_length)


def batch_width(split: Split, index, multiple: int, cap: int) -> int | None:
    """How wide the batch of ``index`` is padded (None: to its own longest text; cached
    features have no width)."""
    if multiple <= 1 or not isinstance(split, EncodedSplit):
        return None
    return padded_width(max(len(split.input_ids[i]) for i in index), multiple, cap)


def model_inputs(batch: dict) -> dict:
    return {
        k: batch[k]
        for k in ("input_ids", "attention_mask", "positions", "token_type_ids", "hidden")
        if k in batch
    }


Split = EncodedSplit | FeatureSplit


@dataclass(frozen=True)
class Scoring:
    """How a split is scored: the token id its batches pad with (the tokenizer's), the batch
    size (None: the device's, :func:`resolve_eval_batch_size`), the precision and the padding
    multiple (None: the device's, :func:`resolve_pad_multiple`)."""

    pad_id: int = 0
    batch_size: int | None = None
    precision: str = "auto"
    pad_multiple: int | None = None

    @classmethod
    def of(cls, pad_id: int, config) -> Scoring:
        """As a run of ``config`` (a ``TrainConfig``) scores its dev and test splits."""
        return cls(pad_id, config.eval_batch_size, config.precision, config.pad_multiple)


@torch.inference_mode()
def predict(
    model: GleeModel,
    split: Split,
    device: torch.device,
    scoring: Scoring = Scoring(),
    calibrate: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Logits (with the method's calibration, η-norm, unless ``calibrate=False``) and
    classifier-input features for every example, in split order, scored as ``scoring`` says.
    Batches are length-sorted (on a GPU padded to a few widths, see
    :func:`resolve_pad_multiple`); only one batch of activations is alive at a time, and the
    outputs are copied back once, at the end."""
    pad_id = scoring.pad_id
    model.eval()
    if device.type == "cpu" and isinstance(split, EncodedSplit):
        release_freed_memory()  # the training steps' freed activations: not under the encoder's
    precision = resolve_precision(scoring.precision, device)
    multiple = resolve_pad_multiple(scoring.pad_multiple, device)
    batch_size = resolve_eval_batch_size(scoring.batch_size, device)
    cap = int(split.lengths.max()) if len(split) else 0
    order, outs, feats_out = [], [], []
    for index in eval_batches(split.lengths, batch_size):
        batch = batch_to(
            split.batch(index, pad_id, batch_width(split, index, multiple, cap)), device
        )
        with autocast(device, precision):
            out, feats = model(**model_inputs(batch), calibrate=calibrate)
        order.append(index)
        outs.append(out.float())
        feats_out.append(feats.float())
    if not order:
        return (
            np.zeros((0, model.head.class_weights().shape[0]), dtype=np.float32),
            np.zeros((0, 0), dtype=np.float32),
        )
    index = np.concatenate(order)
    logits = np.zeros((len(split), outs[0].shape[-1]), dtype=np.float32)
    features = np.zeros((len(split), feats_out[0].shape[-1]), dtype=np.float32)
    logits[index] = torch.cat(outs).cpu().numpy()
    features[index] = torch.cat(feats_out).cpu().numpy()
    return logits, features
