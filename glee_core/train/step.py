"""One optimizer step of the training loop (``train.loop``): the state a run trains with
(:class:`TrainingState`: the model, optimiser, schedule, batch order, the moving average of the
weights), one epoch's batches (length-grouped, or class-balanced), a batch's loss (in pieces of
like length on a CPU, in micro-batches where asked, the recipe's extra terms added) and the step
that applies it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from ..core.devices import (
    autocast,
    batch_to,
    clipped_step,
    grad_scaler,
    resolve_pad_multiple,
    resolve_precision,
    scaled_backward,
)
from ..core.distributed import DataParallel
from ..core.errors import GleeError
from ..data.encoding import (
    EncodedSplit,
    class_balanced_batches,
    length_grouped_batches,
    padding_pieces,
    rare_for_pairs,
)
from ..models.config import EMA_DECAY, TrainConfig
from ..models.losses import classification_loss, loss_share
from ..models.methods import MethodSpec
from ..models.scoring import Split, batch_width, model_inputs
from .contrastive import supervised_contrastive


@dataclass
class TrainingState:
    """What one epoch of training needs besides the data: the model (DDP-wrapped or not), its
    spec and config, the optimiser and schedule, the batch-order generator, where it runs."""

    model: torch.nn.Module
    spec: MethodSpec
    config: TrainConfig
    optimizer: torch.optim.Optimizer
    scheduler: object
    params: list
    rng: np.random.Generator
    device: torch.device
    pad_id: int
    ddp: DataParallel | None = None
    class_counts: torch.Tensor | None = None  # training examples per class (long-tail losses)
    global_step: int = 0
    # called after every optimizer step with the step's (detached) loss; True stops training
    on_step: Callable[[torch.Tensor], bool] | None = None
    scaler: torch.amp.GradScaler | None = None  # fp16 only
    skipped_steps: torch.Tensor | None = None  # fp16 steps the scaler skipped (on the device)
    # self-ensemble / self-distillation: the moving average of the weights (torch's
    # AveragedModel over ``averaged``, the unwrapped model), updated after every step
    average: torch.nn.Module | None = None
    averaged: torch.nn.Module | None = None

    def __post_init__(self):
        precision = resolve_precision(self.config.precision, self.device)
        self.scaler = grad_scaler(self.device, precision)
        self.pad_multiple = resolve_pad_multiple(self.config.pad_multiple, self.device)
        if self.scaler is not None:
            self.skipped_steps = torch.zeros((), dtype=torch.long, device=self.device)

    def keep_average(self, model: torch.nn.Module) -> None:
        """Start the moving average of ``model``'s weights (self-ensemble, self-distillation)."""
        from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn  # noqa: PLC0415

        self.averaged = model
        self.average = AveragedModel(
            model, multi_avg_fn=get_ema_multi_avg_fn(EMA_DECAY), use_buffers=True
        ).eval()

    def stepped(self) -> None:
        """After an optimizer step: the moving average takes it in."""
        if self.average is not None:
            self.average.update_parameters(self.averaged)

    def backward(self, loss: torch.Tensor) -> None:
        scaled_backward(loss, self.scaler)


def optimizer_step(state: TrainingState, loss: torch.Tensor | None) -> None:
    """Backpropagate ``loss`` (None: the gradients are already accumulated), clip the gradient
    norm, step the optimiser and the schedule."""
    if loss is not None:
        state.optimizer.zero_grad(set_to_none=True)
        state.backward(loss)
    skipped = clipped_step(state.optimizer, state.params, state.config.max_grad_norm, state.scaler)
    if skipped is not None:
        state.skipped_steps += skipped
    state.scheduler.step()
    state.stepped()


def forward_loss(
    state: TrainingState, train: Split, index, precision: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """The method's loss on the examples ``index`` (padded to their own longest text, on a GPU
    to a multiple of the pad width), and their labels on the device. On a CPU a batch of mixed
    lengths (class-balanced draws) is forwarded in pieces of like length, each padded to its
    own, and the loss taken over the whole batch (a GPU keeps one launch a batch; data
    parallelism one forward a backward)."""
    pieces = [index]
    if state.device.type == "cpu" and state.ddp is None and isinstance(train, EncodedSplit):
        lengths = [len(train.input_ids[i]) for i in index]
        pieces = padding_pieces(index, lengths)
    config = state.config
    logits, features, teacher, labels = [], [], [], []
    for piece in pieces:
        width = batch_width(train, piece, state.pad_multiple, config.max_length)
        batch = batch_to(train.batch(piece, state.pad_id, width), state.device)
        with autocast(state.device, precision):
            piece_logits, piece_features = state.model(**model_inputs(batch))
            if config.self_distill and state.average is not None:  # the average as the teacher
                with torch.no_grad():
                    teacher.append(state.average.module(**model_inputs(batch))[0])
        logits.append(piece_logits)
        features.append(piece_features)
        labels.append(batch["labels"])
    logits, features, labels = (torch.cat(parts) for parts in (logits, features, labels))
    loss = classification_loss(state.spec, logits, labels, state.class_counts)
    if teacher:
        gap = torch.nn.functional.mse_loss(logits.float(), torch.cat(teacher).float())
        loss = loss + config.self_distill * gap
    if config.supcon:
        loss = loss + config.supcon * supervised_contrastive(features, labels)
    return loss, labels


def batch_loss(state: TrainingState, train: Split, index, precision: str) -> torch.Tensor:
    """Forward a batch and return its loss; with ``micro_batch_size``, forward and backward it in
    pieces (each padded to its own length), accumulating the gradients of the same mean loss,
    and return the loss detached (the step then only applies the gradients)."""
    micro = state.config.micro_batch_size
    if not micro or len(index) <= micro:
        return forward_loss(state, train, index, precision)[0]
    if state.ddp is not None:
        raise GleeError("--micro-batch-size does not combine with several processes yet")
    whole = torch.as_tensor(train.labels[index], device=state.device)
    state.optimizer.zero_grad(set_to_none=True)
    total = torch.zeros((), device=state.device)
    for start in range(0, len(index), micro):
        loss, labels = forward_loss(state, train, index[start : start + micro], precision)
        loss = loss * loss_share(state.spec, labels, whole, state.class_counts)
        state.backward(loss)
        total += loss.detach()
    return total


def epoch_batches(state: TrainingState, train: Split) -> list[np.ndarray]:
    """One epoch's batches: length-grouped (or, cRT, class-balanced) in the state's random order;
    under data parallelism every process draws the same batches and keeps its slice of each."""
    if state.spec.class_balanced or (  # cRT; or a contrastive term where a class is rare
        state.config.supcon and rare_for_pairs(train.labels, state.config.batch_size)
    ):  # every class drawn equally often, with replacement
        batches = class_balanced_batches(train.labels, state.config.batch_size, state.rng)
    else:
        batches = length_grouped_batches(train.lengths, state.config.batch_size, state.rng)
    if state.ddp is not None:  # every process must step together: drop batches too small
        batches = [state.ddp.shard(b) for b in batches if len(b) >= state.ddp.size]
    return batches


def train_step(state: TrainingState, train: Split, index, precision: str) -> torch.Tensor:
    """One optimizer step on the examples ``index``; returns the batch's loss, detached and on
    the device (reading it back would wait for the device)."""
    loss = batch_loss(state, train, index, precision)
    optimizer_step(state, loss if loss.requires_grad else None)
    state.global_step += 1
    return loss.detach()
