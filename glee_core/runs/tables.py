"""Result tables, one home: runs aggregated over seeds (:func:`aggregate`: mean and sample std,
percent), the paper-style comparison table of a dataset's heads, the modes table, and the
comparison of a reproduction with the paper's numbers (:func:`comparison` and its Markdown and
plain-text forms, the findings' checklist)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePath
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..core.errors import GleeError
from ..data.csvfile import FORMULA_START
from ..models.methods import METHODS, registry_order
from ..models.modes import MODE_LABELS, MODES, get_mode
from .metrics import within_noise
from .paper import NEAREST_REFERENCE, reference_results, reference_sources
from .record import METRIC_KEYS, METRIC_TITLES, SHOT_TITLES
from .store import Run

__all__ = [  # what this module offers (the app's door, glee_core.studio, reads it)
    "FORMULA_START",
    "SELECTION_NOTE",
    "STD_NOTE",
    "aggregate",
    "backbone_text",
    "comparison",
    "comparison_block",
    "comparison_csv",
    "comparison_markdown",
    "comparison_table",
    "comparison_text",
    "count_text",
    "findings_text",
    "markdown_table",
    "mean_std",
    "modes_table",
    "neutral_cells",
    "reference_note",
    "spreadsheet_csv",
    "to_markdown",
    "tuning_gain",
    "twin_notes",
]

if TYPE_CHECKING:
    from .paper import PaperTable

STD_NOTE = (
    "± is the sample standard deviation over seeds (n - 1, as the paper's); none for one seed"
)


def mean_std(mean: float, std: float, digits: int = 2) -> str:
    """``mean ± std``; the mean alone where there is no spread (one seed, or an AVG cell)."""
    if pd.isna(mean):
        return "–"
    return f"{mean:.{digits}f}" + ("" if pd.isna(std) else f" ± {std:.{digits}f}")


SELECTION_NOTE = (
    "Highlighted: the head chosen on dev (its best dev score, mean over seeds), or "
    "by cross-validation on train + dev where the quick compare made one (a small "
    "dev split: the CV column), never on test; 'within noise': its score is within "
    "the seeds' spread of the chosen one"
)


def twin_notes(runs: list[Run]) -> list[str]:
    """A sentence for each pair of methods that are one model in the setting they ran in
    (:meth:`~glee_core.models.methods.MethodSpec.twin_in`: ``prompt-ed`` is ``prompt`` on a
    frozen backbone), so two identical rows of a table are not read as two results."""
    pairs = set()
    for run in runs:
        twin = run.record.method.twin_in(get_mode(run.record.mode))
        if twin is not None:
            pairs.add((run.method, twin, run.record.mode))
    return [
        f"`{method}` and `{twin}` are one model here ({MODE_LABELS[mode]}): on a frozen "
        "backbone every prompt head trains its own copy of the label-word rows, which is all "
        "its decoupled embedding adds, so their rows are the same model and the same scores "
        "(the paper's table lists both: it tunes the whole model)"
        for method, twin, mode in sorted(pairs)
    ]


def comparison_table(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per dataset x setting x method with 'mean ± std' cells, ``Dev`` (the dev score
    runs were selected by), ``CV`` (the cross-validated macro-F1, where the setting's runs have
    one; then it chooses), ``selection`` ("chosen on dev", "chosen by CV",
    "within noise" or empty) and ``best``: the columns to highlight (all the chosen row's
    headline columns)."""
    rows = []
    for (dataset, setting), group in summary.groupby(["dataset", "setting"], sort=False):
        by = "cv" if group["cv_mean"].notna().all() else "dev"
        chosen = (
            group.loc[group[f"{by}_mean"].idxmax()] if group[f"{by}_mean"].notna().any() else None
        )
        for index, row in group.iterrows():
            spec = METHODS.get(row["method"])
            cells = {
                title: mean_std(row[f"{k}_mean"], row[f"{k}_std"])
                for k, title in {**METRIC_TITLES, **SHOT_TITLES}.items()
            }
            if chosen is None:
                selection = ""
            elif index == chosen.name:
                selection = "chosen on dev" if by == "dev" else "chosen by CV"
            elif within_noise(
                chosen[f"{by}_mean"], chosen[f"{by}_std"], row[f"{by}_mean"], row[f"{by}_std"]
            ):
                selection = "within noise"
            else:
                selection = ""
            rows.append(
                {
                    "dataset": dataset,
                    "setting": setting,
                    "method": row["method"],
                    "paper row": spec.paper_row if spec else row["method"],
                    "seeds": int(row["seeds"]),
                    "Dev": mean_std(row["dev_mean"], row["dev_std"]),
                    "CV": mean_std(row["cv_mean"], row["cv_std"]),
                    **cells,
                    "selection": selection,
                    "best": [*METRIC_TITLES.values(), "Dev" if by == "dev" else "CV"]
                    if selection.startswith("chosen")
                    else [],
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "dataset",
            "setting",
            "method",
            "paper row",
            "seeds",
            "Dev",
            "CV",
            *METRIC_TITLES.values(),
            *SHOT_TITLES.values(),
            "selection",
            "best",
        ],
    )


