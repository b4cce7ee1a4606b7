"""Where planned runs train: here, one after another, or as one Ray task each on a cluster.

Both executors take the same list of :class:`~glee_core.train.launch.Launch` (methods x seeds of
one dataset, backbone, configuration and store, each planned once) and return the finished runs in
plan order; the store, its per-run lock, the tables and the app stay as they are.

Ray (``pip install -e ".[cluster]"``): each run not yet in the store becomes one task with
explicit resources (``cpus_per_run``, ``gpus_per_run``). The task trains through the same
``Launch.run`` under the same per-run file lock, so two overlapping sweeps (or a sweep and the
app) still train a configuration once, and it writes the run with the store's atomic rename, so a
killed driver or node leaves nothing that looks finished. The run store must be on storage every
node sees (NFS, a mounted bucket): a node that cannot write it fails its task with a message
saying so, and the driver checks that every landed run is visible to it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import replace
from multiprocessing.connection import wait
from pathlib import Path

from tqdm.auto import tqdm

from ..core.devices import resolve_device, resolve_runs_at_once
from ..core.errors import GleeError
from ..core.events import Note, ProgressFn, SweepProgress
from ..data.datasets import LongTailDataset
from ..models.methods import get_method
from ..models.options import EXECUTORS, ExecutorOptions
from ..models.requests import TrainRequest
from ..runs.store import Run, RunStore
from .experiment import run_launch
from .launch import Launch
from .plan import PlannedRun
from .preflight import preflight
from .worker import WorkerBatch, check_store_writable, train_one, worker_command, worker_env

# starts a run gets when its worker dies without an error of its own (killed: out of memory, a
# lost node); a run that raises is not started again
WORKER_TRIES = 2


class SweepFailed(GleeError):
    """Some runs of a sweep raised; the others landed in the store."""

    def __init__(self, failures: dict[str, str], landed: int):
        self.failures = failures
        lines = "\n".join(f"  {run_id}: {error}" for run_id, error in failures.items())
        super().__init__(
            f"{len(failures)} run(s) failed ({landed} landed in the store):\n"
            f"{lines}\nRe-run the same command to train only what is missing."
        )


class SweepReport:
    """What a sweep of runs in other processes (Ray tasks, or this machine's workers) tells the
    user as they end: one bar for the sweep, a line per run, a :class:`SweepProgress` event;
    :meth:`finish` raises :class:`SweepFailed` if any failed."""

    def __init__(
        self, total: int, progress: ProgressFn, echo: Callable[[str], None], show_bar: bool
    ):
        self.total, self.progress, self.echo, self.show_bar = total, progress, echo, show_bar
        self.failures: dict[str, str] = {}
        self.done = 0
        self.bar = tqdm(total=total, unit="run", desc="sweep", disable=not show_bar)

    def ended(self, run_id: str, where: str = "", error: str = "") -> None:
        if error:
            self.failures[run_id] = error
            line = f"FAILED {run_id}: {error}"
        else:
            self.done += 1
            line = f"done   {run_id} ({where})"
        self.bar.update(1)
        self.bar.set_postfix(failed=len(self.failures), refresh=False)
        if self.show_bar:
            self.bar.write(line, file=sys.stderr)
        else:
            self.echo(line)
        self.progress(
            SweepProgress(
                run_id=run_id,
                done=self.done,
                failed=len(self.failures),
                total=self.total,
                error=error,
            )
        )

    def finish(self) -> None:
        """Close the bar; raise :class:`SweepFailed` if a run failed."""
        self.bar.close()
        if self.failures:
            raise SweepFailed(self.failures, self.done)


class LocalExecutor:
    """Every batch here: one run after another, or ``runs_at_once`` runs at a time, each in a
    worker process of its own sharing the device (``--runs-at-once``). Quick-mode batches
    always train in this process, their heads in one loop."""

    def __init__(
        self,
        runs_at_once: str = "1",
        echo: Callable[[str], None] | None = None,
        show_bar: bool = True,
    ):
        self.runs_at_once = runs_at_once
        self.echo = echo or (lambda line: print(line, file=sys.stderr))
        self.show_bar = show_bar

    def run(self, launches: Iterable[Launch]) -> list[Run]:
        batches = list(launches)
        at_once = {
            id(b): 1
            if b.config.frozen
            else resolve_runs_at_once(self.runs_at_once, resolve_device(b.config.device))
            for b in batches
        }
        shared = [b for b in batches if at_once[id(b)] > 1]
        trained = set()
        if shared:  # first, every batch's missing runs, N at a time across the batches
            trained = self._at_once(shared, max(at_once[id(b)] for b in shared))
        return [
            run
            for b in batches
            # runs trained in workers are loaded, not forced again
            for run in run_launch(
                replace(b, force=b.force and at_once[id(b)] == 1, plan=b.planned()), trained
            )
        ]

    def _at_once(self, batches: list[Launch], at_once: int) -> set[str]:
        """The batches' missing runs in ``at_once`` worker processes (each a fresh Python that
        loads its own backbone and takes one of ``at_once`` training slots of the machine's
        queue).
        LP-FT's heads are fitted here first, a batch's in one loop, so the workers find them
        stored; :meth:`run` then loads every run from the store. Returns the ids trained."""
        missing: list[tuple[Launch, PlannedRun]] = []
        for b in batches:
            progress = b.progress or (lambda event: None)
            plan = b.planned()
            for note in preflight(b.dataset, plan.runs, b.model, b.store, b.force):
                progress(Note(message=note))
            todo = plan.to_train
            if todo and todo[0].config.lp_ft:
                run_launch(
                    Launch(
                        b.dataset,
                        [get_method(m) for m in dict.fromkeys(p.spec.id for p in todo)],
                        sorted({p.config.seed for p in todo}),
                        b.model,
                        todo[0].config.linear_probe_stage(),
                        b.store,
                        progress=progress,
                    )
                )
            missing += [(b, p) for p in todo]
        if not missing:
            return set()
        self.echo(f"training {len(missing)} runs, {at_once} at once, each in a process of its own")
        progress_of = {p.run_id: b.progress or (lambda event: None) for b, p in missing}
        report = SweepReport(
            len(missing), lambda event: progress_of[event.run_id](event), self.echo, self.show_bar
        )  # each run's end to its batch's progress
        try:
            self._workers(missing, at_once, report)
        finally:
            report.bar.close()
        report.finish()
        return {p.run_id for _, p in missing}  # finish() raised if one failed

    def _workers(
        self, missing: list[tuple[Launch, PlannedRun]], at_once: int, report: SweepReport
    ) -> None:
        """Train each missing run in a fresh Python of its own (``glee_core.train.worker``; CUDA
        cannot be forked, and spawn would re-run the caller's script), at most ``at_once``
        alive. A run's own error fails that run alone; a worker that dies without one (killed:
        out of memory, a signal) is started once more, then its run fails with how it died.
        The others go on either way."""
        queue = deque(missing)
        tries: Counter[str] = Counter()
        running: dict[int, tuple[subprocess.Popen, tuple[Launch, PlannedRun]]] = {}
        env = worker_env()
        with tempfile.TemporaryDirectory(prefix="glee-workers-") as folder:
            batches = {id(b): b for b, _ in missing}  # each pickled once, read by its workers
            batch_files = {
                key: WorkerBatch(
                    b.dataset, b.model, b.config, str(_root(b)), b.force, at_once
                ).write(Path(folder) / f"batch-{number}.pkl")
                for number, (key, b) in enumerate(batches.items())
            }
            try:
                while queue or running:
                    while queue and len(running) < at_once:
                        job = queue.popleft()
                        batch, planned = job
                        worker = subprocess.Popen(
                            worker_command(batch_files[id(batch)], planned),
                            stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE,
                            env=env,
                        )
                        tries[planned.run_id] += 1
                        running[worker.stdout.fileno()] = (worker, job)
                    for ready in wait(list(running)):  # a result line, or the end of a worker
                        worker, job = running.pop(ready)
                        outcome = _outcome(worker)
                        run_id = job[1].run_id
                        if outcome is not None and outcome[0] == "done":
                            report.ended(run_id, f"{outcome[1]['seconds']} s")
                        elif outcome is not None:
                            report.ended(run_id, error=outcome[1])
                        elif tries[run_id] < WORKER_TRIES:
                            self.echo(
                                f"the worker training {run_id} "
                                f"{_death(worker.returncode)}; training it once more"
                            )
                            queue.appendleft(job)
                        else:
                            report.ended(
                                run_id,
                                error=f"its worker {_death(worker.returncode)}, "
                                f"{WORKER_TRIES} times (out of memory? fewer "
                                "--runs-at-once)",
                            )
            finally:  # Ctrl-C or an error here: no worker outlives the sweep
                for worker, _ in running.values():
                    worker.terminate()
                    worker.wait()
                    worker.stdout.close()


def _outcome(worker: subprocess.Popen) -> tuple[str, object] | None:
    """What an ended worker wrote as its result line (waits for it to exit), or None where
    it died first."""
    with worker.stdout:
        line = worker.stdout.read()
    worker.wait()
    try:
        return tuple(json.loads(line)) if line.strip() else None
    except json.JSONDecodeError:  # cut off mid-line by its death
        return None


def _death(exitcode: int | None) -> str:
    """How a worker that wrote no result ended, in words."""
    if exitcode is not None and exitcode < 0:
        try:
            return f"was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"was killed by signal {-exitcode}"
    return f"exited with code {exitcode} before its run ended"


def _import_ray():
    try:
        import ray  # noqa: PLC0415 (an optional extra: only --executor ray needs it)
    except ImportError:
        raise GleeError(f"--executor ray needs Ray: {EXECUTORS['ray'].install}") from None
    return ray


class RayExecutor:
    """One Ray task per run not yet in the store; one bar for the sweep, a line per run."""

    def __init__(
        self,
        options: ExecutorOptions,
        progress: ProgressFn | None = None,
        echo: Callable[[str], None] | None = None,
        show_bar: bool = True,
    ):
        self.options = options
        self.progress = progress or (lambda event: None)
        self.echo = echo or (lambda line: print(line, file=sys.stderr))
        self.show_bar = show_bar

    def _connect(self, ray) -> None:
        if ray.is_initialized():
            return
        address = self.options.ray_address
        kwargs = (
            {"address": address}
            if address
            else {
                # a local Ray: as many CPUs as this machine has (or GLEE_RAY_CPUS), no dashboard
                "num_cpus": int(os.environ.get("GLEE_RAY_CPUS", "0")) or None,
                "include_dashboard": False,
            }
        )
        try:
            ray.init(log_to_driver=False, configure_logging=False, **kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise GleeError(
                f"cannot start or join Ray{f' at {address}' if address else ''}: {exc}"
            ) from None

    def run(self, launches: Iterable[Launch]) -> list[Run]:
        ray = _import_ray()
        batches = list(launches)
        for batch in batches:
            check_store_writable(_root(batch))
        planned: list[tuple[Launch, PlannedRun]] = []
        for batch in batches:  # vocabulary problems surface before anything is submitted
            plan = batch.planned()
            if plan.left_out:
                self.echo(f"note: {plan.note}")
            for note in preflight(batch.dataset, plan.runs, batch.model, batch.store, batch.force):
                self.echo(f"note: {note}")
            planned += [(batch, p) for p in plan.runs]
        finished = [Run(b.store.path(p.run_id)) for b, p in planned]
        missing = [(b, p) for b in batches for p in b.planned().to_train]
        if not missing:
            self.echo(f"all {len(planned)} runs are in the store; nothing to submit")
            return finished
        self._connect(ray)
        gpus = self.options.gpus_per_run
        if gpus is None:  # a GPU each, or 1/N of one with --runs-at-once N
            share = 1 if self.options.runs_at_once == "auto" else int(self.options.runs_at_once)
            gpus = 1.0 / share if ray.cluster_resources().get("GPU", 0) > 0 else 0.0
        task = ray.remote(train_one).options(
            num_cpus=self.options.cpus_per_run, num_gpus=gpus, max_retries=WORKER_TRIES - 1
        )
        refs = {}
        shared = {}  # each dataset and each batch go to the object store once
        for batch, job in missing:
            for key, value in (
                (id(batch.dataset), batch.dataset),
                (
                    id(batch),
                    WorkerBatch(None, batch.model, batch.config, str(_root(batch)), batch.force, 0),
                ),
            ):
                if key not in shared:
                    shared[key] = ray.put(value)
            remote = task.remote(
                shared[id(batch)], job.spec.id, job.config.seed, shared[id(batch.dataset)]
            )
            refs[remote] = (batch, job.run_id)
        self.echo(
            f"submitted {len(refs)} of {len(planned)} runs to Ray "
            f"({len(planned) - len(refs)} already in the store; {self.options.cpus_per_run:g}"
            f" CPU, {gpus:g} GPU each)"
        )
        report = SweepReport(len(refs), self.progress, self.echo, self.show_bar)
        pending = list(refs)
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                batch, run_id = refs[ready[0]]
                try:
                    info = ray.get(ready[0])
                    if batch.store.get(run_id) is None:
                        raise GleeError(
                            f"it finished on node {info['node']}, but the run is not "
                            f"in {_root(batch)} here: the store is not shared between nodes"
                        )
                    report.ended(run_id, f"{info['node']}, {info['seconds']} s")
                except Exception as exc:  # a task's error, or its node died
                    report.ended(run_id, error=_task_error(exc))
        finally:
            report.bar.close()
        report.finish()
        return finished


def _root(launch: Launch) -> Path:
    """Where ``launch``'s store is, as every process and node names it."""
    return launch.store.root.expanduser().resolve()


