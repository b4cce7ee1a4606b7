"""Every option declared once, as a dataclass field carrying what the command line needs:
:func:`option` (help, choices, flag, protocol form), :func:`add_arguments` (the flags derived
from a dataclass's fields), :func:`from_args` (the dataclass back from the flags), and
:func:`help_of` / :func:`default_of` (what the app's widgets show). ``config.TrainConfig`` and the
options of ``options`` are declared with it. Imports neither torch nor pandas (``--help`` stays
fast; transformers' ``HfArgumentParser`` does the same but costs ~1.7 s to import)."""

from __future__ import annotations

import argparse
from dataclasses import MISSING, field, fields
from functools import cache
from typing import Any

from ..core.errors import GleeError
from .tuning import Setting


def option(
    default: Any,
    help: str,
    *,
    choices: tuple | None = None,
    flag: str | tuple[str, ...] | None = None,
    cli: bool = True,
    protocol: str | None = None,
    finetune_only: bool = False,
    modes: tuple[str, ...] | None = None,
    label: str | None = None,
    low: float | None = None,
    high: float | None = None,
    above: bool = False,
    below: bool = False,
    step: float | None = None,
    off: int | float | None = None,
    **kwargs,
) -> Any:
    """A dataclass field carrying what the command line and the app need: help, choices, flag
    name, and its bounds and the Train page's label (what a mode's ``Setting`` carries).

    ``protocol`` is how the value reads in a run's protocol line (``"{} ep"``) when it departs
    from the default (or always, for the fields every protocol line shows); ``finetune_only``
    fields mean nothing to quick mode, whose protocol lines leave them out; ``modes`` names the
    only modes a field applies to (given with another, it is an error; their protocol lines
    always show it). ``low`` / ``high``: the bounds a given value is checked against
    (``above`` / ``below``: that bound excluded), the app's widget's too; ``label``, ``step``
    and ``off`` (the widget's value meaning "not set": 0 for a switch that is off): the Train
    page's widget (:func:`setting_of` makes the ``Setting`` it draws)."""
    meta = {
        "help": help,
        "choices": choices,
        "flag": flag,
        "cli": cli,
        "protocol": protocol,
        "finetune_only": finetune_only,
        "modes": modes,
        "label": label,
        "low": low,
        "high": high,
        "above": above,
        "below": below,
        "step": step,
        "off": off,
    }
    if callable(default):
        return field(default_factory=default, metadata=meta, **kwargs)
    return field(default=default, metadata=meta, **kwargs)


def _boolean(text: str, flag: str) -> bool:
    value = str(text).strip().lower()
    if value in ("yes", "true", "on", "1"):
        return True
    if value in ("no", "false", "off", "0"):
        return False
    raise GleeError(f"{flag} must be yes or no, got {text!r}")


def _type_of(f) -> type:
    """int, float or str from a field's annotation (``"int | None"`` with postponed ones)."""
    annotation = str(f.type)
    if annotation.startswith("bool"):  # --lp-ft yes|no (TrainConfig checks the word)
        return str
    for name, kind in (("int", int), ("float", float)):
        if annotation.split(" ")[0] == name:
            return kind
    return str


def add_arguments(
    parser: argparse.ArgumentParser,
    cls: type,
    only: tuple[str, ...] | None = None,
    help_overrides: dict[str, str] | None = None,
    show_defaults: bool = True,
    optional: bool = False,
) -> None:
    """One flag per field of ``cls`` (``--batch-size`` for ``batch_size``), with its help,
    choices and default. Unset flags stay unset (``SUPPRESS``), so the dataclass's own default
    applies: each default has one home, the field. ``optional`` makes required fields optional
    (when another flag can supply them)."""
    for f in fields(cls):
        if not f.metadata.get("cli", True) or (only is not None and f.name not in only):
            continue
        flags = f.metadata.get("flag") or f"--{f.name.replace('_', '-')}"
        flags = (flags,) if isinstance(flags, str) else flags
        text = (help_overrides or {}).get(f.name, f.metadata.get("help", ""))
        if show_defaults and f.default not in (None, MISSING):
            text += f" (default {f.default})"
        kwargs: dict[str, Any] = {
            "dest": f.name,
            "help": text,
            "type": _type_of(f),
            "default": argparse.SUPPRESS,
        }
        if f.default is MISSING and f.default_factory is MISSING and not optional:
            kwargs["required"] = True
        if f.metadata.get("choices"):
            kwargs["choices"] = f.metadata["choices"]
        parser.add_argument(*flags, **kwargs)


def help_of(cls: type, name: str) -> str:
    """A field's help text (the app's widgets show the same words as the CLI's flags)."""
    return next(f.metadata.get("help", "") for f in fields(cls) if f.name == name)


def default_of(cls: type, name: str) -> Any:
    """A field's default (the app's widgets start where the CLI's flags do)."""
    return next(f.default for f in fields(cls) if f.name == name)


def setting_of(cls: type, name: str, default: Any = MISSING) -> Setting:
    """The :class:`~glee_core.models.tuning.Setting` a field declares (its label, bounds, step,
    "off" value, help): what the app draws its widget from and what checks a given value, one
    declaration for both. ``default``: the widget's start where it is not the field's (the
    dataset's batch size)."""
    f = next(f for f in fields(cls) if f.name == name)
    meta = f.metadata
    kind = _type_of(f)
    start = f.default if default is MISSING else default
    return Setting(
        field=name,
        label=meta.get("label") or name.replace("_", " ").capitalize(),
        default=meta.get("off") if start is None else start,
        low=meta.get("low"),
        high=meta.get("high"),
        above=meta.get("above", False),
        below=meta.get("below", False),
        of=kind if kind in (int, float) else None,
        step=meta.get("step") or 1,
        help=meta.get("help", ""),
        choices=tuple(meta.get("choices") or ()),
        off=meta.get("off"),
    )


def check_bounds(instance) -> None:
    """Every field of a dataclass declared with bounds (``option(low=..., high=...)``) within
    them, else a GleeError naming the flag and the bound."""
    for setting in _bounded(type(instance)):
        setting.check(getattr(instance, setting.field))


@cache
def _bounded(cls: type) -> tuple[Setting, ...]:
    """The settings of ``cls``'s fields that declare bounds (made once a class: a config is
    checked each time one is made)."""
    return tuple(
        setting_of(cls, f.name)
        for f in fields(cls)
        if f.metadata.get("low") is not None or f.metadata.get("high") is not None
    )


def from_args(cls: type, args: argparse.Namespace, **overrides):
    """An instance of ``cls`` from the flags given on the command line (others: defaults)."""
    given = {f.name: getattr(args, f.name) for f in fields(cls) if hasattr(args, f.name)}
    return cls(**{**given, **overrides})
