"""The PDF report of one dataset's runs: configuration, results table, and the app's charts.

The charts are the very ``glee_core.views.charts`` functions the app draws, exported to PNG with
``vl-convert-python`` and laid out on A4 pages (with page numbers) by ``fpdf2``.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import vl_convert
from fpdf import FPDF
from PIL import Image

from ..budget.report import BudgetReport, budget_line
from ..core.errors import GleeError
from ..core.files import write_atomic
from ..models.methods import method_label, registry_order
from ..models.modes import MODE_LABELS
from ..runs.calibration import calibrate, calibration_table
from ..runs.notes import merged_notes
from ..runs.record import METRIC_TITLES, SHOT_TITLES
from ..runs.store import Run
from ..runs.tables import aggregate, comparison_table, modes_table
from . import charts
from .data_charts import chart_label_budget
from .style import FACET_GAP, PDF_WIDTH

FONT_FOLDERS = (
    "/usr/share/fonts/truetype/dejavu",
    "/usr/share/fonts/dejavu",
    "/usr/share/fonts/TTF",
)  # DejaVu Sans: Greek, symbols (∘, η, ±) for the row names


CHART_SCALE = 2.0  # PNG pixels per chart px (sharp print)


def chart_png(chart, scale: float = CHART_SCALE) -> bytes:
    """An Altair chart as PNG bytes (``width="container"`` charts get a fixed page width)."""
    spec = chart.to_dict()
    if spec.get("width") == "container":  # (FILL_WIDTH) the whole chart fits the page
        spec["width"] = PDF_WIDTH
    # one font with the row names' symbols (∘, η), so no glyph falls back to a serif face
    spec.setdefault("config", {}).setdefault("font", "DejaVu Sans")
    return vl_convert.vegalite_to_png(spec, scale=scale)


def _pdf_class():
    class ReportPDF(FPDF):
        def footer(self):
            self.set_y(-12)
            self.set_font(self.body_font, size=8)
            self.set_text_color(120)
            self.cell(0, 8, f"Glee Studio report · page {self.page_no()}/{{nb}}", align="C")

    return ReportPDF


def _text(unicode_font: bool, text: str) -> str:
    """Core PDF fonts are latin-1 only: without a Unicode font, replace what they cannot draw."""
    text = text.replace("`", "")  # Markdown code spans, from notes written for the app
    if unicode_font:
        return text
    text = text.replace("∘", "o").replace("η", "eta").replace("→", "->").replace("‖", "||")
    return text.encode("latin-1", "replace").decode("latin-1")


ReportProgress = Callable[[float, str], None]  # (fraction done, what is being drawn)


def build_report(
    runs: list[Run],
    dataset: str | None = None,
    progress: ReportProgress | None = None,
    every: list[Run] | None = None,
    budget: BudgetReport | None = None,
) -> bytes:
    """The report of ``runs`` (all of one dataset and setting) as PDF bytes; ``progress`` hears
    of each part as it is drawn. A chart that cannot be drawn is left out with a line saying
    why. ``every``: the dataset's runs in any setting, for the section that puts each head's
    modes side by side (left out when no head was tuned in two modes); ``budget``: the
    dataset's label budget (``budget.report.BudgetReport``), drawn after the run charts."""
    progress = progress or (lambda fraction, what: None)
    runs = _one_setting(runs, dataset)
    pdf, t = _new_pdf()
    _title_section(pdf, runs, t)
    progress(0.05, "the results table")
    _results_section(pdf, runs, t)
    _modes_section(pdf, runs, every or [], t)
    _charts_section(pdf, runs, t, progress)
    if budget is not None and budget.dataset == runs[0].dataset:
        progress(0.88, "drawing the label budget")
        _budget_section(pdf, budget, t)
    progress(0.9, "calibrating each method's first run")
    _calibration_section(pdf, runs, t)
    notes = merged_notes([r.record for r in runs])
    if notes:
        pdf.set_font(pdf.body_font, size=8)
        for note in notes:
            pdf.multi_cell(0, 4, t(f"Note: {note}"), new_x="LMARGIN", new_y="NEXT")
    progress(1.0, "done")
    return bytes(pdf.output())


