"""The one door the app (``app.py``, ``app_pages/``, ``studio_ui/``) goes through to the engine:
every name it uses, and the module that defines it, here once: whole modules whose ``__all__``
says what they offer (``_FACES``), and single names of the others (``_NAMES``). A page writes
``from glee_core.studio import RunStore, chart_head_tail``; a module that moves inside the engine
changes a line here, not the pages (``tests/test_layers.py`` checks that the pages import nothing
else of ``glee_core`` and that every name resolves).

Names load on first use (PEP 562), so a page pulls in torch only if it uses something that needs
it; each is looked up in its module every time (a page's rerun costs a dictionary lookup a name),
so what a module holds now is what the pages get."""

from __future__ import annotations

import ast
from importlib import import_module
from pathlib import Path

# modules that say what they offer (``__all__``): every name of it is the app's, read from the
# module's source (importing it here would load what the page may never need)
_FACES = ("models.options", "runs.budget", "runs.calibration", "runs.recommend", "runs.tables",
          "serve.uploads", "serve.workspaces", "views.charts")

# the other modules' names the app uses: name -> "package.module" (a module's attribute of that
# name) or "package.module:attr"; "core" for "environment": the sub-package's module of that name
_NAMES = {
    "environment": "core",
    "resolve_device": "core.devices",
    "GleeError": "core.errors", "disk_message": "core.errors",
    "time_left": "core.events",
    "size_text": "core.files", "write_json_atomic": "core.files",
    "literal": "core.markdown",
    "SlotQueue": "core.slots",
    "PAPER_DATASETS": "data.catalog", "dataset_name": "data.catalog",
    "LABEL_COLUMN_NAMES": "data.datasets", "RARE_KEPT": "data.datasets",
    "TEXT_COLUMN_NAMES": "data.datasets", "find_column": "data.datasets",
    "SOURCES": "data.sources", "source_of": "data.sources",
    "WITHOUT": "data.splits",
    "estimate_parameters": "models.backbone", "estimate_trainable": "models.backbone",
    "model_fingerprint": "models.backbone",
    "ALL_POOLINGS": "models.config", "AUTO_POOLING": "models.config",
    "DEFAULT_EPOCHS": "models.config", "PAPER": "models.config", "POOLINGS": "models.config",
    "RECIPE_DEFAULTS": "models.config", "RECIPE_LABELS": "models.config",
    "RECIPE_LINES": "models.config", "TrainConfig": "models.config",
    "recipe_rates": "models.config",
    "feature_file": "models.features",
    "default_of": "models.fields", "help_of": "models.fields",
    "METHODS": "models.methods", "get_method": "models.methods", "method_label": "models.methods",
    "registry_order": "models.methods",
    "MODES": "models.modes",
    "get_backbone": "models.scoring",
    "estimate_adapt_seconds": "runs.estimate", "estimate_seconds": "runs.estimate",
    "check_findings": "runs.findings", "findings_frame": "runs.findings",
    "HEALTH_FILE": "runs.health", "ISSUES_FILE": "runs.health", "read_health": "runs.health",
    "paper_cells": "runs.paper",
    "METRIC_KEYS": "runs.record", "METRIC_TITLES": "runs.record", "SHOT_TITLES": "runs.record",
    "untrained_head_line": "runs.record", "untrained_head_note": "runs.record",
    "RunStore": "runs.store", "slug": "runs.store",
    "export_zip": "serve.export",
    "FORMATS": "serve.formats", "export_refusal": "serve.formats:refusal",
    "Scorer": "serve.inference", "blank_warning": "serve.inference", "load_run": "serve.inference",
    "predict_csv": "serve.inference",
    "adapted_backbones": "train.adapted", "adapted_folder_name": "train.adapted",
    "adapted_record": "train.adapted",
    "data_health": "train.examine",
    "lp_ft_stage": "train.experiment", "plan_runs": "train.experiment",
    "broken_jobs": "train.jobs", "launch_job": "train.jobs:launch",
    "launch_training": "train.jobs", "list_jobs": "train.jobs",
    "label_budget": "train.learning_curves",
    "PAPER_TABLES": "train.reproduce", "header_lines": "train.reproduce",
    "saved_comparisons": "train.reproduce", "table_of": "train.reproduce",
    "build_report": "views.report",
}


def declared_names(module: str) -> list[str]:
    """The ``__all__`` of ``glee_core.<module>``, read from its source without importing it."""
    path = Path(__file__).parent.joinpath(*module.split(".")).with_suffix(".py")
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__"
                                                for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise ImportError(f"glee_core.{module} declares no __all__")


_HOMES = {**{name: module for module in _FACES for name in declared_names(module)}, **_NAMES}
__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, _, attr = _HOMES[name].partition(":")
    package = import_module(f"glee_core.{module}")
    try:
        value = getattr(package, attr or name)
    except AttributeError:  # a module of the package, not yet imported
        value = import_module(f"glee_core.{module}.{attr or name}")
    return value  # not cached here: the module's own attribute stays the one truth
