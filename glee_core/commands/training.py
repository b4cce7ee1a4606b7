"""The command line's training commands: ``train``, ``adapt`` and ``reproduce``
(``glee_core.cli`` parses the flags and calls them; the data commands are in ``data``)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from ..core.bars import TqdmProgress
from ..core.errors import GleeError
from ..core.events import Loading
from ..models.config import TrainConfig
from ..models.fields import from_args
from ..models.methods import parse_methods
from ..models.options import AdaptOptions, DataOptions, ExecutorOptions, parse_seeds
from ..models.requests import AdaptRequest, TrainRequest
from ..pool.options import SelfTrainOptions
from ..runs.notes import merged_notes
from .turns import (
    dataset_and_progress,
    job_log,
    on_data_request,
    paced,
    read_pool,
    take_turn,
)


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
    log = job_log(args)
    if not request.executor.remote:
        take_turn(args, log)
    log(Loading(what="the libraries (torch, transformers)"))
    from ..core.devices import cpu_share, resolve_device
    from ..core.slots import release_first
    from ..runs.store import RunStore
    from ..train.executors import execute

    # resolved once here (a bad device fails before any work); on a cluster, the node that trains
    device = None if request.executor.remote else resolve_device(request.config.device)
    dataset, bars, progress = dataset_and_progress(args, request, log)
    progress = paced(progress)
    if request.self_train.pool:  # learning from the unlabelled texts first
        if request.executor.remote:
            raise GleeError(
                "--pool trains on this machine's executor only (its pseudo-labels "
                "are made here): leave out --executor, or add the texts with --add"
            )
        from ..models.features import Encoder
        from ..models.scoring import get_backbone
        from ..pool.selftrain import self_trained

        pool, notes = read_pool(request.self_train.pool)
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
        how = request.self_train.self_train
        if how != "no":  # the backbone is loaded for the pool only where it is learned from
            with cpu_share(device):
                features = RunStore(args.runs_dir).features_dir
                encoder = Encoder(get_backbone(request.model), device, features)
                dataset = self_trained(dataset, pool, encoder, how, progress)
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
    from ..runs.recommend import recommend
    from ..runs.recommend_text import recommendation_text
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


def adapt(args) -> int:
    log = job_log(args)
    log(Loading(what="the libraries (torch, transformers)"))
    from ..train.adapt import adapt

    request = on_data_request(args, AdaptRequest, AdaptOptions, "adapt", ("out",))
    options = request.options
    dataset, bars, progress = dataset_and_progress(args, request, log)
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


def _paper_datasets(ids: list[str], data_dir: str | None) -> list:
    """The paper's datasets ``ids``, each checked before anything trains (one error naming
    every one that cannot load), with the released code's head/tail rule, so Head/Tail F1 are
    the paper's quantities."""
    from ..data.catalog import PAPER_DATASETS
    from ..data.datasets import load_dataset

    datasets, problems = [], []
    for dataset_id in ids:  # every dataset is checked before anything trains
        try:
            if dataset_id not in PAPER_DATASETS:
                raise GleeError(f"not one of the paper's datasets ({', '.join(PAPER_DATASETS)})")
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
    return datasets


def reproduce(args, argv: list[str]) -> int:
    from ..core.devices import resolve_device
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
    datasets = _paper_datasets(ids, getattr(args, "data_dir", None))
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
