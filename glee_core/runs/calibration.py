"""Post-hoc calibration of a stored run: no retraining, the standard long-tail fixes.

Each method is a small pure function over arrays, with its reference:

* :func:`logit_adjustment` - Menon et al., "Long-tail learning via logit adjustment", ICLR 2021:
  ``logits - tau * log(prior)``, the prior being the training class frequencies;
* :func:`tau_norm` - Kang et al., "Decoupling representation and classifier for long-tailed
  recognition", ICLR 2020: the predictor's rows rescaled to ``w_c / ||w_c|| ** p``;
* :func:`eta_norm` - the paper's η-norm (Zhang et al. 2022), at any η: the whole logit of class
  ``c`` (bias included) divided by ``||w_c|| ** eta``.

A run stores what they need (``calibration.npz``: the uncalibrated logits and the classifier
inputs of every dev and test example, the predictor's ``W`` and ``b``): logit adjustment and
η-norm transform the stored logits exactly; τ-norm recomputes ``features @ W'.T + b``. The
strength is chosen on the **dev** split (macro-F1 or tail F1) and reported on **test**; it is
never tuned on test.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..core.errors import GleeError
from ..models.methods import eta_scale
from .metrics import classification_metrics, shot_f1
from .record import METRIC_KEYS
from .store import Run

GRID = np.round(np.linspace(0.0, 2.0, 21), 2)  # tau / p / eta, 0 = no calibration (but eta-norm)


def logit_adjustment(logits: np.ndarray, tau: float, prior: np.ndarray) -> np.ndarray:
    """Menon et al. 2021: ``logits - tau * log(prior)``."""
    return logits - tau * np.log(np.clip(prior, 1e-12, None))


def tau_norm(features: np.ndarray, weight: np.ndarray, bias: np.ndarray, p: float) -> np.ndarray:
    """Kang et al. 2020: the predictor's rows ``w_c / ||w_c|| ** p`` (p = 0: unchanged)."""
    norms = np.linalg.norm(weight, axis=1, keepdims=True).clip(1e-12)
    return features @ (weight / norms**p).T + bias


def eta_norm(logits: np.ndarray, weight: np.ndarray, eta: float) -> np.ndarray:
    """The paper's η-norm, at any η: the logit of class c (bias included) / ``||w_c|| ** eta``."""
    return logits / eta_scale(np.linalg.norm(weight, axis=1), eta)


CALIBRATIONS = ("la", "tau-norm", "eta-norm")
NAMES = {"la": "logit adjustment (τ)", "tau-norm": "τ-norm (p)", "eta-norm": "η-norm (η)"}


@dataclass
class Calibration:
    """One calibration of one run: the dev-chosen strength and test metrics before and after."""

    run_id: str
    method: str  # the run's method
    calibration: str  # la, tau-norm or eta-norm
    select: str  # the dev metric that chose the strength
    value: float  # the chosen tau / p / eta
    dev_curve: dict[float, float] = field(default_factory=dict)  # strength -> dev metric
    before: dict = field(default_factory=dict)  # test: acc, f1, head_f1, tail_f1, many/...
    after: dict = field(default_factory=dict)
    per_class_delta: dict[str, float] = field(default_factory=dict)  # test F1 after - before


class Calibrator:
    """A run's calibration data, ready to recompute test or dev metrics at any strength."""

    def __init__(self, run: Run):
        data = run.calibration_data
        if data is None:
            raise GleeError(
                f"{run.run_id} was stored before runs kept what calibration needs "
                "(calibration.npz); retrain it with --force to calibrate it"
            )
        self.run, self.data = run, data
        record = run.record.dataset
        self.classes, self.head, self.tail = (
            record.classes,
            record.head_classes,
            record.tail_classes,
        )
        counts = np.array([record.class_counts.get(c, 0) for c in self.classes], dtype=float)
        self.prior = counts / max(counts.sum(), 1.0)
        self.counts = record.class_counts

    def logits(self, split: str, calibration: str, value: float) -> np.ndarray:
        d = self.data
        raw = d[f"{split}_logits"]
        if calibration == "la":
            return logit_adjustment(raw, value, self.prior)
        if calibration == "eta-norm":
            return eta_norm(raw, d["weight"], value)
        if value == 0:  # τ-norm at p = 0 is the model itself
            return raw
        return tau_norm(d[f"{split}_features"].astype(np.float32), d["weight"], d["bias"], value)

    def metrics(self, split: str, calibration: str, value: float) -> dict:
        labels = self.data[f"{split}_labels"]
        pred = self.logits(split, calibration, value).argmax(1)
        out = classification_metrics(labels, pred, self.classes, self.head, self.tail)
        out.update({f"{k}_f1": v for k, v in shot_f1(out["per_class"], self.counts).items()})
        return out

    def raw(self, split: str) -> dict:
        """Metrics of the uncalibrated logits (``features @ W.T + b``)."""
        return self.metrics(split, "tau-norm", 0.0)


