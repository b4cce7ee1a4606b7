"""Where a dataset comes from, declared once: each kind of dataset id ``<prefix>:<rest>``.

Besides ``demo`` and the paper's ids (:mod:`glee_core.catalog`), a dataset id names its source
by prefix: ``csv:PATH``, ``upload:NAME``, ``hf:NAME[:CONFIG]``. :data:`SOURCES` says, for each,
how it is written (the CLI's help), how people and metadata name it (never a server path), whether
a public Space offers it, and how it loads; ``datasets.load_dataset``, ``config``, ``catalog`` and
the Data page read it. A new source is an entry here and its loader. No pandas, no torch: the
loaders are imported when a dataset is loaded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the loaders' module imports pandas; only loading needs it
    from .datasets import LongTailDataset

Loader = Callable[[str, float | None, Mapping[str, str | None], str | None], "LongTailDataset"]


@dataclass(frozen=True)
class DataSource:
    """One kind of dataset id: ``usage`` as the help writes it, ``name`` of the rest for people,
    ``public``: offered on a public Space, ``load(rest, threshold, columns, uploads_dir)``."""

    prefix: str
    usage: str
    help: str
    name: Callable[[str], str]
    public: bool
    load: Loader


def _file_stem(rest: str) -> str:
    return rest.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1].rsplit(".", 1)[0]


def _csv(rest, threshold, columns, uploads_dir):
    from .datasets import load_csv_dataset  # noqa: PLC0415 (pandas: only to load)
    return load_csv_dataset(rest, threshold=threshold, **columns)


def _upload(rest, threshold, columns, uploads_dir):
    from .datasets import load_upload_dataset  # noqa: PLC0415 (pandas: only to load)
    return load_upload_dataset(rest, uploads_dir, threshold=threshold, **columns)


def _hf(rest, threshold, columns, uploads_dir):
    from .datasets import load_hf_dataset  # noqa: PLC0415 (pandas: only to load)
    return load_hf_dataset(rest, threshold=threshold, **columns)


SOURCES: dict[str, DataSource] = {s.prefix: s for s in (
    DataSource("csv", "csv:PATH", "a CSV file on this machine", _file_stem, public=False,
               load=_csv),
    DataSource("upload", "upload:NAME", "a CSV kept by the app (the Data page's upload)",
               lambda rest: rest, public=True, load=_upload),
    DataSource("hf", "hf:NAME[:CONFIG]", "a Hugging Face dataset (the hub, or a local folder)",
               lambda rest: rest, public=False, load=_hf),
)}


def source_of(spec: str) -> tuple[DataSource, str] | None:
    """``(source, rest)`` for a ``<prefix>:<rest>`` id of a known source, else None."""
    prefix, colon, rest = spec.partition(":")
    return (SOURCES[prefix], rest) if colon and prefix in SOURCES else None


def source_usages() -> str:
    """``csv:PATH, upload:NAME or hf:NAME[:CONFIG]``: what help and errors list."""
    usages = [s.usage for s in SOURCES.values()]
    return ", ".join(usages[:-1]) + " or " + usages[-1]
