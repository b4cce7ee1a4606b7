"""How a launch's planned runs reach the store (:func:`run_launch`, and the :class:`Runner` it
drives): each run under its lock, trained and stored as
a :class:`RunRecord` or loaded when finished; the heads on cached features in one loop; a race's
heads by successive halving; the cross-validation due, fold by fold."""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Collection
from dataclasses import replace

import torch

from ..core.devices import cpu_share, resolve_device
from ..core.distributed import data_parallel
from ..core.events import (
    CrossValidating,
    Loading,
    Note,
    ProgressFn,
    Queued,
    RunStarted,
    Searching,
    WaitingForRun,
)
from ..models.scoring import get_backbone
from ..models.search import (
    Searched,
    Work,
    choose_rate,
    halve,
    planned_steps,
    search_schedule,
    search_steps,
    steps_per_evaluation,
)
from ..models.search_log import Round, SearchLog, sureness
from ..runs.store import Run
from .evaluation import evaluate
from .jobs import running_summary
from .launch import Launch, cross_validation_share
from .plan import PlannedRun, job_search_log, load_head, lp_ft_stage, run_record
from .preflight import preflight
from .selection import cross_validate
from .setup import TrainingContext, packable
from .training import (
    feature_inputs,
    finish,
    prepare,
    train_and_evaluate,
    train_together,
)

PACK_HEADS = 64  # heads on cached features trained in one loop at most (memory stays small)


