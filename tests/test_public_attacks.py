"""Public mode, round three: what a hostile visitor sends (label words, templates, files) is
refused in one line before it costs the Space anything, reaches no other visitor, and never
shows a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from glee_core.cli import main
from glee_core.core.errors import GleeError
from glee_core.data.datasets import load_dataset
from glee_core.data.encoding import check_label_tokens, check_template_fits
from glee_core.data.verbalizers import read_verbalizer_json
from glee_core.models.scoring import get_tokenizer
from glee_core.serve.inference import Scorer
from glee_core.serve.workspaces import Workspace
from tests.helpers.markdown import plain

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def public(monkeypatch, tmp_path, tiny_bert):
    for name in ("runs", "uploads", "workspaces", "data"):
        monkeypatch.setenv(f"GLEE_{name.upper()}_DIR", str(tmp_path / name))
    monkeypatch.setenv("GLEE_PUBLIC", "1")
    monkeypatch.setenv("GLEE_PUBLIC_MODELS", str(tiny_bert))
    return tmp_path


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
    assert any("Not used" in e and "the template has 4,215 characters" in e
               for e in errors(visitor_a)), errors(visitor_a)
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
            c: " | ".join(w) for c, w in words.items()}


def test_label_words_that_cost_too_much_are_refused_before_anything_runs(public, tiny_bert,
                                                                          tmp_path, capsys):
    """LW13 / LW12 / LW2 / LW2b / LW10: label words of many tokens, values that are not words,
    nesting, a file over 1 MB: one line on the Data page and on the command line, no traceback,
    nothing kept or trained."""
    demo = load_dataset("demo")
    many = dict(demo.verbalizer, trivia=["news today about"] * 6)  # 18 tokens for one class
    bad_values = [({**demo.verbalizer, "ai": 5}, "class 'ai' has the number 5"),
                  ({**demo.verbalizer, "ai": True}, "class 'ai' has true"),
                  ({**demo.verbalizer, "ai": [["deep"]]}, "class 'ai' has a list holding"),
                  ({**demo.verbalizer, "ai": {"a": 1}}, "class 'ai' has a JSON object"),
                  ({**demo.verbalizer, "ai": ["w"] * 11}, "class 'ai' has 11 label words"),
                  ({**demo.verbalizer, "ai": "x" * 60}, "a label word of 60 characters")]
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
    for raw, said in ((deep, "nested too deep"), (nan, "class 'ai' has the number nan"),
                      (b" " * (5 * 2**20), "larger than the 1 MB")):
        with pytest.raises(GleeError, match=said):
            read_verbalizer_json(raw, demo.classes, "words.json")
    assert not list((public / "workspaces").rglob(".label-words/*.json"))  # nothing kept
    for words, said in [(many, "more than 16 tokens"), (bad_values[0][0], "the number 5")]:
        path = tmp_path / "words.json"
        path.write_text(json.dumps(words))
        code = main(["train", "--dataset", "demo", "--method", "prompt", "--mode", "frozen",
                     "--model", str(tiny_bert), "--runs-dir", str(tmp_path / "runs"),
                     "--verbalizer", str(path)])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and err[-1].startswith("error: ") and said in err[-1], err
        assert "Traceback" not in "\n".join(err)
    code = main(["train", "--dataset", "demo", "--method", "prompt", "--mode", "frozen",
                 "--model", str(tiny_bert), "--runs-dir", str(tmp_path / "runs"),
                 "--template", "{text} " + "word " * 700 + "[MASK]"])
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
    with pytest.raises(GleeError, match=r"takes 44 tokens of the 48 an input may have, leaving "
                                        r"the text 4; shorten it to at most 36 tokens"):
        check_template_fits(tokenizer, template, 48)
    check_label_tokens(tokenizer, {"a": ["news today"], "b": ["news"]}, ["a", "b"])
    common = ["train", "--dataset", "demo", "--method", "prompt", "--mode", "frozen",
              "--model", str(tiny_bert), "--runs-dir", str(tmp_path / "runs")]
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


def test_an_unforeseen_error_reaches_a_visitor_as_one_line(public, monkeypatch):
    """Tracebacks with server paths reached visitors three ways; in public mode whatever a page
    did not foresee is one line with a reference (the traceback goes to the server's log)."""

    def script():
        import streamlit as st  # noqa: F401

        from studio_ui import run_page

        class Page:
            title = "broken"

            def run(self):
                raise RuntimeError("/srv/secret/path/of/the/owner went wrong")

        run_page(Page())

    at = AppTest.from_function(script, default_timeout=60).run()
    assert not at.exception
    said = errors(at)
    assert len(said) == 1 and "RuntimeError, reference" in said[0]
    assert "/srv/secret" not in said[0]
    monkeypatch.delenv("GLEE_PUBLIC")  # the owner's own machine: the traceback, as ever
    at = AppTest.from_function(script, default_timeout=60).run()
    assert at.exception