def _one_setting(runs: list[Run], dataset: str | None) -> list[Run]:
    """``runs`` of ``dataset`` (None: of the one they are of); an error where there are none,
    or they are of several datasets or settings."""
    if dataset is not None:
        runs = [r for r in runs if r.dataset == dataset]
    if not runs:
        raise GleeError(
            "no finished runs to report" + (f" for dataset {dataset!r}" if dataset else "")
        )
    datasets = sorted({r.dataset for r in runs})
    if len(datasets) > 1:
        raise GleeError(
            f"runs of several datasets ({', '.join(datasets)}); choose one with --dataset"
        )
    settings = sorted({r.setting for r in runs})
    if len(settings) > 1:
        raise GleeError(
            f"runs of several settings ({'; '.join(settings)}); choose one with "
            "--setting (or narrow with --model and --mode)"
        )
    return runs


def _new_pdf():
    """An A4 document in DejaVu where the machine has it (else Helvetica), and the function
    that makes a string printable in its font."""
    pdf = _pdf_class()(format="A4", unit="mm")
    font = next(
        (
            Path(f)
            for f in FONT_FOLDERS
            if (Path(f) / "DejaVuSans.ttf").is_file()
            and (Path(f) / "DejaVuSans-Bold.ttf").is_file()
        ),
        None,
    )
    if font:
        pdf.add_font("DejaVu", fname=str(font / "DejaVuSans.ttf"))
        pdf.add_font("DejaVu", style="B", fname=str(font / "DejaVuSans-Bold.ttf"))
        pdf.body_font = "DejaVu"
    else:
        pdf.body_font = "Helvetica"
    unicode_font = font is not None
    pdf.set_auto_page_break(True, margin=16)
    pdf.alias_nb_pages()
    return pdf, lambda s: _text(unicode_font, s)


def _title_section(pdf, runs: list[Run], t) -> None:
    """The first page's title and what the runs are of: the dataset, backbone and setting."""
    pdf.add_page()
    pdf.set_font(pdf.body_font, size=16)
    pdf.cell(0, 10, t(f"Glee Studio: {runs[0].dataset}"), new_x="LMARGIN", new_y="NEXT")
    pdf.set_font(pdf.body_font, size=9)
    record = runs[0].record
    data, model = record.dataset, record.model
    lines = [
        f"Generated {time.strftime('%Y-%m-%d %H:%M')} from {len(runs)} run(s).",
        f"Dataset {data.id} (fingerprint {data.fingerprint}): {len(data.classes)} classes, "
        "sizes " + ", ".join(f"{k} {v}" for k, v in data.sizes.items()) + ", head/tail "
        f"threshold {data.threshold} on training counts: {len(data.head_classes)} head, "
        f"{len(data.tail_classes)} tail classes.",
        f"Backbone {model.name} ({model.family}, {model.parameters:,} parameters), "
        f"{MODE_LABELS[record.mode]}. MLM head pretrained: "
        f"{'yes' if model.mlm_head_pretrained else 'NO (see the note at the end)'}.",
        f"Setting: {record.protocol}.",
        f"Template: {data.template}",
        *(f"Data note: {warning}" for warning in data.warnings),
    ]
    for line in lines:
        pdf.multi_cell(0, 5, t(line), new_x="LMARGIN", new_y="NEXT")
    pdf.ln(3)


