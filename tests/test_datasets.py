import json
import re

import pandas as pd
import pytest

from glee_core.core.errors import GleeError
from glee_core.data.datasets import load_dataset, split_head_tail
from glee_core.data.splits import stratified_holdout
from glee_core.data.verbalizers import (
    check_template,
    derive_verbalizer,
    parse_verbalizer,
    verbalizer_json,
)
from tests.conftest import SHARED_DATA, TOY_CLASSES

needs_shared = pytest.mark.skipif(
    not (SHARED_DATA / "r8").is_dir(), reason="../shared/data is not present"
)


@pytest.mark.parametrize(
    "threshold, head",
    [
        (0.65, ["a"]),  # cumulative shares: .5 .8 .9 .96 1.0
        (0.80, ["a", "b"]),  # .8 does not exceed .8
        (0.95, ["a", "b", "c"]),
        (0.30, ["a"]),  # the most frequent class is always head
    ],
)
def test_head_tail_split_on_known_distribution(threshold, head):
    counts = {"c": 10, "a": 50, "e": 4, "b": 30, "d": 6}
    got_head, got_tail = split_head_tail(counts, threshold)
    assert got_head == head
    assert got_tail == [c for c in ["a", "b", "c", "d", "e"] if c not in head]


def test_head_tail_split_keeps_a_tail_and_checks_threshold():
    assert split_head_tail({"a": 1, "b": 1}, 0.99) == (["a"], ["b"])
    with pytest.raises(GleeError, match="threshold"):
        split_head_tail({"a": 1}, 1.5)


def test_the_released_rule_is_strict_and_reads_the_test_labels(toy_csv):
    counts = {"c": 10, "a": 50, "e": 4, "b": 30, "d": 6}
    # .8 is not strictly under .8; and no guard keeps the top class in the head
    assert split_head_tail(counts, 0.80, strict=True) == (["a"], ["b", "c", "d", "e"])
    assert split_head_tail(counts, 0.30, strict=True) == ([], ["a", "b", "c", "d", "e"])
    released = load_dataset(f"csv:{toy_csv}", head_tail="released")
    test_counts = released.class_counts("test").to_dict()
    assert released.head_tail() == split_head_tail(test_counts, released.threshold, strict=True)
    assert released.info()["head_tail_split"] == "released"
    with pytest.raises(GleeError, match="--head-tail"):
        load_dataset(f"csv:{toy_csv}", head_tail="nope")


def test_demo_is_long_tailed_split_by_text_and_reports_small_classes():
    demo = load_dataset("demo")
    info = demo.info()
    counts = list(info["class_counts"].values())
    assert counts == sorted(counts, reverse=True)
    assert info["imbalance_ratio"] > 25  # trivia (hundreds) down to single digits
    assert set(info["dropped_classes"]) == {"health"}  # too few conversations for 3 test texts
    assert any("health" in w for w in info["warnings"])
    assert info["head_tail_split"] == "train"
    train, test = set(demo.splits["train"]["text"]), set(demo.splits["test"]["text"])
    assert not train & test
    for split in ("train", "dev", "test"):  # every kept class appears in every split
        assert all(v > 0 for v in info["class_counts_by_split"][split].values())
    assert load_dataset("demo").fingerprint() == demo.fingerprint()  # deterministic


def test_the_demo_does_not_flatter():
    """No text twice anywhere (in or across splits), at least 3 distinct test texts per class,
    at least two head classes, and a real tail (the rarest class under 5% of the largest)."""
    demo = load_dataset("demo")
    assert demo.repeated_texts() == {"within": {"train": 0, "dev": 0, "test": 0}, "across": 0}
    texts = [t for frame in demo.splits.values() for t in frame["text"]]
    assert len(texts) == len(set(texts))
    test = demo.splits["test"]
    assert test.groupby("label")["text"].nunique().min() >= 3
    assert test["label"].nunique() == demo.num_classes == 20
    head, tail = demo.head_tail()
    assert len(head) >= 2 and len(tail) >= 10
    counts = demo.class_counts()
    assert counts.min() / counts.max() < 0.05


