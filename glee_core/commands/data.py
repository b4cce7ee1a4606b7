"""The command line's data commands: ``health`` (label errors, duplicates, confused classes),
``budget`` (what more labels would give each class) and ``suggest`` (which pool texts to label
next); ``glee_core.cli`` parses the flags and calls them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..budget.options import BudgetOptions
from ..core.bars import TqdmProgress
from ..core.errors import GleeError
from ..core.events import Loading, ProgressLog
from ..health.options import HealthOptions
from ..models.requests import BudgetRequest, HealthRequest, SuggestRequest
from ..pool.options import SuggestOptions
from .turns import cpu_turn, job_result, job_turn, on_data_request, paced, read_pool


def _data_report(args, request, measure) -> tuple:
    """A data report of ``request`` (``health``, ``budget``): ``measure(dataset, encoder, model,
    options, progress)`` (the encoder: the backbone on the options' device, the store's feature
    cache) under progress bars (and the job's file, its
    turn on a public machine and its pace watched), its files written to its ``out``; (the
    report, its two files)."""
    from ..core.devices import resolve_device
    from ..models.backbone import load_backbone
    from ..models.features import Encoder
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
        progress = paced(ProgressLog(args.progress_file, bars) if args.progress_file else bars)
        try:
            progress(Loading(what=f"the backbone {request.model}"))
            with cpu_turn(options.device):
                encoder = Encoder(
                    load_backbone(request.model),
                    resolve_device(options.device),
                    RunStore(args.runs_dir).features_dir,
                )
                report = measure(dataset, encoder, request.model, options, progress)
        finally:
            bars.close()
        return report, report.write(options.out)


def health(args) -> int:
    from ..health.examine import data_health
    from ..runs.tables import markdown_table

    request = on_data_request(args, HealthRequest, HealthOptions, "health", ("out",))
    report, (health_file, issues_file) = _data_report(args, request, data_health)
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
    job_result(args, {"folder": str(health_file.parent), "summary": said})
    return 0


def budget(args) -> int:
    from ..budget.curves import label_budget
    from ..budget.report import most_helped
    from ..runs.tables import markdown_table

    request = on_data_request(args, BudgetRequest, BudgetOptions, "budget", ("out",))
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
    job_result(
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

    request = on_data_request(args, SuggestRequest, SuggestOptions, "suggest", ("pool", "out"))
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
        pool, notes = read_pool(options.pool, options.pool_text_column)
        bars = TqdmProgress(dataset.warnings + notes)
        progress = paced(ProgressLog(args.progress_file, bars) if args.progress_file else bars)
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
