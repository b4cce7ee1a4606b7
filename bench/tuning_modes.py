"""How to tune, on the tail: every mode side by side for a few heads, and what task-adaptive
pretraining (TAPT) does to the offline backbone's MLM head.

    python bench/tuning_modes.py [--dataset demo|r8-1500|r52-lt] [--seeds 3]
        [--methods prompt,cls-relu-pt-ln,cls-tanh] [--modes frozen,finetune,lora,ptuning2,
        tapt-frozen,tapt-finetune] [--tapt-epochs 10] [--work /tmp/glee-tuning-modes]
        [--data-dir ../shared/data] [--model auto] [--max-length N] [--extra '...']

Each (mode, method, seed) is one fresh ``python -m glee_core train`` (its own process: peak
memory is its ``ru_maxrss``); runs land in one store under ``--work``, so a killed bench resumes.
``tapt-*`` modes first run ``python -m glee_core adapt`` once (the training texts only; its
folder is kept under ``--work`` and re-used), then train on the adapted backbone. Printed per
mode and method: test macro-F1 and tail F1 (mean ± sample std over seeds), trainable
parameters (what the run recorded), wall time per run and peak memory; and TAPT's held-out
masked-LM loss and ``[MASK]`` top-1 accuracy before and after. ``--out FILE`` also writes the
Markdown. Run by hand; ``tests/test_adapt.py`` runs it on a tiny model (one epoch, a few texts).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.baselines import dataset_spec  # noqa: E402
from bench.recipe_sweep import (  # noqa: E402
    common_arguments,
    cost_cells,
    print_table,
    run_child,
    spread,
    train_child,
)
from glee_core.models.modes import MODES as TUNING_MODES  # noqa: E402
from glee_core.runs.store import RunStore  # noqa: E402
from glee_core.runs.tables import count_text  # noqa: E402

# bench mode -> (--mode, adapted first?): every way of tuning, then two after TAPT
MODES = {
    **{name: (name, False) for name in TUNING_MODES},
    "tapt-frozen": ("frozen", True),
    "tapt-finetune": ("finetune", True),
}


def adapted_backbone(args, dataset: str) -> tuple[Path, dict, float]:
    """The TAPT backbone under ``--work`` (adapted once, then re-used), its record and the wall
    seconds it took (0 when re-used)."""
    out = args.work / f"tapt-{Path(dataset).stem}-{args.tapt_epochs}ep"
    wall = 0.0
    if not (out / "glee_adapted.json").is_file():
        command = [
            sys.executable,
            "-m",
            "glee_core",
            "adapt",
            "--dataset",
            dataset,
            "--model",
            args.model,
            "--out",
            str(out),
            "--epochs",
            str(args.tapt_epochs),
            "--data-dir",
            str(args.data_dir),
            *args.adapt_extra.split(),
        ]
        if args.max_length:
            command += ["--max-length", str(args.max_length)]
        _, wall, _ = run_child(command)
    return out, json.loads((out / "glee_adapted.json").read_text()), wall


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser, "/tmp/glee-tuning-modes", seeds="3")
    parser.add_argument("--methods", default="prompt,cls-relu-pt-ln,cls-tanh")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--tapt-epochs", type=int, default=10)
    parser.add_argument("--adapt-extra", default="", help="more adapt flags")
    args = parser.parse_args(argv)
    unknown = [m for m in args.modes.split(",") if m not in MODES]
    if unknown:
        parser.error(f"unknown mode(s) {unknown}; choose from {', '.join(MODES)}")
    args.work.mkdir(parents=True, exist_ok=True)
    dataset = dataset_spec(args.dataset, args.data_dir, args.work)
    store = RunStore(args.work / "runs")
    rows, lines = [], []
    for bench_mode in args.modes.split(","):
        mode, adapted = MODES[bench_mode]
        model = args.model
        if adapted:
            folder, record, wall = adapted_backbone(args, dataset)
            model = str(folder)
            before, after = record["held_out_before"], record["held_out_after"]
            lines.append(
                f"TAPT ({record['options']['epochs']} epochs, {record['steps']} steps, "
                f"{record['seconds']:.0f} s of training): held-out [MASK] top-1 "
                f"{before['mask_top1']:.1%} -> {after['mask_top1']:.1%}, masked-LM "
                f"loss {before['mlm_loss']:.3f} -> {after['mlm_loss']:.3f} "
                f"({after['masked_tokens']} masked tokens)"
            )
            print(lines[-1], flush=True)
        for method in args.methods.split(","):
            found = []
            for seed in args.seeds:
                result = train_child(
                    args,
                    dataset,
                    ["--mode", mode, "--method", method, "--seeds", str(seed), "--model", model],
                    store,
                )
                found.append(
                    {**result, "trainable": result["run"].record.tuning.trainable_parameters}
                )
                print(
                    f"{bench_mode} {method} seed {seed}: f1 {result['f1']:.4f} tail "
                    f"{result['tail_f1']:.4f} {' '.join(cost_cells([result]).values())}",
                    flush=True,
                )
            trainable = found[-1]["trainable"]
            rows.append(
                {
                    "dataset": args.dataset,
                    "mode": bench_mode,
                    "method": method,
                    "seeds": len(found),
                    "macro-F1": spread([r["f1"] for r in found]),
                    "tail F1": spread([r["tail_f1"] for r in found]),
                    "trainable": count_text(trainable) if trainable else "-",
                    **cost_cells(found),
                }
            )
    print_table(rows, args.out, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