def test_inspect_counts_repeated_texts_within_and_across_splits(tmp_path):
    rows = [
        "text,label,split",
        "a b,x,train",
        "a b,x,train",
        "c d,y,train",
        "e f,x,train",
        "g h,y,train",
        "a b,x,test",
        "i j,y,test",
        "k l,x,dev",
        "m n,y,dev",
    ]
    path = tmp_path / "repeats.csv"
    path.write_text("\n".join(rows) + "\n")
    assert load_dataset(f"csv:{path}").repeated_texts() == {
        "within": {"train": 1, "dev": 0, "test": 0},
        "across": 1,
    }


def test_csv_dataset_with_default_columns_and_derived_verbalizer(toy_dataset):
    assert toy_dataset.classes[0] == "sports"
    assert set(toy_dataset.classes) == set(TOY_CLASSES)
    assert toy_dataset.verbalizer["tech_support"] == ["tech support"]
    sizes = {k: len(v) for k, v in toy_dataset.splits.items()}
    assert sizes["train"] > sizes["test"] > sizes["dev"] > 0


def test_csv_with_split_column_and_named_columns(tmp_path):
    frame = pd.DataFrame(
        {
            "sentence": ["x a", "y b", "x c", "y d", "x e", "y f"],
            "intent": ["p", "q", "p", "q", "p", "q"],
            "split": ["train", "train", "dev", "dev", "test", "test"],
        }
    )
    path = tmp_path / "named.csv"
    frame.to_csv(path, sep=";", index=False)
    dataset = load_dataset(f"csv:{path}")
    assert {k: len(v) for k, v in dataset.splits.items()} == {"train": 2, "dev": 2, "test": 2}
    with pytest.raises(GleeError, match="no text column named 'body'"):
        load_dataset(f"csv:{path}", text_column="body")


def test_columns_no_name_tells_apart_are_taken_by_their_contents(tmp_path):
    """A new user's reviews CSV (``review,issue``): the text was found by name and the label
    was not; the label is now the column whose values repeat, said in a warning, on the
    command line and in the app's pickers; with neither named, the longest values are the text."""
    from glee_core.data.csvfile import guess_columns

    frame = pd.DataFrame(
        {
            "id": [f"#{n}" for n in range(12)],
            "issue": ["late", "late", "late", "refund", "late", "refund"] * 2,
            "body": [f"the order {n} came an hour late and cold" for n in range(12)],
        }
    )
    assert guess_columns(frame) == {"text": "body", "label": "issue"}
    path = tmp_path / "reviews.csv"
    frame.to_csv(path, index=False)
    dataset = load_dataset(f"csv:{path}")
    assert set(dataset.classes) == {"late", "refund"}
    assert any("the label is taken from 'issue' by its contents" in w for w in dataset.warnings)
    assert any("the text is taken from 'body'" in w for w in dataset.warnings)
    frame[["body"]].to_csv(path, index=False)  # nothing repeats as a label would
    with pytest.raises(GleeError, match="cannot tell which column holds the label"):
        load_dataset(f"csv:{path}")


def test_verbalizer_matches_labels_case_insensitively_and_names_missing():
    assert parse_verbalizer({"True": "yes", "False": "no"}, ["false", "true"], "v") == {
        "false": ["no"],
        "true": ["yes"],
    }
    with pytest.raises(GleeError, match="'maybe'"):
        parse_verbalizer({"True": "yes"}, ["true", "maybe"], "v")
    assert derive_verbalizer(["money-fx", "a_b/c d"]) == {
        "money-fx": ["money fx"],
        "a_b/c d": ["a b c d"],
    }


@pytest.mark.parametrize(
    "template, message",
    [
        ("{text} is good", r"\[MASK\] exactly once"),
        ("It is [MASK].", "no text slot"),
        ("{body} [MASK]", "unknown slot"),
    ],
)
def test_bad_templates(template, message):
    with pytest.raises(GleeError, match=message):
        check_template(template)


def test_holdout_is_stratified_and_keeps_singletons_in_train():
    frame = pd.DataFrame(
        {
            "text": [f"t{i}" for i in range(23)],
            "text_b": "",
            "label": ["a"] * 20 + ["b"] * 2 + ["c"],
        }
    )
    keep, hold = stratified_holdout(frame, 0.1)
    assert hold["label"].value_counts().to_dict() == {"a": 2, "b": 1}
    assert "c" in set(keep["label"])


