"""Train one method on one dataset and evaluate it, in three steps: :func:`prepare` (config,
device, encoded splits), :func:`fit` (the loop and dev selection, with a learning-rate search on
dev when the config has candidates) and :func:`~glee_core.train.evaluation.evaluate` (test,
metrics, what the run stores; the run's types are :mod:`glee_core.train.setup`'s). Heads on cached
features (quick mode) train in one loop with the other heads of their launch
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

import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from transformers import get_linear_schedule_with_warmup

from ..core.devices import (
    adamw,
    keep_large_blocks_mapped,
    resolve_device,
)
from ..core.distributed import data_parallel
from ..core.errors import GleeError
from ..core.events import (
    FeaturePass,
    Note,
    ProgressFn,
)
from ..data.datasets import LongTailDataset
from ..data.encoding import EncodedSplit, encode
from ..models.backbone import trained_pooling
from ..models.config import POOLINGS, TrainConfig
from ..models.features import Encoder, FeatureInputs, cached_features, limited_splits
from ..models.heads import head_of
from ..models.methods import MethodSpec
from ..models.scoring import Split
from ..models.search import Searched, Work, choose_rate
from ..models.search_log import SearchLog
from .evaluation import evaluate
from .loop import DevSelection, Pack, RngStream, Trial
from .setup import Fitted, RunResult, Setup, TrainingContext
from .step import TrainingState


def prepare_splits(
    dataset: LongTailDataset,
    spec: MethodSpec,
    config: TrainConfig,
    encoder: Encoder,
    progress: ProgressFn,
) -> dict[str, Split]:
    """Token ids (fine-tuning) or cached hidden states (frozen, through ``encoder``) of every
    split; ``--limit`` keeps the first N training examples. ``config`` is resolved (its max
    length is set)."""
    backbone = encoder.backbone
    if config.frozen:
        splits = cached_features(dataset, encoder, feature_inputs(spec, config), progress)
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


def prepare(
    context: TrainingContext,
    spec: MethodSpec,
    config: TrainConfig,
    init_head: dict[str, torch.Tensor] | None = None,
    splits: dict[str, Split] | None = None,
) -> Setup:
    """Resolve the config, take the context's device (else resolve the config's), encode (or
    load cached features of) every split of ``context``'s data; ``init_head``: LP-FT's head to
    start from; ``splits``: those another run of the same inputs prepared (heads trained
    together)."""
    dataset, backbone, progress = context.dataset, context.backbone, context.progress
    if config.pooling not in POOLINGS:  # before the recipe is resolved (paper: cls)
        config = replace(
            config, pooling=config.read_pooling(spec.input_format, trained_pooling(backbone.name))
        )
    config = config.resolved(dataset.max_length, dataset.batch_size)
    if head_of(spec).closed_form and not config.frozen:
        raise GleeError(f"{spec.id} is fitted on a frozen backbone's features; use --mode frozen")
    ddp = data_parallel(config.device)
    device = context.device or (ddp.device if ddp else resolve_device(config.device))
    if device.type == "cpu" and config.micro_batch_size:  # asked to save memory
        keep_large_blocks_mapped()
    if splits is None:
        cache = context.feature_cache or Path(tempfile.gettempdir()) / "glee-features"
        encoder = Encoder(backbone, device, Path(cache))
        splits = prepare_splits(dataset, spec, config, encoder, progress)
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


def feature_inputs(spec: MethodSpec, config: TrainConfig) -> FeatureInputs:
    """What a head on cached features reads (its input format, max length, pooling and training
    limit): heads with the same inputs share one feature pass and its arrays in memory."""
    return FeatureInputs(
        spec.input_format, config.max_length, config.pooling, config.limit, config.limit_strategy
    )


def train_together(
    context: TrainingContext, specs: list[MethodSpec], configs: list[TrainConfig]
) -> list[RunResult]:
    """Several heads on cached features (methods x seeds of one quick compare) trained in one
    loop (:func:`fit_together`), each evaluated as a run of its own: what
    :func:`train_and_evaluate` gives each of them alone."""
    progress = context.progress
    inputs = [feature_inputs(spec, config) for spec, config in zip(specs, configs, strict=True)]
    # each at most one feature pass (every pooling of an input comes from the same pass),
    # numbered for progress
    passes = list(dict.fromkeys(key.feature_pass for key in inputs))

    def numbered(key):
        part = passes.index(key.feature_pass) + 1
        return lambda event: progress(
            replace(event, part=part, parts=len(passes))
            if isinstance(event, FeaturePass)
            else event
        )

    setups, loaded = [], {}  # the heads of one input format share its features in memory
    for spec, config, key in zip(specs, configs, inputs, strict=True):
        setups.append(
            prepare(replace(context, progress=numbered(key)), spec, config, splits=loaded.get(key))
        )
        loaded.setdefault(key, setups[-1].splits)
    return [
        evaluate(setup, fitted) for setup, fitted in zip(setups, fit_together(setups), strict=True)
    ]


def train_and_evaluate(
    context: TrainingContext,
    spec: MethodSpec,
    config: TrainConfig,
    init_head: dict[str, torch.Tensor] | None = None,
    search_log: SearchLog | None = None,
) -> RunResult:
    """Train ``spec`` on a fresh copy of ``context``'s backbone (or, frozen, a head on its cached
    features) and evaluate the best-on-dev weights: :func:`prepare`, :func:`fit`,
    :func:`evaluate`. ``config`` may be unresolved: the dataset fills its max length and batch
    size, the recipe the rest. ``init_head``: LP-FT's head, fitted on the frozen features, to
    start from; ``search_log``: where the learning-rate search is kept (and resumed, and
    shared)."""
    setup = prepare(context, spec, config, init_head)
    setup.search_log = search_log
    return evaluate(setup, fit(setup))
