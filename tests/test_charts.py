"""Figure 4's data for a known input: densities per feature, head vs tail, and dead features."""

import numpy as np
import pytest

from glee_core.views.diagnostics_charts import (
    chart_feature_distributions,
    dead_feature_frame,
    feature_distribution_frame,
)
from glee_core.views.report import chart_png
from tests.helpers.runs import record_only_run


def fake_run(root, method, head_values, tail_values, tail="small"):
    """A run folder with only what Figure 4 reads: the record and features.npz."""
    config = {
        "run_id": method,
        "method": {"id": method},
        "seed": 1,
        "dataset": {
            "id": "toy",
            "class_counts": {"big": 60, tail: 4},
            "head_classes": ["big"],
            "tail_classes": [tail],
        },
        "model": {"name": "m"},
        "hyperparameters": {"epochs": 1, "batch_size": 2, "lr": 0.1, "max_length": 8},
    }
    run = record_only_run(
        root / method,
        config,
        {"acc": 1, "f1": 1, "head_f1": 1, "tail_f1": 1},
        ["big", tail],
        {"big": len(head_values), tail: len(tail_values)},
    )
    features = np.concatenate([head_values, tail_values]).astype(np.float16)
    labels = np.array([0] * len(head_values) + [1] * len(tail_values))
    np.savez(
        run.path / "features.npz", features=features, labels=labels, rows=np.arange(len(labels))
    )
    return run


@pytest.fixture
def runs(tmp_path):
    rng = np.random.default_rng(0)
    head = np.abs(rng.normal(size=(64, 10))) + 0.1  # every feature alive
    tail = np.abs(rng.normal(size=(2, 10))) + 0.1
    tail[:, :6] = 0.0  # ReLU zeroed 6 of the tail's 10 features
    relu = fake_run(tmp_path, "cls-relu", head, tail)
    normed = fake_run(
        tmp_path, "cls-relu-pt-ln", rng.normal(size=(64, 10)), rng.normal(size=(2, 10))
    )
    return [relu, normed]


def test_densities_integrate_to_one_whatever_the_class_size(runs):
    frame = feature_distribution_frame(runs, "big", "small")
    assert set(frame["feature"]) == {f"f{i}" for i in range(1, 11)}
    assert set(frame["method"]) == {"cls-relu", "cls-relu-pt-ln"}
    area = (
        (frame["density"] * (frame["bin_end"] - frame["bin_start"]))
        .groupby([frame["method"], frame["feature"], frame["group"]])
        .sum()
    )
    np.testing.assert_allclose(area.to_numpy(), 1.0, rtol=1e-6)  # 64 and 2 examples alike
    assert set(frame.loc[frame["group"] == "tail", "examples"]) == {2}


def test_dead_features_count_the_zeros_relu_leaves(runs):
    dead = dead_feature_frame(runs, "big", "small").set_index(["method", "group"])
    assert dead.loc[("cls-relu", "tail"), "dead features"] == 6
    assert dead.loc[("cls-relu", "tail"), "zero share"] == pytest.approx(0.6)
    assert dead.loc[("cls-relu", "head"), "dead features"] == 0
    assert dead.loc[("cls-relu-pt-ln", "tail"), "dead features"] == 0


def test_figure_4_renders_with_a_panel_per_method_and_feature(runs):
    chart = chart_feature_distributions(runs, "big", "small")
    spec = chart.to_dict()
    grid, bars = spec["vconcat"]  # the histograms right under the legend naming their colours
    assert "Dead features" in bars["title"]
    assert grid["facet"]["row"]["field"] == "method"
    assert grid["facet"]["column"]["field"] == "feature"
    assert chart_png(chart)[:4] == b"\x89PNG"


def test_norm_slope_per_method_and_the_evolution_heatmap(tiny_bert, toy_dataset, tmp_path):
    from glee_core.models.config import TrainConfig
    from glee_core.models.methods import get_method
    from glee_core.runs.store import RunStore
    from glee_core.train.experiment import run_launch
    from glee_core.train.launch import Launch
    from glee_core.views.norm_charts import (
        chart_norm_evolution,
        norm_count_frame,
        norm_evolution_frame,
    )

    runs = run_launch(
        Launch(
            toy_dataset,
            [get_method("cls-relu"), get_method("probe-balanced")],
            [1],
            str(tiny_bert),
            TrainConfig(mode="frozen", epochs=3),
            RunStore(tmp_path / "runs"),
        )
    )
    frame = norm_count_frame(runs)
    assert set(frame["method"]) == {"cls-relu", "probe-balanced"}
    assert frame.groupby("method")["relative norm"].mean().round(6).eq(1.0).all()
    # each method's panel is titled with its id and fitted slope
    assert all(
        panel == f"{method}: slope {slope:+.2f}"
        for panel, slope, method in zip(
            frame["panel"], frame["slope"], frame["method"], strict=True
        )
    )
    evolution = norm_evolution_frame(runs[0])
    assert evolution["step"].nunique() == len(runs[0].history) == 3  # one column per epoch
    assert set(evolution["class"]) == set(toy_dataset.classes)
    assert chart_png(chart_norm_evolution(runs[0]))[:4] == b"\x89PNG"


@pytest.mark.parametrize("tail", ["can't login", "x' + alert(1) + '", 'say "hi"'])
def test_class_names_reach_vega_as_data_never_as_an_expression(tmp_path, tail):
    """Figure 4's legend names its two classes through the data and the scale's domain: no
    expression carries a class name, and the PDF renderer draws it (a quote once broke it)."""
    rng = np.random.default_rng(0)
    run = fake_run(
        tmp_path,
        "cls-relu",
        np.abs(rng.normal(size=(8, 10))),
        np.abs(rng.normal(size=(3, 10))),
        tail,
    )
    chart = chart_feature_distributions([run], "big", tail)

    def walk(node, key=None):
        if isinstance(node, dict):
            for k, value in node.items():
                yield from walk(value, k)
        elif isinstance(node, list):
            for value in node:
                yield from walk(value, key)
        else:
            yield key, node

    values = list(walk(chart.to_dict()))
    expressions = [
        v for k, v in values if k in ("labelExpr", "expr", "calculate", "filter", "test")
    ]
    assert not [e for e in expressions if tail in str(e)]
    assert ("domain", f"tail: {tail}") in values  # the name travels as data
    assert chart_png(chart)[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_dead_feature_is_a_sentence_not_a_chart_of_zero_bars(runs):
    alive = [r for r in runs if r.method == "cls-relu-pt-ln"]
    spec = chart_feature_distributions(alive, "big", "small").to_dict()
    assert "vconcat" not in spec and spec["facet"]["row"]["field"] == "method"
    assert "No head shown has a dead feature among the first 10" in spec["title"]["subtitle"]
