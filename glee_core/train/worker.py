"""One run in a process of its own: what a Ray task calls (:func:`train_one`) and a
``--runs-at-once`` worker, ``python -m glee_core.train.worker BATCH_FILE RUN_ID METHOD SEED``.

The sweep (:class:`~glee_core.train.executors.LocalExecutor`) pickles each batch (dataset, backbone,
configuration, store) to a file once and starts a fresh Python per run on it. A fresh interpreter,
not ``multiprocessing``'s spawn: spawn re-runs the caller's ``__main__`` file in every child, which
under Streamlit (whose pages become ``__main__``, and stay so after an ``AppTest``) or in a script
without an ``if __name__ == "__main__"`` guard runs that script again, and the worker dies before
its run starts.

The worker's last act is one JSON line on the file descriptor that was its stdout:
``["done", {"run_id", "node", "seconds"}]`` or ``["error", "what went wrong"]``; everything else it
prints goes to stderr. A worker that ends without that line died (killed, out of memory).
"""

from __future__ import annotations

import json
import os
import pickle
import site
import socket
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import GleeError
from ..data.datasets import LongTailDataset
from ..models.config import TrainConfig
from ..models.methods import get_method
from ..runs.store import RunStore
from .experiment import run_launch
from .launch import Launch
from .plan import PlannedRun


@dataclass
class WorkerBatch:
    """What each worker of one batch reads (pickled once per sweep): the batch's dataset (None
    where it travels apart: Ray's object store holds it once for every batch of it), backbone
    and configuration, the store, and the machine's training slots to take one of (0: none; Ray's
    resources decide what trains where)."""

    dataset: LongTailDataset | None
    model: str
    config: TrainConfig
    store_root: str
    force: bool
    slots: int

    def write(self, path: Path) -> Path:
        with open(path, "wb") as file:
            pickle.dump(self, file)
        return path


def worker_command(batch_file: Path, planned: PlannedRun) -> list[str]:
    """The command line of the worker that trains ``planned`` from the pickled batch (the run id
    in it, so ``ps`` says what each worker trains); :func:`main` reads it."""
    return [
        sys.executable,
        "-m",
        "glee_core.train.worker",
        str(batch_file),
        planned.run_id,
        planned.spec.id,
        str(planned.config.seed),
    ]


def worker_env() -> dict[str, str]:
    """This environment, with the folder that holds ``glee_core`` on the worker's path where it
    is a source checkout (not installed, or installed editable), so the worker trains the same
    code; an installed package is found there anyway (and site-packages is kept behind the
    standard library)."""
    source = str(Path(__file__).resolve().parents[2])
    if source in {*site.getsitepackages(), site.getusersitepackages()}:
        return dict(os.environ)
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": source + (os.pathsep + path if path else "")}


def check_store_writable(root: Path) -> None:
    """Write and remove a probe file in the store; a clear error when this machine cannot."""
    probe = root / f".probe-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe.write_text("ok", encoding="utf-8")
        probe.unlink()
    except OSError as exc:
        raise GleeError(
            f"node {socket.gethostname()} cannot write the run store {root} ({exc}); "
            "on a cluster the store must be on storage every node sees: pass "
            "--runs-dir (or GLEE_RUNS_DIR) with a shared path"
        ) from None


def train_one(
    batch: WorkerBatch, method: str, seed: int, dataset: LongTailDataset | None = None
) -> dict:
    """What a Ray task or a worker of ``--runs-at-once`` does: train (or find) one run of
    ``batch`` (``dataset``: its data, where the batch travels without it) in the shared store;
    returns where it ran."""
    started = time.perf_counter()
    root = Path(batch.store_root)
    check_store_writable(root)
    store = RunStore(root, max_concurrent=batch.slots)
    data = dataset or batch.dataset
    launch = Launch(
        data, [get_method(method)], [seed], batch.model, batch.config, store, batch.force
    )
    run = run_launch(launch)[0]
    return {
        "run_id": run.run_id,
        "node": socket.gethostname(),
        "seconds": round(time.perf_counter() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    """Train the one run named on the command line; write its outcome line. Exits 0 after a
    run's own error too (the line says what it was); any other exit means the worker died."""
    batch_file, run_id, method, seed = argv or sys.argv[1:]
    result = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # training's own output (and any library's) goes to stderr, not the result
    try:
        with open(batch_file, "rb") as file:
            batch: WorkerBatch = pickle.load(file)
        ran = train_one(batch, method, int(seed))
        if ran["run_id"] != run_id:  # the sweep planned one id, this process trained another
            raise RuntimeError(f"planned run {run_id}, trained {ran['run_id']}")
        outcome = ["done", ran]
    except Exception as exc:  # the run's own error: reported, not retried
        outcome = ["error", f"{type(exc).__name__}: {exc}"]
    result.write(json.dumps(outcome) + "\n")
    result.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
