"""Fine-tune one method on one dataset and evaluate it: the paper's set-up as defaults.

AdamW (lr 1e-5, weight decay 0), batch 32, gradient norm clipped at 1, linear warm-up over 10% of
the steps, up to 10 epochs with early stopping after 2 epochs without a dev macro-F1 gain; the
best-on-dev weights are evaluated on test. On CUDA the step runs under bf16 autocast with fused
AdamW; the loop never waits on the device except to report the loss every ``log_every`` steps.
"""

from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Callable

import numpy as np
import pandas as pd
import torch

from .backbone import Backbone
from .datasets import SPLIT_SEED, LongTailDataset
from .encoding import EncodedSplit, collate, encode, eval_batches, length_grouped_batches
from .errors import GleeError
from .methods import GleeModel, MethodSpec, build_model, classification_loss
from .metrics import classification_metrics, macro_f1

FEATURES_PER_CLASS = 64  # test examples per class whose classifier input is stored (Figure 4)

ProgressFn = Callable[[dict], None]


@dataclass
class TrainConfig:
    """Hyper-parameters of a run (defaults: the paper's)."""

    epochs: int = 10
    batch_size: int = 32
    lr: float = 1e-5
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    warmup_ratio: float = 0.1
    patience: int = 2
    max_length: int | None = None  # None: the dataset's (the paper's per-dataset length)
    limit: int | None = None  # keep the first N training examples (smoke runs)
    seed: int = 1
    eval_batch_size: int = 128
    device: str = "auto"
    log_every: int = 20

    def identity(self) -> dict:
        """The fields that change a run's result (device and logging do not)."""
        fields = asdict(self)
        for key in ("device", "eval_batch_size", "log_every"):
            fields.pop(key)
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


def resolve_device(device: str = "auto") -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise GleeError("--device cuda asked for, but no CUDA GPU is available; use --device cpu")
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise GleeError(f"unknown device {device!r}; use auto, cpu or cuda")
    return torch.device(device)


def _autocast(device: torch.device):
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast("cpu", enabled=False)


def _to(batch: dict, device: torch.device) -> dict:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def _model_inputs(batch: dict) -> dict:
    return {k: batch[k] for k in ("input_ids", "attention_mask", "positions", "token_type_ids")
            if k in batch}


@torch.inference_mode()
def predict(model: GleeModel, split: EncodedSplit, pad_id: int, device: torch.device,
            batch_size: int = 128) -> tuple[np.ndarray, np.ndarray]:
    """Calibrated logits and classifier-input features for every example, in split order."""
    model.eval()
    logits = np.zeros((len(split), model.head.class_weights().shape[0]), dtype=np.float32)
    features = None
    for index in eval_batches(split.lengths, batch_size):
        batch = _to(collate(split, index, pad_id), device)
        with _autocast(device):
            out, feats = model(**_model_inputs(batch), calibrate=True)
        if features is None:
            features = np.zeros((len(split), feats.shape[-1]), dtype=np.float32)
        logits[index] = out.float().cpu().numpy()
        features[index] = feats.float().cpu().numpy()
    return logits, features


def encode_dataset(dataset: LongTailDataset, spec: MethodSpec, tokenizer, config: TrainConfig
                   ) -> dict[str, EncodedSplit]:
    max_length = config.max_length or dataset.max_length
    splits = {}
    for name, frame in dataset.splits.items():
        if name == "train" and config.limit:
            frame = frame.head(config.limit)
        splits[name] = encode(frame, tokenizer, spec.input_format, dataset.template, max_length)
    if len(splits["train"]) == 0:
        raise GleeError(f"{dataset.id}: the training split is empty")
    return splits


def sample_feature_rows(labels: np.ndarray, per_class: int = FEATURES_PER_CLASS) -> np.ndarray:
    """Up to ``per_class`` test rows of every class, the same rows for every method and seed."""
    rng = np.random.default_rng(SPLIT_SEED)
    rows = [rng.permutation(np.flatnonzero(labels == c))[:per_class] for c in np.unique(labels)]
    return np.sort(np.concatenate(rows)) if rows else np.zeros(0, dtype=np.int64)


