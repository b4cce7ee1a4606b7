"""A recommendation's next steps as launches: each :class:`~glee_core.runs.recommend.NextStep`
with the ``TrainRequest`` that carries it out (fine-tuning its top heads, or more seeds of its
setting), so a page only draws a button for it and launches what it carries."""

from __future__ import annotations

from dataclasses import replace

from ..core.errors import GleeError
from ..models.config import TrainConfig
from ..models.options import DataOptions
from ..models.requests import TrainRequest
from ..runs.recommend import ENOUGH_SEEDS, NextStep, Recommendation
from ..runs.store import Run
from .plan import plan_runs


def step_request(
    step: NextStep, rec: Recommendation, runs: list[Run], data: DataOptions, dataset
) -> TrainRequest | None:
    """The request of ``step`` on ``data`` (``dataset``: it loaded), or None when it cannot be
    launched in the same setting (runs made on the command line with other flags: the page
    then names the command)."""
    first = next(r for r in runs if r.setting == rec.chosen.setting)
    model = first.record.model.name
    pooling = first.record.hyperparameters.pooling  # the chosen candidate's (cls for [MASK])
    if step.finetunes:
        read = pooling if rec.chosen.pooling != "[MASK]" else "auto"
        return TrainRequest(
            data=data,
            methods=list(step.heads),
            seeds=[1],
            model=model,
            config=TrainConfig(pooling=read, heads="best" if len(step.heads) > 1 else None),
        )
    config = TrainConfig(mode=rec.chosen.mode, pooling=pooling)
    try:  # the same setting only if its mode's default config gives its run ids
        planned = plan_runs(dataset, [first.record.method], [first.seed], model, config)
    except GleeError:
        return None
    if planned[0].run_id != first.run_id:
        return None
    return TrainRequest(
        data=data,
        methods=list(step.heads),
        seeds=list(range(1, ENOUGH_SEEDS + 1)),
        model=model,
        config=config,
    )


def with_requests(
    rec: Recommendation, runs: list[Run], data: DataOptions, dataset
) -> Recommendation:
    """``rec`` with each next step carrying its request (None where ``dataset`` is None: the
    runs outlived their data, and the steps are only named)."""
    return replace(
        rec,
        steps=tuple(
            replace(step, request=step_request(step, rec, runs, data, dataset))
            if dataset is not None
            else step
            for step in rec.steps
        ),
    )
