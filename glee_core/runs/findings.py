"""The paper's findings as a checklist, judged on our runs with the numbers that decide them.

Each :class:`Finding` states one claim of the paper (Sections 4-5), the paper's own numbers for it
(from its Tables 2 and 3, the AVG column), and what our runs say: ``holds``, ``does not hold``,
or ``cannot judge`` with the reason (a method not run, an MLM head that was never pretrained, a
single seed) - never a guess. ``reproduce`` prints the checklist under its table and the Results
page's paper tab shows it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from .paper import paper_cells
from .store import Run
from .tables import aggregate

SMALL_GAIN = 2.0  # F1 points: "small or no gain" / "about the same", the paper's reading
CLOSES_MOST = 0.5  # share of the CLS -> prompt F1 gap a head must close to "close most of it"


@dataclass
class Finding:
    claim: str
    paper: str  # the paper's numbers and verdict
    verdict: str  # "holds", "does not hold" or "cannot judge"
    evidence: str  # our numbers, or why they cannot decide

    def to_dict(self) -> dict:
        return asdict(self)


def _paper_avg(table: int, method: str, metric: str) -> float:
    cells = paper_cells()
    row = cells[
        (cells["table"] == table)
        & (cells["dataset"] == "avg")
        & (cells["method"] == method)
        & (cells["metric"] == metric)
    ]
    return float(row["mean"].iloc[0]) if len(row) else float("nan")


class _Ours:
    """Our runs' means per method (averaged over datasets, as the paper's AVG), seeds, caveats."""

    def __init__(self, runs: list[Run]):
        self.runs = runs
        summary = aggregate(runs)
        self.means = summary.groupby("method")[
            [f"{k}_mean" for k in ("acc", "f1", "head_f1", "tail_f1")]
        ].mean()
        self.seeds = summary.groupby("method")["seeds"].min()
        self.untrained_head = sorted(
            {r.record.model.name for r in runs if not r.record.model.mlm_head_pretrained}
        )

    def missing(self, *methods: str) -> list[str]:
        return [m for m in methods if m not in self.means.index]

    def f1(self, method: str, metric: str = "f1") -> float:
        return float(self.means.loc[method, f"{metric}_mean"])

    def caveat(self, methods: tuple[str, ...], mlm: bool) -> str | None:
        """Why our numbers cannot decide (None when they can)."""
        missing = self.missing(*methods)
        if missing:
            return f"needs runs of {', '.join(missing)}"
        if mlm and self.untrained_head:
            return (
                f"the backbone {', '.join(self.untrained_head)} has no pretrained MLM head, "
                "which prompt-tuning and pt. LN rely on"
            )
        if int(self.seeds[list(methods)].min()) < 2:
            return "one seed: a difference cannot be told from seed noise"
        return None


@dataclass(frozen=True)
class _Claim:
    """One of the paper's findings: what it says, what the paper measured, the methods it is
    about, and whether it reads the MLM head (a backbone whose head is untrained says so)."""

    text: str
    paper: str
    methods: tuple[str, ...]
    mlm: bool


def _judge(ours: _Ours, claim: _Claim, evidence, decide, undecidable=None) -> Finding:
    """``evidence()`` -> text and ``decide()`` -> bool run only when ``claim``'s methods were
    run; ``undecidable()`` -> a reason when the numbers leave nothing to judge."""
    methods, mlm, paper = claim.methods, claim.mlm, claim.paper
    claim = claim.text
    if ours.missing(*methods):
        return Finding(claim, paper, "cannot judge", ours.caveat(methods, mlm))
    why = ours.caveat(methods, mlm) or (undecidable() if undecidable else None)
    text = evidence()
    if why:
        return Finding(claim, paper, "cannot judge", f"{text} ({why})")
    return Finding(claim, paper, "holds" if decide() else "does not hold", text)


def norm_slope(run: Run) -> float:
    """How much a run's per-class weight norms grow with the class's training count: the slope of
    ‖w_c‖ / mean ‖w‖ against log10(count). Near 0: flat across head and tail (prompt-tuning, in
    the paper's Figure 3); positive: head classes get larger norms."""
    counts = run.record.dataset.class_counts
    names = [c for c in counts if c in run.weight_norms and counts[c] > 0]
    norms = np.array([run.weight_norms[c] for c in names])
    if len(names) < 3 or norms.mean() == 0:
        return float("nan")
    x = np.log10([counts[c] for c in names])
    return float(np.polyfit(x, norms / norms.mean(), 1)[0])


def check_findings(runs: list[Run]) -> list[Finding]:
    """The paper's findings on ``runs`` (one setting; averaged over their datasets)."""
    ours = _Ours(runs)
    return [
        _prompt_beats_cls(ours),
        *_remedies(ours),
        _prompt_input(ours),
        *_ln_closes(ours),
        _flatter_norms(ours, runs),
    ]


def _prompt_beats_cls(ours: _Ours) -> Finding:
    return _judge(
        ours,
        _Claim(
            "Prompt-tuning beats CLS-tuning (∘ T) on macro-F1, and mostly on the tail",
            f"paper AVG: F1 {_paper_avg(2, 'prompt', 'f1'):.1f} vs "
            f"{_paper_avg(2, 'cls-tanh', 'f1'):.1f}; Tail F1 "
            f"{_paper_avg(2, 'prompt', 'tail_f1'):.1f} vs "
            f"{_paper_avg(2, 'cls-tanh', 'tail_f1'):.1f}, "
            f"Head F1 {_paper_avg(2, 'prompt', 'head_f1'):.1f} vs "
            f"{_paper_avg(2, 'cls-tanh', 'head_f1'):.1f}: holds",
            ("prompt", "cls-tanh"),
            True,
        ),
        lambda: (
            f"ours: F1 {ours.f1('prompt'):.1f} vs {ours.f1('cls-tanh'):.1f}; tail gain "
            f"{ours.f1('prompt', 'tail_f1') - ours.f1('cls-tanh', 'tail_f1'):+.1f}, head "
            f"gain {ours.f1('prompt', 'head_f1') - ours.f1('cls-tanh', 'head_f1'):+.1f}"
        ),
        lambda: (
            ours.f1("prompt") > ours.f1("cls-tanh")
            and ours.f1("prompt", "tail_f1") - ours.f1("cls-tanh", "tail_f1")
            > ours.f1("prompt", "head_f1") - ours.f1("cls-tanh", "head_f1")
        ),
    )


def _remedies(ours: _Ours) -> list[Finding]:
    gap_paper = _paper_avg(2, "prompt", "f1") - _paper_avg(2, "cls-tanh", "f1")
    findings = []
    for remedy, name in (("cls-tanh-focal", "focal loss"), ("cls-tanh-eta-norm", "η-norm")):
        findings.append(
            _judge(
                ours,
                _Claim(
                    f"CLS-tuning w/ {name} brings small or no gain (under {SMALL_GAIN:g} F1)",
                    f"paper AVG: F1 {_paper_avg(2, remedy, 'f1'):.1f} vs "
                    f"{_paper_avg(2, 'cls-tanh', 'f1'):.1f} (gain "
                    f"{_paper_avg(2, remedy, 'f1') - _paper_avg(2, 'cls-tanh', 'f1'):+.1f}, "
                    "against "
                    f"{gap_paper:+.1f} for prompt-tuning): holds",
                    (remedy, "cls-tanh"),
                    False,
                ),
                lambda r=remedy: f"ours: F1 gain {ours.f1(r) - ours.f1('cls-tanh'):+.1f}",
                lambda r=remedy: ours.f1(r) - ours.f1("cls-tanh") < SMALL_GAIN,
            )
        )
    return findings


def _prompt_input(ours: _Ours) -> Finding:
    return _judge(
        ours,
        _Claim(
            f"The prompt input alone does not help: CLS ∘ R w/ prompt ≈ CLS ∘ R (within "
            f"{SMALL_GAIN:g} F1)",
            f"paper AVG: F1 {_paper_avg(3, 'cls-relu-prompt', 'f1'):.1f} vs "
            f"{_paper_avg(3, 'cls-relu', 'f1'):.1f}: holds",
            ("cls-relu-prompt", "cls-relu"),
            False,
        ),
        lambda: f"ours: F1 {ours.f1('cls-relu-prompt'):.1f} vs {ours.f1('cls-relu'):.1f}",
        lambda: abs(ours.f1("cls-relu-prompt") - ours.f1("cls-relu")) < SMALL_GAIN,
    )


def _ln_closes(ours: _Ours) -> list[Finding]:
    findings = []
    for head, name, mlm in (("cls-relu-ln", "w/ LN", False), ("cls-relu-pt-ln", "w/ pt. LN", True)):
        paper_gap = _paper_avg(3, "prompt", "f1") - _paper_avg(3, "cls-relu", "f1")
        paper_closed = (_paper_avg(3, head, "f1") - _paper_avg(3, "cls-relu", "f1")) / paper_gap

        def closed(h=head):
            gap = ours.f1("prompt") - ours.f1("cls-relu")
            return (ours.f1(h) - ours.f1("cls-relu")) / gap if gap > 0 else float("nan")

        findings.append(
            _judge(
                ours,
                _Claim(
                    f"CLS ∘ R {name} closes most (≥ {CLOSES_MOST:.0%}) of the F1 gap to "
                    "prompt-tuning",
                    f"paper AVG: closes {paper_closed:.0%} of a {paper_gap:.1f}-point gap: "
                    + ("holds" if paper_closed >= CLOSES_MOST else "does not hold"),
                    (head, "cls-relu", "prompt"),
                    mlm,
                ),
                lambda h=head: (
                    f"ours: CLS ∘ R {ours.f1('cls-relu'):.1f}, {h} {ours.f1(h):.1f}, "
                    f"prompt {ours.f1('prompt'):.1f}"
                    + (f": closes {closed(h):.0%}" if closed(h) == closed(h) else "")
                ),
                lambda h=head: closed(h) >= CLOSES_MOST,
                lambda h=head: (
                    None
                    if closed(h) == closed(h)
                    else "no gap to close: prompt-tuning is not ahead of CLS ∘ R here"
                ),
            )
        )

    return findings


def _flatter_norms(ours: _Ours, runs: list[Run]) -> Finding:
    def slopes(method: str) -> float:
        return float(np.nanmean([norm_slope(r) for r in runs if r.method == method]))

    claim = (
        "Prompt-tuning's per-class weight norms are flatter from head to tail than "
        "CLS-tuning's (slope of ‖w_c‖/mean against log10 training count)"
    )
    paper = "paper Figure 3: flatter for prompt-tuning: holds (no number printed)"
    if not ours.missing("prompt", "cls-tanh") and np.isnan(slopes("prompt") + slopes("cls-tanh")):
        return Finding(
            claim, paper, "cannot judge", "fewer than 3 classes with training examples: no slope"
        )
    return _judge(
        ours,
        _Claim(claim, paper, ("prompt", "cls-tanh"), True),
        lambda: (
            f"ours: slope {slopes('prompt'):+.3f} (prompt) vs {slopes('cls-tanh'):+.3f} (CLS ∘ T)"
        ),
        lambda: abs(slopes("prompt")) < abs(slopes("cls-tanh")),
    )


def findings_frame(findings: list[Finding]) -> pd.DataFrame:
    return pd.DataFrame(
        [f.to_dict() for f in findings], columns=["claim", "paper", "verdict", "evidence"]
    )
