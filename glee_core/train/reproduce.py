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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.errors import GleeError
from ..core.events import ProgressFn
from ..core.files import write_atomic
from ..data.datasets import LongTailDataset
from ..models.config import PAPER, TrainConfig
from ..models.methods import METHODS, get_method
from ..runs.findings import Finding, check_findings, findings_text
from ..runs.paper import (
    NEAREST_REFERENCE,
    PAPER_SEEDS,
    paper_cells,
    reference_results,
    reference_sources,
    script_protocols,
)
from ..runs.record import METRIC_TITLES, merged_notes
from ..runs.store import Run, RunStore, aggregate, config_hash, slug
from ..runs.tables import markdown_table, mean_std

PAPER_MODELS = {"en": "bert-base-uncased", "zh": "bert-base-chinese"}  # --model paper
FEW_SHOT_EXAMPLES = 32
LONG_TAILED_BLOCKS = (("acc", "f1"), ("head_f1", "tail_f1"))



@dataclass(frozen=True)
class PaperTable:
    number: int
    title: str
    blocks: tuple[tuple[str, ...], ...] = LONG_TAILED_BLOCKS
    few_shot: bool = False
    only: tuple[str, ...] | None = None  # a subset of the rows (``--methods``)

    @property
    def methods(self) -> tuple[str, ...]:
        """The table's rows, in the paper's order (from the shipped table)."""
        rows = paper_cells()
        rows = tuple(dict.fromkeys(rows.loc[rows["table"] == self.number, "method"]))
        return rows if self.only is None else tuple(m for m in rows if m in self.only)

    @property
    def datasets(self) -> tuple[str, ...]:
        """The table's dataset columns, in the paper's order (its AVG column aside)."""
        rows = paper_cells()
        return tuple(d for d in dict.fromkeys(rows.loc[rows["table"] == self.number, "dataset"])
                     if d != "avg")

    def subset(self, methods: list[str]) -> PaperTable:
        """The table with only some of its rows (in the table's order)."""
        unknown = [m for m in methods if m not in self.methods]
        if unknown or not methods:
            raise GleeError(f"--methods: {', '.join(unknown) or 'none given'} - Table "
                            f"{self.number} has {', '.join(self.methods)}")
        return replace(self, only=tuple(methods))


PAPER_TABLES: dict[int, PaperTable] = {t.number: t for t in (
    PaperTable(2, "Long-tailed classification: CLS-tuning and its remedies vs prompt-tuning"),
    PaperTable(3, "Bridging CLS-tuning and prompt-tuning: activation, input, LayerNorm, "
                  "embeddings"),
    PaperTable(5, "Few-shot classification (32 training examples, batch size 2)",
               blocks=(("acc", "f1"),), few_shot=True),
)}


def get_table(number: int | str) -> PaperTable:
    try:
        return PAPER_TABLES[int(number)]
    except (KeyError, ValueError):
        raise GleeError(f"--table must be one of {', '.join(map(str, PAPER_TABLES))}, "
                        f"got {number!r}") from None


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


def protocol_config(table: PaperTable, dataset: str, method: str,
                    overrides: dict | None = None) -> TrainConfig:
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


