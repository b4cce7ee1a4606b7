"""What every step of a run shares, as types: what every run of a launch shares
(:class:`TrainingContext`: data, backbone, progress, feature cache, device), the run's
:class:`Setup` (data, method, backbone, resolved config, device, splits; it makes each trial's
model and state), what fitting hands on (:class:`Fitted`) and what a finished run stores
(:class:`RunResult`); and whether a run trains in a pack of heads (:func:`packable`)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ..core.devices import resolve_precision
from ..core.distributed import DataParallel
from ..core.events import ProgressFn
from ..data.datasets import LongTailDataset
from ..models.backbone import Backbone
from ..models.config import TrainConfig
from ..models.heads import head_of
from ..models.methods import MethodSpec
from ..models.model import GleeModel, build_model
from ..models.scoring import Split
from ..models.search import Work
from ..models.search_log import Round, SearchLog
from ..runs.record import MetricsRecord
from ..runs.run_parts import Timing, Tuning
from .loop import DevSelection, Trial
from .optim import make_optimizer
from .step import TrainingState


def _quiet(event) -> None:
    """Progress nobody reads."""


@dataclass(frozen=True)
class TrainingContext:
    """What every run of a launch shares: the data, the backbone (each fine-tune trains a copy of
    it), where the progress goes, the store's feature cache (None: a temporary folder) and the
    device, resolved once by whoever made the context (None: each run resolves its config's)."""

    dataset: LongTailDataset
    backbone: Backbone
    progress: ProgressFn | None = _quiet
    feature_cache: Path | None = None
    device: torch.device | None = None

    def __post_init__(self):
        if self.progress is None:
            object.__setattr__(self, "progress", _quiet)


@dataclass
class RunResult:
    """Everything a finished run stores (see :mod:`glee_core.runs.store`)."""

    metrics: MetricsRecord
    history: list[dict]
    predictions: pd.DataFrame
    logits: np.ndarray
    weight_norms: list[float]
    features: dict[str, np.ndarray]
    model: GleeModel
    config: TrainConfig  # resolved: what the run really used
    calibration: dict[str, np.ndarray] = field(default_factory=dict)  # see calibration.py
    timing: Timing = field(default_factory=Timing)
    tuning: Tuning = field(default_factory=Tuning)  # the rate trained at, the search's rounds
    notes: list[str] = field(default_factory=list)


def packable(
    spec: MethodSpec, config: TrainConfig, device: torch.device, ddp: DataParallel | None = None
) -> bool:
    """Whether a run trains in a pack of heads (:func:`fit_together`): a head on cached
    features, at one rate, scored after every epoch, in one process, without a gradient
    scaler."""
    return (
        config.frozen
        and not head_of(spec).closed_form
        and len(config.lr_grid) == 1
        and not config.eval_every_steps
        and ddp is None
        and resolve_precision(config.precision, device) != "fp16"
    )


@dataclass
class Setup:
    """What every step of a run shares: the data, method, backbone, resolved config, device,
    the encoded (or cached) splits and the notes made preparing them."""

    dataset: LongTailDataset
    spec: MethodSpec
    backbone: Backbone
    config: TrainConfig  # resolved
    device: torch.device
    ddp: DataParallel | None
    splits: dict[str, Split]
    pad_id: int
    notes: list[str]
    progress: ProgressFn
    init_head: dict[str, torch.Tensor] | None = None  # LP-FT: the frozen-fit head's weights
    search_log: SearchLog | None = None  # where the learning-rate search is kept as it goes

    @property
    def steps_per_epoch(self) -> int:
        return self.config.steps_per_epoch(len(self.splits["train"]))

    @property
    def epochs(self) -> int:
        return self.config.planned_epochs(len(self.splits["train"]))

    @property
    def evaluations(self) -> int:
        return self.config.planned_evaluations(len(self.splits["train"]))

    def new_model(self) -> GleeModel:
        """The method on a fresh copy of the backbone (frozen: the head alone), seeded, and with
        LP-FT's head when given: every trial starts from the same weights."""
        torch.manual_seed(self.config.seed)
        # Fine-tuning trains a deep copy, so the pristine backbone serves the next run unchanged.
        own = (
            self.backbone
            if self.config.frozen
            else replace(self.backbone, model=copy.deepcopy(self.backbone.model))
        )
        model = build_model(
            self.spec, own, self.dataset.classes, self.dataset.verbalizer, self.config
        )
        if self.init_head is not None:
            model.head.warm_start(self.init_head)
        model = model.to(self.device)
        if self.config.compile and not self.config.frozen:  # in place: state-dict keys unchanged
            # under prefixes the model calls the encoder inside peft's wrapper, not the wrapper
            virtual = model.prefixes or model.prompt_tokens
            (model.adapter.base_model if virtual else model.encoder).compile()
        return model

    def new_state(
        self, model: GleeModel, params: list, optimizer, scheduler
    ) -> tuple[TrainingState, DevSelection]:
        """Where ``model`` trains (its batch order seeded) and its dev selection."""
        state = TrainingState(
            self.ddp.wrap(model) if self.ddp else model,  # shares parameters
            self.spec,
            self.config,
            optimizer,
            scheduler,
            params,
            np.random.default_rng(self.config.seed),
            self.device,
            self.pad_id,
            self.ddp,
        )
        state.class_counts = torch.from_numpy(
            np.bincount(self.splits["train"].labels, minlength=self.dataset.num_classes)
        ).to(self.device)
        if self.config.self_ensemble or self.config.self_distill:
            state.keep_average(model)
        selection = DevSelection(
            model, self.splits["dev"], state, self.steps_per_epoch, self.progress
        )
        selection.epochs = self.epochs
        return state, selection

    def new_trial(self, lr: float, work: Work | None = None) -> Trial:
        """Training at ``lr`` from the run's start (every trial from the same weights), its
        steps counted in the run's ``work``."""
        model = self.new_model()
        params, optimizer, scheduler = make_optimizer(
            model, self.config, self.device, self.steps_per_epoch * self.epochs, lr
        )
        state, selection = self.new_state(model, params, optimizer, scheduler)
        return Trial(lr, model, state, selection, self.splits["train"], self.progress, work)

    @property
    def packable(self) -> bool:
        return packable(self.spec, self.config, self.device, self.ddp)

    def pack_key(self) -> tuple:
        """What the heads of one pack must share: one optimiser, schedule and loop."""
        c = self.config
        return (
            self.steps_per_epoch,
            self.epochs,
            c.lr_grid[0],
            c.weight_decay,
            c.warmup_ratio,
            c.max_grad_norm,
            str(self.device),
            resolve_precision(c.precision, self.device),
        )


@dataclass
class Fitted:
    """What :func:`fit` hands to :func:`evaluate`: the best-on-dev model and how it was found."""

    model: GleeModel
    history: list[dict]  # the kept trial's dev evaluations
    epochs_run: int
    lr: float | None  # the rate the kept weights trained at (None: closed form)
    search: list[Round]  # the learning-rate search's rounds (empty without one)
    steps: int  # optimizer steps of every trial
    seconds: float  # wall time of training, search and dev scoring included
    eval_seconds: float  # of that, dev scoring
    skipped_steps: int = 0  # fp16: optimizer steps the gradient scaler skipped (overflow)
    lr_from: str | None = None  # the run whose search chose the rate (searched once)
    planned_steps: int = 0  # the steps it planned (every round, no early stopping)
    kept_average: bool = False  # self-ensemble: the kept weights are the moving average's
