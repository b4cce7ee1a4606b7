"""The command line's training and data commands: ``train``, ``adapt``, ``reproduce``,
``health``, ``budget`` and ``suggest`` (``glee_core.cli`` parses the flags and calls them)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from ..core import environment
from ..core.bars import TqdmProgress
from ..core.errors import GleeError
from ..core.events import (
    Loading,
    ProgressLog,
    Queued,
)
from ..core.pace import PaceGuard
from ..models.config import TrainConfig
from ..models.fields import from_args
from ..models.methods import parse_methods
from ..models.options import (
    AdaptOptions,
    AdaptRequest,
    BudgetOptions,
    DataOptions,
    ExecutorOptions,
    HealthOptions,
    SelfTrainOptions,
    SuggestOptions,
    TrainRequest,
    parse_seeds,
)
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


def train(args) -> int:
    request = _train_request(args)
    # the app's job view says what the first seconds go to (imports, the data), not "starting"
    log = ProgressLog(args.progress_file) if args.progress_file else (lambda event: None)
    if environment.session_slot() is not None and not request.executor.remote:
        # a visitor's job on a public machine waits for its turn before loading anything
        from ..core.slots import hold_first, machine_queue

        runs_dir = Path(args.runs_dir or environment.runs_dir())
        hold_first(
            machine_queue(runs_dir / ".locks", environment.max_concurrent_runs()),
            lambda: log(Queued(run_id="")),
        )
    log(Loading(what="the libraries (torch, transformers)"))
    from ..core.devices import resolve_device
    from ..core.slots import release_first
    from ..runs.store import RunStore
    from ..train.executors import execute

    if not request.executor.remote:  # on a cluster, the node that trains checks
        resolve_device(request.config.device)
    dataset, bars, progress = _dataset_and_progress(args, request, log)
    if (limit := environment.job_limit()) is not None:  # a public job: its own pace may stop it
        progress = PaceGuard(limit[0], progress, limit[1])
    if request.self_train.pool:  # learning from the unlabelled texts first
        if request.executor.remote:
            raise GleeError(
                "--pool trains on this machine's executor only (its pseudo-labels "
                "are made here): leave out --executor, or add the texts with --add"
            )
        from ..data.pool import read_pool
        from ..train.pseudo import self_trained

        pool, notes = read_pool(request.self_train.pool)
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
        dataset = self_trained(
            dataset,
            pool,
            request.model,
            RunStore(args.runs_dir),
            request.self_train.self_train,
            resolve_device(request.config.device),
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


def adapt(args) -> int:
    log = ProgressLog(args.progress_file) if args.progress_file else (lambda event: None)
    log(Loading(what="the libraries (torch, transformers)"))
    from ..train.adapt import adapt

    if args.request:
        request = AdaptRequest.read(args.request)
    elif not getattr(args, "dataset", None) or not getattr(args, "out", None):
        raise GleeError("adapt needs --dataset and --out (or --request FILE)")
    else:
        request = AdaptRequest(
            data=from_args(DataOptions, args),
            options=from_args(AdaptOptions, args),
            model=args.model,
        )
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


def _data_report(args, options, measure) -> tuple:
    """A data report of the dataset the flags name (``health``, ``budget``): ``measure(dataset,
    backbone, model, options, feature cache, progress)`` under progress bars, its files written
    to ``options.out``; (the report, its two files)."""
    from ..models.backbone import load_backbone
    from ..runs.store import RunStore

    out = Path(options.out).expanduser()
    if out.exists() and not out.is_dir():  # said before the check runs, not after
        raise GleeError(
            f"--out {out} is a file; give a folder to write the report to (new, "
            "or one of an earlier report's)"
        )
    dataset = from_args(DataOptions, args).load()
    bars = TqdmProgress(dataset.warnings)
    try:
        report = measure(
            dataset,
            load_backbone(args.model),
            args.model,
            options,
            RunStore(args.runs_dir).features_dir,
            bars,
        )
    finally:
        bars.close()
    return report, report.write(options.out)


def health(args) -> int:
    from ..core.devices import resolve_device
    from ..runs.tables import markdown_table
    from ..train.examine import data_health

    def measure(dataset, backbone, model, options, cache, progress):
        return data_health(
            dataset, backbone, model, options, cache, resolve_device(options.device), progress
        )

    report, (health_file, issues_file) = _data_report(args, from_args(HealthOptions, args), measure)
    print("\n".join(markdown_table(*report.table(), left=2)))
    summary = report.summary()
    print(
        f"\n{summary['suspected_label_errors']} suspected label error(s) among "
        f"{summary['training_texts']} training texts ({report.folds}-fold probabilities of "
        f"{report.method} on the {report.pooling}-pooled frozen features); "
        f"{summary['training_texts_leaked_into_dev_or_test']} training text(s) with a "
        "near-duplicate in dev or test."
    )
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
    return 0


def budget(args) -> int:
    from ..runs.budget import most_helped
    from ..runs.tables import markdown_table
    from ..train.learning_curves import label_budget

    report, (budget_file, table_file) = _data_report(
        args, from_args(BudgetOptions, args), label_budget
    )
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
    return 0


def suggest(args) -> int:
    from ..core.files import write_atomic
    from ..data.pool import read_pool
    from ..runs.store import RunStore
    from ..runs.tables import spreadsheet_csv
    from ..train.suggest import suggest

    options = from_args(SuggestOptions, args)
    out = Path(options.out).expanduser()
    if out.is_dir():
        raise GleeError(f"--out {out} is a folder; give the CSV file to write")
    dataset = from_args(DataOptions, args).load()
    pool, notes = read_pool(options.pool, options.pool_text_column)
    bars = TqdmProgress(dataset.warnings + notes)
    try:
        found = suggest(dataset, pool, args.model, RunStore(args.runs_dir), options, bars)
    finally:
        bars.close()
    write_atomic(out, spreadsheet_csv(found.frame))
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
    print(
        f"wrote {len(found.frame)} suggestion(s) to {out} ({found.strategy}; the pool's "
        f"{found.pool_texts} texts, {found.duplicates} left out as already labelled); fill its "
        f"label column, then: python -m glee_core train --dataset {args.dataset} --add {out}",
        file=sys.stderr,
    )
    print(json.dumps({**found.summary(), "out": str(out)}))
    return 0


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
