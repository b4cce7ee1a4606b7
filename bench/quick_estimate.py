"""Every kind of job's estimate (the one the app's button says) against its real wall time.

    python bench/quick_estimate.py [--dataset demo --dataset r52-17 --dataset many-2000]
        [--kinds train,health,budget,suggest,self-train,report,export,predict]
        [--beside none|hog|nice] [--model auto] [--data-dir ../shared/data] [--finetune METHOD]

For each dataset, in a fresh store: each kind's request built as the app builds it, estimated by
its kind (``glee_core.train.job_kinds``: the same ``Here`` a page makes, the other work on the
CPU sampled as the app's sampler does), launched by ``glee_core.train.jobs.launch`` (the app's
launch path: a background ``python -m glee_core <kind> --request``) and waited for; then the
same again ("after a first run": the features cached, the finished runs and jobs calibrating).
Prints a row per job: the estimate and its range, the real seconds, real / estimate, and a
verdict against the +-50% target. ``--beside hog`` runs a busy loop at nice 0 through it, ``nice``
a niced matrix product on every core (the two kinds of other work the app counts).
``--finetune METHOD`` adds a first fine-tune of METHOD (the practical recipe, as Home's step).

Datasets: ``demo``; ``r52-17`` (17 of R52's classes from its dev and test files, the largest cut
to 450: about 1,800 texts, long-tailed); ``many-2000`` (2,000 classes x 10 texts of random words,
the most classes public mode takes); or any dataset id. Run by hand; CI never runs it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from glee_core.budget.options import BudgetOptions  # noqa: E402
from glee_core.core.devices import resolve_device  # noqa: E402
from glee_core.data.datasets import load_dataset  # noqa: E402
from glee_core.health.options import HealthOptions  # noqa: E402
from glee_core.models.config import TrainConfig  # noqa: E402
from glee_core.models.methods import METHODS  # noqa: E402
from glee_core.models.options import DataOptions  # noqa: E402
from glee_core.models.requests import (  # noqa: E402
    BudgetRequest,
    ExportRequest,
    HealthRequest,
    PredictRequest,
    ReportRequest,
    SuggestRequest,
    TrainRequest,
)
from glee_core.pool.options import SelfTrainOptions, SuggestOptions  # noqa: E402
from glee_core.runs.busy import other_work  # noqa: E402
from glee_core.runs.job_estimates import Machine  # noqa: E402
from glee_core.runs.recommend import recommend  # noqa: E402
from glee_core.runs.store import RunStore  # noqa: E402
from glee_core.train.job_kinds import Here, kind_of  # noqa: E402
from glee_core.train.jobs import launch, past_jobs  # noqa: E402

KINDS = ("train", "health", "budget", "suggest", "self-train", "report", "export", "predict")


def r52_17(data_dir: Path, folder: Path, classes: int = 17, largest: int = 450) -> str:
    """17 of R52's classes (the most frequent, the largest cut to ``largest``) from its dev and
    test files: about 1,800 long-tailed texts, as a CSV the loader splits 70/10/20."""
    frames = [pd.read_csv(data_dir / "r52" / f"{s}.tsv", sep="\t") for s in ("dev", "test")]
    frame = pd.concat(frames)[["text", "label"]].dropna()
    kept = frame["label"].value_counts().index[:classes]
    parts = [
        group.sample(min(len(group), largest), random_state=0)
        for label, group in frame[frame["label"].isin(kept)].groupby("label")
    ]
    path = folder / "r52-17.csv"
    pd.concat(parts).to_csv(path, index=False)
    return f"csv:{path}"


def many_classes(folder: Path, classes: int = 2000, per_class: int = 10) -> str:
    """``classes`` classes x ``per_class`` texts of 12 random words: the most classes an upload
    may have in public mode, the shape of the hostile review's 2,000-class attack (at 5 texts a
    class no class has the 5 training texts the health check's folds need: it says so)."""
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(3000)]
    rows = [
        (" ".join(rng.choice(words, 12)), f"class {c:04d}")
        for c in range(classes)
        for _ in range(per_class)
    ]
    path = folder / f"many-{classes}.csv"
    pd.DataFrame(rows, columns=["text", "label"]).to_csv(path, index=False)
    return f"csv:{path}"