def _results_section(pdf, runs: list[Run], t) -> None:
    """The results table: each method's test scores over seeds, the chosen head marked."""
    summary = aggregate(runs)
    table = comparison_table(summary)
    pdf.set_font(pdf.body_font, size=12)
    chosen_by = (
        "by cross-validation on train + dev"
        if (table["selection"] == "chosen by CV").any()
        else "on dev"
    )
    pdf.multi_cell(
        0,
        6,
        f"Results (test, %, mean ± sample std over seeds; * the head chosen {chosen_by})",
        new_x="LMARGIN",
        new_y="NEXT",
    )  # wraps, never runs off
    pdf.set_font(pdf.body_font, size=8)
    headings = ["Method", "Seeds", *METRIC_TITLES.values(), "Many", "Medium", "Few"]
    with pdf.table(
        col_widths=(44, 13, 20, 20, 20, 20, 16, 16, 16),
        text_align=("LEFT", *["RIGHT"] * 8),
        first_row_as_headings=True,
    ) as grid:
        grid.row(headings)
        for _, row in table.iterrows():
            cells = [t(row["paper row"]), str(row["seeds"])]
            cells += [
                (row[m] + " *") if m in row["best"] else row[m] for m in METRIC_TITLES.values()
            ]
            cells += [row[m].split(" ±")[0] for m in SHOT_TITLES.values()]  # means only
            grid.row(cells)
    pdf.multi_cell(
        0,
        4,
        t(
            "Many / Medium / Few: mean F1 of the classes with > 100, 20-100, "
            "< 20 training examples (– where there is none)."
        ),
        new_x="LMARGIN",
        new_y="NEXT",
    )
    pdf.ln(4)


def _charts_section(pdf, runs: list[Run], t, progress: ReportProgress) -> None:
    """Each run chart the report shows; one that cannot be drawn is left out, saying why."""
    figures = [(c.title, c.draw) for c in charts.RUN_CHARTS.values() if c.in_report]
    for number, (title, draw) in enumerate(figures):
        progress(0.1 + 0.8 * number / len(figures), f"drawing {title.lower()}")
        try:
            png = chart_png(draw(runs, PDF_WIDTH))
        except (ValueError, GleeError) as exc:  # vl-convert's limits, a file the chart reads
            pdf.set_font(pdf.body_font, size=9)
            pdf.multi_cell(
                0,
                5,
                t(f"{title}: left out, it could not be drawn ({str(exc)[:200]})"),
                new_x="LMARGIN",
                new_y="NEXT",
            )
            continue
        _place_chart(pdf, t(title), png)


# printed size of a chart px: PDF_WIDTH px across the 180 mm text width, so the charts' 9-10 px
# type prints at 7 pt or more (180 / 640 mm = 0.8 pt a px); a chart is never shrunk below it
MM_PER_PX = 180 / PDF_WIDTH


# the white between two rows of panels is at least the facets' gap; a panel's title may sit
# almost as far above its panel, so a cut also needs ink above it taller than a title's lines
CUT_BAND = int(FACET_GAP * CHART_SCALE * 0.75)
TITLE_ROWS = int(50 * CHART_SCALE)  # a block of ink shorter than this is a title (4 lines)
FIRST_PART = 0.4  # the least of a chart begun at a page's foot (the rest on the next page)


