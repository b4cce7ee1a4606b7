"""A learning-rate search's (or a race's) rounds as they are kept: each :class:`Round` of
successive halving and how sure its cut was (:class:`Cut`, :func:`sureness` says it in words),
and the :class:`SearchLog` that writes them as they end (beside the run store, under the run's
id; shared by every run of a backbone and data when the rate is searched once), checked as it is
read (a damaged log is set aside: its search starts anew). The search itself:
:mod:`glee_core.models.search`. Imports neither torch nor pandas."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..core.files import write_json_atomic
from .config import RESAMPLES

SURE = 0.9  # a cut kept on fewer of dev's bootstrap resamples than this, dev cannot call


@dataclass(frozen=True)
class Cut:
    """How sure a round's cut was: the one kept last (``kept``) over the best one dropped
    (``over``), on ``share`` of dev's bootstrap resamples."""

    kept: str
    over: str
    share: float


@dataclass
class Round:
    """One round of successive halving, as a search log and a run's record keep it: its
    ``number``, the dev ``evaluations`` each trial trained for it, every trial's ``dev`` score at
    its point, the names ``kept``, the optimizer steps of those dropped and how sure the cut was
    (``sure``). What a log of before lacks is None; a key of another release is kept as read
    (``other``) and written back."""

    kept: list[str]
    number: int | None = None
    evaluations: int | None = None
    dev: dict[str, float] | None = None
    dropped_steps: int | None = None
    sure: Cut | None = None
    other: dict = field(default_factory=dict)

    @property
    def steps(self) -> int:
        """The optimizer steps of the trials this round dropped (0 where a log did not say)."""
        return self.dropped_steps or 0

    def to_dict(self) -> dict:
        """The round as it is written: the keys it always had, in their order."""
        values = {
            "round": self.number,
            "evaluations": self.evaluations,
            "dev": self.dev,
            "kept": self.kept,
            "dropped_steps": self.dropped_steps,
            "sure": asdict(self.sure) if self.sure is not None else None,
        }
        return {**{k: v for k, v in values.items() if v is not None}, **self.other}

    @classmethod
    def from_dict(cls, values: dict) -> Round:
        """A round as written (a search log's are checked first: :func:`_log_problem`); a
        ``sure`` that is not a cut is kept as read and not believed."""
        known = ("round", "evaluations", "dev", "kept", "dropped_steps", "sure")
        other = {k: v for k, v in values.items() if k not in known}
        sure, kept = values.get("sure"), values.get("kept")
        if sure is not None and _cut_problem(values) is not None:
            other["sure"], sure = sure, None
        if not isinstance(kept, list):  # a damaged record's: written back as it was read
            other["kept"], kept = kept, []
        return cls(
            kept=list(kept),
            number=values.get("round"),
            evaluations=values.get("evaluations"),
            dev=values.get("dev"),
            dropped_steps=values.get("dropped_steps"),
            sure=Cut(sure["kept"], sure["over"], sure["share"]) if sure is not None else None,
            other=other,
        )


def rounds_of(values: list) -> list[Round]:
    """Rounds as written (a log's, a record's) read back."""
    return [Round.from_dict(r) for r in values]


def sureness(rounds: list[Round], what: str = "search") -> tuple[str, bool] | None:
    """How sure a search's (or a race's: ``what``) cuts were, in words (each round: the one
    kept last over the best one dropped, on what share of dev's bootstrap resamples), and
    whether any is below :data:`SURE`; None where no round recorded it (a log from before)."""
    cuts = [(r.number, r.sure) for r in rounds if r.sure is not None]
    if not cuts:
        return None
    words = "; ".join(
        f"round {number} kept {cut.kept} over {cut.over} on {cut.share:.0%}" for number, cut in cuts
    )
    close = any(cut.share < SURE for _, cut in cuts)
    text = (
        f"how sure the {what} was (the share of {RESAMPLES:,} bootstrap resamples of dev where "
        f"the one kept scored above the one dropped, at that round's point): {words}"
    )
    if close:
        text += f". Under {SURE:.0%}, dev cannot tell the two apart"
    if close and what == "search":
        text += (
            ': where many classes have one or two dev texts, docs/tuning.md ("When dev cannot '
            'choose the rate") says what to try'
        )
    return text, close


