"""The run record: what ``config.json`` of a stored run holds, as typed dataclasses.

The store writes a :class:`RunRecord` and every reader (tables, charts, report, pages, CLI) uses
its fields; nobody indexes the JSON by string keys. ``schema_version`` says which layout a file
has; :meth:`RunRecord.from_dict` reads every layout written so far (version 1 had no version
field and called the mode ``backbone_mode``), so old run folders still load.

Also here, because every layer shows them: the metric names and titles and the head/tail tag
(the notes a run carries: :mod:`glee_core.runs.notes`). No torch, no pandas.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field, fields

from ..core.environment import AUTO_MODEL
from ..models.config import TrainConfig
from ..models.methods import MethodSpec
from ..models.modes import MODE_LABELS
from .json_values import RecordError, described, integer, mapping, number, strings
from .run_parts import Timing, Tuning

SCHEMA_VERSION = 2
METRIC_KEYS = ("acc", "f1", "head_f1", "tail_f1")
METRIC_TITLES = {"acc": "Acc", "f1": "F1", "head_f1": "Head F1", "tail_f1": "Tail F1"}
# many / medium / few-shot F1 (> 100, 20-100, < 20 training examples; older runs lack them)
SHOT_TITLES = {"many_f1": "Many F1", "medium_f1": "Medium F1", "few_f1": "Few F1"}


def group_of(name: str, head: set[str] | list[str]) -> str:
    """``head`` or ``tail``: the tag every view gives a class."""
    return "head" if name in head else "tail"


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
    head_tail_rule: str = "train"  # glee_core.data.datasets.HEAD_TAIL_RULES; older runs: train

    @property
    def order(self) -> list[str]:
        """The classes head to tail (by training count): the order of every class axis."""
        return list(self.class_counts)

    def group(self, name: str) -> str:
        return group_of(name, self.head_classes)

    @property
    def head_tail_caption(self) -> str:
        """How head and tail were decided, in words (the Results caption)."""
        where = (
            "the test labels, cumulative share strictly under"
            if self.head_tail_rule == "released"
            else "training counts, cumulative share at or under"
        )
        return (
            f"Head/tail on {where} {self.threshold} ({len(self.head_classes)} head, "
            f"{len(self.tail_classes)} tail classes"
            + (", the authors' released rule)" if self.head_tail_rule == "released" else ")")
        )

    @classmethod
    def from_dict(cls, values: dict) -> DatasetRecord:
        record = cls(**_known(cls, mapping(values, "dataset")))
        classes = strings(record.classes, "dataset.classes")
        if not classes or len(set(classes)) != len(classes):
            raise RecordError("dataset.classes is empty or names a class twice")
        for part in ("head_classes", "tail_classes"):
            unknown = set(strings(getattr(record, part), f"dataset.{part}")) - set(classes)
            if unknown:
                raise RecordError(
                    f"dataset.{part} names {sorted(unknown)[:3]}, not classes of the run"
                )
        counts = mapping(record.class_counts, "dataset.class_counts")
        for name, count in counts.items():
            if name not in classes:
                raise RecordError(f"dataset.class_counts names {name!r}, not a class of the run")
            integer(count, f"dataset.class_counts[{name!r}]")
        return record


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
        record = cls(**_known(cls, mapping(values, "model")))
        if not isinstance(record.name, str) or not record.name:
            raise RecordError(f"model.name is {described(record.name)}, not a model name")
        return record


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
    timing: Timing = field(default_factory=Timing)  # how long it took, where, how fast
    tuning: Tuning = field(default_factory=Tuning)  # the rate, its search or race, LP-FT's start
    schema_version: int = SCHEMA_VERSION

    @property
    def mode(self) -> str:
        return self.hyperparameters.mode

    @property
    def protocol(self) -> str:
        return self.hyperparameters.protocol()

    @property
    def split(self) -> str:
        """The head/tail split the run is scored by (its Head F1 and Tail F1 depend on it)."""
        rule = " (released rule)" if self.dataset.head_tail_rule == "released" else ""
        return f"head/tail at {self.dataset.threshold:g}{rule}"

    @property
    def setting(self) -> str:
        """Backbone, mode, protocol and head/tail split: runs of different settings are never
        averaged together."""
        return f"{self.model.name} · {self.mode} · {self.protocol} · {self.split}"

    @property
    def setting_id(self) -> str:
        """A short id of :attr:`setting` that the command line takes back (``--setting``)."""
        return hashlib.sha256(self.setting.encode()).hexdigest()[:8]

    @property
    def setting_label(self) -> str:
        """The setting as a person reads it (the mode spelled out)."""
        return f"{self.model.name} · {MODE_LABELS[self.mode]} · {self.protocol} · {self.split}"

    @property
    def mlm_head_caveat(self) -> bool:
        """Does this run rely on an MLM head that was never pretrained?"""
        return self.method.uses_mlm_head and not self.model.mlm_head_pretrained

    def to_dict(self) -> dict:
        return {
            "schema_version": self.schema_version,
            "run_id": self.run_id,
            "created": self.created,
            "dataset": asdict(self.dataset),
            "model": asdict(self.model),
            "method": self.method.to_dict(),
            "seed": self.seed,
            "hyperparameters": self.hyperparameters.identity(),
            "mode": self.mode,
            "notes": self.notes,
            "versions": self.versions,
            "identity": self.identity,
            "timing": self.timing.to_dict(),
            "tuning": self.tuning.to_dict(),
        }

    @classmethod
    def from_dict(cls, values: dict) -> RunRecord:
        """Read and check a stored record: :class:`RecordError` says which field is wrong."""
        mapping(values, "the record")
        for name in ("dataset", "model", "method", "seed"):
            if name not in values:
                raise RecordError(f"{name} missing")
        hyper = dict(mapping(values.get("hyperparameters", {}), "hyperparameters"))
        # version 1 kept the mode beside the hyper-parameters, as ``backbone_mode``
        mode = values.get("mode") or values.get("backbone_mode") or hyper.get("backbone")
        hyper["backbone"] = mode or "finetune"
        hyper.setdefault("seed", values.get("seed", 1))
        return cls(
            run_id=values.get("run_id", ""),
            dataset=DatasetRecord.from_dict(values["dataset"]),
            model=ModelRecord.from_dict(values["model"]),
            method=MethodSpec.from_dict(values["method"]),
            seed=integer(values["seed"], "seed"),
            hyperparameters=_hyperparameters(hyper),
            created=values.get("created", ""),
            notes=list(values.get("notes", [])),
            versions=dict(values.get("versions", {})),
            identity=dict(values.get("identity", {})),
            timing=Timing.from_dict(values.get("timing", {}), "timing"),
            tuning=Tuning.from_dict(values.get("tuning", {}), "tuning"),
            schema_version=int(values.get("schema_version", 1)),
        )


def _hyperparameters(values: dict) -> TrainConfig:
    try:
        return TrainConfig.from_identity(values)
    except (TypeError, ValueError) as exc:  # GleeError is a ValueError
        raise RecordError(f"hyperparameters: {exc}") from None


@dataclass(frozen=True)
class ClassMetrics:
    """One class's test scores."""

    precision: float
    recall: float
    f1: float
    support: int  # test examples of the class
    group: str = ""  # "head" or "tail"


