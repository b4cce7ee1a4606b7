"""Command line: ``python -m glee_core {methods,datasets,inspect,train,compare,score}``.

Bad input exits with status 2 and one ``error:`` line on stderr that says what to fix. ``train``
prints a progress bar on stderr and, as the last line of stdout, a JSON list of results.
"""

from __future__ import annotations

import argparse
import json
import sys

from .errors import GleeError


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, status 2, no usage dump
        raise GleeError(f"{message} (see {self.prog} --help)")


def _seeds(value: str) -> list[int]:
    try:
        seeds = [int(s) for s in value.split(",") if s.strip()]
    except ValueError:
        raise GleeError(f"--seeds must be comma-separated integers, got {value!r}") from None
    if not seeds:
        raise GleeError("--seeds is empty; e.g. --seeds 1,2,3")
    return seeds


def _add_dataset_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True,
                        help="demo, a paper id (r52 r8 cmid ...), csv:PATH or hf:NAME[:CONFIG]")
    parser.add_argument("--data-dir", help="folder of the paper's datasets (default $GLEE_DATA_DIR)")
    parser.add_argument("--threshold", type=float, help="head/tail threshold (default: paper's)")
    parser.add_argument("--template", help="prompt template with {text} and [MASK]")
    parser.add_argument("--verbalizer", help="JSON file: label -> label word(s)")
    parser.add_argument("--text-column", help="CSV/HF: the text column")
    parser.add_argument("--label-column", help="CSV/HF: the label column")
    parser.add_argument("--text-b-column", help="CSV/HF: an optional second text column")


