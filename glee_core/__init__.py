"""Glee Studio's engine: prompt-tuning vs CLS-tuning on long-tailed text classification.

Implements the methods of Zhang et al., "Making Pretrained Language Models Good Long-tailed
Learners" (EMNLP 2022) on any Hugging Face masked LM, with datasets, training, metrics and a run
store. Data flows one way, one module per step:

    catalog / sources / datasets -> the data (a new source: an entry in sources.py + its loader)
    encoding, features      -> token ids, or cached hidden states (quick mode)
    backbone + methods/heads -> the model (a new method: one line in methods.py, its head in
                               heads.py)
    scoring                 -> the backbone once per process, batched prediction (what the
                               trainer and the scorers share)
    config, training        -> the trainer: prepare / fit (learning-rate search on dev, LP-FT's
                               warm start) / evaluate (every knob: a field of config.TrainConfig)
    experiment              -> plan, train or load, store (events report progress)
    store, record, runfiles, slots -> run folders, their typed records and one validating
                               loader a file, training slots in turn
    inference, export       -> scoring new text with a stored run (never import the trainer)
    tables, charts, report, reproduce -> what the app and the CLI show (a chart: its function
                               and its line in charts.RUN_CHARTS)

The package imports nothing heavy until a name is used, so the CLI starts at once.
"""

from __future__ import annotations

from importlib import import_module

__version__ = "0.1.0"

# name -> module that defines it (imported on first use)
_EXPORTS = {
    "GleeError": "errors", "LongTailDataset": "datasets", "load_dataset": "datasets",
    "split_head_tail": "datasets", "dataset_ids": "catalog", "METHODS": "methods",
    "MethodSpec": "methods", "get_method": "methods", "parse_methods": "methods",
    "Run": "store", "RunStore": "store", "aggregate": "store", "RunRecord": "record",
    "TrainConfig": "config", "DataOptions": "config", "TrainRequest": "config",
    "run_experiments": "experiment", "Scorer": "inference", "load_run": "inference",
    "load_classifier": "export", "export_run": "export",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
