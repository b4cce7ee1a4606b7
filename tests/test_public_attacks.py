"""Public mode, round three: what a hostile visitor sends (label words, templates, files) is
refused in one line before it costs the Space anything, reaches no other visitor, and never
shows a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from glee_core.cli import main
from glee_core.core.errors import GleeError
from glee_core.data.datasets import load_dataset
from glee_core.data.encoding import check_label_tokens, check_template_fits
from glee_core.data.verbalizers import read_verbalizer_json
from glee_core.models.scoring import get_tokenizer
from glee_core.serve.inference import Scorer
from glee_core.serve.workspaces import Workspace
from tests.helpers.jobs import finished
from tests.helpers.markdown import plain

ROOT = Path(__file__).resolve().parents[1]


def page(name: str, tiny_bert) -> AppTest:
    at = AppTest.from_file(str(ROOT / name), default_timeout=120)
    at.session_state["model"] = str(tiny_bert)
    return at


def give_words(at: AppTest, label_words: dict | bytes, template: str | None = None) -> AppTest:
    """The Data page's Label words: a JSON file (or raw bytes), a template, then the button."""
    raw = label_words if isinstance(label_words, bytes) else json.dumps(label_words).encode()
    at.file_uploader[1].upload("words.json", raw, "application/json").run()
    if template is not None:
        next(t for t in at.text_input if t.label == "Template").input(template).run()
    return next(b for b in at.button if b.label == "Use these label words").click().run()


def errors(at: AppTest) -> list[str]:
    return [plain(e.value) for e in at.error]


def test_a_long_template_is_refused_and_never_reaches_another_visitor(public, tiny_bert):
    """LW14 / LW5: visitor A's 700-word template on the demo was kept, and every later visitor's
    Playground on the demo failed with a traceback (a scorer cached by the texts alone); now it
    is refused before anything is kept, and B's zero-shot scores use the demo's own words even
    after A's own (accepted) words were scored."""
    demo = load_dataset("demo")
    visitor_a = page("app_pages/1_Data.py", tiny_bert).run()
    long = "{text} " + "about " * 700 + "[MASK] ."
    give_words(visitor_a, demo.verbalizer, long)
    assert any(
        "Not used" in e and "the template has 4,215 characters" in e for e in errors(visitor_a)
    ), errors(visitor_a)
    assert not visitor_a.exception
    assert visitor_a.session_state["dataset"].template is None  # nothing kept
    swapped = {c: demo.verbalizer[demo.classes[-1 - i]] for i, c in enumerate(demo.classes)}
    give_words(visitor_a, swapped, demo.template)
    assert not visitor_a.error and not visitor_a.exception
    a_play = page("app_pages/6_Playground.py", tiny_bert)
    a_play.session_state["workspace_key"] = visitor_a.session_state["workspace_key"]
    a_play.run()
    play_b = page("app_pages/6_Playground.py", tiny_bert).run()
    for at, words in ((a_play, swapped), (play_b, demo.verbalizer)):
        assert not at.exception and not at.error, errors(at)
        table = at.dataframe[0].value
        assert dict(zip(table["class"], table["label words"], strict=True)) == {
            c: " | ".join(w) for c, w in words.items()
        }


