"""A stored JSON value read as the type its record says, or a :class:`RecordError` naming the
field and what it held instead ("the text 'oops'", "a list of 3"): what every typed record of a
run (``record``, ``run_parts``, ``runfiles``) reads its files with. No torch, no numpy."""

from __future__ import annotations

from ..core.errors import GleeError


class RecordError(GleeError):
    """A stored file parses but does not hold what its record says (a field missing, of the
    wrong type, or naming a class the run does not have)."""


def mapping(value, where: str) -> dict:
    if not isinstance(value, dict):
        raise RecordError(f"{where} is {described(value)}, not a mapping")
    return value


def number(value, where: str, optional: bool = False) -> float | None:
    """A JSON number (NaN allowed: a macro average over no class); None only if ``optional``."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RecordError(f"{where} is {described(value)}, not a number")
    return float(value)


def integer(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise RecordError(f"{where} is {described(value)}, not a whole number")
    return int(value)


def strings(value, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RecordError(f"{where} is {described(value)}, not a list of names")
    return value


def described(value) -> str:
    """What a JSON value is, in words: ``null``, ``the text 'oops'``, ``a list`` ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (dict, list)):
        return "a mapping" if isinstance(value, dict) else f"a list of {len(value)}"
    text = repr(value)
    text = text[:40] + "…" if len(text) > 40 else text
    return f"the {'text' if isinstance(value, str) else 'number'} {text}"
