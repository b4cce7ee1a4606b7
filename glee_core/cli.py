"""Command line: ``python -m glee_core {methods,datasets,inspect,train,compare,report,reproduce,
score}``.

Bad input exits with status 2 and one ``error:`` line on stderr that says what to fix. ``train``
prints a progress bar on stderr and, as the last line of stdout, a JSON list of results.

Commands import what they need when they run (torch, pandas, transformers take seconds to
import), so ``methods``, ``datasets`` and ``--help`` answer at once.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
import threading
import traceback
from pathlib import Path

from tqdm import tqdm

from .core import environment
from .core.bars import TqdmProgress
from .core.errors import FULL, INTERRUPTED, GleeError, disk_message
from .core.events import (
    Loading,
    PaceGuard,
    ProgressLog,
    Queued,
)
from .data.catalog import dataset_ids
from .models.config import TrainConfig
from .models.fields import add_arguments, from_args
from .models.methods import METHODS, parse_methods
from .models.options import (
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
from .runs.record import merged_notes
from .serve.export_formats import EXPORT_FORMATS, FORMATS


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, status 2, no usage dump
        raise GleeError(f"{message} (see {self.prog} --help)")


RUN_HELP = "a run directory, or a run id of the store (--runs-dir)"


def _add_runs_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs-dir", help="run store (default $GLEE_RUNS_DIR, else ./runs)")


def build_parser() -> argparse.ArgumentParser:
    """The command line. Dataset and training flags come from the fields of
    :class:`DataOptions` and :class:`TrainConfig` (their one declaration)."""
    parser = _Parser(
        prog="python -m glee_core",
        description="Glee Studio: prompt-tuning vs CLS-tuning on long-tailed data",
    )
    sub = parser.add_subparsers(dest="command", parser_class=_Parser, required=True)
    sub.add_parser("methods", help="the method ids, one per line")
    sub.add_parser("datasets", help="dataset ids, one per line")
    inspect = sub.add_parser("inspect", help="JSON: sizes, class counts, head/tail classes")
    add_arguments(inspect, DataOptions)

    train = sub.add_parser("train", help="train (or load) methods x seeds on a dataset")
    train.add_argument(
        "--request",
        help="a JSON training request (what the app writes); "
        "replaces the dataset, method, seed, model and training flags",
    )
    add_arguments(train, DataOptions, optional=True)
    train.add_argument("--method", help="ids, comma-separated, or 'all'")
    train.add_argument("--seeds", default="1", help="comma-separated, e.g. 1,2,3 (default 1)")
    train.add_argument("--model", default="auto", help="auto (offline MiniLM), HF id or path")
    add_arguments(train, TrainConfig)
    add_arguments(train, ExecutorOptions)
    add_arguments(train, SelfTrainOptions)
    _add_runs_dir(train)
    train.add_argument("--force", action="store_true", help="retrain even if stored")
    train.add_argument("--progress-file", help="append progress events as JSON lines (the app)")
    train.add_argument(
        "--format",
        choices=("auto", "table", "json"),
        default="auto",
        help="the result: a table and the recommendation for a person (auto: on "
        "a terminal) or one JSON line of fractions for a program (auto: "
        "when stdout is a pipe or a file)",
    )

    compare = sub.add_parser("compare", help="paper-style table of stored runs, mean ± std")
    _add_runs_dir(compare)
    compare.add_argument("--dataset", help="only this dataset id")
    compare.add_argument("--format", choices=("md", "csv", "json"), default="md")

    report = sub.add_parser("report", help="PDF report of a dataset's runs")
    _add_runs_dir(report)
    report.add_argument("--dataset", help="dataset id (needed when the store holds several)")
    report.add_argument("--model", help="only runs of this backbone")
    add_arguments(
        report,
        TrainConfig,
        only=("mode",),
        show_defaults=False,
        help_overrides={"mode": "only runs of this mode"},
    )
    report.add_argument(
        "--setting",
        help="the setting to report, by the short id the note "
        "listing them prints (default: the recommended candidate's)",
    )
    report.add_argument("--out", required=True, help="the PDF file to write")

    rep = sub.add_parser(
        "reproduce",
        help="run a table of the paper (2, 3 or 5) with its "
        "protocol and print ours beside its numbers",
    )
    rep.add_argument("--table", required=True, help="2, 3 (long-tailed) or 5 (few-shot)")
    rep.add_argument(
        "--datasets",
        help="comma-separated ids (default: the table's, e.g. "
        "r52,cmid,iflytek,ctc,msra; r8 works too)",
    )
    rep.add_argument(
        "--methods",
        help="a subset of the table's method ids, comma-separated (default: all its rows)",
    )
    rep.add_argument(
        "--model",
        default="auto",
        help="auto (offline MiniLM), an HF id or path, "
        "or 'paper': bert-base-uncased / bert-base-chinese by the data's language",
    )
    rep.add_argument("--seeds", type=int, default=5, help="how many (the scripts' 775, 776, ...)")
    add_arguments(rep, DataOptions, only=("data_dir",))
    _add_runs_dir(rep)
    add_arguments(
        rep,
        TrainConfig,
        only=("epochs", "limit", "mode", "device", "precision"),
        show_defaults=False,
        help_overrides={"epochs": "default: the paper's (10; few-shot 5)"},
    )
    add_arguments(rep, ExecutorOptions)
    rep.add_argument("--format", choices=("text", "md"), default="text")

    predict = sub.add_parser(
        "predict",
        help="classify a CSV of texts with a stored run or an "
        "exported classifier; writes the rows with the predictions",
    )
    source = predict.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", help=RUN_HELP)
    source.add_argument("--classifier", help="a folder written by export")
    predict.add_argument("--input", required=True, help="CSV of texts (any delimiter/encoding)")
    predict.add_argument("--text-column", help="the text column (default: text, sentence, ...)")
    predict.add_argument("--text-b-column", help="a second text column, for pair datasets")
    predict.add_argument("--out", required=True, help="the CSV to write")
    predict.add_argument("--top-k", type=int, default=3, help="labels ranked per row (default 3)")
    predict.add_argument("--device", default="auto", help="auto, cpu or cuda")
    predict.add_argument(
        "--engine",
        choices=("auto", "torch", "onnx"),
        default="auto",
        help="torch (the run's model, bf16 where the device is fast at it) or "
        "onnx (the run exported once as ONNX, scored by onnxruntime in "
        "fp32, single texts; BENCHMARKS.md compares their speed); auto: "
        "onnx for an ONNX classifier folder, else torch",
    )
    _add_runs_dir(predict)

    export = sub.add_parser(
        "export", help="write a run as a self-contained classifier folder with a model card"
    )
    export.add_argument("--run", required=True, help=RUN_HELP)
    _add_runs_dir(export)
    export.add_argument("--out", required=True, help="a new folder")
    export.add_argument(
        "--include-backbone",
        action="store_true",
        help="glee format, quick-mode runs: copy the backbone's weights in "
        "(default: referenced by name and fingerprint)",
    )
    export.add_argument(
        "--format",
        default="glee",
        choices=FORMATS,
        help=", ".join(f"{f.name} ({f.help})" for f in EXPORT_FORMATS.values()),
    )
    export.add_argument(
        "--quantize",
        choices=("int8",),
        help="onnx: also write model.int8.onnx (onnxruntime's dynamic "
        "quantization), its test F1 change in the card",
    )
    export.add_argument(
        "--push-to-hub",
        metavar="REPO",
        help="upload the folder to the Hugging Face Hub as REPO (the token as "
        "huggingface_hub finds it: HF_TOKEN, or huggingface-cli login)",
    )
    export.add_argument(
        "--private", action="store_true", help="with --push-to-hub: a private repository"
    )

    calibrate = sub.add_parser(
        "calibrate",
        help="post-hoc calibration of stored runs (logit "
        "adjustment, tau-norm, eta-norm): strength chosen on dev, "
        "before/after on test",
    )
    target = calibrate.add_mutually_exclusive_group(required=True)
    target.add_argument("--run", help=RUN_HELP)
    target.add_argument(
        "--all",
        action="store_true",
        help="every finished run of the store (narrow with --dataset/--setting)",
    )
    _add_runs_dir(calibrate)
    calibrate.add_argument("--dataset", help="with --all: only this dataset id")
    calibrate.add_argument("--setting", help="with --all: only this setting")
    calibrate.add_argument(
        "--method",
        default="la",
        choices=("la", "tau-norm", "eta-norm"),
        help="la: logit adjustment (Menon et al. 2021); tau-norm (Kang et "
        "al. 2020); eta-norm (the paper's, any eta) (default la)",
    )
    calibrate.add_argument(
        "--select",
        default="f1",
        choices=("f1", "tail_f1"),
        help="the dev metric that chooses the strength (default f1)",
    )

    adapt = sub.add_parser(
        "adapt",
        help="task-adaptive pretraining: continue the masked-LM "
        "objective on a dataset's training texts; writes a backbone folder "
        "for --model",
    )
    adapt.add_argument(
        "--request",
        help="a JSON adaptation request (what the app writes); "
        "replaces the dataset, model and adaptation flags",
    )
    add_arguments(adapt, DataOptions, optional=True)
    adapt.add_argument(
        "--model",
        default="auto",
        help="the backbone to adapt: auto (offline MiniLM), HF id or path",
    )
    add_arguments(adapt, AdaptOptions, optional=True)
    adapt.add_argument("--progress-file", help="append progress events as JSON lines (the app)")

    for name, options, about in (
        (
            "health",
            HealthOptions,
            "data health: suspected label errors, near-duplicates "
            "(and leaks into dev/test), outliers and the most confused classes, head -> tail "
            "(cleanlab on out-of-fold probabilities of the frozen features)",
        ),
        (
            "budget",
            BudgetOptions,
            "the label budget: per-class learning curves in quick "
            "mode (the head retrained on fractions of every class's texts), each class's test "
            "F1 forecast at 2x and 4x its texts, and the texts it needs to reach a target F1",
        ),
    ):
        report = sub.add_parser(name, help=about)
        add_arguments(report, DataOptions)
        report.add_argument("--model", default="auto", help="auto (offline MiniLM), HF id or path")
        add_arguments(report, options)
        _add_runs_dir(report)

    suggest = sub.add_parser(
        "suggest",
        help="what to label next: the pool texts (your "
        "unlabelled ones) a query strategy picks from the recommended "
        "quick-mode head's scores, as a CSV with a label column to fill "
        "(then train --add it)",
    )
    add_arguments(suggest, DataOptions)
    suggest.add_argument("--model", default="auto", help="auto (offline MiniLM), HF id or path")
    add_arguments(suggest, SuggestOptions)
    _add_runs_dir(suggest)

    score = sub.add_parser("score", help="score a text with a stored run: JSON {label: score}")
    score.add_argument("--run", required=True, help=RUN_HELP)
    _add_runs_dir(score)
    score.add_argument("--text", required=True)
    score.add_argument("--text-b", help="second text, for pair datasets")
    score.add_argument("--device", default="cpu")
    return parser


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


def _cmd_train(args) -> int:
    request = _train_request(args)
    # the app's job view says what the first seconds go to (imports, the data), not "starting"
    log = ProgressLog(args.progress_file) if args.progress_file else (lambda event: None)
    if environment.session_slot() is not None and not request.executor.remote:
        # a visitor's job on a public machine waits for its turn before loading anything
        from .core.slots import hold_first, machine_queue

        runs_dir = Path(args.runs_dir or environment.runs_dir())
        hold_first(
            machine_queue(runs_dir / ".locks", environment.max_concurrent_runs()),
            lambda: log(Queued(run_id="")),
        )
    log(Loading(what="the libraries (torch, transformers)"))
    from .core.devices import resolve_device
    from .core.slots import release_first
    from .runs.store import RunStore
    from .train.executors import execute

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
        from .data.pool import read_pool
        from .train.pseudo import self_trained

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
        print(_result_table(runs))
    else:
        print(json.dumps([run.summary() for run in runs]))
    return 0


def _result_table(runs) -> str:
    """A launch's runs for a person: the compare table of each setting (percent, mean ± std over
    seeds, the chosen head marked), then the recommendation over them, in plain text."""
    from .runs.recommend import recommend, recommendation_text
    from .runs.tables import aggregate, comparison_table, to_markdown, twin_notes

    text = to_markdown(comparison_table(aggregate(runs)))
    text += "".join(f"\nnote: {re.sub('`', '', note)}." for note in twin_notes(runs))
    rec = recommend(runs)
    if rec is not None:
        text += "\n\n" + re.sub(r"\*\*|`", "", recommendation_text(rec)) + "\n"
    return text


def _dataset_and_progress(args, request: TrainRequest | AdaptRequest, log):
    """The request's model found and its dataset loaded (each said in the job's log first), and
    where progress goes: tqdm bars, and the job's file when there is one."""
    from .models.backbone import resolve_model_source

    resolve_model_source(request.model)
    log(Loading(what=f"the dataset {request.data.dataset}"))
    dataset = request.data.load()
    bars = TqdmProgress(dataset.warnings)
    return dataset, bars, ProgressLog(args.progress_file, bars) if args.progress_file else bars


