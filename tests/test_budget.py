"""The label budget (``python -m glee_core budget``): a known learning curve is recovered and
forecast, the measured subsets are nested and keep every class, the command writes budget.json
and budget.csv head -> tail, a class too small for a curve is "too few to judge", and bad input is
one error line."""

import json

import numpy as np
import pandas as pd
import pytest

from glee_core.budget.curves import nested_subsets
from glee_core.budget.options import BudgetOptions
from glee_core.budget.report import (
    BUDGET_COLUMNS,
    NOT_REACHED,
    TOO_FEW,
    BudgetReport,
    ClassCurve,
    budget_line,
    forecast,
    most_helped,
)
from glee_core.cli import main
from glee_core.core.errors import GleeError
from glee_core.data.datasets import load_dataset

FRACTIONS = (0.1, 0.2, 0.4, 0.7, 1.0)
TRUE_C = 0.5


def known_points(classes: dict[str, tuple[int, float, float]], noise: float = 0.005):
    """Points of ``F1 = a - b * n ** -0.5`` for classes ``{name: (texts, a, b)}``, 3 seeds."""
    rng = np.random.default_rng(0)
    rows = []
    for name, (n, a, b) in classes.items():
        for fraction in FRACTIONS:
            size = max(1, round(fraction * n))
            for seed in (1, 2, 3):
                f1 = np.clip(a - b * size**-TRUE_C + rng.normal(0, noise), 0, 1)
                rows.append(
                    {
                        "class": name,
                        "fraction": fraction,
                        "seed": seed,
                        "n_train": size,
                        "f1": float(f1),
                    }
                )
    return pd.DataFrame(rows)


def test_a_known_curve_is_recovered_and_forecast():
    classes = {
        "big": (400, 0.97, 0.5),
        "mid": (120, 0.92, 0.6),
        "small": (40, 0.9, 0.7),
        "smaller": (25, 0.88, 0.8),
        "rare": (12, 0.95, 0.9),
        "tiny": (2, 0.9, 0.5),
    }
    points = known_points(classes)
    curves, exponent, _ = forecast(
        points,
        list(classes),
        {c: "head" if c == "big" else "tail" for c in classes},
        {c: v[0] for c, v in classes.items()},
        {c: 10 for c in classes},
        target_f1=0.8,
    )
    assert exponent == pytest.approx(TRUE_C, abs=0.1)
    by_name = {c.name: c for c in curves}
    for name, (n, a, b) in classes.items():
        curve = by_name[name]
        if name == "tiny":  # two sizes (1 and 2 texts): no curve, said so, still listed
            assert not curve.judged and curve.f1_at_2x is None and curve.sizes == [1, 2]
            continue
        assert curve.f1_at_2x == pytest.approx(a - b * (2 * n) ** -TRUE_C, abs=0.03), name
        assert curve.f1_at_4x == pytest.approx(a - b * (4 * n) ** -TRUE_C, abs=0.04), name
        assert curve.f1 <= curve.f1_at_2x <= curve.f1_at_4x  # more texts never forecast less
        assert curve.f1_at_2x_low <= curve.f1_at_2x <= curve.f1_at_2x_high
    # "small" (0.79 at its 40 texts) reaches 0.8 at (0.7 / 0.1) ** 2 = 49 texts in truth; "big"
    # is there already
    assert by_name["small"].texts_for_target == pytest.approx(49, rel=0.2)
    assert by_name["big"].texts_for_target == 400
    frame = BudgetReport(
        dataset="d",
        model="m",
        pooling="mean",
        method="x",
        seeds=[1, 2, 3],
        fractions=list(FRACTIONS),
        target_f1=0.8,
        exponent=exponent,
        pooled={},
        classes=curves,
        points=points,
    ).frame()
    assert list(frame.columns) == BUDGET_COLUMNS and list(frame["class"]) == list(classes)
    assert frame.loc[frame["class"] == "tiny", "texts_for_target"].item() == TOO_FEW


def test_a_target_above_the_plateau_is_not_reached():
    def texts_for(a, b, f1, target):  # 20 texts, the exponent 0.5
        curve = ClassCurve("c", "tail", 20, 5, f1, [], [], [], a=a, b=b)
        return curve.texts_for(target, 0.5)

    assert texts_for(0.7, 0.5, 0.6, target=0.8) == NOT_REACHED
    assert texts_for(0.95, 0.5, 0.8, target=0.9) == 100
    assert texts_for(0.95, 2.0, 0.5, target=0.94) == NOT_REACHED  # past 10x its texts


def test_subsets_are_nested_stratified_and_keep_every_class():
    labels = np.array([0] * 50 + [1] * 9 + [2] * 1)
    subsets = nested_subsets(labels, FRACTIONS, seed=3)
    previous = set()
    for fraction in FRACTIONS:
        rows = subsets[fraction]
        assert previous <= set(rows)  # nested: the curve's steps add texts
        counts = np.bincount(labels[rows], minlength=3)
        assert counts[0] == round(fraction * 50) and counts[2] == 1  # every class kept
        previous = set(rows)
    assert len(subsets[1.0]) == 60
    other = nested_subsets(labels, FRACTIONS, seed=4)
    assert set(other[0.4]) != set(subsets[0.4])  # each seed draws its own


