"""Adapted backbone folders (written by :mod:`glee_core.train.adapt`): their record, read without
torch, so the app can list them and say what each is.

``glee_adapted.json`` beside the model says what the backbone was adapted from and on, with what
options, and its held-out masked-LM loss and ``[MASK]`` top-1 accuracy before and after."""

from __future__ import annotations

import json
from pathlib import Path

from ..runs.store import slug

RECORD_FILE = "glee_adapted.json"
FORMAT = "glee-adapted-backbone"


def adapted_folder_name(dataset_id: str, model: str, epochs: int, objective: str = "mlm") -> str:
    """The folder the app adapts ``model`` to ``dataset_id`` into (beside the run store): the
    two slugged, the objective and the epochs, so each adaptation keeps its own."""
    kind = "tapt" if objective == "mlm" else objective
    return f"{slug(dataset_id)}-{slug(model)}-{kind}-{epochs}ep"


def adapted_record(folder: str | Path) -> dict | None:
    """The record of an adapted backbone folder, or None (not one of ours, or unreadable)."""
    path = Path(folder).expanduser() / RECORD_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("format") == FORMAT else None


def adapted_backbones(folder: str | Path) -> list[tuple[Path, dict]]:
    """The adapted backbones in ``folder`` (the app keeps them beside the run store), newest
    first, with their records."""
    folder = Path(folder)
    found = [
        (path, record)
        for path in (folder.iterdir() if folder.is_dir() else [])
        if path.is_dir() and (record := adapted_record(path)) is not None
    ]
    return sorted(found, key=lambda item: item[0].stat().st_mtime, reverse=True)
