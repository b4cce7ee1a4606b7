"""The metrics equal scikit-learn's, where they can differ: absent and never-predicted classes; and
how sure dev is that one model scores above another (the paired bootstrap)."""

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, confusion_matrix, precision_recall_fscore_support

from glee_core.runs.metrics import bootstrap_lead, classification_metrics, macro_f1


@pytest.mark.parametrize("seed", range(6))
def test_metrics_equal_scikit_learns(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 9))
    n = int(rng.integers(1, 40))
    gold = rng.integers(0, k - 1, size=n)  # the last class never in gold
    pred = rng.integers(0, k, size=n)
    pred[pred == 0] = 1  # class 0 never predicted
    classes = [f"c{i}" for i in range(k)]
    head, tail = classes[:2], classes[2:]
    ours = classification_metrics(gold, pred, classes, head, tail)

    labels = list(range(k))
    p, r, f, s = precision_recall_fscore_support(gold, pred, labels=labels, zero_division=0)
    present = s > 0
    assert ours["acc"] == pytest.approx(accuracy_score(gold, pred))
    assert ours["f1"] == pytest.approx(f[present].mean())
    assert macro_f1(gold, pred, k) == pytest.approx(f[present].mean())
    assert ours["confusion_matrix"] == confusion_matrix(gold, pred, labels=labels).tolist()
    for i, c in enumerate(classes):
        row = ours["per_class"][c]
        assert (row["precision"], row["recall"], row["f1"], row["support"]) == pytest.approx(
            (p[i], r[i], f[i], s[i])
        )
    tail_present = [i for i in range(2, k) if present[i]]
    expected_tail = f[tail_present].mean() if tail_present else float("nan")
    assert ours["tail_f1"] == pytest.approx(expected_tail, nan_ok=True)


def test_a_label_out_of_range_is_an_error():
    with pytest.raises(ValueError, match="outside"):
        classification_metrics(np.array([0, 3]), np.array([0, 1]), ["a", "b"], ["a"], ["b"])


def test_how_sure_dev_is_that_one_model_beats_another():
    """The paired bootstrap's share of dev resamples where a scores above b: 1 for a model
    right wherever the other is wrong, a coin toss for the same predictions, and the two
    orders add up to one."""
    rng = np.random.default_rng(0)
    gold = rng.integers(0, 5, 200)
    wrong = (gold + 1) % 5
    assert bootstrap_lead(gold, gold, wrong, 5, "f1") == 1.0
    assert bootstrap_lead(gold, wrong, gold, 5, "acc") == 0.0
    assert bootstrap_lead(gold, gold, gold.copy(), 5, "f1") == 0.5
    a = np.where(rng.random(200) < 0.8, gold, wrong)
    b = np.where(rng.random(200) < 0.75, gold, wrong)
    ab, ba = bootstrap_lead(gold, a, b, 5, "f1"), bootstrap_lead(gold, b, a, 5, "f1")
    assert 0 < ab < 1 and ab + ba == pytest.approx(1.0)
