"""The command line's training and data commands: ``train``, ``adapt``, ``reproduce``,
``health``, ``budget`` and ``suggest`` (``glee_core.cli`` parses the flags and calls them)."""

from __future__ import annotations

import json
import re
import sys
from contextlib import contextmanager
from pathlib import Path

from ..budget.options import BudgetOptions
from ..core import environment
from ..core.bars import TqdmProgress
from ..core.errors import GleeError
from ..core.events import (
    Loading,
    ProgressLog,
    Queued,
)
from ..core.pace import PaceGuard
from ..health.options import HealthOptions
from ..models.config import TrainConfig
from ..models.fields import from_args
from ..models.methods import parse_methods
from ..models.options import AdaptOptions, DataOptions, ExecutorOptions, parse_seeds
from ..models.requests import (
    AdaptRequest,
    BudgetRequest,
    HealthRequest,
    SuggestRequest,
    TrainRequest,
)
from ..pool.options import SelfTrainOptions, SuggestOptions
from ..runs.notes import merged_notes


def _train_request(args) -> TrainRequest:
    """The request of a ``train`` command: a request file, or the flags."""
    if args.request:
        return TrainRequest.read(args.request)
    if not getattr(args, "dataset", None) or not args.method:
        raise GleeError("train needs --dataset and --method (or --request FILE)")

    return TrainRequest(
        data=from_args(DataOptions, args),
        methods=[m.id for m in parse_methods(args.method, getattr(args, "mode", "finetune"))],
        seeds=parse_seeds(args.seeds),
        model=args.model,
        config=from_args(TrainConfig, args),
        force=args.force,
        executor=from_args(ExecutorOptions, args),
        self_train=from_args(SelfTrainOptions, args),
    )


def _log(args):
    """The job's progress file (the app's job view reads it), or nothing."""
    progress_file = getattr(args, "progress_file", None)
    return ProgressLog(progress_file) if progress_file else (lambda event: None)


def _take_turn(args, log) -> bool:
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
    log = _log(args)
    _take_turn(args, log)
    from ..core.slots import release_first

    try:
        yield log, _paced(log)
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


def _paced(progress):
    """A public job's progress, its own pace watched: past its time it stops (PaceGuard)."""
    if (limit := environment.job_limit()) is not None:
        return PaceGuard(limit[0], progress, limit[1])
    return progress


def _result(args, values) -> None:
    """A job's result, the last line of its stdout (``Job.result`` reads it)."""
    if getattr(args, "request", None):
        print(json.dumps(values))


def _read_pool(path: str, column: str | None = None):
    """The pool's texts and notes (printed); a public job's pool within its cap."""
    from ..pool.files import read_pool

    pool, notes = read_pool(path, column)
    if (cap := environment.pool_limit()) is not None and len(pool) > cap:
        raise GleeError(
            f"the pool holds {len(pool):,} texts; a pool here may hold {cap:,}: give a "
            "sample of it, or run Glee Studio on your own machine"
        )
    return pool, notes


def train(args) -> int:
    request = _train_request(args)
    # the app's job view says what the first seconds go to (imports, the data), not "starting"
    log = _log(args)
    if not request.executor.remote:
        _take_turn(args, log)
    log(Loading(what="the libraries (torch, transformers)"))
    from ..core.devices import cpu_share, resolve_device
    from ..core.slots import release_first
    from ..runs.store import RunStore
    from ..train.executors import execute

    # resolved once here (a bad device fails before any work); on a cluster, the node that trains
    device = None if request.executor.remote else resolve_device(request.config.device)
    dataset, bars, progress = _dataset_and_progress(args, request, log)
    progress = _paced(progress)
    if request.self_train.pool:  # learning from the unlabelled texts first
        if request.executor.remote:
            raise GleeError(
                "--pool trains on this machine's executor only (its pseudo-labels "
                "are made here): leave out --executor, or add the texts with --add"
            )
        from ..pool.selftrain import self_trained

        pool, notes = _read_pool(request.self_train.pool)
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
        with cpu_share(device):
            dataset = self_trained(
                dataset,
                pool,
                request.model,
                RunStore(args.runs_dir),
                request.self_train.self_train,
                device,
                progress,
            )
    try:
        runs = execute(request, RunStore(args.runs_dir), progress, dataset)
    finally:
        release_first()  # no run trained: the slot taken up front goes back
        bars.close()
    for note in merged_notes([run.record for run in runs]):
        print(f"note: {note}", file=sys.stderr)
    if args.format == "table" or (args.format == "auto" and sys.stdout.isatty()):
        print(result_table(runs))
    else:
        print(json.dumps([run.summary() for run in runs]))
    return 0


