"""One validating loader per file a run stores, declared once in :data:`RUN_FILES`.

A run folder is written by one process and then read by every page and command for months, by
versions that came later, after people and crashes have had their way with it. So each file is
read through its loader here, which checks what the file holds against the run's record (its
classes, its test size) and raises :class:`BrokenRunFile` naming the file and what is wrong:
the store lists such a run as broken, and a view that meets one says so and goes on.

Each entry has a cheap ``check`` the store runs when it lists runs (JSON files in full, binary
files by their headers - shapes and dtypes, never pickled objects - and their small label
arrays) and a ``load`` that reads the whole file; only ``predictions.csv`` (every test text) is
checked by its ``load`` alone. The layout is
versioned by the record's ``schema_version``; the loaders read every layout written so far
(runs before calibration.npz lack it, runs stored before the many / medium / few-shot F1 lack them).
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..core.errors import GleeError
from .json_values import RecordError, integer, mapping, number
from .record import MetricsRecord, RunRecord

PREDICTION_COLUMNS = ("text", "gold", "pred", "confidence")
FEATURE_ARRAYS = ("features", "labels", "rows")
CALIBRATION_ARRAYS = (
    "dev_logits",
    "dev_features",
    "dev_labels",
    "test_logits",
    "test_features",
    "test_labels",
    "weight",
    "bias",
)


class BrokenRunFile(GleeError):
    """A file of a run is missing, unreadable, or does not hold what the run's record says."""

    def __init__(self, file: str, what: str):
        self.file, self.what = file, what
        super().__init__(f"{file}: {what}")


@dataclass(frozen=True)
class RunContext:
    """What a file is checked against: the run's record and its test metrics."""

    record: RunRecord
    metrics: MetricsRecord

    @property
    def classes(self) -> list[str]:
        return self.record.dataset.classes


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BrokenRunFile(path.name, "missing") from None
    except (OSError, ValueError) as exc:
        raise BrokenRunFile(path.name, f"unreadable ({exc})") from None
    except RecursionError:  # a file nested thousands deep: no run writes one
        raise BrokenRunFile(path.name, "nested too deep to be a run's file") from None


def load_record(path: Path) -> RunRecord:
    """``config.json``."""
    values = read_json(path)
    try:
        return RunRecord.from_dict(values)
    except GleeError as exc:  # a RecordError, or a method's parts refused
        raise BrokenRunFile(path.name, f"not a run record ({exc})") from None


def load_metrics(path: Path, record: RunRecord) -> MetricsRecord:
    """``metrics.json``, checked against the run's classes."""
    try:
        return MetricsRecord.from_dict(read_json(path), record.dataset.classes)
    except RecordError as exc:
        raise BrokenRunFile(path.name, str(exc)) from None


def load_history(path: Path, run: RunContext) -> list[dict]:
    """``history.json``: one entry an evaluation on dev (epoch, step, train loss, dev F1 / acc,
    seconds; the per-class weight norms when the run tracked them)."""
    values = read_json(path)
    try:
        if not isinstance(values, list) or not values:
            raise RecordError("not a list of evaluations")
        for i, entry in enumerate(values):
            mapping(entry, f"evaluation {i + 1}")
            integer(entry.get("epoch"), f"evaluation {i + 1}: epoch")
            number(entry.get("dev_f1"), f"evaluation {i + 1}: dev_f1")
            for key in ("step", "train_loss", "dev_acc", "seconds", "eval_seconds"):
                number(entry.get(key), f"evaluation {i + 1}: {key}", optional=True)
            norms = entry.get("weight_norms")
            if norms is not None:
                if not isinstance(norms, list) or len(norms) != len(run.classes):
                    raise RecordError(
                        f"evaluation {i + 1}: weight_norms is not one number a "
                        f"class ({len(run.classes)})"
                    )
                for v in norms:
                    number(v, f"evaluation {i + 1}: weight_norms")
    except RecordError as exc:
        raise BrokenRunFile(path.name, str(exc)) from None
    return values


def load_weight_norms(path: Path, run: RunContext) -> dict[str, float]:
    """``weight_norms.json``: every class's predictor-row norm (Figure 3)."""
    values = read_json(path)
    try:
        mapping(values, "the file")
        missing = [c for c in run.classes if c not in values]
        if missing:
            raise RecordError(
                f"lacks the class {missing[0]!r}"
                + (f" and {len(missing) - 1} more" if len(missing) > 1 else "")
            )
        return {c: number(values[c], f"the norm of {c!r}") for c in run.classes}
    except RecordError as exc:
        raise BrokenRunFile(path.name, str(exc)) from None


