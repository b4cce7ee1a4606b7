import numpy as np
import pytest
import torch

from glee_core.data.encoding import encode, length_grouped_batches
from glee_core.models.backbone import load_backbone
from glee_core.models.config import TrainConfig
from glee_core.models.methods import METHODS, get_method
from glee_core.train.setup import TrainingContext
from glee_core.train.training import train_and_evaluate

FAST = dict(epochs=4, batch_size=16, lr=3e-3, patience=10, log_every=1, recipe="paper")


@pytest.fixture(scope="module")
def bert(tiny_bert):
    return load_backbone(str(tiny_bert))


@pytest.mark.parametrize("method", [m for m in METHODS if METHODS[m].supports_finetune])
def test_every_method_trains_and_its_loss_falls(bert, toy_dataset, method):
    events = []
    config = TrainConfig(**FAST, seed=3)
    result = train_and_evaluate(
        TrainingContext(toy_dataset, bert, events.append), get_method(method), config
    )
    losses = [r["train_loss"] for r in result.history]
    assert losses[-1] < losses[0], losses
    assert all(0 <= result.metrics.value(k) <= 1 for k in ("acc", "f1"))
    assert len(result.predictions) == len(toy_dataset.splits["test"])
    assert result.logits.shape == (len(toy_dataset.splits["test"]), toy_dataset.num_classes)
    assert len(result.weight_norms) == toy_dataset.num_classes
    assert result.features["features"].shape[1] == bert.hidden_size
    assert [e.stage for e in events].count("eval") == len(result.history)
    assert any(e.loss is not None for e in events if e.stage == "train")


def test_training_does_not_touch_the_shared_backbone(bert, toy_dataset):
    before = {k: v.clone() for k, v in bert.model.state_dict().items()}
    train_and_evaluate(
        TrainingContext(toy_dataset, bert), get_method("prompt"), TrainConfig(**FAST)
    )
    after = bert.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_same_seed_same_result_and_the_best_dev_epoch_is_kept(bert, toy_dataset):
    config = TrainConfig(**FAST, seed=5)
    a = train_and_evaluate(TrainingContext(toy_dataset, bert), get_method("cls-relu"), config)
    b = train_and_evaluate(TrainingContext(toy_dataset, bert), get_method("cls-relu"), config)
    np.testing.assert_allclose(a.logits, b.logits, rtol=1e-5, atol=1e-5)
    best = max(a.history, key=lambda r: r["dev_f1"])
    assert a.metrics.best_dev_f1 == best["dev_f1"]


def test_selection_on_dev_accuracy_keeps_the_best_accuracy_epoch(bert, toy_dataset):
    config = TrainConfig(**FAST, seed=5, select_metric="acc")
    result = train_and_evaluate(TrainingContext(toy_dataset, bert), get_method("cls-relu"), config)
    best = max(result.history, key=lambda r: r["dev_acc"])
    assert result.metrics.select_metric == "acc"
    assert (result.metrics.best_epoch, result.metrics.best_dev_acc) == (
        best["epoch"],
        best["dev_acc"],
    )
    # only a non-default choice enters the run's identity: older run ids stay valid
    assert "select_metric" in config.identity()
    assert "select_metric" not in TrainConfig().identity()


def test_early_stopping_after_patience_epochs_without_gain(bert, toy_dataset):
    config = TrainConfig(epochs=10, batch_size=16, lr=0.0, patience=2, recipe="paper")
    result = train_and_evaluate(TrainingContext(toy_dataset, bert), get_method("cls-tanh"), config)
    assert len(result.history) == 3  # lr 0: no gain after epoch 1, stop after two more


def test_length_grouped_batches_cover_every_example_once():
    lengths = np.random.default_rng(0).integers(5, 200, size=1000)
    batches = length_grouped_batches(lengths, 32, np.random.default_rng(1))
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(1000))
    spread = np.mean([lengths[b].max() - lengths[b].min() for b in batches])
    assert spread < 30  # grouped: far less than the 195 of random batches