def _cmd_adapt(args) -> int:
    log = ProgressLog(args.progress_file) if args.progress_file else (lambda event: None)
    log(Loading(what="the libraries (torch, transformers)"))
    from .train.adapt import adapt

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
    if before and after:
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
    from .models.backbone import load_backbone
    from .runs.store import RunStore

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


def _cmd_health(args) -> int:
    from .core.devices import resolve_device
    from .runs.tables import markdown_table
    from .train.examine import data_health

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


def _cmd_budget(args) -> int:
    from .runs.budget import most_helped
    from .runs.tables import markdown_table
    from .train.learning_curves import label_budget

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


def _cmd_suggest(args) -> int:
    from .core.files import write_atomic
    from .data.pool import read_pool
    from .runs.store import RunStore
    from .runs.tables import spreadsheet_csv
    from .train.suggest import suggest

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


def _cmd_reproduce(args, argv: list[str]) -> int:
    from .core.devices import resolve_device
    from .data.catalog import PAPER_DATASETS
    from .data.datasets import load_dataset
    from .models.backbone import resolve_model_source
    from .runs.store import RunStore
    from .runs.tables import comparison_markdown, comparison_text
    from .train.executors import make_executor
    from .train.reproduce import (
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


def _stored_runs(store, dataset: str | None) -> list:
    """The store's finished runs (of ``dataset``), its broken ones warned about; none is an
    error naming the datasets that have runs."""
    every = store.runs()
    for name, problem in store.problems.items():
        print(f"warning: skipped broken run {name}: {problem}", file=sys.stderr)
    runs = [r for r in every if dataset is None or r.dataset == dataset]
    if not runs:
        held = sorted({r.dataset for r in every})
        raise GleeError(
            f"no finished runs in {store.root}"
            + (f" for dataset {dataset!r}" if dataset else "")
            + (
                f"; it holds runs of: {', '.join(held)} (--dataset ID)"
                if held
                else "; train some with python -m glee_core train"
            )
        )
    return runs


def _cmd_compare(args) -> int:
    from .runs.store import RunStore
    from .runs.tables import aggregate, comparison_csv, comparison_table

    store = RunStore(args.runs_dir)
    runs = _stored_runs(store, args.dataset)
    table = comparison_table(aggregate(runs))
    if args.format == "md":  # the tables, then the one pick over every setting, as train prints
        print(_result_table(runs))
    elif args.format == "csv":
        print(comparison_csv(table), end="")
    else:
        print(table.to_json(orient="records", force_ascii=False))
    return 0


def _cmd_report(args) -> int:
    from .runs.recommend import report_setting
    from .runs.store import RunStore
    from .views.report import write_report

    store = RunStore(args.runs_dir)
    mode = getattr(args, "mode", None)
    every = _stored_runs(store, args.dataset)
    runs = [
        r
        for r in every
        if (args.model is None or r.record.model.name == args.model)
        and (mode is None or r.record.mode == mode)
    ]
    if len({r.dataset for r in runs}) == 1:  # several datasets: the report says to choose
        runs, note = report_setting(runs, args.setting)
        if note:
            print(f"note: {note}", file=sys.stderr)
    latest = store.latest_budget(runs[0].dataset) if runs else None
    out = write_report(runs, args.out, every=every, budget=latest[2] if latest else None)
    print(json.dumps({"report": str(out), "runs": len(runs), "bytes": out.stat().st_size}))
    return 0


def _cmd_score(args) -> int:
    from .serve.inference import Scorer, load_run

    scorer = Scorer.for_run(load_run(args.run, args.runs_dir), args.device)
    table = scorer.score_table(args.text, args.text_b)
    print(
        json.dumps(
            {row["class"]: round(float(row["score"]), 6) for _, row in table.iterrows()},
            ensure_ascii=False,
        )
    )  # best first
    return 0


def predictions_csv(table) -> str:
    """``predict``'s CSV as the app's downloads write it (:func:`spreadsheet_csv`): every text
    cell that a spreadsheet would run as a formula made text, the input's texts as well as the
    class names and label words (a model's, perhaps trained on someone else's data) it adds."""
    from .runs.tables import spreadsheet_csv

    return spreadsheet_csv(table)


def _cmd_predict(args) -> int:
    from .core.devices import resolve_device
    from .core.files import write_atomic
    from .serve.export import load_classifier, onnx_folder
    from .serve.inference import (
        ONNX_SPEC,
        OnnxScorer,
        Scorer,
        blank_warning,
        load_run,
        predict_csv,
    )

    device = resolve_device(args.device).type
    run = load_run(args.run, args.runs_dir) if args.run else None
    onnx = args.engine == "onnx" or (
        args.engine == "auto" and run is None and (Path(args.classifier) / ONNX_SPEC).is_file()
    )
    if onnx and run:
        try:
            scorer = OnnxScorer.from_folder(onnx_folder(run), run)
        except GleeError as damaged:  # the store's own export: made again, once
            print(f"note: {damaged}; exporting it again", file=sys.stderr)
            scorer = OnnxScorer.from_folder(onnx_folder(run, rebuild=True), run)
    elif onnx:
        scorer = OnnxScorer.from_folder(args.classifier, run)
    else:
        scorer = Scorer.for_run(run, device) if run else load_classifier(args.classifier, device)
    bars: list[tqdm] = []

    def progress(done: int, total: int) -> None:  # the bar opens once the input has been read
        if not bars:
            bars.append(
                tqdm(
                    total=total,
                    unit="text",
                    desc="predicting",
                    file=sys.stderr,
                    dynamic_ncols=True,
                    mininterval=1.0,
                )
            )
        bars[0].update(done - bars[0].n)

    try:
        table = predict_csv(
            scorer, args.input, args.text_column, args.text_b_column, args.top_k, progress
        )
    finally:
        for bar in bars:
            bar.close()
    if warning := blank_warning(table):
        print(f"warning: {warning}", file=sys.stderr)
    out = write_atomic(args.out, predictions_csv(table))
    print(json.dumps({"predictions": str(out), "rows": len(table), "classes": len(scorer.classes)}))
    return 0


def _cmd_calibrate(args) -> int:
    from .runs.calibration import calibrate, calibration_table, calibration_text
    from .runs.store import RunStore
    from .runs.tables import markdown_table
    from .serve.inference import load_run

    if args.run:
        run = load_run(args.run, args.runs_dir)
        print(calibration_text(calibrate(run, args.method, args.select)))
        return 0
    store = RunStore(args.runs_dir)
    runs = [
        r for r in store.runs(args.dataset) if args.setting is None or r.setting == args.setting
    ]
    if not runs:
        raise GleeError(
            f"no finished runs in {store.root} to calibrate"
            + (f" for dataset {args.dataset!r}" if args.dataset else "")
        )
    results, skipped = [], []
    for run in tqdm(runs, desc=f"calibrating ({args.method})", file=sys.stderr, unit="run"):
        try:
            results.append(calibrate(run, args.method, args.select))
        except GleeError as exc:
            skipped.append(str(exc))
    for line in skipped:
        print(f"skipped: {line}", file=sys.stderr)
    print(
        "\n".join(
            markdown_table(
                [
                    "method",
                    "run",
                    "strength",
                    "F1 before → after",
                    "Tail F1 before → after",
                    "Few-shot F1 before → after",
                ],
                calibration_table(results),
                left=2,
            )
        )
    )
    return 0


def _cmd_export(args) -> int:
    from .serve.export import export_run
    from .serve.inference import load_run

    out = export_run(
        load_run(args.run, args.runs_dir),
        args.out,
        args.include_backbone,
        args.format,
        args.quantize,
    )
    files = {
        p.relative_to(out).as_posix(): p.stat().st_size
        for p in sorted(out.rglob("*"))
        if p.is_file()
    }
    result = {
        "classifier": str(out),
        "format": args.format,
        "bytes": sum(files.values()),
        "files": files,
    }
    if args.push_to_hub:
        from .serve.export import push_to_hub

        result["hub"] = push_to_hub(out, args.push_to_hub, args.private)
    print(json.dumps(result))
    return 0


def _terminate(signum, frame):
    """SIGTERM (the app's Stop button) unwinds like Ctrl-C: a half-written run folder is
    removed on the way out."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminate) if in_main_thread else None
    try:
        return _main(argv)
    finally:
        if in_main_thread:
            signal.signal(signal.SIGTERM, previous)


def _main(argv: list[str] | None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command == "methods":
            print("\n".join(METHODS))
        elif args.command == "datasets":
            print("\n".join(dataset_ids()))
        elif args.command == "inspect":
            info = from_args(DataOptions, args).load().info()
            print(json.dumps(info, indent=1, ensure_ascii=False))
        elif args.command == "train":
            return _cmd_train(args)
        elif args.command == "reproduce":
            return _cmd_reproduce(args, sys.argv[1:] if argv is None else argv)
        elif args.command == "compare":
            return _cmd_compare(args)
        elif args.command == "score":
            return _cmd_score(args)
        elif args.command == "predict":
            return _cmd_predict(args)
        elif args.command == "export":
            return _cmd_export(args)
        elif args.command == "calibrate":
            return _cmd_calibrate(args)
        elif args.command == "adapt":
            return _cmd_adapt(args)
        elif args.command == "report":
            return _cmd_report(args)
        elif args.command == "health":
            return _cmd_health(args)
        elif args.command == "budget":
            return _cmd_budget(args)
        elif args.command == "suggest":
            return _cmd_suggest(args)
        return 0
    except GleeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"error: {INTERRUPTED}", file=sys.stderr)
        return 130
    except OSError as exc:
        if exc.errno not in FULL:
            report_unexpected(exc)
            return 1
        print(f"error: {disk_message(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:  # a bug or an input no check caught: the trace, then one line
        report_unexpected(exc)
        return 1


def report_unexpected(exc: BaseException) -> None:
    """A bug or an input no check caught: the trace, then one line."""
    traceback.print_exception(exc)
    print(
        f"error: unexpected {type(exc).__name__}: {exc} (the trace above says where; "
        "finished runs are kept)",
        file=sys.stderr,
    )
