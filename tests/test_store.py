import json
import time

import numpy as np
import pytest

from glee_core.core.errors import GleeError
from glee_core.models.config import TrainConfig
from glee_core.models.methods import get_method
from glee_core.runs.record import RunRecord
from glee_core.runs.store import RunStore
from glee_core.runs.tables import aggregate
from glee_core.serve.inference import load_run, score_texts
from glee_core.train.experiment import run_launch
from glee_core.train.launch import Launch
from glee_core.train.plan import plan_runs

CONFIG = TrainConfig(epochs=2, batch_size=16, lr=3e-3, recipe="paper")


def test_a_repeated_configuration_is_served_from_the_store(tiny_bert, toy_dataset, runs_dir):
    store = RunStore(runs_dir)
    events = []

    def launch():  # the same launch each time, as a second click makes it
        return run_launch(
            Launch(
                toy_dataset,
                [get_method("prompt")],
                [1],
                str(tiny_bert),
                CONFIG,
                store,
                False,
                events.append,
            )
        )

    first = launch()
    assert [e.cached for e in events if e.stage == "run"] == [False]
    run = first[0]
    for name in (
        "config.json",
        "metrics.json",
        "history.json",
        "predictions.csv",
        "logits.npy",
        "weight_norms.json",
        "features.npz",
        "model.safetensors",
    ):
        assert (run.path / name).is_file(), name
    stamp = (run.path / "metrics.json").stat().st_mtime_ns

    events.clear()
    again = launch()
    assert again[0].run_id == run.run_id
    assert [e.cached for e in events if e.stage == "run"] == [True]
    assert not [e for e in events if e.stage == "train"]  # nothing trained
    assert (run.path / "metrics.json").stat().st_mtime_ns == stamp

    other_seed = run_launch(
        Launch(toy_dataset, [get_method("prompt")], [2], str(tiny_bert), CONFIG, store)
    )[0]
    assert other_seed.run_id != run.run_id

    forced = run_launch(
        Launch(toy_dataset, [get_method("prompt")], [1], str(tiny_bert), CONFIG, store, force=True)
    )[0]
    assert forced.run_id == run.run_id
    assert (forced.path / "metrics.json").stat().st_mtime_ns != stamp
    assert not list(runs_dir.glob(".tmp-*")) and not list(runs_dir.glob(".old-*"))


def test_run_records_what_the_app_needs(tiny_bert, toy_dataset, runs_dir):
    run = run_launch(
        Launch(
            toy_dataset,
            [get_method("cls-relu-pt-ln")],
            [1],
            str(tiny_bert),
            CONFIG,
            RunStore(runs_dir),
        )
    )[0]
    record = run.record
    assert record.dataset.fingerprint == toy_dataset.fingerprint()
    assert record.model.mlm_head_pretrained is True
    assert record.method.paper_row == "CLS-tuning ∘ R w/ pt. LN"
    assert record.hyperparameters.lr == CONFIG.lr
    assert {"torch", "transformers", "glee_core"} <= set(record.versions)
    # the typed record is what config.json holds, and reads back the same
    assert RunRecord.from_dict(json.loads((run.path / "config.json").read_text())) == record
    assert set(run.weight_norms) == set(toy_dataset.classes)
    assert run.features["features"].dtype == np.float16
    assert run.logits.shape == (len(run.predictions), toy_dataset.num_classes)
    assert set(run.metrics.per_class) == set(toy_dataset.classes)
    per_class_f1 = [v.f1 for v in run.metrics.per_class.values() if v.support]
    assert run.metrics.f1 == pytest.approx(np.mean(per_class_f1))
    predictions = run.predictions
    assert (predictions["correct"] == (predictions["gold"] == predictions["pred"])).all()
    assert run.metrics.acc == pytest.approx(predictions["correct"].mean())


def test_saved_weights_score_new_text_like_the_run_did(tiny_bert, toy_dataset, runs_dir):
    run = run_launch(
        Launch(toy_dataset, [get_method("prompt")], [1], str(tiny_bert), CONFIG, RunStore(runs_dir))
    )[0]
    texts = run.predictions["text"].head(4).tolist()
    scores = score_texts(run, texts)
    assert list(scores.columns) == toy_dataset.classes
    np.testing.assert_allclose(scores.sum(axis=1), 1.0, rtol=1e-5)
    expected = np.exp(run.logits[:4]) / np.exp(run.logits[:4]).sum(1, keepdims=True)
    np.testing.assert_allclose(scores.to_numpy(), expected, rtol=1e-4, atol=1e-5)


