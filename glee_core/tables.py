"""Paper-style result tables: Acc, F1, Head F1, Tail F1 as mean ± std over seeds (percent)."""

from __future__ import annotations

import pandas as pd

from .methods import METHODS
from .record import METRIC_KEYS, METRIC_TITLES


def comparison_table(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per dataset x setting x method with 'mean ± std' cells; ``best`` lists the columns
    where the row is the best mean of its dataset and setting (the paper's bold)."""
    rows = []
    for (dataset, setting), group in summary.groupby(["dataset", "setting"], sort=False):
        best = {k: group[f"{k}_mean"].max() for k in METRIC_KEYS}
        for _, row in group.iterrows():
            spec = METHODS.get(row["method"])
            cells = {METRIC_TITLES[k]: f"{row[f'{k}_mean']:.2f} ± {row[f'{k}_std']:.2f}"
                     for k in METRIC_KEYS}
            rows.append({"dataset": dataset, "setting": setting, "method": row["method"],
                         "paper row": spec.paper_row if spec else row["method"],
                         "seeds": int(row["seeds"]), **cells,
                         "best": [METRIC_TITLES[k] for k in METRIC_KEYS
                                  if row[f"{k}_mean"] == best[k]]})
    return pd.DataFrame(rows, columns=["dataset", "setting", "method", "paper row", "seeds",
                                       *METRIC_TITLES.values(), "best"])


def markdown_table(header: list[str], rows: list[list[str]], left: int = 1) -> list[str]:
    """A Markdown table's lines: the first ``left`` columns left-aligned, numbers right."""
    return ["| " + " | ".join(header) + " |",
            "|" + "---|" * left + "---:|" * (len(header) - left),
            *("| " + " | ".join(map(str, row)) + " |" for row in rows)]


def to_markdown(table: pd.DataFrame) -> str:
    """Markdown, one section per dataset and setting, best cells in bold."""
    out = []
    for (dataset, setting), group in table.groupby(["dataset", "setting"], sort=False):
        rows = [[f"{row['paper row']} (`{row['method']}`)", row["seeds"],
                 *[f"**{row[t]}**" if t in row["best"] else row[t]
                   for t in METRIC_TITLES.values()]] for _, row in group.iterrows()]
        out += [f"### {dataset} ({setting})", "",
                *markdown_table(["Method", "Seeds", *METRIC_TITLES.values()], rows), ""]
    return "\n".join(out)
