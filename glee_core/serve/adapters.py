"""The bottleneck adapters' module, as ``modeling_glee.py`` imports it (``from .adapters import
...``): in an exported folder this file is a copy of :mod:`glee_core.models.adapters` itself
(torch alone), here the studio's own. The import is absolute: transformers, saving
``modeling_glee.py``, follows relative imports into files it copies beside it."""

from __future__ import annotations

from glee_core.models.adapters import BottleneckAdapter, adapter_place, insert_adapters

__all__ = [
    "BottleneckAdapter",
    "adapter_place",
    "insert_adapters",
]
