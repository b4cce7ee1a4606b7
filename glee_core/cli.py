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
import os
import signal
import sys
import threading
import traceback

from .budget.options import BudgetOptions
from .commands import data, stored, training
from .core.environment import job_nice, yield_to_pages
from .core.errors import FULL, INTERRUPTED, GleeError, disk_message
from .data.catalog import dataset_ids
from .health.options import HealthOptions
from .models.config import TrainConfig
from .models.fields import add_arguments, from_args
from .models.methods import METHODS
from .models.options import AdaptOptions, DataOptions, ExecutorOptions
from .pool.options import SelfTrainOptions, SuggestOptions
from .serve.export_formats import EXPORT_FORMATS, FORMATS


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, status 2, no usage dump
        raise GleeError(f"{message} (see {self.prog} --help)")


RUN_HELP = "a run directory, or a run id of the store (--runs-dir)"
RUNS_HELP = (  # predict and export: an ensemble too
    f"{RUN_HELP}; several joined by commas (A,B,C): their probabilities averaged (the "
    "recommendation's ensemble)"
)


def _add_runs_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs-dir", help="run store (default $GLEE_RUNS_DIR, else ./runs)")


def _add_job(parser: argparse.ArgumentParser, what: str) -> None:
    """``--request`` and ``--progress-file``: what the app's background job of ``what`` runs."""
    parser.add_argument(
        "--request",
        help=f"a JSON {what} request (what the app writes); replaces the other flags",
    )
    parser.add_argument("--progress-file", help="append progress events as JSON lines (the app)")


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
    for command in (
        _train_command,
        _compare_command,
        _report_command,
        _reproduce_command,
        _predict_command,
        _export_command,
        _calibrate_command,
        _adapt_command,
        _data_reports_command,
        _suggest_command,
        _score_command,
    ):
        command(sub)
    return parser


def _train_command(sub) -> None:
    """The ``train`` flags: the data, methods, seeds, training, executor and self-training."""
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


def _compare_command(sub) -> None:
    """The ``compare`` flags: the paper-style table of stored runs."""
    compare = sub.add_parser("compare", help="paper-style table of stored runs, mean ± std")
    _add_runs_dir(compare)
    compare.add_argument("--dataset", help="only this dataset id")
    compare.add_argument("--format", choices=("md", "csv", "json"), default="md")


def _report_command(sub) -> None:
    """The ``report`` flags: a dataset's PDF report."""
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
    report.add_argument("--out", help="the PDF file to write")
    _add_job(report, "report")


def _reproduce_command(sub) -> None:
    """The ``reproduce`` flags: a table of the paper with its protocol."""
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


def _predict_command(sub) -> None:
    """The ``predict`` flags: classify a CSV with a stored run or an exported classifier."""
    predict = sub.add_parser(
        "predict",
        help="classify a CSV of texts with a stored run or an "
        "exported classifier; writes the rows with the predictions",
    )
    source = predict.add_mutually_exclusive_group()
    source.add_argument("--run", help=RUNS_HELP)
    source.add_argument("--classifier", help="a folder written by export")
    predict.add_argument("--input", help="CSV of texts (any delimiter/encoding)")
    predict.add_argument("--text-column", help="the text column (default: text, sentence, ...)")
    predict.add_argument("--text-b-column", help="a second text column, for pair datasets")
    predict.add_argument("--out", help="the CSV to write")
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
    _add_job(predict, "prediction")


def _export_command(sub) -> None:
    """The ``export`` flags: a run as a classifier folder, in a chosen form."""
    export = sub.add_parser(
        "export", help="write a run as a self-contained classifier folder with a model card"
    )
    export.add_argument("--run", help=RUNS_HELP)
    _add_runs_dir(export)
    export.add_argument("--out", help="a new folder")
    _add_job(export, "export")
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


def _calibrate_command(sub) -> None:
    """The ``calibrate`` flags: post-hoc calibration of stored runs."""
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


def _adapt_command(sub) -> None:
    """The ``adapt`` flags: task-adaptive pretraining."""
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


def _data_reports_command(sub) -> None:
    """The ``data reports`` flags: the data's reports: health and the label budget, one way each."""
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
        add_arguments(report, DataOptions, optional=True)
        report.add_argument("--model", default="auto", help="auto (offline MiniLM), HF id or path")
        add_arguments(report, options, optional=True)
        _add_runs_dir(report)
        _add_job(report, name)


def _suggest_command(sub) -> None:
    """The ``suggest`` flags: what to label next from the pool."""
    suggest = sub.add_parser(
        "suggest",
        help="what to label next: the pool texts (your "
        "unlabelled ones) a query strategy picks from the recommended "
        "quick-mode head's scores, as a CSV with a label column to fill "
        "(then train --add it)",
    )
    add_arguments(suggest, DataOptions, optional=True)
    suggest.add_argument("--model", default="auto", help="auto (offline MiniLM), HF id or path")
    add_arguments(suggest, SuggestOptions, optional=True)
    _add_runs_dir(suggest)
    _add_job(suggest, "suggestion")


def _score_command(sub) -> None:
    """The ``score`` flags: one text scored by a stored run."""
    score = sub.add_parser("score", help="score a text with a stored run: JSON {label: score}")
    score.add_argument("--run", required=True, help=RUN_HELP)
    _add_runs_dir(score)
    score.add_argument("--text", required=True)
    score.add_argument("--text-b", help="second text, for pair datasets")
    score.add_argument("--device", default="cpu")


# the module whose function of the command's name runs it (looked up when it runs; the module
# imports what the command needs then)
COMMANDS = {
    "train": training,
    "adapt": training,
    "compare": stored,
    "score": stored,
    "predict": stored,
    "export": stored,
    "calibrate": stored,
    "report": stored,
    "health": data,
    "budget": data,
    "suggest": data,
}


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
    if os.environ.get("GLEE_JOB_NICE"):  # a job the app started: its pages answer first
        yield_to_pages(job_nice())
    try:
        args = build_parser().parse_args(argv)
        if args.command == "methods":
            print("\n".join(METHODS))
        elif args.command == "datasets":
            print("\n".join(dataset_ids()))
        elif args.command == "inspect":
            info = from_args(DataOptions, args).load().info()
            print(json.dumps(info, indent=1, ensure_ascii=False))
        elif args.command == "reproduce":
            return training.reproduce(args, sys.argv[1:] if argv is None else argv)
        elif args.command in COMMANDS:
            return getattr(COMMANDS[args.command], args.command)(args)
        return 0
    except GleeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"error: {INTERRUPTED}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader left (``| head``): Python's advice, stdout to devnull
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
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
