"""Where an exported ONNX classifier spends its time: onnxruntime's own profile, by operator.

    python bench/onnx_ops.py FOLDER [--model model.int8.onnx] [--texts 400] [--texts-file F]

Scores ``--texts`` r8 test texts (``../shared/data``; or a JSON list of texts) with
``OnnxClassifier(FOLDER)`` once to warm up, then once with onnxruntime's profiler on, and prints
each operator type's share of the kernel time, the share of the matrix products (fp32 ``MatMul``
and ``FusedMatMul``, int8 ``MatMulInteger`` / ``DynamicQuantizeMatMul`` /
``MatMulIntegerToFloat``) and what that share bounds: with every matrix product free, the graph
would be at most 1 / (1 - share) times faster. BENCHMARKS.md ("Where a classifier is served")
reads it against item 7's targets. Run it alone; CI never runs it.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MATRIX_PRODUCTS = {
    "MatMul",
    "FusedMatMul",
    "Gemm",
    "MatMulInteger",
    "DynamicQuantizeMatMul",
    "MatMulIntegerToFloat",
    "QAttention",
    "Attention",
}


def texts_to_score(args) -> list[str]:
    if args.texts_file:
        return json.loads(Path(args.texts_file).read_text(encoding="utf-8"))[: args.texts]
    from glee_core.data.datasets import load_dataset  # noqa: PLC0415 (pandas: only here)

    test = load_dataset("r8", data_dir=args.data_dir).splits["test"]["text"].tolist()
    return (test * -(-args.texts // len(test)))[: args.texts]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="a folder written by export --format onnx")
    parser.add_argument("--model", default=None, help="model.onnx (default) or model.int8.onnx")
    parser.add_argument("--texts", type=int, default=400)
    parser.add_argument("--texts-file", help="a JSON list of texts in place of r8's test split")
    parser.add_argument(
        "--data-dir", default=os.environ.get("GLEE_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    )
    args = parser.parse_args(argv)
    import onnxruntime  # noqa: PLC0415

    sys.path.insert(0, str(Path(args.folder).resolve()))
    from onnx_classifier import OnnxClassifier  # noqa: PLC0415 (the folder's own copy)

    texts = texts_to_score(args)
    classifier = OnnxClassifier(args.folder, model=args.model)
    classifier.predict_proba(texts[:64])
    started = time.perf_counter()
    classifier.predict_proba(texts)
    rate = len(texts) / (time.perf_counter() - started)
    with tempfile.TemporaryDirectory() as tmp:
        options = onnxruntime.SessionOptions()
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(tmp) / "profile")
        model = Path(args.folder) / (args.model or classifier.spec["model"])
        classifier.session = onnxruntime.InferenceSession(
            str(model), options, providers=["CPUExecutionProvider"]
        )
        classifier.predict_proba(texts)
        events = json.loads(Path(classifier.session.end_profiling()).read_text())
    by_op: collections.Counter = collections.Counter()
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            by_op[event["args"]["op_name"]] += event["dur"]
    total = sum(by_op.values())
    print(f"{model.name}: {len(texts)} texts, {rate:.1f} texts/s unprofiled")
    print("| operator | share of kernel time |\n|---|---:|")
    for op, micros in by_op.most_common():
        if micros / total >= 0.005:
            print(f"| {op} | {micros / total:.1%} |")
    share = sum(v for k, v in by_op.items() if k in MATRIX_PRODUCTS) / total
    print(
        f"matrix products: {share:.1%} of the kernel time; with them free the graph would be "
        f"at most {1 / (1 - share):.2f}x faster"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
