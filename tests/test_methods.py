import math

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from bench.reference import full_vocabulary_logits
from glee_core.core.errors import GleeError
from glee_core.data.encoding import collate, encode
from glee_core.models.backbone import load_backbone
from glee_core.models.heads import label_word_token_ids
from glee_core.models.losses import focal_loss
from glee_core.models.methods import ETA, METHODS, get_method, parse_methods
from glee_core.models.model import build_model

PAPER_ROWS = {
    "cls-tanh",
    "cls-tanh-eta-norm",
    "cls-tanh-focal",
    "cls-relu",
    "cls-relu-eta-norm",
    "cls-relu-focal",
    "cls-relu-prompt",
    "cls-relu-ln",
    "cls-relu-pt-ln",
    "prompt",
    "prompt-focal",
    "prompt-ed",
}


def test_registry_lists_the_twelve_rows_of_the_paper():
    assert PAPER_ROWS <= set(METHODS)
    assert [m.paper_row for m in METHODS.values()][:3] == [
        "CLS-tuning ∘ T",
        "CLS-tuning ∘ T w/ η-norm",
        "CLS-tuning ∘ T w/ focal loss",
    ]
    assert {m.id for m in METHODS.values() if m.uses_mlm_head and m.paper} == {
        "cls-relu-pt-ln",
        "prompt",
        "prompt-focal",
        "prompt-ed",
    }
    assert [m.id for m in parse_methods("prompt, cls-relu-pt-ln")] == ["prompt", "cls-relu-pt-ln"]
    assert {m.id for m in parse_methods("all")} == set(METHODS)
    assert METHODS["cls-relu-pt-ln"].label == "CLS-tuning ∘ R w/ pt. LN (cls-relu-pt-ln)"
    with pytest.raises(GleeError, match="unknown method 'nope'"):
        get_method("nope")


def _batch(backbone, dataset, spec, n=6):
    split = encode(
        dataset.splits["test"].head(n), backbone.tokenizer, spec.input_format, dataset.template, 64
    )
    batch = collate(split, range(len(split)), backbone.tokenizer.pad_token_id)
    return {k: v for k, v in batch.items() if k != "labels"}


@pytest.mark.parametrize("fixture", ["tiny_bert", "tiny_roberta"])
def test_pt_ln_starts_from_exactly_the_mlm_layer_norm(request, fixture, toy_dataset):
    backbone = load_backbone(str(request.getfixturevalue(fixture)))
    source = backbone.mlm_layer_norm
    model = build_model(
        get_method("cls-relu-pt-ln"), backbone, toy_dataset.classes, toy_dataset.verbalizer
    )
    norm = model.head.norm
    assert torch.equal(norm.weight, source.weight) and torch.equal(norm.bias, source.bias)
    assert not torch.allclose(source.weight, torch.ones_like(source.weight))  # non-trivial
    assert norm.weight.data_ptr() != source.weight.data_ptr()  # a copy, trained on its own
    # the authors' w/ pt. LN has no dropout; w/ LN keeps Dropout(0.1); the change is in the id
    assert isinstance(model.head.dropout, torch.nn.Identity)
    assert METHODS["cls-relu-pt-ln"].identity() == {
        "method": "cls-relu-pt-ln",
        "head_dropout": False,
    }
    assert METHODS["cls-relu-ln"].identity() == {"method": "cls-relu-ln"}
    fresh = build_model(
        get_method("cls-relu-ln"), backbone, toy_dataset.classes, toy_dataset.verbalizer
    ).head.norm
    assert torch.equal(fresh.weight, torch.ones_like(fresh.weight))


