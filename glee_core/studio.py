"""The one door the app's pages (``app.py``, ``pages/``, ``studio_ui.py``) go through to the engine:
every name they use, and the module that defines it, here once. A page writes
``from glee_core.studio import RunStore, chart_head_tail``; a module that moves inside the engine
changes a line here, not the pages (``tests/test_layers.py`` checks that the pages import nothing
else of ``glee_core`` and that every name resolves).

Names load on first use (PEP 562), so a page pulls in torch only if it uses something that needs
it; each is looked up in its module every time (a page's rerun costs a dictionary lookup a name),
so what a module holds now is what the pages get."""

from __future__ import annotations

from importlib import import_module

# name -> "package.module" (a module's attribute of that name) or "package.module:attr";
# "core" for "environment": the sub-package's module of that name
_NAMES = {
    "environment": "core",
    "resolve_device": "core.devices",
    "GleeError": "core.errors",
    "write_json_atomic": "core.files",
    "SlotQueue": "core.slots",
    "PAPER_DATASETS": "data.catalog", "dataset_name": "data.catalog",
    "LABEL_COLUMN_NAMES": "data.datasets", "TEXT_COLUMN_NAMES": "data.datasets",
    "find_column": "data.datasets", "RARE_KEPT": "data.datasets",
    "SOURCES": "data.sources", "source_of": "data.sources",
    "estimate_parameters": "models.backbone", "estimate_trainable": "models.backbone",
    "AdaptOptions": "models.options", "AdaptRequest": "models.options",
    "HealthOptions": "models.options", "data_health": "train.examine",
    "HEALTH_FILE": "runs.health", "ISSUES_FILE": "runs.health", "read_health": "runs.health",
    "BudgetOptions": "models.options", "label_budget": "train.learning_curves",
    "BUDGET_FILE": "runs.budget", "BUDGET_CSV": "runs.budget", "BudgetReport": "runs.budget",
    "budget_line": "runs.budget", "read_budget": "runs.budget",
    "chart_label_budget": "views.charts",
    "DEFAULT_EPOCHS": "models.config", "DataOptions": "models.options",
    "POOLINGS": "models.config", "AUTO_POOLING": "models.config",
    "ALL_POOLINGS": "models.config",
    "ExecutorOptions": "models.options", "PAPER": "models.config",
    "RECIPE_DEFAULTS": "models.config", "RECIPE_LABELS": "models.config",
    "RECIPE_LINES": "models.config", "TrainConfig": "models.config",
    "TrainRequest": "models.options", "default_of": "models.fields", "help_of": "models.fields",
    "recipe_rates": "models.config",
    "METHODS": "models.methods", "method_label": "models.methods",
    "get_method": "models.methods", "plan_runs": "train.experiment",
    "lp_ft_stage": "train.experiment",
    "feature_file": "models.features", "model_fingerprint": "models.backbone",
    "registry_order": "models.methods",
    "LORA_ALPHA": "models.modes", "LORA_DROPOUT": "models.modes", "LORA_R": "models.modes",
    "MODES": "models.modes", "PREFIX_LENGTH": "models.modes",
    "get_backbone": "models.scoring",
    "Calibrator": "runs.calibration", "GRID": "runs.calibration", "NAMES": "runs.calibration",
    "SHOWN": "runs.calibration", "calibrate": "runs.calibration",
    "estimate_adapt_seconds": "runs.estimate", "estimate_seconds": "runs.estimate",
    "check_findings": "runs.findings", "findings_frame": "runs.findings",
    "paper_cells": "runs.paper",
    "ENOUGH_SEEDS": "runs.recommend", "recommend": "runs.recommend",
    "recommendation_text": "runs.recommend", "ranked": "runs.recommend",
    "top_for_finetuning": "runs.recommend", "order_steps": "runs.recommend",
    "recommended_first": "runs.recommend", "variant_base": "runs.recommend",
    "variant_line": "runs.recommend", "WITHOUT": "data.splits",
    "METRIC_KEYS": "runs.record", "METRIC_TITLES": "runs.record", "SHOT_TITLES": "runs.record",
    "time_left": "core.events",
    "disk_message": "core.errors", "export_zip": "serve.export", "FORMATS": "serve.formats",
    "export_refusal": "serve.formats:refusal", "literal": "core.markdown",
    "untrained_head_line": "runs.record", "untrained_head_note": "runs.record",
    "RunStore": "runs.store", "aggregate": "runs.tables", "slug": "runs.store",
    "SELECTION_NOTE": "runs.tables", "STD_NOTE": "runs.tables",
    "comparison_table": "runs.tables", "modes_table": "runs.tables",
    "comparison_csv": "runs.tables", "spreadsheet_csv": "runs.tables",
    "adapted_backbones": "train.adapted", "adapted_folder_name": "train.adapted",
    "adapted_record": "train.adapted",
    "broken_jobs": "train.jobs", "launch_job": "train.jobs:launch",
    "launch_training": "train.jobs", "list_jobs": "train.jobs",
    "PAPER_TABLES": "train.reproduce", "comparison": "runs.tables",
    "comparison_block": "runs.tables", "comparison_markdown": "runs.tables",
    "header_lines": "train.reproduce", "reference_note": "runs.tables",
    "saved_comparisons": "train.reproduce", "table_of": "train.reproduce",
    "FIGURE4_FEATURES": "views.charts", "FIGURE4_METHODS": "views.charts",
    "RUN_CHARTS": "views.charts", "chart_calibration_curve": "views.charts",
    "chart_calibration_delta": "views.charts", "chart_class_frequency": "views.charts",
    "chart_class_scores": "views.charts", "chart_confusion": "views.charts",
    "chart_feature_distributions": "views.charts", "chart_head_tail": "views.charts",
    "chart_norm_evolution": "views.charts", "chart_norm_vs_count": "views.charts",
    "chart_paper_head_tail_gap": "views.charts", "chart_paper_results": "views.charts",
    "chart_per_class_f1": "views.charts", "chart_weight_norms": "views.charts",
    "class_frequency_frame": "views.charts", "confusion_fits": "views.charts",
    "default_feature_classes": "views.charts", "feature_examples": "views.charts",
    "FIGURE4_MIN_EXAMPLES": "views.charts", "per_class_f1_frame": "views.charts",
    "build_report": "views.report",
    "Scorer": "serve.inference", "blank_warning": "serve.inference",
    "load_run": "serve.inference", "predict_csv": "serve.inference",
    "ACCEPTED_ENCODINGS": "serve.uploads", "MAX_UPLOAD_BYTES": "serve.uploads",
    "csv_columns": "serve.uploads", "list_uploads": "serve.uploads",
    "save_upload": "serve.uploads",
    "COOKIE": "serve.workspaces", "LimitReached": "serve.workspaces",
    "SHARE_FILE": "serve.workspaces",
    "Policy": "serve.workspaces", "Workspace": "serve.workspaces", "expire": "serve.workspaces",
    "size_text": "core.files", "unfinished_jobs": "serve.workspaces",
}
__all__ = sorted(_NAMES)


def __getattr__(name: str):
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, _, attr = _NAMES[name].partition(":")
    package = import_module(f"glee_core.{module}")
    try:
        value = getattr(package, attr or name)
    except AttributeError:  # a module of the package, not yet imported
        value = import_module(f"glee_core.{module}.{attr or name}")
    return value  # not cached here: the module's own attribute stays the one truth
