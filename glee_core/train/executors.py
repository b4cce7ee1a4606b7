"""Where planned runs train: here, one after another, or as one Ray task each on a cluster.

Both executors take the same :class:`Batch` list (methods x seeds of one dataset, backbone and
configuration, what :func:`~glee_core.train.experiment.run_experiments` takes) and return the
finished runs in plan order; the store, its per-run lock, the tables and the app stay as they are.

Ray (``pip install -e ".[cluster]"``): each run not yet in the store becomes one task with
explicit resources (``cpus_per_run``, ``gpus_per_run``). The task trains through the same
``run_experiments`` under the same per-run file lock, so two overlapping sweeps (or a sweep and the
app) still train a configuration once, and it writes the run with the store's atomic rename, so a
killed driver or node leaves nothing that looks finished. The run store must be on storage every
node sees (NFS, a mounted bucket): a node that cannot write it fails its task with a message
saying so, and the driver checks that every landed run is visible to it.
"""

from __future__ import annotations

import os
import socket
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from ..core.errors import GleeError
from ..core.events import ProgressFn, SweepProgress
from ..data.datasets import LongTailDataset
from ..models.config import ExecutorOptions, TrainConfig, TrainRequest
from ..models.methods import MethodSpec, get_method
from ..runs.store import Run, RunStore
from .experiment import PlannedRun, plan_runs, preflight, run_experiments

CLUSTER_EXTRA = 'pip install -e ".[cluster]"'


@dataclass
class Batch:
    """Methods x seeds of one dataset, backbone and configuration."""

    dataset: LongTailDataset
    methods: list[MethodSpec]
    seeds: list[int]
    model: str
    config: TrainConfig
    force: bool = False
    progress: ProgressFn | None = field(default=None, repr=False)  # local runs' events


class SweepFailed(GleeError):
    """Some runs of a sweep raised; the others landed in the store."""

    def __init__(self, failures: dict[str, str], landed: int):
        self.failures = failures
        lines = "\n".join(f"  {run_id}: {error}" for run_id, error in failures.items())
        super().__init__(f"{len(failures)} run(s) failed ({landed} landed in the store):\n"
                         f"{lines}\nRe-run the same command to train only what is missing.")


class LocalExecutor:
    """Every batch here, one run after another (the default)."""

    def run(self, batches: Iterable[Batch], store: RunStore) -> list[Run]:
        return [run for b in batches
                for run in run_experiments(b.dataset, b.methods, b.seeds, b.model, b.config,
                                           store, b.force, b.progress)]


def check_store_writable(root: Path) -> None:
    """Write and remove a probe file in the store; a clear error when this machine cannot."""
    probe = root / f".probe-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe.write_text("ok", encoding="utf-8")
        probe.unlink()
    except OSError as exc:
        raise GleeError(f"node {socket.gethostname()} cannot write the run store {root} ({exc}); "
                        "on a cluster the store must be on storage every node sees: pass "
                        "--runs-dir (or GLEE_RUNS_DIR) with a shared path") from None


def train_one(dataset: LongTailDataset, method: str, seed: int, model: str,
              config: TrainConfig, store_root: str, force: bool) -> dict:
    """What a Ray task does: train (or find) one run in the shared store; returns where it ran."""
    started = time.perf_counter()
    root = Path(store_root)
    check_store_writable(root)
    store = RunStore(root, max_concurrent=0)  # Ray's resources decide what trains where
    run = run_experiments(dataset, [get_method(method)], [seed], model, config, store, force)[0]
    return {"run_id": run.run_id, "node": socket.gethostname(),
            "seconds": round(time.perf_counter() - started, 1)}


def _import_ray():
    try:
        import ray  # noqa: PLC0415 (an optional extra: only --executor ray needs it)
    except ImportError:
        raise GleeError(f"--executor ray needs Ray: {CLUSTER_EXTRA}") from None
    return ray