CV_PROTOCOL = 2  # CrossValidation.protocol of the folds run now


def _current(cv: CrossValidation | None) -> CrossValidation | None:
    """``cv`` where its folds chose as they do now, else None (a run stored with a
    cross-validation of an older protocol is cross-validated again on the next launch)."""
    return cv if cv is not None and cv.protocol == CV_PROTOCOL else None


@dataclass(frozen=True)
class CrossValidation:
    """A quick-mode head's k-fold cross-validation on train + dev (``glee_core.train.selection``):
    macro-F1 and tail F1 of the pooled out-of-fold predictions (``texts`` scored, each once, by a
    head that never trained on it), each fold's macro-F1 and the seconds it took a head.
    ``protocol``: how the folds chose a head's epoch (:data:`CV_PROTOCOL`: on the dev texts
    outside the fold; 1, a record without it, on the held-out fold itself: read as no
    cross-validation, so the next launch runs it again)."""

    folds: int
    f1: float
    tail_f1: float
    fold_f1: list[float]
    texts: int
    seconds: float = 0.0
    protocol: int = CV_PROTOCOL

    @classmethod
    def from_dict(cls, values) -> CrossValidation:
        mapping(values, "cv")
        fold_f1 = values.get("fold_f1")
        if not isinstance(fold_f1, list):
            raise RecordError(f"cv.fold_f1 is {described(fold_f1)}, not a list of scores")
        return cls(
            folds=integer(values.get("folds"), "cv.folds"),
            f1=number(values.get("f1"), "cv.f1"),
            tail_f1=number(values.get("tail_f1"), "cv.tail_f1"),
            fold_f1=[number(v, "cv.fold_f1") for v in fold_f1],
            texts=integer(values.get("texts"), "cv.texts"),
            seconds=number(values.get("seconds", 0.0), "cv.seconds"),
            protocol=integer(values.get("protocol", 1), "cv.protocol"),
        )