def test_prompt_truncation_keeps_the_template_and_mask(bert, toy_dataset):
    frame = toy_dataset.splits["train"].head(3).copy()
    frame["text"] = frame["text"] + " the" * 300
    split = encode(frame, bert.tokenizer, "prompt", toy_dataset.template, 32)
    mask = bert.tokenizer.mask_token_id
    for ids, pos in zip(split.input_ids, split.positions, strict=True):
        assert len(ids) == 32 and ids[pos] == mask
        assert ids[-1] == bert.tokenizer.sep_token_id


def test_dev_scored_every_n_steps_stops_after_patience_times_an_epoch_of_steps(bert, toy_dataset):
    """The released scripts' protocol: dev every N optimizer steps, the best step's weights,
    stop once patience x steps-per-epoch steps brought no gain."""
    config = TrainConfig(
        epochs=10, batch_size=16, lr=0.0, patience=1, eval_every_steps=3, recipe="paper"
    )
    steps_per_epoch = -(-len(toy_dataset.splits["train"]) // 16)
    result = train_and_evaluate(TrainingContext(toy_dataset, bert), get_method("cls-tanh"), config)
    steps = [r["step"] for r in result.history]
    assert steps == list(range(3, 3 * len(steps) + 1, 3))  # every third step
    # lr 0: the first evaluation stays the best; training stops at the first evaluation at
    # least one epoch of steps after it
    assert result.metrics.best_step == 3
    assert steps[-1] - 3 >= steps_per_epoch > steps[-2] - 3
    assert "eval_every_steps" in config.identity()
    assert "eval_every_steps" not in TrainConfig().identity()  # older run ids stay valid
    assert "dev every 3 steps" in config.protocol()


@pytest.mark.parametrize("method", ["prompt", "cls-relu-pt-ln-cb"])
def test_micro_batches_accumulate_the_gradient_of_the_whole_batch(tiny_bert, toy_dataset, method):
    """``--micro-batch-size``: the pieces' gradients add up to the whole batch's (dropout off to
    compare), for a plain mean loss and for the class-balanced weighted mean."""
    from dataclasses import replace

    from glee_core.models.model import build_model
    from glee_core.train.optim import make_optimizer
    from glee_core.train.step import TrainingState, batch_loss

    bert = load_backbone(str(tiny_bert))
    spec = get_method(method)
    split = encode(
        toy_dataset.splits["train"], bert.tokenizer, spec.input_format, toy_dataset.template, 48
    )
    index = np.arange(13)
    counts = torch.tensor(toy_dataset.class_counts().to_numpy())
    grads = []
    for micro in (None, 4):
        torch.manual_seed(0)
        model = build_model(spec, bert, toy_dataset.classes, toy_dataset.verbalizer)
        model.eval()  # no dropout: the two must see the same function
        config = TrainConfig(
            batch_size=13, precision="fp32", micro_batch_size=micro, lr=1e-5, recipe="paper"
        )
        params, optimizer, scheduler = make_optimizer(model, config, torch.device("cpu"), 1)
        state = TrainingState(
            model,
            spec,
            config,
            optimizer,
            scheduler,
            params,
            np.random.default_rng(0),
            torch.device("cpu"),
            bert.tokenizer.pad_token_id,
            class_counts=counts,
        )
        optimizer.zero_grad()
        loss = batch_loss(state, split, index, "fp32")
        if loss.requires_grad:
            loss.backward()
        grads.append(([p.grad.clone() for p in params if p.grad is not None], float(loss.detach())))
    (whole, whole_loss), (pieces, pieces_loss) = grads
    assert pieces_loss == pytest.approx(whole_loss, rel=1e-5)
    assert len(whole) == len(pieces)
    for a, b in zip(whole, pieces, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    assert replace(TrainConfig(), micro_batch_size=8).identity() == TrainConfig().identity()
