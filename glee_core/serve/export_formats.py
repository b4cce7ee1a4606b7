"""The forms a classifier leaves the lab in, one :class:`ExportFormat` record each: its name,
how the app offers it, what it can express, its card's metadata and its writer (in
:mod:`glee_core.serve.formats`). The command line's ``--format``, the model card and the
Predictions page read :data:`EXPORT_FORMATS`; a new form is a record here and a writer there.
Nothing here imports torch (``--help`` lists the forms at once)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import GleeError
from ..core.plugins import named
from ..models.modes import MODES


@dataclass(frozen=True)
class ExportFormat:
    """One form a classifier leaves the lab in. Its writer (``writer``, ``"module:function"``,
    imported only when :meth:`write` runs) fills a new folder and returns the lines that
    load it, what loads it (the card's "loads with ...") and, quantized, the test F1 change
    (None: the studio's own folder, which ``export.py`` writes).
    What it can express: ``pairs`` (a template with a second text slot), ``adapters_only`` (only
    runs whose encoder is the pretrained one plus a peft adapter), ``quantizes`` (``--quantize``),
    ``holds_backbone`` (``--include-backbone``: a folder that may copy the backbone in),
    ``extended`` (an encoder a mode extended: prompt tuning's virtual tokens, adapters' modules;
    ``modeling_glee.py`` builds both, peft carries its own prompt tuning but not our adapters:
    ``adapters_only`` refuses them)."""

    name: str
    label: str  # how the Predictions page offers it
    help: str  # what --format's help says after its name
    card_meta: dict  # the card's YAML: the library that loads it (a pipeline where one opens it)
    weights: Callable  # (record, include_backbone, quantized) -> where its weights are
    writer: str | None = None  # its writer, "module:function" (glee_core.serve.formats')
    pairs: bool = False
    adapters_only: bool = False
    quantizes: bool = False
    holds_backbone: bool = False
    extended: bool = False  # carries an encoder a mode extended (virtual tokens, inserted modules)

    def write(self, run, out: Path, quantize: str | None) -> tuple[list[str], str, dict]:
        """Its writer, imported now (as a plugin's entry point is: torch comes with it)."""
        return named(self.writer)(run, out, quantize)

    def blocked(self, record) -> str | None:
        """What in a run of ``record`` this form cannot express, or None."""
        tuning = record.hyperparameters.tuning
        if self.adapters_only and not tuning.parameter_efficient:
            return f"is for {_efficient_modes()} runs; this is a {tuning.label} run"
        if not tuning.plain_encoder and not self.extended:
            inside = (
                "reads its text after trained virtual tokens"
                if tuning.soft_prompt
                else "has modules of its own inside the encoder"
            )
            return f"holds a plain encoder, and a {tuning.label} run {inside}"
        if not self.pairs and any(
            "{" + slot + "}" in record.dataset.template for slot in ("text_b", "entity")
        ):
            return "takes single texts; this run reads a pair (its template has a second slot)"
        return None

    def refusal(self, record) -> str | None:
        """Why a run of ``record`` cannot leave in this form, naming the forms it can leave
        in; None when it can."""
        why = self.blocked(record)
        if why is None:
            return None
        others = either(f.name for f in EXPORT_FORMATS.values() if f.blocked(record) is None)
        return f"--format {self.name} {why} (it leaves as {others})"


def either(names) -> str:
    """``a, b or c``: the forms a message offers."""
    names = list(names)
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else "".join(names)


def _efficient_modes() -> str:
    """The parameter-efficient modes' names, as a run's label says them."""
    return ", ".join(m.label for m in MODES.values() if m.parameter_efficient)


def _glee_weights(record, include_backbone: bool, quantized: bool) -> str:
    if include_backbone:
        return "weights included in `backbone/`"
    if record.hyperparameters.tuning.keeps_backbone:
        return "referenced by name (load it where the same backbone is available)"
    return "fine-tuned weights in `model.safetensors`"


def _onnx_weights(record, include_backbone: bool, quantized: bool) -> str:
    return "every weight in this folder's `model.onnx`" + (
        " (and, quantized, `model.int8.onnx`)" if quantized else ""
    )


def _peft_weights(record, include_backbone: bool, quantized: bool) -> str:
    return (
        f"the pretrained `{record.model.name}` loaded by name (peft adds this folder's "
        "adapter; the head's weights are in `glee_head.safetensors`)"
    )


EXPORT_FORMATS = {
    f.name: f
    for f in (
        ExportFormat(
            "glee",
            "Glee Studio folder (load_classifier)",
            "the studio's folder, load_classifier",
            {"library_name": "glee-studio"},
            _glee_weights,
            pairs=True,
            holds_backbone=True,
            extended=True,
        ),
        ExportFormat(
            "hf",
            "transformers (AutoModelForSequenceClassification, pipeline())",
            "transformers' AutoModelForSequenceClassification and pipeline()",
            {"library_name": "transformers", "pipeline_tag": "text-classification"},
            lambda record, include_backbone, quantized: (
                "every weight, the backbone's and the head's, in this folder's `model.safetensors`"
            ),
            "glee_core.serve.formats:write_hf",
            extended=True,
        ),
        ExportFormat(
            "onnx",
            "ONNX Runtime (numpy, onnxruntime, tokenizers only)",
            "ONNX Runtime with onnx_classifier.py: numpy, onnxruntime, tokenizers",
            {"library_name": "onnx"},
            _onnx_weights,
            "glee_core.serve.formats:write_onnx",
            quantizes=True,
            extended=True,
        ),
        ExportFormat(
            "peft",
            f"peft adapter and head ({_efficient_modes()} runs)",
            f"a {_efficient_modes()} adapter and the head",
            {"library_name": "peft"},
            _peft_weights,
            "glee_core.serve.formats:write_peft",
            pairs=True,
            adapters_only=True,
            extended=True,
        ),
    )
}
FORMATS = tuple(EXPORT_FORMATS)


def export_format(form: str) -> ExportFormat:
    """The record of ``form``; an unknown one is one line naming those there are."""
    if form not in EXPORT_FORMATS:
        raise GleeError(f"--format must be one of {', '.join(FORMATS)}, got {form!r}")
    return EXPORT_FORMATS[form]
