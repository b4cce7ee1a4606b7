"""The two objectives of adapting a backbone (``train.adapt``): the masked LM's (BERT's masking,
whole words where a fast tokenizer gives word offsets, with transformers'
``DataCollatorForLanguageModeling``; its loss and ``[MASK]`` top-1 on held-out texts with fixed
masks) and SimCSE's (Gao et al. 2021: each text against itself under two dropout masks, the other
texts of the batch as negatives)."""

from __future__ import annotations

import numpy as np
import torch
from transformers import DataCollatorForLanguageModeling

from ..models.backbone import Backbone
from ..models.options import AdaptOptions

SIMCSE_TEMPERATURE = 0.05  # SimCSE's


def simcse_loss(model, batch: dict[str, torch.Tensor], pooling: str) -> torch.Tensor:
    """Unsupervised SimCSE (Gao et al., EMNLP 2021) on a batch: every text encoded twice in
    training mode (dropout makes the two views differ), pooled as the heads read it, and each
    view's partner found among the batch's other views (cross-entropy over cosine similarity /
    :data:`SIMCSE_TEMPERATURE`)."""
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    views = []
    for _ in range(2):
        states = model.base_model(**inputs).last_hidden_state
        if pooling == "mean":
            mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)
            views.append((states * mask).sum(1) / mask.sum(1).clamp_min(1.0))
        else:
            views.append(states[:, 0])
    first, second = (torch.nn.functional.normalize(v.float(), dim=-1) for v in views)
    similarity = first @ second.T / SIMCSE_TEMPERATURE
    return torch.nn.functional.cross_entropy(
        similarity, torch.arange(len(first), device=similarity.device)
    )


def plain_batch(tokenizer, examples: list[dict]) -> dict[str, torch.Tensor]:
    """Tokenised texts padded to the batch's longest, nothing masked (SimCSE's input)."""
    width = max(len(e["input_ids"]) for e in examples)
    pad = tokenizer.pad_token_id or 0
    ids = [list(e["input_ids"]) + [pad] * (width - len(e["input_ids"])) for e in examples]
    mask = [[1] * len(e["input_ids"]) + [0] * (width - len(e["input_ids"])) for e in examples]
    return {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask)}


@torch.no_grad()
def measure_simcse(model, batches: list[dict], device, pooling: str, seed: int) -> dict:
    """SimCSE's loss on the held-out texts (dropout on, a fixed seed: the same draws before
    and after), the objective's own measure of how far it went."""
    model.train()
    torch.manual_seed(seed)
    losses = [
        float(simcse_loss(model, {k: v.to(device) for k, v in b.items()}, pooling))
        for b in batches
        if len(b["input_ids"]) > 1
    ]
    return {"simcse_loss": float(np.mean(losses)) if losses else None}


class Masker:
    """Tokenised texts -> masked batches (labels -100 where nothing is to be predicted)."""

    def __init__(self, tokenizer, options: AdaptOptions, max_length: int, seed: int):
        self.tokenizer = tokenizer
        self.whole_word = options.whole_word and tokenizer.is_fast
        self.max_length = max_length
        # whole-word masking puts [MASK] on every piece of a chosen word (no random tokens)
        extra = {"mask_replace_prob": 1.0, "random_replace_prob": 0.0} if self.whole_word else {}
        self.collator = DataCollatorForLanguageModeling(
            tokenizer,
            mlm_probability=options.mlm_probability,
            whole_word_mask=self.whole_word,
            seed=seed,
            **extra,
        )

    def encode(self, texts: list[str]) -> list[dict]:
        encoded = self.tokenizer(
            texts,
            truncation=True,
            max_length=self.max_length,
            return_special_tokens_mask=True,
            return_offsets_mapping=self.whole_word,
        )
        keys = ["input_ids", "special_tokens_mask"] + (
            ["offset_mapping"] if self.whole_word else []
        )
        return [{k: encoded[k][i] for k in keys} for i in range(len(texts))]

    def batch(self, examples: list[dict]) -> dict[str, torch.Tensor]:
        """Pad to the batch's longest text, then mask."""
        width = max(len(e["input_ids"]) for e in examples)
        pad = self.tokenizer.pad_token_id or 0
        padded = []
        for e in examples:
            n = width - len(e["input_ids"])
            row = {
                "input_ids": list(e["input_ids"]) + [pad] * n,
                "attention_mask": [1] * len(e["input_ids"]) + [0] * n,
                "special_tokens_mask": list(e["special_tokens_mask"]) + [1] * n,
            }
            if self.whole_word:
                row["offset_mapping"] = [list(o) for o in e["offset_mapping"]] + [[0, 0]] * n
            padded.append(row)
        return self.collator(padded)


def masked_logits(
    backbone: Backbone, batch: dict[str, torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    """The MLM head's vocabulary logits at the masked positions only, and their labels: the
    decoder (hidden x vocabulary) runs on ~15% of the tokens instead of all of them."""
    states = backbone.model.base_model(
        input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
    ).last_hidden_state
    chosen = batch["labels"] != -100
    hidden = backbone.mlm_layer_norm(backbone.mlm_activation(backbone.mlm_dense(states[chosen])))
    return backbone.mlm_decoder(hidden).float(), batch["labels"][chosen]


@torch.no_grad()
def measure(
    backbone: Backbone, batches: list[dict[str, torch.Tensor]], device: torch.device
) -> dict:
    """Masked-LM loss and ``[MASK]`` top-1 accuracy over fixed masked batches."""
    backbone.model.eval()
    loss_sum, correct, total = 0.0, 0, 0
    for batch in batches:
        logits, labels = masked_logits(backbone, {k: v.to(device) for k, v in batch.items()})
        loss_sum += float(torch.nn.functional.cross_entropy(logits, labels, reduction="sum"))
        correct += int((logits.argmax(-1) == labels).sum())
        total += len(labels)
    return {
        "mlm_loss": loss_sum / total if total else None,
        "mask_top1": correct / total if total else None,
        "masked_tokens": total,
    }
