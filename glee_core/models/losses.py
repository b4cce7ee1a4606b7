"""The losses a method spec names (``MethodSpec.loss``: the paper's cross-entropy and focal
loss, and the long-tail fixes beyond it) and η-norm's calibration of the logits."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from .methods import ETA, MethodSpec, eta_scale

FOCAL_GAMMA = 1.0  # the paper's gamma


# --------------------------------------------------------------------------------------------
# Losses and calibration


def focal_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    counts: torch.Tensor | None = None,
    gamma: float = FOCAL_GAMMA,
) -> torch.Tensor:
    """Mean of ``-(1 - p_t) ** gamma * log p_t`` (Lin et al., 2017)."""
    log_p = F.log_softmax(logits.float(), dim=-1).gather(1, labels[:, None]).squeeze(1)
    return (-((1.0 - log_p.exp()) ** gamma) * log_p).mean()


def cross_entropy(
    logits: torch.Tensor, labels: torch.Tensor, counts: torch.Tensor | None = None
) -> torch.Tensor:
    return F.cross_entropy(logits.float(), labels)


LA_TAU = 1.0  # logit-adjusted loss, Menon et al. 2021's default
CB_BETA = 0.9999  # class-balanced loss, Cui et al. 2019's choice for long tails


def logit_adjusted_loss(
    logits: torch.Tensor, labels: torch.Tensor, counts: torch.Tensor, tau: float = LA_TAU
) -> torch.Tensor:
    """Menon et al., "Long-tail learning via logit adjustment" (ICLR 2021): cross-entropy of
    ``logits + tau * log(prior)``; at test time the plain logits are used."""
    prior = counts.float() / counts.sum()
    return F.cross_entropy(logits.float() + tau * torch.log(prior.clamp_min(1e-12)), labels)


def class_balanced_loss(
    logits: torch.Tensor, labels: torch.Tensor, counts: torch.Tensor, beta: float = CB_BETA
) -> torch.Tensor:
    """Cui et al., "Class-balanced loss based on effective number of samples" (CVPR 2019):
    cross-entropy weighted per class by ``(1 - beta) / (1 - beta ** n_c)``, normalised to sum to
    the number of classes."""
    return F.cross_entropy(logits.float(), labels, weight=class_balanced_weights(counts, beta))


def class_balanced_weights(counts: torch.Tensor, beta: float = CB_BETA) -> torch.Tensor:
    """Cui et al.'s per-class weights, ``(1 - beta) / (1 - beta ** n_c)`` summing to C."""
    effective = (1.0 - beta ** counts.double()).clamp_min(1e-12)
    weight = (1.0 - beta) / effective
    return (weight / weight.sum() * len(counts)).float()


# MethodSpec.loss -> loss function (logits, labels, training class counts)
LOSSES = {
    "ce": cross_entropy,
    "focal": focal_loss,
    "la": logit_adjusted_loss,
    "cb": class_balanced_loss,
}


def classification_loss(
    spec: MethodSpec, logits: torch.Tensor, labels: torch.Tensor, counts: torch.Tensor | None = None
) -> torch.Tensor:
    """The method's loss; ``counts`` (training examples per class) for the long-tail losses."""
    return LOSSES[spec.loss](logits, labels, counts)


def loss_share(
    spec: MethodSpec, part: torch.Tensor, whole: torch.Tensor, counts: torch.Tensor | None = None
) -> float:
    """The weight of a piece's mean loss in its batch's mean loss (micro-batching): its share of
    the examples, or for the class-balanced loss (a weighted mean) its share of the weights."""
    if spec.loss == "cb":
        weight = class_balanced_weights(counts).to(part.device)
        return float(weight[part].sum() / weight[whole].sum())
    return len(part) / len(whole)


def eta_normalise(
    logits: torch.Tensor, class_weight_norms: torch.Tensor, eta: float = ETA
) -> torch.Tensor:
    """η-norm calibration: logits of class c divided by :func:`~.methods.eta_scale` (the norms
    in the logits' precision)."""
    return logits / eta_scale(class_weight_norms.to(logits.dtype), eta)
