"""The released implementation's training and evaluation strategy, kept beside the benchmark
(as nanoGPT keeps ``bench.py`` beside ``train.py``) and checked against the fast path by
``tests/test_bench_reference.py``.

What the authors' code does (github.com/GeneZC/Glee) and Glee Studio does not: every batch is
padded to max length, shuffled without grouping by length, run in fp32, and a prompt method
computes the MLM head's logits over the whole vocabulary at every position before taking the
``[MASK]`` row and the label-word columns.
"""

from __future__ import annotations

import numpy as np
import torch

from glee_core.core.devices import batch_to
from glee_core.data.encoding import EncodedSplit
from glee_core.models.heads import PromptHead
from glee_core.models.losses import classification_loss
from glee_core.models.model import GleeModel, encoder_hidden_states
from glee_core.models.scoring import model_inputs
from glee_core.train.step import TrainingState, optimizer_step


def full_vocabulary_logits(model: GleeModel, batch: dict) -> tuple[torch.Tensor, None]:
    """Logits the straightforward way. Prompt heads: the MLM head over every position and the
    whole vocabulary, then the ``[MASK]`` row and the label-word columns (averaged per class);
    CLS heads read ``[CLS]`` as the fast path does. Calibration (η-norm) as at evaluation."""
    inputs = model_inputs(batch)
    head = model.head
    if not isinstance(head, PromptHead):
        return model(**inputs, calibrate=True)[0], None
    hidden_all = encoder_hidden_states(
        model.mlm,
        inputs["input_ids"],
        inputs["attention_mask"],
        inputs.get("token_type_ids") if model.pass_token_type_ids else None,
    )
    features = head.transform(hidden_all)  # (B, L, h)
    if head.own_weights:
        vocab_logits = features @ head.token_rows().T + head.token_bias()  # (B, L, T)
        columns = slice(None)
    else:
        vocab_logits = head.decoder(features)  # (B, L, V)
        columns = head.label_token_ids
    positions = inputs["positions"]
    at_mask = vocab_logits[torch.arange(len(positions), device=positions.device), positions]
    return at_mask[:, columns] @ head.averaging.T, None


def train_one_epoch(state: TrainingState, train: EncodedSplit, max_length: int) -> float:
    """One fp32 pass over shuffled batches padded to ``max_length``; returns the mean loss."""
    config, device = state.config, state.device
    state.model.train()
    order = state.rng.permutation(len(train))
    losses = []
    for start in range(0, len(order), config.batch_size):
        batch = batch_to(
            train.batch(order[start : start + config.batch_size], state.pad_id, max_length), device
        )
        logits, _ = full_vocabulary_logits(state.model, batch)
        loss = classification_loss(state.spec, logits, batch["labels"], state.class_counts)
        optimizer_step(state, loss)
        losses.append(float(loss.detach()))  # the released loop reads the loss back every step
    return float(np.mean(losses))


@torch.inference_mode()
def predict(
    model: GleeModel,
    split: EncodedSplit,
    pad_id: int,
    device: torch.device,
    max_length: int,
    batch_size: int = 128,
) -> np.ndarray:
    """Logits for every example in split order, batches in order and padded to ``max_length``."""
    model.eval()
    out = []
    for start in range(0, len(split), batch_size):
        index = np.arange(start, min(start + batch_size, len(split)))
        logits, _ = full_vocabulary_logits(
            model, batch_to(split.batch(index, pad_id, max_length), device)
        )
        out.append(logits.float().cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, 0), dtype=np.float32)
