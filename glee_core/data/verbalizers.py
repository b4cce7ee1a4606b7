"""Prompt templates and verbalizers: a class name's label words, a verbalizer file matched to
the classes, and the checks a template must pass."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

from ..core.errors import GleeError

__all__ = [  # what this module offers (the app's door, glee_core.studio, reads it)
    "PROMPT_VARIANT",
    "TEMPLATE_SLOTS",
    "check_template",
    "derive_verbalizer",
    "label_words_from_name",
    "load_verbalizer_file",
    "parse_verbalizer",
    "prompt_variant",
    "verbalizer_json",
]

TEMPLATE_SLOTS = {"text": "text", "text_a": "text", "text_b": "text_b", "entity": "text_b"}


def label_words_from_name(label: str) -> str:
    """Derive a label word from a class name: split on ``-``, ``_``, ``/`` and spaces."""
    words = [w for w in re.split(r"[-_/\s]+", str(label)) if w]
    return " ".join(words) or str(label)


def derive_verbalizer(classes: list[str]) -> dict[str, list[str]]:
    return {c: [label_words_from_name(c)] for c in classes}


def parse_verbalizer(raw: Mapping, classes: list[str], source: str) -> dict[str, list[str]]:
    """Match a ``{label: word(s)}`` mapping to the classes (case-insensitively, as boolq needs)."""
    by_key = {str(k).strip().lower(): v for k, v in raw.items()}
    verbalizer, missing = {}, []
    for name in classes:
        value = by_key.get(name.strip().lower())
        if value is None:
            missing.append(name)
            continue
        words = [value] if isinstance(value, str) else list(value)
        words = [str(w).strip() for w in words if str(w).strip()]
        if not words:
            raise GleeError(f"{source}: class {name!r} has no label word")
        verbalizer[name] = words
    if missing:
        raise GleeError(
            f"{source}: no label word for class(es) {', '.join(map(repr, missing[:10]))}; "
            "add them to the verbalizer JSON ({\"label\": \"label word\", ...})")
    return verbalizer


def load_verbalizer_file(path: str | os.PathLike, classes: list[str]) -> dict[str, list[str]]:
    """Read a verbalizer JSON file (label -> word or list of words)."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise GleeError(f"verbalizer file not found: {path}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise GleeError(f"{path}: not a JSON object of label -> label word ({exc})") from None
    if not isinstance(raw, dict):
        raise GleeError(f"{path}: expected a JSON object of label -> label word")
    return parse_verbalizer(raw, classes, str(path))


def check_template(template: str) -> str:
    """A template must hold ``[MASK]`` once and a text slot (``{text}`` or ``{text_a}``)."""
    if template.count("[MASK]") != 1:
        raise GleeError(f"template {template!r} must contain [MASK] exactly once")
    slots = re.findall(r"\{(\w+)\}", template)
    unknown = [s for s in slots if s not in TEMPLATE_SLOTS]
    if unknown:
        raise GleeError(f"template {template!r} has unknown slot(s) {unknown}; "
                        f"use {{text}}, {{text_a}}, {{text_b}} or {{entity}}")
    if not any(TEMPLATE_SLOTS[s] == "text" for s in slots):
        raise GleeError(f"template {template!r} has no text slot: add {{text}}")
    return template


PROMPT_VARIANT = "+prompt-"  # a dataset id's part naming its own template or label words


def prompt_variant(template: str, verbalizer: dict[str, list[str]], own_template: str,
                   own_verbalizer: dict[str, list[str]]) -> str:
    """The ending of a dataset id whose prompt was given in place of its own
    (``+prompt-<digest of the template and label words>``), empty when it is its own: the runs
    of other label words are other runs, never averaged with the dataset's."""
    if template == own_template and verbalizer == own_verbalizer:
        return ""
    given = json.dumps({"template": template, "verbalizer": verbalizer}, sort_keys=True,
                       ensure_ascii=False)
    return f"{PROMPT_VARIANT}{hashlib.sha256(given.encode()).hexdigest()[:8]}"


def verbalizer_json(verbalizer: dict[str, list[str]]) -> str:
    """A verbalizer as the JSON file ``--verbalizer`` reads (a word, or a list of several)."""
    return json.dumps({name: words[0] if len(words) == 1 else words
                       for name, words in verbalizer.items()}, ensure_ascii=False, indent=1)