def _dataset(args):
    from .datasets import load_dataset
    return load_dataset(args.dataset, data_dir=args.data_dir, threshold=args.threshold,
                        template=args.template, verbalizer=args.verbalizer,
                        text_column=args.text_column, label_column=args.label_column,
                        text_b_column=args.text_b_column)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m glee_core",
                     description="Glee Studio: prompt-tuning vs CLS-tuning on long-tailed data")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser, required=True)
    sub.add_parser("methods", help="the 12 method ids, one per line")
    sub.add_parser("datasets", help="dataset ids, one per line")
    inspect = sub.add_parser("inspect", help="JSON: sizes, class counts, head/tail classes")
    _add_dataset_args(inspect)

    train = sub.add_parser("train", help="train (or load) methods x seeds on a dataset")
    _add_dataset_args(train)
    train.add_argument("--method", required=True, help="ids, comma-separated, or 'all'")
    train.add_argument("--seeds", default="1", help="comma-separated, e.g. 1,2,3 (default 1)")
    train.add_argument("--model", default="auto", help="auto (offline MiniLM), HF id or path")
    train.add_argument("--epochs", type=int, default=10)
    train.add_argument("--batch-size", type=int, help="default 32 (few-shot sets: 2)")
    train.add_argument("--lr", type=float,
                       help="default 1e-5 (the paper's); 1e-3 with --backbone frozen")
    train.add_argument("--backbone", choices=("finetune", "frozen"), default="finetune",
                       help="frozen: quick mode, heads trained on cached features")
    train.add_argument("--weight-decay", type=float, default=0.0)
    train.add_argument("--patience", type=int, default=2, help="early-stopping epochs")
    train.add_argument("--select-metric", choices=("f1", "acc"), default="f1",
                       help="dev metric for early stopping and the kept weights")
    train.add_argument("--max-length", type=int, help="default: the dataset's (paper's)")
    train.add_argument("--limit", type=int, help="keep the first N training examples")
    train.add_argument("--device", default="auto", help="auto, cpu or cuda")
    train.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto",
                       help="auto: bf16 autocast on CUDA and on CPUs with native bf16")
    train.add_argument("--runs-dir", help="run store (default ./runs or $GLEE_RUNS_DIR)")
    train.add_argument("--force", action="store_true", help="retrain even if stored")
    train.add_argument("--progress-file", help="append progress events as JSON lines (the app)")

    compare = sub.add_parser("compare", help="paper-style table of stored runs, mean ± std")
    compare.add_argument("--runs-dir", help="run store (default ./runs or $GLEE_RUNS_DIR)")
    compare.add_argument("--dataset", help="only this dataset id")
    compare.add_argument("--format", choices=("md", "csv", "json"), default="md")

    report = sub.add_parser("report", help="PDF report of a dataset's runs")
    report.add_argument("--runs-dir", help="run store (default ./runs or $GLEE_RUNS_DIR)")
    report.add_argument("--dataset", help="dataset id (needed when the store holds several)")
    report.add_argument("--model", help="only runs of this backbone")
    report.add_argument("--backbone", choices=("finetune", "frozen"), help="only this mode")
    report.add_argument("--setting", help="only this setting, as the error listing them prints it")
    report.add_argument("--out", required=True, help="the PDF file to write")

    rep = sub.add_parser("reproduce", help="run a table of the paper (2, 3 or 5) with its "
                         "protocol and print ours beside its numbers")
    rep.add_argument("--table", required=True, help="2, 3 (long-tailed) or 5 (few-shot)")
    rep.add_argument("--datasets", help="comma-separated ids (default: the table's, e.g. "
                     "r52,cmid,iflytek,ctc,msra; r8 works too)")
    rep.add_argument("--methods", help="a subset of the table's method ids, comma-separated "
                     "(default: all its rows)")
    rep.add_argument("--model", default="auto", help="auto (offline MiniLM), an HF id or path, "
                     "or 'paper': bert-base-uncased / bert-base-chinese by the data's language")
    rep.add_argument("--seeds", type=int, default=5, help="how many (the scripts' 775, 776, ...)")
    rep.add_argument("--data-dir", help="folder of the paper's datasets (default $GLEE_DATA_DIR)")
    rep.add_argument("--runs-dir", help="run store (default ./runs or $GLEE_RUNS_DIR)")
    rep.add_argument("--epochs", type=int, help="default: the paper's (10; few-shot 5)")
    rep.add_argument("--limit", type=int, help="keep the first N training examples")
    rep.add_argument("--backbone", choices=("finetune", "frozen"), default="finetune",
                     help="frozen: quick mode, heads trained on cached features")
    rep.add_argument("--device", default="auto", help="auto, cpu or cuda")
    rep.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto")
    rep.add_argument("--format", choices=("text", "md"), default="text")

    score = sub.add_parser("score", help="score a text with a stored run: JSON {label: score}")
    score.add_argument("--run", required=True, help="a run directory")
    score.add_argument("--text", required=True)
    score.add_argument("--text-b", help="second text, for pair datasets")
    score.add_argument("--device", default="cpu")
    return parser