def _task_error(exc: Exception) -> str:
    """The root cause of a Ray task failure, in one line (its type and message)."""
    cause = getattr(exc, "cause", None) or exc  # RayTaskError keeps the original exception
    text = str(cause).strip().splitlines()
    message = text[-1] if text else ""
    if cause is exc and type(exc).__name__ in (
        "WorkerCrashedError",
        "NodeDiedError",
        "OwnerDiedError",
    ):
        return f"{type(exc).__name__}: the worker or its node died"
    return f"{type(cause).__name__}: {message}"


def ray_executor(options: ExecutorOptions, progress: ProgressFn | None) -> RayExecutor:
    """``--executor ray`` (:data:`glee_core.models.options.EXECUTORS` names it)."""
    _import_ray()  # a clear error before any work when the extra is missing
    return RayExecutor(options, progress)


def local_executor(options: ExecutorOptions, progress: ProgressFn | None) -> LocalExecutor:
    """``--executor local``, the default."""
    return LocalExecutor(options.runs_at_once)


def make_executor(options: ExecutorOptions, progress: ProgressFn | None = None):
    """The executor the options name (Ray is imported only when asked for)."""
    return EXECUTORS[options.executor].make(options, progress)


def execute(
    request: TrainRequest,
    store: RunStore | None = None,
    progress: ProgressFn | None = None,
    dataset: LongTailDataset | None = None,
) -> list[Run]:
    """Carry out a :class:`TrainRequest` (the CLI's ``train`` and the app's jobs) with the
    executor it names; ``dataset`` is the request's, when the caller has loaded it already."""
    launch = Launch(
        dataset or request.data.load(),
        [get_method(m) for m in request.methods],
        request.seeds,
        request.model,
        request.config,
        store or RunStore(),
        request.force,
        progress,
    )
    launch.planned()  # once: what the app's estimate read (job_kinds.estimate_training)
    return make_executor(request.executor, progress).run([launch])
