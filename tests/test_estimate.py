"""The Train page's time estimate: what it is based on, and that it grows with the work."""

from types import SimpleNamespace

import pytest

from glee_core.estimate import HEAD_OVERHEAD_SECONDS, STARTUP_SECONDS, estimate_seconds


def test_estimate_grows_with_work_and_counts_the_start(toy_dataset):
    def seconds(**kw):
        args = dict(n_runs=2, epochs=3, max_length=64, model_name="m", parameters=22_700_000,
                    device="cpu", mode="finetune", runs=[])
        return estimate_seconds(toy_dataset, **{**args, **kw})

    base = seconds()
    assert base["basis"].endswith("no runs yet") and base["seconds"] > STARTUP_SECONDS
    assert seconds(epochs=6)["seconds"] > base["seconds"]
    assert seconds(n_runs=4)["seconds"] - STARTUP_SECONDS == pytest.approx(
        2 * (base["seconds"] - STARTUP_SECONDS))  # the start is paid once per launch
    assert seconds(limit=5)["seconds"] < base["seconds"]
    frozen = seconds(mode="frozen")
    assert frozen["basis"].startswith("frozen backbone") and frozen["seconds"] < base["seconds"]


def stored_run(mode: str, timing: dict, model: str = "m", max_length: int = 64):
    """What the estimate reads of a finished run: its record's backbone, mode, timing."""
    return SimpleNamespace(record=SimpleNamespace(
        model=SimpleNamespace(name=model), mode=mode, timing={"device": "cpu", **timing},
        hyperparameters=SimpleNamespace(max_length=max_length)))


def test_the_quick_compare_estimate_comes_from_measured_rates(toy_dataset):
    """Frozen runs in the store with this backbone and device give the feature pass's tokens/s
    and the heads' examples/s; twice the measured rates, less time; other backbones' and
    fine-tuned runs do not count."""
    def frozen(runs):
        return estimate_seconds(toy_dataset, n_runs=19, epochs=10, max_length=64,
                                model_name="m", parameters=22_700_000, device="cpu",
                                mode="frozen", runs=runs)

    typical = frozen([])
    assert "no frozen runs with this backbone yet" in typical["basis"]
    measured = [stored_run("frozen", {"feature_pass_tokens_per_second": 2000.0,
                                      "train_examples_per_second": 8000.0})]
    slow = frozen(measured)
    assert "feature pass 2,000 tokens/s and heads 8,000 examples/s" in slow["basis"]
    assert "median of 1 finished frozen run(s)" in slow["basis"]
    fast = frozen([stored_run("frozen", {"feature_pass_tokens_per_second": 4000.0,
                                         "train_examples_per_second": 16000.0})])
    fixed = STARTUP_SECONDS + 19 * HEAD_OVERHEAD_SECONDS  # what the rates do not scale
    assert fast["seconds"] - fixed == pytest.approx((slow["seconds"] - fixed) / 2)
    others = [stored_run("finetune", {"train_examples_per_second": 10.0}),
              stored_run("frozen", {"feature_pass_tokens_per_second": 1.0}, model="other")]
    assert frozen(others) == typical
