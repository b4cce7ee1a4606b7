"""The parameter-efficient modes (LoRA, P-tuning v2 through peft) on a tiny random BERT: each
trains, stores only what it trained, reloads and scores the same; the backbone never changes."""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pytest
import torch
from safetensors import safe_open

from glee_core.cli import main
from glee_core.core.errors import GleeError
from glee_core.models.backbone import load_backbone
from glee_core.models.config import TrainConfig
from glee_core.models.methods import METHODS, get_method, parse_methods
from glee_core.models.modes import MODES, setting_default
from glee_core.models.recipes import recipe_rates
from glee_core.models.tuning import Setting
from glee_core.runs.store import RunStore
from glee_core.serve.export import export_run, load_classifier
from glee_core.serve.inference import Scorer
from glee_core.train.experiment import run_launch
from glee_core.train.launch import Launch
from glee_core.train.plan import plan_runs
from glee_core.train.setup import TrainingContext
from glee_core.train.training import train_and_evaluate

PEFT_MODES = [m for m in MODES.values() if m.parameter_efficient]
FAST = dict(epochs=3, batch_size=16, patience=10, recipe="paper")


def softmax(logits):
    e = np.exp(logits - logits.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


@pytest.fixture(scope="module")
def bert(tiny_bert):
    return load_backbone(str(tiny_bert))


@pytest.fixture(scope="module")
def stored(tiny_bert, toy_dataset, tmp_path_factory):
    """A LoRA prompt run and a P-tuning v2 pt. LN run, through the store as users get them."""
    store = RunStore(tmp_path_factory.mktemp("mode-runs"))
    [lora] = run_launch(
        Launch(
            toy_dataset,
            [get_method("prompt")],
            [1],
            str(tiny_bert),
            TrainConfig(**FAST, mode="lora", lr=3e-3),
            store,
        )
    )
    [prefix] = run_launch(
        Launch(
            toy_dataset,
            [get_method("cls-relu-pt-ln")],
            [1],
            str(tiny_bert),
            TrainConfig(**FAST, mode="ptuning2", lr=1e-2),
            store,
        )
    )
    [ia3] = run_launch(
        Launch(
            toy_dataset,
            [get_method("cls-relu-pt-ln")],
            [1],
            str(tiny_bert),
            TrainConfig(**FAST, mode="ia3", lr=1e-2),
            store,
        )
    )
    [prompted] = run_launch(
        Launch(
            toy_dataset,
            [get_method("cls-relu-pt-ln")],
            [1],
            str(tiny_bert),
            TrainConfig(**FAST, mode="prompt-tuning", lr=3e-2, prompt_tokens=4),
            store,
        )
    )
    return {"lora": lora, "ptuning2": prefix, "ia3": ia3, "prompt-tuning": prompted}


@pytest.mark.parametrize("mode", [m.name for m in PEFT_MODES])
@pytest.mark.parametrize("method", ["cls-relu-pt-ln", "prompt", "prompt-ed"])
def test_a_peft_run_trains_only_its_adapter_and_head(bert, toy_dataset, mode, method):
    pristine = {k: v.clone() for k, v in bert.model.state_dict().items()}
    result = train_and_evaluate(
        TrainingContext(toy_dataset, bert),
        get_method(method),
        TrainConfig(**FAST, mode=mode, lr=5e-3, seed=2),
    )
    model = result.model
    losses = [r["train_loss"] for r in result.history]
    assert losses[-1] < losses[0], losses
    # the backbone the model wraps is bit-identical to the pretrained one (peft renames LoRA's
    # wrapped layers "base_layer"); the shared backbone too
    for name, tensor in model.mlm.state_dict().items():
        if "lora_" in name or "ia3_" in name:
            continue
        assert torch.equal(tensor.cpu(), pristine[name.replace(".base_layer", "")]), name
    assert all(torch.equal(v, pristine[k]) for k, v in bert.model.state_dict().items())
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    adapter = {n for n in trainable if "lora_" in n or "prompt_encoder" in n or "ia3_" in n}
    assert adapter and all(n.startswith("head.") for n in trainable - adapter), trainable
    frozen_in_head = {n for n, p in model.head.named_parameters() if not p.requires_grad}
    if method == "prompt":  # P-tuning v2's frozen decoder: the label-word rows keep their values
        assert frozen_in_head == {"decoupled_rows", "decoupled_bias"}
        assert model.head.dense.weight.requires_grad  # its copy of the transform trains
    else:  # every part of the head trains (its copies of the MLM head's parts included)
        assert frozen_in_head == set()
    if method == "prompt-ed":  # w/ ed. trains its own rows
        assert model.head.decoupled_rows.requires_grad
    assert result.tuning.trainable_parameters == sum(
        p.numel() for p in model.parameters() if p.requires_grad
    )
    full = sum(p.numel() for p in bert.model.parameters())
    assert result.tuning.trainable_parameters < full / 2
    if mode == "lora":
        assert result.tuning.adapted_modules == ["query", "value"]  # peft's default for BERT


@pytest.mark.parametrize("mode", [m.name for m in PEFT_MODES])
@pytest.mark.parametrize("method", [m.id for m in METHODS.values() if m.trains_in(MODES["lora"])])
def test_every_head_that_trains_through_the_encoder_trains_in_every_peft_mode(
    bert, toy_dataset, mode, method
):
    result = train_and_evaluate(
        TrainingContext(toy_dataset, bert),
        get_method(method),
        TrainConfig(epochs=1, batch_size=16, recipe="paper", mode=mode),
    )
    assert np.isfinite(result.logits).all() and result.history[0]["train_loss"] > 0
    assert result.logits.shape == (len(toy_dataset.splits["test"]), toy_dataset.num_classes)


@pytest.mark.parametrize("mode", ["lora", "ptuning2", "ia3", "prompt-tuning"])
def test_a_stored_peft_run_holds_only_what_it_trained_and_scores_the_same(stored, mode):
    run = stored[mode]
    with safe_open(str(run.weights_path), "pt") as weights:
        keys = list(weights.keys())
    assert keys and all(k.startswith(("adapter.", "head.")) for k in keys)
    assert not any("word_embeddings" in k or "attention.self.query.weight" in k for k in keys)
    texts = run.predictions["text"].tolist()[:6]
    scorer = Scorer.for_run(run)
    np.testing.assert_allclose(
        scorer.probabilities(texts).values, softmax(run.logits[:6]), rtol=1e-4, atol=1e-5
    )
    assert run.record.mode == mode
    line = run.record.protocol  # a mode's settings, as it used them
    shown = {
        "lora": f"LoRA r {setting_default('lora_r')}",
        "ptuning2": f"prefix {setting_default('prefix_length')}",
        "prompt-tuning": "4 virtual tokens · from label-words",
    }
    assert shown.get(mode, "") in line


@pytest.mark.parametrize("mode", ["lora", "ptuning2", "ia3", "prompt-tuning"])
def test_a_peft_run_exports_and_loads_from_the_folder(stored, mode, tmp_path):
    run = stored[mode]
    texts = run.predictions["text"].tolist()[:4]
    for include in (False, True):
        folder = export_run(run, tmp_path / f"out-{include}", include_backbone=include)
        classifier = load_classifier(folder)
        np.testing.assert_allclose(
            classifier.predict_proba(texts), softmax(run.logits[:4]), rtol=1e-4, atol=1e-5
        )
    card = (tmp_path / "out-False" / "README.md").read_text()
    assert MODES[mode].label in card and "referenced by name" in card


def test_the_cli_scores_a_peft_run(stored, tmp_path, capsys):
    run = stored["lora"]
    assert main(["score", "--run", str(run.path), "--text", run.predictions["text"][0]]) == 0
    assert run.predictions["pred"][0] in capsys.readouterr().out


def test_modes_refuse_what_makes_no_sense_with_a_message(toy_dataset, tiny_bert):
    with pytest.raises(GleeError, match="fitted on a frozen backbone's features"):
        plan_runs(toy_dataset, [get_method("probe")], [1], str(tiny_bert), TrainConfig(mode="lora"))
    with pytest.raises(GleeError, match="--lora-r applies to another mode"):
        TrainConfig(mode="finetune", lora_r=4)
    with pytest.raises(GleeError, match="--prefix-length applies"):
        TrainConfig(mode="lora", prefix_length=10)
    with pytest.raises(GleeError, match="--mode must be one of"):
        TrainConfig(mode="adapters")
    with pytest.raises(GleeError, match="--lora-dropout must be below 1"):
        TrainConfig(mode="lora", lora_dropout=1.0)
    with pytest.raises(GleeError, match="--prefix-length must be at least 1"):
        TrainConfig(mode="ptuning2", prefix_length=0)
    assert {m.id for m in parse_methods("all", "lora")} == {
        m.id for m in METHODS.values() if m.supports_finetune
    }


def test_each_mode_gets_its_own_rates_and_the_paper_values_by_default():
    for mode in MODES.values():
        resolved = TrainConfig(mode=mode.name).resolved(64, 16)
        if mode.cached_features:
            assert resolved.lr == mode.lr
        else:  # the practical recipe searches the mode's own candidates on dev
            assert resolved.lr_grid == mode.lr_candidates
        assert recipe_rates("paper", mode.name) == (mode.lr, None)
    lora = TrainConfig(mode="lora").resolved(64, 16)
    assert (lora.lora_r, lora.lora_alpha, lora.lora_dropout, lora.prefix_length) == (
        8,
        16,
        0.1,
        None,
    )
    assert TrainConfig(mode="ptuning2").resolved(64, 16).prefix_length == 20
    # the new fields stay out of older runs' identities
    assert not {"lora_r", "prefix_length"} & set(TrainConfig().resolved(64, 16).identity())


def test_a_modes_settings_are_declared_once_and_held_by_config_fields():
    """Each peft mode carries its settings (the Train page draws them, ``resolved`` fills their
    defaults, ``TrainConfig`` checks their bounds and that no other mode is given them);
    ``TrainConfig`` makes each a field from the setting alone (its flag, help, protocol text and
    place in the run's identity): a new mode's settings are declared in models/modes.py only."""
    from dataclasses import fields

    names = {f.name: f for f in fields(TrainConfig)}
    for mode in MODES.values():
        assert all(isinstance(s, Setting) and s.field in names for s in mode.settings)
        resolved = TrainConfig(mode=mode.name).resolved(64, 16)
        assert mode.defaults(resolved) == {s.field: s.default for s in mode.settings}
        for setting in mode.settings:
            meta = names[setting.field].metadata  # the field made from the setting
            assert meta["help"] == setting.help_text and meta["protocol"] == setting.protocol
            assert str(setting.default) in meta["help"] or setting.default is None
            for other in MODES.values():
                if other is not mode and setting.field not in {s.field for s in other.settings}:
                    value = "x" if setting.kind is str else setting.kind(setting.low or 0) + 1
                    with pytest.raises(GleeError, match="applies to another mode"):
                        TrainConfig(mode=other.name, **{setting.field: value})
    assert not MODES["finetune"].settings and not MODES["frozen"].settings


@pytest.mark.parametrize("mode", ["lora", "ptuning2", "ia3", "frozen"])
def test_the_train_pages_trainable_count_matches_the_model(bert, tiny_bert, toy_dataset, mode):
    from glee_core.models.backbone import estimate_trainable
    from glee_core.models.model import build_model

    config = TrainConfig(mode=mode).resolved(64, 16)
    own = bert if config.frozen else load_backbone(str(tiny_bert))
    model = build_model(
        get_method("cls-relu-pt-ln"), own, toy_dataset.classes, toy_dataset.verbalizer, config
    )
    assert (
        estimate_trainable(str(tiny_bert), config, toy_dataset.num_classes)
        == model.trainable_parameters()
    )


def test_p_tuning_v2_keeps_a_pairs_segment_ids(tiny_bert, toy_dataset):
    """peft's feature-extraction model drops ``token_type_ids`` under prefix tuning; the model
    passes them (a pair's second text is segment 1), and without them it is peft's own forward."""
    from glee_core.models.model import build_model, peft_deprecations

    config = TrainConfig(mode="ptuning2").resolved(64, 16)
    model = build_model(
        get_method("cls-relu-pt-ln"),
        load_backbone(str(tiny_bert)),
        toy_dataset.classes,
        toy_dataset.verbalizer,
        config,
    ).eval()
    assert model.prefixes == setting_default("prefix_length")
    ids = torch.randint(5, 30, (2, 9))
    mask = torch.ones_like(ids)
    pair = torch.zeros_like(ids)
    pair[:, 5:] = 1
    with torch.no_grad(), peft_deprecations():  # transformers' notice about peft's prefixes
        plain = model.prefixed_encoder_output(ids, mask, None)
        peft_own = model.adapter(input_ids=ids, attention_mask=mask).last_hidden_state
        segmented = model.prefixed_encoder_output(ids, mask, pair)
        zeros = model.prefixed_encoder_output(ids, mask, torch.zeros_like(ids))
    torch.testing.assert_close(plain, peft_own)
    torch.testing.assert_close(zeros, plain)  # segment 0 everywhere is BERT's default
    assert not torch.allclose(segmented[:, 5:], plain[:, 5:])


def test_an_unknown_lora_target_is_one_error_line_before_any_training(capsys, tiny_bert, tmp_path):
    from glee_core.cli import main

    code = main(
        [
            "train",
            "--dataset",
            "demo",
            "--method",
            "cls-tanh",
            "--mode",
            "lora",
            "--lora-targets",
            "query,nosuch",
            "--epochs",
            "1",
            "--limit",
            "32",
            "--model",
            str(tiny_bert),
            "--runs-dir",
            str(tmp_path),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "no linear layer named 'nosuch'" in err and "query" in err
    assert "Traceback" not in err and not list(tmp_path.glob("demo-*"))


def test_a_prefix_that_leaves_no_room_for_the_text_is_refused_before_training(
    capsys, tiny_bert, tmp_path
):
    """E5's P-tuning v2 with a prefix of 512 at max length 512 crashed at its first step
    (RuntimeError, a traceback): its virtual tokens take positions before the text's."""
    from glee_core.cli import main

    common = ["train", "--dataset", "demo", "--method", "cls-tanh", "--mode", "ptuning2"]
    common += ["--epochs", "1", "--limit", "8", "--model", str(tiny_bert)]
    common += ["--runs-dir", str(tmp_path)]
    code = main([*common, "--prefix-length", "20", "--max-length", "510"])
    err = capsys.readouterr().err
    assert code == 2 and "need 530 positions" in err and "--max-length 500 or less" in err
    assert "Traceback" not in err
    code = main([*common, "--prefix-length", "519", "--max-length", "64"])
    err = capsys.readouterr().err
    assert code == 2 and "a --prefix-length well under 520" in err


def leaves_with_its_scores(run, texts: list[str], expected, tmp_path) -> None:
    """``run`` exported as hf (through transformers' pipeline) and as onnx (ONNX Runtime) gives
    ``expected``, the run's own probabilities of ``texts`` (tests/test_formats.py loads every
    mode's where glee_core is not)."""
    from transformers import pipeline

    from glee_core.serve.formats import onnx_classifiers

    hf = export_run(run, tmp_path / "hf", form="hf")
    classify = pipeline("text-classification", model=str(hf), trust_remote_code=True)
    order = [classify.model.config.id2label[i] for i in range(len(run.record.dataset.classes))]
    rows = classify(texts, top_k=None)
    probs = np.array([[{r["label"]: r["score"] for r in row}[c] for c in order] for row in rows])
    np.testing.assert_allclose(probs, expected, atol=1e-4)
    onnx = export_run(run, tmp_path / "onnx", form="onnx")
    scored = onnx_classifiers(onnx, ["model.onnx"])["model.onnx"].predict_proba(texts)
    np.testing.assert_allclose(scored, expected, atol=1e-4)


def test_prompt_tuning_starts_from_the_label_words_and_leaves_in_every_form(
    stored, bert, toy_dataset, tmp_path, capsys
):
    """Prompt tuning's virtual tokens start as the label words' embeddings (or drawn from the
    vocabulary), and a form that holds a plain encoder refuses it in one line."""
    from glee_core.models.model import build_model

    config = TrainConfig(**FAST, mode="prompt-tuning", prompt_tokens=5).resolved(64, 16)
    model = build_model(
        get_method("cls-tanh"), bert, toy_dataset.classes, toy_dataset.verbalizer, config
    )
    words = " ".join(w for c in toy_dataset.classes for w in toy_dataset.verbalizer[c])
    ids = bert.tokenizer(words, add_special_tokens=False)["input_ids"]  # "tech support": two
    table = bert.model.get_input_embeddings().weight
    start = model.adapter.prompt_encoder["default"].embedding.weight
    assert torch.equal(start, table[[ids[k % len(ids)] for k in range(5)]])
    drawn = build_model(
        get_method("cls-tanh"),
        bert,
        toy_dataset.classes,
        toy_dataset.verbalizer,
        TrainConfig(**FAST, mode="prompt-tuning", prompt_init="random").resolved(64, 16),
    )
    rows = drawn.adapter.prompt_encoder["default"].embedding.weight
    assert any(torch.equal(rows[0], row) for row in table[:5000])  # a vocabulary token's
    with pytest.raises(GleeError, match="--prompt-init must be label-words or random"):
        TrainConfig(mode="prompt-tuning", prompt_init="zeros")
    run = stored["prompt-tuning"]
    texts = toy_dataset.splits["test"]["text"].tolist()[:6]
    expected = Scorer.for_run(run, precision="fp32").predict_proba(texts)
    leaves_with_its_scores(run, texts, expected, tmp_path)  # virtual tokens as embeddings
    assert not capsys.readouterr().err
    folder = export_run(run, tmp_path / "peft", form="peft")
    assert (folder / "adapter_config.json").is_file() and "PROMPT_TUNING" in (
        folder / "adapter_config.json"
    ).read_text()


@pytest.mark.parametrize("method", ["cls-relu-pt-ln", "prompt"])
def test_bitfit_trains_only_the_encoders_biases_and_the_head(bert, toy_dataset, method):
    """BitFit: every weight of the encoder but its biases as it was; the head trains its own
    copies of what it starts from; the trainable count is the biases' and the head's."""
    pristine = {k: v.clone() for k, v in bert.model.state_dict().items()}
    result = train_and_evaluate(
        TrainingContext(toy_dataset, bert),
        get_method(method),
        TrainConfig(**FAST, mode="bitfit", lr=5e-3),
    )
    model = result.model
    changed = {
        name
        for name, tensor in model.mlm.base_model.state_dict().items()
        if not torch.equal(tensor.cpu(), pristine[f"bert.{name}"])
    }
    assert changed and all(name.endswith(".bias") for name in changed), changed
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert all(n.startswith("head.") or n.endswith(".bias") for n in trainable), trainable
    assert result.tuning.trainable_parameters == sum(
        p.numel() for p in model.parameters() if p.requires_grad
    )
    assert all(torch.equal(v, pristine[k]) for k, v in bert.model.state_dict().items())


def test_bitfit_on_a_backbone_without_biases_says_so_before_training(bert, toy_dataset):
    from glee_core.models.model import build_model

    bare = replace(bert, model=copy.deepcopy(bert.model))
    for module in bare.model.modules():
        if isinstance(module, torch.nn.Linear | torch.nn.LayerNorm) and module.bias is not None:
            module.bias = None
    with pytest.raises(GleeError, match="--mode bitfit trains the encoder's biases"):
        build_model(
            get_method("cls-tanh"),
            bare,
            toy_dataset.classes,
            toy_dataset.verbalizer,
            TrainConfig(mode="bitfit").resolved(64, 16),
        )


def test_adapters_train_alone_store_reload_and_leave_with_their_scores(
    bert, tiny_bert, toy_dataset, tmp_path, capsys
):
    """Bottleneck adapters: only they and the head train, the backbone never changes, the
    count is the estimate's; the stored run scores the same reloaded and from its exports
    (glee, hf, onnx); peft, which carries its own adapters only, refuses it in one line."""
    from glee_core.models.backbone import estimate_trainable

    pristine = {k: v.clone() for k, v in bert.model.state_dict().items()}
    config = TrainConfig(**FAST, mode="adapter", adapter_size=8, lr=1e-2)
    result = train_and_evaluate(
        TrainingContext(toy_dataset, bert), get_method("cls-relu-pt-ln"), config
    )
    trainable = {n for n, p in result.model.named_parameters() if p.requires_grad}
    inside = {n for n in trainable if not n.startswith("head.")}
    assert inside and all(n.rsplit(".", 2)[-2] in ("down", "up") for n in inside), inside
    assert all(torch.equal(v, pristine[k]) for k, v in bert.model.state_dict().items())
    assert result.tuning.trainable_parameters == estimate_trainable(
        str(tiny_bert), config.resolved(64, 16), toy_dataset.num_classes
    )
    [run] = run_launch(
        Launch(
            toy_dataset,
            [get_method("prompt")],
            [1],
            str(tiny_bert),
            config,
            RunStore(tmp_path / "r"),
        )
    )
    texts = run.predictions["text"].tolist()[:5]
    expected = softmax(run.logits[:5])
    scored = Scorer.for_run(run).probabilities(texts).values
    np.testing.assert_allclose(scored, expected, rtol=1e-4, atol=1e-5)
    folder = export_run(run, tmp_path / "glee")
    np.testing.assert_allclose(
        load_classifier(folder).predict_proba(texts), expected, rtol=1e-4, atol=1e-5
    )
    assert "adapters 8 · after both" in run.record.protocol
    in_fp32 = Scorer.for_run(run, precision="fp32").predict_proba(texts)  # as the forms score
    leaves_with_its_scores(run, texts, in_fp32, tmp_path)  # modeling_glee puts them in
    out = str(tmp_path / "peft")
    assert main(["export", "--run", str(run.path), "--out", out, "--format", "peft"]) == 2
    assert "(it leaves as glee, hf or onnx)" in capsys.readouterr().err
    with pytest.raises(GleeError, match="--adapter-where must be both, attention or ffn"):
        TrainConfig(mode="adapter", adapter_where="everywhere")
    with pytest.raises(GleeError, match="--adapter-size must be at least 1"):
        TrainConfig(mode="adapter", adapter_size=0)
