"""The quick compare's candidates and how one is chosen: every pooling of a plain-input head, and
k-fold cross-validation on train + dev where the dev split is too small to choose by."""

from __future__ import annotations

import json

import numpy as np
import pytest

from glee_core.core.events import CrossValidating, RunStarted
from glee_core.core.progress import fold
from glee_core.data.datasets import load_dataset
from glee_core.models.backbone import trained_pooling
from glee_core.models.config import TrainConfig
from glee_core.models.methods import get_method
from glee_core.runs.recommend import recommend
from glee_core.runs.recommend_text import recommendation_text
from glee_core.runs.record import CV_PROTOCOL
from glee_core.runs.store import RunStore
from glee_core.train.experiment import run_launch
from glee_core.train.launch import Launch
from glee_core.train.plan import plan_runs
from glee_core.train.selection import choosing_rows, fold_indices
from tests.conftest import TOY_WORDS, toy_rows
from tests.helpers.tiny_models import save_tiny_sentence_encoder

QUICK = TrainConfig(mode="frozen", epochs=3, batch_size=16)


@pytest.fixture(scope="module")
def sentence_encoder(tmp_path_factory):
    return save_tiny_sentence_encoder(tmp_path_factory.mktemp("st"), TOY_WORDS, seed=0)


def test_a_quick_compare_reads_both_poolings_and_chooses_by_cross_validation(
    sentence_encoder, toy_dataset, tmp_path
):
    """On a sentence encoder whose [CLS] state says nothing, the default quick compare trains
    each plain-input head on both poolings (the template head once, at [MASK]), cross-validates
    them on the toy set's small dev split, and recommends a mean-pooled head."""
    assert trained_pooling(str(sentence_encoder)) == "mean"
    assert toy_dataset.small_dev() is not None
    events = []
    methods = [get_method(m) for m in ("cls-tanh", "probe-balanced", "prompt")]
    runs = run_launch(
        Launch(
            toy_dataset,
            methods,
            [1],
            str(sentence_encoder),
            QUICK,
            RunStore(tmp_path / "runs"),
            progress=events.append,
        )
    )
    read = {(r.method, r.record.hyperparameters.pooling) for r in runs}
    assert read == {
        ("cls-tanh", "mean"),
        ("cls-tanh", "cls"),
        ("probe-balanced", "mean"),
        ("probe-balanced", "cls"),
        ("prompt", "cls"),
    }
    texts = len(toy_dataset.splits["train"]) + len(toy_dataset.splits["dev"])
    for run in runs:  # stored with each run: pooled out-of-fold scores and the folds'
        cv = RunStore(tmp_path / "runs").get(run.run_id).metrics.cv
        assert cv.folds == 5 and len(cv.fold_f1) == 5 and cv.texts == texts
        assert 0 <= cv.f1 <= 1 and all(0 <= f <= 1 for f in cv.fold_f1)
    by = {(r.method, r.record.hyperparameters.pooling): r.metrics.cv.f1 for r in runs}
    # the [CLS] state is one vector for every text: its heads predict one class
    assert by[("probe-balanced", "cls")] < 0.2 < by[("probe-balanced", "mean")]
    rec = recommend(runs)
    assert rec.basis == "cv" and rec.chosen.pooling == "mean" and rec.candidates == 5
    assert "5-fold cross-validation on train + dev" in recommendation_text(rec)
    # the progress: the heads, then the folds, never back, to the end
    fractions = [fold(events[:i]).fraction for i in range(1, len(events) + 1)]
    assert fractions == sorted(fractions)
    folds = [e for e in events if isinstance(e, CrossValidating)]
    assert [e.fold for e in folds] == [1, 2, 3, 4, 5, 5] and folds[-1].finished
    assert fold(events[: events.index(folds[0]) + 1]).describe() == (
        "choosing among 5 heads: 5-fold cross-validation on train + dev, fold 1/5"
    )
    started = next(e for e in events if isinstance(e, RunStarted))
    assert 0.5 < started.after < 1  # the folds are most of this launch's work


