"""The training loop, in one place: a :class:`Trial` trains at one learning rate (its model,
optimiser, schedule, batch order, random numbers and dev selection) and a :class:`Pack` steps
trials together. A lone run is a pack of one with its own optimiser (micro-batches, a gradient
scaler and data parallelism live there); the heads of a quick compare are a pack of many under
one fused AdamW (:func:`glee_core.train.training.fit_together`). Either way a trial draws the
same batches and random numbers and is scored on dev the same way, so a head trained among
others follows the path it follows alone. The learning-rate search
(:mod:`glee_core.models.search`) advances trials a few evaluations at a time.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import numpy as np
import torch

from ..core.devices import resolve_precision
from ..core.errors import GleeError
from ..core.events import Evaluated, ProgressFn, TrainStep
from ..models.model import GleeModel
from ..models.scoring import Scoring, Split, predict
from ..models.search import Work
from ..runs.metrics import bootstrap_lead, macro_f1
from .step import TrainingState, epoch_batches, forward_loss, train_step


class DevSelection:
    """Scores the dev split, keeps the best weights and decides when to stop: after every epoch
    (patience in epochs), or every ``eval_every_steps`` optimizer steps as the released scripts do
    (stop after patience x steps-per-epoch steps without a gain)."""

    def __init__(
        self,
        model: GleeModel,
        dev: Split,
        state: TrainingState,
        steps_per_epoch: int,
        progress: ProgressFn,
    ):
        # ``model`` unwrapped (its state dict is what a run keeps), ``state`` where it trains
        self.model, self.dev, self.progress = model, dev, progress
        self.config, self.pad_id, self.device = state.config, state.pad_id, state.device
        self.state = state
        self.num_classes = model.head.class_weights().shape[0]
        self.patience_steps = state.config.patience * steps_per_epoch
        self.history: list[dict] = []
        self.best_score, self.best_state, self.best_step, self.stale = -1.0, None, 0, 0
        self.kept_average = False  # self-ensemble: the best weights are the moving average's
        # (evaluation index, dev score, dev predictions) at each new best: where the selection
        # stood at any point, and how sure a search's cut is (:meth:`lead`)
        self.improvements: list[tuple[int, float, np.ndarray]] = []
        self.epoch, self.epochs = 1, state.config.epochs
        self.loss_sum, self.loss_steps = 0.0, 0
        self.since = time.perf_counter()

    @property
    def loss(self) -> float:
        """The latest evaluation's dev loss (the search's tie-breaker)."""
        return self.history[-1]["dev_loss"] if self.history else float("inf")

    def _best_within(self, evaluations: int) -> tuple[int, float, np.ndarray] | None:
        """The best of the first ``evaluations`` evaluations (the first best), or None."""
        seen = [i for i in self.improvements if i[0] < evaluations]
        return seen[-1] if seen else None

    def standing(self, evaluations: int) -> tuple[float, float]:
        """Where this selection stood after its first ``evaluations`` evaluations: its best dev
        score and that point's dev loss, even if it has trained on since (the rate search's
        winner, which a race takes on as its first head's trial)."""
        best = self._best_within(evaluations)
        seen = self.history[:evaluations]
        return (best[1] if best else -1.0), (seen[-1]["dev_loss"] if seen else float("inf"))

    def lead(self, other: DevSelection, evaluations: int) -> float | None:
        """How sure dev is that this selection's best model of its first ``evaluations``
        evaluations scores above ``other``'s (the share of bootstrap resamples of dev where it
        does, :func:`~glee_core.runs.metrics.bootstrap_lead`); None before either scored."""
        mine, theirs = self._best_within(evaluations), other._best_within(evaluations)
        if mine is None or theirs is None:
            return None
        return bootstrap_lead(
            self.dev.labels, mine[2], theirs[2], self.num_classes, self.config.select_metric
        )

    def dev_logits(self, model) -> np.ndarray:
        """``model``'s logits on the dev split, as the run scores it."""
        logits, _ = predict(model, self.dev, self.device, Scoring.of(self.pad_id, self.config))
        return logits

    def evaluate(self, train_loss: float | None = None) -> None:
        step = self.state.global_step
        started = time.perf_counter()
        logits = self.dev_logits(self.model)
        self.model.train()
        pred = logits.argmax(1)
        eval_seconds = time.perf_counter() - started
        record = {
            "epoch": self.epoch,
            "step": step,
            "train_loss": train_loss
            if train_loss is not None
            else float(self.loss_sum) / max(self.loss_steps, 1),
            "dev_f1": macro_f1(self.dev.labels, pred, self.num_classes),
            "dev_acc": float((pred == self.dev.labels).mean()),
            # breaks ties between trials of a learning-rate search (small dev sets tie)
            "dev_loss": round(
                float(
                    torch.nn.functional.cross_entropy(
                        torch.from_numpy(logits), torch.tensor(self.dev.labels).long()
                    )
                ),
                5,
            ),
            "eval_seconds": round(eval_seconds, 3),
            # per-class predictor norms as training goes (the norm-evolution heatmap)
            "weight_norms": [
                round(v, 5) for v in self.model.class_weight_norms().detach().cpu().tolist()
            ],
            "seconds": round(time.perf_counter() - self.since, 3),
        }
        kept = self.model
        score = record[f"dev_{self.config.select_metric}"]
        if self.config.self_ensemble and self.state.average is not None:
            average = self.state.average.module
            mean_pred = self.dev_logits(average).argmax(1)
            record["average_dev_f1"] = macro_f1(self.dev.labels, mean_pred, self.num_classes)
            record["average_dev_acc"] = float((mean_pred == self.dev.labels).mean())
            mean_score = record[f"average_dev_{self.config.select_metric}"]
            if mean_score > score:  # the average is the better model now: it is what counts
                kept, score, pred = average, mean_score, mean_pred
            record["kept"] = "average" if kept is average else "weights"
        self.history.append(record)
        self.since = time.perf_counter()
        self.loss_sum, self.loss_steps = 0.0, 0
        if score > self.best_score:
            self.improvements.append((len(self.history) - 1, score, pred))
            self.best_score, self.best_step, self.stale = score, step, 0
            self.best_state = {
                k: v.detach().to("cpu", copy=True) for k, v in kept.state_dict().items()
            }
            self.kept_average = kept is not self.model
        else:
            self.stale += 1
        self.progress(
            Evaluated(
                epoch=self.epoch,
                epochs=self.epochs,
                dev_f1=record["dev_f1"],
                dev_acc=record["dev_acc"],
                best_dev=self.best_score,
                select_metric=self.config.select_metric,
            )
        )

    def after_step(self, loss: torch.Tensor) -> bool | None:
        """Step mode: score every ``eval_every_steps`` steps; None when it did not score, else
        True once patience ran out."""
        self.loss_sum = self.loss_sum + loss  # stays on the device until the next evaluation
        self.loss_steps += 1
        if self.state.global_step % self.config.eval_every_steps:
            return None
        self.evaluate()
        return self.state.global_step - self.best_step >= self.patience_steps

    def end_of_epoch(self, train_loss: float) -> bool:
        """Epoch mode: score after the epoch; True once ``patience`` epochs brought no gain."""
        self.evaluate(train_loss)
        return self.stale >= self.config.patience


