"""Train one method on one dataset and evaluate it, in three steps: :func:`prepare` (config,
device, encoded splits), :func:`fit` (the loop and dev selection, with a learning-rate search on
dev when the config has candidates) and :func:`evaluate` (test, metrics, what the run stores).
Heads on cached features (quick mode) train in one loop with the other heads of their launch
(:func:`fit_together`; alone, a pack of one).

The paper's protocol: AdamW (lr 1e-5, weight decay 0), batch 32, gradient norm clipped at 1,
linear warm-up over 10% of the steps, up to 10 epochs with early stopping after 2 epochs without a
dev macro-F1 gain; the best-on-dev weights are evaluated on test. The practical recipe (see
:class:`glee_core.models.config.Recipe`) adds the search, LP-FT's warm-started head, a head learning
rate and a floor on steps. AdamW is fused on a CPU and on CUDA. On CUDA the step runs under bf16
autocast (fp16 with a gradient scaler on GPUs without bf16) on batches padded to a few widths; the
loop never waits on the device except to report the loss every ``log_every`` steps.
"""

from __future__ import annotations

import copy
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from transformers import get_linear_schedule_with_warmup

from ..core.devices import (
    adamw,
    keep_large_blocks_mapped,
    resolve_device,
    resolve_precision,
)
from ..core.distributed import DataParallel, data_parallel
from ..core.errors import GleeError
from ..core.events import (
    FeaturePass,
    Note,
    ProgressFn,
    Testing,
)
from ..data.datasets import LongTailDataset
from ..data.encoding import EncodedSplit, encode
from ..data.splits import SPLIT_SEED
from ..models.backbone import Backbone, trained_pooling
from ..models.config import POOLINGS, TrainConfig
from ..models.features import cached_features, limited_splits
from ..models.heads import head_of
from ..models.losses import eta_normalise
from ..models.methods import MethodSpec
from ..models.model import GleeModel, build_model
from ..models.scoring import Split, predict
from ..models.search import Searched, SearchLog, Work, choose_rate
from ..runs.metrics import classification_metrics, shot_f1
from ..runs.record import MetricsRecord
from .loop import (
    DevSelection,
    Pack,
    RngStream,
    TrainingState,
    Trial,
    make_optimizer,
)

FEATURES_PER_CLASS = 64  # test examples per class whose classifier input is stored (Figure 4)


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
    timing: dict = field(default_factory=dict)
    tuning: dict = field(default_factory=dict)  # the rate trained at, the search's rounds
    notes: list[str] = field(default_factory=list)


def prepare_splits(
    dataset: LongTailDataset,
    spec: MethodSpec,
    backbone: Backbone,
    config: TrainConfig,
    device: torch.device,
    feature_cache: Path | None,
    progress: ProgressFn,
) -> dict[str, Split]:
    """Token ids (fine-tuning) or cached hidden states (frozen) of every split; ``--limit`` keeps
    the first N training examples. ``config`` is resolved (its max length is set)."""
    if config.frozen:
        cache = feature_cache or Path(tempfile.gettempdir()) / "glee-features"
        splits = cached_features(
            dataset,
            backbone,
            spec.input_format,
            config.max_length,
            cache,
            device,
            progress,
            config.pooling,
            config.limit,
            config.limit_strategy,
        )
    else:  # --limit: the rest of the training split is not even tokenised
        splits = {
            name: encode(
                frame, backbone.tokenizer, spec.input_format, dataset.template, config.max_length
            )
            for name, frame in limited_splits(dataset, config.limit, config.limit_strategy).items()
        }
    if len(splits["train"]) == 0:
        raise GleeError(f"{dataset.id}: the training split is empty")
    return splits


def feature_pass_timing(train: Split) -> dict:
    """A frozen run's record of how fast its feature pass encoded (what estimates read)."""
    rate = getattr(train, "pass_tokens_per_second", None)
    return {"feature_pass_tokens_per_second": round(rate, 1)} if rate else {}