def result_table(runs) -> str:
    """A launch's runs for a person: the compare table of each setting (percent, mean ± std over
    seeds, the chosen head marked), then the recommendation over them, in plain text."""
    from ..runs.recommend import recommend, recommendation_text
    from ..runs.tables import aggregate, comparison_table, to_markdown, twin_notes

    text = to_markdown(comparison_table(aggregate(runs)))
    text += "".join(f"\nnote: {re.sub('`', '', note)}." for note in twin_notes(runs))
    rec = recommend(runs)
    if rec is not None:
        text += "\n\n" + re.sub(r"\*\*|`", "", recommendation_text(rec)) + "\n"
        if rec.ensemble is not None:
            text += (
                "Take the average with you: python -m glee_core export --run "
                + ",".join(rec.ensemble.run_ids)
                + " --out DIR (predict --run takes the same ids)\n"
            )
    return text


def _dataset_and_progress(args, request: TrainRequest | AdaptRequest, log):
    """The request's model found and its dataset loaded (each said in the job's log first), and
    where progress goes: tqdm bars, and the job's file when there is one."""
    from ..models.backbone import resolve_model_source

    resolve_model_source(request.model)
    log(Loading(what=f"the dataset {request.data.dataset}"))
    dataset = request.data.load()
    bars = TqdmProgress(dataset.warnings)
    return dataset, bars, ProgressLog(args.progress_file, bars) if args.progress_file else bars


def _on_data_request(args, cls, options_cls, command: str, needs: tuple[str, ...]):
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


def adapt(args) -> int:
    log = _log(args)
    log(Loading(what="the libraries (torch, transformers)"))
    from ..train.adapt import adapt

    request = _on_data_request(args, AdaptRequest, AdaptOptions, "adapt", ("out",))
    options = request.options
    dataset, bars, progress = _dataset_and_progress(args, request, log)
    try:
        record = adapt(dataset, request.model, options, progress)
    finally:
        bars.close()
    before, after = record["held_out_before"], record["held_out_after"]
    if before and after and options.objective == "simcse":  # its own measure: the head is as it was
        print(
            f"held-out SimCSE loss: {before['simcse_loss']:.4f} -> {after['simcse_loss']:.4f}",
            file=sys.stderr,
        )
    elif before and after:
        print(
            f"held-out [MASK] top-1: {before['mask_top1']:.1%} -> {after['mask_top1']:.1%}; "
            f"masked-LM loss {before['mlm_loss']:.3f} -> {after['mlm_loss']:.3f}",
            file=sys.stderr,
        )
    print(f"use it: --model {Path(options.out).expanduser()}", file=sys.stderr)
    print(json.dumps(record))
    return 0


def _data_report(args, request, measure) -> tuple:
    """A data report of ``request`` (``health``, ``budget``): ``measure(dataset, backbone,
    model, options, feature cache, progress)`` under progress bars (and the job's file, its
    turn on a public machine and its pace watched), its files written to its ``out``; (the
    report, its two files)."""
    from ..models.backbone import load_backbone
    from ..runs.store import RunStore

    options = request.options
    out = Path(options.out).expanduser()
    if out.exists() and not out.is_dir():  # said before the check runs, not after
        raise GleeError(
            f"--out {out} is a file; give a folder to write the report to (new, "
            "or one of an earlier report's)"
        )
    with job_turn(args) as (log, _):
        log(Loading(what=f"the dataset {request.data.dataset}"))
        dataset = request.data.load()
        bars = TqdmProgress(dataset.warnings)
        progress = _paced(ProgressLog(args.progress_file, bars) if args.progress_file else bars)
        try:
            progress(Loading(what=f"the backbone {request.model}"))
            with cpu_turn(options.device):
                report = measure(
                    dataset,
                    load_backbone(request.model),
                    request.model,
                    options,
                    RunStore(args.runs_dir).features_dir,
                    progress,
                )
        finally:
            bars.close()
        return report, report.write(options.out)