def test_label_words_that_cost_too_much_are_refused_before_anything_runs(
    public, tiny_bert, tmp_path, capsys
):
    """LW13 / LW12 / LW2 / LW2b / LW10: label words of many tokens, values that are not words,
    nesting, a file over 1 MB: one line on the Data page and on the command line, no traceback,
    nothing kept or trained."""
    demo = load_dataset("demo")
    many = dict(demo.verbalizer, trivia=["news today about"] * 6)  # 18 tokens for one class
    bad_values = [
        ({**demo.verbalizer, "ai": 5}, "class 'ai' has the number 5"),
        ({**demo.verbalizer, "ai": True}, "class 'ai' has true"),
        ({**demo.verbalizer, "ai": [["deep"]]}, "class 'ai' has a list holding"),
        ({**demo.verbalizer, "ai": {"a": 1}}, "class 'ai' has a JSON object"),
        ({**demo.verbalizer, "ai": ["w"] * 11}, "class 'ai' has 11 label words"),
        ({**demo.verbalizer, "ai": "x" * 60}, "a label word of 60 characters"),
    ]
    at = page("app_pages/1_Data.py", tiny_bert).run()
    give_words(at, many)
    assert any("'trivia' (18)" in e and "more than 16 tokens" in e for e in errors(at))
    for words, said in bad_values:
        at = page("app_pages/1_Data.py", tiny_bert).run()
        give_words(at, words)
        assert any(said in e for e in errors(at)), (said, errors(at))
        assert not at.exception
    deep = b"[" * 100_000 + b"]" * 100_000
    nan = json.dumps({**demo.verbalizer, "ai": float("nan")}).encode()
    for raw, said in (
        (deep, "nested too deep"),
        (nan, "class 'ai' has the number nan"),
        (b" " * (5 * 2**20), "larger than the 1 MB"),
    ):
        with pytest.raises(GleeError, match=said):
            read_verbalizer_json(raw, demo.classes, "words.json")
    assert not list((public / "workspaces").rglob(".label-words/*.json"))  # nothing kept
    for words, said in [(many, "more than 16 tokens"), (bad_values[0][0], "the number 5")]:
        path = tmp_path / "words.json"
        path.write_text(json.dumps(words))
        code = main(
            [
                "train",
                "--dataset",
                "demo",
                "--method",
                "prompt",
                "--mode",
                "frozen",
                "--model",
                str(tiny_bert),
                "--runs-dir",
                str(tmp_path / "runs"),
                "--verbalizer",
                str(path),
            ]
        )
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and err[-1].startswith("error: ") and said in err[-1], err
        assert not any("unexpected" in line for line in err)  # not the CLI's traceback path
    code = main(
        [
            "train",
            "--dataset",
            "demo",
            "--method",
            "prompt",
            "--mode",
            "frozen",
            "--model",
            str(tiny_bert),
            "--runs-dir",
            str(tmp_path / "runs"),
            "--template",
            "{text} " + "word " * 700 + "[MASK]",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and "the template has 3,513 characters" in err[-1], err
    assert not list((tmp_path / "runs").rglob("config.json"))  # nothing trained


def test_a_template_is_held_to_the_length_an_input_may_have(tiny_bert, tmp_path, capsys):
    """LW11: a template longer than the backbone's positions failed every input; now it must
    leave the text a quarter of --max-length, checked before training (and a --max-length past
    the backbone's positions is refused there too)."""
    tokenizer = get_tokenizer(str(tiny_bert))
    template = "{text} " + "news " * 40 + "[MASK] ."
    check_template_fits(tokenizer, template, 128)
    with pytest.raises(
        GleeError,
        match=r"takes 44 tokens of the 48 an input may have, leaving "
        r"the text 4; shorten it to at most 36 tokens",
    ):
        check_template_fits(tokenizer, template, 48)
    check_label_tokens({"a": [1, 2], "b": [3] * 16})
    with pytest.raises(GleeError, match=r"'b' \(17\)"):
        check_label_tokens({"a": [1, 2], "b": [3] * 17})
    common = [
        "train",
        "--dataset",
        "demo",
        "--method",
        "prompt",
        "--mode",
        "frozen",
        "--model",
        str(tiny_bert),
        "--runs-dir",
        str(tmp_path / "runs"),
    ]
    assert main([*common, "--template", template, "--max-length", "48"]) == 2
    assert "shorten it to at most 36 tokens" in capsys.readouterr().err
    assert main([*common, "--max-length", "4096"]) == 2
    assert "--max-length 4096 is longer than the 512 positions" in capsys.readouterr().err


def test_label_words_count_against_the_workspaces_disk(public, tiny_bert, monkeypatch):
    """LW6: label-word sets were written outside the workspace's disk limit."""
    demo = load_dataset("demo")
    at = page("app_pages/1_Data.py", tiny_bert).run()
    Workspace.create()  # another visitor's; the limit below is this visitor's alone
    monkeypatch.setenv("GLEE_SESSION_DISK_MB", "0.00001")
    swapped = {c: demo.verbalizer[demo.classes[-1 - i]] for i, c in enumerate(demo.classes)}
    give_words(at, swapped)
    assert any("Not used" in e and "Your workspace uses" in e for e in errors(at)), errors(at)
    assert not list((public / "workspaces").rglob(".label-words/*.json"))


def test_zero_shot_scorers_are_keyed_by_the_words_they_score(tiny_bert):
    demo = load_dataset("demo")
    other = load_dataset("demo")
    other.verbalizer = {**demo.verbalizer, "ai": ["coding"]}
    assert Scorer.zero_shot_key(demo) != Scorer.zero_shot_key(other)
    other.verbalizer, other.template = demo.verbalizer, "[MASK] : {text}"
    assert Scorer.zero_shot_key(demo) != Scorer.zero_shot_key(other)


def test_an_unforeseen_error_reaches_a_visitor_as_one_line(public, monkeypatch, tmp_path):
    """Tracebacks with server paths reached visitors three ways; in public mode whatever a page
    did not foresee is one line with a reference (the traceback goes to the server's log)."""

    script = tmp_path / "broken_page.py"
    script.write_text(
        "from studio_ui.navigation import run_page\n\n\n"
        "class Page:\n"
        "    title = 'broken'\n\n"
        "    def run(self):\n"
        "        raise RuntimeError('/srv/secret/path/of/the/owner went wrong')\n\n\n"
        "run_page(Page())\n"
    )
    at = AppTest.from_file(str(script), default_timeout=60).run()
    assert not at.exception
    said = errors(at)
    assert len(said) == 1 and "RuntimeError, reference" in said[0]
    assert "/srv/secret" not in said[0]
    # what no page can catch (a widget's callback): Streamlit's own details are off
    assert st.get_option("client.showErrorDetails") == "none"
    monkeypatch.delenv("GLEE_PUBLIC")  # the owner's own machine: the traceback, as ever
    at = AppTest.from_file(str(script), default_timeout=60).run()
    assert at.exception
    assert st.get_option("client.showErrorDetails") == "full"


def test_a_share_hands_out_no_model_unless_its_sharer_allows_it(public, tiny_bert):
    """EX7a: a visitor with a share link built the sharer's run as ONNX and downloaded it."""
    from glee_core.models.options import DataOptions
    from tests.helpers.synthetic_runs import synthetic_dataset, write_synthetic_run

    owner = Workspace.create()
    dataset_id = "upload:private-0123abcd.csv"
    write_synthetic_run(owner.store, synthetic_dataset(4, dataset_id), "cls-tanh", 1)
    mine = page("app_pages/3_Results.py", tiny_bert)
    mine.session_state["workspace_key"] = owner.key
    mine.run()
    next(t for t in mine.sidebar.toggle if t.label == "Share my runs read-only").set_value(
        True
    ).run()
    token = owner.path.joinpath(".share").read_text().strip()

    def visit() -> AppTest:
        at = page("app_pages/5_Predictions.py", tiny_bert)
        at.session_state["dataset"] = DataOptions(dataset=dataset_id)
        at.query_params["share"] = token
        return at.run()

    visitor = visit()
    assert not visitor.exception
    assert not any(b.label.startswith("Build the folder") for b in visitor.button)
    assert any("has not let viewers download its model" in c.value for c in visitor.caption)
    allow = next(c for c in mine.sidebar.checkbox if c.label == "Let them download my models too")
    allow.check().run()
    assert owner.shares_models
    assert any(b.label.startswith("Build the folder (") for b in visit().button)
    next(t for t in mine.sidebar.toggle if t.label == "Share my runs read-only").set_value(
        False
    ).run()
    assert not owner.shares_models  # a new share starts closed again


def test_one_address_can_fill_neither_the_machine_nor_its_minute(tmp_path):
    """A7b / A7c: cookie-less uploads of one client filled the machine's workspaces, and its
    creations used up the minute's global rate for everyone."""
    from glee_core.serve.policy import LimitReached

    root = tmp_path / "ws"
    made = [
        Workspace.create(root, limit=8, per_minute=30, visitor="a", per_visitor=2) for _ in range(2)
    ]
    for own in made:  # each holds an upload: not empty, never reclaimed
        own.uploads_dir.mkdir()
        (own.uploads_dir / "x-0123abcd.csv").write_text("text,label\n")
    with pytest.raises(LimitReached, match="This address already holds 2 workspaces"):
        Workspace.create(root, limit=8, per_minute=30, visitor="a", per_visitor=2)
    other = Workspace.create(root, limit=8, per_minute=30, visitor="b", per_visitor=2)
    assert other.path.is_dir()  # another address is not refused
    (made[0].uploads_dir / "x-0123abcd.csv").unlink()
    made[0].uploads_dir.rmdir()  # empty again: reclaimed to make room, however recent
    Workspace.create(root, limit=8, per_minute=30, visitor="a", per_visitor=2)
    assert not made[0].path.exists()
    for _ in range(2):  # a fifth of the minute's 10 is this address's
        Workspace.create(root, limit=8, per_minute=10, visitor="c", per_visitor=9)
    with pytest.raises(LimitReached, match="This address has made several workspaces"):
        Workspace.create(root, limit=8, per_minute=10, visitor="c", per_visitor=9)
    assert Workspace.create(root, limit=8, per_minute=10, visitor="d", per_visitor=2)


def test_the_visitor_is_the_address_the_trusted_proxy_appended(monkeypatch):
    """E3b: the first X-Forwarded-For entry, which a client writes itself, made six ids of one
    client; the entry the proxy appended (GLEE_TRUSTED_PROXIES from the end) does not move."""
    from glee_core.core import environment
    from studio_ui.access import hashed_address

    client = hashed_address("1.2.3.4", "10.0.0.9", 1)
    assert all(
        hashed_address(f"{forged}, 1.2.3.4", "10.0.0.9", 1) == client
        for forged in ("5.5.5.5", "6.6.6.6, 7.7.7.7", "x")
    )
    # no proxy: the header is the client's own words, the connection counts
    assert hashed_address("5.5.5.5", "10.0.0.9", 0) == hashed_address(None, "10.0.0.9", 0)
    # E3b: ... unless the server took the connection's address from the header (uvicorn trusts
    # it from 127.0.0.1): a loopback client writing a new address a request is one visitor
    forged = {hashed_address(f"{n}.{n}.{n}.{n}", f"{n}.{n}.{n}.{n}", 0) for n in range(1, 20)}
    assert len(forged) == 1 and forged != {hashed_address(None, "10.0.0.9", 0)}
    assert hashed_address("1.2.3.4, 9.9.9.9", "10.0.0.9", 2) == client
    monkeypatch.delenv("GLEE_TRUSTED_PROXIES", raising=False)
    monkeypatch.setenv("SPACE_ID", "someone/space")
    assert environment.trusted_proxies() == 1
    monkeypatch.delenv("SPACE_ID")
    assert environment.trusted_proxies() == 0


def test_a_data_report_is_the_visitors_and_within_the_launch_limit(public, tiny_bert, monkeypatch):
    """HB5: a 2,000-class upload's health check ran 289 s in the web process, the budget 20 min,
    neither with an estimate or a limit; HB1: a visitor without a workspace wrote the demo's
    report into the shared .none folder, where the next such visitor saw it. A report is a job
    like any launch: estimated, within the minutes a launch may take, in the visitor's
    workspace."""
    at = page("app_pages/1_Data.py", tiny_bert).run()
    check = next(b for b in at.button if b.label.startswith("Check the data's health ("))
    budget = next(b for b in at.button if b.label.startswith("Measure the label budget ("))
    assert check.label.endswith(("s)", "min)")) and budget.label.endswith(("s)", "min)"))
    monkeypatch.setenv("GLEE_SESSION_JOB_MINUTES", "0.0001")
    check.click().run()
    assert any(
        "This launch is estimated at" in e and "a launch here may take at most" in e
        for e in errors(at)
    ), errors(at)
    assert "workspace_key" not in at.session_state  # refused before anything was made
    monkeypatch.delenv("GLEE_SESSION_JOB_MINUTES")
    at = page("app_pages/1_Data.py", tiny_bert).run()
    next(b for b in at.button if b.label.startswith("Check the data's health (")).click().run()
    assert not at.exception and not at.error, errors(at)
    own = Workspace.open(at.session_state["workspace_key"])
    job = finished(own.store.root, "health")
    assert job.record.visitor  # the visitor's limits count it
    assert list(own.path.rglob("health.json"))
    assert not (public / "workspaces" / ".none").exists()
    other = page("app_pages/1_Data.py", tiny_bert).run()  # a new visitor sees no report
    assert not any("suspected label error" in c.value for c in other.caption)


def test_damaged_files_and_bad_outs_are_one_line_and_touch_nothing_of_the_users(
    tiny_bert, toy_csv, tmp_path, capsys
):
    """HB9: ``health --out`` a file failed after the whole check; EX9a: ``export --out`` a link;
    EX9b: ``export --out keep`` deleted the user's ``.keep.tmp`` beside it; EX8: a damaged export
    in the store was a traceback, and an emptied one was never rebuilt."""
    from glee_core.runs.store import RunStore
    from glee_core.serve.export import staged
    from glee_core.serve.inference import OnnxScorer

    def last_error() -> str:
        err = capsys.readouterr().err.strip().splitlines()
        assert err and err[-1].startswith("error: ") and "Traceback" not in "\n".join(err), err
        return err[-1]

    a_file = tmp_path / "report.txt"
    a_file.write_text("mine")
    assert (
        main(
            [
                "health",
                "--dataset",
                f"csv:{toy_csv}",
                "--model",
                str(tiny_bert),
                "--runs-dir",
                str(tmp_path / "runs"),
                "--out",
                str(a_file),
            ]
        )
        == 2
    )
    assert "is a file; give a folder" in last_error() and a_file.read_text() == "mine"
    assert not (tmp_path / "runs").exists()  # refused before the check ran
    runs = tmp_path / "runs"
    assert (
        main(
            [
                "train",
                "--dataset",
                f"csv:{toy_csv}",
                "--method",
                "cls-tanh",
                "--mode",
                "frozen",
                "--pooling",
                "cls",
                "--choose-by",
                "dev",
                "--epochs",
                "1",
                "--model",
                str(tiny_bert),
                "--runs-dir",
                str(runs),
            ]
        )
        == 0
    )
    [run] = RunStore(runs).runs()
    empty = tmp_path / "empty"
    empty.mkdir()
    (tmp_path / "link").symlink_to(empty)
    assert main(["export", "--run", str(run.path), "--out", str(tmp_path / "link")]) == 2
    assert "is a symbolic link" in last_error()
    users = tmp_path / ".keep.tmp"
    users.mkdir()
    (users / "notes.txt").write_text("the user's")
    with staged(tmp_path / "keep") as folder:
        (folder / "f").write_text("x")
    assert (users / "notes.txt").read_text() == "the user's"
    assert (tmp_path / "keep" / "f").is_file()
    assert oct((tmp_path / "keep").stat().st_mode & 0o777) != oct(0o700)
    texts = tmp_path / "texts.csv"
    texts.write_text("text\nsports today\nmoney news\n")
    out = tmp_path / "out.csv"
    common = [
        "predict",
        "--run",
        str(run.path),
        "--input",
        str(texts),
        "--out",
        str(out),
        "--engine",
        "onnx",
    ]
    assert main(common) == 0
    export = RunStore(runs).exports_dir / f"{run.run_id}-onnx"
    (export / "glee_onnx.json").write_text('{"classes": ["a"')  # truncated
    assert main(common) == 0  # the store's own export: made again
    assert "exporting it again" in capsys.readouterr().err
    for name in [p.name for p in export.iterdir()]:
        (export / name).unlink() if (export / name).is_file() else None
    assert main(common) == 0 and (export / "glee_onnx.json").is_file()  # emptied: rebuilt
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "glee_onnx.json").write_text('{"classes": ["a"], "model": "model.onnx"}')
    (garbage / "model.onnx").write_bytes(b"not a graph")
    with pytest.raises(GleeError, match="damaged ONNX classifier"):
        OnnxScorer.from_folder(garbage)
    assert (
        main(["predict", "--classifier", str(garbage), "--input", str(texts), "--out", str(out)])
        == 2
    )
    assert "damaged ONNX classifier" in last_error()


@pytest.mark.parametrize(
    "values, why",
    [
        ({"grid": "1e-3", "rounds": [], "chosen": None}, "grid is"),
        ({"grid": ["0.001"], "rounds": [{"kept": 5}], "chosen": None}, "rounds are not"),
        ({"grid": ["0.001"], "rounds": [], "chosen": ["0.001"]}, "chosen is"),
        ({"grid": ["nan"], "rounds": [], "chosen": "nan", "run_id": "r"}, "not a learning rate"),
        ({"grid": ["-5"], "rounds": [], "chosen": "-5", "run_id": "r"}, "not a learning rate"),
        ({"grid": ["1e9"], "rounds": [], "chosen": "1e9", "run_id": "r"}, "not a learning rate"),
        ([1, 2], "not a JSON object"),
        *(  # RS5d: a round's record of how sure its cut was, damaged
            (
                {"grid": ["0.001"], "rounds": [{"round": 1, "kept": ["0.001"], "sure": sure}]},
                "not how sure its cut was",
            )
            for sure in (
                "abc",
                {"kept": "0.001", "over": "0.002"},
                {"kept": "0.001", "over": "0.002", "share": "0.5"},
                {"kept": "0.001", "over": "0.002", "share": 7},
                {"kept": 1, "over": "0.002", "share": 0.5},
            )
        ),
    ],
)
def test_a_damaged_search_log_is_set_aside_not_trained_on(tmp_path, values, why):
    """RS5a / RS5b / RS5d: a search, race or shared-rate log with wrong types (a rate, a round,
    how sure a round's cut was) ended every relaunch in a traceback; a logged rate of nan, -5 or
    1e9 was trained on without a word."""
    from glee_core.models.search_log import SearchLog

    log = SearchLog(tmp_path, "run-1", shared="key")
    for name in ("run-1", "shared-key"):
        (tmp_path / f"{name}.json").write_text(json.dumps(values))
    assert log.shared() is None and log.resumed(["0.001"]) is None
    notes = log.take_notes()
    assert notes and all("set aside" in n for n in notes) and any(why in n for n in notes)
    assert (tmp_path / "shared-key.json.damaged").is_file()
    assert not (tmp_path / "shared-key.json").exists()


def test_a_folder_named_like_a_cpu_job_stops_no_sampler_and_no_page(
    public, tiny_bert, tmp_path, monkeypatch
):
    """BS2: a folder ``123-x.job`` in the CPU jobs' folder (shared by the machine's users) made
    ``live_cpu_jobs`` raise IsADirectoryError: the sampler thread died and every Train page
    showed the traceback with the server's path."""
    from glee_core.core.environment import live_cpu_jobs
    from glee_core.runs.busy import BusySampler

    folder = tmp_path / "cpu-jobs"
    (folder / "123-x.job").mkdir(parents=True)
    (folder / "456-y.job").mkdir()
    monkeypatch.setenv("GLEE_CPU_JOBS_DIR", str(folder))
    assert live_cpu_jobs(folder) == []
    sampler = BusySampler()
    assert sampler.sample() is not None and sampler.value() >= 1.0
    at = page("app_pages/2_Train.py", tiny_bert).run()
    assert not at.exception and not any("IsADirectoryError" in e for e in errors(at))
    assert any("Estimated time" in i.value for i in at.info)


def test_a_damaged_adaptation_checkpoint_is_one_line_and_set_aside(
    toy_csv, tiny_bert, tmp_path, capsys
):
    """RS6b: a garbage ``adapt`` checkpoint was a traceback; now one line, the checkpoint set
    aside, and the next run starts anew."""
    partial = tmp_path / ".ok.partial"
    partial.mkdir()
    (partial / "state.json").write_text('{"key": 3, "epoch": "x"}')
    (partial / "state.pt").write_bytes(b"garbage")
    args = [
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
    ]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        "cannot be read" in err[-1] and "set aside" in err[-1] and "Traceback" not in "\n".join(err)
    )
    assert (tmp_path / ".ok.partial.damaged").is_dir() and not partial.exists()
    assert main(args) == 0