def comparison(runs: list[Run], table: PaperTable, datasets: Iterable[str] | None = None
               ) -> pd.DataFrame:
    """Long format, one row per method x dataset (and AVG) x metric of the table: ``mean``,
    ``std`` (the sample std over seeds, as the paper's), ``seeds``; the reference ``ref``,
    ``ref_std``, ``ref_source``, ``ref_seeds`` and ``ref_dataset`` (the paper's value; for a
    dataset it does not report, its nearest one's, e.g. R52 for R8); ``logs``/``logs_std`` (the
    authors' released R52 runs); ``diff`` (ours - ref), ``best`` (the best mean of its column,
    the paper's bold), and the ``setting``.

    Runs of methods or datasets outside the table are ignored; a method whose runs on a dataset
    come from more than one setting (backbone, mode, protocol) is an error: they must not be
    averaged. (Methods may differ: the authors' scripts give some their own learning rate.)"""
    datasets = list(datasets or table.datasets)
    runs = [r for r in runs if r.method in table.methods and r.dataset in datasets]
    settings: dict[tuple[str, str], set[str]] = {}
    for run in runs:
        settings.setdefault((run.dataset, run.method), set()).add(run.setting)
    mixed = {k: s for k, s in settings.items() if len(s) > 1}
    if mixed:
        raise GleeError("runs of several settings for " + "; ".join(
            f"{d} {m}: {' | '.join(sorted(s))}" for (d, m), s in mixed.items())
            + " - compare one at a time")
    summary = aggregate(runs).set_index(["dataset", "method"])
    refs = reference_results().set_index(["dataset", "method"])
    logs = reference_results("released-logs").set_index(["dataset", "method"])
    metrics = [m for block in table.blocks for m in block]
    rows = []
    for method in table.methods:
        for dataset in datasets:
            ours = summary.loc[(dataset, method)] if (dataset, method) in summary.index else None
            key = (NEAREST_REFERENCE.get(dataset, dataset), method)
            ref = refs.loc[key] if key in refs.index else None
            log = logs.loc[key] if key in logs.index else None
            for metric in metrics:
                rows.append({
                    "method": method, "paper row": METHODS[method].paper_row, "dataset": dataset,
                    "metric": metric,
                    "mean": np.nan if ours is None else float(ours[f"{metric}_mean"]),
                    "std": np.nan if ours is None else float(ours[f"{metric}_std"]),
                    "seeds": 0 if ours is None else int(ours["seeds"]),
                    "ref": np.nan if ref is None else float(ref[metric]),
                    "ref_std": np.nan if ref is None else float(ref[f"{metric}_std"]),
                    "ref_source": "" if ref is None or pd.isna(ref[metric]) else ref["source"],
                    "ref_seeds": 0 if ref is None else int(ref["seeds"]),
                    "ref_dataset": key[0] if ref is not None else "",
                    "logs": np.nan if log is None else float(log[metric]),
                    "logs_std": np.nan if log is None else float(log[f"{metric}_std"]),
                    "setting": " | ".join(sorted(settings.get((dataset, method), ())))})
    frame = pd.DataFrame(rows)
    # AVG over the datasets: only where every dataset has a value (else it would mislead)
    avg = (frame.groupby(["method", "paper row", "metric"], sort=False)
           .agg(mean=("mean", lambda x: x.mean() if x.notna().all() else np.nan),
                ref=("ref", lambda x: x.mean() if x.notna().all() else np.nan),
                logs=("logs", lambda x: x.mean() if x.notna().all() else np.nan),
                seeds=("seeds", "min"), ref_seeds=("ref_seeds", "min"),
                ref_source=("ref_source", lambda x: "/".join(sorted(set(x) - {""}))))
           .reset_index().assign(dataset="AVG", std=np.nan, ref_std=np.nan, logs_std=np.nan,
                                 ref_dataset="", setting=""))
    frame = pd.concat([frame, avg[frame.columns]], ignore_index=True)
    frame["diff"] = frame["mean"] - frame["ref"]
    best = frame.groupby(["dataset", "metric"])["mean"].transform("max")
    frame["best"] = frame["mean"].notna() & np.isclose(frame["mean"], best)
    return frame[["method", "paper row", "dataset", "metric", "mean", "std", "seeds", "ref",
                  "ref_std", "ref_source", "ref_seeds", "ref_dataset", "logs", "logs_std",
                  "diff", "best", "setting"]]