def health(args) -> int:
    from ..core.devices import resolve_device
    from ..health.examine import data_health
    from ..runs.tables import markdown_table

    def measure(dataset, backbone, model, options, cache, progress):
        return data_health(
            dataset, backbone, model, options, cache, resolve_device(options.device), progress
        )

    request = _on_data_request(args, HealthRequest, HealthOptions, "health", ("out",))
    report, (health_file, issues_file) = _data_report(args, request, measure)
    print("\n".join(markdown_table(*report.table(), left=2)))
    summary = report.summary()
    said = (
        f"{summary['suspected_label_errors']} suspected label error(s) among "
        f"{summary['training_texts']} training texts ({report.folds}-fold probabilities of "
        f"{report.method} on the {report.pooling}-pooled frozen features); "
        f"{summary['training_texts_leaked_into_dev_or_test']} training text(s) with a "
        "near-duplicate in dev or test."
    )
    print(f"\n{said}")
    for pair in report.confused_pairs[:3]:
        absorbs = " (a head class absorbing a tail one)" if pair["head_absorbs_tail"] else ""
        print(
            f"most confused: {pair['true']} -> {pair['predicted']}, {pair['texts']} text(s), "
            f"{pair['share']:.0%} of its own{absorbs}"
        )
    if summary["too_few_to_judge"]:
        print(
            f"too few to judge (fewer training texts than --folds {report.folds}): "
            + ", ".join(summary["too_few_to_judge"])
        )
    print(
        f"wrote {health_file} and {issues_file} (one line per training text, the most "
        "suspect first)",
        file=sys.stderr,
    )
    _result(args, {"folder": str(health_file.parent), "summary": said})
    return 0


def budget(args) -> int:
    from ..budget.curves import label_budget
    from ..budget.report import most_helped
    from ..runs.tables import markdown_table

    request = _on_data_request(args, BudgetRequest, BudgetOptions, "budget", ("out",))
    report, (budget_file, table_file) = _data_report(args, request, label_budget)
    print("\n".join(markdown_table(*report.table(), left=2)))
    print(
        f"\n{report.method} on the {report.pooling}-pooled frozen features, retrained on "
        f"{', '.join(f'{f:.0%}' for f in report.fractions)} of every class's training texts "
        f"x seeds {', '.join(map(str, report.seeds))}; test F1 per class; curves "
        f"F1 = a - b * n^-{report.exponent:g} (n: the class's texts), shrunk toward the "
        f"pooled one ({report.seconds:.0f} s)."
    )
    helped = most_helped(report)
    if helped:
        print(
            "one more labelled text helps these tail classes most: "
            + ", ".join(f"{c.name} (+{c.gain_per_text:.3f} F1 a text)" for c in helped)
        )
    too_few = [c.name for c in report.classes if not c.judged]
    if too_few:
        print(
            "too few to judge (two training texts or fewer, or none in test): " + ", ".join(too_few)
        )
    print(f"wrote {budget_file} and {table_file}", file=sys.stderr)
    _result(
        args,
        {
            "folder": str(budget_file.parent),
            "summary": f"{report.method} retrained on {len(report.fractions)} fractions x "
            f"{len(report.seeds)} seed(s) in {report.seconds:.0f} s",
        },
    )
    return 0


def suggest(args) -> int:
    from ..core.files import write_atomic
    from ..pool.labelling import LabellingSession
    from ..pool.suggest import suggest
    from ..runs.store import RunStore
    from ..runs.tables import spreadsheet_csv

    request = _on_data_request(args, SuggestRequest, SuggestOptions, "suggest", ("pool", "out"))
    options = request.options
    out = Path(options.out).expanduser()
    if options.out != "-" and out.is_dir():
        raise GleeError(f"--out {out} is a folder; give the CSV file to write")
    if options.out != "-":
        _check_unfilled(out)
    store = RunStore(args.runs_dir)
    with job_turn(args) as (log, _):
        log(Loading(what=f"the dataset {request.data.dataset}"))
        dataset = request.data.load()
        log(Loading(what="the pool"))
        pool, notes = _read_pool(options.pool, options.pool_text_column)
        bars = TqdmProgress(dataset.warnings + notes)
        progress = _paced(ProgressLog(args.progress_file, bars) if args.progress_file else bars)
        try:
            with cpu_turn(options.device):
                found = suggest(dataset, pool, request.model, store, options, progress)
        finally:
            bars.close()
    if options.out != "-":
        write_atomic(out, spreadsheet_csv(found.frame))
    session = None
    if request.session:
        pool_path = Path(options.pool)
        session = LabellingSession.suggested(store, dataset.id, pool_path, pool_path.name, found)
    for note in found.notes:
        print(f"note: {note}", file=sys.stderr)
    tail = set(dataset.head_tail()[1])
    likely = [
        f"{row['class']} ~{row['likely']}"
        for row in found.pool_classes
        if row["class"] in tail and row["likely"]
    ]
    if likely:
        print(
            "the pool likely holds, of the tail classes (predicted x the head's precision on "
            "dev): " + ", ".join(likely),
            file=sys.stderr,
        )
    said = (
        f"{len(found.frame)} suggestion(s) by {found.strategy} from the scores of "
        f"{found.run_id}; {found.duplicates} of the pool's {found.pool_texts} texts left out "
        f"as already in the data (exactly or nearly) ({found.seconds:.1f} s)"
    )
    if options.out != "-":
        print(
            f"wrote {said} to {out}; fill its label column, then: python -m glee_core train "
            f"--dataset {request.data.dataset} --add {out}",
            file=sys.stderr,
        )
    print(
        json.dumps(
            {
                **found.summary(),
                "out": str(out),
                "summary": said,
                "session": str(session.path_for(store, dataset.id, options.pool))
                if session
                else None,
                "notes": found.notes,
            }
        )
    )
    return 0


