"""Post-hoc calibration of stored runs: each method against its formula, exact logits from the
stored data, the strength chosen on dev only, and old runs that lack the data."""

import numpy as np
import pytest

from glee_core.cli import main
from glee_core.core.errors import GleeError
from glee_core.models.config import TrainConfig
from glee_core.models.methods import get_method
from glee_core.runs.calibration import (
    GRID,
    Calibrator,
    calibrate,
    eta_norm,
    logit_adjustment,
    tau_norm,
)
from glee_core.runs.store import RunStore
from glee_core.train.experiment import run_launch
from glee_core.train.launch import Launch


def test_each_method_is_its_formula():
    rng = np.random.default_rng(0)
    x, w, b = rng.normal(size=(4, 3)), rng.normal(size=(2, 3)), rng.normal(size=2)
    prior = np.array([0.9, 0.1])
    raw = x @ w.T + b
    np.testing.assert_allclose(logit_adjustment(raw, 1.0, prior), raw - np.log(prior))
    norms = np.linalg.norm(w, axis=1)
    np.testing.assert_allclose(tau_norm(x, w, b, 1.0), x @ (w / norms[:, None]).T + b)
    np.testing.assert_allclose(tau_norm(x, w, b, 0.0), raw)
    np.testing.assert_allclose(eta_norm(raw, w, 1.1), raw / norms**1.1)


@pytest.fixture(scope="module")
def runs(tiny_bert, toy_dataset, tmp_path_factory):
    store = RunStore(tmp_path_factory.mktemp("calibration-runs"))
    methods = [get_method(m) for m in ("cls-relu", "prompt", "cls-tanh-eta-norm")]
    tuned = run_launch(
        Launch(
            toy_dataset,
            methods,
            [1],
            str(tiny_bert),
            TrainConfig(epochs=2, batch_size=16, lr=1e-3, recipe="paper"),
            store,
        )
    )
    frozen = run_launch(
        Launch(
            toy_dataset,
            [get_method("probe-balanced")],
            [1],
            str(tiny_bert),
            TrainConfig(mode="frozen", epochs=1),
            store,
        )
    )
    return {r.method: r for r in tuned + frozen}


def test_stored_data_recomputes_the_runs_logits(runs):
    for method in ("cls-relu", "prompt", "probe-balanced"):  # uncalibrated = what the run scored
        np.testing.assert_array_equal(
            Calibrator(runs[method]).logits("test", "la", 0.0), runs[method].logits
        )
        data = runs[method].calibration_data  # τ-norm recomputes from the inputs: W x + b
        # the run scored under bf16 autocast (8 bits of mantissa, rounded again as the sum
        # of h products grows): 0.015 apart on a logit of 0.14 on an AMX CPU
        np.testing.assert_allclose(
            data["test_features"] @ data["weight"].T + data["bias"],
            data["test_logits"],
            rtol=1e-2,
            atol=3e-2,
        )
    eta = runs["cls-tanh-eta-norm"]  # its stored logits are η-normalised (η = 1.1)
    np.testing.assert_allclose(
        Calibrator(eta).logits("test", "eta-norm", 1.1), eta.logits, rtol=1e-2, atol=1e-3
    )
    assert (Calibrator(eta).logits("test", "eta-norm", 1.1).argmax(1) == eta.logits.argmax(1)).all()


@pytest.mark.parametrize("method", ["la", "tau-norm", "eta-norm"])
def test_the_strength_is_chosen_on_dev_and_reported_on_test(runs, method):
    run = runs["cls-relu"]
    result = calibrate(run, method, "tail_f1")
    assert set(result.dev_curve) == set(GRID.tolist())
    assert result.dev_curve[result.value] == max(result.dev_curve.values())
    calibrator = Calibrator(run)
    dev = calibrator.metrics("dev", method, result.value)
    assert result.dev_curve[result.value] == pytest.approx(dev["tail_f1"])
    assert result.before["f1"] == pytest.approx(run.metrics.f1)  # uncalibrated = the run
    test = calibrator.metrics("test", method, result.value)
    assert result.after["tail_f1"] == pytest.approx(test["tail_f1"])
    assert set(result.per_class_delta) == set(run.classes)


def test_a_run_without_calibration_data_says_so(runs, tmp_path, capsys):
    run = runs["prompt"]
    (run.path / "calibration.npz").rename(tmp_path / "kept.npz")
    try:
        with pytest.raises(GleeError, match="retrain it with --force"):
            calibrate(run)
        assert main(["calibrate", "--all", "--runs-dir", str(run.path.parent)]) == 0
        out, err = capsys.readouterr()
        assert "skipped:" in err and run.run_id in err
        assert "cls-relu" in out and "→" in out  # the other runs are calibrated
    finally:
        (tmp_path / "kept.npz").rename(run.path / "calibration.npz")
    assert main(["calibrate", "--run", str(run.path), "--method", "tau-norm"]) == 0
    out = capsys.readouterr().out
    assert "before" in out and "after" in out and "Tail F1" in out and "Few" in out
