"""The paper's own numbers and protocol, shipped as data in ``glee_core/reference/``.

* ``glee_tables.csv`` - every cell of the paper's Tables 2, 3 and 5 (mean and the printed ±);
* ``glee_r52_logs.csv`` - every run of the authors' released R52 logs (12 methods x 5 seeds);
* ``glee_scripts.csv`` - every ``scripts/run_*.sh`` of their repository, one row each;
* ``sources.json`` - where each comes from.

Copies of ``../shared/paper/`` (checked there by ``check_tables.py``); a test compares them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.errors import GleeError
from .record import METRIC_KEYS

REFERENCE_DIR = Path(__file__).with_name("reference")
PAPER_SEEDS = (775, 776, 777, 778, 779)  # the released scripts' seeds
# A dataset the paper does not report, and the paper's dataset nearest to it (R8's classes are a
# subset of R52's, same template and label words): its numbers are shown, labelled as such.
NEAREST_REFERENCE = {"r8": "r52"}


@lru_cache(maxsize=1)
def paper_cells() -> pd.DataFrame:
    """Every cell of the paper's Tables 2, 3 and 5: table, dataset, method, metric, mean, std."""
    return pd.read_csv(REFERENCE_DIR / "glee_tables.csv")


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
        return tuple(
            d
            for d in dict.fromkeys(rows.loc[rows["table"] == self.number, "dataset"])
            if d != "avg"
        )

    def subset(self, methods: list[str]) -> PaperTable:
        """The table with only some of its rows (in the table's order)."""
        unknown = [m for m in methods if m not in self.methods]
        if unknown or not methods:
            raise GleeError(
                f"--methods: {', '.join(unknown) or 'none given'} - Table "
                f"{self.number} has {', '.join(self.methods)}"
            )
        return replace(self, only=tuple(methods))


@lru_cache(maxsize=1)
def released_log_runs() -> pd.DataFrame:
    """Every run of the authors' released R52 logs: dataset, method, seed and the four metrics."""
    return pd.read_csv(REFERENCE_DIR / "glee_r52_logs.csv")


# The released scripts' model types (and, where the script takes it as ${1}, activations) -> ids
SCRIPT_METHODS = {
    "cls_tuning": ("cls-tanh", "cls-relu"),
    "cls_tuning_w_eta_norm": ("cls-tanh-eta-norm", "cls-relu-eta-norm"),
    "cls_tuning_w_focal_loss": ("cls-tanh-focal", "cls-relu-focal"),
    "cls_tuning_w_prompt": ("cls-relu-prompt",),
    "cls_tuning_w_layer_norm": ("cls-relu-ln",),
    "cls_tuning_w_init_norm": ("cls-relu-pt-ln",),
    "cls_tuning_w_init": ("cls-relu-pt-ln",),
    "prompt_tuning": ("prompt",),
    "prompt_tuning_w_decoupling": ("prompt-ed",),
    "prompt_tuning_w_focal_loss": ("prompt-focal",),
}


@lru_cache(maxsize=1)
def script_protocols() -> dict[tuple[str, str], dict]:
    """(dataset, method) -> the TrainConfig fields of the authors' run script for it
    (``reference/glee_scripts.csv``: every scripts/run_*.sh of their repository as data)."""
    out = {}
    for _, row in pd.read_csv(REFERENCE_DIR / "glee_scripts.csv").iterrows():
        fields = {
            "max_length": int(row["max_length"]),
            "batch_size": int(row["batch"]),
            "lr": float(row["lr"]),
            "weight_decay": float(row["weight_decay"]),
            "epochs": int(row["epochs"]),
            "patience": int(row["patience_epochs"]),
            "warmup_ratio": float(row["warmup"]),
            "eval_every_steps": int(row["eval_every_steps"]),
            "select_metric": str(row["select"]),
            "max_grad_norm": float(row["max_grad_norm"]),
        }
        for method in SCRIPT_METHODS[row["model_type"]]:
            out[(row["task"], method)] = fields
    return out


@lru_cache(maxsize=1)
def reference_sources() -> dict[str, dict]:
    return json.loads((REFERENCE_DIR / "sources.json").read_text(encoding="utf-8"))["sources"]


def _wide(frame: pd.DataFrame, source: str, seeds: int) -> pd.DataFrame:
    """Long cells (dataset, method, metric, mean, std) -> one row per dataset x method."""
    means = frame.pivot_table(index=["dataset", "method"], columns="metric", values="mean")
    stds = frame.pivot_table(index=["dataset", "method"], columns="metric", values="std")
    out = means.join(stds.add_suffix("_std")).reset_index()
    for key in METRIC_KEYS:  # Table 5 prints accuracy only
        for column in (key, f"{key}_std"):
            if column not in out:
                out[column] = np.nan
    return out.assign(source=source, seeds=seeds)


def reference_results(source: str | None = None) -> pd.DataFrame:
    """One row per dataset x method: ``source``, ``seeds``, each metric and its ``_std`` (the
    sample std, as the paper prints it). The paper's cells first, then the released R52 logs
    (mean and sample std of their five runs) where the paper has no cell; ``source`` picks one."""
    cells = paper_cells()
    paper = _wide(
        cells[cells["dataset"] != "avg"].drop_duplicates(["dataset", "method", "metric"]),
        "paper",
        len(PAPER_SEEDS),
    )
    logs = released_log_runs().melt(
        id_vars=["dataset", "method", "seed"], value_vars=list(METRIC_KEYS), var_name="metric"
    )
    logs = (
        logs.groupby(["dataset", "method", "metric"])["value"]
        .agg(mean="mean", std=lambda x: float(np.std(x, ddof=1)))
        .reset_index()
    )
    logs = _wide(logs, "released-logs", len(PAPER_SEEDS))
    frame = pd.concat([paper, logs], ignore_index=True)
    if source is not None:
        return frame[frame["source"] == source].reset_index(drop=True)
    return frame.drop_duplicates(["dataset", "method"]).reset_index(drop=True)
