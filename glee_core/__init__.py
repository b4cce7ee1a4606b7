"""Glee Studio's engine: prompt-tuning vs CLS-tuning on long-tailed text classification.

Implements the methods of Zhang et al., "Making Pretrained Language Models Good Long-tailed
Learners" (EMNLP 2022) on any Hugging Face masked LM, with datasets, training, metrics and a run
store. Data flows one way: dataset -> encoded examples -> model (backbone + head) -> trainer ->
run directory -> app / report.
"""

__version__ = "0.1.0"

from .datasets import LongTailDataset, dataset_ids, load_dataset, split_head_tail  # noqa: E402
from .errors import GleeError  # noqa: E402
from .methods import METHODS, MethodSpec, get_method, parse_methods  # noqa: E402
from .store import Run, RunStore, aggregate  # noqa: E402
from .training import TrainConfig  # noqa: E402

__all__ = ["GleeError", "LongTailDataset", "METHODS", "MethodSpec", "Run", "RunStore",
           "TrainConfig", "aggregate", "dataset_ids", "get_method", "load_dataset",
           "parse_methods", "split_head_tail"]
