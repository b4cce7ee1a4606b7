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
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Union

import numpy as np
import pandas as pd
import torch

from .backbone import Backbone
from .datasets import SPLIT_SEED, LongTailDataset
from .encoding import EncodedSplit, encode, eval_batches, length_grouped_batches
from .errors import GleeError
from .devices import autocast, resolve_device, resolve_precision
from .distributed import DataParallel, data_parallel
from .features import FeatureSplit, cached_features
from .methods import GleeModel, MethodSpec, build_model, classification_loss
from .metrics import classification_metrics, macro_f1

FINETUNE_LR = 1e-5  # the paper's
FROZEN_LR = 1e-3  # heads alone on a frozen backbone need larger steps
FEATURES_PER_CLASS = 64  # test examples per class whose classifier input is stored (Figure 4)

ProgressFn = Callable[[dict], None]


@dataclass
class TrainConfig:
    """Hyper-parameters of a run (defaults: the paper's)."""

    epochs: int = 10
    batch_size: int | None = 32  # None: the dataset's (few-shot sets use 2)
    lr: float | None = None  # None: 1e-5 fine-tuning (the paper's), 1e-3 for heads on a frozen backbone
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    warmup_ratio: float = 0.1
    patience: int = 2
    select_metric: str = "f1"  # dev metric for early stopping and the kept weights: "f1" (macro,
    #                            the paper's long-tailed runs) or "acc" (its few-shot runs)
    max_length: int | None = None  # None: the dataset's (the paper's per-dataset length)
    limit: int | None = None  # keep the first N training examples (smoke runs)
    seed: int = 1
    backbone: str = "finetune"  # "finetune", or "frozen": quick mode, heads on cached features
    precision: str = "auto"  # "auto": bf16 autocast on CUDA and on CPUs with native bf16; "fp32"
    strategy: str = "fast"  # "fast", or "reference": the released code's (pad to max length,
    #                         fp32, full-vocabulary logits), for benchmarks and checks
    eval_batch_size: int = 128
    device: str = "auto"
    log_every: int = 20

    def __post_init__(self):
        if self.backbone not in ("finetune", "frozen"):
            raise GleeError(f"--backbone must be finetune or frozen, got {self.backbone!r}")
        if self.precision not in ("auto", "fp32", "bf16"):
            raise GleeError(f"--precision must be auto, fp32 or bf16, got {self.precision!r}")
        if self.strategy not in ("fast", "reference"):
            raise GleeError(f"strategy must be fast or reference, got {self.strategy!r}")
        if self.select_metric not in ("f1", "acc"):
            raise GleeError(f"--select-metric must be f1 or acc, got {self.select_metric!r}")
        for name in ("epochs", "batch_size", "max_length", "limit"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise GleeError(f"--{name.replace('_', '-')} must be at least 1, got {value}")

    @property
    def learning_rate(self) -> float:
        if self.lr is not None:
            return self.lr
        return FROZEN_LR if self.backbone == "frozen" else FINETUNE_LR

    def identity(self) -> dict:
        """The fields that change a run's result (device, strategy and logging do not)."""
        fields = asdict(self)
        for key in ("device", "eval_batch_size", "log_every", "strategy", "precision"):
            fields.pop(key)
        if fields["select_metric"] == "f1":  # the default leaves run ids as they were before it
            fields.pop("select_metric")
        return fields


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
    timing: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _to(batch: dict, device: torch.device) -> dict:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def _model_inputs(batch: dict) -> dict:
    return {k: batch[k] for k in ("input_ids", "attention_mask", "positions", "token_type_ids",
                                  "hidden") if k in batch}


Split = Union[EncodedSplit, FeatureSplit]


@torch.inference_mode()
def predict(model: GleeModel, split: Split, pad_id: int, device: torch.device,
            batch_size: int = 128, strategy: str = "fast", max_length: int | None = None,
            precision: str = "auto") -> tuple[np.ndarray, np.ndarray | None]:
    """Calibrated logits and classifier-input features for every example, in split order.

    ``strategy="reference"`` evaluates as the released code does (no features returned)."""
    model.eval()
    reference = strategy == "reference"
    precision = resolve_precision(precision, device, strategy)
    logits = np.zeros((len(split), model.head.class_weights().shape[0]), dtype=np.float32)
    features = None
    batches = ([np.arange(i, min(i + batch_size, len(split)))
                for i in range(0, len(split), batch_size)] if reference
               else eval_batches(split.lengths, batch_size))
    for index in batches:
        batch = _to(split.batch(index, pad_id, max_length if reference else None), device)
        with autocast(device, precision):
            out, feats = model(**_model_inputs(batch), calibrate=True, full_vocabulary=reference)
        logits[index] = out.float().cpu().numpy()
        if feats is not None:
            if features is None:
                features = np.zeros((len(split), feats.shape[-1]), dtype=np.float32)
            features[index] = feats.float().cpu().numpy()
    return logits, features


def prepare_splits(dataset: LongTailDataset, spec: MethodSpec, backbone: Backbone,
                   config: TrainConfig, device: torch.device, feature_cache: Path | None,
                   progress: ProgressFn) -> dict[str, Split]:
    """Token ids (fine-tuning) or cached hidden states (frozen) of every split; ``--limit`` keeps
    the first N training examples."""
    max_length = config.max_length or dataset.max_length
    if config.backbone == "frozen":
        cache = feature_cache or Path(tempfile.gettempdir()) / "glee-features"
        splits = cached_features(dataset, backbone, spec.input_format, max_length, cache, device,
                                 progress)
    else:
        splits = {name: encode(frame, backbone.tokenizer, spec.input_format, dataset.template,
                               max_length) for name, frame in dataset.splits.items()}
    if config.limit:
        splits["train"] = splits["train"].subset(range(min(config.limit, len(splits["train"]))))
    if len(splits["train"]) == 0:
        raise GleeError(f"{dataset.id}: the training split is empty")
    return splits


def sample_feature_rows(labels: np.ndarray, per_class: int = FEATURES_PER_CLASS) -> np.ndarray:
    """Up to ``per_class`` test rows of every class, the same rows for every method and seed."""
    rng = np.random.default_rng(SPLIT_SEED)
    rows = [rng.permutation(np.flatnonzero(labels == c))[:per_class] for c in np.unique(labels)]
    return np.sort(np.concatenate(rows)) if rows else np.zeros(0, dtype=np.int64)


def train_one_epoch(model: GleeModel, spec: MethodSpec, train: Split, config: TrainConfig,
                    optimizer, scheduler, rng: np.random.Generator, device: torch.device,
                    pad_id: int, max_length: int, params: list, progress: ProgressFn,
                    ddp: DataParallel | None = None) -> tuple[float, int]:
    """One pass over ``train``; returns (summed loss, steps). The loss stays on the device and
    is read back only every ``config.log_every`` steps. Under data parallelism every process
    draws the same batches and trains on its slice of each."""
    model.train()
    reference = config.strategy == "reference"
    if reference:  # the released code: shuffled batches padded to max_length
        order = rng.permutation(len(train))
        batches = [order[i:i + config.batch_size] for i in range(0, len(order), config.batch_size)]
    else:
        batches = length_grouped_batches(train.lengths, config.batch_size, rng)
    if ddp is not None:  # every process must step together: drop batches too small to split
        batches = [ddp.shard(b) for b in batches if len(b) >= ddp.size]
    precision = resolve_precision(config.precision, device, config.strategy)
    loss_sum = torch.zeros((), device=device)
    for step, index in enumerate(batches, 1):
        batch = _to(train.batch(index, pad_id, max_length if reference else None), device)
        with autocast(device, precision):
            logits, _ = model(**_model_inputs(batch), full_vocabulary=reference)
        loss = classification_loss(spec, logits, batch["labels"])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
        optimizer.step()
        scheduler.step()
        loss_sum += loss.detach()
        event = {"stage": "train", "epochs": config.epochs, "step": step, "steps": len(batches)}
        if step % config.log_every == 0 or step == len(batches):
            event["loss"] = float(loss_sum) / step
        progress(event)
    return float(loss_sum), len(batches)


def make_optimizer(model: GleeModel, config: TrainConfig, device: torch.device, total_steps: int):
    """AdamW (fused on CUDA) with linear warm-up over ``warmup_ratio`` of the steps, then decay."""
    from transformers import get_linear_schedule_with_warmup

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.learning_rate,
                                  weight_decay=config.weight_decay, fused=device.type == "cuda")
    scheduler = get_linear_schedule_with_warmup(
        optimizer, int(config.warmup_ratio * total_steps), total_steps)
    return params, optimizer, scheduler