def sample_feature_rows(labels: np.ndarray, per_class: int = FEATURES_PER_CLASS) -> np.ndarray:
    """Up to ``per_class`` test rows of every class, the same rows for every method and seed."""
    rng = np.random.default_rng(SPLIT_SEED)
    rows = [rng.permutation(np.flatnonzero(labels == c))[:per_class] for c in np.unique(labels)]
    return np.sort(np.concatenate(rows)) if rows else np.zeros(0, dtype=np.int64)


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
    search: list[dict]  # the learning-rate search's rounds (empty without one)
    steps: int  # optimizer steps of every trial
    seconds: float  # wall time of training, search and dev scoring included
    eval_seconds: float  # of that, dev scoring
    skipped_steps: int = 0  # fp16: optimizer steps the gradient scaler skipped (overflow)
    lr_from: str | None = None  # the run whose search chose the rate (searched once)
    planned_steps: int = 0  # the steps it planned (every round, no early stopping)
    kept_average: bool = False  # self-ensemble: the kept weights are the moving average's


def prepare(
    dataset: LongTailDataset,
    spec: MethodSpec,
    backbone: Backbone,
    config: TrainConfig,
    progress: ProgressFn,
    feature_cache: Path | None = None,
    init_head: dict[str, torch.Tensor] | None = None,
    splits: dict[str, Split] | None = None,
) -> Setup:
    """Resolve the config, pick the device, encode (or load cached features of) every split;
    ``splits``: those another run of the same inputs prepared (heads trained together)."""
    if config.pooling not in POOLINGS:  # before the recipe is resolved (paper: cls)
        config = replace(
            config, pooling=config.read_pooling(spec.input_format, trained_pooling(backbone.name))
        )
    config = config.resolved(dataset.max_length, dataset.batch_size)
    if head_of(spec).closed_form and not config.frozen:
        raise GleeError(f"{spec.id} is fitted on a frozen backbone's features; use --mode frozen")
    ddp = data_parallel(config.device)
    device = ddp.device if ddp else resolve_device(config.device)
    if device.type == "cpu" and config.micro_batch_size:  # asked to save memory
        keep_large_blocks_mapped()
    if splits is None:
        splits = prepare_splits(dataset, spec, backbone, config, device, feature_cache, progress)
    notes = [
        f"{n} of {len(splits[name])} {name} texts reached max length and were truncated to "
        f"{config.max_length} tokens"
        for name in ("train", "test")
        if isinstance(splits[name], EncodedSplit)
        and (n := int((splits[name].lengths >= config.max_length).sum()))
    ]
    present = np.unique(splits["train"].labels)
    if len(present) < 2:
        first = config.limit and config.limit_strategy == "first"
        kept = (
            f"the first {len(splits['train'])} texts kept by --limit (--limit-strategy "
            "stratified keeps every class)"
            if first
            else f"the {len(splits['train'])} texts to learn from"
        )
        message = (
            f"{kept} hold one class only ({dataset.classes[int(present[0])]}): the model "
            "can only learn to predict it"
        )
        # scikit-learn's solver refuses one class; a stratified --limit of 1 is a mistake; the
        # first rows stay allowed, with a warning: the paper recipe's runs of before
        if head_of(spec).closed_form or not first:
            raise GleeError(f"{dataset.id}: {message}; {spec.id} needs two classes or more")
        progress(Note(message=f"warning: {message}"))
        notes.append(message)
    pad_id = backbone.tokenizer.pad_token_id if backbone.tokenizer.pad_token_id is not None else 0
    return Setup(
        dataset, spec, backbone, config, device, ddp, splits, pad_id, notes, progress, init_head
    )


def fit(setup: Setup) -> Fitted:
    """Train and keep the best-on-dev weights: at the config's one rate, or at the rate the
    search on dev chooses (:func:`~glee_core.models.search.choose_rate`: successive halving,
    kept in ``setup.search_log`` as it goes, or a rate an earlier search chose once for this
    backbone and data). A closed-form head is fitted once."""
    started = time.perf_counter()
    if head_of(setup.spec).closed_form:
        return _fit_closed_form(setup, started)
    if setup.packable:  # alone, a pack of one: the same result as in a pack of many
        return fit_together([setup])[0]
    return finish(choose_rate(setup, setup.search_log, Work(total=0)), setup.progress, started)