class RayExecutor:
    """One Ray task per run not yet in the store; one bar for the sweep, a line per run."""

    def __init__(self, options: ExecutorOptions, progress: ProgressFn | None = None,
                 echo: Callable[[str], None] | None = None, show_bar: bool = True):
        self.options = options
        self.progress = progress or (lambda event: None)
        self.echo = echo or (lambda line: print(line, file=sys.stderr))
        self.show_bar = show_bar

    def _connect(self, ray) -> None:
        if ray.is_initialized():
            return
        address = self.options.ray_address
        kwargs = {"address": address} if address else {
            # a local Ray: as many CPUs as this machine has (or GLEE_RAY_CPUS), no dashboard
            "num_cpus": int(os.environ.get("GLEE_RAY_CPUS", "0")) or None,
            "include_dashboard": False}
        try:
            ray.init(log_to_driver=False, configure_logging=False, **kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise GleeError(f"cannot start or join Ray{f' at {address}' if address else ''}: "
                            f"{exc}") from None

    def run(self, batches: Iterable[Batch], store: RunStore) -> list[Run]:
        ray = _import_ray()
        batches = list(batches)
        root = store.root.expanduser().resolve()
        check_store_writable(root)
        planned: list[tuple[Batch, PlannedRun]] = []
        for batch in batches:  # vocabulary problems surface before anything is submitted
            plan = plan_runs(batch.dataset, batch.methods, batch.seeds, batch.model, batch.config)
            for note in preflight(batch.dataset, plan, batch.model, store, batch.force):
                self.echo(f"note: {note}")
            planned += [(batch, p) for p in plan]
        finished = [Run(store.path(p.run_id)) for _, p in planned]
        missing = [(b, p) for b, p in planned if b.force or store.get(p.run_id) is None]
        if not missing:
            self.echo(f"all {len(planned)} runs are in the store; nothing to submit")
            return finished
        self._connect(ray)
        gpus = self.options.gpus_per_run
        if gpus is None:
            gpus = 1.0 if ray.cluster_resources().get("GPU", 0) > 0 else 0.0
        task = ray.remote(train_one).options(num_cpus=self.options.cpus_per_run, num_gpus=gpus,
                                             max_retries=0)
        refs = {}
        shared = {}  # each dataset goes to the object store once
        for batch, job in missing:
            key = id(batch.dataset)
            if key not in shared:
                shared[key] = ray.put(batch.dataset)
            refs[task.remote(shared[key], job.spec.id, job.config.seed, batch.model, batch.config,
                             str(root), batch.force)] = job.run_id
        self.echo(f"submitted {len(refs)} of {len(planned)} runs to Ray "
                  f"({len(planned) - len(refs)} already in the store; {self.options.cpus_per_run:g}"
                  f" CPU, {gpus:g} GPU each)")
        failures: dict[str, str] = {}
        done = 0
        bar = tqdm(total=len(refs), unit="run", desc="sweep", disable=not self.show_bar)
        pending = list(refs)
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                run_id = refs[ready[0]]
                try:
                    info = ray.get(ready[0])
                    if store.get(run_id) is None:
                        raise GleeError(f"it finished on node {info['node']}, but the run is not "
                                        f"in {root} here: the store is not shared between nodes")
                    done += 1
                    line, error = f"done   {run_id} ({info['node']}, {info['seconds']} s)", ""
                except Exception as exc:  # a task's error, or its node died
                    error = _task_error(exc)
                    failures[run_id] = error
                    line = f"FAILED {run_id}: {error}"
                bar.update(1)
                bar.set_postfix(failed=len(failures), refresh=False)
                if self.show_bar:
                    bar.write(line, file=sys.stderr)
                else:
                    self.echo(line)
                self.progress(SweepProgress(run_id=run_id, done=done, failed=len(failures),
                                            total=len(refs), error=error))
        finally:
            bar.close()
        if failures:
            raise SweepFailed(failures, done)
        return finished


def _task_error(exc: Exception) -> str:
    """The root cause of a Ray task failure, in one line (its type and message)."""
    cause = getattr(exc, "cause", None) or exc  # RayTaskError keeps the original exception
    text = str(cause).strip().splitlines()
    message = text[-1] if text else ""
    if cause is exc and type(exc).__name__ in ("WorkerCrashedError", "NodeDiedError",
                                               "OwnerDiedError"):
        return f"{type(exc).__name__}: the worker or its node died"
    return f"{type(cause).__name__}: {message}"


def make_executor(options: ExecutorOptions, progress: ProgressFn | None = None):
    """The executor the options name (Ray is imported only when asked for)."""
    if options.executor == "ray":
        _import_ray()  # a clear error before any work when the extra is missing
        return RayExecutor(options, progress)
    return LocalExecutor()


def execute(request: TrainRequest, store: RunStore | None = None,
            progress: ProgressFn | None = None, dataset: LongTailDataset | None = None
            ) -> list[Run]:
    """Carry out a :class:`TrainRequest` (the CLI's ``train`` and the app's jobs) with the
    executor it names; ``dataset`` is the request's, when the caller has loaded it already."""
    dataset = dataset or request.data.load()
    batch = Batch(dataset, [get_method(m) for m in request.methods], request.seeds,
                  request.model, request.config, request.force, progress)
    return make_executor(request.executor, progress).run([batch], store or RunStore())