@needs_shared
def test_r8_reads_label_tab_text_and_makes_a_dev_split():
    r8 = load_dataset("r8", data_dir=SHARED_DATA)
    assert r8.num_classes == 8
    assert r8.class_counts().index[0] == "earn"
    assert len(r8.splits["train"]) + len(r8.splits["dev"]) == 5485
    assert r8.head_tail()[0] == ["earn"]
    assert r8.verbalizer["money-fx"] == ["money fx"]  # R52's label words
    assert "This is [MASK] news" in r8.template


@needs_shared
def test_paper_tsv_with_label2idx_order_and_case_mismatch():
    boolq = load_dataset("boolq", data_dir=SHARED_DATA)
    assert boolq.classes == ["false", "true"]  # label2idx order; TSV says True/False
    assert boolq.verbalizer == {"false": ["no"], "true": ["yes"]}
    assert boolq.has_text_b and boolq.batch_size == 2
    cmid = load_dataset("cmid", data_dir=SHARED_DATA)
    assert cmid.num_classes == 36 and cmid.max_length == 64


@needs_shared
def test_missing_train_split_says_which_file_and_where_to_get_it():
    with pytest.raises(GleeError, match=r"r52/train.tsv not found.*GeneZC/Glee"):
        load_dataset("r52", data_dir=SHARED_DATA)


def test_hf_dataset_from_a_local_folder(tmp_path):
    folder = tmp_path / "hfdata"
    folder.mkdir()
    frame = pd.DataFrame({"text": [f"w{i}" for i in range(30)], "label": ["a"] * 20 + ["b"] * 10})
    frame.to_csv(folder / "train.csv", index=False)
    frame.to_csv(folder / "test.csv", index=False)
    dataset = load_dataset(f"hf:{folder}")
    assert dataset.classes == ["a", "b"]
    assert len(dataset.splits["test"]) == 30 and len(dataset.splits["dev"]) > 0


def test_hf_dataset_unreachable_is_a_clear_error():
    with pytest.raises(GleeError, match="cannot load Hugging Face dataset"):
        load_dataset("hf:surely-not/a-dataset-xyz")


def test_unknown_dataset_and_missing_data_dir(monkeypatch):
    with pytest.raises(GleeError, match="unknown dataset 'nope'"):
        load_dataset("nope")
    monkeypatch.delenv("GLEE_DATA_DIR", raising=False)
    with pytest.raises(GleeError, match="--data-dir"):
        load_dataset("cmid")


def test_verbalizer_file_override(tmp_path, toy_csv):
    path = tmp_path / "v.json"
    path.write_text(json.dumps({c: "news" for c in TOY_CLASSES}))
    dataset = load_dataset(f"csv:{toy_csv}", verbalizer=path)
    assert set(w for ws in dataset.verbalizer.values() for w in ws) == {"news"}


def test_a_prompt_of_ones_own_makes_a_variant_whose_runs_stay_apart(tmp_path, toy_csv):
    """Label words or a template that differ from the dataset's own end its id in
    +prompt-<digest of both>, so their runs are never averaged with the dataset's; its own words
    given back keep its id."""
    own = load_dataset(f"csv:{toy_csv}")
    same, news, other = (tmp_path / f"{n}.json" for n in ("same", "news", "other"))
    same.write_text(verbalizer_json(own.verbalizer))
    news.write_text(json.dumps({c: "news" for c in TOY_CLASSES}))
    other.write_text(json.dumps({c: ["news", "story"] for c in TOY_CLASSES}))
    assert load_dataset(f"csv:{toy_csv}", verbalizer=same).id == own.id
    assert load_dataset(f"csv:{toy_csv}", template=own.template).id == own.id
    ids = {
        load_dataset(f"csv:{toy_csv}", **given).id
        for given in (
            {"verbalizer": news},
            {"verbalizer": other},
            {"template": "[MASK] : {text}"},
            {"verbalizer": news, "template": "[MASK] : {text}"},
        )
    }
    assert len(ids) == 4
    assert all(re.fullmatch(re.escape(own.id) + r"\+prompt-[0-9a-f]{8}", i) for i in ids)
    assert load_dataset(f"csv:{toy_csv}", verbalizer=news).id in ids  # the same words: one id