class TqdmProgress:
    """Turns trainer events into one tqdm bar per run on stderr.

    The line announcing a run and the dataset's warnings are printed once work really starts, so
    a set-up error (say, a label word outside the vocabulary) stays a single ``error:`` line."""

    def __init__(self, warnings: list[str] | None = None):
        self.bar = None
        self.pending = [f"warning: {w}" for w in warnings or []]

    def _flush(self):
        from tqdm import tqdm
        for line in self.pending:
            tqdm.write(line, file=sys.stderr)
        self.pending = []

    def __call__(self, event: dict) -> None:
        from tqdm import tqdm

        stage = event["stage"]
        if stage == "run":
            self.close()
            state = "stored, loading" if event["cached"] else "training"
            self.pending.append(f"[{event['index']}/{event['total']}] {event['method']} seed "
                                f"{event['seed']}: {state} ({event['run_id']})")
            if event["cached"]:
                self._flush()
        elif stage == "note":
            self.pending.append(f"note: {event['message']}")
            self._flush()
        elif stage == "queued":
            self._flush()
            tqdm.write("waiting: another run is training in this store "
                       "(GLEE_MAX_CONCURRENT_RUNS allows more at once)", file=sys.stderr)
        elif stage == "features":
            self._flush()
            if self.bar is None:
                self.bar = tqdm(total=event["total"], file=sys.stderr, unit="ex",
                                desc=f"encoding ({event['format']} input, frozen backbone)",
                                dynamic_ncols=True, mininterval=1.0)
            self.bar.update(event["done"] - self.bar.n)
            if event["done"] >= event["total"]:
                self.close()
        elif stage == "train":
            self._flush()
            if self.bar is None:
                self.bar = tqdm(total=event["steps"] * event["epochs"], file=sys.stderr,
                                unit="step", dynamic_ncols=True, mininterval=1.0)
            self.bar.set_description(f"epoch {event['epoch']}/{event['epochs']}", refresh=False)
            if "loss" in event:
                self.bar.set_postfix(loss=f"{event['loss']:.4f}", refresh=False)
            self.bar.update(1)
        elif stage == "eval" and self.bar is not None:
            self.bar.set_postfix(dev_f1=f"{event['dev_f1']:.4f}", dev_acc=f"{event['dev_acc']:.4f}",
                                 best=f"{event['best_dev']:.4f} ({event['select_metric']})")
        elif stage == "test":
            self.close()

    def close(self):
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class ProgressFile:
    """Appends trainer events to a JSON-lines file; training steps at most twice a second."""

    def __init__(self, path: str, inner):
        self.path, self.inner, self.last = path, inner, 0.0

    def __call__(self, event: dict) -> None:
        import time

        self.inner(event)
        now = time.monotonic()
        stage = event["stage"]
        last_of_pass = (stage == "train" and event["step"] == event["steps"]) or \
            (stage == "features" and event["done"] == event["total"])
        if stage in ("train", "features") and not last_of_pass and now - self.last < 0.5:
            return  # frequent step events: at most two a second
        self.last = now
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(event) + "\n")


def _cmd_train(args) -> int:
    from .backbone import resolve_model_source
    from .devices import resolve_device
    from .methods import parse_methods
    from .runs import run_experiments
    from .store import RunStore
    from .training import TrainConfig

    methods = parse_methods(args.method)
    resolve_device(args.device)
    resolve_model_source(args.model)
    seeds = _seeds(args.seeds)
    config = TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
                         weight_decay=args.weight_decay, patience=args.patience,
                         select_metric=args.select_metric,
                         max_length=args.max_length, limit=args.limit, device=args.device,
                         backbone=args.backbone, precision=args.precision)
    dataset = _dataset(args)
    bars = TqdmProgress(dataset.warnings)
    progress = ProgressFile(args.progress_file, bars) if args.progress_file else bars
    try:
        runs = run_experiments(dataset, methods, seeds, args.model, config,
                               RunStore(args.runs_dir), args.force, progress)
    finally:
        bars.close()
    for run in runs:
        for note in run.config.get("notes", []):
            print(f"note: {note}", file=sys.stderr)
    print(json.dumps([run.summary() for run in runs]))
    return 0


