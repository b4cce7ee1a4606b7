"""The fine-tuning recipes: ``paper`` exactly as before, ``practical`` with its switches (a
learning rate searched on dev, LP-FT, a head learning rate, layer-wise decay, a floor on steps),
each tried on its own on a tiny random BERT."""

from dataclasses import replace

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from glee_core.core.errors import GleeError
from glee_core.data.datasets import load_dataset
from glee_core.models.backbone import load_backbone
from glee_core.models.config import TrainConfig
from glee_core.models.methods import get_method
from glee_core.runs.record import RunRecord
from glee_core.runs.store import RunStore
from glee_core.train.experiment import run_launch
from glee_core.train.launch import Launch
from glee_core.train.optim import make_optimizer
from glee_core.train.plan import plan_runs
from glee_core.train.setup import TrainingContext
from glee_core.train.training import prepare, train_and_evaluate


@pytest.fixture(scope="module")
def bert(tiny_bert):
    return load_backbone(str(tiny_bert))


def test_the_paper_recipe_trains_exactly_as_before(bert, toy_dataset):
    """Losses, dev scores, test F1 and logits of the trainer before the recipes existed (the
    commit before them, same fixture, same seed): the paper's recipe did not move. In fp32, as
    they were taken: ``auto`` trains in bf16 on a CPU that has it, with other losses."""
    pinned = {
        "cls-relu-pt-ln": (
            [1.4517017092023576, 1.1054491315569197, 0.7375822067260742],
            [0.26051282051282054, 0.3336898395721925, 0.3336898395721925],
            0.33306982872200264,
            [2.2986533641815186, -0.15064623951911926, -0.14075513184070587],
        ),
        "prompt": (
            [1.3909593309674944, 1.3552660260881697, 1.3010550907679967],
            [0.13333333333333333] * 3,
            0.13333333333333333,
            [1.135206699371338, 0.832478404045105, -0.30721163749694824],
        ),
    }
    config = TrainConfig(
        epochs=3, batch_size=8, lr=1e-2, patience=5, recipe="paper", seed=2, precision="fp32"
    )
    for method, (losses, dev, f1, logits) in pinned.items():
        result = train_and_evaluate(TrainingContext(toy_dataset, bert), get_method(method), config)
        assert [r["train_loss"] for r in result.history] == pytest.approx(losses, rel=1e-4)
        assert [r["dev_f1"] for r in result.history] == pytest.approx(dev)
        assert result.metrics.f1 == pytest.approx(f1)
        assert result.logits[0, :3].tolist() == pytest.approx(logits, rel=1e-3, abs=1e-4)
        assert result.tuning.lr == 1e-2 and result.tuning.lr_search is None  # no search


def test_the_paper_recipe_keeps_the_run_ids_and_reproduce_uses_it():
    """The run id of a paper-recipe run is what it was before the recipes (the offline MiniLM's
    fingerprint enters it); the practical recipe is another run."""
    demo = load_dataset("demo")
    config = TrainConfig(limit=32, epochs=1)
    paper = plan_runs(demo, [get_method("cls-tanh")], [1], "auto", replace(config, recipe="paper"))
    assert paper[0].run_id == "demo-cls-tanh-s1-261e8edc75"
    practical = plan_runs(demo, [get_method("cls-tanh")], [1], "auto", config)
    assert practical[0].run_id != paper[0].run_id
    from glee_core.train.reproduce import get_table, protocol_config

    assert protocol_config(get_table(2), "r52", "prompt").resolved(256, 32).recipe == "paper"