def tuning_gain(tuned: Run, store) -> str | None:
    """What a tuned run gained over the quick-mode run of the same head it started from (LP-FT's
    stage, ``lp_ft_from``): one line, test macro-F1 and tail F1 before and after; None when it
    started from none, or that run is not in ``store`` (a ``RunStore``)."""
    start = tuned.record.tuning.get("lp_ft_from")
    quick = store.get(start) if start else None
    if quick is None:
        return None
    before, after = quick.metrics, tuned.metrics
    f1 = (100 * before.f1, 100 * after.f1)
    tail = (100 * before.tail_f1, 100 * after.tail_f1)
    return (
        f"{tuned.method} ({tuned.record.mode}, seed {tuned.seed}): test macro-F1 {f1[0]:.1f} -> "
        f"{f1[1]:.1f} ({f1[1] - f1[0]:+.1f}), tail F1 {tail[0]:.1f} -> {tail[1]:.1f} "
        f"({tail[1] - tail[0]:+.1f}) over its quick-mode run, the head it started from"
    )


def count_text(n: int) -> str:
    """A parameter count, short: ``1.23M``, ``14.6k``."""
    return f"{n / 1e6:.2f}M" if n >= 100_000 else f"{n / 1e3:.1f}k"


def backbone_text(name: str) -> str:
    """A backbone's name as a table cell shows it: a local folder (an adapted backbone, a
    checkpoint on disk) by its last part, so that the cell stays short; a hub id as it is."""
    if name.startswith(("/", "./", "../", "~")):
        return PurePath(name).name or name
    return name


def modes_table(runs: list[Run], method: str) -> pd.DataFrame:
    """One head under every way it was tuned: a row per setting (backbone, mode, protocol) of
    ``method``'s runs, 'mean ± std' cells over seeds, the trainable parameters the runs
    recorded; modes in the registry's order (frozen, fine-tune, LoRA, P-tuning v2). The long
    protocol comes last, so that the scores show first in a narrow view."""
    runs = [r for r in runs if r.method == method]
    summary = aggregate(runs)
    first = {}
    for run in runs:
        first.setdefault(run.setting, run.record)
    rows = []
    for _, row in summary.iterrows():
        record = first[row["setting"]]
        counts = [
            r.record.tuning.get("trainable_parameters") for r in runs if r.setting == row["setting"]
        ]
        counts = [c for c in counts if c]
        rows.append(
            {
                "mode": MODE_LABELS.get(record.mode, record.mode),
                "backbone": backbone_text(record.model.name),
                "protocol": record.protocol,
                "seeds": int(row["seeds"]),
                **{
                    title: mean_std(row[f"{k}_mean"], row[f"{k}_std"])
                    for k, title in METRIC_TITLES.items()
                },
                "trainable": count_text(max(counts)) if counts else "–",
                "_order": list(MODES).index(record.mode) if record.mode in MODES else 99,
                "_tail": row["tail_f1_mean"],
            }
        )
    columns = ["mode", "backbone", "seeds", *METRIC_TITLES.values(), "trainable", "protocol"]
    if not rows:
        return pd.DataFrame(columns=columns)
    frame = pd.DataFrame(rows).sort_values(["_order", "_tail"], ascending=[True, False])
    return frame[columns].reset_index(drop=True)


def markdown_table(header: list[str], rows: list[list[str]], left: int = 1) -> list[str]:
    """A Markdown table's lines: the first ``left`` columns left-aligned, numbers right."""
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * left + "---:|" * (len(header) - left),
        *("| " + " | ".join(map(str, row)) + " |" for row in rows),
    ]


