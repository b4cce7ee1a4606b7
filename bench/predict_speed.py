"""Where a classifier is served: today's ``predict``, the hf folder through transformers, ONNX
fp32 and ONNX int8, on the same texts.

    python bench/predict_speed.py [--texts 10000] [--max-lengths 128,256] [--work DIR]
                                  [--openvino-python PATH]

Trains one quick-mode run of CLS-tuning ∘ R w/ pt. LN (mean pooling) on the offline MiniLM on
Reuters-8 (``../shared/data``), exports it as hf and onnx (``--quantize int8``), then scores
``--texts`` r8 texts (its test split, repeated) with each engine in a process of its own, and
prints texts per second, the peak memory of the process and the agreement of the top class with
today's ``predict`` (and, for int8, the test macro-F1 change). With ``--openvino-python``, the
ONNX folder is also scored by ``OnnxClassifier(folder, precision="bf16")`` in that Python. Run it
alone for rates that compare; CI never runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from glee_core.data.datasets import load_dataset  # noqa: E402
from glee_core.models.config import TrainConfig  # noqa: E402
from glee_core.models.methods import get_method  # noqa: E402
from glee_core.runs.metrics import classification_metrics  # noqa: E402
from glee_core.runs.store import RunStore  # noqa: E402
from glee_core.runs.tables import markdown_table  # noqa: E402
from glee_core.serve.export import export_run  # noqa: E402
from glee_core.train.experiment import run_launch  # noqa: E402
from glee_core.train.launch import Launch  # noqa: E402

ENGINES = {  # name -> a script that loads the folder and defines score(texts) -> probabilities
    "predict (torch)": """
from glee_core.serve.inference import PREDICT_CHUNK, Scorer, load_run
scorer = Scorer.for_run(load_run(FOLDER))
def score(texts):  # what predict does: chunks of texts, each sorted by length
    return np.concatenate([scorer.predict_proba(texts[i:i + PREDICT_CHUNK])
                           for i in range(0, len(texts), PREDICT_CHUNK)])
""",
    "hf folder (transformers)": """
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer
torch.set_grad_enabled(False)
model = AutoModelForSequenceClassification.from_pretrained(FOLDER, trust_remote_code=True).eval()
tok = AutoTokenizer.from_pretrained(FOLDER, trust_remote_code=True)
def score(texts):  # batches of 32 texts of similar length, as a server would
    order = np.argsort([len(t) for t in texts])
    probs = np.zeros((len(texts), model.config.num_labels), dtype=np.float32)
    for i in range(0, len(order), 32):
        rows = order[i:i + 32]
        enc = tok([texts[r] for r in rows], padding=True, truncation=True, return_tensors="pt")
        probs[rows] = torch.softmax(model(**enc).logits, -1).numpy()
    return probs
""",
    "onnx fp32": """
sys.path.insert(0, FOLDER)
from onnx_classifier import OnnxClassifier
score = OnnxClassifier(FOLDER).predict_proba
""",
    "onnx int8": """
sys.path.insert(0, FOLDER)
from onnx_classifier import OnnxClassifier
score = OnnxClassifier(FOLDER, model="model.int8.onnx").predict_proba
""",
    "onnx bf16 (openvino)": """
sys.path.insert(0, FOLDER)
from onnx_classifier import OnnxClassifier
score = OnnxClassifier(FOLDER, precision="bf16").predict_proba
""",
}
OPENVINO = "onnx bf16 (openvino)"  # runs in --openvino-python's environment
# the scoring alone is timed; the peak memory is this process's own (VmHWM: exec starts it
# anew, where ru_maxrss keeps the parent's from before the exec)
RUNNER = """
import json, re, sys, time
import numpy as np
FOLDER, texts = sys.argv[1], json.load(open(sys.argv[2]))
{script}
started = time.perf_counter()
probs = score(texts)
seconds = time.perf_counter() - started
np.save(sys.argv[3], probs)
peak = int(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1))
print(json.dumps({{"seconds": seconds, "peak_mb": peak / 1024}}))
"""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=10_000)
    parser.add_argument("--max-lengths", default="128,256")
    parser.add_argument(
        "--data-dir", default=os.environ.get("GLEE_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    )
    parser.add_argument("--work", help="keep the runs and folders here")
    parser.add_argument(
        "--openvino-python",
        help=(
            "a Python whose environment has onnxruntime-openvino, numpy and tokenizers (it "
            "replaces onnxruntime, so not this one's): adds the ONNX folder scored in bf16 on "
            "OpenVINO"
        ),
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        dataset = load_dataset("r8", data_dir=args.data_dir)
        test = dataset.splits["test"]
        reps = -(-args.texts // len(test))
        texts = (test["text"].tolist() * reps)[: args.texts]
        gold = np.tile(test["label"].to_numpy(), reps)[: args.texts]
        (work / "texts.json").write_text(json.dumps(texts))
        rows = []
        for max_length in map(int, args.max_lengths.split(",")):
            [run] = run_launch(
                Launch(
                    dataset,
                    [get_method("cls-relu-pt-ln")],
                    [1],
                    "auto",
                    TrainConfig(
                        mode="frozen", pooling="mean", choose_by="dev", max_length=max_length
                    ),
                    RunStore(work / "runs"),
                )
            )
            folders = {"predict (torch)": run.path}
            for form in ("hf", "onnx"):
                out = work / f"{form}-{max_length}"
                if not out.exists():
                    export_run(run, out, form=form, quantize="int8" if form == "onnx" else None)
                folders[form] = out
            folders = {
                "predict (torch)": run.path,
                "hf folder (transformers)": folders["hf"],
                "onnx fp32": folders["onnx"],
                "onnx int8": folders["onnx"],
                OPENVINO: folders["onnx"],
            }
            reference = None
            for engine, script in ENGINES.items():
                if engine == OPENVINO and not args.openvino_python:
                    continue
                probs_file = work / "probs.npy"
                python = args.openvino_python if engine == OPENVINO else sys.executable
                done = subprocess.run(
                    [
                        python,
                        "-c",
                        RUNNER.format(script=script),
                        str(folders[engine]),
                        str(work / "texts.json"),
                        str(probs_file),
                    ],
                    capture_output=True,
                    text=True,
                    env={**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"},
                )
                if done.returncode:
                    raise SystemExit(f"{engine} failed:\n{done.stderr[-3000:]}")
                stats = json.loads(done.stdout.strip().splitlines()[-1])
                probs = np.load(probs_file)
                pred = probs.argmax(1)
                if reference is None:  # the first engine, today's predict
                    reference, base_seconds = pred, stats["seconds"]
                metrics = classification_metrics(gold, pred, dataset.classes, *dataset.head_tail())
                rows.append(
                    {
                        "max length": max_length,
                        "engine": engine,
                        "texts/s": round(len(texts) / stats["seconds"], 1),
                        "× predict": f"{base_seconds / stats['seconds']:.2f}",
                        "peak RSS (MB)": round(stats["peak_mb"]),
                        "top class = predict's": f"{(pred == reference).mean():.2%}",
                        "macro-F1": round(100 * metrics["f1"], 2),
                        "tail F1": round(100 * metrics["tail_f1"], 2),
                    }
                )
                print(rows[-1], file=sys.stderr)
        print("\n".join(markdown_table(list(rows[0]), [list(r.values()) for r in rows], left=2)))
    print(
        f"(this process's peak: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}"
        f" MB; {time.strftime('%Y-%m-%d')})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
