"""The data health check's options (``python -m glee_core health``)."""

from __future__ import annotations

from dataclasses import MISSING, dataclass

from ..core.errors import GleeError
from ..models.config import POOLINGS
from ..models.fields import option
from ..models.methods import get_method


@dataclass
class HealthOptions:
    """``python -m glee_core health``: the probe, its folds, and where the results go."""

    out: str = option(MISSING, "the folder to write health.json and label_issues.csv to")
    folds: int = option(5, "k of the k-fold out-of-fold probabilities on the training split")
    method: str = option(
        "probe-balanced",
        "what gives the out-of-fold probabilities: a "
        "closed-form probe (probe-balanced, probe: seconds) or any quick-mode "
        "head, trained once a fold (e.g. cls-relu-pt-ln, the head the lab "
        "recommends)",
    )
    pooling: str | None = option(
        None,
        "the frozen state read: cls or mean (default: the backbone's own pooling, else mean)",
        choices=POOLINGS,
    )
    max_length: int | None = option(None, "max tokens per text (default: the dataset's)")
    seed: int = option(1, "random seed of the folds")
    device: str = option("auto", "auto, cpu or cuda")

    def __post_init__(self):
        if self.folds < 2:
            raise GleeError(f"--folds must be at least 2, got {self.folds}")
        get_method(self.method)  # an unknown id: the error lists the known ones
