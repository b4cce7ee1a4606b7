"""A stored run's Hugging Face model card: YAML metadata true to the exported form, then the
method, backbone and data, how to load the folder, overall and per-class results with head/tail
and many/medium/few, the main confusions and the setting. Every user string (a class, dataset
or template) is made literal: the Hub renders a card's Markdown and HTML."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from huggingface_hub import ModelCardData

from ..core.markdown import literal
from ..data.catalog import PAPER_DATASETS, dataset_name
from ..models.heads import head_of
from ..models.modes import MODE_LABELS
from ..runs.metrics import SHOT_BUCKETS, shot_bucket, shot_f1
from ..runs.record import METRIC_KEYS, METRIC_TITLES
from ..runs.store import Run
from .export_formats import export_format

PAPER_CITATION = (
    'Zhang, Ren, Wang, Wu and Song, "Making Pretrained Language Models Good '
    'Long-tailed Learners", EMNLP 2022 (arXiv 2205.05461)'
)


def _pct(value: float | None) -> str:
    return "–" if value is None or value != value else f"{100 * value:.1f}"


def _confusions(run: Run, most: int = 5) -> list[tuple[str, str, int, int]]:
    """The largest off-diagonal cells: (gold, predicted, count, gold's test support)."""
    matrix = np.asarray(run.metrics.confusion_matrix)
    classes = run.record.dataset.classes
    off = [
        (classes[g], classes[p], int(matrix[g, p]), int(matrix[g].sum()))
        for g in range(len(classes))
        for p in range(len(classes))
        if g != p and matrix[g, p]
    ]
    return sorted(off, key=lambda c: (-c[2], c[0]))[:most]


def text(value) -> str:
    """A user's string (a class, dataset or template, a note quoting one) as the card shows it:
    Markdown and HTML both made literal (the Hub renders a card's HTML)."""
    return literal(value, html_too=True)


def note_text(note: str) -> str:
    """A run's note as the card shows it: the studio's own sentence, whose `code` spans stay
    code (escaping their backticks showed literal backslashes), the words between them made
    literal as :func:`text` does (a note may quote a class or dataset name)."""
    parts = str(note).split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: every part literal
        return text(note)
    return "".join(
        text(part) if i % 2 == 0 else "`" + part.replace("\n", " ") + "`"
        for i, part in enumerate(parts)
    )


@dataclass(frozen=True)
class Form:
    """The form a run was exported in, as its card tells it: its name (``glee``, or one of
    :mod:`glee_core.serve.formats`'s), what loads it and how (``kind``, ``loading``: the lines
    of code; a non-glee form's), and ``quantized``: the int8 ONNX model's scores beside the
    fp32 one's."""

    name: str = "glee"
    kind: str = ""
    loading: tuple[str, ...] = ()
    quantized: dict | None = None


def model_card(run: Run, include_backbone: bool = False, exported: Form = Form()) -> str:
    """A Hugging Face model card for ``run`` exported in the ``exported`` form (the backbone's
    weights in the folder with ``include_backbone``)."""
    form, quantized = exported.name, exported.quantized
    record = run.record
    lines = _heading(run, form)
    lines += _use(exported.kind, list(exported.loading)) if form != "glee" else _use_glee()
    lines += _quantized(quantized) if quantized else []
    lines += _results(run)
    lines += _training(run, export_format(form).weights(record, include_backbone, bool(quantized)))
    if record.notes:
        lines += ["", "### Notes", "", *[f"- {note_text(note)}" for note in record.notes]]
    return "\n".join(lines) + "\n"


def _heading(run: Run, form: str) -> list[str]:
    """The YAML metadata and the card's first paragraph (with the caveat of an untrained MLM
    head where the method starts from it)."""
    record = run.record
    data, model, method = record.dataset, record.model, record.method
    language = PAPER_DATASETS[data.id].language if data.id in PAPER_DATASETS else "en"
    meta = ModelCardData(
        **export_format(form).card_meta,
        language=language,
        tags=[
            "text-classification",
            "long-tail",
            "glee",
            method.id,
            "prompt-tuning" if head_of(method).verbalizer else "cls-tuning",
        ],
        datasets=[dataset_name(data.id)],
        metrics=["accuracy", "f1"],
        base_model=model.name if model.name != "auto" else "sentence-transformers/all-MiniLM-L6-v2",
    )
    lines = [
        "---",
        meta.to_yaml(),
        "---",
        "",
        f"# {method.paper_row} on {text(dataset_name(data.id))}",
        "",
        f"A {len(data.classes)}-class text classifier trained with Glee Studio: the method "
        f"**{method.label}** of {PAPER_CITATION} (Tables 2 and 3), on the backbone `{model.name}` "
        f"({model.family}, {model.parameters:,} parameters), {MODE_LABELS[record.mode]}.",
        "",
    ]
    if method.uses_mlm_head and not model.mlm_head_pretrained:
        lines += [
            f"> **Caveat.** This method starts from the backbone's MLM head, and "
            f"`{model.name}` has no pretrained MLM head (its transform was initialised "
            "fresh), so it cannot show the paper's prompt-tuning advantage.",
            "",
        ]
    return lines


def _use_glee() -> list[str]:
    return [
        "## Use",
        "",
        "```python",
        "from glee_core import load_classifier",
        "",
        'classifier = load_classifier("path/to/this/folder")  # offline, no pickle, no remote code',
        'classifier.probabilities(["a text to classify"])  # one column per class',
        "```",
        "",
        "Or a whole CSV: `python -m glee_core predict --classifier "
        "path/to/this/folder --input texts.csv --out predictions.csv`.",
        "",
    ]


def _use(kind: str, loading: list[str] | None) -> list[str]:
    return [
        "## Use",
        "",
        f"This folder loads with {kind}:",
        "",
        "```python",
        *(loading or []),
        "```",
        "",
    ]


def _quantized(quantized: dict) -> list[str]:
    full, small = quantized["model.onnx"], quantized["model.int8.onnx"]
    return [
        f"`model.int8.onnx` (onnxruntime's dynamic int8 quantization): test macro-F1 "
        f"{small['f1']:.1f} against {full['f1']:.1f} in fp32 "
        f"({small['f1'] - full['f1']:+.1f}), tail F1 {small['tail_f1']:.1f} against "
        f"{full['tail_f1']:.1f} ({small['tail_f1'] - full['tail_f1']:+.1f}).",
        "",
    ]


def _results(run: Run) -> list[str]:
    """The test split's scores: overall, per class head to tail, the main confusions."""
    data, metrics = run.record.dataset, run.metrics
    counts, per_class = data.class_counts, metrics.per_class
    # recomputed: runs stored before the bucket F1s lack them
    buckets = shot_f1({c: asdict(m) for c, m in per_class.items()}, counts)
    lines = [
        "## Results on the test split",
        "",
        "| "
        + " | ".join(METRIC_TITLES.values())
        + " | "
        + " | ".join(f"{name.title()}-shot F1" for name, _, _ in SHOT_BUCKETS)
        + " |",
        "|" + "---:|" * (len(METRIC_KEYS) + len(SHOT_BUCKETS)),
        "| "
        + " | ".join(_pct(metrics.value(k)) for k in METRIC_KEYS)
        + " | "
        + " | ".join(_pct(buckets[name]) for name, _, _ in SHOT_BUCKETS)
        + " |",
        "",
        f"Head and tail: classes sorted by training count; a class is head while the cumulative "
        f"share of training examples stays at or under {data.threshold} "
        f"({len(data.head_classes)} head, {len(data.tail_classes)} tail classes). Many / medium / "
        "few-shot: more than 100, 20 to 100, fewer than 20 training examples "
        "(– where no test class falls in a bucket). Head F1, Tail F1 and the shot buckets "
        "average the per-class F1 of their classes.",
        "",
        "### Per class (head to tail)",
        "",
        "| class | group | shots | train | test | precision | recall | F1 |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for name in data.order:
        row = per_class[name]
        lines.append(
            f"| {text(name)} | {data.group(name)} | {shot_bucket(counts[name])} | "
            f"{counts[name]} | {row.support} | {_pct(row.precision)} | "
            f"{_pct(row.recall)} | {_pct(row.f1)} |"
        )
    confusions = _confusions(run)
    if confusions:
        lines += [
            "",
            "### Most frequent confusions",
            "",
            "| gold | predicted as | count | of the gold class's test examples |",
            "|---|---|---:|---:|",
        ]
        lines += [
            f"| {text(g)} ({data.group(g)}) | {text(p)} ({data.group(p)}) | {n} | {n / total:.0%} |"
            for g, p, n, total in confusions
        ]
    return lines


def _training(run: Run, weights: str) -> list[str]:
    """How the run was made: its id, setting, data, template, backbone (``weights``: what the
    folder holds of them), versions and training class counts."""
    record = run.record
    data, model = record.dataset, record.model
    return [
        "",
        "## Training",
        "",
        f"- Run id: `{record.run_id}` (created {record.created})",
        f"- Setting: {record.protocol}; seed {record.seed}; selection on dev "
        f"{record.hyperparameters.select_metric}",
        f"- Data: {text(dataset_name(data.id))}, fingerprint `{data.fingerprint}`, sizes "
        + ", ".join(f"{k} {v}" for k, v in data.sizes.items()),
        f"- Template: {text(data.template)}",
        f"- Backbone: `{model.name}` (fingerprint `{model.fingerprint}`), MLM head pretrained: "
        f"{'yes' if model.mlm_head_pretrained else 'no'}; {weights}",
        "- Versions: " + ", ".join(f"{k} {v}" for k, v in record.versions.items()),
        "",
        "### Training class counts (head to tail)",
        "",
        ", ".join(f"{text(name)} {data.class_counts[name]}" for name in data.order),
    ]
