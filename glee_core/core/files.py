"""Writing files that other processes read: JSON (numpy values allowed) and the atomic write.

Anything another process may read while it is written (a job's record, a request, a reproduction's
tables, an upload's metadata, a report) goes through :func:`write_atomic`: a temporary name beside
the target, then one rename. A run folder is written whole under a temporary name by the store
and renamed into place, so the files inside it use plain :func:`write_json`.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from . import environment
from .errors import GleeError


def _json_default(value):
    """numpy scalars and arrays (without importing numpy: they all have ``tolist``)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def dumps(data) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False, default=_json_default)


def write_json(path: Path, data) -> None:
    Path(path).write_text(dumps(data), encoding="utf-8")


def write_atomic(path: Path, data: bytes | str) -> Path:
    """Write to a temporary name beside ``path``, then rename: readers see all or nothing."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def append_line(path: Path, line: str) -> None:
    """Append one line to ``path`` in one write (``O_APPEND``: two processes appending at once
    each land whole, one after the other), flushed to the disk before it returns: a log that
    several writers share, which nobody rewrites."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(handle, (line.rstrip("\n") + "\n").encode("utf-8"))
        os.fsync(handle)
    finally:
        os.close(handle)


def write_json_atomic(path: Path, data) -> Path:
    return write_atomic(path, dumps(data))


def write_report_files(
    folder: Path, json_name: str, values: dict, csv_name: str, table
) -> tuple[Path, Path]:
    """A report's two files in ``folder`` (made if missing), each replaced atomically: the JSON
    of ``values`` and ``table`` (a pandas frame) as CSV without its index."""
    folder = Path(folder).expanduser()
    return (
        write_json_atomic(folder / json_name, values),
        write_atomic(folder / csv_name, table.to_csv(index=False)),
    )


def folder_bytes(path: Path) -> int:
    """Bytes of the files under ``path``, leaving out half-written run folders (``.tmp-*``:
    a run being saved, or one a killed process left, which the store's sweep removes)."""
    path = Path(path)
    if not path.is_dir():
        return 0
    return sum(
        f.stat().st_size
        for f in path.rglob("*")
        if f.is_file() and not any(part.startswith(".tmp-") for part in f.relative_to(path).parts)
    )


def size_text(n: float) -> str:
    """``10 MB``, ``512 KB``, ``104 bytes``, ``0.35 MB``: a size as people read it (three
    significant digits, never a limit of "0 MB")."""
    if n >= 2**20 or n >= 0.1 * 2**20:
        return f"{n / 2**20:.3g} MB"
    return f"{n / 2**10:.3g} KB" if n >= 2**10 else f"{int(n)} bytes"


class DiskLimitReached(GleeError):
    """A public job's workspace is full: nothing more is written and the job stops."""


def check_quota(adding: int, what: str = "this") -> None:
    """Before a public job writes ``adding`` bytes (a run moved into place, a feature cache, a
    cross-validation): its workspace (``GLEE_QUOTA_DIR``) must stay within its limit
    (``GLEE_QUOTA_MB``)."""
    quota = environment.disk_quota()
    if quota is None:
        return
    folder, limit = quota
    used = folder_bytes(folder)
    if used + adding > limit:
        raise DiskLimitReached(
            f"disk limit reached: {what} needs {size_text(adding)} and your workspace uses "
            f"{size_text(used)} of its {size_text(limit)}; delete runs or uploads you no longer "
            "need (sidebar, Your workspace), then launch again"
        )
