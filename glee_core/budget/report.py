"""The label budget: how each class's test F1 grows with its training texts, and what more
texts would buy.

The measured points come from :mod:`glee_core.budget.curves` (a quick-mode head
retrained on nested, stratified fractions of every class's training texts, several seeds,
each class's F1 on the same test rows). Here they are fitted and read, with numpy alone (the
app's pages read a written report without torch):

* every class's curve is a saturating power law, ``F1(n) = a - b * n ** -c`` (``n``: the
  class's training texts), the form learning curves take in the literature (Hestness et al.
  2017; Figueroa et al. 2012): the exponent ``c`` is one for the dataset (fitted on every
  class's points, pooled), ``a`` and ``b`` are each class's, fitted by least squares shrunk
  toward the pooled curve (:data:`SHRINK`: a class with few sizes leans on the pool, one with
  many on its own points); ``b >= 0``, so more texts never forecast a lower F1;
* forecasts at 2x and 4x a class's texts: the F1 measured at its texts plus the curve's gain
  from there (a curve fitted below a class's measured point would otherwise forecast less than
  it has), with an 80% interval from the fit's residual noise (shrunk the same way) and its
  leverage there;
* the texts a class needs to reach the target F1: where its curve crosses it, or "not reached
  by 10x" (:data:`REACH`) when it does not within ten times its texts.

A class with fewer than :data:`MIN_SIZES` distinct training sizes (two texts or fewer: a line
through two points says nothing of its noise, and the backtest found such forecasts far off), or
no test text, is "too few to judge": listed with what was measured, never dropped, with no
forecast.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.files import write_report_files

BUDGET_FILE, BUDGET_CSV = "budget.json", "budget.csv"
BUDGET_COLUMNS = [
    "class",
    "n_train",
    "f1",
    "f1_at_2x",
    "f1_at_4x",
    "f1_at_2x_low",
    "f1_at_2x_high",
    "texts_for_target",
]
EXPONENTS = np.round(np.arange(0.05, 2.001, 0.05), 2)  # the pooled exponent's candidates
SHRINK = 2.0  # the pooled curve counts as this many sizes of a class's own
INTERVAL_Z = 1.2816  # an 80% interval (the 10th to 90th percentile of a normal)
MIN_SIZES = 3  # distinct training sizes a class's curve needs (two parameters and its noise)
REACH = 10  # a target further than this many times a class's texts is "not reached"
NOT_REACHED = f"not reached by {REACH}x"
TOO_FEW = "too few to judge"


def _least_squares(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[float, float, float]:
    """(a, b, weighted squared error) of ``y ~ a - b * x``, ``b >= 0``."""
    sw = w.sum()
    mx, my = (w * x).sum() / sw, (w * y).sum() / sw
    sxx = (w * (x - mx) ** 2).sum()
    slope = (w * (x - mx) * (y - my)).sum() / sxx if sxx > 0 else 0.0
    b = max(-slope, 0.0)
    a = my + b * mx
    return a, b, float((w * (y - a + b * x) ** 2).sum())


def pooled_curve(n: np.ndarray, f1: np.ndarray, weight: np.ndarray) -> tuple[float, float, float]:
    """(a, b, c) of ``F1 = a - b * n ** -c`` over every class's mean points: ``c`` from
    :data:`EXPONENTS` by the least weighted squared error."""
    best = None
    for c in EXPONENTS:
        a, b, error = _least_squares(n**-c, f1, weight)
        if best is None or error < best[3] - 1e-12:
            best = (a, b, float(c), error)
    return best[0], best[1], best[2]


@dataclass
class ClassCurve:
    """One class's curve and what it forecasts (None where too few to judge)."""

    name: str
    group: str  # head or tail
    n_train: int
    test_texts: int
    f1: float | None  # measured on test at every training text (the mean over seeds)
    sizes: list[int]  # its training sizes measured
    f1_at_sizes: list[float]  # the mean test F1 at each (over seeds)
    f1_spread: list[float]  # the std over seeds at each
    a: float | None = None
    b: float | None = None
    f1_at_2x: float | None = None
    f1_at_4x: float | None = None
    f1_at_2x_low: float | None = None
    f1_at_2x_high: float | None = None
    f1_at_4x_low: float | None = None
    f1_at_4x_high: float | None = None
    texts_for_target: int | str | None = None  # training texts to reach the target, in all
    gain_per_text: float | None = None  # the curve's slope at n_train: F1 one more text buys
    offset: float = 0.0  # anchored: the measured F1 at n_train less the curve's value there
    judged: bool = True

    def at(self, size: float, exponent: float) -> float | None:
        """The forecast F1 at ``size`` training texts (None where too few to judge)."""
        if not self.judged:
            return None
        return float(np.clip(self.offset + self.a - self.b * size**-exponent, 0.0, 1.0))

    def texts_for(self, target: float, exponent: float) -> int | str:
        """The training texts the class needs for its curve to reach ``target`` (its own count
        when its measured or fitted F1 already does), or :data:`NOT_REACHED`."""
        a, b, c, n = self.a + self.offset, self.b, exponent, self.n_train
        if (self.f1 is not None and self.f1 >= target) or a - b * n**-c >= target:
            return int(n)
        if a <= target or b <= 0:
            return NOT_REACHED
        needed = math.ceil((b / (a - target)) ** (1.0 / c) - 1e-9)  # 100.00000001 is 100
        return int(needed) if needed <= REACH * n else NOT_REACHED