def _check_unfilled(out: Path) -> None:
    """``suggest --out FILE`` again after its label column was filled (the documented loop)
    would overwrite the labels: refused, saying how to keep them."""
    if not out.is_file():
        return
    from ..pool.files import labels_given

    filled = labels_given(out)
    if filled:
        raise GleeError(
            f"--out {out} already holds {filled} label(s) you filled in: give them to "
            f"train --add {out} first, or write the new suggestions to another file "
            "(--out NEW.csv); nothing was overwritten"
        )


def reproduce(args, argv: list[str]) -> int:
    from ..core.devices import resolve_device
    from ..data.catalog import PAPER_DATASETS
    from ..data.datasets import load_dataset
    from ..models.backbone import resolve_model_source
    from ..runs.paper_tables import comparison_markdown, comparison_text
    from ..runs.store import RunStore
    from ..train.executors import make_executor
    from ..train.reproduce import (
        get_table,
        header_lines,
        manifest_findings,
        model_for,
        paper_seeds,
        reproduce,
    )

    table = get_table(args.table)
    if args.methods:
        table = table.subset([m.strip() for m in args.methods.split(",") if m.strip()])
    ids = (
        [d.strip() for d in args.datasets.split(",") if d.strip()]
        if args.datasets
        else list(table.datasets)
    )
    if not ids:
        raise GleeError("--datasets is empty; e.g. --datasets r8,cmid")
    seeds = paper_seeds(args.seeds)
    overrides = {
        f: getattr(args, f)
        for f in ("epochs", "limit", "mode", "device", "precision")
        if hasattr(args, f)
    }
    options = from_args(ExecutorOptions, args)
    if not options.remote:  # on a cluster, the node that trains checks
        resolve_device(overrides.get("device", "auto"))
    data_dir = getattr(args, "data_dir", None)
    datasets, problems = [], []
    for dataset_id in ids:  # every dataset is checked before anything trains
        try:
            if dataset_id not in PAPER_DATASETS:
                raise GleeError(f"not one of the paper's datasets ({', '.join(PAPER_DATASETS)})")
            # the released code's head/tail rule, so Head/Tail F1 are the paper's quantities
            datasets.append(load_dataset(dataset_id, data_dir=data_dir, head_tail="released"))
        except GleeError as exc:  # name the dataset once (many messages already start with it)
            message = str(exc)
            problems.append(
                message if message.startswith(f"{dataset_id}:") else f"{dataset_id}: {message}"
            )
    if problems:
        raise GleeError(
            "cannot load "
            + "; ".join(problems)
            + " - pass --datasets with the ones you have (--data-dir DIR)"
        )
    for model in {model_for(d, args.model) for d in datasets}:
        resolve_model_source(model)

    bars: list[TqdmProgress] = []

    def progress_for(dataset):
        print(
            f"== Table {table.number} · {dataset.id} · {model_for(dataset, args.model)} · "
            f"{overrides.get('mode', 'finetune')} · seeds {','.join(map(str, seeds))}",
            file=sys.stderr,
        )
        bars.append(TqdmProgress(dataset.warnings))
        return bars[-1]

    try:
        frame, manifest = reproduce(
            table,
            datasets,
            args.model,
            seeds,
            overrides,
            RunStore(args.runs_dir),
            make_executor(options),
            progress_for=progress_for,
            command=" ".join(["python -m glee_core", *argv]),
        )
    finally:
        for bar in bars:
            bar.close()
    for note in manifest["notes"]:
        print(f"note: {note}", file=sys.stderr)
    findings = manifest_findings(manifest)
    if args.format == "md":
        print(comparison_markdown(frame, table, header_lines(manifest), findings), end="")
    else:
        print(comparison_text(frame, table, header_lines(manifest), findings), end="")
    for kind, path in manifest["files"].items():
        print(f"wrote {kind}: {path}", file=sys.stderr)
    return 0
