import io
import json
import re
import shutil
from dataclasses import replace

import pandas as pd
import pytest
import torch
from pypdf import PdfReader

from glee_core.budget.report import read_budget
from glee_core.cli import main
from glee_core.core.errors import GleeError
from glee_core.models.config import TrainConfig
from glee_core.models.methods import get_method
from glee_core.runs.store import RunStore
from glee_core.runs.tables import _options_apart, backbone_text, modes_table
from glee_core.train.experiment import run_launch
from glee_core.train.launch import Launch
from glee_core.views.charts import RUN_CHARTS
from glee_core.views.data_charts import chart_class_frequency, class_frequency_frame
from glee_core.views.norm_charts import chart_weight_norms, weight_norm_frame
from glee_core.views.report import build_report


@pytest.fixture(scope="module")
def store(tmp_path_factory, tiny_bert, toy_dataset):
    store = RunStore(tmp_path_factory.mktemp("report") / "runs")
    run_launch(
        Launch(
            toy_dataset,
            [get_method(m) for m in ("cls-tanh", "cls-relu-pt-ln", "prompt")],
            [1, 2],
            str(tiny_bert),
            TrainConfig(epochs=2, batch_size=16, lr=3e-3, recipe="paper"),
            store,
        )
    )
    return store


def test_report_holds_the_table_numbers_the_charts_and_page_numbers(store):
    runs = store.runs()
    reader = PdfReader(io.BytesIO(build_report(runs)))
    text = "\n".join(page.extract_text() for page in reader.pages)
    assert len(reader.pages) >= 2
    assert f"page 1/{len(reader.pages)}" in text
    assert "CLS-tuning ∘ R w/ pt. LN" in text and "Prompt-tuning" in text
    for method in ("cls-tanh", "cls-relu-pt-ln", "prompt"):
        f1 = [100 * r.metrics.f1 for r in runs if r.method == method]
        mean = sum(f1) / 2
        std = (sum((x - mean) ** 2 for x in f1) / 2) ** 0.5
        assert f"{mean:.2f} ± {std:.2f}" in text, method
    images = sum(len(page.images) for page in reader.pages)
    in_report = [c.title for c in RUN_CHARTS.values() if c.in_report]
    # frequency, head/tail, per-class F1, norms, norm against count, features; a chart taller
    # than a page is printed in slices, one a page, so its type keeps its size
    assert len(in_report) == 6 and images >= len(in_report)
    assert all(title in text for title in in_report)
    footer = re.compile(r"Glee Studio report · page \d+/\d+")
    assert all(
        page.images or footer.sub("", page.extract_text()).strip() for page in reader.pages
    )  # no blank page
    assert reader.pages[0].mediabox.width == pytest.approx(595.28, abs=1)  # A4


def pdf_words(pdf: bytes) -> str:
    """A PDF's text with one space between words: a justified line's wider gaps read back as
    two spaces or more, as many as the line's length (a temporary folder's name in it) makes."""
    return " ".join("\n".join(p.extract_text() for p in PdfReader(io.BytesIO(pdf)).pages).split())


def test_the_report_draws_the_label_budget_the_data_page_measured(
    store, tmp_path, tiny_bert, toy_dataset
):
    """A budget measured for the runs' dataset (the Data page writes it beside the runs) is a
    section of the report, from the command line too; another dataset's is not."""
    from glee_core.budget.curves import label_budget
    from glee_core.budget.options import BudgetOptions
    from glee_core.models.backbone import load_backbone
    from glee_core.models.features import Encoder

    folder = store.data_report_dir(toy_dataset.id, str(tiny_bert))
    encoder = Encoder(load_backbone(str(tiny_bert)), torch.device("cpu"), store.features_dir)
    options = BudgetOptions(out=str(folder), seeds="1", fractions="0.5,1")
    report = label_budget(toy_dataset, encoder, str(tiny_bert), options)
    report.write(folder)
    budget = read_budget(folder)
    text = pdf_words(build_report(store.runs(), budget=budget))
    assert "Label budget: cls-relu-pt-ln on the" in text
    assert "Label budget" not in pdf_words(
        build_report(store.runs(), budget=replace(budget, dataset="another"))
    )
    out = tmp_path / "b.pdf"
    assert main(["report", "--runs-dir", str(store.root), "--out", str(out)]) == 0
    assert "Label budget: cls-relu-pt-ln" in pdf_words(out.read_bytes())
    shutil.rmtree(folder)  # the other tests' reports are as before


