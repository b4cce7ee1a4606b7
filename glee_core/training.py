"""Fine-tune one method on one dataset and evaluate it: the paper's set-up as defaults.

AdamW (lr 1e-5, weight decay 0), batch 32, gradient norm clipped at 1, linear warm-up over 10% of
the steps, up to 10 epochs with early stopping after 2 epochs without a dev macro-F1 gain; the
best-on-dev weights are evaluated on test. On CUDA the step runs under bf16 autocast with fused
AdamW; the loop never waits on the device except to report the loss every ``log_every`` steps.
"""

from __future__ import annotations

import copy
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from transformers import get_linear_schedule_with_warmup

from .backbone import Backbone
from .config import TrainConfig
from .datasets import SPLIT_SEED, LongTailDataset
from .devices import (
    autocast,
    keep_large_blocks_mapped,
    release_freed_memory,
    resolve_device,
    resolve_precision,
)
from .distributed import DataParallel, data_parallel
from .encoding import EncodedSplit, encode, eval_batches, length_grouped_batches
from .errors import GleeError
from .events import Evaluated, ProgressFn, Testing, TrainStep
from .features import FeatureSplit, cached_features, limited_splits
from .heads import (
    GleeModel,
    build_model,
    classification_loss,
    eta_normalise,
    fit_probe,
    loss_share,
)
from .methods import MethodSpec
from .metrics import classification_metrics, macro_f1, shot_f1

FEATURES_PER_CLASS = 64  # test examples per class whose classifier input is stored (Figure 4)


@dataclass
class RunResult:
    """Everything a finished run stores (see :mod:`glee_core.store`)."""

    metrics: dict
    history: list[dict]
    predictions: pd.DataFrame
    logits: np.ndarray
    weight_norms: list[float]
    features: dict[str, np.ndarray]
    model: GleeModel
    config: TrainConfig  # resolved: what the run really used
    calibration: dict[str, np.ndarray] = field(default_factory=dict)  # see calibration.py
    timing: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


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


def prepare_splits(dataset: LongTailDataset, spec: MethodSpec, backbone: Backbone,
                   config: TrainConfig, device: torch.device, feature_cache: Path | None,
                   progress: ProgressFn) -> dict[str, Split]:
    """Token ids (fine-tuning) or cached hidden states (frozen) of every split; ``--limit`` keeps
    the first N training examples. ``config`` is resolved (its max length is set)."""
    if config.frozen:
        cache = feature_cache or Path(tempfile.gettempdir()) / "glee-features"
        splits = cached_features(dataset, backbone, spec.input_format, config.max_length, cache,
                                 device, progress, config.pooling, config.limit)
    else:  # --limit: the rest of the training split is not even tokenised
        splits = {name: encode(frame, backbone.tokenizer, spec.input_format, dataset.template,
                               config.max_length)
                  for name, frame in limited_splits(dataset, config.limit).items()}
    if len(splits["train"]) == 0:
        raise GleeError(f"{dataset.id}: the training split is empty")
    return splits


def feature_pass_timing(train: Split) -> dict:
    """A frozen run's record of how fast its feature pass encoded (what estimates read)."""
    rate = getattr(train, "pass_tokens_per_second", None)
    return {"feature_pass_tokens_per_second": round(rate, 1)} if rate else {}


def sample_feature_rows(labels: np.ndarray, per_class: int = FEATURES_PER_CLASS) -> np.ndarray:
    """Up to ``per_class`` test rows of every class, the same rows for every method and seed."""
    rng = np.random.default_rng(SPLIT_SEED)
    rows = [rng.permutation(np.flatnonzero(labels == c))[:per_class] for c in np.unique(labels)]
    return np.sort(np.concatenate(rows)) if rows else np.zeros(0, dtype=np.int64)


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


def class_balanced_batches(labels: np.ndarray, batch_size: int, rng: np.random.Generator
                           ) -> list[np.ndarray]:
    """An epoch of as many examples as the split, drawn with replacement so that every class is
    equally likely (Kang et al. 2020's class-balanced sampling)."""
    counts = np.bincount(labels)
    weights = 1.0 / counts[labels]
    order = rng.choice(len(labels), size=len(labels), replace=True, p=weights / weights.sum())
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def optimizer_step(state: TrainingState, loss: torch.Tensor | None) -> None:
    """Backpropagate ``loss`` (None: the gradients are already accumulated), clip the gradient
    norm, step the optimiser and the schedule."""
    if loss is not None:
        state.optimizer.zero_grad(set_to_none=True)
        loss.backward()
    torch.nn.utils.clip_grad_norm_(state.params, state.config.max_grad_norm)
    state.optimizer.step()
    state.scheduler.step()


