"""Result tables, one home: runs aggregated over seeds (:func:`aggregate`: mean and sample std,
percent), the paper-style comparison table of a dataset's heads, the modes table, and the
Markdown and spreadsheet-safe CSV they are written as (a reproduction beside the paper's numbers:
:mod:`glee_core.runs.paper_tables`)."""

from __future__ import annotations

from pathlib import PurePath
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..data.csvfile import FORMULA_START
from ..models.methods import METHODS, registry_order
from ..models.modes import MODE_LABELS, MODES, get_mode
from .metrics import within_noise
from .record import METRIC_KEYS, METRIC_TITLES, SHOT_TITLES
from .store import Run

if TYPE_CHECKING:
    pass

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
    started from none, or that run is not in ``store`` (a ``RunStore``, or its runs by id)."""
    start = tuned.record.tuning.lp_ft_from
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
    recorded; modes in the registry's order (frozen, fine-tune, LoRA, P-tuning v2). Beside the
    mode, the options that set a row apart from its mode's other rows (``self-ensemble``,
    ``supcon 0.3``); the long protocol comes last, so that the scores show first in a narrow
    view."""
    runs = [r for r in runs if r.method == method]
    summary = aggregate(runs)
    first = {}
    for run in runs:
        first.setdefault(run.setting, run.record)
    rows = []
    for _, row in summary.iterrows():
        record = first[row["setting"]]
        counts = [r.record.tuning.trainable_parameters for r in runs if r.setting == row["setting"]]
        counts = [c for c in counts if c]
        rows.append(
            {
                "mode": MODE_LABELS.get(record.mode, record.mode),
                "_mode": record.mode,
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
    columns = [
        "mode",
        "options",
        "backbone",
        "seeds",
        *METRIC_TITLES.values(),
        "trainable",
        "protocol",
    ]
    if not rows:
        return pd.DataFrame(columns=columns)
    frame = pd.DataFrame(rows).sort_values(["_order", "_tail"], ascending=[True, False])
    frame["options"] = frame.groupby("_mode")["protocol"].transform(_options_apart)
    return frame[columns].reset_index(drop=True)


def _options_apart(protocols: pd.Series) -> pd.Series:
    """Each protocol's parts that some other protocol of the same mode lacks ('–' where none):
    what tells apart rows that read alike up to their long protocol's end."""
    parts = [protocol.split(" · ") for protocol in protocols]
    shared = set.intersection(*map(set, parts))
    return pd.Series(
        [" · ".join(p for p in own if p not in shared) or "–" for own in parts],
        index=protocols.index,
    )


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