def test_aggregate_mean_and_std_over_seeds(tiny_bert, toy_dataset, runs_dir):
    runs = run_launch(
        Launch(
            toy_dataset,
            [get_method("cls-relu")],
            [1, 2],
            str(tiny_bert),
            CONFIG,
            RunStore(runs_dir),
        )
    )
    table = aggregate(runs)
    assert len(table) == 1 and table.loc[0, "seeds"] == 2
    f1 = [100 * r.metrics.f1 for r in runs]
    assert table.loc[0, "f1_mean"] == pytest.approx(np.mean(f1))
    assert table.loc[0, "f1_std"] == pytest.approx(np.std(f1))


def test_broken_runs_are_skipped_and_reported(tiny_bert, toy_dataset, runs_dir):
    store = RunStore(runs_dir)
    run = run_launch(
        Launch(toy_dataset, [get_method("cls-relu")], [1], str(tiny_bert), CONFIG, store)
    )[0]
    (runs_dir / "half-written").mkdir()
    (runs_dir / "half-written" / "config.json").write_text("{}")
    (runs_dir / ".tmp-killed-run").mkdir()
    (store.backbones_dir / "demo-auto-tapt-1ep").mkdir(parents=True)  # the app's adapted ones
    assert [r.run_id for r in store.runs()] == [run.run_id]
    assert store.problems == {"half-written": "metrics.json: missing"}
    for name, problem in (
        ("model.safetensors", "model.safetensors: truncated"),
        ("features.npz", "features.npz: not an array archive"),
        ("logits.npy", "logits.npy: truncated"),
    ):
        original = (run.path / name).read_bytes()
        (run.path / name).write_bytes(original[: len(original) // 2])
        assert store.runs() == [] and problem in store.problems[run.run_id]
        (run.path / name).write_bytes(original)
        assert [r.run_id for r in store.runs()] == [run.run_id]
    (run.path / "metrics.json").write_text("{trunc")
    assert store.runs() == [] and "unreadable" in store.problems[run.run_id]
    with pytest.raises(GleeError, match="not a finished run"):
        load_run(run.path)


@pytest.mark.parametrize("bad", ["../escape", "/etc/passwd", "a/../../b", "..", ""])
def test_run_ids_cannot_escape_the_store(runs_dir, bad):
    with pytest.raises(GleeError, match="invalid run id"):
        RunStore(runs_dir).path(bad)


def test_compare_table_json_is_stable(tiny_bert, toy_dataset, runs_dir):
    from glee_core.runs.tables import comparison_table, to_markdown

    runs = run_launch(
        Launch(
            toy_dataset,
            [get_method("cls-relu"), get_method("prompt")],
            [1],
            str(tiny_bert),
            CONFIG,
            RunStore(runs_dir),
        )
    )
    table = comparison_table(aggregate(runs))
    assert list(table["method"]) == ["cls-relu", "prompt"]  # registry order
    f1 = 100 * runs[1].metrics.f1
    assert table.loc[1, "F1"] == f"{f1:.2f}"  # one seed: no ±
    # many / medium / few-shot buckets beside head/tail; the toy set has no many-shot class
    few = 100 * runs[1].metrics.few_f1
    assert table.loc[1, "Few F1"] == f"{few:.2f}" and table.loc[1, "Many F1"] == "–"
    markdown = to_markdown(table)
    assert "Prompt-tuning (`prompt`)" in markdown and "| Method |" in markdown
    json.dumps(table.to_dict(orient="records"))


def one_quick_run(tiny_bert, toy_dataset, runs_dir):
    """One quick-mode run of ``cls-relu`` on the toy data, stored in ``runs_dir``."""
    config = TrainConfig(epochs=1, batch_size=16, mode="frozen", pooling="cls")
    store = RunStore(runs_dir)
    return run_launch(
        Launch(toy_dataset, [get_method("cls-relu")], [1], str(tiny_bert), config, store)
    )[0]


def test_a_run_folder_of_the_first_layout_still_loads(tiny_bert, toy_dataset, runs_dir):
    """Version 1 wrote no schema_version and kept the mode as ``backbone_mode``."""
    run = one_quick_run(tiny_bert, toy_dataset, runs_dir)
    config = json.loads((run.path / "config.json").read_text())
    assert config["schema_version"] == 2 and config["mode"] == "frozen"
    old = {k: v for k, v in config.items() if k not in ("schema_version", "mode")}
    old["backbone_mode"] = "frozen"
    old["hyperparameters"] = {k: v for k, v in old["hyperparameters"].items() if k != "backbone"}
    (run.path / "config.json").write_text(json.dumps(old))
    [again] = RunStore(runs_dir).runs()
    assert again.record.schema_version == 1 and again.record.mode == "frozen"
    assert again.setting == run.setting and again.run_id == run.run_id


def test_a_second_launch_of_a_run_in_training_says_it_waits_for_it(
    tiny_bert, toy_dataset, runs_dir
):
    """The same configuration launched twice: the second waits on the run's lock, says so (it
    said 'loading the backbone' the whole time), then loads what the first stored."""
    import threading

    from glee_core.core.events import WaitingForRun
    from glee_core.core.progress import fold

    store = RunStore(runs_dir)
    config = TrainConfig(epochs=1, batch_size=16, mode="frozen")
    job = plan_runs(toy_dataset, [get_method("cls-relu")], [1], str(tiny_bert), config)[0]
    events, done = [], []
    with store.lock(job.run_id):  # the first launch, training
        thread = threading.Thread(
            target=lambda: done.append(
                run_launch(
                    Launch(
                        toy_dataset,
                        [get_method("cls-relu")],
                        [1],
                        str(tiny_bert),
                        config,
                        store,
                        progress=events.append,
                    )
                )
            )
        )
        thread.start()
        deadline = time.time() + 60
        while not any(isinstance(e, WaitingForRun) for e in events) and time.time() < deadline:
            time.sleep(0.05)
        state = fold(list(events))
        assert state.phase == "waiting" and job.run_id in state.describe()
        assert "another launch is training" in state.describe()
    thread.join(timeout=300)
    assert done and done[0][0].run_id == job.run_id


def test_runs_of_different_head_tail_splits_are_never_averaged(tmp_path):
    """The same method and seed scored with two thresholds: two settings, one seed each."""
    from tests.helpers.synthetic_runs import synthetic_dataset, write_synthetic_run

    store = RunStore(tmp_path)
    for threshold in (0.5, 0.7):
        dataset = synthetic_dataset(12, "split", threshold=threshold)
        write_synthetic_run(store, dataset, "cls-tanh", 1)
    runs = store.runs()
    assert len({r.setting for r in runs}) == 2
    assert {r.record.split for r in runs} == {"head/tail at 0.5", "head/tail at 0.7"}
    table = aggregate(runs)
    assert len(table) == 2 and set(table["seeds"]) == {1}


def test_a_runs_timing_and_tuning_are_typed_and_write_back_what_was_read(
    tiny_bert, toy_dataset, runs_dir
):
    """``RunRecord.timing`` and ``.tuning`` are records (``Timing``, ``Tuning``), not dicts: a
    stored ``config.json`` reads and writes back the same JSON, a key of another release kept as
    read, and a value of the wrong type is an error naming its field."""
    from glee_core.runs.json_values import RecordError  # noqa: PLC0415

    run = one_quick_run(tiny_bert, toy_dataset, runs_dir)
    stored = json.loads((run.path / "config.json").read_text())
    record = RunRecord.from_dict(stored)
    assert record.timing.train_seconds > 0 and record.timing.device_type == "cpu"
    assert record.tuning.trainable_parameters > 0 and record.tuning.lp_ft_from is None
    assert record.to_dict()["timing"] == stored["timing"]
    assert record.to_dict()["tuning"] == stored["tuning"]
    older = {**stored, "timing": {**stored["timing"], "warmup_seconds": 1.5}}
    assert RunRecord.from_dict(older).to_dict()["timing"]["warmup_seconds"] == 1.5
    with pytest.raises(RecordError, match="timing.steps"):
        RunRecord.from_dict({**stored, "timing": {**stored["timing"], "steps": "many"}})
