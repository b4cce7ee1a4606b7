"""Uploaded CSV datasets, kept on disk so they survive reloads and restarts.

An upload is validated by loading it exactly as ``csv:PATH`` would be (the same messages) before
anything is kept; it is then stored under the uploads directory with a safe name (no path from the
user reaches the file system) next to a small JSON file with its column choices.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import GleeError
from ..core.files import write_atomic
from ..data.csvfile import Columns, guess_columns, read_csv_frame
from ..data.datasets import LongTailDataset
from ..models.options import DataOptions

MAX_UPLOAD_BYTES = 50 * 1024 * 1024
ACCEPTED_ENCODINGS = "UTF-8 (with or without BOM), UTF-16 with BOM, latin-1"


def safe_upload_name(filename: str, data: bytes) -> str:
    """``../../etc/x y.csv`` -> ``x_y-1a2b3c4d.csv``: the base name only, safe characters, and a
    content hash so two different files of one name do not overwrite each other."""
    stem = Path(str(filename).replace("\\", "/")).name
    stem = re.sub(r"\.(csv|tsv|txt)$", "", stem, flags=re.I)
    stem = re.sub(r"[^A-Za-z0-9_-]+", "_", stem).strip("_.-")[:60] or "upload"
    return f"{stem}-{hashlib.sha256(data).hexdigest()[:8]}.csv"


@dataclass
class Upload:
    path: Path
    original_name: str
    columns: Columns

    @property
    def spec(self) -> str:
        """``upload:NAME``: the dataset id names the upload, not the folder it is kept in."""
        return f"upload:{self.path.name}"

    @property
    def options(self) -> DataOptions:
        """How to load this upload (its columns as the user chose them)."""
        return DataOptions(
            dataset=self.spec,
            uploads_dir=str(self.path.parent),
            **{k: v for k, v in self.columns.options().items() if v},
        )

    def load(self) -> LongTailDataset:
        return self.options.load()


def _inside(folder: Path, path: Path) -> bool:
    return path.resolve().parent == folder.resolve()


def save_upload(
    uploads_dir: str | os.PathLike,
    filename: str,
    data: bytes,
    columns: Columns = Columns(),
    max_classes: int | None = None,
) -> tuple[Upload, LongTailDataset]:
    """Validate and keep an uploaded CSV, parsed once, read from the ``columns`` the user named
    (else found); on any problem nothing is kept (an identical file kept before stays as it
    was). ``max_classes``: public mode's cap on the classes of one upload."""
    if len(data) > MAX_UPLOAD_BYTES:
        raise GleeError(
            f"{filename}: {len(data) / 2**20:.1f} MiB is over the "
            f"{MAX_UPLOAD_BYTES // 2**20} MiB upload limit"
        )
    folder = Path(uploads_dir)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / safe_upload_name(filename, data)
    if not _inside(folder, target):  # cannot happen with safe_upload_name; belt and braces
        raise GleeError(f"refusing upload name {filename!r}")
    upload = Upload(target, Path(str(filename)).name, columns)
    existed = target.is_file()  # the same bytes (the name holds their digest): not rewritten
    if not existed:
        handle, tmp = tempfile.mkstemp(suffix=".csv", prefix=".upload-", dir=folder)
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.replace(tmp, target)  # offered only once its record is written, below
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    try:
        dataset = upload.load()  # the one parse; its messages name the upload
        classes = dataset.num_classes + len(dataset.dropped_classes)
        if max_classes is not None and classes > max_classes:
            raise GleeError(
                f"{upload.original_name}: {classes:,} classes; an upload here may "
                f"have at most {max_classes:,}. Merge rare classes, or run Glee "
                "Studio on your own machine"
            )
    except BaseException as exc:
        if not existed:
            target.unlink(missing_ok=True)
        if isinstance(exc, GleeError):
            raise exc.naming(target, upload.original_name).naming(
                target.name, upload.original_name
            ) from None
        raise
    write_atomic(
        target.with_suffix(".json"),
        json.dumps({"original_name": upload.original_name, "columns": columns.options()}),
    )
    return upload, dataset


def list_uploads(uploads_dir: str | os.PathLike) -> list[Upload]:
    folder = Path(uploads_dir)
    if not folder.is_dir():
        return []
    uploads = []
    for path in sorted(folder.glob("*.csv")):
        meta_path = path.with_suffix(".json")
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # not a finished upload
        if not isinstance(meta, dict) or not isinstance(meta.get("columns", {}), dict):
            continue  # a damaged record: the upload is not offered (its CSV stays on disk)
        columns = Columns.from_options(meta.get("columns", {}))
        uploads.append(Upload(path, meta.get("original_name", path.name), columns))
    return uploads


def csv_columns(data: bytes, filename: str = "upload.csv") -> tuple[list[str], dict[str, str]]:
    """The header of an uploaded CSV (for the column pickers), read as ``csv:`` would read it,
    and the text and label columns its contents suggest where no name says
    (``glee_core.data.csvfile.guess_columns``); its messages name ``filename``, not the
    temporary copy."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "peek.csv"
        path.write_bytes(data)
        try:
            frame = read_csv_frame(path)[0]
        except GleeError as exc:
            raise exc.naming(path, filename) from None
        return [str(c) for c in frame.columns], guess_columns(frame)
