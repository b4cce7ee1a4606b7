"""Tiny random masked LMs for tests and smoke runs, saved and loaded like any real model."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
from tokenizers.processors import TemplateProcessing
from transformers import (
    BertConfig,
    BertForMaskedLM,
    PreTrainedTokenizerFast,
    RobertaConfig,
    RobertaForMaskedLM,
)

from glee_core.core.errors import GleeError
from glee_core.models.backbone import MLM_HEAD_LAYOUTS


def save_tiny_mlm(
    folder: str | os.PathLike,
    family: str = "bert",
    vocab_words=(),
    seed: int = 0,
    hidden_size: int = 32,
) -> Path:
    """Write a tiny random masked LM + tokenizer to ``folder`` (for tests and smoke runs).

    The vocabulary is the special tokens plus ``vocab_words``; ``family`` is ``bert`` or
    ``roberta``. It is loaded back through :func:`load_backbone` like any model."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    if family == "bert":
        specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        tokens = dict(
            pad_token="[PAD]",
            unk_token="[UNK]",
            cls_token="[CLS]",
            sep_token="[SEP]",
            mask_token="[MASK]",
        )
    elif family == "roberta":
        specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
        tokens = dict(
            bos_token="<s>",
            pad_token="<pad>",
            eos_token="</s>",
            unk_token="<unk>",
            mask_token="<mask>",
            cls_token="<s>",
            sep_token="</s>",
        )
    else:
        raise GleeError(f"tiny model family must be bert or roberta, got {family!r}")
    words = sorted({w.lower() for w in vocab_words} | set(".,?!:;'\"-()/0123456789"))
    vocab = {t: i for i, t in enumerate(specials + [w for w in words if w not in specials])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=tokens["unk_token"]))
    core.normalizer = normalizers.Lowercase()
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]
    )
    cls, sep = tokens["cls_token"], tokens["sep_token"]
    core.post_processor = TemplateProcessing(
        single=f"{cls} $A {sep}",
        pair=f"{cls} $A {sep} $B:1 {sep}:1",
        special_tokens=[(cls, vocab[cls]), (sep, vocab[sep])],
    )
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, model_max_length=512, **tokens)
    if family == "roberta":
        tokenizer.model_input_names = ["input_ids", "attention_mask"]
    common = dict(
        vocab_size=len(vocab),
        hidden_size=hidden_size,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=2 * hidden_size,
        max_position_embeddings=520,
        pad_token_id=vocab[tokens["pad_token"]],
    )
    if family == "bert":
        model = BertForMaskedLM(BertConfig(**common))
    else:
        model = RobertaForMaskedLM(
            RobertaConfig(
                **common, bos_token_id=vocab["<s>"], eos_token_id=vocab["</s>"], type_vocab_size=1
            )
        )
    with torch.no_grad():  # a "pretrained" head: non-trivial LayerNorm so tests can see it copied
        modules = dict(model.named_modules())
        ln = next(modules[c.layer_norm] for c in MLM_HEAD_LAYOUTS if c.layer_norm in modules)
        ln.weight.uniform_(0.5, 1.5)
        ln.bias.uniform_(-0.1, 0.1)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "glee_tiny.json").write_text(json.dumps({"family": family, "seed": seed}))
    return folder


def save_tiny_sentence_encoder(folder: str | os.PathLike, vocab_words=(), seed: int = 0) -> Path:
    """A tiny BERT saved as a sentence-transformers checkpoint trained with mean pooling (its
    ``1_Pooling/config.json`` says so), whose tokens never attend to each other (every
    attention output is zero): its ``[CLS]`` state is the same for every text, its mean-pooled
    state sums the text's words up. Where mean pooling must win, it does."""
    folder = save_tiny_mlm(folder, "bert", vocab_words, seed)
    model = BertForMaskedLM.from_pretrained(folder)
    with torch.no_grad():
        for layer in model.bert.encoder.layer:
            layer.attention.output.dense.weight.zero_()
            layer.attention.output.dense.bias.zero_()
    model.save_pretrained(folder)
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps(
            {
                "word_embedding_dimension": model.config.hidden_size,
                "pooling_mode_cls_token": False,
                "pooling_mode_mean_tokens": True,
                "pooling_mode_max_tokens": False,
            }
        )
    )
    (folder / "modules.json").write_text(
        json.dumps(
            [
                {
                    "idx": 0,
                    "name": "0",
                    "path": "",
                    "type": "sentence_transformers.models.Transformer",
                },
                {
                    "idx": 1,
                    "name": "1",
                    "path": "1_Pooling",
                    "type": "sentence_transformers.models.Pooling",
                },
            ]
        )
    )
    return folder


def dataset_vocabulary(dataset) -> set[str]:
    """Every word and punctuation mark of a dataset's texts and label words (a tiny model built
    on it with :func:`save_tiny_mlm` and the template's words knows every token it needs)."""
    words: set[str] = set()
    for frame in dataset.splits.values():
        for text in frame["text"]:
            words.update(re.findall(r"\w+|[^\w\s]", text.lower()))
    for label_words in dataset.verbalizer.values():
        for word in label_words:
            words.update(word.lower().split())
    return words
