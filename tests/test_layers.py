"""The engine's import graph: sub-packages import only downward, no cycle (local imports
included), and scoring below training."""

import ast
import importlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "glee_core"
# From the bottom up; a package imports only the packages before it (siblings of one rank:
# neither imports the other). The command line's commands sit above them all; the package's root
# modules (cli, __main__, __init__) on top.
LAYERS = [
    ("core",),
    ("data",),
    ("models",),
    ("runs",),
    ("train",),
    ("views", "serve"),
    ("commands",),
]
RANK = {package: rank for rank, packages in enumerate(LAYERS) for package in packages}
# A feature in one package (the pool, data health, the label budget) is a vertical slice of the
# layers: each of its modules sits in the layer named here and imports only from that layer and
# below (a feature module and a layer's module of one rank may import each other, never in a
# circle: ``test_no_module_imports_itself_back``); a module a feature adds is placed here.
FEATURES = {
    "pool": {
        "files": "data",
        "strategies": "models",
        "options": "models",
        "pseudo": "runs",
        "labelling": "runs",
        "suggest": "train",
        "selftrain": "train",
    },
    "health": {"options": "models", "issues": "runs", "report": "runs", "examine": "train"},
    "budget": {"options": "models", "report": "runs", "curves": "train"},
}


def rank_of(module: str) -> int | None:
    """The layer a module sits in: its package's, or for a feature's module the one
    ``FEATURES`` places it in (a feature's ``__init__``: the bottom, it imports nothing)."""
    top, _, rest = module.partition(".")
    if top in FEATURES:
        return RANK[FEATURES[top][rest]] if rest else 0
    return RANK.get(top)


def module_name(path: Path) -> str:
    """``glee_core/runs/store.py`` -> ``runs.store``; ``glee_core/cli.py`` -> ``cli``."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(p for p in parts if p != "__init__") or "__init__"


def imported_from(path: Path, node: ast.ImportFrom) -> str | None:
    """The glee_core module or package (dotted, below ``glee_core``; "" for the package itself)
    that an import statement of ``path`` imports from, relative or not; None when it is not
    the engine's."""
    if node.level:
        base = path.relative_to(PACKAGE).parent.parts
        base = base[: len(base) - (node.level - 1)]
        return ".".join(base + tuple(node.module.split("."))) if node.module else ".".join(base)
    if (node.module or "").startswith("glee_core"):
        return node.module.removeprefix("glee_core").lstrip(".")
    return None


def resolve(path: Path, node: ast.ImportFrom) -> set[str]:
    """The glee_core modules (``pkg.mod`` or a package) an import statement names."""
    prefix = imported_from(path, node)
    if prefix is None:
        return set()
    if (PACKAGE / prefix.replace(".", "/")).is_dir():  # a package: the names are its modules
        return {f"{prefix}.{alias.name}".lstrip(".") for alias in node.names}
    return {prefix}


def import_graph() -> dict[str, set[str]]:
    """module -> the glee_core modules it imports, anywhere in its body."""
    graph = {}
    for path in PACKAGE.rglob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                deps |= resolve(path, node)
        graph[module_name(path)] = deps - {module_name(path), ""}
    return graph


def package_of(module: str) -> str | None:
    top = module.split(".")[0]
    return top if top in RANK or top in FEATURES else None


def test_every_module_lives_in_a_layer_and_every_layer_is_documented():
    graph = import_graph()
    loose = {m for m in graph if package_of(m) is None} - {"cli", "__main__", "__init__"}
    assert loose == set(), "a module outside the layers: put it in one of " + str(list(RANK))
    unplaced = {
        m
        for m in graph
        if m.split(".")[0] in FEATURES
        and "." in m
        and m.split(".", 1)[1] not in FEATURES[m.split(".")[0]]
    }
    assert unplaced == set(), "a feature's module without a layer: place it in FEATURES"
    for package in [*RANK, *FEATURES]:
        doc = ast.get_docstring(ast.parse((PACKAGE / package / "__init__.py").read_text()))
        assert doc and len(doc) > 100, package


def test_imports_point_only_downward():
    """A module imports from the layers below its own; within one rank only a feature's module
    and a layer's (a feature is a slice across the layers), or a package's own modules."""
    upward = []
    for module, deps in import_graph().items():
        here = package_of(module)
        for dep in deps:
            there = package_of(dep)
            if here is None or there is None or there == here:
                continue
            if rank_of(dep) > rank_of(module) or (
                rank_of(dep) == rank_of(module) and not {here, there} & set(FEATURES)
            ):
                upward.append(f"{module} -> {dep}")
    assert upward == []