@pytest.mark.parametrize("fixture", ["tiny_bert", "tiny_roberta"])
@pytest.mark.parametrize("method", ["prompt", "prompt-ed"])
def test_prompt_logits_equal_the_full_mlm_head_at_label_words(
    request, fixture, method, toy_dataset
):
    backbone = load_backbone(str(request.getfixturevalue(fixture)))
    spec = get_method(method)
    assert toy_dataset.verbalizer["tech_support"] == ["tech support"]  # two tokens: averaged
    model = build_model(spec, backbone, toy_dataset.classes, toy_dataset.verbalizer).eval()
    batch = _batch(backbone, toy_dataset, spec)
    with torch.no_grad():
        logits, _ = model(**batch)
        full = backbone.model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
        ).logits
    at_mask = full[torch.arange(len(full)), batch["positions"]]
    expected = torch.stack(
        [
            at_mask[:, ids].mean(dim=1)
            for ids in label_word_token_ids(
                backbone.tokenizer, toy_dataset.verbalizer, toy_dataset.classes
            )
        ],
        dim=1,
    )
    assert (
        batch["input_ids"][torch.arange(len(full)), batch["positions"]]
        == backbone.tokenizer.mask_token_id
    ).all()
    torch.testing.assert_close(logits, expected, rtol=1e-5, atol=1e-5)
    with torch.no_grad():  # the straightforward full-vocabulary path agrees too
        reference, _ = full_vocabulary_logits(model, batch)
    torch.testing.assert_close(reference, logits, rtol=1e-5, atol=1e-5)


def test_prompt_ed_decouples_the_decoder_from_the_embeddings(tiny_bert, toy_dataset):
    backbone = load_backbone(str(tiny_bert))
    model = build_model(
        get_method("prompt-ed"), backbone, toy_dataset.classes, toy_dataset.verbalizer
    )
    rows = model.head.decoupled_rows
    with torch.no_grad():
        rows.add_(1.0)
    ids = model.head.label_token_ids
    assert not torch.allclose(backbone.word_embeddings.weight[ids], rows)
    tied = build_model(
        get_method("prompt"),
        load_backbone(str(tiny_bert)),
        toy_dataset.classes,
        toy_dataset.verbalizer,
    )
    assert tied.head.decoder.weight.data_ptr() == tied.mlm.get_input_embeddings().weight.data_ptr()


@pytest.mark.parametrize("method", ["cls-relu-eta-norm", "cls-tanh-eta-norm"])
def test_eta_norm_divides_eval_logits_by_row_norm_power(tiny_bert, toy_dataset, method):
    backbone = load_backbone(str(tiny_bert))
    spec = get_method(method)
    model = build_model(spec, backbone, toy_dataset.classes, toy_dataset.verbalizer).eval()
    batch = _batch(backbone, toy_dataset, spec)
    with torch.no_grad():
        raw, _ = model(**batch)
        calibrated, _ = model(**batch, calibrate=True)
    norms = model.head.predictor.weight.norm(dim=1)
    torch.testing.assert_close(calibrated, raw / norms**ETA)
    assert ETA == 1.1


def test_focal_loss_matches_its_formula():
    torch.manual_seed(0)
    logits, labels = torch.randn(8, 5), torch.randint(0, 5, (8,))
    p = F.softmax(logits, dim=1)[torch.arange(8), labels]
    expected = torch.mean(-(1 - p) * torch.log(p))  # gamma = 1
    torch.testing.assert_close(focal_loss(logits, labels), expected)
    torch.testing.assert_close(
        focal_loss(logits, labels, gamma=0.0), F.cross_entropy(logits, labels)
    )
    p0 = math.exp(-F.cross_entropy(logits[:1], labels[:1]).item())
    assert focal_loss(logits[:1], labels[:1]).item() == pytest.approx(-(1 - p0) * math.log(p0))


def test_out_of_vocabulary_label_word_is_named(tiny_bert, toy_dataset):
    backbone = load_backbone(str(tiny_bert))
    verbalizer = dict(toy_dataset.verbalizer, food=["zzyzx"])
    with pytest.raises(GleeError, match=r"'food' -> 'zzyzx'"):
        build_model(get_method("prompt"), backbone, toy_dataset.classes, verbalizer)
    many = [f"class {i}" for i in range(13)]  # a data set in a language the vocabulary lacks
    with pytest.raises(GleeError, match=r"'class 9' -> 'zzq9' and 3 more - give other words"):
        label_word_token_ids(backbone.tokenizer, {c: [f"zzq{c[6:]}"] for c in many}, many)