def test_a_launch_whose_own_pace_runs_far_past_its_limit_is_stopped(
    tiny_bert, toy_csv, tmp_path, capsys, monkeypatch
):
    """E5: LoRA of rank 512 at batch 1 for 100 epochs was estimated at 23 min, launched under a
    30-min cap, and paced at 12 h while the bar trusted the estimate. Once its pace is known
    the job stops with one line, and the time left follows the pace, not the estimate."""
    from glee_core.core.events import RunStarted, TrainStep
    from glee_core.core.pace import PaceGuard, time_left

    clock = [0.0]
    seen = []
    guard = PaceGuard(30 * 60, seen.append, stop=0.75, clock=lambda: clock[0])
    guard(RunStarted(run_id="r", method="cls-relu", seed=1, index=1, total=1, cached=False))
    with pytest.raises(
        GleeError,
        match=r"at its own pace this launch would take about "
        r"9\.0 h, over the 30 min",
    ):
        for step in range(1, 1000):  # 0.69 s a step of 62,400 planned (75% expected): 9 h
            clock[0] = step * 0.69
            guard(TrainStep(epoch=1, epochs=100, step=step, steps=624, done=step, total=62_400))
    assert 30 < clock[0] < 35  # as soon as its pace is known
    assert len(seen) == step + 1  # every event passed on first, the last too
    # the bar: 1% done after 7.2 min of a job estimated at 23 min says hours, not minutes
    assert time_left(0.01, 7.2 * 60, 23 * 60) > 10 * 3600
    assert time_left(0.01, 14, 23 * 60) == pytest.approx(23 * 60 - 14)  # on pace
    # end to end: a public job's process stops at its own pace with one error line
    monkeypatch.setattr("glee_core.core.pace.PACE_KNOWN_AFTER", 2.0)
    monkeypatch.setenv("GLEE_JOB_SECONDS", "0.5")
    code = main(
        [
            "train",
            "--dataset",
            f"csv:{toy_csv}",
            "--method",
            "cls-relu",
            "--model",
            str(tiny_bert),
            "--runs-dir",
            str(tmp_path / "runs"),
            "--epochs",
            "300",
            "--batch-size",
            "1",
            "--lp-ft",
            "no",
            "--lr",
            "1e-4",
            "--patience",
            "1000",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("error: stopped: at its own pace"), err[-3:]
    assert not list((tmp_path / "runs").rglob("config.json"))


def test_control_characters_in_texts_are_written_out_in_tables():
    """A backspace in a text drew as an empty box in the Data page's sample rows."""
    from studio_ui.text import visible

    assert visible("bingo\x08 fortune\tx\n") == "bingo\\x08 fortune\tx\n"


def test_a_name_in_a_code_span_reads_as_itself_whatever_it_holds():
    """A file name in a code span showed Markdown's escapes (``upload\\-fortunes\\_labelled``,
    issue #80); a name holding backticks or a line break cannot close the span early."""
    from studio_ui.text import code

    assert code("upload-fortunes_labelled-3ed7.csv") == "`upload-fortunes_labelled-3ed7.csv`"
    assert code("a`b") == "``a`b``" and code("``x") == "``` ``x ```"
    assert code("two\nlines") == "`two lines`"
