"""The code's shape against issue #79's targets: modules over 500 lines, functions over 80 lines
and over 5 parameters, the engine's lines, the pages over 250 lines and ``studio_ui``'s modules
over 300.

    python tools/shape.py [--list]

``--list`` names every module and function over its limit (longest first)."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMITS = {"module": 500, "function": 80, "parameters": 5, "page": 250, "studio_ui": 300}


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def functions(path: Path):
    """(qualified name, lines, parameters) of every function in a module; ``self`` and ``cls``
    are not counted as parameters."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []

    def walk(node, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = child.args
                names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
                params = len([n for n in names if n not in ("self", "cls")])
                length = child.end_lineno - child.lineno + 1
                found.append((f"{prefix}{child.name}", length, params))
                walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")

    walk(tree, "")
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="name what is over each limit")
    args = parser.parse_args(argv)
    engine = sorted((ROOT / "glee_core").rglob("*.py"))
    face = [ROOT / "app.py", *sorted((ROOT / "studio_ui").glob("*.py"))]
    pages = sorted((ROOT / "app_pages").glob("*.py"))
    code = engine + face + pages
    rel = {p: str(p.relative_to(ROOT)) for p in code}
    long_modules = sorted((lines(p), rel[p]) for p in code if lines(p) > LIMITS["module"])
    funcs = [
        (length, params, f"{rel[p]}:{name}") for p in code for name, length, params in functions(p)
    ]
    long_funcs = sorted((f for f in funcs if f[0] > LIMITS["function"]), reverse=True)
    many = sorted(((f[1], f[2]) for f in funcs if f[1] > LIMITS["parameters"]), reverse=True)
    long_pages = sorted((lines(p), rel[p]) for p in pages if lines(p) > LIMITS["page"])
    long_ui = sorted((lines(p), rel[p]) for p in face[1:] if lines(p) > LIMITS["studio_ui"])
    rows = [
        (f"modules over {LIMITS['module']} lines", len(long_modules), "0"),
        (f"functions over {LIMITS['function']} lines", len(long_funcs), "<= 10"),
        (f"functions over {LIMITS['parameters']} parameters", len(many), "<= 20"),
        # "not more than today": 25.6k when the issue was filed, 28,255 when its work began
        # (402f2ad^), after #77, #78, #80 and #81 had landed their features, as ordered
        ("the engine's lines (glee_core/)", sum(lines(p) for p in engine), "<= 28,255"),
        (f"pages over {LIMITS['page']} lines", len(long_pages), "0"),
        (f"studio_ui modules over {LIMITS['studio_ui']} lines", len(long_ui), "0"),
    ]
    width = max(len(r[0]) for r in rows)
    for what, value, target in rows:
        print(f"{what:<{width}}  {value:>7,}  (target {target})")
    if args.list:
        for title, items in (
            ("modules", [f"{n:>5}  {m}" for n, m in reversed(long_modules)]),
            ("functions", [f"{n:>5}  {name}" for n, _, name in long_funcs]),
            ("parameters", [f"{n:>5}  {name}" for n, name in many]),
            ("pages", [f"{n:>5}  {m}" for n, m in reversed(long_pages)]),
            ("studio_ui", [f"{n:>5}  {m}" for n, m in reversed(long_ui)]),
        ):
            print(f"\n{title}:")
            print("\n".join(items) or "  none")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
