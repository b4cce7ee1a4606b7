"""Quick mode (frozen backbone, cached features)."""

import numpy as np
import pandas as pd
import pytest
import torch

from glee_core.core.devices import autocast, resolve_precision
from glee_core.data.encoding import collate, encode
from glee_core.models.backbone import load_backbone
from glee_core.models.config import TrainConfig
from glee_core.models.features import Encoder, FeatureInputs, cached_features
from glee_core.models.methods import get_method
from glee_core.runs.store import RunStore
from glee_core.serve.inference import score_texts
from glee_core.train.experiment import run_launch
from glee_core.train.launch import Launch


@pytest.fixture(scope="module")
def bert(tiny_bert):
    return load_backbone(str(tiny_bert))


def test_features_are_cached_once_and_equal_the_encoder_state(bert, toy_dataset, tmp_path):
    events = []
    first = cached_features(
        toy_dataset,
        Encoder(bert, torch.device("cpu"), tmp_path),
        FeatureInputs("prompt", 64),
        events.append,
    )
    assert events and events[-1].done == events[-1].total
    assert len(list(tmp_path.glob("prompt-*/*.npz"))) == 1  # one pass, one chunk
    events.clear()
    again = cached_features(
        toy_dataset,
        Encoder(bert, torch.device("cpu"), tmp_path),
        FeatureInputs("prompt", 64),
        events.append,
    )
    assert not events  # served from the cache
    np.testing.assert_array_equal(first["test"].hidden, again["test"].hidden)
    # the pass's measured rate travels with the cache (the estimates read it off frozen runs)
    assert first["train"].pass_tokens_per_second > 0
    assert again["train"].pass_tokens_per_second == pytest.approx(
        first["train"].pass_tokens_per_second
    )
    split = encode(toy_dataset.splits["test"], bert.tokenizer, "prompt", toy_dataset.template, 64)
    batch = collate(split, range(4), bert.tokenizer.pad_token_id)
    cpu = torch.device("cpu")
    with torch.no_grad(), autocast(cpu, resolve_precision("auto", cpu)):  # as the feature pass
        hidden = bert.model.base_model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
        ).last_hidden_state
    expected = hidden[torch.arange(4), batch["positions"]].float().numpy()
    np.testing.assert_allclose(first["test"].hidden[:4], expected, rtol=1e-4, atol=1e-5)


def test_a_truncated_cache_file_is_recomputed(bert, toy_dataset, tmp_path):
    cached_features(
        toy_dataset, Encoder(bert, torch.device("cpu"), tmp_path), FeatureInputs("plain", 64)
    )
    path = next(tmp_path.glob("plain-*/*.npz"))
    path.write_bytes(path.read_bytes()[:100])
    events = []
    again = cached_features(
        toy_dataset,
        Encoder(bert, torch.device("cpu"), tmp_path),
        FeatureInputs("plain", 64),
        events.append,
    )
    assert len(again["train"]) == len(toy_dataset.splits["train"])
    assert events and path.stat().st_size > 100  # encoded again, written whole


def test_quick_mode_trains_all_heads_without_touching_the_backbone(
    tiny_bert, toy_dataset, runs_dir
):
    from glee_core.models.scoring import get_backbone

    backbone = get_backbone(str(tiny_bert))
    before = {k: v.clone() for k, v in backbone.model.state_dict().items()}
    methods = [get_method(m) for m in ("cls-relu-pt-ln", "prompt", "prompt-ed", "cls-relu-prompt")]
    runs = run_launch(
        Launch(
            toy_dataset,
            methods,
            [1],
            str(tiny_bert),
            TrainConfig(epochs=3, batch_size=16, mode="frozen"),
            RunStore(runs_dir),
        )
    )
    after = backbone.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert all(r.record.mode == "frozen" for r in runs)
    assert runs[0].record.hyperparameters.lr == 1e-3  # quick mode's default
    assert len(list((runs_dir / ".features").glob("*-*/"))) == 2  # plain + prompt formats
    assert all(r.record.timing.feature_pass_tokens_per_second > 0 for r in runs)
    finetuned = run_launch(
        Launch(
            toy_dataset,
            methods[:1],
            [1],
            str(tiny_bert),
            TrainConfig(epochs=1, batch_size=16, recipe="paper"),
            RunStore(runs_dir),
        )
    )[0]
    assert finetuned.run_id != runs[0].run_id  # the mode is part of the configuration
    # a frozen run stores only the head, and scores text like it scored its test set
    scores = score_texts(runs[1], runs[1].predictions["text"].head(3).tolist())
    logits = runs[1].logits[:3]
    expected = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    np.testing.assert_allclose(scores.to_numpy(), expected, rtol=1e-4, atol=1e-5)