def test_recipes_fill_what_the_user_left_unset():
    practical = TrainConfig().resolved(128, None)
    assert practical.lr is None and practical.lr_grid == (2e-5, 5e-5, 1e-4, 2e-4)
    assert practical.lp_ft and practical.min_steps == 300 and practical.epochs == 10
    assert "practical recipe" in practical.protocol()
    assert "lr chosen on dev from 2e-05,5e-05,0.0001,0.0002" in practical.protocol()
    paper = TrainConfig(recipe="paper").resolved(128, None)
    assert (paper.lr, paper.lr_candidates, paper.lp_ft, paper.min_steps) == (
        1e-5,
        None,
        False,
        None,
    )
    assert paper.protocol() == "paper recipe · 10 ep · bs 32 · lr 1e-05 · len 128"
    # --lr turns the search off; given epochs are exact (no floor); each switch on its own
    fixed = TrainConfig(lr=1e-4, epochs=3).resolved(128, None)
    assert fixed.lr_grid == (1e-4,) and fixed.min_steps is None and fixed.lp_ft
    assert TrainConfig(recipe="paper", lp_ft="yes").resolved(128, None).lp_ft
    assert TrainConfig(recipe="paper", lr_candidates="1e-4, 3e-5").resolved(128, None).lr_grid == (
        3e-5,
        1e-4,
    )
    # quick mode keeps its own protocol: its run ids do not move with the recipe
    frozen = TrainConfig(mode="frozen").resolved(128, None)
    assert frozen.recipe == "paper" and frozen.lr == 1e-3 and "recipe" not in frozen.protocol()
    assert (
        frozen.identity()
        == TrainConfig(mode="frozen", recipe="paper").resolved(128, None).identity()
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(lr=1e-4, lr_candidates="1e-4,2e-4"), "not both"),
        (dict(lr_candidates="1e-4"), "two or more"),
        (dict(lr_candidates="a,b"), "comma-separated numbers"),
        (dict(mode="frozen", head_lr=1e-3), "--head-lr applies to fine-tuning"),
        (dict(mode="frozen", lp_ft=True), "--lp-ft yes applies to fine-tuning"),
        (dict(lp_ft="maybe"), "--lp-ft must be yes or no"),
        (dict(layer_decay=1.5), "--layer-decay must be at most 1, got 1.5"),
        (dict(layer_decay=0.0), "--layer-decay must be above 0, got 0.0"),
        (dict(supcon=0.0), "--supcon must be above 0"),
        (dict(epochs=0), "--epochs must be at least 1, got 0"),
        (dict(recipe="fast"), "--recipe must be one of practical, paper"),
    ],
)
def test_bad_recipe_switches_say_what_to_fix(kwargs, message):
    with pytest.raises(GleeError, match=message):
        TrainConfig(**kwargs)


def test_old_records_read_back_as_the_paper_recipe(bert, toy_dataset, runs_dir):
    """A run stored before the recipes has no recipe fields: it reads back as the paper's."""
    run = run_launch(
        Launch(
            toy_dataset,
            [get_method("cls-tanh")],
            [1],
            bert.name,
            TrainConfig(epochs=1, batch_size=16, recipe="paper"),
            RunStore(runs_dir),
        )
    )[0]
    stored = run.record.to_dict()
    assert "recipe" not in stored["hyperparameters"]  # paper runs' identity is as before
    again = RunRecord.from_dict(stored).hyperparameters
    assert again.recipe == "paper" and again.lp_ft is False and "paper recipe" in again.protocol()


def optimizer_rates(model, config, lr):
    _, optimizer, _ = make_optimizer(model, config, torch.device("cpu"), 10, lr)
    return {id(p): group["initial_lr"] for group in optimizer.param_groups for p in group["params"]}


