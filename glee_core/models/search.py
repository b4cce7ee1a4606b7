"""The learning-rate search on dev: successive halving, its schedule, kept as it goes, shared,
resumable. It runs over the trainer's trials (``glee_core.train.loop.Trial``, through the
:class:`Trial` protocol below), so the time estimate (``runs``, below the trainer) reads the
same schedule the search follows.

Every candidate rate trains a short round from the same start; the better half (by its best dev
score so far, ties by its latest dev loss, then the smaller rate) goes on, until one is left,
which trains to the end (:func:`search_schedule` says how long a round is). Each trial draws its
own random numbers (its dropout masks) and batch order, so a trial trained alone follows the
very path it follows among the others. That makes the search cheap to keep:

* a :class:`SearchLog` writes the rounds as they end (beside the run store, under the run's id):
  a stopped launch, relaunched, trains only the survivors of the last finished round again (to
  that round's point, the same weights), never the trials already dropped; a search that had
  ended trains its chosen rate alone;
* with ``--lr-search once`` (the practical recipe's default), the first head's search chooses
  the rate for the backbone and data, and every other head and seed of them trains at it (its
  record says whose search chose it).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol

from ..core.events import Note, ProgressFn, Searching
from ..core.files import write_json_atomic
from .config import RESAMPLES, TrainConfig


class Selection(Protocol):
    """What the search asks of a trial's dev selection (``glee_core.train.loop.DevSelection``)."""

    history: list[dict]

    def standing(self, evaluations: int) -> tuple[float, float]: ...

    def lead(self, other: Selection, evaluations: int) -> float | None: ...


class Trial(Protocol):
    """What the search asks of a trial (``glee_core.train.loop.Trial``): its rate, its dev
    selection (where it stood, how sure a lead over another is, its history), its optimizer
    steps, and training on."""

    lr: float
    selection: Selection
    state: object
    work: Work

    def advance(self, evaluations: int | None = None) -> None: ...


class Setup(Protocol):
    """What the search asks of a run's setup (``glee_core.train.setup.Setup``)."""

    config: TrainConfig
    progress: ProgressFn
    steps_per_epoch: int
    epochs: int
    evaluations: int

    def new_trial(self, lr: float, work: Work | None = None) -> Trial: ...


