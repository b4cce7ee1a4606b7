"""Fine-tuning the top heads of a quick compare: a search per head, the rate searched once, and a
race of the heads at that rate, in time and test F1.

    python bench/finetune_top.py --dataset r8-3400 [--variants each,once,race] [--seed 1]
                                 [--top 3] [--work DIR] [--extra "--precision fp32"]

First the quick compare the app runs (every head, both poolings, cross-validated where dev is
small) picks the top heads, as Home's "Fine-tune the best of the top 3" does. Then each variant
fine-tunes them with the practical recipe in a process of its own (one at a time; run it alone
for wall times that compare):

* ``each``: every head searches its own rate and trains to the end (the recipe before the rate
  was searched once, ``--lr-search each``);
* ``once``: the first head's search chooses the rate, the others train at it (``--lr-search
  once``, the default);
* ``race``: the heads race at the rate searched once and only the best trains to the end
  (``--heads best``, what Home's button launches).

Prints, per variant: wall seconds, the optimizer steps of every trial (a measure no other work
on the machine moves), the wall seconds per step (the machine's pace: compare variants' walls
only where it matches), and the test macro-F1 / tail F1 of the head each variant leaves chosen on
dev (``each``, ``once``: the best on dev of the fine-tuned heads; ``race``: its winner), and each
head's. The sets: ``demo``, and bench/baselines.py's r8 subsets and r52-lt (``r8-1500``,
``r8-3400``: a stratified subset of that many Reuters-8 training texts).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.baselines import dataset_spec  # noqa: E402
from glee_core.core.events import read_events  # noqa: E402
from glee_core.core.pace import time_left  # noqa: E402
from glee_core.core.progress import fold  # noqa: E402
from glee_core.data.datasets import load_dataset  # noqa: E402
from glee_core.models.backbone import estimate_parameters  # noqa: E402
from glee_core.models.config import TrainConfig  # noqa: E402
from glee_core.models.methods import METHODS  # noqa: E402
from glee_core.runs.estimate import Workload, estimate_seconds  # noqa: E402
from glee_core.runs.recommend import recommend, top_for_finetuning  # noqa: E402
from glee_core.runs.store import RunStore  # noqa: E402
from glee_core.runs.tables import markdown_table  # noqa: E402
from glee_core.train.experiment import run_launch  # noqa: E402
from glee_core.train.launch import Launch  # noqa: E402

VARIANTS = {
    "each": ["--lr-search", "each"],
    "once": ["--lr-search", "once"],
    "race": ["--heads", "best"],
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="demo")
    parser.add_argument(
        "--data-dir", default=os.environ.get("GLEE_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    )
    parser.add_argument("--variants", default="each,once,race")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--top", type=int, default=3)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--model", default="auto")
    parser.add_argument("--work", required=True, help="a folder for the data and the stores")
    parser.add_argument("--extra", default="", help="more train flags for every variant")
    args = parser.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    spec = dataset_spec(args.dataset, Path(args.data_dir), work)
    dataset = load_dataset(spec)
    quick = RunStore(work / "quick")
    frozen = [m for m in METHODS.values() if m.supports_frozen]
    compared = run_launch(
        Launch(
            dataset,
            frozen,
            [args.seed],
            args.model,
            TrainConfig(mode="frozen", max_length=args.max_length),
            quick,
        )
    )
    rec = recommend(compared)
    pooling = rec.chosen.pooling if rec.chosen.pooling in ("cls", "mean") else "auto"
    top = top_for_finetuning(compared, args.top, pooling=None if pooling == "auto" else pooling)
    print(
        f"{args.dataset}: {len(dataset.splits['train'])} training texts; the compare "
        f"recommends {rec.chosen.method} ({rec.chosen.pooling}); top {args.top}: "
        f"{', '.join(top)}",
        file=sys.stderr,
    )
    rows = []
    for variant in args.variants.split(","):
        store = work / f"store-{variant}"
        if not (store / ".features").exists():  # the quick runs: LP-FT's stages, re-used
            subprocess.run(["cp", "-r", str(quick.root), str(store)], check=True)
        command = [
            sys.executable,
            "-m",
            "glee_core",
            "train",
            "--dataset",
            spec,
            "--method",
            ",".join(top),
            "--seeds",
            str(args.seed),
            "--model",
            args.model,
            "--max-length",
            str(args.max_length),
            "--pooling",
            pooling,
            "--runs-dir",
            str(store),
            *VARIANTS[variant],
            *shlex.split(args.extra),
        ]
        switch, value = VARIANTS[variant]
        config = TrainConfig(
            max_length=args.max_length, pooling=pooling, **{switch[2:].replace("-", "_"): value}
        )
        estimate = estimate_seconds(
            Workload(
                dataset,
                len(top),
                config,
                args.model,
                estimate_parameters(args.model),
                "cpu",
                lp_ft_stages=0,
            ),
            RunStore(store).runs(),
        )  # the quick runs
        log = store / "progress.jsonl"
        log.unlink(missing_ok=True)
        started = time.perf_counter()
        # the child's progress bars go to a file: a pipe nobody reads fills and stops it
        errors = (store / "stderr.txt").open("w")
        child = subprocess.Popen(
            [*command, "--progress-file", str(log)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        readings = []  # (elapsed, time left the app would show)
        while child.poll() is None:
            time.sleep(5)
            elapsed = time.perf_counter() - started
            state = fold(read_events(log))
            readings.append(
                (elapsed, state.fraction, time_left(state.fraction, elapsed, estimate.seconds))
            )
        out, _ = child.communicate()
        errors.close()
        wall = time.perf_counter() - started
        if child.returncode:
            raise SystemExit(f"{variant} failed:\n{(store / 'stderr.txt').read_text()[-3000:]}")
        errors = [
            f"{100 * f:.0f}%: {(left - (wall - at)) / wall:+.0%}"
            for at, f, left in readings
            if left is not None and any(abs(at - q * wall) < 5 for q in (0.1, 0.25, 0.5, 0.75))
        ]
        print(
            f"  {variant}: estimated {estimate.seconds:.0f} s at launch "
            f"({(estimate.seconds - wall) / wall:+.0%}); time left off by (share of the "
            f"whole) at 10/25/50/75% of the wall: {'; '.join(errors)}",
            file=sys.stderr,
        )
        ids = {r["run_id"] for r in json.loads(out.strip().splitlines()[-1])}
        runs = [r for r in RunStore(store).runs() if r.run_id in ids]
        # every trial's: a race's winner counts the dropped heads' and the rate search's too
        steps = sum((r.record.timing.steps or 0) for r in runs)
        chosen = max(runs, key=lambda r: r.metrics.best_dev)
        per_head = ", ".join(
            f"{r.method} {100 * r.metrics.f1:.2f} (lr {r.record.tuning.lr:g})" for r in runs
        )
        rows.append(
            [
                variant,
                f"{wall:.0f}",
                str(steps),
                f"{wall / max(steps, 1):.2f}",
                chosen.method,
                f"{100 * chosen.metrics.f1:.2f} / {100 * chosen.metrics.tail_f1:.2f}",
                per_head,
            ]
        )
        print(
            f"  {variant}: {wall:.0f} s, {steps} steps, chosen {chosen.method} "
            f"{100 * chosen.metrics.f1:.2f}",
            file=sys.stderr,
        )
    print(
        "\n".join(
            markdown_table(
                [
                    "variant",
                    "wall s",
                    "steps",
                    "s / step",
                    "chosen on dev",
                    "test F1 / tail F1",
                    "each head (test F1, rate)",
                ],
                rows,
                left=1,
            )
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