def comparison_block(frame: pd.DataFrame, metrics: Iterable[str]) -> pd.DataFrame:
    """One block of the paper's layout as strings: rows per method (ours, ref, Δ and, where the
    authors' released runs cover a column, logs), columns ``"<DATASET> <Metric>"`` with AVG last;
    the best mean of a column carries a ``*``. Rows with no value at all are left out."""
    metrics = list(metrics)
    part = frame[frame["metric"].isin(metrics)]
    datasets = list(dict.fromkeys(part["dataset"]))
    columns = [f"{d.upper() if d != 'AVG' else 'AVG'} {METRIC_TITLES[m]}"
               for d in datasets for m in metrics]
    kinds = ["ours"]
    if part["ref"].notna().any():
        kinds += ["ref", "Δ"]
    if part["logs"].notna().any():
        kinds.append("logs")
    rows, index = [], []
    for row_name, group in part.groupby("paper row", sort=False):
        cells = {(r["dataset"], r["metric"]): r for _, r in group.iterrows()}
        ordered = [cells[(d, m)] for d in datasets for m in metrics]
        text = {
            "ours": [mean_std(r["mean"], r["std"]) + ("*" if r["best"] else "") for r in ordered],
            "ref": [mean_std(r["ref"], r["ref_std"]) for r in ordered],
            "Δ": ["–" if pd.isna(r["diff"]) else f"{r['diff']:+.2f}" for r in ordered],
            "logs": [mean_std(r["logs"], r["logs_std"]) for r in ordered]}
        for kind in kinds:
            index.append((row_name, kind))
            rows.append(text[kind])
    return pd.DataFrame(rows, columns=columns,
                        index=pd.MultiIndex.from_tuples(index, names=["method", ""]))


def comparison_markdown(frame: pd.DataFrame, table: PaperTable, header: Iterable[str] = (),
                        findings: Iterable[Finding] = ()) -> str:
    """The table in Markdown: one block per metric pair, best means in bold; then the findings."""
    out = [f"## Table {table.number}: {table.title}", "", *header]
    if header:
        out.append("")
    for metrics in table.blocks:
        block = comparison_block(frame, metrics)
        names = " / ".join(METRIC_TITLES[m] for m in metrics)
        rows = [[row_name if kind == "ours" else "", kind,
                 *[f"**{v[:-1]}**" if v.endswith("*") else v for v in values]]
                for (row_name, kind), values in block.iterrows()]
        out += [f"### {names}", "", *markdown_table(["Method", "", *block.columns], rows, left=2),
                ""]
    out.append(reference_note(frame))
    if findings:
        out += ["", findings_text(list(findings))]
    return "\n".join(out) + "\n"


def comparison_text(frame: pd.DataFrame, table: PaperTable, header: Iterable[str] = (),
                    findings: Iterable[Finding] = ()) -> str:
    """The same table as aligned plain text, for the terminal."""
    out = [f"Table {table.number}: {table.title}", *header]
    for metrics in table.blocks:
        block = comparison_block(frame, metrics)
        out += ["", " / ".join(METRIC_TITLES[m] for m in metrics) + "  (* best mean)",
                block.to_string()]
    out += ["", reference_note(frame)]
    if findings:
        out += ["", findings_text(list(findings))]
    return "\n".join(out) + "\n"


def manifest_findings(manifest: dict) -> list[Finding]:
    return [Finding(**f) for f in manifest.get("findings", [])]


