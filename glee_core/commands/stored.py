"""The command line's commands on stored runs: ``compare``, ``report``, ``score``, ``predict``,
``calibrate`` and ``export`` (``glee_core.cli`` parses the flags and calls them)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tqdm import tqdm

from ..core.errors import GleeError
from .training import result_table


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


def compare(args) -> int:
    from ..runs.store import RunStore
    from ..runs.tables import aggregate, comparison_csv, comparison_table

    store = RunStore(args.runs_dir)
    runs = _stored_runs(store, args.dataset)
    table = comparison_table(aggregate(runs))
    if args.format == "md":  # the tables, then the one pick over every setting, as train prints
        print(result_table(runs))
    elif args.format == "csv":
        print(comparison_csv(table), end="")
    else:
        print(table.to_json(orient="records", force_ascii=False))
    return 0


def report(args) -> int:
    from ..runs.recommend import report_setting
    from ..runs.store import RunStore
    from ..views.report import write_report

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


def score(args) -> int:
    from ..serve.inference import Scorer, load_run

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
    from ..runs.tables import spreadsheet_csv

    return spreadsheet_csv(table)


def predict(args) -> int:
    from ..core.devices import resolve_device
    from ..core.files import write_atomic
    from ..serve.export import load_classifier, onnx_folder
    from ..serve.inference import (
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


def calibrate(args) -> int:
    from ..runs.calibration import calibrate, calibration_table, calibration_text
    from ..runs.store import RunStore
    from ..runs.tables import markdown_table
    from ..serve.inference import load_run

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


def export(args) -> int:
    from ..serve.export import export_run
    from ..serve.inference import load_run

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
        from ..serve.export import push_to_hub

        result["hub"] = push_to_hub(out, args.push_to_hub, args.private)
    print(json.dumps(result))
    return 0