def test_a_new_source_is_one_entry_in_the_registry(monkeypatch, toy_dataset, capsys):
    """load_dataset, the CLI's help and the names people see read the one registry."""
    from glee_core.cli import main
    from glee_core.data import datasets, sources
    from glee_core.data.catalog import dataset_name
    from glee_core.data.datasets import load_dataset

    asked = []

    def load(rest, threshold, columns, uploads_dir, keep_rare):
        asked.append(rest)
        return toy_dataset

    memo = sources.DataSource(
        "memo",
        "memo:KEY",
        "an in-memory set",
        lambda rest: rest.upper(),
        public=True,
        loader="glee_core.data.datasets:memo_source",
    )
    monkeypatch.setitem(sources.SOURCES, "memo", memo)
    monkeypatch.setattr(datasets, "memo_source", load, raising=False)  # its loader, by name
    assert load_dataset("memo:abc") is toy_dataset and asked == ["abc"]
    assert dataset_name("memo:abc") == "ABC" and dataset_name("csv:/srv/x/data.csv") == "data"
    assert "memo:KEY" in sources.source_usages()
    with pytest.raises(GleeError, match="csv:PATH, upload:NAME, hf:NAME"):
        load_dataset("nope:x")
    with pytest.raises(SystemExit):
        main(["inspect", "--help"])
    assert "upload:NAME (a CSV kept by the app" in " ".join(capsys.readouterr().out.split())


def test_rare_classes_are_named_in_one_message_and_can_be_kept_in_training(tmp_path, tiny_bert):
    """Classes too small for train, dev and test are left out with one message naming them, or
    (keep_rare) trained on and predicted but never scored, under an id of their own."""
    from glee_core.models.config import TrainConfig
    from glee_core.models.methods import get_method
    from glee_core.models.options import DataOptions
    from glee_core.runs.store import RunStore
    from glee_core.train.experiment import run_launch
    from glee_core.train.launch import Launch
    from glee_core.views.results_charts import per_class_f1_frame

    rows = ["text,label"]
    for k, count in enumerate([40, 20, 10, 2, 1, 2]):
        rows += [f"topic{k} words{k} item {i},class {k}" for i in range(count)]
    path = tmp_path / "rare.csv"
    path.write_text("\n".join(rows) + "\n")
    dropped = DataOptions(dataset=f"csv:{path}").load()
    assert set(dropped.dropped_classes) == {"class 3", "class 4", "class 5"}
    assert dropped.num_classes == 3 and not dropped.id.endswith("+rare")
    message = [w for w in dropped.warnings if "too few distinct texts" in w]
    assert len(message) == 1 and message[0].startswith("3 class(es) left out")
    assert "'class 4' (1)" in message[0]

    kept = DataOptions(dataset=f"csv:{path}", keep_rare="yes").load()
    assert kept.id == f"csv:{path}+rare" and kept.num_classes == 6
    assert set(kept.train_only_classes) == {"class 3", "class 4", "class 5"}
    assert not kept.dropped_classes and "kept in training only" in kept.warnings[-1]
    index = {c: i for i, c in enumerate(kept.classes)}
    rare = {index[c] for c in kept.train_only_classes}
    assert rare <= set(kept.splits["train"]["label"])
    assert not rare & (set(kept.splits["dev"]["label"]) | set(kept.splits["test"]["label"]))
    run = run_launch(
        Launch(
            kept,
            [get_method("cls-relu")],
            [1],
            str(tiny_bert),
            TrainConfig(mode="frozen", epochs=1),
            RunStore(tmp_path / "runs"),
        )
    )[0]
    assert run.dataset == kept.id  # never averaged with the runs of the split without them
    scored = [c for c, m in run.metrics.per_class.items() if m.support]
    f1 = [run.metrics.per_class[c].f1 for c in scored]
    assert run.metrics.f1 == pytest.approx(sum(f1) / len(f1))  # the unscored stay out of macro
    frame = per_class_f1_frame([run]).set_index("class")
    assert frame.loc["class 4", "f1"] != frame.loc["class 4", "f1"]  # no test text: no F1