class Runner:
    """Trains (or loads) planned runs into the store, one at a time (the heads on cached
    features all together first: :meth:`run_pack`), under the run's lock and a training slot;
    the main process of several decides and writes."""

    def __init__(self, launch: Launch, notes: list[str], device: torch.device):
        self.dataset, self.model_name, self.store = launch.dataset, launch.model, launch.store
        self.force, self.notes = launch.force, notes
        self.progress: ProgressFn = launch.progress or (lambda event: None)
        self.ddp = data_parallel(str(device))  # several processes: the main one decides, writes
        self.main = self.ddp is None or self.ddp.is_main
        self.device = self.ddp.device if self.ddp else device
        self.fresh: set[str] = set()  # run ids this launch trained a moment ago (a pack ...)
        self.after = 0.0  # the share of the launch its cross-validation takes, after the runs

    def run(self, job: PlannedRun, index: int, total: int, stage: bool = False) -> Run:
        """Train ``job`` unless the store has it; ``stage``: LP-FT's first stage of another
        run, reported as part of it (no run of its own in the progress), and re-used from the
        store even under ``force``."""
        if job.run_id in self.fresh:  # trained a moment ago (run_pack, or another process)
            return Run(self.store.path(job.run_id))
        waiting = WaitingForRun(run_id=job.run_id)
        with (
            self.store.run_lock(job.run_id, lambda: self.progress(waiting))
            if self.main
            else contextlib.nullcontext()
        ):
            train = (self.force and not stage) or self.store.get(job.run_id) is None
            if self.ddp is not None:
                train = self.ddp.broadcast(train)
            if stage:
                # a stored head is no stage to wait for: the fine-tune's own steps count at once
                self.progress(
                    Loading(
                        what=f"LP-FT's head on the frozen features ("
                        f"{'fitting' if train else 'stored'}: {job.run_id})",
                        lp_ft=bool(train),
                    )
                )
            else:
                self.started(job, index, total, cached=not train)
            if train:
                self._train(job)
            if self.ddp is not None:
                self.ddp.barrier()  # the others read the run once the main process wrote it
        return Run(self.store.path(job.run_id))

    def run_pack(self, jobs: list[tuple[int, PlannedRun]], total: int) -> None:
        """Train the heads ``jobs`` (numbered in the plan) that the store lacks in one loop
        (:func:`~glee_core.train.training.train_together`), under every run's lock (taken in
        run-id order, so two launches never wait on each other) and one training slot, and
        store each as a run of its own. :meth:`run` then finds them stored."""
        with contextlib.ExitStack() as held:
            for _, job in sorted(jobs, key=lambda item: item[1].run_id):
                waiting = WaitingForRun(run_id=job.run_id)
                held.enter_context(
                    self.store.run_lock(job.run_id, lambda e=waiting: self.progress(e))
                )
            todo = [(i, job) for i, job in jobs if self.force or self.store.get(job.run_id) is None]
            if len(todo) < 2:  # nothing to share a loop with: run() trains it as ever
                return
            index, first = todo[0]
            self.started(first, index, total, together=len(todo))
            backbone = get_backbone(self.model_name)
            queued = Queued(run_id=first.run_id)
            with self.store.training_slot(self.waiting(queued)), cpu_share(self.device):
                results = train_together(
                    self.context(backbone),
                    [job.spec for _, job in todo],
                    [job.config for _, job in todo],
                )
            for (_, job), result in zip(todo, results, strict=True):
                self.store.save(run_record(job, self.dataset, backbone, result, self.notes), result)
            self.fresh.update(job.run_id for _, job in todo)

    def cross_validate(self, jobs: list[PlannedRun], folds: int) -> None:
        """Cross-validate the quick-mode runs ``jobs`` (stored by now) and record it in each
        (:mod:`glee_core.train.selection`): the heads of a seed together, fold by fold, under
        their runs' locks and one training slot."""
        backbone = get_backbone(self.model_name)
        by_seed: dict[int, list[PlannedRun]] = {}
        for job in jobs:
            by_seed.setdefault(job.config.seed, []).append(job)
        for part, group in enumerate(by_seed.values(), 1):

            def tell(event, part=part):
                self.progress(
                    replace(event, part=part, parts=len(by_seed))
                    if isinstance(event, CrossValidating)
                    else event
                )

            with contextlib.ExitStack() as held:
                for job in sorted(group, key=lambda job: job.run_id):
                    waiting = WaitingForRun(run_id=job.run_id)
                    held.enter_context(
                        self.store.run_lock(job.run_id, lambda e=waiting: self.progress(e))
                    )
                setups, loaded = [], {}
                for job in group:
                    key = feature_inputs(job.spec, job.config)
                    setups.append(
                        prepare(
                            self.context(backbone, tell),
                            job.spec,
                            job.config,
                            splits=loaded.get(key),
                        )
                    )
                    loaded.setdefault(key, setups[-1].splits)
                queued = Queued(run_id=group[0].run_id)
                with self.store.training_slot(self.waiting(queued)), cpu_share(self.device):
                    results = cross_validate(setups, folds, tell)
                for job, cv in zip(group, results, strict=True):
                    self.store.add_cross_validation(job.run_id, cv)

    def race(self, jobs: list[PlannedRun], index: int, total: int) -> Run:
        """Fine-tune the heads ``jobs`` (one seed) as a race and store the best one's run: every
        head from its LP-FT stage at one rate (searched once for the backbone and data, on the
        first head, unless an earlier search chose it), then successive halving on dev over the
        heads (kept as it goes: a stopped race resumes after its last finished round), and the
        last head left trains to the end - the same weights it would reach trained alone."""
        key = hashlib.sha256(" ".join(j.run_id for j in jobs).encode()).hexdigest()[:16]
        log = SearchLog(self.store.searches_dir, f"race-{key}")
        if self.force:
            log.done()
        first = jobs[0]
        self.started(first, index, total, together=len(jobs), race=True)
        starts = [self.lp_ft_start(job) for job in jobs]
        backbone = get_backbone(self.model_name)
        started = time.perf_counter()
        queued = Queued(run_id=first.run_id)
        with self.store.training_slot(self.waiting(queued)), cpu_share(self.device):
            setups = [
                self.prepared(job, backbone, init_head)
                for job, (init_head, _) in zip(jobs, starts, strict=True)
            ]
            labels = [job.spec.id for job in jobs]
            before = log.resumed(labels)
            for note in log.take_notes():  # a damaged race log, set aside: the race starts anew
                self.progress(Note(message=note))
            rounds = list(before["rounds"]) if before else []
            alive = rounds[-1].kept if rounds else labels
            per_round, schedule = search_schedule(len(jobs), setups[0].evaluations)
            rate_log = self.search_log(
                replace(first, config=replace(first.config, lr_search="once"))
            )
            searching = rate_log is not None and rate_log.shared() is None
            # one bar for the rate's search and the race: both planned up front
            work = Work(
                total=(search_steps(setups[0]) if searching else 0)
                + planned_steps(setups[0], len(jobs))
                - sum(r.steps for r in rounds)
            )
            rate, rate_from, rate_rounds, rate_steps, searched_trial = self.race_rate(
                setups[0], first, rate_log, work
            )
            if searched_trial is not None and labels[0] in alive:
                # the first head at that rate is the search's winner: its rounds there are its
                # first rounds here (the same weights), not trained again
                plan = per_round * len(schedule) * steps_per_evaluation(setups[0])
                work.total -= min(searched_trial.state.global_step, plan)
            elif searched_trial is not None:  # a resumed race that had dropped the first head
                rate_steps += searched_trial.state.global_step
                searched_trial = None
            racing = [
                (
                    setup,
                    searched_trial if i == 0 and searched_trial else setup.new_trial(rate, work),
                )
                for i, setup in enumerate(setups)
                if labels[i] in alive
            ]
            if rounds:
                self.progress(
                    Note(
                        message=f"the race resumes after round {len(rounds)} of "
                        f"{len(schedule)}: {', '.join(alive)}"
                    )
                )
            head_of_trial = {id(trial): setup.spec.id for setup, trial in racing}
            winner, steps, seconds = halve(
                [trial for _, trial in racing],
                [label for label in labels if label in alive],
                per_round,
                schedule,
                rounds,
                lambda done, left: log.write(labels, done, left[0] if len(left) == 1 else None),
                lambda t, i, n, r: Searching(
                    lr=rate,
                    candidate=i,
                    candidates=n,
                    round=r,
                    rounds=len(schedule),
                    head=head_of_trial[id(t)],
                ),
                self.progress,
            )
            setup = next(s for s, trial in racing if trial is winner)
            searched = Searched(
                winner, rate_rounds, rate_steps + steps, seconds, shared_from=rate_from
            )
            result = evaluate(setup, finish(searched, self.progress, started))
        job = self._winner(jobs, setup.spec.id, result, starts, rounds)
        self.store.save(run_record(job, self.dataset, backbone, result, self.notes), result)
        log.done()
        if rate_log is not None:
            rate_log.done()  # the rate stays shared; its search's own log goes
        self.fresh.add(job.run_id)
        return Run(self.store.path(job.run_id))

    def _winner(
        self, jobs: list[PlannedRun], head: str, result, starts: list, rounds: list[Round]
    ) -> PlannedRun:
        """The race's winning run (``head``'s), its result told where its rate and LP-FT stage
        came from and the race's rounds, and how sure dev was of it (a close call is kept with
        the run, as a search's is)."""
        job = next(j for j in jobs if j.spec.id == head)
        if result.tuning.lr_from == job.run_id:  # it searched the rate itself
            result.tuning.lr_from = None
        result.tuning.lp_ft_from = starts[jobs.index(job)][1]
        result.tuning.race = rounds
        labels = ", ".join(j.spec.id for j in jobs)
        sure = sureness(rounds, "race")
        if sure and sure[1]:
            result.notes.append(f"{head} won the race of {labels}: {sure[0]}")
        self.progress(
            Note(
                message=f"{head} won the race of {labels} on dev; it is the one run stored"
                + (f"; {sure[0]}" if sure else "")
            )
        )
        return job

    def started(self, job: PlannedRun, index: int, total: int, **how) -> None:
        """Run ``index`` of ``total`` starts (``how``: ``cached``, ``together``, ``race``)."""
        self.progress(
            RunStarted(
                run_id=job.run_id,
                method=job.spec.id,
                seed=job.config.seed,
                index=index,
                total=total,
                after=self.after,
                **{"cached": False, **how},
            )
        )

    def prepared(self, job: PlannedRun, backbone, init_head=None):
        """``job``'s setup on ``backbone`` (``init_head``: its LP-FT stage's head)."""
        return prepare(self.context(backbone), job.spec, job.config, init_head=init_head)

    def context(self, backbone, progress: ProgressFn | None = None) -> TrainingContext:
        """What this launch's runs share: its data, ``backbone``, the progress (``progress``:
        another way to it), the store's feature cache and the device resolved once."""
        return TrainingContext(
            self.dataset, backbone, progress or self.progress, self.store.features_dir, self.device
        )

    def waiting(self, queued: Queued):
        """What a wait for the store's training slot says, once it starts: what holds the
        machine (the store's running jobs, with their time left) and how to train beside it."""
        return lambda: self.progress(replace(queued, behind=running_summary(self.store)))

    def race_rate(
        self, setup, job: PlannedRun, log: SearchLog | None, work: Work
    ) -> tuple[float, str | None, list[dict], int, object | None]:
        """The rate a race runs at: the config's one rate, or the one searched once for the
        backbone and data (searched now on ``job``'s head, kept in ``log``, when no earlier
        search did): the rate, whose search chose it, that search's rounds, the optimizer steps
        of the trials it dropped here, and ``job``'s trial at that rate (the search's winner,
        as far as it trained; None without a search)."""
        grid = job.config.lr_grid
        if len(grid) == 1:
            return grid[0], None, [], 0, None
        searched = choose_rate(setup, log, work)
        steps = 0 if searched.shared_from else searched.spent_steps
        return (
            searched.winner.lr,
            searched.shared_from or job.run_id,
            searched.rounds,
            steps,
            searched.winner,
        )

    def lp_ft_start(self, job: PlannedRun) -> tuple[dict | None, str | None]:
        """LP-FT's head for ``job`` (its quick-mode run, trained or re-used) and that run's id
        (the run records it); ``(None, None)`` without LP-FT."""
        if not job.config.lp_ft:
            return None, None
        stage = self.run(lp_ft_stage(job, self.dataset, self.model_name), 0, 0, stage=True)
        return load_head(stage), stage.run_id

    def _train(self, job: PlannedRun) -> None:
        init_head, lp_ft_from = self.lp_ft_start(job)
        backbone = get_backbone(self.model_name)
        queued = Queued(run_id=job.run_id)
        log = self.search_log(job)
        with (
            self.store.training_slot(self.waiting(queued))
            if self.main
            else contextlib.nullcontext(),
            cpu_share(self.device),
        ):
            result = train_and_evaluate(
                self.context(backbone), job.spec, job.config, init_head=init_head, search_log=log
            )
        result.tuning.lp_ft_from = lp_ft_from
        if self.main:
            self.store.save(run_record(job, self.dataset, backbone, result, self.notes), result)
            if log is not None:
                log.done()

    def search_log(self, job: PlannedRun) -> SearchLog | None:
        """Where ``job``'s learning-rate search is kept as it goes (the main process's; none
        without a search): resumed when a stopped launch left one, forgotten under ``force``."""
        log = job_search_log(self.store, job) if self.main else None
        if log is not None and self.force:
            log.done()
        return log