def test_report_command_writes_the_pdf(store, tmp_path, capsys):
    out = tmp_path / "r.pdf"
    assert main(["report", "--runs-dir", str(store.root), "--out", str(out)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["runs"] == 6 and out.read_bytes()[:5] == b"%PDF-"


def test_report_of_several_settings_takes_the_recommended_one_and_names_the_others(
    store, tmp_path, tiny_bert, toy_dataset, capsys
):
    """A quick compare after a fine-tune leaves several settings (each pooling is one): the
    report takes the recommended candidate's, says so and lists the others as short ids that
    --setting takes back; a wrong id or dataset is one error naming what the store holds."""
    with pytest.raises(GleeError, match="no finished runs"):
        build_report([])
    frozen = run_launch(
        Launch(
            toy_dataset,
            [get_method("cls-tanh")],
            [1],
            str(tiny_bert),
            TrainConfig(epochs=1, mode="frozen"),
            RunStore(store.root),
        )
    )
    with pytest.raises(GleeError, match="several settings"):
        build_report(store.runs())
    capsys.readouterr()
    assert (
        main(
            [
                "report",
                "--runs-dir",
                str(store.root),
                "--backbone",
                "frozen",
                "--out",
                str(tmp_path / "f.pdf"),
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "note: the store holds runs of 2 settings; this is the recommended candidate's" in err
    other = re.search(r"pass --setting ([0-9a-f]{8}) ", err).group(1)
    assert (
        main(
            [
                "report",
                "--runs-dir",
                str(store.root),
                "--setting",
                other,
                "--out",
                str(tmp_path / "other.pdf"),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "report",
                "--runs-dir",
                str(store.root),
                "--setting",
                "nope",
                "--out",
                str(tmp_path / "x.pdf"),
            ]
        )
        == 2
    )
    assert f"--setting {other} (" in capsys.readouterr().err
    assert (
        main(
            [
                "report",
                "--runs-dir",
                str(store.root),
                "--dataset",
                "demo",
                "--out",
                str(tmp_path / "x.pdf"),
            ]
        )
        == 2
    )
    assert f"it holds runs of: {toy_dataset.id} (--dataset ID)" in capsys.readouterr().err
    assert {r.record.mode for r in frozen} == {"frozen"} and len(frozen) == 2
    # cls-tanh, now in two modes: the report puts them side by side
    text = "\n".join(p.extract_text() for p in PdfReader(tmp_path / "f.pdf").pages)
    assert "How to tune: each head under every mode" in text
    assert "fine-tuned" in text and "frozen backbone" in text
    # each row names its backbone, so an adapted backbone's row is told from the original's
    section = text[text.index("How to tune: each head under every mode") :]
    section = section[: section.index("Every setting the store holds")]
    # one row a pooling of the quick compare
    assert " ".join(section.split()).count(f"frozen backbone (quick compare) {tiny_bert.name}") == 2
    assert "Head Mode Backbone Protocol Seeds" in " ".join(section.split())


def test_modes_table_shows_scores_first_and_folders_by_their_name(store, tiny_bert):
    frame = modes_table(store.runs(), "prompt")
    assert list(frame.columns)[:4] == ["mode", "options", "backbone", "seeds"]
    assert list(frame.columns)[-1] == "protocol"  # the long cell last: the scores show first
    assert set(frame["backbone"]) == {tiny_bert.name}
    assert backbone_text("bert-base-uncased") == "bert-base-uncased"
    assert backbone_text("GeneZC/some-model") == "GeneZC/some-model"  # a hub id stays whole
    assert backbone_text("./runs/backbones/demo-10ep") == "demo-10ep"


def test_modes_table_names_what_sets_a_row_apart_from_its_modes_other_rows():
    """Rows of one mode read alike up to their protocol's end: the options column says which
    is the self-ensemble and which the plain fine-tune."""
    protocols = pd.Series(
        [
            "practical recipe · 10 ep · self-ensemble",
            "practical recipe · 10 ep",
            "practical recipe · 10 ep · supcon 0.3 · layer decay 0.9",
        ]
    )
    assert _options_apart(protocols).tolist() == [
        "self-ensemble",
        "–",
        "supcon 0.3 · layer decay 0.9",
    ]
    assert _options_apart(pd.Series(["10 ep · mean pooling"])).tolist() == ["–"]


def test_chart_data_is_ordered_head_to_tail(store):
    runs = [r for r in store.runs() if r.record.mode == "finetune"]
    frame = weight_norm_frame(runs)
    prompt = frame[frame["method"] == "prompt"].sort_values("rank")
    assert list(prompt["class"]) == runs[0].record.dataset.order
    mean_norm = sum(r.weight_norms["sports"] for r in runs if r.method == "prompt") / 2
    assert prompt.iloc[0]["norm"] == pytest.approx(mean_norm)
    chart_weight_norms(runs).to_dict()  # a valid Vega-Lite spec
    counts = {"a": 5, "b": 20, "c": 1}
    freq = class_frequency_frame(counts, ["b"])
    assert list(freq["class"]) == ["b", "a", "c"] and list(freq["group"]) == [
        "head",
        "tail",
        "tail",
    ]
    spec = chart_class_frequency(counts, ["b"], log_scale=True).to_dict()
    assert spec["layer"][0]["encoding"]["y"]["scale"]["type"] == "log"


def test_one_class_can_be_highlighted_across_charts(store):
    runs = [r for r in store.runs() if r.record.mode == "finetune"]
    for spec in (
        chart_weight_norms(runs, highlight="food").to_dict(),
        chart_class_frequency({"food": 3, "money": 9}, ["money"], highlight="food").to_dict(),
    ):
        text = json.dumps(spec)
        assert '"opacity"' in text and "food" in text


def test_notes_that_differ_only_by_method_are_said_once():
    from glee_core.models.config import TrainConfig
    from glee_core.models.methods import get_method
    from glee_core.runs.notes import merged_notes
    from glee_core.runs.record import DatasetRecord, ModelRecord, RunRecord

    def record(method, notes):
        return RunRecord(
            run_id=method,
            dataset=DatasetRecord(id="d"),
            model=ModelRecord("m"),
            method=get_method(method),
            seed=1,
            hyperparameters=TrainConfig(recipe="paper"),
            notes=notes,
        )

    head = "so `{}` cannot show the paper's advantage here."
    pool = "{}: plain input read at the cls pooling, but 'm' is a sentence encoder"
    merged = merged_notes(
        [
            record("prompt", [head.format("prompt")]),
            record(
                "cls-relu-pt-ln", [head.format("cls-relu-pt-ln"), pool.format("cls-relu-pt-ln")]
            ),
            record("cls-relu", [pool.format("cls-relu"), "a note of its own"]),
        ]
    )
    assert merged == sorted(
        [
            "so `prompt`, `cls-relu-pt-ln` cannot show the paper's advantage here.",
            pool.format("cls-relu-pt-ln, cls-relu"),
            "a note of its own",
        ]
    )


@pytest.mark.slow
def test_a_report_of_1500_classes_pools_the_rare_ones_and_says_how_far_it_got(tmp_path):
    """vl-convert overflowed its stack at ~1,500 classes, and 1,000 took 30 s in the page's
    thread: per-class charts now name the head's classes and pool the rarer ones by rank."""
    from glee_core.views.results_charts import chart_per_class_f1
    from glee_core.views.style import CLASS_ROWS
    from tests.helpers.synthetic_runs import write_synthetic_store

    runs = write_synthetic_store(RunStore(tmp_path), 1500, ["cls-tanh", "prompt"])
    heard = []
    pdf = build_report(runs, progress=lambda fraction, what: heard.append((fraction, what)))
    text = "\n".join(page.extract_text() for page in PdfReader(io.BytesIO(pdf)).pages)
    assert "left out" not in text
    fractions = [f for f, _ in heard]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert any("per-class f1" in what for _, what in heard)
    grid = chart_per_class_f1(runs).to_dict()
    assert "the 1440 rarest classes pooled in runs of 24" in grid["title"]
    drawn = {row["class"] for rows in grid["datasets"].values() for row in rows}
    assert len(drawn) == CLASS_ROWS and "class 0060" in drawn  # the head's classes named
    assert "24 classes, ranks 1477–1500" in drawn


def test_a_chart_that_cannot_be_drawn_is_left_out_with_the_reason(store, monkeypatch):
    from glee_core.views import report

    real = report.chart_png

    def fails_on_norms(chart, scale=2.0):
        if "weight norms" in str(chart.to_dict().get("title", "")).lower():
            raise ValueError("Vega-Lite to PNG conversion failed: Maximum call stack size")
        return real(chart, scale)

    monkeypatch.setattr(report, "chart_png", fails_on_norms)
    pdf = build_report([r for r in store.runs() if r.record.mode == "finetune"])
    text = "\n".join(page.extract_text() for page in PdfReader(io.BytesIO(pdf)).pages)
    assert "Weight norms (Figure 3): left out, it could not be drawn" in text
    assert "Per-class F1" in text  # the other charts are there


def test_every_registered_chart_is_on_a_page_that_exists():
    from pathlib import Path

    folder = Path(__file__).parents[1] / "app_pages"
    pages = {p.stem.split("_", 1)[1] for p in folder.glob("*.py")}
    assert {c.page for c in RUN_CHARTS.values()} <= pages


def test_a_chart_taller_than_a_page_is_cut_between_panels_and_titled_again(tmp_path):
    """Panels (dark bands) with white between them: every slice ends in the white, never in a
    panel, and each continuation page repeats the chart's title."""
    import numpy as np
    from fpdf import FPDF
    from PIL import Image

    from glee_core.views.report import _place_chart, blank_rows, slice_rows

    pixels = np.full((3000, 400), 255, dtype=np.uint8)
    # each panel under its title (a 10-row line, 6 white rows above the panel), 50 white rows
    # between one panel and the next one's title
    panels = [(40 + i * 330, 40 + i * 330 + 280) for i in range(9)]
    for start, end in panels:
        pixels[start:end, 20:380] = 30
        pixels[start - 16 : start - 6, 100:300] = 0
    image = Image.fromarray(pixels)
    cuts = blank_rows(image)
    top, ends = 0, []
    while top < 3000:
        top += slice_rows(top, 3000, 1038, cuts)  # a page that would end under a title
        ends.append(top)
    assert ends[-1] == 3000  # never in a panel, nor between a panel and its title:
    assert all(not any(s - 16 < e < t for s, t in panels) for e in ends), ends
    pdf = FPDF(format="A4", unit="mm")
    pdf.body_font = "helvetica"
    pdf.add_page()
    buffer = __import__("io").BytesIO()
    image.save(buffer, format="PNG")
    _place_chart(pdf, "Tall chart", buffer.getvalue())
    path = tmp_path / "tall.pdf"
    pdf.output(str(path))
    pages = [p.extract_text() for p in PdfReader(path).pages]
    assert len(pages) > 1 and pages[0].startswith("Tall chart")
    assert all("Tall chart (continued)" in p for p in pages[1:])


def test_a_chart_that_does_not_fit_the_room_left_begins_there_cut_above_a_panel_title(tmp_path):
    """Two rows of panels, each under a two-line title as far from its panel as the rows are
    apart (the head-vs-tail chart's shape): at a page's foot with room for one row, the chart
    begins there (no page left mostly blank) and the cut goes above the second row's title,
    which moves with its panel."""
    import io

    import numpy as np
    from fpdf import FPDF
    from PIL import Image

    from glee_core.views.report import _place_chart, blank_rows

    pixels = np.full((1250, 1100), 255, dtype=np.uint8)
    for title, panel in (((47, 91), (118, 588)), ((627, 671), (698, 1168))):
        pixels[title[0] : title[0] + 20, 400:700] = 0  # two lines of a title
        pixels[title[1] - 18 : title[1], 400:700] = 0
        pixels[panel[0] : panel[1], 100:1000] = 40
    image = Image.fromarray(pixels)
    cuts = blank_rows(image)
    assert not any(91 < c < 118 or 671 < c < 698 for c in cuts), cuts  # title | panel
    assert any(588 < c < 627 for c in cuts), cuts  # between the rows
    pdf = FPDF(format="A4", unit="mm")
    pdf.body_font = "helvetica"
    pdf.add_page()
    pdf.set_y(pdf.page_break_trigger - 120)  # room for the first row, not the whole chart
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    _place_chart(pdf, "Head vs tail", buffer.getvalue())
    path = tmp_path / "foot.pdf"
    pdf.output(str(path))
    pages = [p.extract_text() for p in PdfReader(path).pages]
    assert len(pages) == 2
    assert "Head vs tail" in pages[0] and "Head vs tail (continued)" in pages[1]