def _forward_loss(state: TrainingState, train: Split, index, precision: str
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """The method's loss on the examples ``index`` (padded to their own length), and their
    labels on the device."""
    batch = batch_to(train.batch(index, state.pad_id), state.device)
    with autocast(state.device, precision):
        logits, _ = state.model(**model_inputs(batch))
    labels = batch["labels"]
    return classification_loss(state.spec, logits, labels, state.class_counts), labels


def batch_loss(state: TrainingState, train: Split, index, precision: str) -> torch.Tensor:
    """Forward a batch and return its loss; with ``micro_batch_size``, forward and backward it in
    pieces (each padded to its own length), accumulating the gradients of the same mean loss,
    and return the loss detached (the step then only applies the gradients)."""
    micro = state.config.micro_batch_size
    if not micro or len(index) <= micro:
        return _forward_loss(state, train, index, precision)[0]
    if state.ddp is not None:
        raise GleeError("--micro-batch-size does not combine with several processes yet")
    whole = torch.as_tensor(train.labels[index], device=state.device)
    state.optimizer.zero_grad(set_to_none=True)
    total = torch.zeros((), device=state.device)
    for start in range(0, len(index), micro):
        loss, labels = _forward_loss(state, train, index[start:start + micro], precision)
        loss = loss * loss_share(state.spec, labels, whole, state.class_counts)
        loss.backward()
        total += loss.detach()
    return total


def train_one_epoch(state: TrainingState, train: Split, epoch: int, progress: ProgressFn
                    ) -> tuple[float, int, bool]:
    """One pass over ``train``; returns (summed loss, steps, stopped early by ``on_step``). The
    loss stays on the device and is read back only every ``config.log_every`` steps. Under data
    parallelism every process draws the same batches and trains on its slice of each."""
    config, device = state.config, state.device
    state.model.train()
    if state.spec.class_balanced:  # cRT: every class drawn equally often, with replacement
        batches = class_balanced_batches(train.labels, config.batch_size, state.rng)
    else:
        batches = length_grouped_batches(train.lengths, config.batch_size, state.rng)
    if state.ddp is not None:  # every process must step together: drop batches too small
        batches = [state.ddp.shard(b) for b in batches if len(b) >= state.ddp.size]
    precision = resolve_precision(config.precision, device)
    loss_sum = torch.zeros((), device=device)
    for step, index in enumerate(batches, 1):
        loss = batch_loss(state, train, index, precision)
        optimizer_step(state, loss if loss.requires_grad else None)
        state.global_step += 1
        loss_sum += loss.detach()
        report = step % config.log_every == 0 or step == len(batches)
        progress(TrainStep(epoch=epoch, epochs=config.epochs, step=step, steps=len(batches),
                           loss=float(loss_sum) / step if report else None))
        if state.on_step is not None and state.on_step(loss.detach()):
            return float(loss_sum), step, True
    return float(loss_sum), len(batches), False


def make_optimizer(model: GleeModel, config: TrainConfig, device: torch.device, total_steps: int):
    """AdamW (fused on CUDA) with linear warm-up over ``warmup_ratio`` of the steps, then decay."""
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.learning_rate,
                                  weight_decay=config.weight_decay, fused=device.type == "cuda")
    scheduler = get_linear_schedule_with_warmup(
        optimizer, int(config.warmup_ratio * total_steps), total_steps)
    return params, optimizer, scheduler


