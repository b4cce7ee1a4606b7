"""The one door the app (``app.py``, ``app_pages/``, ``studio_ui/``) goes through to the engine:
the modules it reaches (``_FACES``), each saying what it offers in its own ``__all__``, and the
three names it knows otherwise (``_NAMES``). A page writes
``from glee_core.studio import RunStore, chart_head_tail``; a module that moves inside the engine
changes a line here, not the pages (``tests/test_layers.py`` checks that the pages import nothing
else of ``glee_core`` and that every name resolves).

Names load on first use (PEP 562), so a page pulls in torch only if it uses something that needs
it; each is looked up in its module every time (a page's rerun costs a dictionary lookup a name),
so what a module holds now is what the pages get."""

from __future__ import annotations

import ast
import re
from importlib import import_module
from pathlib import Path

# the modules the app reaches: each says what it offers (``__all__``), read from its source
# (importing it here would load what a page may never need)
_FACES = (
    "core.devices",
    "core.errors",
    "core.events",
    "core.files",
    "core.markdown",
    "core.pace",
    "core.slots",
    "data.catalog",
    "data.datasets",
    "data.loaders",
    "data.pool",
    "data.sources",
    "data.splits",
    "data.verbalizers",
    "models.adapters",
    "models.backbone",
    "models.checks",
    "models.config",
    "models.features",
    "models.fields",
    "models.methods",
    "models.modes",
    "models.options",
    "models.recipes",
    "models.requests",
    "models.scoring",
    "models.tuning",
    "runs.budget",
    "runs.busy",
    "runs.calibration",
    "runs.estimate",
    "runs.findings",
    "runs.health",
    "runs.job_estimates",
    "runs.labelling",
    "runs.notes",
    "runs.paper",
    "runs.paper_tables",
    "runs.query",
    "runs.recommend",
    "runs.record",
    "runs.store",
    "runs.tables",
    "runs.variants",
    "serve.ensemble",
    "serve.export",
    "serve.export_formats",
    "serve.formats",
    "serve.inference",
    "serve.policy",
    "serve.uploads",
    "serve.workspaces",
    "train.adapted",
    "train.examine",
    "train.experiment",
    "train.job_kinds",
    "train.jobs",
    "train.learning_curves",
    "train.next_steps",
    "train.plan",
    "train.priority",
    "train.pseudo",
    "train.reproduce",
    "train.suggest",
    "views.charts",
    "views.report",
)

# names the app knows otherwise: name -> "package.module:attr" (another name there), or "core" for
# "environment" (the sub-package's module of that name)
_NAMES = {
    "environment": "core",
    "export_refusal": "serve.formats:refusal",
    "launch_job": "train.jobs:launch",
}


ALL_LIST = re.compile(r"^__all__ = (\[.*?^\])", re.S | re.M)  # a list literal, its "]" at col 0


def declared_names(module: str) -> list[str]:
    """The ``__all__`` of ``glee_core.<module>``, read from its source without importing it
    (the list literal alone is parsed: a page's first import stays cheap)."""
    path = Path(__file__).parent.joinpath(*module.split(".")).with_suffix(".py")
    found = ALL_LIST.search(path.read_text(encoding="utf-8"))
    if found is None:
        raise ImportError(f"glee_core.{module} declares no __all__")
    return list(ast.literal_eval(found.group(1)))


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
