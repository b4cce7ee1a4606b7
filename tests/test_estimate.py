"""The Train page's time estimate: what it is based on, and that it grows with the work."""

import pytest

from glee_core.estimate import STARTUP_SECONDS, estimate_seconds


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