def blank_rows(image: Image.Image) -> np.ndarray:
    """Where a chart may be cut between pages: the middle row of each band of at least
    :data:`CUT_BAND` rows that hold nothing (white across) and that follows more than a title's
    ink (:data:`TITLE_ROWS`), so a cut goes between rows of panels, never through a panel, a
    label or a legend, nor between a panel and the title above it."""
    grey = np.asarray(image.convert("L"))
    blank = np.flatnonzero((grey >= 250).all(axis=1))
    if not len(blank):
        return blank
    bands = np.split(blank, np.flatnonzero(np.diff(blank) > 1) + 1)
    cuts, ink_from = [], 0
    for band in (band for band in bands if len(band) >= CUT_BAND):
        if band[0] - ink_from > TITLE_ROWS:
            cuts.append(band[len(band) // 2])
        ink_from = band[-1] + 1
    return np.array(cuts, dtype=np.int64)


def slice_rows(top: int, height: int, room: int, cuts: np.ndarray) -> int:
    """How many pixel rows of a chart, from ``top``, go on a page with ``room`` rows left: all
    that are left when they fit, else up to the lowest cut (``cuts``, :func:`blank_rows`) in the
    room's lower three quarters, else (one panel taller than the room) the room."""
    rows = min(height - top, room)
    if top + rows < height:
        inside = cuts[(cuts > top + rows // 4) & (cuts <= top + rows)]
        rows = int(inside[-1]) - top if len(inside) else rows
    return rows


def _place_chart(pdf, title: str, png: bytes) -> None:
    """A chart at its printed size under its title: on the current page when it fits there;
    else, when a whole row of its panels (at least :data:`FIRST_PART` of it) fits the room left,
    begun here and continued on the next page (a page half blank reads as the end of the
    report); else on a new page. One taller than a page is cut into page-high slices; every cut
    is in the white between rows of panels (never through one, unless a single panel is taller
    than a page), each continuation under the title again, so its type is never shrunk."""
    image = Image.open(io.BytesIO(png))
    width_px, height_px = image.size
    mm = MM_PER_PX / CHART_SCALE
    width = min(pdf.epw, width_px * mm)
    mm = width / width_px  # a chart wider than the page (it should not be) is scaled to fit
    height = height_px * mm
    title_height = 9
    page = pdf.page_break_trigger - pdf.t_margin  # a whole page's room
    fits_a_page = height + title_height <= page - 2
    cuts = blank_rows(image)
    room = int((pdf.page_break_trigger - pdf.get_y() - title_height - 2) / mm)
    begun_here = (cuts >= FIRST_PART * height_px) & (cuts <= room)
    if (
        pdf.get_y() + height + title_height > pdf.page_break_trigger
        and fits_a_page
        and not begun_here.any()
    ) or pdf.get_y() + min(height, 60) + title_height > pdf.page_break_trigger:
        pdf.add_page()
    pdf.set_font(pdf.body_font, size=11)
    pdf.cell(0, 7, title, new_x="LMARGIN", new_y="NEXT")
    top = 0
    while top < height_px:
        room = pdf.page_break_trigger - pdf.get_y() - 2
        rows = slice_rows(top, height_px, int(room / mm), cuts)
        # fpdf2 takes the PIL image itself: no PNG encode and decode of each slice
        pdf.image(image.crop((0, top, width_px, top + rows)), w=width, h=rows * mm)
        top += rows
        if top < height_px:
            pdf.add_page()
            pdf.set_font(pdf.body_font, size=11)
            pdf.cell(0, 7, f"{title} (continued)", new_x="LMARGIN", new_y="NEXT")
    pdf.ln(3)


def _modes_section(pdf, runs: list[Run], every: list[Run], t) -> None:
    """How to tune: each of the report's heads under every mode ``every`` holds for it."""
    every = [r for r in every if r.dataset == runs[0].dataset]
    methods = [
        m
        for m in registry_order({r.method for r in runs})
        if len({r.record.mode for r in every if r.method == m}) > 1
    ]
    if not methods:
        return
    pdf.set_font(pdf.body_font, size=12)
    pdf.cell(
        0, 8, t("How to tune: each head under every mode (test, %)"), new_x="LMARGIN", new_y="NEXT"
    )
    pdf.set_font(pdf.body_font, size=8)
    with pdf.table(
        col_widths=(22, 26, 24, 42, 12, 22, 22, 14),
        text_align=("LEFT", "LEFT", "LEFT", "LEFT", "RIGHT", "RIGHT", "RIGHT", "RIGHT"),
        first_row_as_headings=True,
    ) as grid:
        grid.row(["Head", "Mode", "Backbone", "Protocol", "Seeds", "F1", "Tail F1", "Trained"])
        for method in methods:
            for _, row in modes_table(every, method).iterrows():
                grid.row(
                    [
                        t(method),
                        t(row["mode"]),
                        t(row["backbone"]),
                        t(row["protocol"]),
                        str(row["seeds"]),
                        row["F1"],
                        row["Tail F1"],
                        row["trainable"],
                    ]
                )
    pdf.multi_cell(
        0,
        4,
        t(
            "Every setting the store holds for these heads on this dataset; "
            "Trained: the parameters a run trained."
        ),
        new_x="LMARGIN",
        new_y="NEXT",
    )
    pdf.ln(4)


def _calibration_section(pdf, runs: list[Run], t) -> None:
    """Logit adjustment on each method's lowest-seed run, τ chosen on dev: test before/after."""
    firsts = {}
    for run in sorted(runs, key=lambda r: r.seed):
        firsts.setdefault(run.method, run)
    results, skipped = [], []
    for run in firsts.values():
        try:
            results.append(calibrate(run, "la", "f1"))
        except GleeError:
            skipped.append(run.method)
    if not results and not skipped:
        return
    if pdf.get_y() + 40 > pdf.page_break_trigger:
        pdf.add_page()
    pdf.set_font(pdf.body_font, size=11)
    pdf.cell(
        0,
        7,
        t(
            "Post-hoc calibration: logit adjustment (Menon et al. 2021), τ chosen on "
            "dev macro-F1, test"
        ),
        new_x="LMARGIN",
        new_y="NEXT",
    )
    pdf.set_font(pdf.body_font, size=8)
    if results:
        with pdf.table(
            col_widths=(50, 58, 14, 22, 22, 22),
            text_align=("LEFT", "LEFT", "RIGHT", "RIGHT", "RIGHT", "RIGHT"),
        ) as grid:
            grid.row(["Method", "Run", "τ", "F1", "Tail F1", "Few-shot F1"])
            for row in calibration_table(results):
                grid.row([t(method_label(row[0])), row[1], *row[2:]])
    if skipped:
        pdf.multi_cell(
            0,
            4,
            t("No calibration data (stored before runs kept it): " + ", ".join(skipped)),
            new_x="LMARGIN",
            new_y="NEXT",
        )
    pdf.ln(3)


def _budget_section(pdf, budget: BudgetReport, t) -> None:
    """The label budget: what was measured, the tail classes one more text helps most, and the
    chart of every class's curve and forecast."""
    pdf.set_font(pdf.body_font, size=9)
    pdf.multi_cell(
        0,
        5,
        t(
            f"Label budget: {budget.method} on the {budget.pooling}-pooled frozen features "
            "of "
            f"{budget.model}, retrained on "
            f"{', '.join(f'{f:.0%}' for f in budget.fractions)} of every class's training texts "
            f"(seeds {', '.join(map(str, budget.seeds))}), each class's test F1 measured; "
            "forecasts at 2x and 4x a class's texts from a saturating curve per class "
            f"(target F1 {budget.target_f1:g})."
        ),
        new_x="LMARGIN",
        new_y="NEXT",
    )
    if line := budget_line(budget):
        pdf.multi_cell(
            0, 5, t(line.replace("**", "").replace("`", "")), new_x="LMARGIN", new_y="NEXT"
        )
    try:
        png = chart_png(chart_label_budget(budget, PDF_WIDTH))
    except ValueError as exc:  # vl-convert's limits
        pdf.multi_cell(
            0,
            5,
            t(f"Label budget: left out, it could not be drawn ({str(exc)[:200]})"),
            new_x="LMARGIN",
            new_y="NEXT",
        )
        return
    _place_chart(pdf, t("Label budget"), png)


def write_report(
    runs: list[Run],
    out: str | Path,
    dataset: str | None = None,
    every: list[Run] | None = None,
    budget: BudgetReport | None = None,
) -> Path:
    """Write the report atomically to ``out`` (``every``, ``budget``: see
    :func:`build_report`)."""
    return write_atomic(Path(out), build_report(runs, dataset, every=every, budget=budget))
