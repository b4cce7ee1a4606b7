"""Reproduce the paper's Tables 2, 3 and 5: run its protocol, then table our results beside its.

``reproduce`` trains (or loads from the store) every method of a table on every chosen dataset
with the paper's hyper-parameters, and ``comparison`` turns the runs into the table: one row per
method, a column per dataset and metric plus the average over datasets (AVG), each cell our
mean ± sample std over seeds, the paper's value and our difference, and the authors' released
R52 runs; then the paper's findings judged on our runs (:mod:`glee_core.runs.findings`). The paper's
numbers and run scripts ship as data (:mod:`glee_core.runs.paper`).

Each table's rows and datasets are the paper's own (read from the shipped tables): Table 2
compares CLS-tuning (Tanh head) with its long-tail remedies and prompt-tuning; Table 3 bridges the
two step by step (ReLU, the template input, a fresh LayerNorm, the MLM head's LayerNorm, decoupled
embeddings) and repeats Table 2's CLS-tuning rows; Table 5 runs the bridging heads few-shot. Each
run takes its hyper-parameters from the authors' script for that method and dataset.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pandas as pd

from ..core.errors import GleeError
from ..core.events import ProgressFn
from ..core.files import write_atomic
from ..data.datasets import LongTailDataset
from ..models.config import TrainConfig
from ..models.methods import get_method
from ..models.recipes import PAPER
from ..runs.findings import Finding, check_findings
from ..runs.notes import merged_notes
from ..runs.paper import (
    NEAREST_REFERENCE,
    PAPER_SEEDS,
    PaperTable,
    script_protocols,
)
from ..runs.paper_tables import comparison, comparison_markdown
from ..runs.store import Run, RunStore, config_hash, slug

PAPER_MODELS = {"en": "bert-base-uncased", "zh": "bert-base-chinese"}  # --model paper
FEW_SHOT_EXAMPLES = 32


PAPER_TABLES: dict[int, PaperTable] = {
    t.number: t
    for t in (
        PaperTable(2, "Long-tailed classification: CLS-tuning and its remedies vs prompt-tuning"),
        PaperTable(
            3, "Bridging CLS-tuning and prompt-tuning: activation, input, LayerNorm, embeddings"
        ),
        PaperTable(
            5,
            "Few-shot classification (32 training examples, batch size 2)",
            blocks=(("acc", "f1"),),
            few_shot=True,
        ),
    )
}


def get_table(number: int | str) -> PaperTable:
    try:
        return PAPER_TABLES[int(number)]
    except (KeyError, ValueError):
        raise GleeError(
            f"--table must be one of {', '.join(map(str, PAPER_TABLES))}, got {number!r}"
        ) from None


def table_of(manifest: dict) -> PaperTable:
    """The table (with the rows it ran) of a manifest ``reproduce`` wrote."""
    table = get_table(manifest["table"])
    return table.subset(manifest["methods"]) if manifest.get("methods") else table


def paper_seeds(count: int) -> list[int]:
    """The released scripts' seeds (775-779), continued upwards past five."""
    if count < 1:
        raise GleeError(f"--seeds must be at least 1, got {count}")
    return [PAPER_SEEDS[0] + i for i in range(count)]


def model_for(dataset: LongTailDataset, model: str) -> str:
    """``paper`` picks the paper's checkpoint for the dataset's language."""
    return PAPER_MODELS.get(dataset.language, PAPER_MODELS["en"]) if model == "paper" else model


def protocol_config(
    table: PaperTable, dataset: str, method: str, overrides: dict | None = None
) -> TrainConfig:
    """The authors' hyper-parameters for one method on one dataset, from their run script (a
    dataset they did not run, e.g. r8, takes its nearest one's, r52): max length, batch size,
    lr (3e-5 for prompt-tuning and w/ ed. on RTE, else 1e-5), epochs, patience, warm-up, dev
    evaluation every N steps (100; 1,000 for msra; 1 few-shot), selection metric, clipping;
    with ``mode=frozen`` the learning rate is quick mode's, not the scripts' fine-tuning one.
    Few-shot tables train on 32 examples. ``overrides`` (the user's ``--epochs``, ``--limit``,
    ``--mode``, ``--device``, ``--precision``) apply on top; a shortened protocol is recorded by
    the runs; TrainConfig refuses values below 1. Always the paper's recipe (one learning rate, a
    fresh head), never the practical one."""
    overrides = dict(overrides or {})
    script = dict(script_protocols().get((NEAREST_REFERENCE.get(dataset, dataset), method), {}))
    if not script and table.few_shot:  # no script for this pair: the table's general protocol
        script = {"epochs": 5, "patience": 5, "select_metric": "acc", "batch_size": 2}
    if overrides.get("mode") == "frozen":
        # the scripts' learning rates are for fine-tuning the whole model; heads alone on a
        # frozen backbone keep quick mode's (unless --lr says otherwise)
        script.pop("lr", None)
    config = TrainConfig(**{"batch_size": None, "recipe": PAPER, **script})
    if table.few_shot:
        limit = overrides.pop("limit", None)
        config = replace(config, limit=min(limit or FEW_SHOT_EXAMPLES, FEW_SHOT_EXAMPLES))
    return replace(config, **overrides)


# --------------------------------------------------------------------------------------------
# Reference values


# --------------------------------------------------------------------------------------------
# The comparison


def manifest_findings(manifest: dict) -> list[Finding]:
    return [Finding(**f) for f in manifest.get("findings", [])]


