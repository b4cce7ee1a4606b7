"""The engine's import graph: no cycle (local imports included), and scoring below training."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "glee_core"


def import_graph() -> dict[str, set[str]]:
    """module -> the glee_core modules it imports, anywhere in its body."""
    graph = {}
    for path in PACKAGE.glob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                deps |= {node.module.split(".")[0]} if node.module else \
                    {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("glee_core."):
                deps.add(node.module.split(".")[1])
        graph[path.stem] = deps - {path.stem}
    return graph


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for dep in graph.get(todo.pop(), ()):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def test_no_module_imports_itself_back():
    graph = import_graph()
    assert {m for m in graph if m in reachable(graph, m)} == set()


def test_the_scorers_do_not_import_the_trainer():
    graph = import_graph()
    for scorer in ("inference", "export", "scoring"):
        assert not {"training", "experiment", "executors"} & reachable(graph, scorer), scorer