class DevSelection:
    """Scores the dev split, keeps the best weights and decides when to stop: after every epoch
    (patience in epochs), or every ``eval_every_steps`` optimizer steps as the released scripts do
    (stop after patience x steps-per-epoch steps without a gain)."""

    def __init__(self, model: GleeModel, dev: Split, state: TrainingState,
                 steps_per_epoch: int, progress: ProgressFn):
        # ``model`` unwrapped (its state dict is what a run keeps), ``state`` where it trains
        self.model, self.dev, self.progress = model, dev, progress
        self.config, self.pad_id, self.device = state.config, state.pad_id, state.device
        self.num_classes = model.head.class_weights().shape[0]
        self.patience_steps = state.config.patience * steps_per_epoch
        self.history: list[dict] = []
        self.best_score, self.best_state, self.best_step, self.stale = -1.0, None, 0, 0
        self.epoch, self.step = 1, 0
        self.loss_sum, self.loss_steps = 0.0, 0
        self.since = time.perf_counter()

    def evaluate(self, step: int, train_loss: float | None = None) -> None:
        started = time.perf_counter()
        logits, _ = predict(self.model, self.dev, self.pad_id, self.device,
                            self.config.eval_batch_size, self.config.precision)
        self.model.train()
        pred = logits.argmax(1)
        eval_seconds = time.perf_counter() - started
        record = {"epoch": self.epoch, "step": step,
                  "train_loss": train_loss if train_loss is not None
                  else float(self.loss_sum) / max(self.loss_steps, 1),
                  "dev_f1": macro_f1(self.dev.labels, pred, self.num_classes),
                  "dev_acc": float((pred == self.dev.labels).mean()),
                  "eval_seconds": round(eval_seconds, 3),
                  # per-class predictor norms as training goes (the norm-evolution heatmap)
                  "weight_norms": [round(v, 5) for v in
                                   self.model.class_weight_norms().detach().cpu().tolist()],
                  "seconds": round(time.perf_counter() - self.since, 3)}
        self.history.append(record)
        self.since = time.perf_counter()
        self.loss_sum, self.loss_steps = 0.0, 0
        score = record[f"dev_{self.config.select_metric}"]
        if score > self.best_score:
            self.best_score, self.best_step, self.stale = score, step, 0
            self.best_state = {k: v.detach().to("cpu", copy=True)
                               for k, v in self.model.state_dict().items()}
        else:
            self.stale += 1
        self.progress(Evaluated(epoch=self.epoch, epochs=self.config.epochs,
                                dev_f1=record["dev_f1"], dev_acc=record["dev_acc"],
                                best_dev=self.best_score,
                                select_metric=self.config.select_metric))

    def after_step(self, loss: torch.Tensor) -> bool:
        """Step mode: score every ``eval_every_steps`` steps; True once patience ran out."""
        self.step += 1
        self.loss_sum = self.loss_sum + loss  # stays on the device until the next evaluation
        self.loss_steps += 1
        if self.step % self.config.eval_every_steps:
            return False
        self.evaluate(self.step)
        return self.step - self.best_step >= self.patience_steps

    def end_of_epoch(self, train_loss: float, step: int) -> bool:
        """Epoch mode: score after the epoch; True once ``patience`` epochs brought no gain."""
        self.evaluate(step, train_loss)
        return self.stale >= self.config.patience