@pytest.mark.parametrize("method", ["cls-relu-pt-ln", "prompt"])
def test_parameter_groups_carry_the_rates_asked_for(bert, toy_dataset, method):
    """The head at --head-lr; encoder layer l of L at lr x decay^(L+1-l); the embeddings (and
    the tied label-word rows, which are the embeddings) at lr x decay^(L+1)."""
    config = TrainConfig(lr=1e-4, head_lr=1e-3, layer_decay=0.5).resolved(32, 16)
    setup = prepare(TrainingContext(toy_dataset, bert, lambda e: None), get_method(method), config)
    model = setup.new_model()
    rates = optimizer_rates(model, config, 1e-4)
    encoder = model.mlm.base_model
    depth = encoder.config.num_hidden_layers
    for name, p in encoder.named_parameters():
        if not p.requires_grad:
            continue
        if "embeddings" in name:
            expected = 1e-4 * 0.5 ** (depth + 1)
        else:
            layer = int(name.split("layer.")[1].split(".")[0])
            expected = 1e-4 * 0.5 ** (depth - layer)
        assert rates[id(p)] == pytest.approx(expected), name
    head = [
        p
        for p in model.head.parameters()
        if p.requires_grad and id(p) not in {id(q) for q in encoder.parameters()}
    ]
    assert head and all(rates[id(p)] == pytest.approx(1e-3) for p in head)
    if method == "prompt":  # the MLM head's transform is the prompt head's own part
        assert rates[id(model.head.dense.weight)] == pytest.approx(1e-3)
    plain = optimizer_rates(model, TrainConfig(lr=1e-4).resolved(32, 16), 1e-4)
    assert set(plain.values()) == {1e-4}  # without the switches: one rate, as before


def lp_ft_store(bert, toy_dataset, runs_dir, method, lr=3e-3):
    config = TrainConfig(lr=lr, lp_ft=True, epochs=1, batch_size=16, recipe="paper")
    return run_launch(
        Launch(toy_dataset, [get_method(method)], [1], bert.name, config, RunStore(runs_dir))
    )[0]


@pytest.mark.parametrize("method", ["cls-relu-pt-ln", "prompt-ed", "prompt"])
def test_lp_ft_starts_from_the_head_fitted_on_frozen_features(bert, toy_dataset, runs_dir, method):
    run = lp_ft_store(bert, toy_dataset, runs_dir, method)
    store = RunStore(runs_dir)
    stage = store.get(run.record.tuning.lp_ft_from)
    assert stage.record.mode == "frozen" and stage.record.method.id == method
    assert "LP-FT" in run.record.protocol
    fitted = load_file(str(stage.path / "model.safetensors"))
    setup = prepare(
        TrainingContext(toy_dataset, bert, lambda e: None),
        get_method(method),
        run.record.hyperparameters,
        init_head=fitted,
    )
    head = setup.new_model().head.state_dict()  # the weights before the first step
    if method == "prompt":  # tied rows stay the embeddings; transform and label bias warm
        shared = [k for k in fitted if k.startswith(("dense.", "layer_norm."))]
        ids = head["label_token_ids"]
        torch.testing.assert_close(head["decoder.bias"][ids], fitted["decoupled_bias"])
    else:
        shared = list(fitted)
    assert shared
    for key in shared:
        torch.testing.assert_close(head[key], fitted[key], rtol=0, atol=0)
    # a second fine-tuning run of the same method, data and seed re-uses the stored stage
    other = lp_ft_store(bert, toy_dataset, runs_dir, method, lr=1e-3)
    assert other.record.tuning.lp_ft_from == stage.run_id
    assert sum(r.record.mode == "frozen" for r in store.runs()) == 1


def search_config(**kw):
    return TrainConfig(
        **{
            "lr_candidates": "1e-5,1e-2",
            "epochs": 4,
            "batch_size": 16,
            "patience": 8,
            "recipe": "paper",
            "seed": 4,
            **kw,
        }
    )


def test_the_search_keeps_the_better_rate_and_continues_it(bert, toy_dataset):
    result = train_and_evaluate(
        TrainingContext(toy_dataset, bert), get_method("cls-relu-pt-ln"), search_config()
    )
    (round_,) = result.tuning.lr_search  # two candidates: one round
    kept = result.tuning.lr
    assert set(round_.dev) == {"1e-05", "0.01"} and round_.kept == [f"{kept:g}"]
    assert round_.dev[f"{kept:g}"] == max(round_.dev.values())
    # the kept trial went on from where its round ended: one history, every epoch
    assert [r["epoch"] for r in result.history] == list(range(1, 5))
    assert result.metrics.best_dev_f1 >= round_.dev[f"{kept:g}"]


