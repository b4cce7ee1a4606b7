import pytest

from glee_core.core.errors import GleeError
from glee_core.models.backbone import load_backbone


@pytest.mark.parametrize("fixture, family", [("tiny_bert", "bert"), ("tiny_roberta", "roberta")])
def test_tiny_models_load_back_through_the_user_path(request, fixture, family):
    backbone = load_backbone(str(request.getfixturevalue(fixture)))
    assert backbone.layout.family == family
    assert backbone.mlm_head_pretrained  # saved with its head
    assert backbone.describe()["mlm_head_pretrained"] is True
    assert backbone.mlm_decoder.weight.shape[0] == backbone.model.config.vocab_size


def test_auto_backbone_is_the_packaged_minilm_with_an_untrained_head():
    backbone = load_backbone("auto")
    assert backbone.hidden_size == 384 and backbone.layout.family == "bert"
    assert backbone.model.config.num_hidden_layers == 6
    assert backbone.mlm_head_pretrained is False  # the package ships the encoder only
    # ... but the decoder is tied to the pretrained word embeddings
    assert backbone.mlm_decoder.weight.data_ptr() == backbone.word_embeddings.weight.data_ptr()


def test_an_untrained_head_is_initialised_the_same_in_every_load():
    """Two processes (here: two global RNG states) must get the same MiniLM head transform, or
    prompt runs with the same seed differ between launches; the caller's RNG is left alone."""
    import torch

    torch.manual_seed(1)
    first = load_backbone("auto").mlm_dense.weight.detach().clone()
    after_first = torch.rand(1)
    torch.manual_seed(2)
    second = load_backbone("auto").mlm_dense.weight.detach().clone()
    assert torch.equal(first, second)
    torch.manual_seed(1)
    assert torch.equal(torch.rand(1), after_first)  # the load drew nothing from it


@pytest.mark.parametrize(
    "name, message",
    [
        ("/nonexistent/model", "model path not found"),
        ("surely-not/a-model-xyz", "cannot load model"),
    ],
)
def test_unknown_models_are_clear_errors(name, message):
    with pytest.raises(GleeError, match=message):
        load_backbone(name)


def test_folder_without_config_is_not_a_model(tmp_path):
    with pytest.raises(GleeError, match="no config.json"):
        load_backbone(str(tmp_path))