def test_limit_limits_the_feature_pass_too(bert, toy_dataset, tmp_path):
    """``--limit N``: only the first N training texts are encoded (dev and test in full); the
    full pass after it encodes only the texts the limited one did not, and its features equal
    a pass of its own."""
    events = []
    limited = cached_features(
        toy_dataset,
        Encoder(bert, torch.device("cpu"), tmp_path),
        FeatureInputs("plain", 64, limit=10),
        events.append,
    )
    sizes = {name: len(frame) for name, frame in toy_dataset.splits.items()}
    texts = {name: frame["text"].nunique() for name, frame in toy_dataset.splits.items()}
    assert events[-1].total <= 10 + sizes["dev"] + sizes["test"]
    assert len(limited["train"]) == 10 and len(limited["test"]) == sizes["test"]
    events.clear()
    full = cached_features(
        toy_dataset,
        Encoder(bert, torch.device("cpu"), tmp_path),
        FeatureInputs("plain", 64),
        events.append,
    )
    assert 0 < events[-1].total <= texts["train"]  # the rest of the training texts alone
    np.testing.assert_allclose(limited["train"].hidden, full["train"].hidden[:10], atol=1e-4)
    np.testing.assert_array_equal(limited["train"].labels, full["train"].labels[:10])
    alone = cached_features(
        toy_dataset,
        Encoder(bert, torch.device("cpu"), tmp_path / "alone"),
        FeatureInputs("plain", 64),
    )
    for name in sizes:
        np.testing.assert_allclose(full[name].hidden, alone[name].hidden, atol=1e-4)
        np.testing.assert_array_equal(full[name].labels, alone[name].labels)


def test_a_version_of_the_data_encodes_only_the_texts_it_adds(bert, toy_dataset, tmp_path):
    """Issue #80 item 5: features are kept by each text's content, so a ``+added-`` version
    encodes only its new texts (the cache grows by them alone), and a pool encoded for
    suggestions is not encoded again once its texts are labelled and added."""
    from dataclasses import replace

    from glee_core.pool.files import append_rows
    from glee_core.pool.suggest import pool_features

    cpu = torch.device("cpu")
    cached_features(toy_dataset, Encoder(bert, cpu, tmp_path), FeatureInputs("plain", 64))
    size = sum(p.stat().st_size for p in tmp_path.rglob("*.npz"))
    new = pd.DataFrame(
        {
            "text": [f"a text never seen {i}" for i in range(5)],
            "text_b": "",
            "label": [0, 1] * 2 + [0],
        }
    )
    pool_features(
        new.head(3),
        Encoder(bert, cpu, tmp_path).space("plain", 64, toy_dataset.template),
        Encoder(bert, cpu, tmp_path),
    )
    train, ending = append_rows(toy_dataset.splits["train"], new, "+added-")
    version = replace(
        toy_dataset, id=toy_dataset.id + ending, splits={**toy_dataset.splits, "train": train}
    )
    version._fingerprint = None
    events = []
    features = cached_features(
        version, Encoder(bert, cpu, tmp_path), FeatureInputs("plain", 64), events.append
    )
    assert events[-1].total == 2  # the two the pool did not hold
    grown = sum(p.stat().st_size for p in tmp_path.rglob("*.npz")) - size
    assert grown < 2 * 5 * 2 * bert.hidden_size * 4 + 4096  # 5 texts x 2 poolings, and headers
    alone = cached_features(
        version, Encoder(bert, cpu, tmp_path / "alone"), FeatureInputs("plain", 64)
    )
    np.testing.assert_allclose(features["train"].hidden, alone["train"].hidden, atol=1e-4)
    np.testing.assert_array_equal(features["train"].labels, alone["train"].labels)


PACK = ("cls-tanh", "prompt", "cls-relu-pt-ln-crt", "cls-relu-focal")  # plain and template
# inputs, class-balanced batches, a long-tail loss; dropout in every head