def test_the_search_halves_an_odd_number_of_candidates(bert, toy_dataset):
    """Three rates: round 1 keeps the better two, round 2 the better one, which trains on."""
    result = train_and_evaluate(
        TrainingContext(toy_dataset, bert),
        get_method("cls-tanh"),
        search_config(lr_candidates="1e-5,1e-3,1e-2", epochs=3),
    )
    first, second = result.tuning.lr_search
    assert len(first.dev) == 3 and len(first.kept) == 2
    assert set(second.dev) == set(first.kept) and second.kept == [f"{result.tuning.lr:g}"]


def test_the_search_never_reads_the_test_labels(bert, toy_dataset):
    """Poisoned test labels: the same rounds, the same rate chosen, the same trained model."""
    poisoned = replace(
        toy_dataset,
        splits={
            **toy_dataset.splits,
            "test": toy_dataset.splits["test"].assign(
                label=np.zeros(len(toy_dataset.splits["test"]), dtype=np.int64)
            ),
        },
    )
    spec = get_method("cls-relu")
    a = train_and_evaluate(TrainingContext(toy_dataset, bert), spec, search_config())
    b = train_and_evaluate(TrainingContext(poisoned, bert), spec, search_config())
    untimed = [{k: v for k, v in r.items() if "seconds" not in k} for r in a.history]
    assert a.tuning == b.tuning
    assert untimed == [{k: v for k, v in r.items() if "seconds" not in k} for r in b.history]
    np.testing.assert_allclose(a.logits, b.logits, rtol=1e-5, atol=1e-6)
    assert a.metrics.f1 != b.metrics.f1  # the poison reached test, and only test


def test_the_floor_on_steps_adds_epochs_to_the_default_only(bert, toy_dataset):
    steps_per_epoch = -(-len(toy_dataset.splits["train"]) // 16)
    floor = TrainConfig(
        lr=1e-3,
        min_steps=4 * steps_per_epoch + 1,
        batch_size=16,
        patience=50,
        lp_ft=False,
        recipe="paper",
        epochs=2,
    )
    result = train_and_evaluate(TrainingContext(toy_dataset, bert), get_method("cls-tanh"), floor)
    assert result.timing.epochs_run == 5  # ceil(floor / steps an epoch)
    per_text = result.timing.train_tokens_per_second / result.timing.train_examples_per_second
    assert 3 < per_text <= result.config.max_length  # the real tokens of a training text
    assert "≥ " in result.config.protocol()
    given = TrainConfig(epochs=2).resolved(32, 16)  # --epochs given: exactly that many
    assert given.min_steps is None and given.planned_epochs(1000) == 2


def test_the_cli_takes_the_recipe_and_its_switches(capsys, tiny_bert, tmp_path):
    import json

    from glee_core.cli import main

    code = main(
        [
            "train",
            "--dataset",
            "demo",
            "--method",
            "cls-relu",
            "--epochs",
            "2",
            "--limit",
            "48",
            "--model",
            str(tiny_bert),
            "--runs-dir",
            str(tmp_path),
            "--lr-candidates",
            "1e-4,1e-2",
            "--lp-ft",
            "no",
            "--head-lr",
            "1e-2",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "learning rate chosen on dev" in captured.err
    run_id = json.loads(captured.out.splitlines()[-1])[0]["run_id"]
    record = RunStore(tmp_path).get(run_id).record
    assert record.hyperparameters.head_lr == 1e-2 and not record.hyperparameters.lp_ft
    assert record.tuning.lr in (1e-4, 1e-2) and "head lr 0.01" in record.protocol
    assert "practical recipe" in RunStore(tmp_path).get(run_id).setting


def test_the_supervised_contrastive_term_pulls_a_class_together():
    from glee_core.data.encoding import rare_for_pairs
    from glee_core.train.contrastive import supervised_contrastive

    labels = torch.tensor([0, 0, 1, 1])
    together = torch.tensor([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0], [0.1, 1.0]])
    apart = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.1], [0.1, 1.0]])
    assert supervised_contrastive(together, labels) < supervised_contrastive(apart, labels)
    alone = supervised_contrastive(together, torch.tensor([0, 1, 2, 3]))
    assert alone.item() == 0.0  # nobody has a partner: nothing to pull
    assert rare_for_pairs(np.array([0] * 90 + [1] * 10), 16)  # 1.6 of class 1 a batch
    assert not rare_for_pairs(np.array([0] * 50 + [1] * 50), 16)