class RngStream:
    """One head's own stream of torch's random numbers (its dropout masks), so that heads
    trained in one loop draw what each would draw trained alone: seeded like a lone run, then
    swapped in around each of the head's forward passes."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.device = device
        self.cpu_state = torch.get_rng_state()
        self.cuda_state = torch.cuda.get_rng_state(device) if self.cuda else None

    @contextmanager
    def active(self):
        torch.set_rng_state(self.cpu_state)
        if self.cuda:
            torch.cuda.set_rng_state(self.cuda_state, self.device)
        try:
            yield
        finally:
            self.cpu_state = torch.get_rng_state()
            if self.cuda:
                self.cuda_state = torch.cuda.get_rng_state(self.device)


def clip_each(groups: list[list[torch.Tensor]], max_norm: float) -> None:
    """``clip_grad_norm_`` for every group of gradients on its own (each head's total norm),
    in a few vectorised calls instead of one call per group."""
    grads = [g for group in groups for g in group]
    if not grads:
        return
    owner = torch.tensor(
        [i for i, group in enumerate(groups) for _ in group], device=grads[0].device
    )
    norms = torch.stack(torch._foreach_norm(grads)).float()
    totals = torch.zeros(len(groups), device=norms.device).index_add_(0, owner, norms**2)
    scales = (max_norm / (totals.sqrt() + 1e-6)).clamp(max=1.0)
    for i, group in enumerate(groups):
        if group:
            torch._foreach_mul_(group, scales[i])


class Trial:
    """Training at one learning rate: its model, optimiser, schedule, batch order, random numbers
    and dev selection. :meth:`advance` trains until a number of further dev evaluations (after an
    epoch, or every ``eval_every_steps`` steps) have been made, so a learning-rate search can
    pause and rank trials between evaluations and continue the best. Alone, a trial is a pack of
    one (:class:`Pack`) with its own optimiser."""

    def __init__(
        self,
        lr: float,
        model: GleeModel,
        state: TrainingState,
        selection: DevSelection,
        train: Split,
        progress: ProgressFn,
        work: Work | None = None,
        rng: RngStream | None = None,
    ):
        self.lr, self.model, self.state, self.selection = lr, model, state, selection
        self.train, self.progress = train, progress
        self.work = work or Work(total=0)  # the run's steps, every trial's (the progress)
        # its own dropout masks, alone as among others: seeded with the model's weights
        self.rng = rng or RngStream(state.device)
        self.epochs = selection.epochs
        self.epoch, self.step, self.batches = 0, 0, []
        self.loss_sum = torch.zeros((), device=state.device)
        self.precision = resolve_precision(state.config.precision, state.device)
        self.done = False
        self.pack = Pack([self])

    def advance(self, evaluations: int | None = None) -> None:
        """Train until ``evaluations`` more dev evaluations were made (None: to the end), or
        patience runs out, or the epochs end (then ``done``)."""
        self.pack.advance(evaluations)

    def start_epoch(self) -> None:
        self.epoch, self.step = self.epoch + 1, 0
        self.selection.epoch = self.epoch
        self.batches = epoch_batches(self.state, self.train)
        self.loss_sum = torch.zeros((), device=self.state.device)
        self.state.model.train()


class Pack:
    """Trials that step together, epoch by epoch: at each step every trial still in its epoch
    takes its own batch (its own order and random numbers) and its own loss; after an epoch (or
    every ``eval_every_steps`` steps) each is scored on dev and stops on its own patience.

    ``optimizer`` None: a trial alone with its own optimiser, stepped by :func:`train_step`
    (micro-batches, a gradient scaler, data parallelism). Given: one optimiser over every trial's
    parameters (the quick compare's heads share no parameter): one backward pass for the sum of
    the losses, each trial's gradient norm clipped on its own, one fused step for all (a trial
    that stopped has no gradient and is left alone)."""

    def __init__(
        self, trials: list[Trial], optimizer: torch.optim.Optimizer | None = None, scheduler=None
    ):
        if optimizer is None and len(trials) != 1:
            raise GleeError("trials that step together share one optimizer")
        self.trials, self.optimizer, self.scheduler = trials, optimizer, scheduler
        for trial in trials:
            trial.pack = self
        self.step, self.steps = 0, 0  # the step of the epoch, and its longest trial's steps

    def advance(self, evaluations: int | None = None) -> None:
        """Train until ``evaluations`` more dev evaluations were made (None: until every trial
        is done)."""
        made = 0
        while evaluations is None or made < evaluations:
            alive = [t for t in self.trials if not t.done]
            if alive and self.step == self.steps:  # every trial's epoch ended: a new epoch
                for trial in alive:
                    trial.done = trial.epoch == trial.epochs
                alive = [t for t in alive if not t.done]
                for trial in alive:
                    trial.start_epoch()
                self.step, self.steps = 0, max((len(t.batches) for t in alive), default=0)
            if not alive:
                break
            stepping = [t for t in alive if t.step < len(t.batches)]
            losses = self._step(stepping)
            self.step += 1
            for trial, loss in zip(stepping, losses, strict=True):
                trial.step += 1
                trial.loss_sum += loss
                trial.work.done += 1
            self._report(alive)
            made += self._select(alive, stepping, losses)

    def _step(self, stepping: list[Trial]) -> list[torch.Tensor]:
        """One optimizer step of every trial in ``stepping``; their losses, detached."""
        if self.optimizer is None:
            (trial,) = stepping
            with trial.rng.active():
                return [
                    train_step(trial.state, trial.train, trial.batches[trial.step], trial.precision)
                ]
        self.optimizer.zero_grad(set_to_none=True)
        total, losses = None, []
        for trial in stepping:
            with trial.rng.active():
                loss = forward_loss(
                    trial.state, trial.train, trial.batches[trial.step], trial.precision
                )[0]
            losses.append(loss.detach())
            trial.state.global_step += 1
            total = loss if total is None else total + loss
        total.backward()
        clip_each(
            [[p.grad for p in t.state.params if p.grad is not None] for t in stepping],
            stepping[0].state.config.max_grad_norm,
        )
        self.optimizer.step()
        self.scheduler.step()
        for trial in stepping:
            trial.state.stepped()
        return losses

    def _report(self, alive: list[Trial]) -> None:
        first = alive[0]
        config = first.state.config
        report = self.step % config.log_every == 0 or self.step == self.steps
        # alone, the run's steps (a search's every trial); a pack's bar counts epochs and steps
        work = first.work if self.optimizer is None else None
        loss = float(sum(t.loss_sum for t in alive)) / len(alive) / self.step if report else None
        first.progress(
            TrainStep(
                epoch=first.epoch,
                epochs=first.epochs,
                step=self.step,
                steps=self.steps,
                loss=loss,
                done=work.done if work else None,
                total=work.total if work else None,
            )
        )

    def _select(self, alive: list[Trial], stepping: list[Trial], losses: list[torch.Tensor]) -> int:
        """Each trial's dev selection after the step; 1 when it scored on dev, else 0."""
        if alive[0].state.config.eval_every_steps:
            made = 0
            for trial, loss in zip(stepping, losses, strict=True):
                stop = trial.selection.after_step(loss)
                made = made or stop is not None
                trial.done = bool(stop)
            return int(made)
        if self.step < self.steps:
            return 0
        for trial in alive:
            trial.done = trial.selection.end_of_epoch(
                float(trial.loss_sum) / max(len(trial.batches), 1)
            )
        return 1