def load_predictions(path: Path, run: RunContext) -> pd.DataFrame:
    """``predictions.csv``: one row a test example, gold and predicted labels among the run's
    classes."""
    try:
        frame = pd.read_csv(path, keep_default_na=False)
    except (OSError, ValueError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise BrokenRunFile(path.name, f"unreadable ({type(exc).__name__}: {exc})") from None
    missing = [c for c in PREDICTION_COLUMNS if c not in frame.columns]
    if missing:
        raise BrokenRunFile(path.name, f"lacks the column(s) {', '.join(missing)}")
    if len(frame) != run.metrics.test_size:
        raise BrokenRunFile(
            path.name, f"has {len(frame)} rows; the run's test set has {run.metrics.test_size}"
        )
    frame["gold"], frame["pred"] = frame["gold"].astype(str), frame["pred"].astype(str)
    unknown = (set(frame["gold"]) | set(frame["pred"])) - set(run.classes)
    if unknown:
        raise BrokenRunFile(path.name, f"names {sorted(unknown)[0]!r}, not a class of the run")
    if not pd.api.types.is_numeric_dtype(frame["confidence"]):
        raise BrokenRunFile(path.name, "its confidence column is not numbers")
    return frame


HEADER_READERS = {
    (1, 0): np.lib.format.read_array_header_1_0,
    (2, 0): np.lib.format.read_array_header_2_0,
}


def _npy_shape(file, name: str, where: str) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from an .npy header; object arrays (pickles) are refused."""
    try:
        version = np.lib.format.read_magic(file)
        read = HEADER_READERS.get(version)
        if read is None:
            raise ValueError(f".npy format {version} is not one numpy writes by default")
        shape, _, dtype = read(file)
    except (ValueError, OSError, EOFError) as exc:
        raise BrokenRunFile(where, f"{name} is not an array ({exc})") from None
    if dtype.hasobject:
        raise BrokenRunFile(where, f"{name} holds pickled objects; runs store numbers only")
    return shape, dtype


def npz_shapes(path: Path, names: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
    """The shapes of the arrays ``names`` in an .npz, from headers only."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = {Path(n).stem: n for n in archive.namelist() if n.endswith(".npy")}
            missing = [n for n in names if n not in members]
            if missing:
                raise BrokenRunFile(path.name, f"lacks the array(s) {', '.join(missing)}")
            shapes = {}
            for name in names:
                with archive.open(members[name]) as member:
                    shapes[name] = _npy_shape(member, name, path.name)[0]
            return shapes
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise BrokenRunFile(path.name, f"not an array archive ({exc})") from None


def _npz(path: Path, names: tuple[str, ...], only: bool = False) -> dict[str, np.ndarray]:
    """The arrays of an .npz (``only``: just ``names``) whose headers :func:`npz_shapes`
    checked."""
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in (names if only else data.files)}
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise BrokenRunFile(path.name, f"unreadable ({exc})") from None


def _labels_in_range(path: Path, labels: np.ndarray, n: int, name: str) -> None:
    if labels.size and (labels.min() < 0 or labels.max() >= n):
        raise BrokenRunFile(path.name, f"{name} holds class numbers outside 0..{n - 1}")


def check_logits(path: Path, run: RunContext) -> None:
    with path.open("rb") as handle:
        shape, _ = _npy_shape(handle, "the array", path.name)
    expected = (run.metrics.test_size, len(run.classes))
    if tuple(shape) != expected:
        raise BrokenRunFile(path.name, f"is {shape}, not (test examples, classes) = {expected}")
    try:  # mapping fails when the data is shorter than the header says
        np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise BrokenRunFile(path.name, f"truncated ({exc})") from None


def load_logits(path: Path, run: RunContext) -> np.ndarray:
    """``logits.npy``: every test example's (calibrated) logit of every class."""
    check_logits(path, run)
    return np.load(path, allow_pickle=False)


