"""The checks a launch needs the backbone for, made before anything trains: a supervised
contrastive batch that can hold a class twice, LoRA's target layers, each run's length within the
positions the backbone reads (a template's words and a prefix's virtual tokens counted), the label
words in its vocabulary, and how much of the data it reads as unknown."""

from __future__ import annotations

import torch

from ..core.errors import GleeError
from ..data.datasets import LongTailDataset
from ..data.encoding import check_label_tokens, check_template_fits, unknown_token_share
from ..models.backbone import Backbone
from ..models.heads import head_of, label_word_token_ids
from ..models.methods import METHODS, MethodSpec
from ..models.scoring import get_backbone
from ..runs.notes import vocabulary_note
from ..runs.store import RunStore
from .plan import PlannedRun

UNKNOWN_SHARE_WARNING = 0.05
VOCABULARY_SAMPLE = 500


def preflight(
    dataset: LongTailDataset,
    plan: list[PlannedRun],
    model_name: str,
    store: RunStore,
    force: bool = False,
) -> list[str]:
    """Checks that need the backbone, made before anything trains (and only when something
    will): the verbalizer's label words must be in its vocabulary (an error naming them), and a
    vocabulary that maps much of the data to the unknown token earns a note (returned)."""
    pending = [p for p in plan if force or store.get(p.run_id) is None]
    if not pending:
        return []
    _check_supcon_batches(pending, dataset.num_classes)
    backbone = get_backbone(model_name)
    tokenizer = backbone.tokenizer
    _check_lora_targets(pending, backbone, model_name)
    _check_lengths(pending, dataset, backbone, model_name)
    if any(head_of(p.spec).verbalizer for p in pending):
        ids = label_word_token_ids(tokenizer, dataset.verbalizer, dataset.classes)
        check_label_tokens(dict(zip(dataset.classes, ids, strict=True)))
    share = unknown_token_share(
        tokenizer, dataset.splits["train"]["text"].head(VOCABULARY_SAMPLE).tolist()
    )
    if share <= UNKNOWN_SHARE_WARNING:
        return []
    return [vocabulary_note(share, dataset.id, VOCABULARY_SAMPLE, model_name, dataset.language)]


def backbone_positions(backbone: Backbone) -> int | None:
    """The most tokens an input to ``backbone`` may have: its tokenizer's limit where it says
    one (RoBERTa's 514 positions read 512 tokens), else its position embeddings."""
    said = backbone.tokenizer.model_max_length
    positions = getattr(backbone.model.config, "max_position_embeddings", None)
    known = [n for n in (said if said and said < 1_000_000 else None, positions) if n]
    return min(known) if known else None


def label_word_methods() -> list[MethodSpec]:
    """The methods whose head scores label words at [MASK]: what a vocabulary must read."""
    return [m for m in METHODS.values() if head_of(m).verbalizer]


def _check_supcon_batches(pending: list[PlannedRun], classes: int) -> None:
    for batch in sorted({p.config.batch_size for p in pending if p.config.supcon}):
        if batch <= classes:  # class-balanced batches of it hold one text of a class at most
            raise GleeError(
                f"--supcon draws each text toward others of its class in the batch, and a "
                f"batch of {batch} holds about one text of each of the {classes} classes: give "
                f"--batch-size {2 * classes} or more, or leave out --supcon"
            )


def _check_lora_targets(pending: list[PlannedRun], backbone: Backbone, model_name: str) -> None:
    """Before any training: peft's own error comes after minutes, as a traceback."""
    targets = {
        t.strip()
        for p in pending
        if p.config.lora_targets
        for t in p.config.lora_targets.split(",")
        if t.strip()
    }
    if not targets:
        return
    names = {
        name.rsplit(".", 1)[-1]
        for name, module in backbone.model.base_model.named_modules()
        if isinstance(module, torch.nn.Linear)
    }
    unknown = sorted(targets - names)
    if unknown:
        raise GleeError(
            f"--lora-targets: {model_name!r} has no linear layer named "
            f"{', '.join(repr(u) for u in unknown)}; its are: "
            f"{', '.join(sorted(names))}"
        )


def _check_lengths(
    pending: list[PlannedRun], dataset: LongTailDataset, backbone: Backbone, model_name: str
) -> None:
    """Each run's max length within the positions the backbone reads, its template's words and
    prefix of virtual tokens included (a traceback mid-run, else)."""
    positions = backbone_positions(backbone)
    for length in sorted({p.config.max_length for p in pending}):
        if positions and length > positions:
            raise GleeError(
                f"--max-length {length} is longer than the {positions} positions "
                f"{model_name!r} reads; give at most {positions}"
            )
        if any(p.spec.input_format == "prompt" for p in pending):
            check_template_fits(backbone.tokenizer, dataset.template, length)
    embedded = getattr(backbone.model.config, "max_position_embeddings", None)
    for p in pending:  # each run's prefix before its own texts' tokens: a traceback mid-run, else
        taken, length = p.config.tuning.positions_taken(p.config), p.config.max_length
        if taken and embedded and length + taken > embedded:
            fix = (
                f"give --max-length {embedded - taken} or less, or a shorter --prefix-length"
                if taken < embedded - 8
                else f"give a --prefix-length well under {embedded}"
            )
            raise GleeError(
                f"--max-length {length} and a prefix of {taken} virtual tokens need "
                f"{length + taken} positions; {model_name!r} has {embedded}: {fix}"
            )
