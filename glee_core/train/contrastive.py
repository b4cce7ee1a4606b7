"""The supervised contrastive term a fine-tune may add (``--supcon W``: Khosla et al. 2020;
Gunel et al. 2021 for fine-tuning LMs) and the class-balanced batches it draws where a class is
too rare for pairs (also cRT's sampling). The training loop (:mod:`glee_core.train.loop`) reads
them."""

from __future__ import annotations

import numpy as np
import torch

from ..models.config import SUPCON_TEMPERATURE


def class_balanced_batches(
    labels: np.ndarray, batch_size: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """An epoch of as many examples as the split, drawn with replacement so that every class is
    equally likely (Kang et al. 2020's class-balanced sampling)."""
    counts = np.bincount(labels)
    weights = 1.0 / counts[labels]
    order = rng.choice(len(labels), size=len(labels), replace=True, p=weights / weights.sum())
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def supervised_contrastive(
    features: torch.Tensor, labels: torch.Tensor, temperature: float = SUPCON_TEMPERATURE
) -> torch.Tensor:
    """Khosla et al. 2020's supervised contrastive loss over a batch: each text is drawn toward
    the other texts of its class and away from the rest (cosine similarity over
    ``temperature``); a text without another of its class in the batch adds nothing. Zero when
    no text has a partner."""
    z = torch.nn.functional.normalize(features.float(), dim=-1)
    similarity = z @ z.T / temperature
    self_mask = torch.eye(len(labels), dtype=torch.bool, device=z.device)
    similarity = similarity.masked_fill(self_mask, float("-inf"))
    log_prob = similarity - torch.logsumexp(similarity, dim=1, keepdim=True)
    positives = (labels[:, None] == labels[None, :]) & ~self_mask
    counts = positives.sum(1)
    anchors = counts > 0
    if not anchors.any():
        return features.sum() * 0.0
    mean_log_prob = log_prob.masked_fill(~positives, 0.0).sum(1)[anchors] / counts[anchors]
    return -mean_log_prob.mean()


def rare_for_pairs(labels: np.ndarray, batch_size: int) -> bool:
    """Is some class so rare that a batch drawn at random seldom holds two of its texts (fewer
    than 2 expected)? Then a contrastive term draws its batches class-balanced."""
    counts = np.bincount(labels)
    counts = counts[counts > 0]
    return bool(counts.min() / counts.sum() * batch_size < 2)