def _cmd_reproduce(args, argv: list[str]) -> int:
    from .backbone import resolve_model_source
    from .datasets import PAPER_DATASETS, load_dataset
    from .devices import resolve_device
    from .reproduce import (comparison_markdown, comparison_text, get_table, header_lines,
                            model_for, paper_seeds, protocol_config, reproduce)
    from .store import RunStore

    table = get_table(args.table)
    if args.methods:
        table = table.subset([m.strip() for m in args.methods.split(",") if m.strip()])
    ids = [d.strip() for d in args.datasets.split(",") if d.strip()] if args.datasets \
        else list(table.datasets)
    if not ids:
        raise GleeError("--datasets is empty; e.g. --datasets r8,cmid")
    seeds = paper_seeds(args.seeds)
    config = protocol_config(table, args.epochs, args.limit, args.backbone, args.device,
                             args.precision)
    resolve_device(args.device)
    datasets, problems = [], []
    for dataset_id in ids:  # every dataset is checked before anything trains
        try:
            if dataset_id not in PAPER_DATASETS:
                raise GleeError(f"not one of the paper's datasets ({', '.join(PAPER_DATASETS)})")
            datasets.append(load_dataset(dataset_id, data_dir=args.data_dir))
        except GleeError as exc:  # name the dataset once (many messages already start with it)
            message = str(exc)
            problems.append(message if message.startswith(f"{dataset_id}:")
                            else f"{dataset_id}: {message}")
    if problems:
        raise GleeError("cannot load " + "; ".join(problems)
                        + " - pass --datasets with the ones you have (--data-dir DIR)")
    for model in {model_for(d, args.model) for d in datasets}:
        resolve_model_source(model)

    bars: list[TqdmProgress] = []

    def progress_for(dataset):
        print(f"== Table {table.number} · {dataset.id} · {model_for(dataset, args.model)} · "
              f"{args.backbone} · seeds {','.join(map(str, seeds))}", file=sys.stderr)
        bars.append(TqdmProgress(dataset.warnings))
        return bars[-1]

    try:
        frame, manifest = reproduce(table, datasets, args.model, seeds, config,
                                    RunStore(args.runs_dir), progress_for=progress_for,
                                    command=" ".join(["python -m glee_core", *argv]))
    finally:
        for bar in bars:
            bar.close()
    for note in manifest["notes"]:
        print(f"note: {note}", file=sys.stderr)
    if args.format == "md":
        print(comparison_markdown(frame, table, header_lines(manifest)), end="")
    else:
        print(comparison_text(frame, table, header_lines(manifest)), end="")
    for kind, path in manifest["files"].items():
        print(f"wrote {kind}: {path}", file=sys.stderr)
    return 0


def _cmd_compare(args) -> int:
    from .store import RunStore, aggregate
    from .tables import comparison_table, to_markdown

    store = RunStore(args.runs_dir)
    runs = store.runs(args.dataset)
    for name, problem in store.problems.items():
        print(f"warning: skipped {name}: {problem}", file=sys.stderr)
    if not runs:
        raise GleeError(f"no finished runs in {store.root}"
                        + (f" for dataset {args.dataset!r}" if args.dataset else "")
                        + "; train some with python -m glee_core train")
    table = comparison_table(aggregate(runs))
    if args.format == "md":
        print(to_markdown(table))
    elif args.format == "csv":
        print(table.assign(best=table["best"].str.join(";")).to_csv(index=False), end="")
    else:
        print(table.to_json(orient="records", force_ascii=False))
    return 0


def _cmd_report(args) -> int:
    from .report import write_report
    from .store import RunStore

    store = RunStore(args.runs_dir)
    runs = [r for r in store.runs(args.dataset)
            if (args.model is None or r.config["model"]["name"] == args.model)
            and (args.backbone is None or r.config.get("backbone_mode") == args.backbone)
            and (args.setting is None or r.setting == args.setting)]
    for name, problem in store.problems.items():
        print(f"warning: skipped {name}: {problem}", file=sys.stderr)
    out = write_report(runs, args.out)
    print(json.dumps({"report": str(out), "runs": len(runs), "bytes": out.stat().st_size}))
    return 0


def _cmd_score(args) -> int:
    from .runs import load_run, score_texts

    run = load_run(args.run)
    scores = score_texts(run, [args.text], [args.text_b] if args.text_b else None, args.device)
    print(json.dumps({k: round(float(v), 6) for k, v in scores.iloc[0].items()},
                     ensure_ascii=False))
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command == "methods":
            from .methods import METHODS
            print("\n".join(METHODS))
        elif args.command == "datasets":
            from .datasets import dataset_ids
            print("\n".join(dataset_ids()))
        elif args.command == "inspect":
            print(json.dumps(_dataset(args).info(), indent=1, ensure_ascii=False))
        elif args.command == "train":
            return _cmd_train(args)
        elif args.command == "reproduce":
            return _cmd_reproduce(args, sys.argv[1:] if argv is None else argv)
        elif args.command == "compare":
            return _cmd_compare(args)
        elif args.command == "score":
            return _cmd_score(args)
        elif args.command == "report":
            return _cmd_report(args)
        return 0
    except GleeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted; finished runs are kept, the unfinished one is discarded",
              file=sys.stderr)
        return 130
