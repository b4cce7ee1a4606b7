"""The baselines a practitioner tries first: a logistic-regression probe on pooled features, and
the pooling choice itself."""

import json

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression

from glee_core.cli import main
from glee_core.core.errors import GleeError
from glee_core.models.backbone import load_backbone, trained_pooling
from glee_core.models.config import TrainConfig
from glee_core.models.heads import fit_probe
from glee_core.models.methods import METHODS, get_method, parse_methods
from glee_core.models.model import build_model, pool
from glee_core.runs.store import RunStore
from glee_core.serve.inference import score_texts
from glee_core.train.experiment import run_launch
from glee_core.train.launch import Launch


@pytest.mark.parametrize("balanced", [False, True])
def test_the_probe_is_scikit_learns_logistic_regression(tiny_bert, toy_dataset, balanced):
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(5), [40, 20, 10, 6, 4])
    features = (rng.normal(size=(len(labels), 32)) + labels[:, None] * 0.3).astype(np.float32)
    spec = get_method("probe-balanced" if balanced else "probe")
    head = build_model(
        spec,
        load_backbone(str(tiny_bert)),
        toy_dataset.classes,
        toy_dataset.verbalizer,
        TrainConfig(mode="frozen"),
    ).head
    fit_probe(head, features, labels, 5)
    clf = LogisticRegression(
        max_iter=2000, class_weight="balanced" if balanced else None, random_state=1
    ).fit(features, labels)
    with torch.no_grad():
        logits = head(torch.from_numpy(features))[0].numpy()
    np.testing.assert_allclose(logits, clf.decision_function(features), rtol=1e-4, atol=1e-4)
    assert (logits.argmax(1) == clf.predict(features)).all()


def test_the_seeds_of_a_probe_share_one_fit(tiny_bert, toy_dataset, monkeypatch):
    """lbfgs takes no seed: a quick compare's seeds (the same frozen features) are one fit,
    done once; other features, labels or class weights are fitted afresh."""
    from glee_core.models import heads

    fits = []
    monkeypatch.setattr(heads, "_PROBE_FITS", {})
    monkeypatch.setattr(
        heads.LogisticRegression,
        "fit",
        lambda self, x, y, fit=LogisticRegression.fit: fits.append(len(y)) or fit(self, x, y),
    )
    rng = np.random.default_rng(1)
    labels = np.repeat(np.arange(4), [30, 10, 5, 3])
    features = rng.normal(size=(len(labels), 32)).astype(np.float32)
    backbone = load_backbone(str(tiny_bert))

    def weights(seed, x=features, y=labels, balanced=False):
        spec = get_method("probe-balanced" if balanced else "probe")
        head = build_model(
            spec, backbone, toy_dataset.classes, toy_dataset.verbalizer, TrainConfig(mode="frozen")
        ).head
        head.fit_closed_form(x, y, 5, seed)  # the seed a run passes: no part of the fit
        return torch.cat([head.predictor.weight.flatten(), head.predictor.bias]).clone()

    first = weights(1)
    assert torch.equal(first, weights(2)) and torch.equal(first, weights(3)) and len(fits) == 1
    weights(1, balanced=True)
    weights(1, x=features + 1)
    weights(1, y=labels[::-1].copy())
    assert len(fits) == 4


def test_a_probe_fits_on_one_blas_thread(tiny_bert, toy_dataset, monkeypatch):
    """lbfgs's small products on a pool of BLAS threads cost 7-20x more than on one (a GPU
    machine's 16 cores made the quick compare take minutes): the fit runs on one thread, and the
    process's own thread count is left as it was."""
    from threadpoolctl import threadpool_info

    from glee_core.models import heads

    def blas_threads():
        return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}

    seen = []
    monkeypatch.setattr(heads, "_PROBE_FITS", {})
    monkeypatch.setattr(
        heads.LogisticRegression,
        "fit",
        lambda self, x, y, fit=LogisticRegression.fit: (
            seen.append(blas_threads()) or fit(self, x, y)
        ),
    )
    before = blas_threads()
    labels = np.repeat(np.arange(3), [12, 6, 3])
    features = np.random.default_rng(0).normal(size=(len(labels), 32)).astype(np.float32)
    head = build_model(
        get_method("probe"),
        load_backbone(str(tiny_bert)),
        toy_dataset.classes,
        toy_dataset.verbalizer,
        TrainConfig(mode="frozen"),
    ).head
    fit_probe(head, features, labels, len(toy_dataset.classes))
    assert seen and seen[0] <= {1}  # empty where numpy's BLAS exposes no pool
    assert blas_threads() == before