def to_markdown(table: pd.DataFrame) -> str:
    """Markdown, one section per dataset and setting, best cells in bold."""
    out = []
    for (dataset, setting), group in table.groupby(["dataset", "setting"], sort=False):
        rows = [
            [
                f"{row['paper row']} (`{row['method']}`)",
                row["seeds"],
                *[
                    f"**{row[t]}**" if t in row["best"] else row[t]
                    for t in ("Dev", "CV", *METRIC_TITLES.values())
                ],
                *[row[t] for t in SHOT_TITLES.values()],
                row["selection"],
            ]
            for _, row in group.iterrows()
        ]
        out += [
            f"### {dataset} ({setting})",
            "",
            *markdown_table(
                [
                    "Method",
                    "Seeds",
                    "Dev",
                    "CV",
                    *METRIC_TITLES.values(),
                    *SHOT_TITLES.values(),
                    "Selection",
                ],
                rows,
            ),
            "",
            f"{SELECTION_NOTE} (in bold); {STD_NOTE}.",
            "",
        ]
    return "\n".join(out)


def comparison_csv(table: pd.DataFrame) -> str:
    """A :func:`comparison_table` as CSV (``best``: the columns joined by ``;``), what both
    ``compare --format csv`` and the Results page's download write."""
    return spreadsheet_csv(table.assign(best=table["best"].str.join(";")))


def _neutral(value):
    return f"'{value}" if isinstance(value, str) and value.startswith(FORMULA_START) else value


def neutral_cells(frame: pd.DataFrame, columns=None) -> pd.DataFrame:
    """``frame`` with every text cell of ``columns`` (default: every text column) that a
    spreadsheet would read as a formula (``=``, ``+``, ``-``, ``@``, tab, carriage return first)
    given a leading ``'`` (OWASP's CSV-injection advice), so a crafted class name or text stays
    text. Numbers are left as they are."""
    out = frame.copy()
    texts = out.columns[[not pd.api.types.is_numeric_dtype(t) for t in out.dtypes]]
    for column in texts if columns is None else [c for c in columns if c in texts]:
        out[column] = out[column].map(_neutral)
    return out


def spreadsheet_csv(frame: pd.DataFrame) -> str:
    """``frame`` as the app's CSV downloads write it: every text cell and column name
    neutralised (:func:`neutral_cells`)."""
    out = neutral_cells(frame)
    out.columns = [_neutral(str(c)) for c in out.columns]
    return out.to_csv(index=False)


def aggregate(runs: list[Run]) -> pd.DataFrame:
    """Mean and sample standard deviation (ddof=1, as the paper's ±; NaN for one seed) of acc,
    f1, head_f1, tail_f1, the shot buckets, ``dev`` (the dev score each run was selected by) and
    ``cv`` (its cross-validated macro-F1: quick mode on a small dev split) over seeds, per
    dataset, setting (backbone · mode · protocol) and method, in percent. Methods keep the
    registry's order."""
    keys = (*METRIC_KEYS, *SHOT_TITLES, "dev", "cv")  # NaN where a run lacks one or has none

    def value(run: Run, key: str) -> float:
        found = run.metrics.value(key)
        return np.nan if found is None else 100.0 * float(found)

    rows = [
        {
            "dataset": r.dataset,
            "setting": r.setting,
            "method": r.method,
            "seed": r.seed,
            **{k: value(r, k) for k in keys},
        }
        for r in runs
    ]
    columns = ["dataset", "setting", "method", "seeds"] + [
        f"{k}_{s}" for k in keys for s in ("mean", "std")
    ]
    if not rows:
        return pd.DataFrame(columns=columns)
    frame = pd.DataFrame(rows)
    grouped = frame.groupby(["dataset", "setting", "method"], sort=False)
    out = grouped[list(keys)].agg(
        ["mean", lambda x: float(np.std(x.dropna(), ddof=1)) if x.notna().sum() > 1 else np.nan]
    )
    out.columns = [f"{k}_{'mean' if s == 'mean' else 'std'}" for k, s in out.columns]
    out["seeds"] = grouped.size()
    out = out.reset_index()
    order = {m: i for i, m in enumerate(registry_order(out["method"]))}
    out = out.sort_values(["dataset", "setting"], kind="stable")
    out = (
        out.assign(_order=out["method"].map(order))
        .sort_values(["dataset", "setting", "_order"])
        .drop(columns="_order")
    )
    return out.reset_index(drop=True)[columns]


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
    # AVG over the datasets: only where every dataset has a value (else it would mislead)
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
    frame = pd.concat([frame, avg[frame.columns]], ignore_index=True)
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
