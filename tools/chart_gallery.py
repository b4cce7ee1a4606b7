"""Every run chart at 2, 8, 20 and 120 classes and 1, 3, 12 and 16 methods, as PNG files.

    python tools/chart_gallery.py [--out test-artifacts/gallery] [--classes 2 8 20 120]
                                  [--methods 1 3 12 16]

Draws from synthetic stores (``tests.helpers.synthetic_runs``) through the same PNG path as the PDF
report, so a person can look at each chart at each size (a chart that renders but cannot be read
is a defect). ``tests/test_chart_legibility.py`` renders a subset and checks marks and labels.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from glee_core.models.methods import METHODS, registry_order  # noqa: E402
from glee_core.runs.store import RunStore  # noqa: E402
from glee_core.views import charts  # noqa: E402
from glee_core.views.report import chart_png  # noqa: E402
from glee_core.views.style import APP_WIDTH
from tests.helpers.synthetic_runs import write_synthetic_store  # noqa: E402


def gallery_charts(runs, width: int = APP_WIDTH):
    """(name, chart) for every chart of the registry, drawn from a set of runs."""
    return [(chart.name, chart.draw(runs, width)) for chart in charts.RUN_CHARTS.values()]


def methods_of(count: int) -> list[str]:
    """The first ``count`` methods of the registry (the paper's rows first)."""
    return registry_order(METHODS)[:count]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="test-artifacts/gallery")
    parser.add_argument("--classes", type=int, nargs="+", default=[2, 8, 20, 120])
    parser.add_argument("--methods", type=int, nargs="+", default=[1, 3, 12, 16])
    parser.add_argument("--only", nargs="*", help="chart names to draw (default: all)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for n_classes in args.classes:
            for n_methods in args.methods:
                store = RunStore(Path(tmp) / f"c{n_classes}-m{n_methods}")
                runs = write_synthetic_store(store, n_classes, methods_of(n_methods), [1, 2])
                for name, chart in gallery_charts(runs):
                    if args.only and name not in args.only:
                        continue
                    path = out / f"{name}-c{n_classes}-m{n_methods}.png"
                    path.write_bytes(chart_png(chart, scale=1.0))
                    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
