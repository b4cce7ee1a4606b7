"""Glee Studio's engine: prompt-tuning vs CLS-tuning on long-tailed text classification.

Implements the methods of Zhang et al., "Making Pretrained Language Models Good Long-tailed
Learners" (EMNLP 2022) on any Hugging Face masked LM, with datasets, training, metrics and a run
store. Sub-packages in the order data flows through them; each imports only those above it in
this list (``tests/test_layers.py`` checks the import graph):

    core    errors, files, environment, events, devices, hub, distributed, slots
    data    sources (a new source: an entry + its loader), catalog, datasets, encoding
    models  modes (a new way of tuning: one entry), methods (a new method: one line) and heads,
            fields (a knob declared once), config (every knob of a run: a field of
            TrainConfig) and schedule (what it plans for a run), options (the other
            commands' options, the app's requests), backbone, features, scoring, search (the
            learning-rate search and its schedule)
    runs    record, metrics, runfiles, store, paper, tables, findings, calibration, estimate,
            recommend
    train   loop (the one training loop), training (prepare / fit / evaluate), experiment,
            executors, jobs, adapt, reproduce
    views   charts (every chart's name; a run chart's line in charts.RUN_CHARTS), the charts by
            page (data_charts, results_charts, ...), style, report
    serve   inference, export, uploads, workspaces (scoring a stored run never imports the
            trainer)

A feature of several modules is one package across these layers, each module in one of them:
``pool`` (the unlabelled texts: strategies, suggestions, labelling, self-training), ``health``
(the data's health check) and ``budget`` (the label budget), each with its options.

``cli`` (``python -m glee_core``) sits on top. The package imports nothing heavy until a name is
used, so the CLI starts at once.
"""

from __future__ import annotations

from importlib import import_module

__version__ = "0.3.0"

# name -> module that defines it (imported on first use)
_EXPORTS = {
    "GleeError": "core.errors",
    "LongTailDataset": "data.datasets",
    "load_dataset": "data.datasets",
    "split_head_tail": "data.datasets",
    "dataset_ids": "data.catalog",
    "METHODS": "models.methods",
    "MethodSpec": "models.methods",
    "get_method": "models.methods",
    "parse_methods": "models.methods",
    "TrainConfig": "models.config",
    "DataOptions": "models.options",
    "TrainRequest": "models.options",
    "Run": "runs.store",
    "RunStore": "runs.store",
    "aggregate": "runs.tables",
    "RunRecord": "runs.record",
    "Launch": "train.launch",
    "Scorer": "serve.inference",
    "load_run": "serve.inference",
    "load_classifier": "serve.export",
    "export_run": "serve.export",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
