"""Where a dataset comes from, declared once: each kind of dataset id ``<prefix>:<rest>``.

Besides ``demo`` and the paper's ids (:mod:`glee_core.data.catalog`), a dataset id names its source
by prefix: ``csv:PATH``, ``upload:NAME``, ``hf:NAME[:CONFIG]``. :data:`SOURCES` says, for each,
how it is written (the CLI's help), how people and metadata name it (never a server path),
whether a public Space offers it, and which loader of ``loaders`` loads it;
``datasets.load_dataset``, ``config``, ``catalog`` and the Data page read it. A new source is an
entry here and its loader there. No pandas, no torch, no import of the loaders.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..core.plugins import named
from .csvfile import Columns


@dataclass(frozen=True)
class DataSource:
    """One kind of dataset id: ``usage`` as the help writes it, ``name`` of the rest for people,
    ``public``: offered on a public Space, ``loader``: the function that loads it,
    ``f(rest, threshold, columns, uploads_dir, keep_rare)``, as ``"module:function"`` (named, not
    imported: :mod:`glee_core.data.loaders` imports ``datasets``, which reads this module;
    :meth:`load` imports it when a dataset of this source is loaded)."""

    prefix: str
    usage: str
    help: str
    name: Callable[[str], str]
    public: bool
    loader: str

    def load(self, rest: str, threshold, columns: Columns, uploads_dir, keep_rare: bool):
        """The dataset ``<prefix>:<rest>`` (its loader imported now)."""
        return named(self.loader)(rest, threshold, columns, uploads_dir, keep_rare)


def _file_stem(rest: str) -> str:
    return rest.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1].rsplit(".", 1)[0]


SOURCES: dict[str, DataSource] = {
    s.prefix: s
    for s in (
        DataSource(
            "csv",
            "csv:PATH",
            "a CSV file on this machine",
            _file_stem,
            public=False,
            loader="glee_core.data.loaders:csv_source",
        ),
        DataSource(
            "upload",
            "upload:NAME",
            "a CSV kept by the app (the Data page's upload)",
            lambda rest: rest,
            public=True,
            loader="glee_core.data.loaders:upload_source",
        ),
        DataSource(
            "hf",
            "hf:NAME[:CONFIG]",
            "a Hugging Face dataset (the hub, or a local folder)",
            lambda rest: rest,
            public=False,
            loader="glee_core.data.hf_loader:hf_source",
        ),
    )
}


def source_of(spec: str) -> tuple[DataSource, str] | None:
    """``(source, rest)`` for a ``<prefix>:<rest>`` id of a known source, else None."""
    prefix, colon, rest = spec.partition(":")
    return (SOURCES[prefix], rest) if colon and prefix in SOURCES else None


def source_usages() -> str:
    """``csv:PATH, upload:NAME or hf:NAME[:CONFIG]``: what help and errors list."""
    usages = [s.usage for s in SOURCES.values()]
    return ", ".join(usages[:-1]) + " or " + usages[-1]
