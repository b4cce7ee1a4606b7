"""The learning-rate search on dev: successive halving, its schedule, kept as it goes, shared,
resumable. It runs over the trainer's trials (``glee_core.train.loop.Trial``, through the
:class:`Trial` protocol below), so the time estimate (``runs``, below the trainer) reads the
same schedule the search follows.

Every candidate rate trains a short round from the same start; the better half (by its best dev
score so far, ties by its latest dev loss, then the smaller rate) goes on, until one is left,
which trains to the end (:func:`search_schedule` says how long a round is). Each trial draws its
own random numbers (its dropout masks) and batch order, so a trial trained alone follows the
very path it follows among the others. That makes the search cheap to keep:

* a :class:`~glee_core.models.search_log.SearchLog` writes the rounds as they end (beside the
  run store, under the run's id): a stopped launch, relaunched, trains only the survivors of the
  last finished round again (to that round's point, the same weights), never the trials already
  dropped; a search that had ended trains its chosen rate alone;
* with ``--lr-search once`` (the practical recipe's default), the first head's search chooses
  the rate for the backbone and data, and every other head and seed of them trains at it (its
  record says whose search chose it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from ..core.events import Note, ProgressFn, Searching
from .config import TrainConfig
from .search_log import Cut, Round, SearchLog, sureness


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