def test_pooling_auto_reads_what_the_checkpoint_was_trained_for_and_the_paper_keeps_cls(
    sentence_encoder, tiny_bert, toy_dataset
):
    def pooling(model, **config):
        return [
            job.config.pooling
            for job in plan_runs(
                toy_dataset, [get_method("cls-relu-pt-ln")], [1], str(model), TrainConfig(**config)
            )
        ]

    assert pooling(sentence_encoder) == ["mean"]  # fine-tuning a sentence encoder
    assert pooling(tiny_bert) == ["cls"]  # a plain masked LM
    assert pooling(sentence_encoder, recipe="paper") == ["cls"]  # reproduce: the paper's
    assert pooling(sentence_encoder, mode="frozen") == ["mean", "cls"]  # the compare: both
    assert pooling(sentence_encoder, pooling="all", recipe="paper") == ["mean", "cls"]
    assert pooling(tiny_bert, mode="frozen", pooling="mean") == ["mean"]
    # the paper recipe's [CLS] runs keep the ids runs had before pooling was a choice
    paper = plan_runs(
        toy_dataset, [get_method("cls-relu")], [1], str(tiny_bert), TrainConfig(recipe="paper")
    )[0]
    assert "pooling" not in paper.identity


def test_a_stored_run_without_cross_validation_gets_it_and_dev_or_cv_can_be_asked(
    tiny_bert, toy_dataset, tmp_path
):
    store = RunStore(tmp_path / "runs")

    def compare(**config):
        settings = TrainConfig(mode="frozen", epochs=2, pooling="cls", **config)
        return run_launch(
            Launch(toy_dataset, [get_method("cls-tanh")], [1], str(tiny_bert), settings, store)
        )[0]

    first = compare(choose_by="dev")
    assert first.metrics.cv is None  # asked to choose on dev: no folds
    again = compare()
    assert again.run_id == first.run_id  # the same run, loaded, now cross-validated
    assert again.metrics.cv is not None and again.metrics.f1 == first.metrics.f1
    three = compare(cv_folds=3)
    assert three.metrics.cv.folds == 3 and len(three.metrics.cv.fold_f1) == 3
    assert three.metrics.cv.protocol == CV_PROTOCOL
    # stored before the folds chose their epoch outside the held-out fold: run again
    metrics = three.path / "metrics.json"
    values = json.loads(metrics.read_text())
    del values["cv"]["protocol"]
    metrics.write_text(json.dumps(values))
    assert store.get(three.run_id).metrics.cv is None
    assert compare(cv_folds=3).metrics.cv.protocol == CV_PROTOCOL
    with pytest.raises(ValueError, match="another mode than --mode finetune"):
        TrainConfig(choose_by="cv")


def test_dev_is_small_for_a_long_tail_and_the_folds_keep_every_class():
    large = load_dataset("demo")
    assert "classes have fewer than 5 dev texts" in large.small_dev()
    labels = np.array([0] * 40 + [1] * 9 + [2] * 2)
    parts = fold_indices(labels, 5, seed=1)
    assert sorted(np.concatenate([held for _, held in parts]).tolist()) == list(range(51))
    assert all(set(labels[train]) >= {0, 1} for train, _ in parts)
    assert parts[0][1].tolist() == fold_indices(labels, 5, seed=1)[0][1].tolist()
    assert parts[0][1].tolist() != fold_indices(labels, 5, seed=2)[0][1].tolist()


def test_a_fold_chooses_its_epoch_on_the_dev_texts_outside_it_never_on_the_held_out_ones():
    """Each fold runs the run's protocol on what is left: the training texts outside the fold
    train, the dev texts outside it choose the epoch; the held-out fold only scores. Choosing on
    the held-out fold scored a trained head by its best of many looks at a few texts a class,
    and ranked it above a closed-form probe that test ranked higher."""
    labels = np.array([0] * 30 + [1] * 12 + [2] * 6 + [0] * 6 + [1] * 3 + [2] * 2)
    n_train = 48  # then 11 dev texts
    for fit_rows, held in fold_indices(labels, 5, seed=1):
        train, dev = choosing_rows(fit_rows, n_train, labels, seed=1)
        assert (train < n_train).all() and (dev >= n_train).all() and len(dev)
        assert not set(held) & (set(train) | set(dev))
        assert sorted([*train, *dev]) == sorted(fit_rows)
    # a fold left with no dev text: a stratified part of what is left chooses
    train, dev = choosing_rows(np.arange(n_train), n_train, labels, seed=1)
    assert len(dev) and not set(train) & set(dev)
    assert sorted([*train, *dev]) == list(range(n_train))
    assert set(labels[dev]) == {0, 1, 2}  # stratified


def test_a_dev_split_large_enough_chooses_by_dev(tmp_path):
    frame = toy_rows(scale=12).assign(
        split=lambda f: np.resize(["train", "train", "train", "dev", "test"], len(f))
    )
    path = tmp_path / "big.csv"
    frame.to_csv(path, index=False)
    dataset = load_dataset(f"csv:{path}")
    assert dataset.small_dev() is None
    assert not TrainConfig(mode="frozen").cross_validates(dataset)
    assert TrainConfig(mode="frozen", choose_by="cv").cross_validates(dataset)
