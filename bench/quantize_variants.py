"""Which int8 quantization an ONNX export takes: onnxruntime's dynamic quantization with its
defaults, per channel on the matrix products only (what ``export --quantize int8`` writes), and
that with the first encoder layer kept fp32, each against the run's fp32 graph.

    python bench/quantize_variants.py --run RUN_DIR [--run RUN_DIR ...] [--rounds 3] [--work DIR]

Exports each run as ONNX, quantizes it each way, and scores the run's own test texts: the share
of top classes that move against fp32, the test macro-F1 change, and texts/s (the variants
alternated ``--rounds`` times in one process, the best of each printed with the worst). Run it
alone; CI never runs it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import onnx
from onnxruntime.quantization import QuantType, quantize_dynamic

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from glee_core.runs.tables import markdown_table  # noqa: E402
from glee_core.serve.formats import (  # noqa: E402
    INT8_OPTIONS,
    export_onnx,
    onnx_classifiers,
    scores_on_test,
)
from glee_core.serve.inference import load_run  # noqa: E402

VARIANTS = {  # name -> quantize_dynamic's options, given the graph's MatMul node names
    "onnxruntime's defaults": lambda nodes: {},
    "export's (per channel, MatMul only)": lambda nodes: INT8_OPTIONS,
    "export's, layer 0 kept fp32": lambda nodes: {
        **INT8_OPTIONS,
        "nodes_to_exclude": [n for n in nodes if "layer.0/" in n],
    },
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="append", required=True, help="a stored run's folder")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work", help="keep the exported folders here")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in args.run:
            run = load_run(path)
            out = Path(args.work or tmp) / run.run_id  # a kept export is the same run's
            if not (out / "model.onnx").exists():
                out.mkdir(parents=True, exist_ok=True)
                export_onnx(run, out)
            texts = run.predictions["text"].tolist()
            nodes = [
                n.name for n in onnx.load(out / "model.onnx").graph.node if n.op_type == "MatMul"
            ]
            graphs = {"fp32": "model.onnx"}
            for index, (name, options) in enumerate(VARIANTS.items()):
                graphs[name] = f"int8-{index}.onnx"
                quantize_dynamic(
                    out / "model.onnx",
                    out / graphs[name],
                    weight_type=QuantType.QInt8,
                    **options(nodes),
                )
            loaded = onnx_classifiers(out, list(graphs.values()))
            classifiers = {name: loaded[graph] for name, graph in graphs.items()}
            rates = {name: [] for name in classifiers}
            top = {}
            for _ in range(args.rounds):
                for name, classifier in classifiers.items():
                    started = time.perf_counter()
                    top[name] = classifier.predict_proba(texts).argmax(1)
                    rates[name].append(len(texts) / (time.perf_counter() - started))
            reference = scores_on_test(run, top["fp32"])["f1"]
            for name in classifiers:
                rows.append(
                    [
                        f"{run.run_id}",
                        name,
                        f"{(top[name] != top['fp32']).mean():.2%}",
                        f"{scores_on_test(run, top[name])['f1'] - reference:+.2f}",
                        f"{min(rates[name]):.0f}-{max(rates[name]):.0f}",
                    ]
                )
                print(rows[-1], file=sys.stderr)
    print(
        "\n".join(
            markdown_table(
                ["run", "graph", "top classes moved", "macro-F1 change", "texts/s"], rows, left=2
            )
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