def a_pool(dataset, folder: Path, texts: int = 300) -> Path:
    """Unlabelled texts like the data's and none of them: ``texts`` of its training texts, each
    with a third of its words dropped (new texts a classifier still reads as their class, so
    self-training keeps their pseudo-labels as it would a user's pool)."""
    rng = np.random.default_rng(1)
    train = dataset.splits["train"]["text"].astype(str)
    lines = [
        " ".join(w for i, w in enumerate(text.split()) if i % 3 != 1)
        for text in train.sample(min(texts, len(train)), random_state=1)
    ]
    rng.shuffle(lines)
    path = folder / "pool.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def requests(kind: str, spec: str, dataset, model: str, store: RunStore, folder: Path):
    """The request a page writes for ``kind`` (None where it needs what is not there yet)."""
    data = DataOptions(dataset=spec)
    reports = store.data_report_dir(dataset.id, model)
    if kind == "train":
        return TrainRequest(data, list(METHODS), [1], model, TrainConfig(mode="frozen"))
    if kind == "health":
        return HealthRequest(data, HealthOptions(out=str(reports)), model)
    if kind == "budget":
        return BudgetRequest(data, BudgetOptions(out=str(reports)), model)
    if kind == "suggest":
        options = SuggestOptions(pool=str(a_pool(dataset, folder)), out="-", n=20)
        return SuggestRequest(data, options, model, session=True)
    if kind == "self-train":
        return TrainRequest(
            data,
            list(METHODS),
            [1],
            model,
            TrainConfig(mode="frozen"),
            self_train=SelfTrainOptions(pool=str(a_pool(dataset, folder)), self_train="auto"),
        )
    runs = [r for r in store.runs() if r.dataset == dataset.id]
    rec = recommend(runs) if runs else None
    if rec is None:
        return None
    chosen = [r for r in runs if r.setting == rec.chosen.setting]
    if kind == "report":
        ids = sorted(r.run_id for r in chosen)
        return ReportRequest(dataset.id, ids, str(folder / "report.pdf"), [str(store.root)])
    best = next(r for r in chosen if r.method == rec.chosen.method)
    if kind == "export":
        return ExportRequest(
            best.run_id, "onnx", str(folder / "export.zip"), None, [str(store.root)]
        )
    if kind == "predict":
        texts = folder / "texts.csv"
        dataset.splits["test"][["text"]].head(2000).to_csv(texts, index=False)
        return PredictRequest(
            str(texts), str(folder / "predicted.csv"), best.run_id, [str(store.root)]
        )
    raise SystemExit(f"unknown kind {kind!r}")


def beside(what: str) -> list[subprocess.Popen]:
    """Other work through the measurement, a program of its own (a session of its own, as a
    desktop's programs are; the jobs run in this one's, as in the app's): ``hog``, a busy loop
    at nice 0; ``nice``, a niced matrix product on every core."""
    if what == "hog":
        code = "while True: pass"
        return [subprocess.Popen([sys.executable, "-c", code], start_new_session=True)]
    if what == "nice":
        code = "import numpy as np\na = np.random.rand(1500, 1500)\nwhile True: a @ a"
        argv = ["nice", "-n", "19", sys.executable, "-c", code]
        return [subprocess.Popen(argv, start_new_session=True)]
    return []


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", action="append")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--beside", choices=("none", "hog", "nice"), default="none")
    parser.add_argument("--model", default="auto")
    parser.add_argument(
        "--data-dir", default=os.environ.get("GLEE_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    )
    parser.add_argument("--finetune", default="", help="a method to fine-tune after the compare")
    parser.add_argument("--rounds", type=int, default=2, help="1: a fresh store only")
    args = parser.parse_args(argv)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    device = resolve_device("auto").type
    others = beside(args.beside)
    print(
        "| dataset | round | kind | estimate s (range) | real s | real / est. | within +-50% |",
        flush=True,
    )
    print("|---|---|---|---:|---:|---:|---|", flush=True)
    try:
        for name in args.dataset or ["demo"]:
            with tempfile.TemporaryDirectory() as tmp:
                folder = Path(tmp)
                if name == "r52-17":
                    spec = r52_17(Path(args.data_dir), folder)
                elif name.startswith("many-"):
                    spec = many_classes(folder, int(name.split("-")[1]))
                else:
                    spec = name
                dataset = load_dataset(spec)
                store = RunStore(folder / "runs")
                for round_ in range(1, args.rounds + 1):
                    for kind in kinds + (["finetune"] if args.finetune else []):
                        if kind == "finetune":
                            config = TrainConfig(mode="finetune")
                            request = TrainRequest(
                                DataOptions(spec), [args.finetune], [round_], args.model, config
                            )
                        else:
                            request = requests(kind, spec, dataset, args.model, store, folder)
                        if request is None:
                            print(f"| {name} | {round_} | {kind} | (nothing to do yet) |||")
                            continue
                        if round_ > 1 and kind in ("train", "self-train"):
                            request = replace(request, force=True)  # the same work again
                        busy = (
                            statistics.median(other_work() for _ in range(6))
                            if device == "cpu"
                            else 1.0
                        )
                        here = Here(
                            store,
                            Machine(device, busy, store.runs(), past_jobs(store)),
                            dataset,
                            {r.run_id: r for r in store.runs()},
                        )
                        estimate = kind_of(request).estimate(request, here)
                        started = time.perf_counter()
                        job = launch(store, request, f"bench {kind}", estimate)
                        while job.running:
                            time.sleep(0.5)
                        took = time.perf_counter() - started
                        status = job.status
                        ratio = took / max(estimate.seconds, 1e-9)
                        spread = (
                            f" ({estimate.low:.0f}-{estimate.high:.0f})"
                            if estimate.low is not None and estimate.high is not None
                            else ""
                        )
                        verdict = (
                            "yes"
                            if 0.5 <= ratio <= 1.5
                            else "no"
                            if status == "done"
                            else f"{status}: {job.error}"
                        )
                        print(
                            f"| {name} | {round_} | {kind} | {estimate.seconds:.0f}{spread} | "
                            f"{took:.0f} | {ratio:.2f} | {verdict} |",
                            flush=True,
                        )
                        if status != "done":
                            print(job.log(8), file=sys.stderr)
    finally:
        for process in others:
            process.kill()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
