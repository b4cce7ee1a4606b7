"""The engine's import graph: sub-packages import only downward, no cycle (local imports
included), and scoring below training."""

import ast
import importlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "glee_core"
# From the bottom up; a package imports only the packages before it (siblings of one rank:
# neither imports the other). The command line's commands sit above them all; the package's root
# modules (cli, __main__, __init__, and studio, the app's door) on top.
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


def module_name(path: Path) -> str:
    """``glee_core/runs/store.py`` -> ``runs.store``; ``glee_core/cli.py`` -> ``cli``."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(p for p in parts if p != "__init__") or "__init__"


def resolve(path: Path, node: ast.ImportFrom) -> set[str]:
    """The glee_core modules (``pkg.mod`` or a package) an import statement names."""
    if node.level:
        base = path.relative_to(PACKAGE).parent.parts
        base = base[: len(base) - (node.level - 1)]
        prefix = ".".join(base + tuple(node.module.split("."))) if node.module else ".".join(base)
    elif (node.module or "").startswith("glee_core"):
        prefix = node.module.removeprefix("glee_core").lstrip(".")
    else:
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
    return module.split(".")[0] if module.split(".")[0] in RANK else None


def test_every_module_lives_in_a_layer_and_every_layer_is_documented():
    graph = import_graph()
    loose = {m for m in graph if package_of(m) is None} - {"cli", "__main__", "__init__", "studio"}
    assert loose == set(), "a module outside the layers: put it in one of " + str(list(RANK))
    for package in RANK:
        doc = ast.get_docstring(ast.parse((PACKAGE / package / "__init__.py").read_text()))
        assert doc and len(doc) > 100, package


def test_imports_point_only_downward():
    upward = []
    for module, deps in import_graph().items():
        here = package_of(module)
        for dep in deps:
            there = package_of(dep)
            if here is None or there is None or there == here:
                continue
            if RANK[there] >= RANK[here]:
                upward.append(f"{module} -> {dep}")
    assert upward == []


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


def test_the_app_goes_through_its_door_and_every_name_there_resolves():
    import glee_core.studio as studio

    face = [
        PACKAGE.parent / "app.py",
        *sorted((PACKAGE.parent / "studio_ui").glob("*.py")),
        *sorted((PACKAGE.parent / "app_pages").glob("*.py")),
    ]
    elsewhere = []
    for path in face:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.ImportFrom)
                and (node.module or "").startswith("glee_core")
                and node.module != "glee_core.studio"
            ):
                elsewhere.append(f"{path.name}: {node.module}")
    assert elsewhere == []
    for name in studio.__all__:
        assert getattr(studio, name) is not None, name


def test_the_door_reads_each_face_once_and_no_name_has_two_homes():
    """``glee_core.studio`` offers each listed module's ``__all__`` (``_FACES``) and a few names
    known otherwise (``_NAMES``): a name two modules offer, or a module and an entry, would
    silently hide one of them."""
    import glee_core.studio as studio

    homes: dict[str, list[str]] = {}
    for module in studio._FACES:
        for name in studio.declared_names(module):
            homes.setdefault(name, []).append(module)
    for name, where in studio._NAMES.items():
        homes.setdefault(name, []).append(where)
    assert {name: where for name, where in homes.items() if len(where) > 1} == {}
    for module in studio._FACES:  # the source read is the module's own __all__, and names
        # every public name the module defines (what it offers, whole: nothing drifts out)
        assert studio.declared_names(module) == list(
            importlib.import_module(f"glee_core.{module}").__all__
        )
        tree = ast.parse(PACKAGE.joinpath(*module.split(".")).with_suffix(".py").read_text())
        defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        defined |= {
            x.id
            for n in tree.body
            if isinstance(n, (ast.Assign, ast.AnnAssign))
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            for x in ast.walk(t)
            if isinstance(x, ast.Name)
        }
        public = {name for name in defined if not name.startswith("_")}
        assert public <= set(studio.declared_names(module)), (module, public)


# studio_ui's order, as its docstring lists it
APP_MODULES = [
    "text",
    "access",
    "stores",
    "choice",
    "estimates",
    "jobs",
    "widgets",
    "recommendation",
    "reports",
    "labelling",
    "datasets",
    "navigation",
    "launches",
]


def test_the_app_package_imports_only_downward():
    """``studio_ui``: a module per job, each importing only the modules above it in the order its
    docstring gives (no cycle); every module is in that order, and the pages import the package,
    never one of its modules (its ``__init__`` is their one door)."""
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
            modules = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not any(m.startswith("studio_ui.") for m in modules), page.name


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
