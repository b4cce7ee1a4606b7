"""How long each chart of the PDF report takes to draw, and the whole report, at many classes.

    python bench/report_scale.py [--classes 120 1000 1500] [--methods 3]

Synthetic stores (``tests.helpers.synthetic_runs``) of the given class counts, the first
``--methods`` methods of the registry, one seed: for each registered report chart
(``charts.RUN_CHARTS``) the seconds and PNG size through the PDF's path (vl-convert), then
``build_report`` end to end.
Run by hand; CI never runs it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from glee_core.models.methods import METHODS, registry_order  # noqa: E402
from glee_core.runs.store import RunStore  # noqa: E402
from glee_core.views.charts import RUN_CHARTS  # noqa: E402
from glee_core.views.report import build_report, chart_png  # noqa: E402
from glee_core.views.style import PDF_WIDTH  # noqa: E402
from tests.helpers.synthetic_runs import write_synthetic_store  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", type=int, nargs="+", default=[120, 1000, 1500])
    parser.add_argument("--methods", type=int, default=3)
    args = parser.parse_args(argv)
    methods = registry_order(METHODS)[: args.methods]
    for n in args.classes:
        with tempfile.TemporaryDirectory() as tmp:
            runs = write_synthetic_store(RunStore(Path(tmp)), n, methods)
            for chart in (c for c in RUN_CHARTS.values() if c.in_report):
                started = time.perf_counter()
                try:
                    size = f"{len(chart_png(chart.draw(runs, PDF_WIDTH))) / 2**20:.1f} MB"
                except ValueError as exc:
                    size = f"failed: {str(exc).splitlines()[1][:60]}"
                print(f"{n} classes · {chart.name}: {time.perf_counter() - started:.1f} s, {size}")
            started = time.perf_counter()
            pdf = build_report(runs)
            print(
                f"{n} classes · whole report: {time.perf_counter() - started:.1f} s, "
                f"{len(pdf) / 2**20:.1f} MB"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
