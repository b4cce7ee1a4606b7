"""Task-adaptive pretraining (``python -m glee_core adapt``) on a tiny random BERT."""

from __future__ import annotations

import json

import pytest
import torch

from glee_core.cli import main
from glee_core.core.devices import resolve_precision
from glee_core.core.errors import GleeError
from glee_core.core.events import Note, TrainStep
from glee_core.core.progress import fold
from glee_core.models.backbone import load_backbone
from glee_core.models.options import AdaptOptions
from glee_core.train.adapt import adapt, training_texts
from glee_core.train.adapted import adapted_record

FAST = dict(epochs=4, batch_size=8, lr=2e-3, held_out=0.2, seed=3, max_length=32)


@pytest.fixture(scope="module")
def adapted(tiny_bert, toy_dataset, tmp_path_factory):
    out = tmp_path_factory.mktemp("adapt") / "bert-tapt"
    events = []
    record = adapt(toy_dataset, str(tiny_bert), AdaptOptions(out=str(out), **FAST), events.append)
    return out, record, events


def test_adapt_lowers_the_masked_lm_loss_and_writes_a_backbone_that_loads(adapted, tiny_bert):
    out, record, events = adapted
    assert record["held_out_after"]["mlm_loss"] < record["held_out_before"]["mlm_loss"]
    losses = record["train_loss_per_epoch"]
    assert len(losses) == 4 and losses[-1] < losses[0]
    assert record["whole_word_masking"] and record["mlm_head_pretrained"]
    assert record["precision"] == resolve_precision("auto", torch.device("cpu"))
    original = load_backbone(str(tiny_bert))
    assert record["trainable_parameters"] == sum(
        p.numel() for p in original.model.parameters()
    )  # all of it
    assert sum(isinstance(e, TrainStep) for e in events) == record["steps"]
    state = fold(events)  # what the Data page's progress bar shows
    assert state.fraction == 1.0 and "masked-LM training · epoch 4/4" in state.describe()
    assert fold(events[: len(events) // 2]).fraction == pytest.approx(0.5, abs=0.15)
    backbone = load_backbone(str(out))  # through the code users hit with --model DIR
    assert backbone.mlm_head_pretrained
    assert not torch.equal(backbone.mlm_dense.weight, original.mlm_dense.weight)  # head trained
    assert adapted_record(out)["adapted_from"]["name"] == str(tiny_bert)
    assert adapted_record(tiny_bert) is None


def test_adapt_batches_texts_of_like_length(toy_dataset, tiny_bert, tmp_path, monkeypatch):
    """A batch is padded to its longest text: adapt groups texts by length (as training does),
    so an epoch pads far less than random batches would, and the record counts the real tokens
    an epoch trains on (what a measured rate is in)."""
    import numpy as np

    from glee_core.train import adapt_objectives

    widths = []
    batch = adapt_objectives.Masker.batch

    def recording(self, examples):
        lengths = [len(e["input_ids"]) for e in examples]
        widths.append((max(lengths), lengths))
        return batch(self, examples)

    monkeypatch.setattr(adapt_objectives.Masker, "batch", recording)
    options = AdaptOptions(out=str(tmp_path / "one"), **{**FAST, "epochs": 1, "held_out": 0.0})
    record = adapt(toy_dataset, str(tiny_bert), options)
    trained = [lengths for _, lengths in widths]
    real = sum(map(sum, trained))
    padded = sum(width * len(lengths) for width, lengths in widths)
    assert record["tokens_per_epoch"] == real and len(widths) == record["steps"]
    flat = np.array([n for lengths in trained for n in lengths])
    shuffled = np.random.default_rng(0).permutation(flat)
    random_padded = sum(chunk.max() * len(chunk) for chunk in np.array_split(shuffled, len(widths)))
    assert padded - real < (random_padded - real) / 2


def test_adapt_trains_under_the_precision_a_gpu_gets(toy_dataset, tiny_bert, tmp_path):
    """``--precision auto`` is bf16 autocast on a GPU (fp32 weights and optimizer state); the
    same path on this CPU, asked for by name, still learns and says what it ran in."""
    record = adapt(
        toy_dataset,
        str(tiny_bert),
        AdaptOptions(out=str(tmp_path / "bf16"), **{**FAST, "precision": "bf16"}),
    )
    assert record["precision"] == "bf16" and record["options"]["precision"] == "bf16"
    assert record["held_out_after"]["mlm_loss"] < record["held_out_before"]["mlm_loss"]
    weights = load_backbone(str(tmp_path / "bf16")).model.state_dict().values()
    assert all(w.dtype == torch.float32 for w in weights if w.is_floating_point())
    with pytest.raises(GleeError, match="fp16 needs a CUDA GPU"):
        adapt(
            toy_dataset,
            str(tiny_bert),
            AdaptOptions(out=str(tmp_path / "fp16"), **{**FAST, "precision": "fp16"}),
        )
    assert not (tmp_path / "fp16").exists()


def test_adapt_reads_the_training_texts_only_plus_a_file(toy_dataset, tiny_bert, tmp_path):
    assert training_texts(toy_dataset) == toy_dataset.splits["train"]["text"].tolist()
    extra = tmp_path / "more.txt"
    extra.write_text("sports news today\n\nmoney report said\n", encoding="utf-8")
    record = adapt(
        toy_dataset,
        str(tiny_bert),
        AdaptOptions(out=str(tmp_path / "o"), texts=str(extra), **{**FAST, "epochs": 1}),
    )
    assert record["extra_texts"]["texts"] == 2 and record["extra_texts"]["file"] == "more.txt"
    assert record["dataset"]["training_texts"] == len(toy_dataset.splits["train"])


def test_a_killed_adaptation_resumes_and_ends_where_an_unbroken_one_does(
    toy_dataset, tiny_bert, tmp_path
):
    options = {**FAST, "epochs": 2, "held_out": 0.0}
    whole = adapt(toy_dataset, str(tiny_bert), AdaptOptions(out=str(tmp_path / "a"), **options))

    def kill_in_epoch_two(event):
        if isinstance(event, TrainStep) and event.epoch == 2:
            raise KeyboardInterrupt

    out = tmp_path / "b"
    with pytest.raises(KeyboardInterrupt):
        adapt(toy_dataset, str(tiny_bert), AdaptOptions(out=str(out), **options), kill_in_epoch_two)
    assert not out.exists() and (tmp_path / ".b.partial" / "state.json").is_file()
    events = []
    resumed = adapt(
        toy_dataset, str(tiny_bert), AdaptOptions(out=str(out), **options), events.append
    )
    assert any(isinstance(e, Note) and "resuming after epoch 1" in e.message for e in events)
    assert resumed["train_loss_per_epoch"] == pytest.approx(whole["train_loss_per_epoch"])
    a, b = load_backbone(str(tmp_path / "a")), load_backbone(str(out))
    assert all(
        torch.allclose(x, y, atol=1e-6)
        for x, y in zip(a.model.state_dict().values(), b.model.state_dict().values(), strict=True)
    )
    assert not (tmp_path / ".b.partial").exists()
    # other options do not resume someone else's partial run
    with pytest.raises(KeyboardInterrupt):
        adapt(
            toy_dataset,
            str(tiny_bert),
            AdaptOptions(out=str(tmp_path / "c"), **options),
            kill_in_epoch_two,
        )
    with pytest.raises(GleeError, match="partial adaptation of other texts"):
        adapt(
            toy_dataset,
            str(tiny_bert),
            AdaptOptions(out=str(tmp_path / "c"), **{**options, "lr": 1e-3}),
        )


def test_the_adapt_command_says_what_to_fix_and_what_it_wrote(toy_csv, tiny_bert, tmp_path, capsys):
    code = main(
        [
            "adapt",
            "--dataset",
            f"csv:{toy_csv}",
            "--model",
            str(tiny_bert),
            "--out",
            str(tmp_path / "x"),
            "--texts",
            str(tmp_path / "missing.txt"),
        ]
    )
    assert code == 2 and "missing.txt: no such file" in capsys.readouterr().err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    assert (
        main(
            [
                "adapt",
                "--dataset",
                f"csv:{toy_csv}",
                "--model",
                str(tiny_bert),
                "--out",
                str(tmp_path / "full"),
            ]
        )
        == 2
    )
    assert "not an empty folder" in capsys.readouterr().err
    assert (
        main(
            [
                "adapt",
                "--dataset",
                f"csv:{toy_csv}",
                "--model",
                str(tiny_bert),
                "--out",
                str(tmp_path / "ok"),
                "--epochs",
                "1",
                "--max-length",
                "32",
                "--whole-word",
                "no",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    assert f"--model {tmp_path / 'ok'}" in captured.err and "[MASK] top-1" in captured.err
    assert json.loads(captured.out.strip().splitlines()[-1])["whole_word_masking"] is False
    # SimCSE leaves the MLM head as it was: the command line says its own held-out loss
    simcse = ["--out", str(tmp_path / "simcse"), "--objective", "simcse"]
    base = ["adapt", "--dataset", f"csv:{toy_csv}", "--model", str(tiny_bert)]
    assert main([*base, *simcse]) == 0
    captured = capsys.readouterr()
    assert "held-out SimCSE loss" in captured.err and "[MASK] top-1" not in captured.err


@pytest.mark.slow
def test_the_tuning_bench_prints_every_mode_and_tapts_mask_accuracy(tiny_bert, tmp_path):
    from bench.tuning_modes import main as bench

    out = tmp_path / "table.md"
    assert (
        bench(
            [
                "--dataset",
                "demo",
                "--model",
                str(tiny_bert),
                "--modes",
                "frozen,lora,tapt-frozen",
                "--methods",
                "cls-tanh",
                "--seeds",
                "1",
                "--tapt-epochs",
                "1",
                "--max-length",
                "32",
                "--work",
                str(tmp_path / "w"),
                "--extra",
                "--epochs 1 --limit 40 --recipe paper",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    text = out.read_text()
    for mode in ("| frozen |", "| lora |", "| tapt-frozen |"):
        assert mode in text, mode
    assert "held-out [MASK] top-1" in text and "k |" in text  # trainable counts


def test_a_resumed_sweep_reports_what_its_runs_cost_when_they_trained(tmp_path):
    """The benches resume from their store; a run found there costs its child a few seconds,
    and the table must show what training it cost (or a dash when the sweep never saw it)."""
    from bench.recipe_sweep import cost_cells, measured_cost
    from glee_core.runs.store import RunStore

    store = RunStore(tmp_path / "runs")
    assert measured_cost(store, "a", 900.0, 4.2, trained_now=True) == (900.0, 4.2)
    assert measured_cost(store, "a", 11.0, 0.5, trained_now=False) == (900.0, 4.2)
    assert measured_cost(store, "b", 11.0, 0.5, trained_now=False) == (None, None)
    assert cost_cells([{"wall": 900.0, "peak": 4.2}, {"wall": None, "peak": None}]) == {
        "wall / run": "900 s",
        "peak": "4.20 GB",
    }
    assert cost_cells([{"wall": None, "peak": None}]) == {"wall / run": "–", "peak": "–"}


def test_the_sweeps_seeds_are_a_count_a_list_or_a_range():
    """``--seeds 3`` is seeds 1-3 (as every documented command means it); a list or a range
    adds seeds to a store that holds the others."""
    import argparse

    from bench.recipe_sweep import seed_list

    assert seed_list("3") == [1, 2, 3] and seed_list("1,2,3") == [1, 2, 3]
    assert seed_list("3-3") == [3] and seed_list("2-4") == [2, 3, 4] and seed_list("5,") == [5]
    for bad in ("x", "3-", "", "4-2"):
        with pytest.raises(argparse.ArgumentTypeError):
            seed_list(bad)


def test_simcse_adapts_the_encoder_alone_on_the_texts_and_a_pool(toy_dataset, tmp_path):
    """``adapt --objective simcse``: the training texts plus a pool CSV, each drawn toward
    its own dropout view; the held-out contrastive loss falls, the MLM head is as it came, the
    sentence encoder's pooling goes with the folder, and a fine-tune on it reads it."""
    from glee_core.models.backbone import trained_pooling
    from glee_core.models.config import TrainConfig
    from glee_core.models.methods import get_method
    from glee_core.runs.store import RunStore
    from glee_core.train.experiment import run_launch
    from glee_core.train.launch import Launch
    from tests.conftest import TOY_WORDS
    from tests.helpers.tiny_models import save_tiny_sentence_encoder

    encoder = save_tiny_sentence_encoder(tmp_path / "st", TOY_WORDS, seed=2)
    pool = tmp_path / "pool.csv"
    pool.write_text("text\n" + "".join(f"sports news {i} today\n" for i in range(20)))
    out = tmp_path / "simcse"
    record = adapt(
        toy_dataset,
        str(encoder),
        AdaptOptions(out=str(out), texts=str(pool), objective="simcse", **FAST),
    )
    assert record["objective"] == "simcse" and record["extra_texts"]["texts"] == 20
    assert record["held_out_after"]["simcse_loss"] < record["held_out_before"]["simcse_loss"]
    original, tuned = load_backbone(str(encoder)), load_backbone(str(out))
    assert torch.equal(tuned.mlm_dense.weight, original.mlm_dense.weight)  # the MLM head as it was
    assert tuned.mlm_head_pretrained == original.mlm_head_pretrained
    assert trained_pooling(str(out)) == trained_pooling(str(encoder)) == "mean"
    [run] = run_launch(
        Launch(
            toy_dataset,
            [get_method("cls-tanh")],
            [1],
            str(out),
            TrainConfig(mode="finetune", epochs=1, batch_size=16, lr=1e-3, lp_ft=False),
            RunStore(tmp_path / "runs"),
        )
    )
    assert run.record.hyperparameters.pooling == "mean"


def test_each_objective_starts_from_its_own_settings_and_a_flag_wins():
    """SimCSE starts from its paper's settings for BERT (1 epoch, 3e-5, 32 tokens), the masked
    LM from TAPT's (3 epochs, 1e-4, the dataset's length); a flag given wins either way."""
    simcse = AdaptOptions(out="x", objective="simcse")
    assert (simcse.epochs, simcse.lr, simcse.max_length) == (1, 3e-5, 32)
    mlm = AdaptOptions(out="x")
    assert (mlm.epochs, mlm.lr, mlm.max_length) == (3, 1e-4, None)
    given = AdaptOptions(out="x", objective="simcse", epochs=2, lr=1e-4, max_length=64)
    assert (given.epochs, given.lr, given.max_length) == (2, 1e-4, 64)
    with pytest.raises(GleeError, match="--objective must be mlm or simcse"):
        AdaptOptions(out="x", objective="contrastive")