def finish(searched: Searched, progress: ProgressFn, started: float) -> Fitted:
    """Train the trial a search left (``searched.winner``) to its end, keep its best-on-dev
    weights, and say how they were found (the search's rounds, every trial's steps)."""
    winner = searched.winner
    winner.advance(None)
    selection = winner.selection
    if not selection.history:  # fewer steps than one evaluation interval: score once at the end
        selection.evaluate()
    winner.model.load_state_dict(selection.best_state)
    skipped = winner.state.skipped_steps
    if skipped is not None and int(skipped):
        progress(
            Note(
                message=f"fp16: the gradient scaler skipped {int(skipped)} of "
                f"{winner.state.global_step} optimizer steps (overflow)"
            )
        )
    return Fitted(
        model=winner.model,
        history=selection.history,
        kept_average=selection.kept_average,
        epochs_run=winner.epoch,
        lr=winner.lr,
        search=searched.rounds,
        steps=searched.spent_steps + winner.state.global_step,
        seconds=time.perf_counter() - started,
        eval_seconds=searched.spent_eval + sum(r["eval_seconds"] for r in selection.history),
        skipped_steps=0 if skipped is None else int(skipped),
        lr_from=searched.shared_from,
        planned_steps=winner.work.total,
    )


def _fit_closed_form(setup: Setup, started: float) -> Fitted:
    """A probe: scikit-learn fits the head on the cached features once, no epochs."""
    model = setup.new_model()
    train, device = setup.splits["train"], setup.device
    model.head.fit_closed_form(
        train.hidden, train.labels, setup.dataset.num_classes, setup.config.seed
    )
    with torch.no_grad():
        # torch.tensor copies: cached features may be read-only memory maps
        logits, _ = model.head(torch.tensor(train.hidden, device=device))
        train_loss = float(
            torch.nn.functional.cross_entropy(
                logits, torch.tensor(train.labels, dtype=torch.long, device=device)
            )
        )
    state = TrainingState(
        model, setup.spec, setup.config, None, None, [], None, device, setup.pad_id
    )
    selection = DevSelection(
        model, setup.splits["dev"], state, setup.steps_per_epoch, setup.progress
    )
    selection.evaluate(train_loss)
    model.load_state_dict(selection.best_state)
    return Fitted(
        model=model,
        history=selection.history,
        kept_average=selection.kept_average,
        epochs_run=1,
        lr=None,
        search=[],
        steps=0,
        seconds=time.perf_counter() - started,
        eval_seconds=selection.history[0]["eval_seconds"],
    )


def fit_together(setups: list[Setup]) -> list[Fitted]:
    """Train the heads of several runs on cached features as one :class:`~.loop.Pack` (the
    quick compare: every head and seed of a dataset) under one fused AdamW, each head seeded,
    batched and scored on dev as it is alone: a head trained in a pack gets what it gets alone
    (a pack of one)."""
    started = time.perf_counter()
    keys = {s.pack_key() for s in setups}
    if len(keys) != 1 or not all(s.packable for s in setups):
        raise GleeError(
            "fit_together takes heads on cached features sharing one protocol "
            f"(steps, epochs, rate, device); got {sorted(map(str, keys))}"
        )
    first = setups[0]
    config, device = first.config, first.device
    lr = config.lr_grid[0]
    built = []
    for setup in setups:
        model = setup.new_model()  # seeded: the head's weights, then its random numbers
        built.append(
            (setup, model, [p for p in model.parameters() if p.requires_grad], RngStream(device))
        )
    optimizer = adamw(
        [p for _, _, params, _ in built for p in params],
        device,
        lr=lr,
        weight_decay=config.weight_decay,
    )  # one kernel for every head
    total_steps = first.steps_per_epoch * first.epochs
    scheduler = get_linear_schedule_with_warmup(
        optimizer, int(config.warmup_ratio * total_steps), total_steps
    )
    trials = []
    for setup, model, params, rng in built:
        state, selection = setup.new_state(model, params, optimizer, scheduler)
        if len(built) > 1:  # one head's dev score would read as the pack's
            selection.progress = lambda event: None
        trials.append(
            Trial(lr, model, state, selection, setup.splits["train"], setup.progress, rng=rng)
        )
    Pack(trials, optimizer, scheduler).advance(None)
    # each head's time: its share of the training steps (by its steps) and its own dev scoring
    evals = [sum(r["eval_seconds"] for r in t.selection.history) for t in trials]
    training = max(time.perf_counter() - started - sum(evals), 0.0)
    steps_in_all = max(sum(t.state.global_step for t in trials), 1)
    fitted = []
    for trial, eval_seconds in zip(trials, evals, strict=True):
        trial.model.load_state_dict(trial.selection.best_state)
        fitted.append(
            Fitted(
                model=trial.model,
                history=trial.selection.history,
                kept_average=trial.selection.kept_average,
                epochs_run=trial.epoch,
                lr=lr,
                search=[],
                steps=trial.state.global_step,
                seconds=training * trial.state.global_step / steps_in_all + eval_seconds,
                eval_seconds=eval_seconds,
            )
        )
    return fitted