def train_and_evaluate(dataset: LongTailDataset, spec: MethodSpec, backbone: Backbone,
                       config: TrainConfig, progress: ProgressFn | None = None) -> RunResult:
    """Train ``spec`` on a fresh copy of ``backbone`` and evaluate the best-on-dev weights."""
    progress = progress or (lambda event: None)
    device = resolve_device(config.device)
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    own = replace(backbone, model=copy.deepcopy(backbone.model))  # the pristine copy stays clean
    model = build_model(spec, own, dataset.classes, dataset.verbalizer).to(device)
    tokenizer = own.tokenizer
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    splits = encode_dataset(dataset, spec, tokenizer, config)
    train = splits["train"]

    steps_per_epoch = -(-len(train) // config.batch_size)
    total_steps = steps_per_epoch * config.epochs
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay,
                                  fused=device.type == "cuda")
    from transformers import get_linear_schedule_with_warmup
    scheduler = get_linear_schedule_with_warmup(
        optimizer, int(config.warmup_ratio * total_steps), total_steps)

    history: list[dict] = []
    best_f1, best_state, stale = -1.0, None, 0
    started = time.perf_counter()
    for epoch in range(1, config.epochs + 1):
        model.train()
        epoch_start = time.perf_counter()
        loss_sum = torch.zeros((), device=device)
        batches = length_grouped_batches(train.lengths, config.batch_size, rng)
        for step, index in enumerate(batches, 1):
            batch = _to(collate(train, index, pad_id), device)
            with _autocast(device):
                logits, _ = model(**_model_inputs(batch))
            loss = classification_loss(spec, logits, batch["labels"])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
            optimizer.step()
            scheduler.step()
            loss_sum += loss.detach()
            event = {"stage": "train", "epoch": epoch, "epochs": config.epochs, "step": step,
                     "steps": len(batches)}
            if step % config.log_every == 0 or step == len(batches):
                event["loss"] = float(loss_sum) / step
            progress(event)
        train_seconds = time.perf_counter() - epoch_start
        dev_logits, _ = predict(model, splits["dev"], pad_id, device, config.eval_batch_size)
        dev_pred = dev_logits.argmax(1)
        dev_f1 = macro_f1(splits["dev"].labels, dev_pred, dataset.num_classes)
        record = {"epoch": epoch, "train_loss": float(loss_sum) / len(batches),
                  "dev_f1": dev_f1, "dev_acc": float((dev_pred == splits["dev"].labels).mean()),
                  "train_seconds": round(train_seconds, 3),
                  "seconds": round(time.perf_counter() - epoch_start, 3)}
        history.append(record)
        improved = dev_f1 > best_f1
        if improved:
            best_f1, stale = dev_f1, 0
            best_state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        else:
            stale += 1
        progress({"stage": "eval", **record, "best_dev_f1": best_f1, "epochs": config.epochs})
        if stale >= config.patience:
            break
    train_time = time.perf_counter() - started
    model.load_state_dict(best_state)

    progress({"stage": "test"})
    test = splits["test"]
    test_start = time.perf_counter()
    logits, features = predict(model, test, pad_id, device, config.eval_batch_size)
    test_seconds = time.perf_counter() - test_start
    pred = logits.argmax(1)
    head, tail = dataset.head_tail()
    metrics = classification_metrics(test.labels, pred, dataset.classes, head, tail)
    metrics["best_dev_f1"] = best_f1
    metrics["best_epoch"] = max(history, key=lambda r: r["dev_f1"])["epoch"]
    probs = torch.softmax(torch.from_numpy(logits), dim=1).numpy()
    frame = dataset.splits["test"]
    predictions = pd.DataFrame({
        "text": frame["text"].to_numpy(), "text_b": frame["text_b"].to_numpy(),
        "gold": [dataset.classes[i] for i in test.labels],
        "pred": [dataset.classes[i] for i in pred],
        "confidence": probs.max(1).round(6), "correct": pred == test.labels})
    rows = sample_feature_rows(test.labels)
    seconds_training = sum(r["train_seconds"] for r in history)
    return RunResult(
        metrics=metrics, history=history, predictions=predictions, logits=logits,
        weight_norms=model.class_weight_norms().detach().cpu().tolist(),
        features={"features": features[rows].astype(np.float16), "labels": test.labels[rows],
                  "rows": rows},
        model=model,
        timing={"train_seconds": round(train_time, 3), "test_seconds": round(test_seconds, 3),
                "epochs_run": len(history), "device": str(device),
                "train_examples_per_second":
                    round(len(train) * len(history) / max(seconds_training, 1e-9), 2)})