def train_and_evaluate(dataset: LongTailDataset, spec: MethodSpec, backbone: Backbone,
                       config: TrainConfig, progress: ProgressFn | None = None,
                       feature_cache: Path | None = None) -> RunResult:
    """Train ``spec`` on a fresh copy of ``backbone`` (or, frozen, a head on its cached features)
    and evaluate the best-on-dev weights."""
    progress = progress or (lambda event: None)
    ddp = data_parallel(config.device)
    device = ddp.device if ddp else resolve_device(config.device)
    frozen = config.backbone == "frozen"
    max_length = config.max_length or dataset.max_length
    splits = prepare_splits(dataset, spec, backbone, config, device, feature_cache, progress)
    train = splits["train"]
    notes = [f"{n} of {len(splits[name])} {name} texts reached max length and were truncated to "
             f"{max_length} tokens" for name in ("train", "test")
             if isinstance(splits[name], EncodedSplit)
             and (n := int((splits[name].lengths >= max_length).sum()))]
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    # Fine-tuning trains a deep copy, so the pristine backbone serves the next run unchanged.
    own = backbone if frozen else replace(backbone, model=copy.deepcopy(backbone.model))
    model = build_model(spec, own, dataset.classes, dataset.verbalizer, frozen=frozen).to(device)
    tokenizer = own.tokenizer
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    steps_per_epoch = -(-len(train) // config.batch_size)
    total_steps = steps_per_epoch * config.epochs
    params, optimizer, scheduler = make_optimizer(model, config, device, total_steps)
    trained = ddp.wrap(model) if ddp else model  # DDP shares the parameters of ``model``

    history: list[dict] = []
    best_score, best_state, stale = -1.0, None, 0
    started = time.perf_counter()
    for epoch in range(1, config.epochs + 1):
        epoch_start = time.perf_counter()
        loss_sum, steps = train_one_epoch(trained, spec, train, config, optimizer, scheduler, rng,
                                          device, pad_id, max_length, params,
                                          lambda e: progress({**e, "epoch": epoch}), ddp)
        train_seconds = time.perf_counter() - epoch_start
        dev_logits, _ = predict(model, splits["dev"], pad_id, device, config.eval_batch_size,
                                config.strategy, max_length, config.precision)
        dev_pred = dev_logits.argmax(1)
        dev_f1 = macro_f1(splits["dev"].labels, dev_pred, dataset.num_classes)
        record = {"epoch": epoch, "train_loss": loss_sum / steps,
                  "dev_f1": dev_f1, "dev_acc": float((dev_pred == splits["dev"].labels).mean()),
                  "train_seconds": round(train_seconds, 3),
                  "seconds": round(time.perf_counter() - epoch_start, 3)}
        history.append(record)
        score = record[f"dev_{config.select_metric}"]
        if score > best_score:
            best_score, stale = score, 0
            best_state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        else:
            stale += 1
        progress({"stage": "eval", **record, "select_metric": config.select_metric,
                  "best_dev": best_score, "epochs": config.epochs})
        if stale >= config.patience:
            break
    train_time = time.perf_counter() - started
    model.load_state_dict(best_state)

    progress({"stage": "test"})
    test = splits["test"]
    test_start = time.perf_counter()
    logits, features = predict(model, test, pad_id, device, config.eval_batch_size,
                               config.strategy, max_length, config.precision)
    test_seconds = time.perf_counter() - test_start
    pred = logits.argmax(1)
    head, tail = dataset.head_tail()
    metrics = classification_metrics(test.labels, pred, dataset.classes, head, tail)
    best = max(history, key=lambda r: r[f"dev_{config.select_metric}"])  # the first best epoch
    metrics.update(best_epoch=best["epoch"], best_dev_f1=best["dev_f1"],
                   best_dev_acc=best["dev_acc"], select_metric=config.select_metric)
    probs = torch.softmax(torch.from_numpy(logits), dim=1).numpy()
    frame = dataset.splits["test"]
    predictions = pd.DataFrame({
        "text": frame["text"].to_numpy(), "text_b": frame["text_b"].to_numpy(),
        "gold": [dataset.classes[i] for i in test.labels],
        "pred": [dataset.classes[i] for i in pred],
        "confidence": probs.max(1).round(6), "correct": pred == test.labels})
    rows = sample_feature_rows(test.labels)
    if features is None:  # the reference strategy does not return them
        features = np.zeros((len(test), 0), dtype=np.float32)
    seconds_training = sum(r["train_seconds"] for r in history)
    return RunResult(
        metrics=metrics, history=history, predictions=predictions, logits=logits,
        weight_norms=model.class_weight_norms().detach().cpu().tolist(),
        features={"features": features[rows].astype(np.float16), "labels": test.labels[rows],
                  "rows": rows},
        model=model, notes=notes,
        timing={"train_seconds": round(train_time, 3), "test_seconds": round(test_seconds, 3),
                "epochs_run": len(history), "device": str(device), "strategy": config.strategy,
                "precision": resolve_precision(config.precision, device, config.strategy),
                "train_examples_per_second":
                    round(len(train) * len(history) / max(seconds_training, 1e-9), 2)})
