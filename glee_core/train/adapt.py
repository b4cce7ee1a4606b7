"""Task-adaptive pretraining (TAPT; Gururangan et al., "Don't Stop Pretraining", ACL 2020):
continue the masked-LM objective on the task's own texts, the MLM head trained with the encoder,
and write a backbone folder that ``--model DIR`` loads.

The texts are the training split's (never dev or test) plus an optional file of unlabelled
texts; a share of the training texts is held out to measure, before and after, the masked-LM
loss and the ``[MASK]`` top-1 accuracy (the same masks both times). Masking is BERT's: 15% of
the tokens, whole words where a fast tokenizer gives word offsets (transformers'
``DataCollatorForLanguageModeling``). A run killed midway resumes from its last finished epoch
(``.<out>.partial/``), and the folder appears only when the adaptation is complete.

The backbone folder holds the model (``save_pretrained``), its tokenizer and ``glee_adapted.json``:
what it was adapted from and on, and the measures.

Its loop is its own, not the trainer's (:mod:`glee_core.train.loop`): it trains the whole masked LM
on fresh random masks drawn per batch, has no classes, no dev selection or early stopping and no
learning-rate search, and saves a checkpoint per epoch to resume from; what the two share (the
fused AdamW, autocast, clipping) comes from ``core.devices``."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from transformers import get_linear_schedule_with_warmup

from .. import __version__
from ..core.devices import (
    adamw,
    autocast,
    clipped_step,
    grad_scaler,
    resolve_device,
    resolve_precision,
    scaled_backward,
)
from ..core.errors import GleeError, one_line
from ..core.events import Note, ProgressFn, TrainStep
from ..core.files import write_json
from ..data.datasets import LongTailDataset
from ..data.encoding import length_grouped_batches
from ..models.backbone import load_backbone, trained_pooling
from ..models.options import AdaptOptions
from .adapt_objectives import (
    Masker,
    masked_logits,
    measure,
    measure_simcse,
    plain_batch,
    simcse_loss,
)
from .adapted import FORMAT, RECORD_FILE

WARMUP = 0.06  # TAPT's
WEIGHT_DECAY = 0.01
MAX_GRAD_NORM = 1.0


def read_texts_file(path: str | Path) -> list[str]:
    """Unlabelled texts, one a line (blank lines skipped), or a CSV with a text column (the
    pool's reader: the same file as ``suggest --pool``); a clear error when unreadable."""
    path = Path(path).expanduser()
    if path.suffix.lower() in (".csv", ".tsv"):
        from ..pool.files import read_pool  # noqa: PLC0415 (pandas)

        pool, _ = read_pool(str(path))
        return [t for t in pool["text"].astype(str).tolist() if t.strip()]
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise GleeError(f"--texts {path}: no such file") from None
    except UnicodeDecodeError:
        raise GleeError(f"--texts {path}: not UTF-8 text (one text a line)") from None
    except OSError as exc:
        raise GleeError(f"--texts {path}: cannot read it ({exc.strerror})") from None
    texts = [line.strip() for line in lines if line.strip()]
    if not texts:
        raise GleeError(f"--texts {path}: no text in it (one text a line)")
    return texts


def training_texts(dataset: LongTailDataset) -> list[str]:
    """The training split's texts (a pair's second text after its first): never dev or test."""
    frame = dataset.splits["train"]
    texts = frame["text"].astype(str).tolist()
    if "text_b" in frame and frame["text_b"].astype(str).str.strip().any():
        texts = [
            f"{a} {b}".strip() for a, b in zip(texts, frame["text_b"].astype(str), strict=True)
        ]
    return [t for t in texts if t.strip()]


def _inputs_key(model_name: str, fingerprint: str, texts: list[str], options: AdaptOptions) -> str:
    """What a partial adaptation must match to be resumed: the backbone, the texts, the options."""
    digest = hashlib.sha256()
    # where and how fast it runs is not what it computes: a killed CPU run resumes on a GPU
    kept = {k: v for k, v in asdict(options).items() if k not in ("out", "device", "precision")}
    digest.update(json.dumps([model_name, fingerprint, kept], sort_keys=True).encode())
    for text in texts:
        digest.update(text.encode("utf-8", "replace") + b"\0")
    return digest.hexdigest()[:16]


def adapt(
    dataset: LongTailDataset,
    model_name: str,
    options: AdaptOptions,
    progress: ProgressFn | None = None,
) -> dict:
    """Adapt ``model_name`` to ``dataset``'s texts and write it to ``options.out``; returns the
    record written beside it."""
    progress = progress or (lambda event: None)
    out = Path(options.out).expanduser()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise GleeError(f"{out} exists and is not an empty folder; choose a new --out")
    texts = training_texts(dataset)
    extra = read_texts_file(options.texts) if options.texts else []
    if len(texts) < 2:
        raise GleeError(f"{dataset.id}: {len(texts)} training text(s): too few to adapt on")
    order = np.random.default_rng(options.seed).permutation(len(texts))
    n_held = int(round(options.held_out * len(texts)))
    held = [texts[i] for i in order[:n_held]]
    train_texts = [texts[i] for i in order[n_held:]] + extra
    run = _Adaptation(model_name, options, options.max_length or dataset.max_length, progress)
    run.prepare(train_texts, held)
    partial = out.with_name(f".{out.name}.partial")
    key = _inputs_key(
        model_name, run.backbone.fingerprint, train_texts + ["\0held"] + held, options
    )
    state = _resume(partial, key, run)
    if state is None:
        state = {"key": key, "epoch": 0, "before": run.held_measure(), "losses": [], "seconds": 0.0}
    else:
        progress(
            Note(message=f"resuming after epoch {state['epoch']} of {options.epochs} ({partial})")
        )
    for epoch in range(state["epoch"] + 1, options.epochs + 1):
        started = time.perf_counter()
        loss = run.train_epoch(epoch)
        state.update(epoch=epoch, seconds=state["seconds"] + time.perf_counter() - started)
        state["losses"].append(loss)
        _checkpoint(partial, state, run)
    record = run.record(dataset, (len(texts), len(held)), extra, state)
    run.write(out, record)
    shutil.rmtree(partial, ignore_errors=True)
    return record


class _Adaptation:
    """One adaptation's model (masked LM, or the encoder alone for SimCSE), masker, optimiser
    and schedule on its device: its texts encoded once, an epoch trained, the held-out texts
    measured (the same masks each time), its record and its folder."""

    def __init__(self, model_name: str, options: AdaptOptions, max_length: int, progress):
        self.model_name, self.options, self.progress = model_name, options, progress
        self.backbone = load_backbone(model_name)
        self.device = resolve_device(options.device)
        self.precision = resolve_precision(options.precision, self.device)
        self.scaler = grad_scaler(self.device, self.precision)
        self.model = self.backbone.model.to(self.device)
        self.simcse = options.objective == "simcse"
        self.model.requires_grad_(not self.simcse)  # masked LM: the MLM head trains too
        self.model.base_model.requires_grad_(True)
        self.pooling = trained_pooling(model_name) or "cls"  # what the heads read of it
        self.masker = Masker(self.backbone.tokenizer, options, max_length, options.seed)
        if options.whole_word and not self.masker.whole_word:
            progress(
                Note(
                    message="warning: the tokenizer gives no word offsets (not a fast "
                    "tokenizer): tokens are masked one by one"
                )
            )

    def prepare(self, train_texts: list[str], held: list[str]) -> None:
        """The training texts encoded, the held-out ones batched with fixed masks (made once),
        and the optimiser and schedule over the epochs' steps."""
        options, masker, tokenizer = self.options, self.masker, self.backbone.tokenizer
        self.examples = masker.encode(train_texts)
        size = options.batch_size
        pieces = [masker.encode(held[i : i + size]) for i in range(0, len(held), size)]
        self.held_batches = [masker.batch(piece) for piece in pieces]
        self.held_plain = [plain_batch(tokenizer, piece) for piece in pieces]
        self.lengths = np.array([len(e["input_ids"]) for e in self.examples])
        self.steps_per_epoch = math.ceil(len(self.examples) / size)
        self.total = self.steps_per_epoch * options.epochs
        self.optimizer = adamw(
            self.model.parameters(), self.device, lr=options.lr, weight_decay=WEIGHT_DECAY
        )
        self.scheduler = get_linear_schedule_with_warmup(
            self.optimizer, int(WARMUP * self.total), self.total
        )

    def held_measure(self) -> dict:
        if not self.held_batches:
            return {}
        found = measure(self.backbone, self.held_batches, self.device)
        if self.simcse:
            found.update(
                measure_simcse(
                    self.model, self.held_plain, self.device, self.pooling, self.options.seed
                )
            )
        return found

    def train_epoch(self, epoch: int) -> float:
        """One epoch; its mean loss a step."""
        options, model = self.options, self.model
        model.train()
        torch.manual_seed(options.seed + epoch)  # dropout: a resumed epoch is the same epoch
        # texts of like length together (as training batches them): a batch is padded to its
        # longest text, and random batches of demo's texts were 3/4 padding
        batches = length_grouped_batches(
            self.lengths, options.batch_size, np.random.default_rng(options.seed + epoch)
        )
        loss_sum = 0.0
        for step, rows in enumerate(batches):
            chosen = [self.examples[i] for i in rows]
            if self.simcse and len(chosen) < 2:  # a batch of one has no other text to tell apart
                continue
            made = (
                plain_batch(self.backbone.tokenizer, chosen)
                if self.simcse
                else self.masker.batch(chosen)
            )
            batch = {k: v.to(self.device) for k, v in made.items()}
            with autocast(self.device, self.precision):
                loss = (
                    simcse_loss(model, batch, self.pooling)
                    if self.simcse
                    else torch.nn.functional.cross_entropy(*masked_logits(self.backbone, batch))
                )
            scaled_backward(loss, self.scaler)
            clipped_step(self.optimizer, model.parameters(), MAX_GRAD_NORM, self.scaler)
            self.scheduler.step()
            self.optimizer.zero_grad(set_to_none=True)
            loss_sum += float(loss.detach())
            self.progress(
                TrainStep(
                    epoch=epoch,
                    epochs=options.epochs,
                    step=step + 1,
                    steps=self.steps_per_epoch,
                    loss=loss_sum / (step + 1),
                )
            )
        return loss_sum / self.steps_per_epoch

    def record(
        self, dataset: LongTailDataset, sizes: tuple[int, int], extra: list[str], state: dict
    ) -> dict:
        """What the folder's ``glee_adapted.json`` says: what was adapted from and on (``sizes``:
        the training texts and those held out), with what, and the measures before and after."""
        options, backbone = self.options, self.backbone
        return {
            "format": FORMAT,
            "glee_core": __version__,
            "adapted_from": {
                "name": self.model_name,
                "fingerprint": backbone.fingerprint,
                "mlm_head_pretrained": backbone.mlm_head_pretrained,
            },
            "dataset": {
                "id": dataset.id,
                "fingerprint": dataset.fingerprint(),
                "training_texts": sizes[0],
                "held_out": sizes[1],
            },
            "extra_texts": (
                {
                    "file": Path(options.texts).name,
                    "texts": len(extra),
                    "sha256": hashlib.sha256("\n".join(extra).encode()).hexdigest()[:16],
                }
                if options.texts
                else None
            ),
            "options": {k: v for k, v in asdict(options).items() if k not in ("out", "texts")},
            "whole_word_masking": self.masker.whole_word,
            "steps": self.total,
            "precision": self.precision,
            "tokens_per_epoch": int(self.lengths.sum()),  # what a rate of this run is measured in
            "trainable_parameters": sum(
                p.numel() for p in self.model.parameters() if p.requires_grad
            ),
            "train_loss_per_epoch": state["losses"],
            "seconds": round(state["seconds"], 3),
            "held_out_before": state["before"],
            "held_out_after": self.held_measure(),
            # trained here, on these texts (SimCSE leaves the MLM head as it came)
            "mlm_head_pretrained": True if not self.simcse else backbone.mlm_head_pretrained,
            "objective": options.objective,
            **({"pooling": self.pooling} if self.simcse else {}),
        }

    def write(self, out: Path, record: dict) -> None:
        """The adapted backbone's folder, whole or not at all."""
        tmp = out.with_name(f".{out.name}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            self.model.to("cpu").save_pretrained(tmp, safe_serialization=True)
            self.backbone.tokenizer.save_pretrained(tmp)
            write_json(tmp / RECORD_FILE, record)
            if trained_pooling(self.model_name):  # a sentence encoder's pooling goes with it
                (tmp / "1_Pooling").mkdir()
                write_json(
                    tmp / "1_Pooling" / "config.json",
                    {
                        "pooling_mode_mean_tokens": self.pooling == "mean",
                        "pooling_mode_cls_token": self.pooling == "cls",
                    },
                )
            if out.exists():
                out.rmdir()  # an empty folder the user made
            tmp.rename(out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise


def _checkpoint(partial: Path, state: dict, run: _Adaptation) -> None:
    """The state after a finished epoch (``run``'s model, optimiser, schedule and masks), written
    whole or not at all."""
    masker = run.masker
    tmp = partial.with_name(partial.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    torch.save(
        {
            "model": run.model.state_dict(),
            "optimizer": run.optimizer.state_dict(),
            "scheduler": run.scheduler.state_dict(),
            "collator_rng": (
                masker.collator.generator.get_state()
                if masker.collator.generator is not None
                else None
            ),
        },
        tmp / "state.pt",
    )
    write_json(tmp / "state.json", state)
    shutil.rmtree(partial, ignore_errors=True)
    tmp.rename(partial)


def _resume(partial: Path, key: str, run: _Adaptation) -> dict | None:
    """The state of a partial adaptation of the same inputs, loaded into ``run``'s model,
    optimizer, schedule and masker; None when there is none. One of other inputs is an error
    (nothing deleted); a damaged one (unreadable, of the wrong shape) is set aside as
    ``.damaged`` and an error says so: the next run starts anew."""
    if not (partial / "state.json").is_file():
        return None
    try:
        state = json.loads((partial / "state.json").read_text(encoding="utf-8"))
        if (
            not isinstance(state, dict)
            or not isinstance(state.get("epoch"), int)
            or not isinstance(state.get("losses"), list)
        ):
            raise ValueError("state.json is not an adaptation's state")
        if state.get("key") != key:
            raise GleeError(
                f"{partial} holds a partial adaptation of other texts, backbone or "
                "options: delete it, or run again with the same ones to resume"
            )
        saved = torch.load(partial / "state.pt", map_location="cpu", weights_only=True)
        run.model.load_state_dict(saved["model"])
        run.optimizer.load_state_dict(saved["optimizer"])
        run.scheduler.load_state_dict(saved["scheduler"])
        if saved.get("collator_rng") is not None:
            run.masker.collator.create_rng()
            run.masker.collator.generator.set_state(saved["collator_rng"])
    except GleeError:
        raise
    except Exception as exc:  # noqa: BLE001 (torch's unpickling, shapes, keys: each is damage)
        aside = partial.with_name(partial.name + ".damaged")
        shutil.rmtree(aside, ignore_errors=True)
        partial.replace(aside)
        raise GleeError(
            f"{partial}: a partial adaptation that cannot be read ({one_line(exc)}); "
            f"set aside as {aside.name}: run again to start anew"
        ) from None
    return state