def test_mean_pooling_averages_the_tokens_of_each_text_only():
    states = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    positions = torch.tensor([0, 2])
    torch.testing.assert_close(
        pool(states, mask, positions, "mean"),
        torch.stack([states[0, :2].mean(0), states[1].mean(0)]),
    )
    torch.testing.assert_close(
        pool(states, mask, positions, "cls"), torch.stack([states[0, 0], states[1, 2]])
    )


def test_probes_and_pooling_in_quick_mode(tiny_bert, toy_dataset, runs_dir):
    store = RunStore(runs_dir)
    methods = [get_method(m) for m in ("probe-balanced", "cls-relu", "prompt")]
    mean = run_launch(
        Launch(
            toy_dataset,
            methods,
            [1],
            str(tiny_bert),
            TrainConfig(epochs=2, batch_size=16, mode="frozen", pooling="mean"),
            store,
        )
    )
    cls = run_launch(
        Launch(
            toy_dataset,
            methods,
            [1],
            str(tiny_bert),
            TrainConfig(epochs=2, batch_size=16, mode="frozen", pooling="cls"),
            store,
        )
    )
    assert [r.record.hyperparameters.pooling for r in mean] == ["mean", "mean", "cls"]
    assert mean[0].run_id != cls[0].run_id and mean[1].run_id != cls[1].run_id
    assert mean[2].run_id == cls[2].run_id  # a template is read at [MASK] whatever the pooling
    assert len(list((runs_dir / ".features").glob("plain-*/"))) == 1  # both poolings cached
    probe = mean[0]
    assert probe.record.method.group.startswith("Baseline") and len(probe.history) == 1
    assert set(probe.weight_norms) == set(toy_dataset.classes)
    texts = probe.predictions["text"].head(3).tolist()
    expected = np.exp(probe.logits[:3]) / np.exp(probe.logits[:3]).sum(1, keepdims=True)
    np.testing.assert_allclose(score_texts(probe, texts).to_numpy(), expected, rtol=1e-4, atol=1e-5)


def test_baselines_are_quick_mode_only_and_not_paper_rows(
    tiny_bert, toy_dataset, runs_dir, capsys, toy_csv
):
    assert {"probe", "probe-balanced"} <= set(METHODS)
    assert not METHODS["probe"].paper and METHODS["prompt"].paper
    assert "probe" not in {m.id for m in parse_methods("all", "finetune")}
    assert "probe" in {m.id for m in parse_methods("all", "frozen")}
    with pytest.raises(GleeError, match="--mode frozen"):
        run_launch(
            Launch(
                toy_dataset,
                [get_method("probe")],
                [1],
                str(tiny_bert),
                TrainConfig(epochs=1, recipe="paper"),
                RunStore(runs_dir),
            )
        )
    code = main(
        [
            "train",
            "--dataset",
            f"csv:{toy_csv}",
            "--method",
            "cls-relu,probe-balanced",
            "--model",
            str(tiny_bert),
            "--mode",
            "frozen",
            "--pooling",
            "mean",
            "--epochs",
            "1",
            "--runs-dir",
            str(runs_dir),
        ]
    )
    assert code == 0
    captured = capsys.readouterr()
    [_, result] = json.loads(captured.out.strip().splitlines()[-1])
    assert result["method"] == "probe-balanced"
    # on features already cached, a probe trains no epochs: its line is printed all the same
    assert f"[2/2] probe-balanced seed 1: training ({result['run_id']})" in captured.err


def test_a_sentence_encoders_own_pooling_is_read_from_its_folder(tmp_path, tiny_bert):
    assert trained_pooling(str(tiny_bert)) is None  # a plain masked LM
    folder = tmp_path / "st"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"pooling_mode_mean_tokens": True, "pooling_mode_cls_token": False})
    )
    assert trained_pooling(str(folder)) == "mean"
