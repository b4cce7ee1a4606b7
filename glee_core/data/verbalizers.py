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

TEMPLATE_SLOTS = {"text": "text", "text_a": "text", "text_b": "text_b", "entity": "text_b"}
# Bounds on what a visitor may give as label words and a template (a head averages a class's
# label-word rows, the template is in every input): checked on the characters before anything
# is tokenized, then on the tokens (glee_core.data.encoding.check_prompt_fits).
MAX_WORDS_PER_CLASS = 10
MAX_WORD_CHARS = 50
MAX_TEMPLATE_CHARS = 300
MAX_VERBALIZER_BYTES = 1024 * 1024  # a --verbalizer JSON file (the app's uploader's limit)


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
        words = [value] if isinstance(value, str) else value
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise GleeError(
                f"{source}: class {name!r} has {_kind(value)} where a label word "
                "(a string) or a list of them goes"
            )
        words = [w.strip() for w in words if w.strip()]
        if not words:
            raise GleeError(f"{source}: class {name!r} has no label word")
        if len(words) > MAX_WORDS_PER_CLASS:
            raise GleeError(
                f"{source}: class {name!r} has {len(words)} label words; give at "
                f"most {MAX_WORDS_PER_CLASS}"
            )
        if long := [w for w in words if len(w) > MAX_WORD_CHARS]:
            raise GleeError(
                f"{source}: class {name!r} has a label word of {len(long[0]):,} "
                f"characters ({long[0][:20]!r}...); a label word is a word or a "
                f"few, at most {MAX_WORD_CHARS} characters"
            )
        verbalizer[name] = words
    if missing:
        raise GleeError(
            f"{source}: no label word for class(es) {', '.join(map(repr, missing[:10]))}; "
            'add them to the verbalizer JSON ({"label": "label word", ...})'
        )
    return verbalizer


def _kind(value) -> str:
    """How an error names a JSON value that is not a label word."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, list):
        return "a list holding something other than words"
    return f"a JSON {type(value).__name__.replace('dict', 'object')}"


def read_verbalizer_json(raw: bytes, classes: list[str], source: str) -> dict[str, list[str]]:
    """A verbalizer JSON's bytes (label -> word or list of words) matched to the classes: one
    GleeError for a file too large, not JSON, nested too deep, or holding other values."""
    if len(raw) > MAX_VERBALIZER_BYTES:
        raise GleeError(
            f"{source}: {len(raw) / 2**20:.1f} MB, larger than the "
            f"{MAX_VERBALIZER_BYTES // 2**20} MB a label-word file may be"
        )
    try:
        parsed = json.loads(raw.decode("utf-8-sig"))
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise GleeError(f"{source}: not a JSON object of label -> label word(s) ({exc})") from None
    except RecursionError:
        raise GleeError(
            f"{source}: nested too deep to be label words; give a JSON object of "
            "label -> label word(s)"
        ) from None
    if not isinstance(parsed, dict):
        raise GleeError(f"{source}: expected a JSON object of label -> label word(s)")
    return parse_verbalizer(parsed, classes, source)


def load_verbalizer_file(path: str | os.PathLike, classes: list[str]) -> dict[str, list[str]]:
    """Read a verbalizer JSON file (label -> word or list of words)."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_VERBALIZER_BYTES:
            raise GleeError(
                f"{path}: larger than the {MAX_VERBALIZER_BYTES // 2**20} MB a "
                "label-word file may be"
            )
        raw = path.read_bytes()
    except FileNotFoundError:
        raise GleeError(f"verbalizer file not found: {path}") from None
    except IsADirectoryError:
        raise GleeError(f"{path}: a folder, not a verbalizer JSON file") from None
    return read_verbalizer_json(raw, classes, str(path))


def check_template(template: str) -> str:
    """A template must hold ``[MASK]`` once and a text slot (``{text}`` or ``{text_a}``), in at
    most :data:`MAX_TEMPLATE_CHARS` characters (its tokens are checked against the length a text
    may have by :func:`glee_core.data.encoding.check_prompt_fits`)."""
    if not isinstance(template, str):
        raise GleeError(f"a template is a string, got {template!r}")
    if len(template) > MAX_TEMPLATE_CHARS:
        raise GleeError(
            f"the template has {len(template):,} characters; a template is a "
            f"sentence around {{text}} and [MASK], at most {MAX_TEMPLATE_CHARS}"
        )
    if template.count("[MASK]") != 1:
        raise GleeError(f"template {template!r} must contain [MASK] exactly once")
    slots = re.findall(r"\{(\w+)\}", template)
    repeated = sorted(
        {
            TEMPLATE_SLOTS.get(s, s)
            for s in slots
            if sum(TEMPLATE_SLOTS.get(t, t) == TEMPLATE_SLOTS.get(s, s) for t in slots) > 1
        }
    )
    if repeated:  # each slot holds the whole text: forty of them made inputs forty texts long
        raise GleeError(
            f"template {template!r} has the slot {{{repeated[0]}}} more than once; "
            "give each text slot once"
        )
    unknown = [s for s in slots if s not in TEMPLATE_SLOTS]
    if unknown:
        raise GleeError(
            f"template {template!r} has unknown slot(s) {unknown}; "
            f"use {{text}}, {{text_a}}, {{text_b}} or {{entity}}"
        )
    if not any(TEMPLATE_SLOTS[s] == "text" for s in slots):
        raise GleeError(f"template {template!r} has no text slot: add {{text}}")
    return template


PROMPT_VARIANT = "+prompt-"  # a dataset id's part naming its own template or label words


def prompt_variant(
    template: str,
    verbalizer: dict[str, list[str]],
    own_template: str,
    own_verbalizer: dict[str, list[str]],
) -> str:
    """The ending of a dataset id whose prompt was given in place of its own
    (``+prompt-<digest of the template and label words>``), empty when it is its own: the runs
    of other label words are other runs, never averaged with the dataset's."""
    if template == own_template and verbalizer == own_verbalizer:
        return ""
    given = json.dumps(
        {"template": template, "verbalizer": verbalizer}, sort_keys=True, ensure_ascii=False
    )
    return f"{PROMPT_VARIANT}{hashlib.sha256(given.encode()).hexdigest()[:8]}"


def verbalizer_json(verbalizer: dict[str, list[str]]) -> str:
    """A verbalizer as the JSON file ``--verbalizer`` reads (a word, or a list of several)."""
    return json.dumps(
        {name: words[0] if len(words) == 1 else words for name, words in verbalizer.items()},
        ensure_ascii=False,
        indent=1,
    )