def test_self_ensemble_distillation_and_supcon_train_and_are_part_of_the_run(
    bert, toy_dataset, tiny_bert, tmp_path, capsys
):
    """Xu et al.'s self-ensemble (the moving average scored on dev beside the weights, kept
    where better) and self-distillation (the average as teacher), and a supervised contrastive
    term: each trains, each is in the protocol line and the run's identity, quick mode refuses
    them, and a batch too small for pairs is refused before training."""
    from glee_core.cli import main

    base = dict(epochs=2, batch_size=16, patience=10, recipe="paper", lr=1e-3)
    plain = train_and_evaluate(
        TrainingContext(toy_dataset, bert), get_method("cls-tanh"), TrainConfig(**base)
    )
    for extra, shown in (
        ({"self_ensemble": "yes"}, "self-ensemble"),
        ({"self_distill": 1.0}, "self-distill 1"),
        ({"supcon": 0.5}, "supcon 0.5"),
    ):
        config = TrainConfig(**base, **extra)
        assert shown in config.protocol()
        assert config.identity() != TrainConfig(**base).identity()
        result = train_and_evaluate(
            TrainingContext(toy_dataset, bert), get_method("cls-tanh"), config
        )
        assert all(np.isfinite(r["train_loss"]) for r in result.history)
        # the hardware is on the record (bf16 results differ between kinds of CPU)
        assert torch.backends.cpu.get_cpu_capability() in result.timing.device_name
        if "self_ensemble" in extra:  # the average only watches: kept or not, nothing else moved
            assert all("average_dev_f1" in r for r in result.history)
            kept_average = result.tuning.kept == "moving average"
            assert np.allclose(result.logits, plain.logits) != kept_average
            # the run says what the average did; its best dev score is the kept model's
            led = sum(r["kept"] == "average" for r in result.history)
            kept = "the moving average" if kept_average else "the trained weights"
            assert result.notes[-1] == (
                f"cls-tanh seed 1, self-ensemble: the moving average of the weights scored above "
                f"them on dev at {led} of {len(result.history)} evaluation(s); the model kept "
                f"(the best on dev) is {kept}"
            )
            assert result.metrics.best_dev_f1 == max(
                max(r["dev_f1"], r["average_dev_f1"]) for r in result.history
            )
        else:
            assert not np.allclose(result.logits, plain.logits)  # the term changed the training
    with pytest.raises(GleeError, match="--self-ensemble yes applies to fine-tuning"):
        TrainConfig(mode="frozen", self_ensemble="yes")
    assert TrainConfig(self_ensemble="no").identity() == TrainConfig().identity()
    argv = ["train", "--dataset", "demo", "--model", str(tiny_bert), "--method", "cls-tanh"]
    argv += ["--supcon", "0.5", "--batch-size", "8", "--runs-dir", str(tmp_path)]
    assert main(argv) == 2
    assert "a batch of 8 holds about one text of each of the 20 classes" in capsys.readouterr().err