def test_a_feature_keeps_torch_out_of_its_reading_modules():
    """A feature's modules below ``train`` (its options, strategies, reports) import no torch at
    the top: the app's pages read them without loading it."""
    heavy = []
    for feature, modules in FEATURES.items():
        for name, layer in modules.items():
            if RANK[layer] >= RANK["train"]:
                continue
            tree = ast.parse((PACKAGE / feature / f"{name}.py").read_text(encoding="utf-8"))
            for node in tree.body:
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else []
                )
                heavy += [f"{feature}.{name}: {n}" for n in names if n.split(".")[0] == "torch"]
    assert heavy == []


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for dep in graph.get(todo.pop(), ()):
            if dep in graph and dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def test_no_module_imports_itself_back():
    graph = import_graph()
    assert {m for m in graph if m in reachable(graph, m)} == set()


def test_the_scorers_do_not_import_the_trainer():
    graph = import_graph()
    for scorer in ("serve.inference", "serve.export", "models.scoring"):
        assert not {"train.training", "train.experiment", "train.executors"} & reachable(
            graph, scorer
        ), scorer


def test_the_graph_is_read_right():  # the test's own parser, on statements it must resolve
    graph = import_graph()
    assert {"core.environment", "runs.record"} <= graph["runs.store"]
    assert "views.charts" in graph["views.report"] and "cli" not in graph["runs.store"]


# The engine modules the face (app.py, app_pages/, studio_ui/) may import from; a page that needs
# another adds it here, on purpose. ``core``: its ``environment`` module, imported as a module.
APP_REACHES = {
    "budget.options",
    "budget.report",
    "core",
    "core.devices",
    "core.errors",
    "core.files",
    "core.markdown",
    "data.catalog",
    "data.csvfile",
    "data.datasets",
    "data.sources",
    "data.splits",
    "data.verbalizers",
    "health.options",
    "health.report",
    "models.backbone",
    "models.config",
    "models.fields",
    "models.methods",
    "models.modes",
    "models.options",
    "models.recipes",
    "models.requests",
    "models.schedule",
    "models.scoring",
    "pool.files",
    "pool.labelling",
    "pool.options",
    "pool.strategies",
    "runs.busy",
    "runs.calibration",
    "runs.estimate",
    "runs.findings",
    "runs.job_estimates",
    "runs.notes",
    "runs.paper",
    "runs.paper_tables",
    "runs.rates",
    "runs.recommend",
    "runs.recommend_text",
    "runs.record",
    "runs.store",
    "runs.tables",
    "runs.variants",
    "serve.ensemble",
    "serve.export_formats",
    "serve.inference",
    "serve.policy",
    "serve.uploads",
    "serve.workspaces",
    "train.adapted",
    "train.job_kinds",
    "train.jobs",
    "train.launch",
    "train.next_steps",
    "train.preflight",
    "train.priority",
    "train.reproduce",
    "views.charts",
    "views.data_charts",
    "views.diagnostics_charts",
    "views.norm_charts",
    "views.prediction_charts",
    "views.results_charts",
}
FACE = [
    PACKAGE.parent / "app.py",
    *sorted((PACKAGE.parent / "studio_ui").glob("*.py")),
    *sorted((PACKAGE.parent / "app_pages").glob("*.py")),
]


def defined_names(path: Path) -> set[str]:
    """The names a module's own top level defines (functions, classes, assignments): what can
    have its home there (an imported name's home is elsewhere)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    return names | {
        x.id
        for n in tree.body
        if isinstance(n, (ast.Assign, ast.AnnAssign))
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        for x in ast.walk(t)
        if isinstance(x, ast.Name)
    }


def test_the_face_imports_each_engine_name_from_its_home():
    """A page or a ``studio_ui`` module imports an engine name from the module that defines it
    ("go to definition" lands on it; nothing re-exports it), among the modules it may reach, and
    never a private one; every such name resolves."""
    wrong = []
    for path in FACE:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                wrong += [
                    f"{path.name}: import {a.name}" for a in node.names if "glee_core" in a.name
                ]
            if not (
                isinstance(node, ast.ImportFrom) and (node.module or "").startswith("glee_core")
            ):
                continue
            module = node.module.removeprefix("glee_core.")
            if module not in APP_REACHES:
                wrong.append(f"{path.name}: {node.module} (not in APP_REACHES)")
                continue
            home = PACKAGE.joinpath(*module.split(".")).with_suffix(".py")
            for alias in node.names:
                if home.is_file() and alias.name not in defined_names(home):
                    wrong.append(f"{path.name}: {alias.name} is not defined in {node.module}")
                elif alias.name.startswith("_"):
                    wrong.append(f"{path.name}: {alias.name} is private")
                else:
                    imported = importlib.import_module(node.module)
                    assert getattr(imported, alias.name, None) is not None or home.is_dir()
    assert wrong == []


def imported_homes(path: Path):
    """(module path, name) of each engine name an engine module imports, relative or not."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (prefix := imported_from(path, node)) is not None:
            home = PACKAGE.joinpath(*filter(None, prefix.split("."))).with_suffix(".py")
            yield from ((home, alias.name) for alias in node.names)


