"""What a registry calls, named as ``"module:function"`` and imported only when it is called
(an export form's writer, an executor's factory, a data source's loader): the registry itself
stays light (``--help`` imports no torch) and imports nothing that reads it back."""

from __future__ import annotations

import importlib


def named(spec: str):
    """The attribute ``function`` of ``module`` for ``spec`` = ``"module:function"``."""
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)
