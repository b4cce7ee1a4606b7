"""The released code's strategy (bench/reference.py) against the fast path the trainer uses:
the same logits and loss per batch, and training that learns the same."""

import numpy as np
import pytest
import torch

from bench import reference
from glee_core.data.encoding import collate, encode
from glee_core.models.backbone import load_backbone
from glee_core.models.config import TrainConfig
from glee_core.models.losses import classification_loss
from glee_core.models.methods import get_method
from glee_core.models.model import build_model
from glee_core.models.scoring import Scoring, predict
from glee_core.train.optim import make_optimizer
from glee_core.train.setup import TrainingContext
from glee_core.train.step import TrainingState
from glee_core.train.training import train_and_evaluate


@pytest.fixture(scope="module")
def bert(tiny_bert):
    return load_backbone(str(tiny_bert))


@pytest.mark.parametrize("method", ["prompt", "prompt-ed", "cls-tanh", "cls-relu-eta-norm"])
def test_fast_and_reference_paths_give_the_same_logits_and_loss(bert, toy_dataset, method):
    """Dynamic padding + label-word rows vs pad-to-max-length + full-vocabulary logits."""
    spec = get_method(method)
    model = build_model(spec, bert, toy_dataset.classes, toy_dataset.verbalizer).eval()
    split = encode(
        toy_dataset.splits["test"], bert.tokenizer, spec.input_format, toy_dataset.template, 64
    )
    index = list(range(8))
    pad = bert.tokenizer.pad_token_id
    fast_batch, ref_batch = collate(split, index, pad), collate(split, index, pad, pad_to=64)
    assert fast_batch["input_ids"].shape[1] < ref_batch["input_ids"].shape[1] == 64
    with torch.no_grad():
        fast, _ = model(**{k: v for k, v in fast_batch.items() if k != "labels"}, calibrate=True)
        ref, _ = reference.full_vocabulary_logits(model, ref_batch)
    torch.testing.assert_close(fast, ref, rtol=1e-4, atol=1e-5)
    labels = fast_batch["labels"]
    torch.testing.assert_close(
        classification_loss(spec, fast, labels),
        classification_loss(spec, ref, labels),
        rtol=1e-4,
        atol=1e-6,
    )
    full = encode(
        toy_dataset.splits["test"], bert.tokenizer, spec.input_format, toy_dataset.template, 64
    )
    np.testing.assert_allclose(
        reference.predict(model, full, pad, torch.device("cpu"), 64),
        predict(model, full, torch.device("cpu"), Scoring(pad, precision="fp32"))[0],
        rtol=1e-4,
        atol=1e-5,
    )


def test_reference_strategy_trains_to_the_same_result(bert, toy_dataset):
    from dataclasses import replace

    spec = get_method("prompt")
    config = TrainConfig(
        epochs=2, batch_size=16, lr=1e-3, max_length=48, precision="fp32", recipe="paper"
    )
    fast = train_and_evaluate(TrainingContext(toy_dataset, bert), spec, config)
    torch.manual_seed(config.seed)
    own = replace(bert, model=__import__("copy").deepcopy(bert.model))
    model = build_model(spec, own, toy_dataset.classes, toy_dataset.verbalizer)
    splits = {
        name: encode(frame, bert.tokenizer, spec.input_format, toy_dataset.template, 48)
        for name, frame in toy_dataset.splits.items()
    }
    steps = -(-len(splits["train"]) // config.batch_size)
    params, optimizer, scheduler = make_optimizer(
        model, config, torch.device("cpu"), steps * config.epochs
    )
    state = TrainingState(
        model,
        spec,
        config,
        optimizer,
        scheduler,
        params,
        np.random.default_rng(config.seed),
        torch.device("cpu"),
        bert.tokenizer.pad_token_id,
    )
    losses = [reference.train_one_epoch(state, splits["train"], 48) for _ in range(2)]
    logits = reference.predict(model, splits["test"], state.pad_id, torch.device("cpu"), 48)
    ref_acc = float((logits.argmax(1) == splits["test"].labels).mean())
    # the batch order differs (length-grouped vs shuffled), the learning does not
    assert abs(fast.metrics.acc - ref_acc) < 0.25
    assert losses[-1] < losses[0]
