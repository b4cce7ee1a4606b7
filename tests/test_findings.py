"""The paper's findings, judged on runs of known numbers."""

import json

import pytest

from glee_core.runs.findings import check_findings, norm_slope
from glee_core.runs.paper_tables import findings_text
from tests.helpers.runs import record_only_run

COUNTS = {"a": 500, "b": 100, "c": 20, "d": 5}
HYPER = {
    "epochs": 10,
    "batch_size": 32,
    "lr": 1e-5,
    "max_length": 256,
    "seed": 1,
    "backbone": "finetune",
}
# F1, head F1, tail F1 (percent) per method: prompt beats CLS mostly on the tail, the remedies
# add little, w/ prompt = ∘ R, pt. LN closes most of the gap, w/ LN does not
NUMBERS = {
    "cls-tanh": (60, 90, 50),
    "cls-tanh-focal": (61, 90, 51),
    "cls-tanh-eta-norm": (64, 90, 55),
    "prompt": (75, 91, 70),
    "cls-relu": (62, 90, 52),
    "cls-relu-prompt": (62.5, 90, 53),
    "cls-relu-ln": (64, 90, 55),
    "cls-relu-pt-ln": (72, 91, 66),
}


def make_run(root, method, seed, f1, head, tail, norms, pretrained=True):
    folder = root / f"r52-{method}-s{seed}"
    config = {
        "run_id": folder.name,
        "dataset": {"id": "r52", "class_counts": COUNTS},
        "method": {"id": method},
        "seed": seed,
        "mode": "finetune",
        "model": {"name": "bert-base-uncased", "mlm_head_pretrained": pretrained},
        "hyperparameters": {**HYPER, "seed": seed},
    }
    jitter = 0.2 * seed  # two seeds, a little apart
    run = record_only_run(
        folder,
        config,
        {
            "acc": 0.9,
            "f1": (f1 + jitter) / 100,
            "head_f1": head / 100,
            "tail_f1": (tail + jitter) / 100,
        },
        list(COUNTS),
    )
    (folder / "weight_norms.json").write_text(json.dumps(norms))
    return run


def store(root, methods=NUMBERS, pretrained=True):
    steep = {"a": 4.0, "b": 3.0, "c": 2.0, "d": 1.0}  # norms grow with the class count
    flat = {"a": 2.0, "b": 2.1, "c": 1.9, "d": 2.0}
    return [
        make_run(root, m, seed, *NUMBERS[m], flat if m == "prompt" else steep, pretrained)
        for m in methods
        for seed in (1, 2)
    ]


def verdicts(findings):
    return {f.claim.split(":")[0].split(" (")[0]: f.verdict for f in findings}


def test_every_finding_is_judged_with_its_numbers(tmp_path):
    findings = check_findings(store(tmp_path))
    by_claim = {f.claim: f for f in findings}
    assert all(f.verdict in ("holds", "does not hold") for f in findings), findings
    first = next(f for c, f in by_claim.items() if c.startswith("Prompt-tuning beats"))
    assert first.verdict == "holds" and "75.3 vs 60.3" in first.evidence
    assert "paper AVG" in first.paper
    eta = next(f for c, f in by_claim.items() if "η-norm" in c)
    assert eta.verdict == "does not hold" and "+4.0" in eta.evidence  # a 4-point gain: not small
    focal = next(f for c, f in by_claim.items() if "focal" in c)
    assert focal.verdict == "holds"
    ln = next(f for c, f in by_claim.items() if "w/ LN closes" in c)
    pt_ln = next(f for c, f in by_claim.items() if "pt. LN closes" in c)
    assert ln.verdict == "does not hold" and pt_ln.verdict == "holds"
    assert "closes 77%" in pt_ln.evidence  # (72.3 - 62.3) / (75.3 - 62.3)
    norms = next(f for c, f in by_claim.items() if "weight norms" in c)
    assert norms.verdict == "holds"
    assert "[x]" in findings_text(findings) and "[ ]" in findings_text(findings)


def test_what_cannot_be_judged_says_why(tmp_path):
    only_table_2 = check_findings(store(tmp_path / "a", ["cls-tanh", "prompt"]))
    missing = [f for f in only_table_2 if f.verdict == "cannot judge"]
    assert missing and all("needs runs of" in f.evidence for f in missing)
    untrained = check_findings(store(tmp_path / "b", pretrained=False))
    prompt = next(f for f in untrained if f.claim.startswith("Prompt-tuning beats"))
    assert prompt.verdict == "cannot judge" and "no pretrained MLM head" in prompt.evidence
    assert "75.3 vs 60.3" in prompt.evidence  # the numbers are still shown
    relu = next(f for f in untrained if "w/ prompt" in f.claim)
    assert relu.verdict == "holds"  # needs no MLM head
    one_seed = [r for r in store(tmp_path / "c") if r.seed == 1]
    assert {f.verdict for f in check_findings(one_seed)} == {"cannot judge"}


def test_norm_slope_is_flat_for_equal_norms_and_positive_when_head_norms_grow(tmp_path):
    [flat, steep] = [
        make_run(tmp_path, m, 1, 50, 50, 50, norms)
        for m, norms in (
            ("prompt", {c: 1.0 for c in COUNTS}),
            ("cls-tanh", {"a": 4, "b": 3, "c": 2, "d": 1}),
        )
    ]
    assert norm_slope(flat) == pytest.approx(0.0)
    assert norm_slope(steep) > 0.5
