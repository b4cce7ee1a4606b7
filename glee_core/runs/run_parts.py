"""Two parts of a run's record, typed: how long it took and how fast it went (:class:`Timing`,
what the time estimates read) and how its weights were tuned (:class:`Tuning`: the rate, the
search and the race that chose it, the run LP-FT started from, what it trained).

Each writes the JSON it always did (a field left unset is left out, so a stored ``config.json``
reads and writes back the same) and reads every file written so far: a key of another release
is kept as read (``other``) and written back, a value of the wrong type is a
:class:`~glee_core.runs.json_values.RecordError` naming it. No torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from ..models.search_log import Round, rounds_of
from .json_values import RecordError, described, integer, number


class _Part:
    """A record part: its fields as the JSON keys, unset (None) left out."""

    other: dict

    def to_dict(self) -> dict:
        values = {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name != "other" and getattr(self, f.name) is not None
        }
        return {**values, **self.other}

    @classmethod
    def from_dict(cls, values, where: str):
        if not isinstance(values, dict):
            raise RecordError(f"{where} is {described(values)}, not a mapping")
        kinds = {f.name: f.type for f in fields(cls) if f.name != "other"}
        known, other = {}, {}
        for key, value in values.items():
            if key not in kinds:
                other[key] = value
            elif value is not None:
                known[key] = _checked(value, kinds[key], f"{where}.{key}")
        return cls(**known, other=other)


def _checked(value, kind: str, where: str):
    """``value`` as the field's type says (``"int | None"``, ``"float | None"`` ...), read as
    every record's numbers are (:mod:`glee_core.runs.json_values`)."""
    if kind.startswith("int"):
        return integer(value, where)
    if kind.startswith("float"):
        return number(value, where)
    if kind.startswith("str") and isinstance(value, str):
        return value
    if kind.startswith("list") and isinstance(value, list):
        return value
    raise RecordError(f"{where} is {described(value)}, not {kind.split(' |')[0]}")


@dataclass
class Timing(_Part):
    """How long a run took, where, and how fast (``None``: not measured by this run)."""

    train_seconds: float | None = None
    test_seconds: float | None = None
    epochs_run: int | None = None
    evaluations: int | None = None
    steps: int | None = None  # optimizer steps taken, of ``planned_steps``
    planned_steps: int | None = None
    device: str | None = None
    device_name: str | None = None
    precision: str | None = None
    skipped_steps: int | None = None  # fp16's overflowed steps
    train_examples_per_second: float | None = None  # 0: a closed-form probe (no steps)
    # what another dataset's estimate scales by (its texts may be 4x as long)
    train_tokens_per_second: float | None = None
    feature_pass_tokens_per_second: float | None = None  # a frozen run's feature pass
    other: dict = field(default_factory=dict)

    @property
    def device_type(self) -> str:
        """``cpu``, ``cuda``, ``mps`` (``""`` where not recorded)."""
        return (self.device or "").split(":")[0]

    @property
    def stop_share(self) -> float | None:
        """The share of its planned steps the run took before early stopping ended it."""
        return self.steps / self.planned_steps if self.steps and self.planned_steps else None


@dataclass
class Tuning(_Part):
    """How a run's weights were tuned: the rate it trained at (``lr``), the search's rounds on
    dev (``lr_search``) or the run whose search it re-used (``lr_from``), the race it won
    (``race``: its rounds, each with how sure its cut was), the quick-mode run LP-FT started
    from (``lp_ft_from``), the weights kept (``kept``: the moving average or the last),
    what it trained (``trainable_parameters``, LoRA's ``adapted_modules``)."""

    lr: float | None = None
    lr_search: list[Round] | None = None
    lr_from: str | None = None
    race: list[Round] | None = None
    lp_ft_from: str | None = None
    kept: str | None = None
    trainable_parameters: int | None = None
    adapted_modules: list | None = None
    other: dict = field(default_factory=dict)

    ROUNDS = ("lr_search", "race")  # lists of search rounds (models.search_log.Round)

    def to_dict(self) -> dict:
        values = super().to_dict()
        for name in self.ROUNDS:
            if name in values:
                values[name] = [r.to_dict() for r in values[name]]
        return values

    @classmethod
    def from_dict(cls, values, where: str):
        tuning = super().from_dict(values, where)
        for name in cls.ROUNDS:
            rounds = getattr(tuning, name)
            if rounds is not None:
                if not all(isinstance(r, dict) for r in rounds):
                    raise RecordError(f"{where}.{name} is not a list of rounds")
                setattr(tuning, name, rounds_of(rounds))
        return tuning