def test_heads_trained_together_get_what_each_gets_alone(bert, toy_dataset, tmp_path):
    """The quick compare trains every head and seed in one loop (one backward pass, one AdamW
    step): each head's own batches, dropout stream, gradient clipping and early stopping make it
    the same run, bit for bit, as training it alone, and as the one-run-at-a-time loop."""
    from glee_core.train.setup import TrainingContext
    from glee_core.train.training import prepare, train_and_evaluate, train_together

    specs = [get_method(m) for m in PACK for _ in (1, 2)]
    configs = [
        TrainConfig(epochs=6, batch_size=8, mode="frozen", seed=s, patience=2)
        for _ in PACK
        for s in (1, 2)
    ]
    together = train_together(
        TrainingContext(toy_dataset, bert, feature_cache=tmp_path), specs, configs
    )
    alone = [
        train_and_evaluate(TrainingContext(toy_dataset, bert, feature_cache=tmp_path), spec, config)
        for spec, config in zip(specs, configs, strict=True)
    ]
    assert len({r.timing.epochs_run for r in together}) > 1  # some stopped early
    for a, t in zip(alone, together, strict=True):
        np.testing.assert_array_equal(a.logits, t.logits)
        assert [h["dev_f1"] for h in a.history] == [h["dev_f1"] for h in t.history]
    # the loop that trains one run at a time (a trial of the learning-rate search)
    setup = prepare(
        TrainingContext(toy_dataset, bert, lambda event: None, tmp_path), specs[3], configs[3]
    )
    trial = setup.new_trial(configs[3].lr_grid[0])
    trial.advance(None)
    trial.model.load_state_dict(trial.selection.best_state)
    for name, value in trial.model.state_dict().items():
        torch.testing.assert_close(value, together[3].model.state_dict()[name])


def test_a_quick_compare_trains_its_heads_in_one_pack_and_stores_each(
    tiny_bert, toy_dataset, runs_dir
):
    from glee_core.core.events import FeaturePass, RunStarted
    from glee_core.core.progress import fold

    events = []
    methods = [get_method(m) for m in PACK + ("probe",)]
    config = TrainConfig(epochs=2, batch_size=16, mode="frozen", pooling="cls", choose_by="dev")

    def compare():  # the same launch, as a second click makes it
        store = RunStore(runs_dir)
        return run_launch(
            Launch(
                toy_dataset, methods, [1, 2], str(tiny_bert), config, store, progress=events.append
            )
        )

    runs = compare()
    started = [e for e in events if isinstance(e, RunStarted)]
    assert [e.together for e in started] == [8, 1, 1]  # the pack, then the closed-form probes
    assert fold(started[:1]).describe() == "runs 1-8/10: 8 heads trained together"
    passes = [e for e in events if isinstance(e, FeaturePass)]
    assert {(e.format, e.part, e.parts) for e in passes} == {("plain", 1, 2), ("prompt", 2, 2)}
    pack = events[: events.index(started[1])]  # the job's bar over the pack: never back
    fractions = [fold(pack[:i]).fraction for i in range(1, len(pack) + 1)]
    assert fractions == sorted(fractions) and fractions[-1] == pytest.approx(8 / 10)
    encoded = fold(pack[: pack.index(passes[-1]) + 1])
    assert 0.2 < encoded.fraction < 8 / 10
    assert (
        encoded.describe() == "runs 1-8/10: 8 heads trained together · encoding prompt "
        "input, pass 2/2"
    )
    assert [r.record.method.id for r in runs] == [m.id for m in methods for _ in (1, 2)]
    assert all(r.metrics is not None for r in runs)
    events.clear()
    again = compare()
    assert [r.run_id for r in again] == [r.run_id for r in runs]
    assert all(e.cached for e in events if isinstance(e, RunStarted))  # nothing trains again
    events.clear()
    run_launch(
        Launch(
            toy_dataset,
            methods[:2],
            [1],
            str(tiny_bert),
            config,
            RunStore(runs_dir),
            force=True,
            progress=events.append,
        )
    )
    started = [e for e in events if isinstance(e, RunStarted)]
    assert [(e.together, e.cached) for e in started] == [(2, False)]  # retrained once, together


def test_the_feature_cache_is_counted_against_a_jobs_disk_limit_before_it_is_written(
    tiny_bert, toy_dataset, tmp_path, monkeypatch
):
    from glee_core.core.files import DiskLimitReached

    monkeypatch.setenv("GLEE_QUOTA_DIR", str(tmp_path))
    monkeypatch.setenv("GLEE_QUOTA_MB", "0.0001")  # 104 bytes
    with pytest.raises(DiskLimitReached, match=r"the cached features needs .* of its 104 bytes"):
        run_launch(
            Launch(
                toy_dataset,
                [get_method("cls-tanh")],
                [1],
                str(tiny_bert),
                TrainConfig(mode="frozen", epochs=1, pooling="cls", choose_by="dev"),
                RunStore(tmp_path / "runs"),
            )
        )
    assert not list(tmp_path.rglob("*.npz"))