def train_and_evaluate(dataset: LongTailDataset, spec: MethodSpec, backbone: Backbone,
                       config: TrainConfig, progress: ProgressFn | None = None,
                       feature_cache: Path | None = None) -> RunResult:
    """Train ``spec`` on a fresh copy of ``backbone`` (or, frozen, a head on its cached features)
    and evaluate the best-on-dev weights. ``config`` may be unresolved: the dataset fills its
    max length and batch size."""
    progress = progress or (lambda event: None)
    config = config.resolved(dataset.max_length, dataset.batch_size)
    if spec.predictor == "probe" and not config.frozen:
        raise GleeError(f"{spec.id} is fitted on a frozen backbone's features; use --mode frozen")
    ddp = data_parallel(config.device)
    device = ddp.device if ddp else resolve_device(config.device)
    if device.type == "cpu" and config.micro_batch_size:  # asked to save memory
        keep_large_blocks_mapped()
    splits = prepare_splits(dataset, spec, backbone, config, device, feature_cache, progress)
    train = splits["train"]
    notes = [f"{n} of {len(splits[name])} {name} texts reached max length and were truncated to "
             f"{config.max_length} tokens" for name in ("train", "test")
             if isinstance(splits[name], EncodedSplit)
             and (n := int((splits[name].lengths >= config.max_length).sum()))]
    torch.manual_seed(config.seed)
    # Fine-tuning trains a deep copy, so the pristine backbone serves the next run unchanged.
    own = backbone if config.frozen else replace(backbone, model=copy.deepcopy(backbone.model))
    model = build_model(spec, own, dataset.classes, dataset.verbalizer,
                        frozen=config.frozen, pooling=config.pooling).to(device)
    pad_id = own.tokenizer.pad_token_id if own.tokenizer.pad_token_id is not None else 0

    steps_per_epoch = -(-len(train) // config.batch_size)
    params, optimizer, scheduler = make_optimizer(model, config, device,
                                                  steps_per_epoch * config.epochs)
    state = TrainingState(ddp.wrap(model) if ddp else model,  # DDP shares ``model``'s parameters
                          spec, config, optimizer, scheduler, params,
                          np.random.default_rng(config.seed), device, pad_id, ddp)

    state.class_counts = torch.from_numpy(
        np.bincount(train.labels, minlength=dataset.num_classes)).to(device)
    selection = DevSelection(model, splits["dev"], state, steps_per_epoch, progress)
    if config.eval_every_steps:
        state.on_step = selection.after_step
    started = time.perf_counter()
    if spec.predictor == "probe":  # a closed-form baseline: fitted once, no epochs
        fit_probe(model.head, train.hidden, train.labels, dataset.num_classes,
                  spec.class_balanced, config.seed)
        with torch.no_grad():
            # torch.tensor copies: cached features may be read-only memory maps
            logits, _ = model.head(torch.tensor(train.hidden, device=device))
            train_loss = float(torch.nn.functional.cross_entropy(
                logits, torch.tensor(train.labels, dtype=torch.long, device=device)))
        selection.evaluate(0, train_loss)
    for epoch in range(1, config.epochs + 1 if spec.predictor != "probe" else 1):
        selection.epoch = epoch
        loss_sum, steps, stopped = train_one_epoch(state, train, epoch, progress)
        if stopped or (not config.eval_every_steps
                       and selection.end_of_epoch(loss_sum / steps, state.global_step)):
            break
    if not selection.history:  # fewer steps than one evaluation interval: score once at the end
        selection.evaluate(state.global_step)
    train_time = time.perf_counter() - started
    history = selection.history
    model.load_state_dict(selection.best_state)

    progress(Testing())
    test = splits["test"]
    test_start = time.perf_counter()
    # one uncalibrated pass serves the run (η-norm applied here) and post-hoc calibration
    raw_logits, features = predict(model, test, pad_id, device, config.eval_batch_size,
                                   config.precision, calibrate=False)
    logits = raw_logits
    if spec.eta_norm:
        logits = eta_normalise(torch.from_numpy(raw_logits),
                               model.class_weight_norms().detach().cpu()).numpy()
    test_seconds = time.perf_counter() - test_start
    pred = logits.argmax(1)
    head, tail = dataset.head_tail()
    metrics = classification_metrics(test.labels, pred, dataset.classes, head, tail)
    best = max(history, key=lambda r: r[f"dev_{config.select_metric}"])  # the first best one
    metrics.update({f"{k}_f1": v for k, v in shot_f1(metrics["per_class"],
                                                     dataset.class_counts().to_dict()).items()})
    metrics.update(best_epoch=best["epoch"], best_step=best["step"], best_dev_f1=best["dev_f1"],
                   best_dev_acc=best["dev_acc"], select_metric=config.select_metric)
    probs = torch.softmax(torch.from_numpy(logits), dim=1).numpy()
    frame = dataset.splits["test"]
    predictions = pd.DataFrame({
        "text": frame["text"].to_numpy(), "text_b": frame["text_b"].to_numpy(),
        "gold": [dataset.classes[i] for i in test.labels],
        "pred": [dataset.classes[i] for i in pred],
        "confidence": probs.max(1).round(6), "correct": pred == test.labels})
    rows = sample_feature_rows(test.labels)
    # what post-hoc calibration needs: the uncalibrated logits and classifier inputs of every
    # dev and test example, and the predictor's W and b (logits = features @ W.T + b)
    dev_raw, dev_features = predict(model, splits["dev"], pad_id, device,
                                    config.eval_batch_size, config.precision, calibrate=False)
    calibration = {"dev_logits": dev_raw, "dev_features": dev_features,
                   "dev_labels": splits["dev"].labels, "test_logits": raw_logits,
                   "test_features": features, "test_labels": test.labels}
    weight, bias = model.head.linear_predictor()
    calibration.update(weight=weight.detach().float().cpu().numpy(),
                       bias=bias.detach().float().cpu().numpy())
    seconds_training = max(train_time - sum(r["eval_seconds"] for r in history), 1e-9)
    return RunResult(
        metrics=metrics, history=history, predictions=predictions, logits=logits,
        weight_norms=model.class_weight_norms().detach().cpu().tolist(),
        features={"features": features[rows].astype(np.float16), "labels": test.labels[rows],
                  "rows": rows},
        model=model, notes=notes, config=config, calibration=calibration,
        timing={"train_seconds": round(train_time, 3), "test_seconds": round(test_seconds, 3),
                "epochs_run": selection.epoch, "evaluations": len(history),
                "device": str(device),
                "precision": resolve_precision(config.precision, device),
                "train_examples_per_second":
                    round(state.global_step * config.batch_size / seconds_training, 2),
                **feature_pass_timing(splits["train"])})