def test_budget_writes_its_files_head_to_tail(toy_csv, tiny_bert, tmp_path, capsys):
    out = tmp_path / "budget"
    code = main(
        [
            "budget",
            "--dataset",
            f"csv:{toy_csv}",
            "--model",
            str(tiny_bert),
            "--out",
            str(out),
            "--runs-dir",
            str(tmp_path / "runs"),
            "--seeds",
            "1,2",
            "--fractions",
            "0.25,0.5,1",
            "--method",
            "cls-relu-pt-ln",
        ]
    )
    assert code == 0
    captured = capsys.readouterr()
    dataset = load_dataset(f"csv:{toy_csv}")
    frame = pd.read_csv(out / "budget.csv")
    assert list(frame.columns) == BUDGET_COLUMNS
    assert list(frame["class"]) == dataset.classes  # head -> tail
    budget = json.loads((out / "budget.json").read_text())
    points = pd.DataFrame(budget["points"])
    assert len(points) == len(dataset.classes) * 3 * 2
    counts = dataset.class_counts("train")
    full = points[points["fraction"] == 1.0]
    assert all(full["n_train"] == [counts[c] for c in full["class"]])
    assert (points.groupby(["class", "seed"])["n_train"].is_monotonic_increasing).all()
    assert "| class | group | texts | test F1 |" in captured.out
    assert "label budget" in captured.err  # the progress bar
    # a written report reads back as the same table
    report = BudgetReport.from_json(budget)
    assert [row[0] for row in report.table()[1]] == dataset.classes


def test_home_names_the_tail_classes_one_more_text_helps_most():
    def curve(name, group, gain, f1, n, at_2x):
        return ClassCurve(
            name, group, n, 5, f1, [n], [f1], [0.0], gain_per_text=gain, f1_at_2x=at_2x
        )

    budget = BudgetReport(
        "d",
        "m",
        "mean",
        "cls-relu-pt-ln",
        [1],
        [1.0],
        0.8,
        0.5,
        {},
        [
            curve("head", "head", 0.01, 0.5, 100, 0.6),
            curve("a*b", "tail", 0.05, 0.4, 5, 0.55),
            curve("done", "tail", 0.09, 0.9, 5, 0.95),
            curve("small", "tail", 0.02, 0.6, 8, 0.64),
        ],
        pd.DataFrame(),
    )
    assert [c.name for c in most_helped(budget)] == ["a*b", "small"]  # tail, below target
    line = budget_line(budget, literal=lambda s: s.replace("*", "\\*"))
    assert "**a\\*b** (5 texts, F1 0.40: +0.050 a text, 0.55 at twice as many)" in line


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"fractions": "0.5"}, "two shares or more"),
        ({"fractions": "0.2,0.5"}, "the last 1"),
        ({"fractions": "0,1"}, "two shares or more"),
        ({"fractions": "a,1"}, "takes numbers"),
        ({"target_f1": 0.0}, "--target-f1"),
        ({"seeds": "x"}, "--seeds"),
    ],
)
def test_bad_budget_options_say_what_to_fix(kwargs, message):
    with pytest.raises(GleeError, match=message):
        BudgetOptions(out="x", **kwargs)


@pytest.mark.parametrize("n_classes", [2, 20, 120])
def test_the_budget_chart_names_every_class_at_2_to_120(n_classes):
    """A panel a class up to 30 classes, a row a class beyond: every class named (its texts,
    and "too few to judge" where it is), at the app's and the PDF's widths; the PNGs go to
    test-artifacts/gallery for a person to look at."""
    from glee_core.views.data_charts import BUDGET_PANELS, chart_label_budget
    from glee_core.views.report import chart_png
    from glee_core.views.style import APP_WIDTH, PDF_WIDTH
    from tests.test_chart_legibility import ARTIFACTS

    rng = np.random.default_rng(n_classes)
    classes = {
        f"class {i}" + " long name" * (i % 3): (
            max(2, int(400 * 0.93**i)),
            float(rng.uniform(0.6, 0.98)),
            float(rng.uniform(0.3, 0.9)),
        )
        for i in range(n_classes)
    }
    points = known_points(classes, noise=0.03)
    curves, exponent, pooled = forecast(
        points,
        list(classes),
        {c: "head" if i < 2 else "tail" for i, c in enumerate(classes)},
        {c: v[0] for c, v in classes.items()},
        {c: 5 for c in classes},
        0.8,
    )
    budget = BudgetReport(
        "synthetic",
        "m",
        "mean",
        "cls-relu-pt-ln",
        [1, 2, 3],
        list(FRACTIONS),
        0.8,
        exponent,
        pooled,
        curves,
        points,
    )
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for width in (APP_WIDTH, PDF_WIDTH):
        chart = chart_label_budget(budget, width)
        spec = json.dumps(chart.to_dict())
        for curve in curves:
            label = f"{curve.name} ({curve.n_train})" + (
                "" if curve.judged else " · too few to judge"
            )
            assert json.dumps(label)[1:-1] in spec
        png = chart_png(chart, scale=1.0)
        assert png[:4] == b"\x89PNG"
        (ARTIFACTS / f"label-budget-c{n_classes}-w{width}.png").write_bytes(png)
        if n_classes > BUDGET_PANELS:  # rows: every label drawn, none thinned out
            assert '"labelOverlap": false' in spec