def test_an_engine_name_has_one_home_and_no_list_to_keep_in_step():
    """Inside the engine too a name is imported from the module that defines it, and a module's
    offer is its public top-level names: no ``__all__`` to keep in step with them (the package's
    own door and serve/adapters.py, the copy an exported folder imports, aside)."""
    wrong = []
    for path in PACKAGE.rglob("*.py"):
        name = module_name(path)
        listed = any(
            isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in n.targets)
            for n in ast.parse(path.read_text(encoding="utf-8")).body
        )
        if listed and path != PACKAGE / "__init__.py" and name != "serve.adapters":
            wrong.append(f"{name} keeps an __all__")
        if name == "serve.modeling_glee":  # an exported folder's copy: imports its own adapters
            continue
        for home, imported in imported_homes(path):
            if home.is_file() and imported not in defined_names(home):
                wrong.append(f"{name}: {imported} is not defined in {home.stem}")
    assert wrong == []


# studio_ui's order, as its docstring lists it
APP_MODULES = [
    "text",
    "access",
    "stores",
    "choice",
    "estimates",
    "jobs",
    "jobs_panel",
    "widgets",
    "recommendation",
    "reproduction",
    "results",
    "reports",
    "labelling",
    "learning",
    "pool",
    "datasets",
    "label_words",
    "adapting",
    "navigation",
    "executors",
    "launches",
    "launch_buttons",
]


def test_the_app_package_imports_only_downward():
    """``studio_ui``: a module per job, each importing only the modules above it in the order its
    docstring gives (no cycle); every module is in that order, and a page imports each name from
    the module that defines it (the package's ``__init__`` holds none)."""
    folder = PACKAGE.parent / "studio_ui"
    assert sorted(p.stem for p in folder.glob("*.py")) == sorted(APP_MODULES + ["__init__"])
    doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text(encoding="utf-8")))
    assert [m for m in APP_MODULES if f"``{m}``" in doc] == APP_MODULES
    assert sorted(APP_MODULES, key=lambda m: doc.index(f"``{m}``")) == APP_MODULES
    upward = []
    for rank, name in enumerate(APP_MODULES):
        tree = ast.parse((folder / f"{name}.py").read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if APP_MODULES.index(node.module) >= rank:
                    upward.append(f"{name} -> {node.module}")
    assert upward == []
    for page in [PACKAGE.parent / "app.py", *(PACKAGE.parent / "app_pages").glob("*.py")]:
        for node in ast.walk(ast.parse(page.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("studio_ui"):
                assert node.module.removeprefix("studio_ui.") in APP_MODULES, page.name
                defined = defined_names(folder / f"{node.module.split('.')[1]}.py")
                assert {a.name for a in node.names} <= defined, (page.name, node.module)
            if isinstance(node, ast.Import):  # the package itself holds no names
                assert "studio_ui" not in [a.name for a in node.names], page.name


def test_every_page_the_face_switches_to_exists():
    """``st.switch_page("app_pages/...")`` names a file: a moved page would fail only when a
    user clicks."""
    import re

    root = PACKAGE.parent
    face = [root / "app.py", *(root / "studio_ui").glob("*.py"), *(root / "app_pages").glob("*.py")]
    targets = {
        target
        for path in face
        for target in re.findall(r'switch_page\("([^"]+)"\)', path.read_text("utf-8"))
    }
    assert targets and all((root / target).is_file() for target in targets), targets


def test_every_function_a_registry_names_resolves():
    """The registries name what they call as ``"module:function"`` (imported when called, so
    they stay light): every such name is a function that exists, not one a rename left behind."""
    from glee_core.core.plugins import named  # noqa: PLC0415
    from glee_core.data.datasets import DEMO_LOADER, PAPER_LOADER  # noqa: PLC0415
    from glee_core.data.sources import SOURCES  # noqa: PLC0415
    from glee_core.models.options import EXECUTORS  # noqa: PLC0415
    from glee_core.serve.export_formats import EXPORT_FORMATS  # noqa: PLC0415

    specs = [DEMO_LOADER, PAPER_LOADER]
    specs += [source.loader for source in SOURCES.values()]
    specs += [executor.factory for executor in EXECUTORS.values()]
    specs += [form.writer for form in EXPORT_FORMATS.values() if form.writer]
    assert len(specs) >= 7
    for spec in specs:
        assert callable(named(spec)), spec
