"""The command line's commands on stored runs: ``compare``, ``report``, ``score``, ``predict``,
``calibrate`` and ``export`` (``glee_core.cli`` parses the flags and calls them)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tqdm import tqdm

from ..core.errors import GleeError
from .training import result_table
from .turns import cpu_turn, job_turn


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

    if getattr(args, "request", None):
        return _report_request(args)
    if not args.out:
        raise GleeError("report needs --out FILE.pdf (or --request FILE)")
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


def _report_request(args) -> int:
    """``report --request FILE`` (the app's job): the PDF of the request's runs, read from its
    stores, with the dataset's other runs there and its newest label budget."""
    from ..core.events import Loading, Working
    from ..core.files import write_atomic
    from ..models.requests import ReportRequest
    from ..runs.store import RunStore
    from ..views.report import build_report

    request = ReportRequest.read(args.request)
    with job_turn(args) as (log, progress):
        log(Loading(what="the runs"))
        stores = [RunStore(root) for root in request.stores or [args.runs_dir]]
        every = [r for store in stores for r in store.runs() if r.dataset == request.dataset]
        wanted = set(request.runs)
        runs = [r for r in every if r.run_id in wanted]
        if len(runs) < len(wanted):
            missing = sorted(wanted - {r.run_id for r in runs})
            raise GleeError(f"run(s) not found in the stores: {', '.join(missing)}")
        budgets = [b for store in stores if (b := store.latest_budget(request.dataset))]
        budget = max(budgets, key=lambda b: b[0])[2] if budgets else None
        data = build_report(
            runs,
            None,
            lambda share, what: progress(Working(what=what, share=share, task="the PDF report")),
            every,
            budget,
        )
        out = write_atomic(Path(request.out), data)
    print(json.dumps({"report": str(out), "runs": len(runs), "bytes": len(data)}))
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
    from ..serve.ensemble import EnsembleScorer, run_ids
    from ..serve.export import load_classifier, onnx_folder
    from ..serve.inference import ONNX_SPEC, OnnxScorer, Scorer, load_run

    if getattr(args, "request", None):
        return _predict_request(args)
    if not args.input or not args.out or not (args.run or args.classifier):
        raise GleeError("predict needs --run or --classifier, --input and --out (or --request)")
    device = resolve_device(args.device).type
    if args.run and len(ids := run_ids(args.run)) > 1:  # an ensemble: the runs averaged
        if args.engine == "onnx":
            raise GleeError("--engine onnx scores one run; an ensemble of runs needs torch")
        runs = [load_run(one, args.runs_dir) for one in ids]
        return _predicted(args, EnsembleScorer.for_runs(runs, device))
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
    return _predicted(args, scorer)


def _predicted(args, scorer) -> int:
    """``predict``'s input classified by ``scorer`` into its ``--out``, with a bar."""
    from ..core.files import write_atomic
    from ..serve.inference import blank_warning, predict_csv

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


def _predict_request(args) -> int:
    """``predict --request FILE`` (the Playground's job): the input's texts classified by a
    stored run of the request's stores, or zero-shot by its backbone on its data's label
    words."""
    from ..core.events import Loading, Working
    from ..core.files import write_atomic
    from ..models.requests import PredictRequest
    from ..models.scoring import get_backbone
    from ..serve.ensemble import EnsembleScorer
    from ..serve.inference import Scorer, predict_csv

    request = PredictRequest.read(args.request)
    with job_turn(args) as (log, progress):
        log(Loading(what="the classifier"))
        if request.run is not None:
            runs = _requested_runs(request, args)  # several: an ensemble, averaged
            scorer = Scorer.for_run(runs[0]) if len(runs) == 1 else EnsembleScorer.for_runs(runs)
        else:
            scorer = Scorer.zero_shot(get_backbone(request.model), request.data.load())
        with cpu_turn():
            table = predict_csv(
                scorer,
                request.input,
                progress=lambda done, total: progress(
                    Working(what=f"{done} of {total} texts", share=done / total, task="classifying")
                ),
                max_rows=request.max_rows,
            )
        out = write_atomic(Path(request.out), table.to_csv(index=False))
    print(
        json.dumps(
            {
                "predictions": str(out),
                "rows": len(table),
                "blank_rows": [int(i) for i in table.attrs.get("blank_rows") or []],
            }
        )
    )
    return 0


def _requested_runs(request, args) -> list:
    """The runs a job's request names (``run``: an id, or several joined by commas), found in
    its stores (the first, the job's own)."""
    from ..runs.store import RunStore
    from ..serve.ensemble import run_ids

    stores = [RunStore(root) for root in request.stores or [args.runs_dir]]
    runs = []
    for run_id in run_ids(request.run):
        run = next((r for s in stores if (r := s.get(run_id)) is not None), None)
        if run is None:
            raise GleeError(f"run {run_id} is not in the stores")
        runs.append(run)
    return runs


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
    from ..serve.ensemble import run_ids
    from ..serve.export import export_ensemble, export_run
    from ..serve.inference import load_run

    if getattr(args, "request", None):
        return _export_request(args)
    if not args.run or not args.out:
        raise GleeError("export needs --run and --out (or --request FILE)")
    if len(ids := run_ids(args.run)) > 1:  # an ensemble: the studio's folder alone carries it
        out = export_ensemble(
            [load_run(one, args.runs_dir) for one in ids],
            args.out,
            args.include_backbone,
            form=args.format,
            quantize=args.quantize,
        )
    else:
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


def _export_request(args) -> int:
    """``export --request FILE`` (the app's job): the run in the request's form, zipped to its
    ``out``, and the lines that load it."""
    from ..core.events import Loading, Working
    from ..core.files import write_atomic
    from ..models.requests import ExportRequest
    from ..serve.export import export_zip

    request = ExportRequest.read(args.request)
    with job_turn(args) as (log, progress):
        log(Loading(what="the run"))
        runs = _requested_runs(request, args)  # several: an ensemble, its members' folders
        progress(Working(what=f"writing it as {request.form} and checking it", task="the export"))
        with cpu_turn():
            data, code = export_zip(
                runs if len(runs) > 1 else runs[0], request.form, request.quantize
            )
        out = write_atomic(Path(request.out), data)
        progress(Working(what="zipped", share=1.0, task="the export"))
    print(json.dumps({"zip": str(out), "code": code, "bytes": len(data)}))
    return 0