def test_cls_methods_read_cls_and_prompt_methods_read_mask(tiny_bert, toy_dataset):
    backbone = load_backbone(str(tiny_bert))
    plain = _batch(backbone, toy_dataset, get_method("cls-relu"))
    prompt = _batch(backbone, toy_dataset, get_method("cls-relu-prompt"))
    assert (plain["positions"] == 0).all()
    assert np.all(
        prompt["input_ids"][torch.arange(6), prompt["positions"]].numpy()
        == backbone.tokenizer.mask_token_id
    )


def test_the_long_tail_losses_are_their_formulas():
    from glee_core.models.losses import CB_BETA, class_balanced_loss, logit_adjusted_loss

    logits = torch.tensor([[2.0, 0.5, -1.0], [0.1, 0.3, 0.2]])
    labels = torch.tensor([0, 2])
    counts = torch.tensor([80, 15, 5])
    prior = counts.float() / 100
    adjusted = logits + torch.log(prior)  # Menon et al. 2021, tau = 1
    expected = -torch.log_softmax(adjusted, 1)[torch.arange(2), labels].mean()
    torch.testing.assert_close(logit_adjusted_loss(logits, labels, counts), expected)
    weight = (1 - CB_BETA) / (1 - CB_BETA ** counts.double())  # Cui et al. 2019
    weight = (weight / weight.sum() * 3).float()
    nll = -torch.log_softmax(logits, 1)[torch.arange(2), labels]
    expected = (weight[labels] * nll).sum() / weight[labels].sum()
    torch.testing.assert_close(class_balanced_loss(logits, labels, counts), expected)
    assert weight[2] > weight[1] > weight[0]  # the rarer, the heavier


def test_the_methods_beyond_the_paper_say_so():
    beyond = [m for m in METHODS.values() if not m.paper]
    assert {
        "cls-relu-pt-ln-la",
        "cls-relu-pt-ln-cb",
        "prompt-la",
        "prompt-cb",
        "probe",
        "probe-balanced",
    } <= {m.id for m in beyond}
    assert all("[beyond the paper]" in m.label or "[baseline]" in m.label for m in beyond)
    assert PAPER_ROWS == {m.id for m in METHODS.values() if m.paper}  # the twelve, unchanged


def test_the_parts_a_stored_spec_is_checked_against_are_the_ones_heads_builds():
    from glee_core.models.heads import ACTIVATIONS, HEADS
    from glee_core.models.losses import LOSSES
    from glee_core.models.methods import PARTS

    assert set(PARTS["predictor"]) == set(HEADS)
    assert set(PARTS["activation"]) - {None} == set(ACTIVATIONS)
    assert set(PARTS["loss"]) == set(LOSSES)
    assert {m.input_format for m in METHODS.values()} <= set(PARTS["input_format"])
    assert {m.norm for m in METHODS.values()} <= set(PARTS["norm"])


def test_every_head_is_what_the_head_protocol_says(tiny_bert, toy_dataset):
    """Each head of the registry answers the Head protocol (its flags, the methods the trainer,
    scorer and exporter call, and the fitting step its ``closed_form`` promises), built for a
    method of its own on a tiny BERT."""
    import inspect

    from glee_core.models.backbone import load_backbone
    from glee_core.models.heads import HEADS, Head

    backbone = load_backbone(str(tiny_bert))
    members = [name for name, _ in inspect.getmembers(Head) if not name.startswith("_")]
    for predictor, cls in HEADS.items():
        spec = next(m for m in METHODS.values() if m.predictor == predictor)
        head = cls(spec, backbone, toy_dataset.classes, toy_dataset.verbalizer)
        for name in ("closed_form", "verbalizer", *members):
            assert hasattr(head, name), (predictor, name)
        assert isinstance(head.closed_form, bool) and isinstance(head.verbalizer, bool)
        step = "fit_closed_form" if head.closed_form else "warm_start"
        assert callable(getattr(head, step, None)), (predictor, step)
        weight, bias = head.linear_predictor()
        assert weight.shape[0] == len(toy_dataset.classes) == bias.shape[0]
        assert head.class_weights().shape[0] == len(toy_dataset.classes)