@dataclass
class MetricsRecord:
    """What ``metrics.json`` holds: the paper's four metrics, the many / medium / few-shot F1
    (None for a bucket with no class in test; older runs lack them), per-class scores, the
    confusion matrix (rows gold, columns predicted, in the run's class order) and the point on
    dev the kept weights came from. Every reader uses its fields."""

    acc: float
    f1: float
    head_f1: float
    tail_f1: float
    per_class: dict[str, ClassMetrics]
    confusion_matrix: list[list[int]]
    many_f1: float | None = None
    medium_f1: float | None = None
    few_f1: float | None = None
    best_epoch: int | None = None
    best_step: int | None = None
    best_dev_f1: float | None = None
    best_dev_acc: float | None = None
    select_metric: str = "f1"
    cv: CrossValidation | None = None  # quick mode on a small dev split (runs before: None)

    def value(self, key: str) -> float | None:
        """A headline metric by its key (``METRIC_KEYS``, ``SHOT_TITLES``, ``dev``: the dev
        score the kept weights were chosen by, or ``cv``: the cross-validated macro-F1)."""
        if key == "dev":
            return self.best_dev
        if key == "cv":
            return None if self.cv is None else self.cv.f1
        if key not in METRIC_KEYS and key not in SHOT_TITLES:
            raise KeyError(key)
        return getattr(self, key)

    @property
    def best_dev(self) -> float | None:
        """The dev score the kept weights were chosen by."""
        return self.best_dev_f1 if self.select_metric == "f1" else self.best_dev_acc

    @property
    def test_size(self) -> int:
        return sum(c.support for c in self.per_class.values())

    def to_dict(self) -> dict:
        return {**asdict(self), "per_class": {c: asdict(m) for c, m in self.per_class.items()}}

    @classmethod
    def from_dict(cls, values, classes: list[str]) -> MetricsRecord:
        """Read and check ``metrics.json`` against the run's ``classes``."""
        mapping(values, "the file")
        headline = {k: number(values.get(k), k) for k in METRIC_KEYS}
        shots = {k: number(values.get(k), k, optional=True) for k in SHOT_TITLES}
        per_class = {}
        scores = mapping(values.get("per_class"), "per_class")
        for name in classes:
            if name not in scores:
                raise RecordError(f"per_class lacks the class {name!r}")
            entry = mapping(scores[name], f"per_class[{name!r}]")
            per_class[name] = ClassMetrics(
                *(
                    number(entry.get(k), f"per_class[{name!r}].{k}")
                    for k in ("precision", "recall", "f1")
                ),
                support=integer(entry.get("support"), f"per_class[{name!r}].support"),
                group=str(entry.get("group", "")),
            )
        matrix = values.get("confusion_matrix")
        n = len(classes)
        if not (
            isinstance(matrix, list)
            and len(matrix) == n
            and all(isinstance(row, list) and len(row) == n for row in matrix)
        ):
            raise RecordError(f"confusion_matrix is not {n} x {n} (one row and column a class)")
        matrix = [[integer(v, "confusion_matrix") for v in row] for row in matrix]
        best = {k: number(values.get(k), k, optional=True) for k in ("best_dev_f1", "best_dev_acc")}
        steps = {
            k: None if values.get(k) is None else integer(values[k], k)
            for k in ("best_epoch", "best_step")
        }
        select = values.get("select_metric", "f1")
        if select not in ("f1", "acc"):
            raise RecordError(f"select_metric is {described(select)}, not f1 or acc")
        cv = values.get("cv")
        return cls(
            **headline,
            per_class=per_class,
            confusion_matrix=matrix,
            **shots,
            **best,
            **steps,
            select_metric=select,
            cv=_current(None if cv is None else CrossValidation.from_dict(cv)),
        )
