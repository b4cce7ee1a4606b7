"""Scoring with a model, below training: what the trainer's dev and test passes and the scorer of
new text share.

The backbone loaded once per process (:func:`get_backbone`), a batch moved to the device
(:func:`batch_to`) and fed to the model (:func:`model_inputs`), and batched, length-sorted
prediction (:func:`predict`). :mod:`glee_core.training` and :mod:`glee_core.inference` /
:mod:`glee_core.export` both import this module; neither scorer imports the trainer.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import torch

from .backbone import Backbone, load_backbone
from .devices import autocast, release_freed_memory, resolve_precision
from .encoding import EncodedSplit, eval_batches
from .features import FeatureSplit
from .heads import GleeModel


@cache
def get_backbone(name: str) -> Backbone:
    """Load a backbone once per process (fine-tuning trains deep copies of it)."""
    return load_backbone(name)


def batch_to(batch: dict, device: torch.device) -> dict:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def model_inputs(batch: dict) -> dict:
    return {k: batch[k] for k in ("input_ids", "attention_mask", "positions", "token_type_ids",
                                  "hidden") if k in batch}


Split = EncodedSplit | FeatureSplit


@torch.inference_mode()
def predict(model: GleeModel, split: Split, pad_id: int, device: torch.device,
            batch_size: int = 128, precision: str = "auto", calibrate: bool = True
            ) -> tuple[np.ndarray, np.ndarray]:
    """Logits (with the method's calibration, η-norm, unless ``calibrate=False``) and
    classifier-input features for every example, in split order. Batches are length-sorted;
    only one batch of activations is alive at a time."""
    model.eval()
    if device.type == "cpu":  # the training steps' freed activations: not on top of ours
        release_freed_memory()
    precision = resolve_precision(precision, device)
    logits = np.zeros((len(split), model.head.class_weights().shape[0]), dtype=np.float32)
    features = None
    for index in eval_batches(split.lengths, batch_size):
        batch = batch_to(split.batch(index, pad_id), device)
        with autocast(device, precision):
            out, feats = model(**model_inputs(batch), calibrate=calibrate)
        logits[index] = out.float().cpu().numpy()
        if features is None:
            features = np.zeros((len(split), feats.shape[-1]), dtype=np.float32)
        features[index] = feats.float().cpu().numpy()
    if features is None:
        features = np.zeros((0, 0), dtype=np.float32)
    return logits, features
