"""The run store: one directory per finished run, everything the app and the report show.

``<runs-dir>/<run_id>/`` holds

* ``config.json``  - everything needed to repeat the run (dataset + fingerprint, model, method,
  seed, hyper-parameters, package versions) and the class list with its head/tail split;
* ``metrics.json`` - ``acc``, ``f1``, ``head_f1``, ``tail_f1``, per-class P/R/F1, confusion matrix;
* ``history.json`` - per epoch: train loss, dev F1, seconds;
* ``predictions.csv`` + ``logits.npy`` - test predictions and every class's (calibrated) logit;
* ``weight_norms.json`` - per-class norm of the predictor rows (Figure 3);
* ``features.npz`` - classifier-input features of up to 64 test examples per class (Figure 4);
* ``calibration.npz`` - the predictor's weights and bias and the classifier inputs of every dev
  and test example, so post-hoc calibration recomputes any logit exactly (runs stored before it
  lack it, and say so);
* ``model.safetensors`` - the weights, to score new text.

The run id follows from the configuration, so asking again for a finished configuration finds it.
A run is written under a temporary name and renamed into place when complete, under a file lock
on its id: a killed run leaves nothing that looks finished, and two launches train it once.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
from filelock import FileLock, Timeout

from ..budget.report import BUDGET_FILE, BudgetReport, read_budget
from ..core import environment
from ..core.errors import GleeError
from ..core.files import check_quota, folder_bytes, write_json, write_json_atomic
from ..core.slots import SlotQueue, machine_queue
from .record import METRIC_KEYS, MetricsRecord, RunRecord
from .runfiles import (
    RUN_FILES,
    BrokenRunFile,
    RunContext,
    load_metrics,
    load_record,
)

SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")  # fullmatch: no trailing newline


def config_hash(identity: dict) -> str:
    blob = json.dumps(identity, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


VERSION = re.compile(r"\+[a-z]+-")  # where a version's part of a dataset id starts (+added-...)


def slug(text: str) -> str:
    """A file-name-safe form of a dataset id (``csv:/a/b.csv`` -> ``csv-b``), a version's part
    kept (``csv:/a/b.csv+added-50-1f2e`` -> ``csv-b-added-50-1f2e``: the file's stem alone had
    given every version of a CSV the name of its data, and their labelling sessions and reports
    one file)."""
    kind, colon, rest = text.partition(":")
    found = VERSION.search(rest) if colon else None
    if found is None:
        return _name(text)
    version = re.sub(r"[^A-Za-z0-9._-]+", "-", rest[found.start() :]).strip("-.")[:40]
    return f"{_name(f'{kind}:{rest[: found.start()]}')}-{version}"


def _name(dataset_id: str) -> str:
    """A dataset id's file-name-safe name as every release has written it (a run id's first
    part: a version's runs are told apart by their identity's hash, so stored runs keep their
    ids): ``csv:/a/b.csv`` -> ``csv-b``."""
    if ":" in dataset_id:
        kind, _, rest = dataset_id.partition(":")
        dataset_id = f"{kind}-{Path(rest.rstrip('/')).stem or rest}"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", dataset_id).strip("-.")[:60] or "dataset"


def make_run_id(dataset_id: str, method: str, seed: int, identity: dict) -> str:
    return f"{_name(dataset_id)}-{method}-s{seed}-{config_hash(identity)}"


@dataclass
class Run:
    """A finished run on disk; each file is read when first asked for, through its validating
    loader (:mod:`glee_core.runs.runfiles`): a file that does not hold what the record says raises
    :class:`BrokenRunFile` naming it."""

    path: Path

    @property
    def run_id(self) -> str:
        return self.path.name

    @cached_property
    def record(self) -> RunRecord:
        """The typed ``config.json``."""
        return load_record(self.path / "config.json")

    @cached_property
    def metrics(self) -> MetricsRecord:
        """The typed ``metrics.json``."""
        return load_metrics(self.path / "metrics.json", self.record)

    @cached_property
    def _loaded(self) -> dict:
        return {}

    def load(self, name: str):
        """The content of one of the run's files (``RUN_FILE_NAMES``), read and checked (once,
        but for the calibration arrays, read each time they are asked for)."""
        if name == "config.json":
            return self.record
        if name == "metrics.json":
            return self.metrics
        if name in self._loaded:
            return self._loaded[name]
        file = RUN_FILES[name]
        content = file.loaded(self.path, RunContext(self.record, self.metrics))
        if file.keep:
            self._loaded[name] = content
        return content

    @property
    def history(self) -> list[dict]:
        return self.load("history.json")

    @property
    def weight_norms(self) -> dict[str, float]:
        return self.load("weight_norms.json")

    @property
    def predictions(self) -> pd.DataFrame:
        return self.load("predictions.csv")

    @property
    def logits(self) -> np.ndarray:
        return self.load("logits.npy")

    @property
    def features(self) -> dict[str, np.ndarray]:
        return self.load("features.npz")

    @property
    def calibration_data(self) -> dict[str, np.ndarray] | None:
        """What post-hoc calibration needs (``calibration.npz``), or None for a run stored
        before runs kept it."""
        return self.load("calibration.npz")

    @property
    def weights_path(self) -> Path:
        return self.path / "model.safetensors"

    @property
    def dataset(self) -> str:
        return self.record.dataset.id

    @property
    def method(self) -> str:
        return self.record.method.id

    @property
    def seed(self) -> int:
        return self.record.seed

    @property
    def setting(self) -> str:
        return self.record.setting

    @property
    def reads(self) -> str:
        """What its head reads: ``cls`` or ``mean`` pooling, or ``[MASK]`` (a template input);
        a quick compare trains a plain-input head once for each pooling."""
        if self.record.method.input_format == "prompt":
            return "[MASK]"
        return self.record.hyperparameters.pooling

    @property
    def classes(self) -> list[str]:
        return self.record.dataset.classes

    def summary(self) -> dict:
        """The one-line result the CLI prints: {run_id, dataset, method, seed, reads, acc, f1,
        ...}."""
        return {
            "run_id": self.run_id,
            "dataset": self.dataset,
            "method": self.method,
            "seed": self.seed,
            "reads": self.reads,
            **{k: self.metrics.value(k) for k in METRIC_KEYS},
        }


def load_checked(path: Path, whole: bool = False) -> tuple[Run | None, str | None]:
    """``(run, None)`` for a usable finished run, ``(None, "<file>: <what>")`` otherwise.
    Cheap: the JSON files are read in full (the record and metrics kept on the returned run),
    the binary ones by their headers; ``predictions.csv`` is checked when it is read, or here
    with ``whole`` (one run: is it finished, or to be trained again?)."""
    run = Run(path)
    try:
        for name in ("metrics.json", "config.json"):  # metrics.json is written last
            if not (path / name).is_file():
                raise BrokenRunFile(name, "missing")
        context = RunContext(run.record, run.metrics)
        for file in RUN_FILES.values():
            file.checked(path, context)
        if whole:
            run.load("predictions.csv")
    except BrokenRunFile as exc:
        return None, str(exc)
    return run, None


class RunStore:
    """Runs under one directory (default ``./runs``, or ``GLEE_RUNS_DIR``).

    ``max_concurrent`` (default ``GLEE_MAX_CONCURRENT_RUNS`` or 1) is how many runs may train at
    once across every process using this store: further ones queue, so two launches of different
    configurations share one GPU one after the other. ``max_concurrent=0`` takes no slot: a
    scheduler (Ray) already decides what runs where."""

    def __init__(self, root: str | os.PathLike | None = None, max_concurrent: int | None = None):
        self.root = Path(root).expanduser() if root else environment.runs_dir()
        self.max_concurrent = (
            0
            if max_concurrent == 0
            else max(1, int(max_concurrent or environment.max_concurrent_runs()))
        )
        self.problems: dict[str, str] = {}  # run dirs skipped by runs(), with why

    # The store's layout: one folder per run, and these beside them (hidden ones,
    # ``reproduce/`` and ``backbones/`` are never read as runs).
    @property
    def locks_dir(self) -> Path:
        return self.root / ".locks"

    @property
    def jobs_dir(self) -> Path:
        """The app's background jobs (:mod:`glee_core.train.jobs`)."""
        return self.root / ".jobs"

    @property
    def features_dir(self) -> Path:
        """Quick mode's cached hidden states (:mod:`glee_core.models.features`)."""
        return self.root / ".features"

    @property
    def searches_dir(self) -> Path:
        """Learning-rate searches as they go, and rates searched once for a backbone and data
        (:mod:`glee_core.models.search`)."""
        return self.root / ".searches"

    @property
    def reproduce_dir(self) -> Path:
        """Tables that ``reproduce`` wrote (:mod:`glee_core.train.reproduce`)."""
        return self.root / "reproduce"

    @property
    def backbones_dir(self) -> Path:
        """Backbones the app adapted to a dataset (``adapt``, the Data page), one folder each."""
        return self.root / "backbones"

    @property
    def health_dir(self) -> Path:
        """The Data page's reports: data health (:mod:`glee_core.health.report`) and the label
        budget (:mod:`glee_core.budget.report`), one folder per dataset and backbone
        (:meth:`data_report_dir`)."""
        return self.root / ".health"

    @property
    def label_words_dir(self) -> Path:
        """Label words given on the Data page, one JSON file (``--verbalizer``'s) each, named by
        its content's digest."""
        return self.root / ".label-words"

    @property
    def labelling_dir(self) -> Path:
        """The Data page's unlabelled texts: each pool kept (``<name>-<digest>.csv``) and each
        labelling session (:mod:`glee_core.pool.labelling`), its answers saved as they come."""
        return self.root / ".labelling"

    def data_report_dir(self, dataset: str, model: str) -> Path:
        """Where the Data page keeps ``dataset``'s health check and label budget with
        ``model``."""
        return self.health_dir / f"{slug(dataset)}-{slug(model)}"

    def latest_budget(self, dataset: str) -> tuple[float, Path, BudgetReport] | None:
        """``dataset``'s newest label budget, with any backbone (the report and Home read it):
        (when it was written, its folder, the report read back), or None. Only the dataset's
        own folders (:meth:`data_report_dir`) are looked in."""
        found = []
        for path in self.health_dir.glob(f"{slug(dataset)}-*/{BUDGET_FILE}"):
            try:
                budget = read_budget(path.parent)
                if budget.dataset == dataset:
                    found.append((path.stat().st_mtime, path.parent, budget))
            except (OSError, ValueError, TypeError, KeyError):
                continue  # a report being written, or damaged: the others still count
        return max(found, key=lambda item: item[0]) if found else None

    @property
    def exports_dir(self) -> Path:
        """Runs exported for ``predict --engine onnx`` (:func:`glee_core.serve.export.onnx_folder`),
        one folder each."""
        return self.root / ".exports"

    def path(self, run_id: str) -> Path:
        """The directory of ``run_id``; ids that could leave the store are refused."""
        if not SAFE_ID.fullmatch(run_id) or ".." in run_id:
            raise GleeError(f"invalid run id {run_id!r}: letters, digits, '.', '_' and '-' only")
        return self.root / run_id

    def get(self, run_id: str) -> Run | None:
        """The finished run ``run_id``, every file checked; None when it is missing or broken
        (then training it again replaces it)."""
        path = self.path(run_id)
        return load_checked(path, whole=True)[0] if path.is_dir() else None

    def _locks(self) -> Path:
        self.locks_dir.mkdir(parents=True, exist_ok=True)
        return self.locks_dir

    def lock(self, run_id: str, timeout: float = -1) -> FileLock:
        """A file lock on ``run_id``: hold it while training so a second launch waits."""
        return FileLock(str(self._locks() / f"{self.path(run_id).name}.lock"), timeout=timeout)

    @contextmanager
    def run_lock(self, run_id: str, on_wait: Callable[[], None]):
        """Hold ``run_id``'s lock; ``on_wait()`` is called first when another process holds it
        (a second launch of the same configuration: it waits, then loads that run)."""
        lock = self.lock(run_id)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            on_wait()
            lock.acquire()
        try:
            yield
        finally:
            lock.release()

    def slot_queue(self) -> SlotQueue:
        """The training slots this store's runs queue for (public mode: the machine's, shared
        by every workspace; with the session's own lock)."""
        return machine_queue(self._locks(), self.max_concurrent)

    @contextmanager
    def training_slot(self, on_wait: Callable[[], None] | None = None):
        """Hold one of ``max_concurrent`` training slots for one run, handed out in turn
        (:mod:`glee_core.core.slots`)."""
        with self.slot_queue().slot(on_wait):
            yield

    def runs(self, dataset: str | None = None) -> list[Run]:
        """Finished runs, oldest first; broken run directories are skipped and listed in
        :attr:`problems`."""
        self.problems = {}
        if not self.root.is_dir():
            return []
        self.sweep_temp()
        found = []
        for path in sorted(self.root.iterdir()):
            if (
                not path.is_dir()
                or path.name.startswith(".")
                or path in (self.reproduce_dir, self.backbones_dir)
            ):
                continue
            run, problem = load_checked(path)
            if problem:
                self.problems[path.name] = problem
                continue
            if dataset is None or run.dataset == dataset:
                found.append(run)
        found.sort(key=lambda r: (r.record.created, r.run_id))
        return found

    def save(self, record: RunRecord, result) -> Run:
        """Store a finished run: ``record`` (its ``config.json``) and ``result``'s artifacts
        (a ``glee_core.train.setup.RunResult``: its model writes its own weights), every file in
        a folder of its own, ``metrics.json`` last, moved into place in one rename
        (:meth:`write`)."""

        def files(folder: Path) -> None:
            result.model.save_trained(folder / "model.safetensors")
            np.save(folder / "logits.npy", result.logits.astype(np.float32), allow_pickle=False)
            np.savez(folder / "features.npz", **result.features)
            np.savez(folder / "calibration.npz", **result.calibration)
            result.predictions.to_csv(folder / "predictions.csv", index=False)
            norms = dict(zip(record.dataset.classes, result.weight_norms, strict=True))
            write_json(folder / "weight_norms.json", norms)
            write_json(folder / "history.json", result.history)
            write_json(folder / "config.json", record.to_dict())
            # last: the run is complete
            write_json(folder / "metrics.json", result.metrics.to_dict())

        return self.write(record.run_id, files)

    def write(self, run_id: str, write_files) -> Run:
        """Call ``write_files(tmp_dir)`` and move the directory into place in one rename."""
        final = self.path(run_id)
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{run_id}-{os.getpid()}-", dir=self.root))
        try:
            write_files(tmp)
            _, problem = load_checked(tmp)  # what every reader will check, checked before it lands
            if problem:
                raise GleeError(
                    f"run {run_id} was written inconsistent ({problem}); this is a "
                    "bug of Glee Studio, please report it"
                )
            check_quota(folder_bytes(tmp), "this run")
            if final.exists():  # a forced re-run replaces the old one
                trash = Path(
                    tempfile.mkdtemp(prefix=f".old-{run_id}-{os.getpid()}-", dir=self.root)
                )
                final.rename(trash / "run")
                shutil.rmtree(trash, ignore_errors=True)
            tmp.rename(final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return Run(final)

    def add_cross_validation(self, run_id: str, cv) -> Run:
        """Record a finished run's cross-validation (a ``CrossValidation``) in its
        ``metrics.json``, replaced atomically (a reader sees the run with or without it, never
        half of it); the rest of the run is left as it is."""
        run = self.get(run_id)
        if run is None:
            raise GleeError(f"run {run_id} is not finished in {self.root}")
        values = {**run.metrics.to_dict(), "cv": asdict(cv)}
        check_quota(len(json.dumps(asdict(cv))), "its cross-validation")  # what it adds
        write_json_atomic(run.path / "metrics.json", values)
        return Run(run.path)

    def sweep_temp(self) -> list[str]:
        """Remove the half-written (``.tmp-``) and half-removed (``.old-``) run folders that no
        living process is writing (a run killed while it was saved left them); returns their
        names. Each folder's name carries its writer's process id; a folder of an older
        version, without one, is left for an hour."""
        if not self.root.is_dir():
            return []
        removed = []
        for path in self.root.iterdir():
            if path.name.startswith(TEMP_PREFIXES) and path.is_dir() and not _being_written(path):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path.name)
        return removed


TEMP_PREFIXES = (".tmp-", ".old-")
UNOWNED_TEMP_SECONDS = 3600


def _being_written(path: Path) -> bool:
    """Is the process named in a temp folder's name (``.tmp-<run id>-<pid>-<random>``) alive?"""
    parts = path.name.rsplit("-", 2)
    if len(parts) == 3 and parts[1].isdigit():
        pid = int(parts[1])
        if pid == os.getpid():
            return True
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True  # another user's living process
        return True
    try:
        return time.time() - path.stat().st_mtime < UNOWNED_TEMP_SECONDS
    except OSError:
        return False