@dataclass
class BudgetReport:
    """What ``budget`` measured and forecasts; :meth:`write` gives budget.json and budget.csv."""

    dataset: str
    model: str
    pooling: str
    method: str
    seeds: list[int]
    fractions: list[float]
    target_f1: float
    exponent: float  # the pooled curve's c
    pooled: dict  # the pooled curve's a and b
    classes: list[ClassCurve]  # head -> tail
    points: pd.DataFrame = field(repr=False)  # every measured point: class, fraction, seed,
    # n_train, f1
    seconds: float = 0.0

    @classmethod
    def from_json(cls, values: dict) -> BudgetReport:
        """A written ``budget.json`` read back."""
        known = {f.name for f in fields(ClassCurve)}
        return cls(
            **{k: v for k, v in values.items() if k not in ("classes", "points")},
            classes=[
                ClassCurve(**{k: v for k, v in c.items() if k in known}) for c in values["classes"]
            ],
            points=pd.DataFrame(values["points"]),
        )

    def frame(self) -> pd.DataFrame:
        """budget.csv: :data:`BUDGET_COLUMNS`, one line per class, head -> tail."""
        rows = [
            {
                "class": c.name,
                "n_train": c.n_train,
                "f1": _round(c.f1),
                "f1_at_2x": _round(c.f1_at_2x),
                "f1_at_4x": _round(c.f1_at_4x),
                "f1_at_2x_low": _round(c.f1_at_2x_low),
                "f1_at_2x_high": _round(c.f1_at_2x_high),
                "texts_for_target": c.texts_for_target if c.judged else TOO_FEW,
            }
            for c in self.classes
        ]
        return pd.DataFrame(rows, columns=BUDGET_COLUMNS)

    def to_json(self) -> dict:
        return {
            "dataset": self.dataset,
            "model": self.model,
            "pooling": self.pooling,
            "method": self.method,
            "seeds": self.seeds,
            "fractions": self.fractions,
            "target_f1": self.target_f1,
            "exponent": self.exponent,
            "pooled": self.pooled,
            "seconds": round(self.seconds, 2),
            "classes": [asdict(c) for c in self.classes],
            "points": self.points.to_dict(orient="records"),
        }

    def write(self, folder: str | Path) -> tuple[Path, Path]:
        return write_report_files(folder, BUDGET_FILE, self.to_json(), BUDGET_CSV, self.frame())

    def table(self) -> tuple[list[str], list[list]]:
        """The per-class table, head -> tail: header and rows (a terminal or the app)."""
        header = [
            "class",
            "group",
            "texts",
            "test F1",
            "at 2x (80% interval)",
            "at 4x",
            f"texts for F1 {self.target_f1:g}",
        ]
        rows = []
        for c in self.classes:
            if not c.judged:
                rows.append([c.name, c.group, c.n_train, _show(c.f1), TOO_FEW, "", ""])
                continue
            rows.append(
                [
                    c.name,
                    c.group,
                    c.n_train,
                    _show(c.f1),
                    f"{c.f1_at_2x:.2f} ({c.f1_at_2x_low:.2f}-{c.f1_at_2x_high:.2f})",
                    f"{c.f1_at_4x:.2f}",
                    target_text(c.texts_for_target, c.n_train),
                ]
            )
        return header, rows


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)