def reference_note(frame: pd.DataFrame) -> str:
    """What the rows mean, which reference values a table shows, and where they come from."""
    used = sorted({s for value in frame["ref_source"] for s in value.split("/") if s})
    sources = reference_sources()
    lines = ["ours: mean ± sample std (n - 1, as the paper's subscripts) over seeds; "
             "Δ = ours - ref; * best mean of its column",
             "ref: " + ("no reference value for these datasets" if not used else
                        "; ".join(f"{s} - {sources[s]['title']} {sources[s]['status']}"
                                  for s in used))]
    nearest = sorted({(d, r) for d, r in zip(frame["dataset"], frame["ref_dataset"],
                                             strict=True) if r and r != d})
    lines += [f"{d}: the paper does not report it; ref shows its nearest dataset, {r} "
              "(the nearest reference, not a target)" for d, r in nearest]
    if frame["logs"].notna().any():
        lines.append(f"logs: {sources['released-logs']['title']} "
                     f"{sources['released-logs']['status']}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Running a table


def reproduce(table: PaperTable, datasets: list[LongTailDataset], model: str, seeds: list[int],
              overrides: dict, store: RunStore, executor=None,
              progress_for: Callable[[LongTailDataset], ProgressFn] | None = None,
              command: str = "") -> tuple[pd.DataFrame, dict]:
    """Train (or load) every method x seed of ``table`` on every dataset, then compare and write
    ``<runs>/reproduce/table<N>-<...>.{csv,md,json}``. Returns the comparison and the manifest.
    ``executor`` (default: here, one run after another) may put the runs on a Ray cluster."""
    # torch: only to train (the app's Results page reads reproductions without it)
    from .executors import Batch, LocalExecutor  # noqa: PLC0415
    from .experiment import plan_runs, preflight  # noqa: PLC0415

    executor = executor or LocalExecutor()
    specs = [get_method(m) for m in table.methods]
    started = time.perf_counter()
    models = {d.id: model_for(d, model) for d in datasets}
    configs = {(d.id, s.id): protocol_config(table, d.id, s.id, overrides)
               for d in datasets for s in specs}  # each method its script's hyper-parameters
    for dataset in datasets:  # vocabulary problems surface before anything trains
        plan = [p for s in specs for p in plan_runs(dataset, [s], seeds, models[dataset.id],
                                                    configs[(dataset.id, s.id)])]
        preflight(dataset, plan, models[dataset.id], store)
    batches = []
    for dataset in datasets:
        progress = _first_use(progress_for, dataset) if progress_for else None
        batches += [Batch(dataset, [spec], list(seeds), models[dataset.id],
                          configs[(dataset.id, spec.id)], False, progress) for spec in specs]
    runs: list[Run] = executor.run(batches, store)
    frame = comparison(runs, table, [d.id for d in datasets])
    manifest = {
        # the findings are about long-tailed data: Tables 2 and 3
        "findings": [] if table.few_shot else [f.to_dict() for f in check_findings(runs)],
        "table": table.number, "methods": list(table.methods),
        "datasets": [d.id for d in datasets], "model": model,
        "models": models, "backbone": overrides.get("mode", "finetune"), "seeds": list(seeds),
        "settings": {d: sorted({r.setting for r in runs if r.dataset == d}) for d in models},
        "protocol": "the authors' run scripts (reference/glee_scripts.csv), per method",
        "run_ids": [r.run_id for r in runs], "command": command,
        "notes": merged_notes([r.record for r in runs]),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "wall_seconds": round(time.perf_counter() - started, 1)}
    write_outputs(store, manifest, frame, table)
    return frame, manifest


def _first_use(progress_for: Callable[[LongTailDataset], ProgressFn],
               dataset: LongTailDataset) -> ProgressFn:
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
    return (f"table{manifest['table']}-{slug(manifest['model'])}-{manifest['backbone']}-"
            f"{config_hash(key)}")


def header_lines(manifest: dict) -> list[str]:
    models = sorted(set(manifest["models"].values()))
    return [f"Datasets: {', '.join(manifest['datasets'])} · backbone: {', '.join(models)} "
            f"({manifest['backbone']}) · seeds: {', '.join(map(str, manifest['seeds']))}",
            "", *[f"- {d}: {' | '.join(s)}" for d, s in manifest["settings"].items()],
            "", f"Command: `{manifest['command']}` ({manifest['wall_seconds']} s, "
            f"{manifest['created']})"]


def write_outputs(store: RunStore, manifest: dict, frame: pd.DataFrame, table: PaperTable
                  ) -> dict[str, Path]:
    folder = store.reproduce_dir
    stem = output_stem(manifest)
    paths = {kind: folder / f"{stem}.{kind}" for kind in ("csv", "md", "json")}
    manifest["files"] = {kind: str(path) for kind, path in paths.items()}
    texts = {"csv": frame.to_csv(index=False),
             "md": comparison_markdown(frame, table, header_lines(manifest),
                                       manifest_findings(manifest)),
             "json": json.dumps(manifest, indent=1, ensure_ascii=False)}
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