# --------------------------------------------------------------------------------------------
# Running a table


def reproduce(
    table: PaperTable,
    datasets: list[LongTailDataset],
    model: str,
    seeds: list[int],
    overrides: dict,
    store: RunStore,
    executor=None,
    progress_for: Callable[[LongTailDataset], ProgressFn] | None = None,
    command: str = "",
) -> tuple[pd.DataFrame, dict]:
    """Train (or load) every method x seed of ``table`` on every dataset, then compare and write
    ``<runs>/reproduce/table<N>-<...>.{csv,md,json}``. Returns the comparison and the manifest.
    ``executor`` (default: here, one run after another) may put the runs on a Ray cluster."""
    # torch: only to train (the app's Results page reads reproductions without it)
    from .executors import LocalExecutor  # noqa: PLC0415
    from .launch import Launch  # noqa: PLC0415
    from .plan import plan_runs  # noqa: PLC0415
    from .preflight import preflight  # noqa: PLC0415

    executor = executor or LocalExecutor()
    specs = [get_method(m) for m in table.methods]
    started = time.perf_counter()
    models = {d.id: model_for(d, model) for d in datasets}
    configs = {
        (d.id, s.id): protocol_config(table, d.id, s.id, overrides) for d in datasets for s in specs
    }  # each method its script's hyper-parameters
    for dataset in datasets:  # vocabulary problems surface before anything trains
        plan = [
            p
            for s in specs
            for p in plan_runs(dataset, [s], seeds, models[dataset.id], configs[(dataset.id, s.id)])
        ]
        preflight(dataset, plan, models[dataset.id], store)
    batches = []
    for dataset in datasets:
        progress = _first_use(progress_for, dataset) if progress_for else None
        batches += [
            Launch(
                dataset,
                [spec],
                seeds,
                models[dataset.id],
                configs[(dataset.id, spec.id)],
                store,
                progress=progress,
            )
            for spec in specs
        ]
    runs: list[Run] = executor.run(batches)
    frame = comparison(runs, table, [d.id for d in datasets])
    manifest = {
        # the findings are about long-tailed data: Tables 2 and 3
        "findings": [] if table.few_shot else [f.to_dict() for f in check_findings(runs)],
        "table": table.number,
        "methods": list(table.methods),
        "datasets": [d.id for d in datasets],
        "model": model,
        "models": models,
        "backbone": overrides.get("mode", "finetune"),
        "seeds": list(seeds),
        "settings": {d: sorted({r.setting for r in runs if r.dataset == d}) for d in models},
        "protocol": "the authors' run scripts (reference/glee_scripts.csv), per method",
        "run_ids": [r.run_id for r in runs],
        "command": command,
        "notes": merged_notes([r.record for r in runs]),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    write_outputs(store, manifest, frame, table)
    return frame, manifest


def _first_use(
    progress_for: Callable[[LongTailDataset], ProgressFn], dataset: LongTailDataset
) -> ProgressFn:
    """A progress function made by ``progress_for(dataset)`` when its first event comes (the
    CLI prints a dataset's header line then, not when the sweep is planned)."""
    made: list[ProgressFn] = []

    def progress(event) -> None:
        if not made:
            made.append(progress_for(dataset))
        made[0](event)

    return progress


def output_stem(manifest: dict) -> str:
    """``table2-auto-frozen-<hash>``: one file set per table, backbone and protocol."""
    key = {k: manifest[k] for k in ("datasets", "models", "seeds", "settings")}
    return (
        f"table{manifest['table']}-{slug(manifest['model'])}-{manifest['backbone']}-"
        f"{config_hash(key)}"
    )


def header_lines(manifest: dict) -> list[str]:
    models = sorted(set(manifest["models"].values()))
    return [
        f"Datasets: {', '.join(manifest['datasets'])} · backbone: {', '.join(models)} "
        f"({manifest['backbone']}) · seeds: {', '.join(map(str, manifest['seeds']))}",
        "",
        *[f"- {d}: {' | '.join(s)}" for d, s in manifest["settings"].items()],
        "",
        f"Command: `{manifest['command']}` ({manifest['wall_seconds']} s, {manifest['created']})",
    ]


def write_outputs(
    store: RunStore, manifest: dict, frame: pd.DataFrame, table: PaperTable
) -> dict[str, Path]:
    folder = store.reproduce_dir
    stem = output_stem(manifest)
    paths = {kind: folder / f"{stem}.{kind}" for kind in ("csv", "md", "json")}
    manifest["files"] = {kind: str(path) for kind, path in paths.items()}
    texts = {
        "csv": frame.to_csv(index=False),
        "md": comparison_markdown(
            frame, table, header_lines(manifest), manifest_findings(manifest)
        ),
        "json": json.dumps(manifest, indent=1, ensure_ascii=False),
    }
    for kind, text in texts.items():  # the manifest last: the app lists the manifests
        write_atomic(paths[kind], text)
    return paths


def saved_comparisons(store: RunStore) -> list[dict]:
    """The manifests ``reproduce`` wrote into the store, newest first."""
    folder = store.reproduce_dir
    manifests = []
    for path in sorted(folder.glob("table*.json")) if folder.is_dir() else []:
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
            manifest["path"] = str(path)
            manifests.append(manifest)
        except (OSError, json.JSONDecodeError):
            continue  # a file being written, or not ours
    return sorted(manifests, key=lambda m: m.get("created", ""), reverse=True)