def _show(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def target_text(texts: int | str | None, n_train: int) -> str:
    """``"40 (+28)"``, ``"reached"`` or ``"not reached by 10x"``."""
    if texts is None:
        return ""
    if isinstance(texts, str):
        return texts
    return "reached" if texts <= n_train else f"{texts} (+{texts - n_train})"


def forecast(
    points: pd.DataFrame,
    classes: list[str],
    groups: dict[str, str],
    n_train: dict[str, int],
    test_texts: dict[str, int],
    target_f1: float,
    anchored: bool = True,
) -> tuple[list[ClassCurve], float, dict]:
    """Fit every class's curve to ``points`` (columns class, seed, n_train, f1) and forecast;
    returns the curves (in ``classes``' order), the pooled exponent and the pooled a, b.
    ``anchored``: a forecast is the class's measured F1 at its texts plus the curve's gain from
    there (never below what it has); else the curve's own value."""
    means = (
        points.dropna(subset=["f1"])
        .groupby(["class", "n_train"])["f1"]
        .agg(["mean", "std", "count"])
        .reset_index()
    )
    means["std"] = means["std"].fillna(0.0)
    judged = {
        name
        for name, group in means.groupby("class")
        if group["n_train"].nunique() >= MIN_SIZES and test_texts.get(name, 0) > 0
    }
    pooled_rows = means[means["class"].isin(judged)]
    if pooled_rows.empty:
        a0, b0, c = 0.0, 0.0, 0.5
    else:
        a0, b0, c = pooled_curve(
            pooled_rows["n_train"].to_numpy(float),
            pooled_rows["mean"].to_numpy(float),
            pooled_rows["count"].to_numpy(float),
        )
    fits = {}
    for name in judged:
        rows = means[means["class"] == name]
        fits[name] = _class_fit(
            rows["n_train"].to_numpy(float), rows["mean"].to_numpy(float), a0, b0, c
        )
    # the residual noise of a class's mean points, shrunk toward the pooled noise
    residuals = {name: fit[2] for name, fit in fits.items()}
    pooled_noise = float(np.sqrt(np.mean([r**2 for r in residuals.values()]))) if residuals else 0.0
    curves = []
    for name in classes:
        rows = means[means["class"] == name].sort_values("n_train")
        n = n_train[name]
        full = rows.loc[rows["n_train"] == n, "mean"]
        curve = ClassCurve(
            name=name,
            group=groups[name],
            n_train=n,
            test_texts=test_texts.get(name, 0),
            f1=float(full.iloc[0]) if len(full) else None,
            sizes=[int(s) for s in rows["n_train"]],
            f1_at_sizes=[round(float(v), 4) for v in rows["mean"]],
            f1_spread=[round(float(v), 4) for v in rows["std"]],
        )
        if name not in judged:
            curve.judged = False
            curves.append(curve)
            continue
        a, b, noise, inverse, k = fits[name]
        sigma = math.sqrt((k * noise**2 + SHRINK * pooled_noise**2) / (k + SHRINK))

        offset = (curve.f1 - (a - b * n**-c)) if anchored and curve.f1 is not None else 0.0
        curve.a, curve.b, curve.offset = a, b, offset

        def at(size, curve=curve):
            return curve.at(size, c)

        def band(size, inverse=inverse, sigma=sigma, at=at):
            x = np.array([1.0, -(size**-c)])
            spread = INTERVAL_Z * sigma * math.sqrt(1.0 + float(x @ inverse @ x))
            mid = at(size)
            return max(mid - spread, 0.0), min(mid + spread, 1.0)

        curve.f1_at_2x, curve.f1_at_4x = round(at(2 * n), 4), round(at(4 * n), 4)
        (low2, high2), (low4, high4) = band(2 * n), band(4 * n)
        curve.f1_at_2x_low, curve.f1_at_2x_high = round(low2, 4), round(high2, 4)
        curve.f1_at_4x_low, curve.f1_at_4x_high = round(low4, 4), round(high4, 4)
        curve.gain_per_text = round(b * c * n ** (-c - 1), 5)
        curve.texts_for_target = curve.texts_for(target_f1, c)
        curve.a, curve.b, curve.offset = round(a, 5), round(b, 5), round(offset, 5)
        curves.append(curve)
    return curves, c, {"a": round(a0, 5), "b": round(b0, 5)}


def _class_fit(n: np.ndarray, f1: np.ndarray, a0: float, b0: float, c: float):
    """(a, b, residual rms, inverse of the shrunk normal matrix, sizes) of one class's curve at
    the pooled exponent ``c``: least squares with the pooled (a0, b0) as :data:`SHRINK`
    pseudo-sizes' worth of prior (in F1 units at the class's own sizes)."""
    x = np.column_stack([np.ones_like(n), -(n**-c)])
    scale = np.array([1.0, float(np.mean(n**-c))])  # b's effect in F1 at these sizes
    prior = np.diag(SHRINK * scale**2)
    normal = x.T @ x + prior
    theta = np.linalg.solve(normal, x.T @ f1 + prior @ np.array([a0, b0]))
    a, b = float(theta[0]), float(theta[1])
    if b < 0:  # a falling curve: flat at its mean, shrunk
        b = 0.0
        a = float((f1.sum() + SHRINK * a0) / (len(f1) + SHRINK))
    residual = f1 - (a - b * n**-c)
    dof = max(len(f1) - 2, 1)
    return a, b, float(np.sqrt((residual**2).sum() / dof)), np.linalg.inv(normal), len(f1)


def read_budget(folder: str | Path) -> BudgetReport:
    """A written report's ``budget.json``, read back as the report it was written from."""
    return BudgetReport.from_json(
        json.loads((Path(folder) / BUDGET_FILE).read_text(encoding="utf-8"))
    )


def budget_line(budget: BudgetReport, literal=str) -> str | None:
    """Home's sentence: the tail classes where one more labelled text helps most (class names
    through ``literal``, e.g. the app's Markdown escaping), or None."""
    helped = most_helped(budget)
    if not helped:
        return None
    named = "; ".join(
        f"**{literal(c.name)}** ({c.n_train} texts, F1 {c.f1:.2f}: "
        f"+{c.gain_per_text:.3f} a text, {c.f1_at_2x:.2f} at twice as many)"
        for c in helped
    )
    return (
        f"Label budget: one more labelled text helps these tail classes most: {named}. "
        "Curves measured on the Data page (test F1 of "
        f"`{budget.method}` retrained on fractions of every class's texts)."
    )


def most_helped(budget: BudgetReport, count: int = 3) -> list[ClassCurve]:
    """The tail classes where one more labelled text helps most (the curve's slope at their
    count), below the target: Home's sentence."""
    tail = [
        c
        for c in budget.classes
        if c.group == "tail"
        and c.judged
        and c.gain_per_text
        and (c.f1 is None or c.f1 < budget.target_f1)
    ]
    return sorted(tail, key=lambda c: -c.gain_per_text)[:count]
