"""The pool's options: ``python -m glee_core suggest`` (:class:`SuggestOptions`) and learning from
the unlabelled texts in training (``train --pool FILE --self-train``: :class:`SelfTrainOptions`)."""

from __future__ import annotations

from dataclasses import MISSING, dataclass

from ..core.errors import GleeError
from ..models.fields import option
from .strategies import AUTO_RULE, QUERY_STRATEGIES


@dataclass
class SuggestOptions:
    """``python -m glee_core suggest``: the pool texts to label next (the dataset's recommended
    quick-mode head scores the pool; a query strategy picks from its probabilities)."""

    pool: str = option(
        MISSING, "the unlabelled texts: a CSV with a text column, or a .txt file of one text a line"
    )
    out: str = option(
        MISSING,
        "the CSV to write: pool_row, text, predicted, confidence, "
        "strategy, rank and an empty label column to fill",
    )
    n: int = option(50, "how many texts to suggest")
    strategy: str = option(
        "auto",
        f"auto ({AUTO_RULE}), " + ", ".join(list(QUERY_STRATEGIES)[1:]),
        choices=tuple(QUERY_STRATEGIES),
    )
    seed: int = option(1, "random seed (random strategy, ties)")
    pool_text_column: str | None = option(
        None, "the pool CSV's text column (default: found by name, as for training data)"
    )
    device: str = option("auto", "auto, cpu or cuda")

    def __post_init__(self):
        if self.n < 1:
            raise GleeError(f"--n must be at least 1, got {self.n}")


@dataclass
class SelfTrainOptions:
    """``train --pool FILE --self-train auto|yes|no``: learning from the unlabelled texts
    (``glee_core.pool.selftrain``)."""

    pool: str | None = option(
        None,
        "unlabelled texts to learn from (a CSV with a text column, "
        "or a .txt file of one text a line), with --self-train",
    )
    self_train: str = option(
        "auto",
        "with --pool: yes (pseudo-labels, each class at most its labelled "
        "share of the pool, join the training split; the dataset id ends in "
        "+pseudo-N-<digest>), auto (unless cross-validation on the labelled "
        "texts says they cost over 2 macro-F1 points) or no",
        choices=("auto", "yes", "no"),
    )
