"""What a run's hyper-parameters may hold: :func:`check_config` (``TrainConfig`` runs it as it is
made) refuses a value out of its bounds (declared on its field: ``option(low=, high=)``, the
Train page's widget reads the same) or given to a mode that does not take it, in one line naming
the bound or the modes, and reads the word forms the command line gives (``yes``/``no``, a rate
list). Imports neither torch nor pandas."""

from __future__ import annotations

from dataclasses import fields

from ..core.errors import GleeError
from .fields import _boolean, check_bounds
from .modes import get_mode, setting_modes

SEED_MAX = 2**32 - 1  # what NumPy's generators accept


def check_config(config) -> None:
    """Refuse what ``config`` (a ``TrainConfig``) cannot train (a :class:`GleeError` naming
    the flag and its bound, or the modes that take it) and read its word forms in place."""
    get_mode(config.mode)
    for f in fields(config):
        choices = f.metadata.get("choices")
        allowed = (*choices, None) if choices and f.default is None else choices
        if choices and getattr(config, f.name) not in allowed:
            raise GleeError(
                f"--{f.name.replace('_', '-')} must be one of "
                f"{', '.join(choices)}, got {getattr(config, f.name)!r}"
            )
    check_bounds(config)  # each field's bounds, as its option() declares them
    if not isinstance(config.seed, int) or not 0 <= config.seed <= SEED_MAX:
        raise GleeError(f"a seed must be a whole number from 0 to {SEED_MAX}, got {config.seed!r}")
    elsewhere = [
        f"--{f.name.replace('_', '-')}"
        for f in fields(config)
        if getattr(config, f.name) is not None
        and config.mode not in (f.metadata.get("modes") or setting_modes(f.name))
    ]
    if elsewhere:
        raise GleeError(
            f"{', '.join(elsewhere)} appl{'ies' if len(elsewhere) == 1 else 'y'} "
            f"to another mode than --mode {config.mode}"
        )
    config.tuning.check(config)
    if isinstance(config.lp_ft, str):
        config.lp_ft = _boolean(config.lp_ft, "--lp-ft")
    if isinstance(config.self_ensemble, str):
        config.self_ensemble = _boolean(config.self_ensemble, "--self-ensemble") or None
    if isinstance(config.compile, str):
        config.compile = _boolean(config.compile, "--compile")
    if config.lr_candidates is not None:
        config.lr_candidates = rate_list(config.lr_candidates)
        if config.lr is not None:
            raise GleeError(
                "give --lr (one rate, no search) or --lr-candidates (a search on dev), not both"
            )
    if config.lr_search is not None and config.lr is not None:
        raise GleeError("--lr-search applies to a search on dev; --lr gives one rate")
    if config.frozen:
        asked = [
            f"--{n.replace('_', '-')}"
            for n in ("head_lr", "layer_decay", "lr_search", "self_distill", "supcon")
            if getattr(config, n) is not None
        ] + (["--lp-ft yes"] if config.lp_ft else [])
        asked += ["--self-ensemble yes"] if config.self_ensemble else []
        if asked:
            raise GleeError(
                f"{', '.join(asked)} appl{'ies' if len(asked) == 1 else 'y'} "
                "to fine-tuning: with --mode frozen the model is the head alone"
            )


def rate_list(text: str) -> str:
    """``"2e-5, 5e-5"`` -> ``"2e-05,5e-05"``: learning rates, checked, in one spelling (a run's
    identity must not depend on how the user wrote them)."""
    try:
        rates = sorted({float(v) for v in str(text).split(",") if v.strip()})
    except ValueError:
        raise GleeError(f"--lr-candidates must be comma-separated numbers, got {text!r}") from None
    if len(rates) < 2 or not all(0 < r < 1 for r in rates):
        raise GleeError(
            f"--lr-candidates needs two or more rates between 0 and 1, got {text!r} "
            "(for one rate, use --lr)"
        )
    return ",".join(f"{r:g}" for r in rates)
