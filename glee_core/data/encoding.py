"""Examples -> token ids, and batches of them.

Two input formats: ``plain`` (the text, or the text pair, as the tokenizer encodes it; the head
reads position 0, ``[CLS]``) and ``prompt`` (the dataset's template with the text filled in; the
head reads the ``[MASK]`` position). Prompt inputs are truncated inside the text slots only, so the
template and its ``[MASK]`` always survive ``max_length``.

Batches are padded to their own longest sequence (dynamic padding) and, for training, drawn from
groups of similar length, so little compute goes to padding; batches drawn class-balanced (cRT, a
contrastive term where a class is rare) mix lengths, and a CPU forwards them in pieces of like
length (:func:`padding_pieces`; :func:`balanced_padding` is what they cost).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ..core.errors import GleeError, first_few
from .verbalizers import TEMPLATE_SLOTS

# A class's label words are averaged into one row: a few tokens each, this many in all
MAX_LABEL_TOKENS = 16


@dataclass
class EncodedSplit:
    """Token ids of one split, unpadded; ``positions`` is where the head reads."""

    input_ids: list[list[int]]
    token_type_ids: list[list[int]] | None
    positions: np.ndarray
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def lengths(self) -> np.ndarray:
        return np.fromiter((len(x) for x in self.input_ids), dtype=np.int64, count=len(self))

    def batch(self, index, pad_id: int, pad_to: int | None = None) -> dict[str, torch.Tensor]:
        return collate(self, index, pad_id, pad_to)

    def subset(self, index) -> EncodedSplit:
        index = list(index)
        return EncodedSplit(
            [self.input_ids[i] for i in index],
            None if self.token_type_ids is None else [self.token_type_ids[i] for i in index],
            self.positions[index],
            self.labels[index],
        )


def encode_plain(
    frame: pd.DataFrame, tokenizer, max_length: int, pairs: bool | None = None
) -> EncodedSplit:
    """``pairs``: read ``text_b`` as a second sequence (None: where any row has one)."""
    texts = frame["text"].tolist()
    if pairs is None:
        pairs = bool(frame["text_b"].astype(bool).any())
    pairs = frame["text_b"].tolist() if pairs else None
    enc = tokenizer(texts, pairs, truncation=True, max_length=max_length)
    return EncodedSplit(
        enc["input_ids"],
        enc.get("token_type_ids"),
        np.zeros(len(texts), dtype=np.int64),
        frame["label"].to_numpy(),
    )


def _template_pieces(template: str) -> list[tuple[str, str]]:
    """``"{text} This is [MASK] ."`` -> [("slot","text"), ("literal"," This is"), ("mask",""), ...]

    Whitespace before ``[MASK]`` is dropped (mask tokens absorb it); a slot that follows a space
    gets the space back as a prefix, which byte-level BPE tokenizers need."""
    pieces: list[tuple[str, str]] = []
    for part in re.split(r"(\{\w+\}|\[MASK\])", template):
        if not part:
            continue
        if part == "[MASK]":
            if pieces and pieces[-1][0] == "literal":
                pieces[-1] = ("literal", pieces[-1][1].rstrip())
            pieces.append(("mask", ""))
        elif part.startswith("{") and part[1:-1] in TEMPLATE_SLOTS:
            pieces.append(("slot", TEMPLATE_SLOTS[part[1:-1]]))
        else:
            pieces.append(("literal", part))
    return [p for p in pieces if p != ("literal", "")]


def _truncate_longest_first(lengths: list[int], budget: int) -> list[int]:
    lengths = list(lengths)
    while sum(lengths) > budget and max(lengths) > 0:
        lengths[int(np.argmax(lengths))] -= 1
    return lengths


def _special_tokens(tokenizer) -> tuple[list[int], list[int]]:
    """The special tokens around a single sequence, read off the tokenizer itself: [CLS] .. [SEP]"""
    mask_id = tokenizer.mask_token_id
    probe = tokenizer(tokenizer.mask_token)["input_ids"]
    return probe[: probe.index(mask_id)], probe[probe.index(mask_id) + 1 :]


def _literal_ids(tokenizer, pieces: list[tuple[str, str]]) -> dict[int, list[int]]:
    return {
        i: tokenizer(value, add_special_tokens=False)["input_ids"]
        for i, (kind, value) in enumerate(pieces)
        if kind == "literal"
    }


def template_tokens(tokenizer, template: str) -> int:
    """The tokens a template takes in every input, the text aside: its words, ``[MASK]`` and
    the special tokens."""
    lead, trail = _special_tokens(tokenizer)
    literal = _literal_ids(tokenizer, _template_pieces(template))
    return sum(len(v) for v in literal.values()) + 1 + len(lead) + len(trail)


def check_template_fits(tokenizer, template: str, max_length: int) -> None:
    """Refuse, before anything is encoded, a template that leaves a text less than a quarter of
    ``max_length`` tokens: a template longer than the backbone's positions failed every input of
    the dataset (a shared dataset's, every visitor's)."""
    fixed, most = template_tokens(tokenizer, template), max_length - max(1, max_length // 4)
    if fixed > most:
        raise GleeError(
            f"the template takes {fixed} tokens of the {max_length} an input may "
            f"have, leaving the text {max(max_length - fixed, 0)}; shorten it to at "
            f"most {most} tokens"
        )


def check_label_tokens(class_tokens: dict[str, list[int]]) -> None:
    """Refuse label words of more than :data:`MAX_LABEL_TOKENS` tokens for a class
    (``class_tokens``: each class's label-word token ids; each class's rows are averaged in
    every step: 150k tokens of words took a quick job from 20 s to 174 s)."""
    long = [
        f"{name!r} ({len(ids)})"
        for name, ids in class_tokens.items()
        if len(ids) > MAX_LABEL_TOKENS
    ]
    if long:
        raise GleeError(
            f"the label words of {first_few(long, 5)} take more than "
            f"{MAX_LABEL_TOKENS} tokens in all (in brackets); give a class a few "
            "short words"
        )


def encode_prompt(frame: pd.DataFrame, tokenizer, template: str, max_length: int) -> EncodedSplit:
    pieces = _template_pieces(template)
    mask_id = tokenizer.mask_token_id
    lead, trail = _special_tokens(tokenizer)
    n_lead, n_special = len(lead), len(lead) + len(trail)
    literal_ids, slot_ids = _literal_ids(tokenizer, pieces), {}
    for i, (kind, value) in enumerate(pieces):
        if kind == "slot":
            after_space = (
                i > 0 and pieces[i - 1][0] == "literal" and pieces[i - 1][1][-1:].isspace()
            )
            values = frame[value].tolist()
            if after_space:
                values = [" " + v for v in values]
            slot_ids[i] = tokenizer(values, add_special_tokens=False)["input_ids"]
    fixed = sum(len(v) for v in literal_ids.values()) + 1 + n_special
    budget = max(max_length - fixed, 1)
    input_ids, positions = [], np.zeros(len(frame), dtype=np.int64)
    slots = list(slot_ids)
    for row in range(len(frame)):
        keep = _truncate_longest_first([len(slot_ids[s][row]) for s in slots], budget)
        body: list[int] = []
        for i, (kind, _) in enumerate(pieces):
            if kind == "literal":
                body.extend(literal_ids[i])
            elif kind == "mask":
                positions[row] = n_lead + len(body)
                body.append(mask_id)
            else:
                body.extend(slot_ids[i][row][: keep[slots.index(i)]])
        input_ids.append(lead + body + trail)
    return EncodedSplit(input_ids, None, positions, frame["label"].to_numpy())


def encode(
    frame: pd.DataFrame,
    tokenizer,
    input_format: str,
    template: str,
    max_length: int,
    pairs: bool | None = None,
) -> EncodedSplit:
    """``pairs`` (the plain input): see :func:`encode_plain`; the template reads each row alone."""
    if input_format == "prompt":
        return encode_prompt(frame, tokenizer, template, max_length)
    return encode_plain(frame, tokenizer, max_length, pairs)


def collate(
    split: EncodedSplit, index, pad_id: int, pad_to: int | None = None
) -> dict[str, torch.Tensor]:
    """Pad the examples at ``index`` to their longest length (or ``pad_to``)."""
    index = list(index)
    seqs = [split.input_ids[i] for i in index]
    width = pad_to or max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    types = (
        None if split.token_type_ids is None else torch.zeros((len(seqs), width), dtype=torch.long)
    )
    for row, i in enumerate(index):
        n = len(seqs[row])
        ids[row, :n] = torch.tensor(seqs[row])
        mask[row, :n] = 1
        if types is not None:
            types[row, :n] = torch.tensor(split.token_type_ids[i])
    batch = {
        "input_ids": ids,
        "attention_mask": mask,
        "positions": torch.as_tensor(split.positions[index]),
        "labels": torch.as_tensor(split.labels[index]),
    }
    if types is not None:
        batch["token_type_ids"] = types
    return batch


def length_grouped_batches(
    lengths: np.ndarray, batch_size: int, generator: np.random.Generator, group_batches: int = 50
) -> list[np.ndarray]:
    """Shuffle, cut into mega-batches of ``group_batches`` batches, sort each by length, split into
    batches, and shuffle the batch order: every example once per epoch, little padding."""
    order = generator.permutation(len(lengths))
    mega = batch_size * group_batches
    batches = []
    for start in range(0, len(order), mega):
        chunk = order[start : start + mega]
        chunk = chunk[np.argsort(-lengths[chunk], kind="stable")]
        batches.extend(chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size))
    return [batches[i] for i in generator.permutation(len(batches))]


def class_balanced_batches(
    labels: np.ndarray, batch_size: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """An epoch of as many examples as the split, drawn with replacement so that every class is
    equally likely (Kang et al. 2020's class-balanced sampling)."""
    counts = np.bincount(labels)
    weights = 1.0 / counts[labels]
    order = rng.choice(len(labels), size=len(labels), replace=True, p=weights / weights.sum())
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def rare_for_pairs(labels: np.ndarray, batch_size: int) -> bool:
    """Is some class so rare that a batch drawn at random seldom holds two of its texts (fewer
    than 2 expected)? Then a contrastive term draws its batches class-balanced."""
    counts = np.bincount(labels)
    counts = counts[counts > 0]
    return bool(counts.min() / counts.sum() * batch_size < 2)


def padding_pieces(index: np.ndarray, lengths: np.ndarray, most: int = 4) -> list[np.ndarray]:
    """A batch (``index``, its texts' ``lengths``) cut into up to ``most`` pieces of like
    length, each padded to its own longest text, where each cut pads at least a fifth fewer
    tokens (a batch drawn at random, not by length, can pad three times its tokens: BENCHMARKS
    "How should I tune?"); else the batch whole."""
    index, lengths = np.asarray(index), np.asarray(lengths)
    order = np.argsort(-lengths, kind="stable")
    best, best_cost = [index], len(index) * int(lengths.max(initial=0))
    for count in range(2, min(most, len(index)) + 1):
        cuts = np.array_split(order, count)
        cost = sum(len(cut) * int(lengths[cut].max()) for cut in cuts)
        if cost < best_cost * 0.8:
            best, best_cost = [index[cut] for cut in cuts], cost
    return best


def balanced_padding(
    lengths: np.ndarray, labels: np.ndarray, batch_size: int, pieces: bool
) -> float:
    """The tokens an epoch of class-balanced batches pads to over those of length-grouped ones
    (``pieces``: either cut as a CPU forwards them): what a step of them costs beside a plain
    one."""
    rng = np.random.default_rng(0)

    def padded(batches, cut) -> int:
        return sum(
            len(piece) * int(lengths[piece].max())
            for batch in batches
            for piece in (padding_pieces(batch, lengths[batch]) if cut else [batch])
        )

    grouped = padded(length_grouped_batches(lengths, batch_size, rng), pieces)
    return padded(class_balanced_batches(labels, batch_size, rng), pieces) / max(grouped, 1)


def eval_batches(lengths: np.ndarray, batch_size: int) -> list[np.ndarray]:
    """Batches of similar length for evaluation (results are put back in order by the caller)."""
    order = np.argsort(-lengths, kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def unknown_token_share(tokenizer, texts: list[str]) -> float:
    """The share of the texts' tokens that the tokenizer maps to its unknown token (0 without
    one): high when a vocabulary does not cover the data's language."""
    unk = tokenizer.unk_token_id
    if unk is None or not texts:
        return 0.0
    ids = [i for row in tokenizer(list(texts), add_special_tokens=False)["input_ids"] for i in row]
    return sum(i == unk for i in ids) / len(ids) if ids else 0.0
