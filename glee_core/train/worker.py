"""One ``--runs-at-once`` worker:
``python -m glee_core.train.worker BATCH_FILE RUN_ID METHOD SEED``.

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
import sys

from .executors import WorkerBatch, train_one


def main(argv: list[str] | None = None) -> int:
    """Train the one run named on the command line; write its outcome line. Exits 0 after a
    run's own error too (the line says what it was); any other exit means the worker died."""
    batch_file, run_id, method, seed = argv or sys.argv[1:]
    result = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # training's own output (and any library's) goes to stderr, not the result
    try:
        with open(batch_file, "rb") as file:
            batch: WorkerBatch = pickle.load(file)
        ran = train_one(batch.dataset, method, int(seed), batch.model, batch.config,
                        batch.store_root, batch.force, batch.slots)
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
