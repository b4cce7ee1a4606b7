"""The label budget's options (``python -m glee_core budget``)."""

from __future__ import annotations

from dataclasses import MISSING, dataclass

from ..core.errors import GleeError
from ..models.config import POOLINGS
from ..models.fields import option
from ..models.methods import get_method
from ..models.options import parse_seeds

BUDGET_FRACTIONS = "0.1,0.2,0.4,0.7,1"


@dataclass
class BudgetOptions:
    """``python -m glee_core budget``: per-class learning curves in quick mode (the head
    retrained on stratified fractions of every class's training texts) and the label budget
    they forecast."""

    out: str = option(MISSING, "the folder to write budget.json and budget.csv to")
    method: str = option(
        "cls-relu-pt-ln",
        "the head retrained on each fraction (a quick-mode "
        "method: python -m glee_core methods); the app passes the head it "
        "recommends",
    )
    seeds: str = option(
        "1,2,3", "seeds, comma-separated: each draws its own nested subsets and trains its own head"
    )
    fractions: str = option(
        BUDGET_FRACTIONS,
        "the shares of every class's training texts "
        "trained on (at least one text a class), comma-separated, ending "
        "at 1",
    )
    target_f1: float = option(
        0.8, "the test F1 a class should reach: the texts it needs are forecast"
    )
    pooling: str | None = option(
        None,
        "the frozen state read: cls or mean (default: the backbone's own pooling, else cls)",
        choices=POOLINGS,
    )
    max_length: int | None = option(None, "max tokens per text (default: the dataset's)")
    device: str = option("auto", "auto, cpu or cuda")

    def __post_init__(self):
        get_method(self.method)  # an unknown id: the error lists the known ones
        self.seed_list = tuple(parse_seeds(self.seeds))
        try:
            shares = sorted({float(f) for f in str(self.fractions).split(",") if f.strip()})
        except ValueError:
            raise GleeError(
                f"--fractions takes numbers like {BUDGET_FRACTIONS}, got {self.fractions!r}"
            ) from None
        if len(shares) < 2 or shares[0] <= 0 or shares[-1] != 1:
            raise GleeError(
                "--fractions needs two shares or more in (0, 1], the last 1 (the "
                f"whole training split), got {self.fractions!r}"
            )
        self.fraction_list = tuple(shares)
        if not 0 < self.target_f1 <= 1:
            raise GleeError(f"--target-f1 must be in (0, 1], got {self.target_f1}")
