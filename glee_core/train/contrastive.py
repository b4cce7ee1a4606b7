"""The supervised contrastive term a fine-tune may add (``--supcon W``: Khosla et al. 2020;
Gunel et al. 2021 for fine-tuning LMs). The training loop (:mod:`glee_core.train.loop`) adds it,
over class-balanced batches where a class is too rare for pairs
(:func:`glee_core.data.encoding.rare_for_pairs`)."""

from __future__ import annotations

import torch

from ..models.config import SUPCON_TEMPERATURE


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