SEARCH_SHARE = 0.1  # one round of the learning-rate search: this share of the planned evaluations
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
        sure = values.get("sure")
        if sure is not None and _cut_problem(values) is not None:
            other["sure"], sure = sure, None
        return cls(
            kept=list(values.get("kept") or []),
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


def search_schedule(candidates: int, evaluations: int) -> tuple[int, list[int]]:
    """Successive halving over ``candidates`` rates for a run planning ``evaluations`` dev
    evaluations: (evaluations each trial trains per round, trials alive in each round). The
    better half goes on after a round; the last one left trains to the end. The trainer and the
    time estimate both read it."""
    per_round = max(1, round(SEARCH_SHARE * evaluations))
    alive, rounds = candidates, []
    while alive > 1:
        rounds.append(alive)
        alive = -(-alive // 2)
    return per_round, rounds


def search_cost(config: TrainConfig, n_train: int, candidates: int | None = None) -> float:
    """Successive halving's extra training over ``candidates`` (default: the config's rates),
    as a share of the planned run (0 without a search): the rounds of the trials that lose (the
    winner goes on from its rounds; a race takes the rate search's winner on as its first
    head's trial). The time estimate reads it."""
    evaluations = config.planned_evaluations(n_train)
    per_round, alive = search_schedule(candidates or len(config.lr_grid), evaluations)
    return per_round * (sum(alive) - len(alive)) / evaluations


@dataclass
class Work:
    """A run's optimizer steps: those planned (every round of the search and the rest of the
    chosen trial, without early stopping) and those done; the progress bar's measure."""

    total: int
    done: int = 0


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


@dataclass
class Searched:
    """What the search hands back: the trial to train on (the chosen rate's), the rounds that
    chose it, the steps and dev-scoring seconds of the trials it dropped, and whose search
    chose the rate when another run's did."""

    winner: Trial
    rounds: list[Round] = field(default_factory=list)
    spent_steps: int = 0
    spent_eval: float = 0.0
    shared_from: str | None = None


def steps_per_evaluation(setup: Setup) -> int:
    """Optimizer steps between two dev evaluations: a round of the search is a number of these."""
    return setup.config.eval_every_steps or setup.steps_per_epoch


def search_steps(setup: Setup) -> int:
    """The optimizer steps of every trial's rounds of a search over the config's rates (the
    chosen one's included): what a race pays to choose its rate."""
    candidates = len(setup.config.lr_grid)
    if candidates < 2:
        return 0
    per_round, alive = search_schedule(candidates, setup.evaluations)
    return per_round * steps_per_evaluation(setup) * sum(alive)


def planned_steps(setup: Setup, candidates: int, dropped_steps: int = 0) -> int:
    """The optimizer steps a run plans: the chosen trial's whole run, plus the rounds of the
    trials the search drops (less ``dropped_steps`` already made before a resume)."""
    run = setup.steps_per_epoch * setup.epochs
    if candidates < 2:
        return run
    per_round, alive = search_schedule(candidates, setup.evaluations)
    return run + per_round * steps_per_evaluation(setup) * (sum(alive) - len(alive)) - dropped_steps


def choose_rate(setup: Setup, log: SearchLog | None, work: Work) -> Searched:
    """The trial to train: the config's one rate, the rate shared by an earlier search, or the
    winner of successive halving on dev over the candidates (resumed from ``log`` where a
    stopped launch left it). ``work.total``: the steps planned, set here unless the caller set
    it (a race plans the search and itself)."""
    grid, progress = setup.config.lr_grid, setup.progress
    if log is not None:
        log.shared()  # a damaged log is set aside as it is read: said before anything trains
        log.resumed([f"{lr:g}" for lr in grid])
        for note in log.take_notes():
            progress(Note(message=note))
    if len(grid) == 1:
        work.total = work.total or planned_steps(setup, 1)
        return Searched(setup.new_trial(grid[0], work))
    shared = (
        log.chosen_elsewhere() if log is not None and setup.config.lr_search == "once" else None
    )
    if shared is not None:  # (its own search: resumed below)
        work.total = work.total or planned_steps(setup, 1)
        rate = float(shared["chosen"])
        progress(
            Note(
                message=f"learning rate {rate:g}: chosen on dev once for this backbone and "
                f"data, by the search of {shared['run_id']}"
                + (f"; {sure[0]}" if (sure := sureness(shared.get("rounds", []))) else "")
            )
        )
        return Searched(
            setup.new_trial(rate, work), shared.get("rounds", []), shared_from=shared["run_id"]
        )
    per_round, alive_per_round = search_schedule(len(grid), setup.evaluations)
    before = log.resumed([f"{lr:g}" for lr in grid]) if log is not None else None
    rounds = list(before["rounds"]) if before else []
    if before and before.get("chosen"):  # it had ended: the chosen rate alone, as it was
        work.total = work.total or planned_steps(setup, 1)
        rate = float(before["chosen"])
        progress(
            Note(
                message=f"learning rate {rate:g}: chosen on dev by this run's search "
                "before it was stopped; its rounds are not trained again"
            )
        )
        return Searched(
            setup.new_trial(rate, work),
            rounds,
            spent_steps=sum(r.steps for r in rounds),
        )
    alive = [float(lr) for lr in rounds[-1].kept] if rounds else list(grid)
    spent_steps = sum(r.steps for r in rounds)
    work.total = work.total or planned_steps(setup, len(grid), spent_steps)
    trials = [setup.new_trial(lr, work) for lr in grid if lr in alive]
    labels = [f"{t.lr:g}" for t in trials]
    if rounds:
        progress(
            Note(
                message=f"the learning-rate search resumes after round {len(rounds)} of "
                f"{len(alive_per_round)}: {', '.join(labels)} are trained to that "
                "point again, the dropped rates are not"
            )
        )

    def record(done: list[Round], left: list[str]) -> None:
        if log is not None:
            log.write([f"{lr:g}" for lr in grid], done, left[0] if len(left) == 1 else None)

    winner, steps, seconds = halve(
        trials,
        labels,
        per_round,
        alive_per_round,
        rounds,
        record,
        lambda t, i, n, r: Searching(
            lr=t.lr, candidate=i, candidates=n, round=r, rounds=len(alive_per_round)
        ),
        progress,
    )
    progress(Searching(lr=winner.lr, chosen=True))
    sure = sureness(rounds)
    progress(
        Note(
            message=f"learning rate chosen on dev: {winner.lr:g} (of "
            f"{', '.join(f'{lr:g}' for lr in grid)})" + (f"; {sure[0]}" if sure else "")
        )
    )
    return Searched(winner, rounds, spent_steps + steps, seconds)


def halve(
    trials: list[Trial],
    labels: list[str],
    per_round: int,
    schedule: list[int],
    rounds: list[Round],
    record,
    event,
    progress: ProgressFn,
) -> tuple[Trial, int, float]:
    """Successive halving over ``trials`` (named ``labels`` in the rounds' records) from round
    ``len(rounds) + 1`` of ``schedule`` on: a finished round's survivors are first trained again
    to its point (the same weights: each trial has its own random numbers), then each round
    trains every trial to ``per_round`` more dev evaluations and keeps the better half (best dev
    score at that point, ties by its dev loss, then the order given). A trial that comes already
    trained (the rate search's winner in a race) trains only where it is behind, and is ranked
    where it stood at each round's point. Each round's record is appended to ``rounds`` and
    handed to ``record(rounds, kept_labels)``; ``event(trial, i, n, round)`` is the progress
    event before a trial's round. Returns the last trial left, and the optimizer steps and
    dev-scoring seconds of the trials dropped here."""

    def advance_to(trial: Trial, evaluations: int) -> None:
        behind = evaluations - len(trial.selection.history)
        if behind > 0:
            trial.advance(behind)

    for trial in trials if rounds else []:  # where the last finished round left them
        advance_to(trial, per_round * len(rounds))
    names = dict(zip(map(id, trials), labels, strict=True))
    order = {id(t): i for i, t in enumerate(trials)}
    spent_steps, spent_eval = 0, 0.0
    for number, keep_of in enumerate(schedule[len(rounds) :], len(rounds) + 1):
        point = per_round * number
        for index, trial in enumerate(trials, 1):
            progress(event(trial, index, len(trials), number))
            advance_to(trial, point)
        at = {id(t): t.selection.standing(point) for t in trials}
        ranked = sorted(trials, key=lambda t: (-at[id(t)][0], at[id(t)][1], order[id(t)]))
        keep = -(-keep_of // 2)
        dropped = ranked[keep:]
        # how sure the cut is: the last trial kept against the best one dropped
        last, first_out = ranked[keep - 1], dropped[0]
        share = last.selection.lead(first_out.selection, point)
        steps = sum(t.state.global_step for t in dropped)
        spent_steps += steps
        spent_eval += sum(r["eval_seconds"] for t in dropped for r in t.selection.history)
        rounds.append(
            Round(
                kept=[names[id(t)] for t in ranked[:keep]],
                number=number,
                evaluations=per_round,
                dev={names[id(t)]: round(at[id(t)][0], 5) for t in trials},
                dropped_steps=steps,
                sure=(
                    Cut(names[id(last)], names[id(first_out)], round(share, 3))
                    if share is not None
                    else None
                ),
            )
        )
        trials = ranked[:keep]
        record(rounds, [names[id(t)] for t in trials])
    return trials[0], spent_steps, spent_eval
