"""The fine-tuning recipes: what each fills in where the user left a switch unset
(``TrainConfig``'s ``None``), how the app names it and the line it says about it. ``paper`` is
the authors' scripts exactly; ``practical`` is what a user's small, long-tailed data needs.
Imports neither torch nor pandas."""

from __future__ import annotations

from dataclasses import dataclass

from .modes import get_mode

PAPER, PRACTICAL = "paper", "practical"
RECIPES = (PRACTICAL, PAPER)


@dataclass(frozen=True)
class Recipe:
    """What a fine-tuning recipe fills in where the user left a switch unset (``TrainConfig``'s
    ``None``). ``paper`` is the authors' scripts exactly; ``practical`` is what a user's small,
    long-tailed data needs, each value chosen by the sweep in BENCHMARKS.md
    (``bench/recipe_sweep.py``)."""

    search_lr: bool  # choose the rate on dev among the mode's candidates (else its one rate)
    lr_search: str | None  # each (every run searches) or once (for the backbone and data)
    lp_ft: bool
    head_lr: float | None  # None: the model's rate
    min_steps: int | None
    patience: int  # early stopping: dev evaluations without a gain


# How the app names the recipes, and the one line it says about each (the Train page)
RECIPE_LABELS = {PRACTICAL: "Practical (for your data)", PAPER: "Paper (to reproduce it)"}


RECIPE_LINES = {
    PRACTICAL: "Practical: the learning rate is chosen on dev among a few (successive halving: "
    "the better half of the rates goes on after each short round), the head is first "
    "fitted on the frozen features (LP-FT), and small data trains at least 300 "
    "optimizer steps; early stopping on dev after 4 evaluations without a gain. The "
    "test split is never read.",
    PAPER: "Paper: the authors' scripts exactly: one learning rate (1e-5), a fresh head, "
    "10 epochs with early stopping on dev. What `reproduce` uses; on a few hundred "
    "texts it may learn little.",
}


RECIPE_DEFAULTS = {
    PAPER: Recipe(
        search_lr=False, lr_search=None, lp_ft=False, head_lr=None, min_steps=None, patience=2
    ),
    # small dev sets are noisy: more patience, so a dip does not end a run that is still rising;
    # the rate searched once for the backbone and data (bench/recipe_sweep.py: a search per
    # head bought no F1, BENCHMARKS.md "The fine-tuning recipe")
    PRACTICAL: Recipe(
        search_lr=True, lr_search="once", lp_ft=True, head_lr=None, min_steps=300, patience=4
    ),
}


def recipe_rates(recipe: str, mode: str) -> tuple[float, tuple[float, ...] | None]:
    """The one rate and the candidates searched on dev that ``recipe`` gives ``mode`` (the
    candidates None: no search). Quick mode has its own protocol: one rate."""
    tuning = get_mode(mode)
    search = RECIPE_DEFAULTS[recipe].search_lr and not tuning.cached_features
    return tuning.lr, tuning.lr_candidates if search else None