def shared_key(identity: dict, method_fields: set[str]) -> str:
    """What a rate searched once is shared over: a run's identity without its method and seed
    (the backbone, the data, the mode and the rest of the protocol)."""
    kept = {k: v for k, v in identity.items() if k not in method_fields and k != "seed"}
    blob = json.dumps(kept, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class SearchLog:
    """A run's search on disk (``<folder>/<run_id>.json``: the rounds ended so far, then the
    rate chosen) and, when the rate is searched once, the rate shared by every run of the same
    backbone and data (``<folder>/shared-<key>.json``). Files are replaced atomically."""

    def __init__(self, folder: str | Path, run_id: str, shared: str | None = None):
        self.folder, self.run_id, self.shared_name = Path(folder), run_id, shared
        self.notes: list[str] = []  # logs found damaged and set aside, for the progress lines

    def _read(self, name: str) -> dict | None:
        """The log ``name``, or None: missing, or damaged (bad JSON, a value of the wrong type,
        a rate that is not a learning rate), which is set aside as ``NAME.json.damaged`` and
        noted in :attr:`notes` (a relaunch then starts that search anew, never a traceback)."""
        path = self.folder / f"{name}.json"
        try:
            values = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            return self._set_aside(path, f"not JSON ({exc})")
        problem = _log_problem(values, shared=name.startswith("shared-"))
        if problem:
            return self._set_aside(path, problem)
        return {**values, "rounds": rounds_of(values["rounds"])}

    def _set_aside(self, path: Path, problem: str) -> None:
        aside = path.with_name(f"{path.name}.damaged")
        try:
            path.replace(aside)
        except OSError:
            aside = path
        self.notes.append(
            f"the search log {path.name} was damaged ({problem}): set aside as "
            f"{aside.name}; that search starts anew"
        )
        return None

    def take_notes(self) -> list[str]:
        notes, self.notes = self.notes, []
        return notes

    def resumed(self, grid: list[str]) -> dict | None:
        """This search so far, if it had the same candidates (``grid``: their names, rates as
        ``f"{lr:g}"``): its ``rounds`` (:class:`Round`) and, once it ended, ``chosen``."""
        found = self._read(self.run_id)
        if found is None or found.get("grid") != list(grid):
            return None
        return found

    def write(self, grid: list[str], rounds: list[Round], chosen: str | None = None) -> None:
        values = {"grid": list(grid), "rounds": [r.to_dict() for r in rounds], "chosen": chosen}
        write_json_atomic(self.folder / f"{self.run_id}.json", values)
        if chosen is not None and self.shared_name:
            write_json_atomic(
                self.folder / f"shared-{self.shared_name}.json", {**values, "run_id": self.run_id}
            )

    def done(self) -> None:
        """The run is stored (its record holds the rounds): its own file goes; a shared rate
        stays for the runs to come."""
        (self.folder / f"{self.run_id}.json").unlink(missing_ok=True)

    def shared(self) -> dict | None:
        """The rate another run's search chose for this backbone and data (``chosen``,
        ``run_id``, ``rounds``), or None."""
        if not self.shared_name:
            return None
        found = self._read(f"shared-{self.shared_name}")
        return found if found and found.get("chosen") else None

    def chosen_elsewhere(self) -> dict | None:
        """:meth:`shared` when another run's search chose it (this run's own search, stopped
        after it chose, is resumed from its own log instead)."""
        shared = self.shared()
        return shared if shared is not None and shared["run_id"] != self.run_id else None


def _log_problem(values, shared: bool = False) -> str | None:
    """What is wrong with a search log's values (None: nothing): ``grid`` names, ``rounds`` of
    ``kept`` names among them, ``chosen`` one of them (a shared log's: a learning rate in (0, 1]
    and the ``run_id`` whose search chose it)."""
    if not isinstance(values, dict):
        return "not a JSON object"
    grid, rounds, chosen = values.get("grid"), values.get("rounds"), values.get("chosen")
    if not isinstance(grid, list) or not grid or not all(isinstance(g, str) for g in grid):
        return f"grid is {grid!r}, not a list of names"
    if not isinstance(rounds, list) or not all(
        isinstance(r, dict)
        and isinstance(r.get("kept"), list)
        and r["kept"]
        and all(k in grid for k in r["kept"])
        and isinstance(r.get("dropped_steps", 0), int)
        and r.get("dropped_steps", 0) >= 0
        for r in rounds
    ):
        return "rounds are not rounds of the grid's candidates"
    for r in rounds:
        if (problem := _cut_problem(r)) is not None:
            return problem
    if chosen is not None and (not isinstance(chosen, str) or chosen not in grid):
        return f"chosen is {chosen!r}, not one of the grid's candidates"
    if shared:
        try:
            rate = float(chosen)
        except (TypeError, ValueError):
            return f"chosen is {chosen!r}, not a learning rate"
        if not math.isfinite(rate) or not 0 < rate <= 1:
            return f"chosen is {chosen!r}, not a learning rate in (0, 1]"
        if not isinstance(values.get("run_id"), str):
            return "run_id is missing"
    return None


def _cut_problem(round_: dict) -> str | None:
    """What is wrong with a round's record of how sure its cut was (``sure``: the one ``kept``,
    the one dropped ``over``, the ``share`` of resamples in [0, 1]); None when it is sound or
    has none (a log from before)."""
    if "sure" not in round_:
        return None
    sure = round_["sure"]
    if (
        not isinstance(sure, dict)
        or not isinstance(sure.get("kept"), str)
        or not isinstance(sure.get("over"), str)
        or isinstance(sure.get("share"), bool)
        or not isinstance(sure.get("share"), int | float)
        or not 0 <= sure["share"] <= 1
        or not isinstance(round_.get("round"), int)
    ):
        return f"a round's sure is {sure!r}, not how sure its cut was"
    return None
