"""A reproduction beside the paper's numbers: :func:`comparison` (each cell's mean and spread
over seeds against the paper's, where the paper's protocol matches), its Markdown and plain-text
forms, and the findings' checklist (``glee_core.runs.findings``) as text. The reproduction's
command line and the Paper page read it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..core.errors import GleeError
from ..models.methods import METHODS
from .paper import NEAREST_REFERENCE, reference_results, reference_sources
from .record import METRIC_TITLES
from .store import Run
from .tables import aggregate, markdown_table, mean_std

if TYPE_CHECKING:
    from .paper import PaperTable


def _one_setting_each(runs: list[Run]) -> dict[tuple[str, str], set[str]]:
    """Each (dataset, method)'s setting; an error where one has runs of several (they must not
    be averaged)."""
    settings: dict[tuple[str, str], set[str]] = {}
    for run in runs:
        settings.setdefault((run.dataset, run.method), set()).add(run.setting)
    mixed = {k: s for k, s in settings.items() if len(s) > 1}
    if mixed:
        raise GleeError(
            "runs of several settings for "
            + "; ".join(f"{d} {m}: {' | '.join(sorted(s))}" for (d, m), s in mixed.items())
            + " - compare one at a time"
        )
    return settings


def _with_average(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its AVG rows: over the datasets, only where every dataset has a value
    (else it would mislead)."""
    avg = (
        frame.groupby(["method", "paper row", "metric"], sort=False)
        .agg(
            mean=("mean", lambda x: x.mean() if x.notna().all() else np.nan),
            ref=("ref", lambda x: x.mean() if x.notna().all() else np.nan),
            logs=("logs", lambda x: x.mean() if x.notna().all() else np.nan),
            seeds=("seeds", "min"),
            ref_seeds=("ref_seeds", "min"),
            ref_source=("ref_source", lambda x: "/".join(sorted(set(x) - {""}))),
        )
        .reset_index()
        .assign(
            dataset="AVG", std=np.nan, ref_std=np.nan, logs_std=np.nan, ref_dataset="", setting=""
        )
    )
    return pd.concat([frame, avg[frame.columns]], ignore_index=True)


def comparison(
    runs: list[Run], table: PaperTable, datasets: Iterable[str] | None = None
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
    settings = _one_setting_each(runs)
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
                rows.append(
                    {
                        "method": method,
                        "paper row": METHODS[method].paper_row,
                        "dataset": dataset,
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
                        "setting": " | ".join(sorted(settings.get((dataset, method), ()))),
                    }
                )
    frame = pd.DataFrame(rows)
    frame = _with_average(frame)
    frame["diff"] = frame["mean"] - frame["ref"]
    best = frame.groupby(["dataset", "metric"])["mean"].transform("max")
    frame["best"] = frame["mean"].notna() & np.isclose(frame["mean"], best)
    return frame[
        [
            "method",
            "paper row",
            "dataset",
            "metric",
            "mean",
            "std",
            "seeds",
            "ref",
            "ref_std",
            "ref_source",
            "ref_seeds",
            "ref_dataset",
            "logs",
            "logs_std",
            "diff",
            "best",
            "setting",
        ]
    ]


def comparison_block(frame: pd.DataFrame, metrics: Iterable[str]) -> pd.DataFrame:
    """One block of the paper's layout as strings: rows per method (ours, ref, Δ and, where the
    authors' released runs cover a column, logs), columns ``"<DATASET> <Metric>"`` with AVG last;
    the best mean of a column carries a ``*``. Rows with no value at all are left out."""
    metrics = list(metrics)
    part = frame[frame["metric"].isin(metrics)]
    datasets = list(dict.fromkeys(part["dataset"]))
    columns = [
        f"{d.upper() if d != 'AVG' else 'AVG'} {METRIC_TITLES[m]}"
        for d in datasets
        for m in metrics
    ]
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
            "logs": [mean_std(r["logs"], r["logs_std"]) for r in ordered],
        }
        for kind in kinds:
            index.append((row_name, kind))
            rows.append(text[kind])
    return pd.DataFrame(
        rows, columns=columns, index=pd.MultiIndex.from_tuples(index, names=["method", ""])
    )


def comparison_markdown(
    frame: pd.DataFrame, table: PaperTable, header: Iterable[str] = (), findings: Iterable = ()
) -> str:
    """The table in Markdown: one block per metric pair, best means in bold; then the findings."""
    out = [f"## Table {table.number}: {table.title}", "", *header]
    if header:
        out.append("")
    for metrics in table.blocks:
        block = comparison_block(frame, metrics)
        names = " / ".join(METRIC_TITLES[m] for m in metrics)
        rows = [
            [
                row_name if kind == "ours" else "",
                kind,
                *[f"**{v[:-1]}**" if v.endswith("*") else v for v in values],
            ]
            for (row_name, kind), values in block.iterrows()
        ]
        out += [
            f"### {names}",
            "",
            *markdown_table(["Method", "", *block.columns], rows, left=2),
            "",
        ]
    out.append(reference_note(frame))
    if findings:
        out += ["", findings_text(list(findings))]
    return "\n".join(out) + "\n"


def comparison_text(
    frame: pd.DataFrame, table: PaperTable, header: Iterable[str] = (), findings: Iterable = ()
) -> str:
    """The same table as aligned plain text, for the terminal."""
    out = [f"Table {table.number}: {table.title}", *header]
    for metrics in table.blocks:
        block = comparison_block(frame, metrics)
        out += [
            "",
            " / ".join(METRIC_TITLES[m] for m in metrics) + "  (* best mean)",
            block.to_string(),
        ]
    out += ["", reference_note(frame)]
    if findings:
        out += ["", findings_text(list(findings))]
    return "\n".join(out) + "\n"


def reference_note(frame: pd.DataFrame) -> str:
    """What the rows mean, which reference values a table shows, and where they come from."""
    used = sorted({s for value in frame["ref_source"] for s in value.split("/") if s})
    sources = reference_sources()
    lines = [
        "ours: mean ± sample std (n - 1, as the paper's subscripts) over seeds; "
        "Δ = ours - ref; * best mean of its column",
        "ref: "
        + (
            "no reference value for these datasets"
            if not used
            else "; ".join(f"{s} - {sources[s]['title']} {sources[s]['status']}" for s in used)
        ),
    ]
    nearest = sorted(
        {
            (d, r)
            for d, r in zip(frame["dataset"], frame["ref_dataset"], strict=True)
            if r and r != d
        }
    )
    lines += [
        f"{d}: the paper does not report it; ref shows its nearest dataset, {r} "
        "(the nearest reference, not a target)"
        for d, r in nearest
    ]
    if frame["logs"].notna().any():
        lines.append(
            f"logs: {sources['released-logs']['title']} {sources['released-logs']['status']}"
        )
    return "\n".join(lines)


def findings_text(findings: list) -> str:
    """The checklist for a terminal or Markdown: one line per finding
    (:class:`~glee_core.runs.findings.Finding`: its verdict, claim, evidence and the paper's
    words)."""
    marks = {"holds": "[x]", "does not hold": "[ ]", "cannot judge": "[?]"}
    lines = ["The paper's findings on these runs ([x] holds, [ ] does not hold, [?] cannot judge):"]
    for f in findings:
        lines += [f"- {marks[f.verdict]} {f.claim}", f"    {f.evidence}", f"    {f.paper}"]
    return "\n".join(lines)
