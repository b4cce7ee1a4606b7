"""What every command that runs as a job shares: its log (the app's job view reads it), its turn on
a public machine, its share of the CPU, its pace watched, its result line, the request it runs
(a request file or the flags) and the pool it reads within a public machine's cap."""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

from ..core import environment
from ..core.bars import TqdmProgress
from ..core.errors import GleeError
from ..core.events import Loading, ProgressLog, Queued
from ..core.pace import PaceGuard
from ..models.fields import from_args
from ..models.options import DataOptions
from ..models.requests import AdaptRequest, TrainRequest


def job_log(args):
    """The job's progress file (the app's job view reads it), or nothing."""
    progress_file = getattr(args, "progress_file", None)
    return ProgressLog(progress_file) if progress_file else (lambda event: None)


def take_turn(args, log) -> bool:
    """A visitor's job on a public machine waits for its turn on the machine before loading
    anything (a queued job holds no memory); True when it took one (:func:`release_first`
    gives it back at the end, or the first run that trains uses it)."""
    if environment.session_slot() is None:
        return False
    from ..core.slots import hold_first, machine_queue

    runs_dir = Path(getattr(args, "runs_dir", None) or environment.runs_dir())
    hold_first(
        machine_queue(runs_dir / ".locks", environment.max_concurrent_runs()),
        lambda: log(Queued(run_id="")),
    )
    return True


@contextmanager
def job_turn(args):
    """A job's log (the app's job view reads it) and its turn on a public machine, taken before
    anything heavy loads and given back at its end; yields (the log, the log with the job's pace
    watched)."""
    log = job_log(args)
    take_turn(args, log)
    from ..core.slots import release_first

    try:
        yield log, paced(log)
    finally:
        release_first()


@contextmanager
def cpu_turn(device: str = "auto"):
    """This job's share of the CPU while it computes (``glee_core.core.devices.cpu_share``, as
    training holds it): beside other work its thread pool shrinks to the spare cores, where two
    threads fighting one busy core made a label budget 14x slower."""
    from ..core.devices import cpu_share, resolve_device

    with cpu_share(resolve_device(device)):
        yield


def paced(progress):
    """A public job's progress, its own pace watched: past its time it stops (PaceGuard)."""
    if (limit := environment.job_limit()) is not None:
        return PaceGuard(limit[0], progress, limit[1])
    return progress


def job_result(args, values) -> None:
    """A job's result, the last line of its stdout (``Job.result`` reads it)."""
    if getattr(args, "request", None):
        print(json.dumps(values))


def read_pool(path: str, column: str | None = None):
    """The pool's texts and notes (printed); a public job's pool within its cap."""
    from ..pool.files import read_pool as read_pool_file

    pool, notes = read_pool_file(path, column)
    if (cap := environment.pool_limit()) is not None and len(pool) > cap:
        raise GleeError(
            f"the pool holds {len(pool):,} texts; a pool here may hold {cap:,}: give a "
            "sample of it, or run Glee Studio on your own machine"
        )
    return pool, notes


def dataset_and_progress(args, request: TrainRequest | AdaptRequest, log):
    """The request's model found and its dataset loaded (each said in the job's log first), and
    where progress goes: tqdm bars, and the job's file when there is one."""
    from ..models.backbone import resolve_model_source

    resolve_model_source(request.model)
    log(Loading(what=f"the dataset {request.data.dataset}"))
    dataset = request.data.load()
    bars = TqdmProgress(dataset.warnings)
    return dataset, bars, ProgressLog(args.progress_file, bars) if args.progress_file else bars


def on_data_request(args, cls, options_cls, command: str, needs: tuple[str, ...]):
    """The request of a command on one dataset (``adapt``, ``health``, ``budget``,
    ``suggest``): a request file (``--request``: what the app's job runs), or the flags."""
    if getattr(args, "request", None):
        return cls.read(args.request)
    missing = [f"--{n}" for n in ("dataset", *needs) if getattr(args, n, None) is None]
    if missing:
        raise GleeError(f"{command} needs {' and '.join(missing)} (or --request FILE)")
    return cls(
        data=from_args(DataOptions, args), options=from_args(options_cls, args), model=args.model
    )
