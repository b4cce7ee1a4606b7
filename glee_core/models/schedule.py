"""What a run's configuration plans for it (:class:`Schedule`, a base of
:class:`~glee_core.models.config.TrainConfig`): the learning rate (one, or a grid searched on
dev), the values the dataset, the mode and the recipe fill in (:meth:`Schedule.resolved`: what a
run really uses), the optimizer steps, epochs and dev evaluations it plans, and LP-FT's first
stage. Imports neither torch nor pandas."""

from __future__ import annotations

from dataclasses import replace
from typing import Self

from .checks import rate_list
from .recipes import PAPER, RECIPE_DEFAULTS, recipe_rates

DEFAULT_EPOCHS = 10  # the paper's


class Schedule:
    """The derived values of a configuration's fields (its subclass ``TrainConfig`` declares
    them)."""

    @property
    def learning_rate(self) -> float | None:
        """The one rate this configuration trains at; None when it searches one on dev."""
        if self.lr is not None or self.lr_candidates is not None:
            return self.lr
        rate, candidates = recipe_rates(self.recipe, self.mode)
        return None if candidates else rate

    @property
    def lr_grid(self) -> tuple[float, ...]:
        """The rates a run tries on dev: the candidates, or the one rate (a resolved config)."""
        if self.lr_candidates:
            return tuple(float(v) for v in self.lr_candidates.split(","))
        return (self.learning_rate,)

    def resolved(self, max_length: int, batch_size: int | None) -> Self:
        """Defaults that depend on the dataset (its max length and batch size), the mode and the
        recipe filled in: what a run really uses. Quick mode keeps its own protocol (heads at
        1e-3): the fine-tuning recipe does not apply to it."""
        strategy = (
            "first"
            if not self.limit
            # "first": nothing to pick without one
            else (self.limit_strategy or ("first" if self.recipe == PAPER else "stratified"))
        )
        base = replace(
            self,
            max_length=self.max_length or max_length,
            batch_size=self.batch_size or batch_size or 32,
            epochs=self.epochs or DEFAULT_EPOCHS,
            limit_strategy=strategy,
        )
        if self.frozen:
            return replace(
                base,
                recipe=PAPER,
                lr=self.learning_rate,
                lp_ft=False,
                patience=self.patience or RECIPE_DEFAULTS[PAPER].patience,
            )
        preset = RECIPE_DEFAULTS[self.recipe]
        candidates = self.lr_candidates
        searched = recipe_rates(self.recipe, self.mode)[1]
        if candidates is None and self.lr is None and searched:
            candidates = rate_list(",".join(map(str, searched)))
        base = replace(base, **self.tuning.defaults(self))  # its mode's settings
        min_steps = self.min_steps
        if min_steps is None and self.epochs is None:  # given epochs are exact
            min_steps = preset.min_steps
        return replace(
            base,
            lr=self.learning_rate,
            lr_candidates=candidates,
            lr_search=(self.lr_search or preset.lr_search or "each") if candidates else None,
            lp_ft=preset.lp_ft if self.lp_ft is None else self.lp_ft,
            head_lr=preset.head_lr if self.head_lr is None else self.head_lr,
            min_steps=min_steps,
            patience=self.patience or preset.patience,
        )

    def steps_per_epoch(self, n_train: int) -> int:
        """Optimizer steps of one epoch over ``n_train`` examples (a resolved config)."""
        return -(-n_train // self.batch_size)

    def planned_epochs(self, n_train: int) -> int:
        """The epochs a run plans (a resolved config): ``epochs``, or more where ``min_steps``
        asks for them on small data."""
        floor = -(-(self.min_steps or 0) // self.steps_per_epoch(n_train))
        return max(self.epochs, floor)

    def planned_evaluations(self, n_train: int) -> int:
        """Dev evaluations a run plans (what one round of the learning-rate search is a share
        of): one an epoch, or one every ``eval_every_steps`` steps."""
        epochs = self.planned_epochs(n_train)
        if self.eval_every_steps:
            return max(1, self.steps_per_epoch(n_train) * epochs // self.eval_every_steps)
        return epochs

    def linear_probe_stage(self) -> Self:
        """LP-FT's first stage: quick mode's run of the same method on the same inputs (max
        length, pooling, training limit, seed, dev metric) with quick mode's own protocol, so a
        quick compare's stored run is the one re-used."""
        return type(self)(
            mode="frozen",
            seed=self.seed,
            max_length=self.max_length,
            pooling=self.pooling,
            limit=self.limit,
            limit_strategy=self.limit_strategy,
            select_metric=self.select_metric,
            device=self.device,
            precision=self.precision,
            eval_batch_size=self.eval_batch_size,
            pad_multiple=self.pad_multiple,
        )