def fit_packs(setups: list[Setup]) -> list[Fitted]:
    """Every setup fitted as :func:`fit` fits it, in order: the heads that can train together
    (``packable``) in one pack per protocol they share (:func:`fit_together`; one pack in
    practice), the others (a closed-form probe, a fine-tune) alone."""
    out: list = [None] * len(setups)
    packs: dict[tuple, list[int]] = {}
    for i, setup in enumerate(setups):
        if setup.packable:
            packs.setdefault(setup.pack_key(), []).append(i)
        else:
            out[i] = fit(setup)
    for members in packs.values():
        for i, fitted in zip(members, fit_together([setups[i] for i in members]), strict=True):
            out[i] = fitted
    return out


def scored_logits(
    setup: Setup, model: GleeModel, split: Split
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(logits, raw_logits, features)`` of ``split`` as a run scores its test split: η-norm
    applied for the methods that use it (one uncalibrated pass: post-hoc calibration reads the
    raw logits)."""
    config = setup.config
    raw_logits, features = predict(
        model,
        split,
        setup.pad_id,
        setup.device,
        config.eval_batch_size,
        config.precision,
        calibrate=False,
        pad_multiple=config.pad_multiple,
    )
    logits = raw_logits
    if setup.spec.eta_norm:
        logits = eta_normalise(
            torch.from_numpy(raw_logits), model.class_weight_norms().detach().cpu()
        ).numpy()
    return logits, raw_logits, features


def evaluate(setup: Setup, fitted: Fitted) -> RunResult:
    """Score the kept weights on test (η-norm applied for the methods that use it), and gather
    what the run stores: metrics, predictions, sampled features, calibration inputs, timing."""
    setup.progress(Testing())
    config, dataset, model, device = setup.config, setup.dataset, fitted.model, setup.device
    test, dev = setup.splits["test"], setup.splits["dev"]
    test_start = time.perf_counter()
    logits, raw_logits, features = scored_logits(setup, model, test)
    test_seconds = time.perf_counter() - test_start
    pred = logits.argmax(1)
    head, tail = dataset.head_tail()
    metrics = classification_metrics(test.labels, pred, dataset.classes, head, tail)
    history = fitted.history
    best = max(history, key=lambda r: r[f"dev_{config.select_metric}"])  # the first best one
    metrics.update(
        {
            f"{k}_f1": v
            for k, v in shot_f1(metrics["per_class"], dataset.class_counts().to_dict()).items()
        }
    )
    metrics.update(
        best_epoch=best["epoch"],
        best_step=best["step"],
        best_dev_f1=best["dev_f1"],
        best_dev_acc=best["dev_acc"],
        select_metric=config.select_metric,
    )
    metrics = MetricsRecord.from_dict(metrics, dataset.classes)
    probs = torch.softmax(torch.from_numpy(logits), dim=1).numpy()
    frame = dataset.splits["test"]
    predictions = pd.DataFrame(
        {
            "text": frame["text"].to_numpy(),
            "text_b": frame["text_b"].to_numpy(),
            "gold": [dataset.classes[i] for i in test.labels],
            "pred": [dataset.classes[i] for i in pred],
            "confidence": probs.max(1).round(6),
            "correct": pred == test.labels,
        }
    )
    rows = sample_feature_rows(test.labels)
    # what post-hoc calibration needs: the uncalibrated logits and classifier inputs of every
    # dev and test example, and the predictor's W and b (logits = features @ W.T + b)
    dev_raw, dev_features = predict(
        model,
        dev,
        setup.pad_id,
        device,
        config.eval_batch_size,
        config.precision,
        calibrate=False,
        pad_multiple=config.pad_multiple,
    )
    calibration = {
        "dev_logits": dev_raw,
        "dev_features": dev_features,
        "dev_labels": dev.labels,
        "test_logits": raw_logits,
        "test_features": features,
        "test_labels": test.labels,
    }
    weight, bias = model.head.linear_predictor()
    calibration.update(
        weight=weight.detach().float().cpu().numpy(), bias=bias.detach().float().cpu().numpy()
    )
    seconds_training = max(fitted.seconds - fitted.eval_seconds, 1e-9)
    examples_per_second = fitted.steps * config.batch_size / seconds_training
    tuning = {"lr": fitted.lr} if fitted.lr is not None else {}
    if config.self_ensemble:
        tuning["kept"] = "moving average" if fitted.kept_average else "weights"
    if fitted.search:
        tuning["lr_search"] = fitted.search
    if fitted.lr_from:
        tuning["lr_from"] = fitted.lr_from
    tuning.update(model.tuning_record())
    return RunResult(
        metrics=metrics,
        history=history,
        predictions=predictions,
        logits=logits,
        weight_norms=model.class_weight_norms().detach().cpu().tolist(),
        features={
            "features": features[rows].astype(np.float16),
            "labels": test.labels[rows],
            "rows": rows,
        },
        model=model,
        notes=setup.notes,
        config=config,
        calibration=calibration,
        tuning=tuning,
        timing={
            "train_seconds": round(fitted.seconds, 3),
            "test_seconds": round(test_seconds, 3),
            "epochs_run": fitted.epochs_run,
            "evaluations": len(history),
            **(
                {"steps": fitted.steps, "planned_steps": fitted.planned_steps}
                if fitted.planned_steps
                else {}
            ),
            "device": str(device),
            "precision": resolve_precision(config.precision, device),
            **({"skipped_steps": fitted.skipped_steps} if fitted.skipped_steps else {}),
            "train_examples_per_second": round(examples_per_second, 2),
            # what another dataset's estimate scales by (its texts may be 4x as long)
            "train_tokens_per_second": round(
                examples_per_second * float(setup.splits["train"].lengths.mean()), 1
            ),
            **feature_pass_timing(setup.splits["train"]),
        },
    )


def feature_inputs(spec: MethodSpec, config: TrainConfig) -> tuple:
    """What a head on cached features reads (its input format, pooling, max length and training
    limit): heads with the same inputs share one feature pass and its arrays in memory."""
    return (
        spec.input_format,
        config.pooling,
        config.max_length,
        config.limit,
        config.limit_strategy,
    )


def train_together(
    dataset: LongTailDataset,
    specs: list[MethodSpec],
    backbone: Backbone,
    configs: list[TrainConfig],
    progress: ProgressFn | None = None,
    feature_cache: Path | None = None,
) -> list[RunResult]:
    """Several heads on cached features (methods x seeds of one quick compare) trained in one
    loop (:func:`fit_together`), each evaluated as a run of its own: what
    :func:`train_and_evaluate` gives each of them alone."""
    progress = progress or (lambda event: None)
    inputs = [feature_inputs(spec, config) for spec, config in zip(specs, configs, strict=True)]
    # each at most one feature pass (every pooling of an input comes from the same pass),
    # numbered for progress
    passes = list(dict.fromkeys(key[:1] + key[2:] for key in inputs))

    def numbered(key):
        part = passes.index(key[:1] + key[2:]) + 1
        return lambda event: progress(
            replace(event, part=part, parts=len(passes))
            if isinstance(event, FeaturePass)
            else event
        )

    setups, loaded = [], {}  # the heads of one input format share its features in memory
    for spec, config, key in zip(specs, configs, inputs, strict=True):
        setups.append(
            prepare(
                dataset,
                spec,
                backbone,
                config,
                numbered(key),
                feature_cache,
                splits=loaded.get(key),
            )
        )
        loaded.setdefault(key, setups[-1].splits)
    return [
        evaluate(setup, fitted) for setup, fitted in zip(setups, fit_together(setups), strict=True)
    ]


def train_and_evaluate(
    dataset: LongTailDataset,
    spec: MethodSpec,
    backbone: Backbone,
    config: TrainConfig,
    progress: ProgressFn | None = None,
    feature_cache: Path | None = None,
    init_head: dict[str, torch.Tensor] | None = None,
    search_log: SearchLog | None = None,
) -> RunResult:
    """Train ``spec`` on a fresh copy of ``backbone`` (or, frozen, a head on its cached features)
    and evaluate the best-on-dev weights: :func:`prepare`, :func:`fit`, :func:`evaluate`.
    ``config`` may be unresolved: the dataset fills its max length and batch size, the recipe the
    rest. ``init_head``: LP-FT's head, fitted on the frozen features, to start from;
    ``search_log``: where the learning-rate search is kept (and resumed, and shared)."""
    setup = prepare(
        dataset, spec, backbone, config, progress or (lambda event: None), feature_cache, init_head
    )
    setup.search_log = search_log
    return evaluate(setup, fit(setup))
