"""The requests a job runs: one typed record per kind of work, written as JSON by whoever
launches it (the app, for a background job) and read back by the command that does the work
(``python -m glee_core <kind> --request FILE``), never a rebuilt argument list. The kinds, their
commands, estimates and results are :mod:`glee_core.train.job_kinds`'."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

from ..budget.options import BudgetOptions
from ..core.environment import AUTO_MODEL
from ..core.errors import GleeError
from ..core.files import write_json_atomic
from ..health.options import HealthOptions
from ..pool.options import SelfTrainOptions, SuggestOptions
from .config import TrainConfig
from .options import AdaptOptions, DataOptions, ExecutorOptions


class _Request:
    """A request written as JSON for a child process (``--request FILE``)."""

    WHAT: ClassVar[str] = "request"

    def to_dict(self) -> dict:
        return asdict(self)

    def write(self, path: str | Path) -> Path:
        return write_json_atomic(Path(path), self.to_dict())

    @classmethod
    def from_dict(cls, values: dict):
        """The request of ``values``: its fields by name (a request of plain fields; those that
        hold other records read them themselves)."""
        return cls(**{f.name: values[f.name] for f in fields(cls) if f.name in values})

    @classmethod
    def read(cls, path: str | Path):
        """The request in ``path``; one line saying what is wrong with a file that is not one
        (edited by hand, of another release, cut short)."""
        try:
            values = json.loads(Path(path).read_text(encoding="utf-8"))
            if not isinstance(values, dict):
                raise TypeError(f"a JSON {type(values).__name__}, not an object")
            return cls.from_dict(values)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise GleeError(f"cannot read the {cls.WHAT} {path}: {exc}") from None


@dataclass
class TrainRequest(_Request):
    """What ``train`` does: methods x seeds of one dataset with one backbone and config. The
    CLI builds it from its flags; the app writes it as a JSON file for the child process."""

    WHAT: ClassVar[str] = "training request"

    data: DataOptions
    methods: list[str]
    seeds: list[int]
    model: str = AUTO_MODEL
    config: TrainConfig = field(default_factory=TrainConfig)
    force: bool = False
    executor: ExecutorOptions = field(default_factory=ExecutorOptions)
    self_train: SelfTrainOptions = field(default_factory=SelfTrainOptions)

    @classmethod
    def from_dict(cls, values: dict) -> TrainRequest:
        return cls(
            data=DataOptions(**values["data"]),
            methods=[_text(m, "methods") for m in values["methods"]],
            seeds=[int(s) for s in values["seeds"]],
            model=_text(values.get("model", AUTO_MODEL), "model"),
            config=TrainConfig(**values.get("config", {})),
            force=bool(values.get("force", False)),
            executor=ExecutorOptions(**values.get("executor", {})),
            self_train=SelfTrainOptions(**values.get("self_train", {})),
        )


@dataclass
class _OnData(_Request):
    """A command on one dataset with one backbone and its own options (``OPTIONS``)."""

    OPTIONS: ClassVar[type] = object

    data: DataOptions
    options: Any
    model: str = AUTO_MODEL

    @classmethod
    def from_dict(cls, values: dict):
        extra = {f.name: values[f.name] for f in fields(cls)[3:] if f.name in values}
        return cls(
            data=DataOptions(**values["data"]),
            options=cls.OPTIONS(**values["options"]),
            model=_text(values.get("model", AUTO_MODEL), "model"),
            **extra,
        )


@dataclass
class AdaptRequest(_OnData):
    """What ``adapt`` does: one backbone adapted to one dataset's texts."""

    WHAT: ClassVar[str] = "adaptation request"
    OPTIONS: ClassVar[type] = AdaptOptions


@dataclass
class HealthRequest(_OnData):
    """What ``health`` does: the data health check of one dataset's training split."""

    WHAT: ClassVar[str] = "health check request"
    OPTIONS: ClassVar[type] = HealthOptions


@dataclass
class BudgetRequest(_OnData):
    """What ``budget`` does: the label budget of one dataset."""

    WHAT: ClassVar[str] = "label budget request"
    OPTIONS: ClassVar[type] = BudgetOptions


@dataclass
class SuggestRequest(_OnData):
    """What ``suggest`` does: the pool texts to label next. ``session``: keep them as the
    dataset's labelling session in the store (the app's; the answers already given to texts
    suggested again are kept) as well as the CSV ``options.out`` names (``-``: none)."""

    WHAT: ClassVar[str] = "suggestion request"
    OPTIONS: ClassVar[type] = SuggestOptions

    session: bool = False


@dataclass
class ReportRequest(_Request):
    """What ``report`` does for the app: the PDF of the runs ``runs`` (ids; one dataset and
    setting) read from the run stores ``stores`` (the first, the job's own), with the dataset's
    other runs there and its newest label budget, written to ``out``."""

    WHAT: ClassVar[str] = "report request"

    dataset: str
    runs: list[str]
    out: str
    stores: list[str] = field(default_factory=list)

    def __post_init__(self):
        self.dataset, self.out = _text(self.dataset, "dataset"), _text(self.out, "out")
        self.runs = [_text(r, "runs") for r in _list(self.runs, "runs")]
        self.stores = [_text(s, "stores") for s in _list(self.stores, "stores")]


@dataclass
class ExportRequest(_Request):
    """What ``export`` does for the app: the run ``run`` (an id of one of ``stores``, the first
    the job's own) in the form ``form``, zipped to ``out`` (``quantize``: ``int8`` for an ONNX
    form's quantized model too)."""

    WHAT: ClassVar[str] = "export request"

    run: str
    form: str
    out: str
    quantize: str | None = None
    stores: list[str] = field(default_factory=list)

    def __post_init__(self):
        self.run, self.form, self.out = (
            _text(self.run, "run"),
            _text(self.form, "form"),
            _text(self.out, "out"),
        )
        if self.quantize is not None:
            self.quantize = _text(self.quantize, "quantize")
        self.stores = [_text(s, "stores") for s in _list(self.stores, "stores")]


@dataclass
class PredictRequest(_Request):
    """What ``predict`` does for the app: the texts of the CSV ``input`` classified (at most
    ``max_rows``) by the run ``run`` of ``stores`` (the first, the job's own), or, with no run,
    zero-shot by ``model``'s MLM head on ``data``'s label words; the rows and their predictions
    written to ``out``."""

    WHAT: ClassVar[str] = "prediction request"

    input: str
    out: str
    run: str | None = None
    stores: list[str] = field(default_factory=list)
    data: DataOptions | None = None
    model: str = AUTO_MODEL
    max_rows: int | None = None

    def __post_init__(self):
        self.input, self.out = _text(self.input, "input"), _text(self.out, "out")
        self.model = _text(self.model, "model")
        if self.run is not None:
            self.run = _text(self.run, "run")
        self.stores = [_text(s, "stores") for s in _list(self.stores, "stores")]
        if self.max_rows is not None:
            self.max_rows = int(self.max_rows)
        if self.run is None and self.data is None:
            raise ValueError("a run, or the data for a zero-shot scorer")

    @classmethod
    def from_dict(cls, values: dict) -> PredictRequest:
        given = {f.name: values[f.name] for f in fields(cls) if f.name in values}
        if given.get("data") is not None:
            given["data"] = DataOptions(**given["data"])
        return cls(**given)


def _text(value, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} holds {value!r}, not text")
    return value


def _list(value, name: str) -> list:
    if not isinstance(value, list):
        raise TypeError(f"{name} holds {value!r}, not a list")
    return value