def run_launch(launch: Launch, trained: Collection[str] = ()) -> list[Run]:
    """Train (or load from the store) every method x seed of ``launch``; returns the runs in that
    order.
    A fine-tuning run with LP-FT first trains (or loads) its quick-mode stage, stored as a
    run of its own. ``trained``: runs this launch trained a moment ago elsewhere
    (``--runs-at-once``'s workers, which reported them), loaded without a word. The plan's
    runs are what trains, its cross-validation what is made, its races what races."""
    progress = launch.progress or (lambda event: None)
    device = resolve_device(launch.config.device)  # once, before any work: a bad one fails
    plan = launch.planned()
    if plan.left_out:
        progress(Note(message=plan.note))
    jobs = plan.runs
    if any(job.run_id not in trained for job in plan.to_train):  # the plan looked them up
        progress(Loading(what=f"the backbone {launch.model}"))
    notes = preflight(launch.dataset, jobs, launch.model, launch.store, launch.force)
    for note in notes:
        progress(Note(message=note))
    runner = Runner(launch, notes, device)
    runner.fresh.update(trained)
    # numbered for the progress in the order they train: the heads of the packs first
    together = [packable(job.spec, job.config, runner.device, runner.ddp) for job in jobs]
    order = sorted(range(len(jobs)), key=lambda i: not together[i])
    number = {i: n for n, i in enumerate(order, 1)}
    numbered = [(number[i], job) for i, job in enumerate(jobs)]
    validate = plan.validate if runner.ddp is None else []
    runner.after = cross_validation_share(launch, jobs, validate)
    pack = sorted(
        (item for item, fits in zip(numbered, together, strict=True) if fits),
        key=lambda item: item[0],
    )
    for start in range(0, len(pack), PACK_HEADS):  # heads on cached features: in one loop
        runner.run_pack(pack[start : start + PACK_HEADS], len(jobs))
    raced = {  # a race whose heads other processes trained meanwhile: they are loaded
        job.run_id: race
        for race in plan.raced
        if not any(j.run_id in trained for j in race)
        for job in race
    }
    trained_in_order = {}
    for index, job in sorted(numbered, key=lambda item: item[0]):
        race = raced.get(job.run_id)
        if race is None:
            trained_in_order[job.run_id] = runner.run(job, index, len(jobs))
        elif job is race[0]:  # the race's winner stands for its heads
            trained_in_order[job.run_id] = runner.race(race, index, len(jobs))
    runs = [trained_in_order[job.run_id] for job in jobs if job.run_id in trained_in_order]
    if validate:
        runner.cross_validate(validate, launch.config.folds)
        runs = [Run(run.path) for run in runs]  # their metrics now hold it
    return runs