def check_features(path: Path, run: RunContext) -> None:
    shapes = npz_shapes(path, FEATURE_ARRAYS)
    rows = shapes["features"][0] if shapes["features"] else 0
    if len(shapes["features"]) != 2 or shapes["labels"] != (rows,) or shapes["rows"] != (rows,):
        raise BrokenRunFile(
            path.name,
            "features, labels and rows do not line up "
            f"({shapes['features']}, {shapes['labels']}, "
            f"{shapes['rows']})",
        )
    small = _npz(path, ("labels", "rows"), only=True)  # the big array is left for load
    _labels_in_range(path, small["labels"], len(run.classes), "labels")
    _labels_in_range(path, small["rows"], run.metrics.test_size, "rows")


def load_features(path: Path, run: RunContext) -> dict[str, np.ndarray]:
    """``features.npz``: the classifier-input features of up to 64 test examples a class."""
    check_features(path, run)
    return _npz(path, FEATURE_ARRAYS)


def check_calibration(path: Path, run: RunContext) -> None:
    shapes = npz_shapes(path, CALIBRATION_ARRAYS)
    n = len(run.classes)
    if (
        shapes["weight"][:1] != (n,)
        or shapes["bias"] != (n,)
        or shapes["test_logits"] != (run.metrics.test_size, n)
        or shapes["dev_logits"][1:] != (n,)
    ):
        raise BrokenRunFile(path.name, "its arrays do not match the run's classes and test set")
    labels = _npz(path, ("dev_labels", "test_labels"), only=True)
    for name, values in labels.items():
        _labels_in_range(path, values, n, name)


def load_calibration(path: Path, run: RunContext) -> dict[str, np.ndarray] | None:
    """``calibration.npz``: the predictor's W and b and the dev / test classifier inputs, so a
    post-hoc calibration recomputes every logit (a run stored before it existed has none)."""
    check_calibration(path, run)
    return _npz(path, CALIBRATION_ARRAYS)


def check_weights(path: Path, run: RunContext) -> None:
    """``model.safetensors``: the header's tensor offsets end where the file ends (a truncated
    copy does not)."""
    with path.open("rb") as handle:
        head = handle.read(8)
        size = int.from_bytes(head, "little") if len(head) == 8 else -1
        try:
            header = json.loads(handle.read(size)) if 0 < size < 100_000_000 else None
            end = max(
                (t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"), default=0
            )
        except (ValueError, TypeError, AttributeError, KeyError, IndexError):
            header = None
    if header is None or path.stat().st_size != 8 + size + end:
        raise BrokenRunFile(path.name, "truncated or corrupt")


@dataclass(frozen=True)
class RunFile:
    """A file of a run folder: its cheap check at listing and its full loader."""

    name: str
    check: Callable[[Path, RunContext], None]
    load: Callable[[Path, RunContext], Any]
    keep: bool = True  # kept on the run once read (not the big calibration arrays)
    optional: bool = False  # runs stored before the file existed lack it

    def checked(self, folder: Path, run: RunContext) -> None:
        """Run the cheap check on the folder's copy of this file."""
        if (path := self._present(folder)) is not None:
            self.check(path, run)

    def loaded(self, folder: Path, run: RunContext) -> Any:
        """The file read in full and checked; None for an optional file the run lacks."""
        path = self._present(folder)
        return None if path is None else self.load(path, run)

    def _present(self, folder: Path) -> Path | None:
        path = folder / self.name
        if path.is_file():
            return path
        if self.optional:
            return None
        raise BrokenRunFile(self.name, "missing")


def _check_by_loading(name: str) -> Callable[[Path, RunContext], None]:
    """A small file's check is its full load."""

    def check(path: Path, run: RunContext) -> None:
        RUN_FILES[name].load(path, run)

    return check


# Every file a run stores but config.json and metrics.json (read first: the others are checked
# against them); the store's listing runs each check, ``Run.load`` each loader.
RUN_FILES: dict[str, RunFile] = {
    f.name: f
    for f in (
        RunFile("history.json", _check_by_loading("history.json"), load_history),
        RunFile("weight_norms.json", _check_by_loading("weight_norms.json"), load_weight_norms),
        RunFile("predictions.csv", lambda path, run: None, load_predictions),  # read in full: load
        RunFile("logits.npy", check_logits, load_logits),
        RunFile("features.npz", check_features, load_features),
        RunFile("calibration.npz", check_calibration, load_calibration, keep=False, optional=True),
        RunFile("model.safetensors", check_weights, lambda path, run: path),
    )
}
RUN_FILE_NAMES = ("config.json", "metrics.json", *RUN_FILES)