def calibrate(
    run: Run, calibration: str = "la", select: str = "f1", grid: np.ndarray = GRID
) -> Calibration:
    """Choose the strength on dev by ``select`` (``f1`` or ``tail_f1``), report test."""
    if calibration not in CALIBRATIONS:
        raise GleeError(f"--method must be one of {', '.join(CALIBRATIONS)}, got {calibration!r}")
    if select not in ("f1", "tail_f1"):
        raise GleeError(f"--select must be f1 or tail_f1, got {select!r}")
    calibrator = Calibrator(run)
    curve = {}
    for value in grid:
        score = calibrator.metrics("dev", calibration, float(value))[select]
        curve[float(value)] = float(score) if score == score else -1.0  # nan: no such class
    best = max(curve, key=lambda v: (curve[v], -v))  # ties: the mildest strength
    before, after = calibrator.raw("test"), calibrator.metrics("test", calibration, best)
    delta = {
        c: after["per_class"][c]["f1"] - before["per_class"][c]["f1"] for c in calibrator.classes
    }
    keys = (*METRIC_KEYS, "many_f1", "medium_f1", "few_f1")
    return Calibration(
        run.run_id,
        run.method,
        calibration,
        select,
        best,
        curve,
        {k: before.get(k) for k in keys},
        {k: after.get(k) for k in keys},
        delta,
    )


SHOWN = (
    ("acc", "Acc"),
    ("f1", "F1"),
    ("head_f1", "Head F1"),
    ("tail_f1", "Tail F1"),
    ("many_f1", "Many"),
    ("medium_f1", "Medium"),
    ("few_f1", "Few"),
)


def calibration_frame(before: dict, after: dict, label: str) -> pd.DataFrame:
    """Test %, the run's metrics ``before`` and ``after`` a calibration (``label`` names it): a
    row each, the :data:`SHOWN` metrics as columns (NaN where no test class is in a bucket)."""
    rows = [
        {"test": "before", **{t: before.get(k) for k, t in SHOWN}},
        {"test": f"after ({label})", **{t: after.get(k) for k, t in SHOWN}},
    ]
    return 100 * pd.DataFrame(rows).set_index("test").astype(float)


def _pct(value) -> str:
    return "–" if value is None or value != value else f"{100 * value:.1f}"


def calibration_text(result: Calibration) -> str:
    """Before/after on test, for one run (what ``calibrate --run`` prints)."""
    lines = [
        f"{result.run_id}: {NAMES[result.calibration]} = {result.value:g}, chosen on dev "
        f"{result.select} (test below; many/medium/few: > 100, 20-100, < 20 training "
        "examples; – where no test class falls in a bucket)",
        f"{'':8}" + "".join(f"{title:>9}" for _, title in SHOWN),
    ]
    for name, values in (("before", result.before), ("after", result.after)):
        lines.append(f"{name:8}" + "".join(f"{_pct(values.get(k)):>9}" for k, _ in SHOWN))
    return "\n".join(lines)


def calibration_table(results: list[Calibration]) -> list[list[str]]:
    """One row per run: method, seed-free run id, the strength, F1 and tail F1 before -> after."""
    return [
        [
            r.method,
            r.run_id,
            f"{r.value:g}",
            f"{_pct(r.before['f1'])} → {_pct(r.after['f1'])}",
            f"{_pct(r.before['tail_f1'])} → {_pct(r.after['tail_f1'])}",
            f"{_pct(r.before['few_f1'])} → {_pct(r.after['few_f1'])}",
        ]
        for r in results
    ]
