"""The fine-tuning recipe, switch by switch: the sweep that chose the practical recipe's defaults.

    python bench/recipe_sweep.py [--dataset demo|r8-1500|r52-lt] [--methods cls-relu-pt-ln]
        [--seeds 1 | 1,2,3 | 3-3] [--variants paper,practical,lr-2e-4,...]
        [--work /tmp/glee-recipe-sweep]
        [--data-dir ../shared/data] [--model auto] [--max-length N]

Every (variant, method, seed) is one fresh ``python -m glee_core train --mode finetune`` with
the variant's flags, so each row's peak memory is its own process's (``ru_maxrss``, Linux); runs
land in one store under ``--work``, so a killed sweep resumes where it stopped and LP-FT's
quick-mode heads are fitted once. For each variant and method it prints dev F1 (what a choice
may read), test macro-F1 and tail F1 as mean ± sample std over seeds, the learning rates the runs
trained at, wall time per run (process start to exit, LP-FT's stage included when it trained)
and peak memory. ``--out FILE`` also writes the Markdown table. Run by hand (its helpers are
tested through ``bench/tuning_modes.py``'s test).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.baselines import dataset_spec  # noqa: E402
from glee_core.runs.store import RunStore  # noqa: E402
from glee_core.runs.tables import markdown_table, mean_std  # noqa: E402


def spread(values: list[float]) -> str:
    """``mean ± sample std`` in percent (the mean alone for one seed)."""
    series = pd.Series(values, dtype=float) * 100
    return mean_std(series.mean(), series.std(ddof=1))


# name -> train flags on top of --mode finetune (each a switch of the recipe, or a recipe)
VARIANTS = {
    "paper": ["--recipe", "paper"],
    "practical": [],
    **{f"lr-{lr}": ["--lr", lr] for lr in ("2e-5", "5e-5", "1e-4", "2e-4", "3e-4")},
    **{f"lr-{lr}-no-lpft": ["--lr", lr, "--lp-ft", "no"] for lr in ("5e-5", "1e-4", "2e-4")},
    "lr-2e-4-no-floor": ["--lr", "2e-4", "--min-steps", "1"],
    "lr-2e-4-head-1e-3": ["--lr", "2e-4", "--head-lr", "1e-3"],
    "lr-2e-4-decay-0.9": ["--lr", "2e-4", "--layer-decay", "0.9"],
    "practical-no-lpft": ["--lp-ft", "no"],
    "practical-3": ["--lr-candidates", "3e-5,1e-4,3e-4"],
}


def run_child(command: list[str]) -> tuple[str, float, float]:
    """(stdout, wall seconds, peak RSS in GB) of ``command``; exits with the end of its stderr
    if it fails. Its stderr (the progress bars) is passed on to ours as it comes, by a thread,
    so a long run shows its progress and the child never blocks on a full pipe while stdout is
    read; the last few thousand bytes are kept for the failure message."""
    started = time.perf_counter()
    child = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    tail = bytearray()

    def relay() -> None:
        while chunk := child.stderr.read1(8192):
            sys.stderr.buffer.write(chunk)
            sys.stderr.buffer.flush()
            tail.extend(chunk)
            del tail[:-3000]

    relaying = threading.Thread(target=relay, daemon=True)
    relaying.start()
    out = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    relaying.join()
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{' '.join(command)} failed:\n{tail.decode(errors='replace')}")
    return out.decode(), wall, usage.ru_maxrss / 1e6


def train_child(args, dataset: str, flags: list[str], store: RunStore) -> dict:
    """One ``python -m glee_core train`` process on ``dataset`` with ``flags`` (plus the shared
    --model, --data-dir, --max-length, --extra): its result line, the stored run, wall seconds
    and peak memory."""
    command = [
        sys.executable,
        "-m",
        "glee_core",
        "train",
        "--dataset",
        dataset,
        *flags,
        "--runs-dir",
        str(store.root),
        "--data-dir",
        str(args.data_dir),
        *args.extra.split(),
    ]
    if "--model" not in flags:
        command += ["--model", args.model]
    if args.max_length:
        command += ["--max-length", str(args.max_length)]
    started = time.time()
    out, wall, peak = run_child(command)
    result = json.loads(out.strip().splitlines()[-1])[0]
    run = store.get(result["run_id"])
    created = datetime.strptime(run.record.created, "%Y-%m-%dT%H:%M:%S%z").timestamp()
    wall, peak = measured_cost(store, result["run_id"], wall, peak, created >= started - 1)
    return {**result, "wall": wall, "peak": peak, "run": run}


def measured_cost(
    store: RunStore, run_id: str, wall: float, peak: float, trained_now: bool
) -> tuple[float | None, float | None]:
    """The wall time and peak memory of the process that trained ``run_id``. A resumed sweep
    finds earlier runs stored, and its child's few seconds are not their cost: the sweep keeps
    each trained run's cost in ``costs.json`` beside the store and reads it back (``None`` when
    the run was trained outside the sweep)."""
    path = store.root.parent / "costs.json"
    costs = json.loads(path.read_text()) if path.exists() else {}
    if trained_now:
        costs[run_id] = {"wall": round(wall, 1), "peak": round(peak, 3)}
        path.write_text(json.dumps(costs, indent=1, sort_keys=True))
    known = costs.get(run_id, {})
    return known.get("wall"), known.get("peak")


def cost_cells(found: list[dict]) -> dict:
    """Wall time per run and the highest peak memory of a row's runs (over the runs whose cost
    the sweep measured)."""
    walls = [r["wall"] for r in found if r["wall"] is not None]
    peaks = [r["peak"] for r in found if r["peak"] is not None]
    return {
        "wall / run": f"{sum(walls) / len(walls):.0f} s" if walls else "–",
        "peak": f"{max(peaks):.2f} GB" if peaks else "–",
    }


def print_table(rows: list[dict], out: str | None, notes: list[str] = ()) -> None:
    """The rows as Markdown (then ``notes``), printed and, with ``out``, written."""
    text = "\n".join(
        [
            *markdown_table(list(rows[0]), [list(r.values()) for r in rows], left=3),
            *([""] + list(notes) if notes else []),
        ]
    )
    print(text)
    if out:
        Path(out).write_text(text + "\n", encoding="utf-8")


def seed_list(text: str) -> list[int]:
    """``--seeds``: a count ``N`` (seeds 1 to N), a list ``1,3`` or a range ``2-3`` (so a sweep
    can add one seed to a store that holds the others: ``3-3``)."""
    try:
        if "," in text:
            seeds = [int(s) for s in text.split(",") if s.strip()]
        elif "-" in text:
            first, last = (int(s) for s in text.split("-"))
            seeds = list(range(first, last + 1))
        else:
            seeds = list(range(1, int(text) + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give a count (3), a list (1,2,3) or a range (2-3)"
        ) from None
    if not seeds or min(seeds) < 0:
        raise argparse.ArgumentTypeError(f"{text!r} names no seed")
    return seeds


def common_arguments(parser: argparse.ArgumentParser, work: str, seeds: str) -> None:
    """The flags this sweep shares with bench/tuning_modes.py: the data, the store, the model,
    the seeds."""
    parser.add_argument("--dataset", default="demo", choices=("demo", "r8-1500", "r52-lt"))
    parser.add_argument("--work", type=Path, default=Path(work))
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(os.environ.get("GLEE_DATA_DIR", ROOT.parent / "shared" / "data")),
    )
    parser.add_argument("--model", default="auto")
    parser.add_argument("--max-length", type=int)
    parser.add_argument(
        "--seeds",
        type=seed_list,
        default=seed_list(seeds),
        help=f"a count (seeds 1..N), a list (1,3) or a range (2-3); default {seeds}",
    )
    parser.add_argument(
        "--extra", default="", help="more train flags for every run, e.g. '--epochs 1 --limit 64'"
    )
    parser.add_argument("--out", help="also write the Markdown table here")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser, "/tmp/glee-recipe-sweep", seeds="1")
    parser.add_argument("--methods", default="cls-relu-pt-ln")
    parser.add_argument("--variants", default="paper,practical")
    args = parser.parse_args(argv)
    unknown = [v for v in args.variants.split(",") if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {unknown}; choose from {', '.join(VARIANTS)}")
    args.work.mkdir(parents=True, exist_ok=True)
    dataset = dataset_spec(args.dataset, args.data_dir, args.work)
    store = RunStore(args.work / "runs")
    rows = []
    for variant in args.variants.split(","):
        for method in args.methods.split(","):
            found = []
            for seed in args.seeds:
                result = train_child(
                    args,
                    dataset,
                    [
                        "--mode",
                        "finetune",
                        "--method",
                        method,
                        "--seeds",
                        str(seed),
                        *VARIANTS[variant],
                    ],
                    store,
                )
                record = result["run"].record
                found.append(
                    {
                        **result,
                        "dev": result["run"].metrics.best_dev_f1,
                        "lr": record.tuning.lr or record.hyperparameters.lr,
                    }
                )
                print(
                    f"{variant} {method} seed {seed}: f1 {result['f1']:.4f} tail "
                    f"{result['tail_f1']:.4f} lr {found[-1]['lr']} "
                    f"{' '.join(cost_cells([result]).values())}",
                    flush=True,
                )
            rows.append(
                {
                    "dataset": args.dataset,
                    "variant": variant,
                    "method": method,
                    "seeds": len(found),
                    "dev F1": spread([r["dev"] for r in found]),
                    "macro-F1": spread([r["f1"] for r in found]),
                    "tail F1": spread([r["tail_f1"] for r in found]),
                    "lr": ", ".join(sorted({f"{r['lr']:g}" for r in found})),
                    **cost_cells(found),
                }
            )
    print_table(rows, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
