"""A labelling session: the texts ``suggest`` chose from a pool and the answers a person gave
them in the app (this class, another class, none of these, skip), and the labelled file they
make (``train --add``'s, and the app's download).

One session per dataset and pool in a store's :attr:`~glee_core.runs.store.RunStore.labelling_dir`:
``<dataset>-<pool stem>.json`` (the suggestions, rewritten whole by a new suggestion) and
``<dataset>-<pool stem>.answers.jsonl`` (every answer, one line each, appended as it is given and
never rewritten). Two tabs, two browsers, a reload or a killed server keep every answer: the last
answer for a row wins, and each says who gave it, so a page can say when another tab answered.
A new suggestion on the same pool keeps the texts answered before (with their answers) besides
its own; a skip is asked again after it."""

from __future__ import annotations

import json
import numbers
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.errors import GleeError
from ..core.files import append_line, write_json_atomic
from ..runs.recommend import recommend
from ..runs.store import Run, RunStore, slug
from .files import ADDED, NONE_OF_THESE

SKIPPED = "(skipped)"  # a suggestion passed over for now: asked again later, never added
ANSWERS = ".answers.jsonl"  # a session's answers log, beside it


def _row_key(value) -> str:
    """A suggestion's pool row as the answers name it; ValueError for one that is not a row."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real | str):
        raise ValueError(f"pool_row {value!r}")
    number = float(value)
    if number != int(number) or number < 0:
        raise ValueError(f"pool_row {value!r}")
    return str(int(number))


def _check_row(row) -> dict:
    """A suggestion as a session file holds it, its fields checked (ValueError otherwise)."""
    if not isinstance(row, dict) or not {"pool_row", "text"} <= set(row):
        raise ValueError("a suggestion without its pool_row and text")
    _row_key(row["pool_row"])
    if not isinstance(row["text"], str) or not isinstance(row.get("predicted", ""), str):
        raise ValueError("a suggestion whose text or predicted class is not text")
    float(row.get("confidence", 0.0))
    return row


@dataclass
class LabellingSession:
    """The suggestions (``rows``: pool_row, text, predicted, confidence, rank) of ``pool`` for
    ``dataset`` by ``strategy`` with the head of ``run_id``, and ``answers`` (pool_row as text
    -> a class, :data:`NONE_OF_THESE` or :data:`SKIPPED`: the last one given, folded from the
    answers log) with who gave each (``answered_by``: the id a tab passed)."""

    dataset: str
    pool: str  # the kept pool file
    pool_name: str  # the file's name as the user gave it
    strategy: str
    run_id: str
    rows: list[dict]
    answers: dict[str, str] = field(default_factory=dict)
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    pool_classes: list[dict] = field(default_factory=list)  # suggest's likely_in_pool
    suggested_at: float = field(default_factory=time.time)  # skips before it are asked again
    answered_by: dict[str, str] = field(default_factory=dict)
    earlier: dict[str, str] = field(default_factory=dict)  # answers a file held before the log

    @staticmethod
    def path_for(store: RunStore, dataset: str, pool: str) -> Path:
        return store.labelling_dir / f"{slug(dataset)}-{Path(pool).stem}.json"

    @staticmethod
    def answers_path(path: str | Path) -> Path:
        """The answers log of the session written at ``path``."""
        path = Path(path)
        return path.with_name(path.stem + ANSWERS)

    @classmethod
    def read(cls, path: str | Path) -> LabellingSession | None:
        """The session written at ``path`` with its answers, or None (none yet, or damaged:
        set aside as ``.damaged`` so the next suggestion starts a clean one; its answers log
        stays). A line of the answers log that cannot be read (a torn write) is passed over."""
        path = Path(path)
        try:
            values = json.loads(path.read_text(encoding="utf-8"))
            rows = [_check_row(r) for r in values["rows"]]
            earlier = {_row_key(k): str(v) for k, v in dict(values.get("answers") or {}).items()}
            session = cls(
                **{k: str(values[k]) for k in ("dataset", "pool", "pool_name", "strategy")},
                run_id=str(values["run_id"]),
                rows=rows,
                created=str(values.get("created", "")),
                pool_classes=[r for r in values.get("pool_classes") or [] if isinstance(r, dict)],
                suggested_at=float(values.get("suggested_at", 0.0)),
                earlier=earlier,
            )
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            path.replace(path.with_name(path.name + ".damaged"))
            return None
        session._fold(cls.answers_path(path))
        return session

    def _fold(self, log: Path) -> None:
        """The answers: those the file held before the log, then the log's, the last for a row
        winning; a skip given before the newest suggestion is asked again."""
        rows = {_row_key(r["pool_row"]) for r in self.rows}
        answers = {k: v for k, v in self.earlier.items() if k in rows}
        by = dict.fromkeys(answers, "")
        try:
            lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            lines = []
        for line in lines:
            try:
                entry = json.loads(line)
                key, label = _row_key(entry["row"]), entry["label"]
                at = float(entry.get("at", 0.0))
            except (ValueError, KeyError, TypeError):
                continue  # a torn or hand-edited line: the others stand
            if key not in rows or not isinstance(label, str):
                continue
            if label == SKIPPED and at < self.suggested_at:
                answers.pop(key, None)
                continue
            answers[key], by[key] = label, str(entry.get("by", ""))
        self.answers, self.answered_by = answers, by

    def write(self, store: RunStore) -> Path:
        """The suggestions, written whole (the answers stay in their log)."""
        path = self.path_for(store, self.dataset, self.pool)
        values = asdict(self)
        for key in ("answers", "answered_by", "earlier"):
            values.pop(key)
        values["answers"] = self.earlier
        write_json_atomic(path, values)
        return path

    @classmethod
    def suggested(
        cls, store: RunStore, dataset: str, pool: Path, pool_name: str, found
    ) -> LabellingSession:
        """The session of a new suggestion (``found``: ``glee_core.pool.suggest``'s
        ``Suggestions``) written over the dataset and pool's last one: its rows, and the texts
        answered before that it did not suggest again (a class or none of these), so no answer
        is lost."""
        rows = [
            {**row, "pool_row": int(row["pool_row"])}
            for row in found.frame.drop(columns=["label", "strategy"]).to_dict("records")
        ]
        path = cls.path_for(store, dataset, str(pool))
        before = cls.read(path)
        earlier: dict[str, str] = {}
        if before is not None:
            new = {_row_key(r["pool_row"]) for r in rows}
            rows += [
                r
                for r in before.rows
                if _row_key(r["pool_row"]) not in new
                and before.answers.get(_row_key(r["pool_row"]), SKIPPED) != SKIPPED
            ]
            earlier = before.earlier
        session = cls(
            dataset,
            str(pool),
            pool_name,
            found.strategy,
            found.run_id,
            rows,
            pool_classes=found.pool_classes,
            earlier=earlier,
        )
        session.write(store)
        return cls.read(path) or session

    def answer(
        self, store: RunStore, pool_row, label: str, classes: list[str], by: str = ""
    ) -> None:
        """Keep ``label`` (a class, :data:`NONE_OF_THESE` or :data:`SKIPPED`) for the
        suggestion of ``pool_row``, appended to the answers log at once (``by``: who gave it,
        a tab's id)."""
        if label not in classes and label not in (NONE_OF_THESE, SKIPPED):
            raise GleeError(f"{label!r} is not a class of {self.dataset}")
        try:
            key = _row_key(pool_row)
        except ValueError:
            key = ""
        if key not in {_row_key(r["pool_row"]) for r in self.rows}:
            raise GleeError(
                f"pool row {pool_row!r} is not one of these suggestions (a newer suggestion "
                "replaced them): reload the page"
            )
        path = self.answers_path(self.path_for(store, self.dataset, self.pool))
        entry = {"row": key, "label": label, "at": time.time(), "by": by}
        append_line(path, json.dumps(entry, ensure_ascii=False))
        self.answers[key], self.answered_by[key] = label, by

    def labelled(self) -> pd.DataFrame:
        """The suggestions with their answers, as ``suggest``'s CSV (``label`` filled where
        answered with a class or none of these; empty where skipped or not yet answered)."""
        frame = pd.DataFrame(self.rows)
        frame["label"] = [self.answers.get(_row_key(r), "") for r in frame["pool_row"]]
        frame.loc[frame["label"] == SKIPPED, "label"] = ""
        return frame

    def likely(self) -> dict[str, str]:
        """For the label budget's table: each class's texts the pool likely holds, in words."""
        return {
            row["class"]: (
                f"~{row['likely']} ({row['predicted']} predicted, "
                f"{row['dev_precision']:.0%} precise on dev)"
                if row.get("likely") is not None
                else f"{row['predicted']} predicted (precision on dev unknown)"
            )
            for row in self.pool_classes
            if isinstance(row, dict) and "class" in row
        }

    @staticmethod
    def latest(store: RunStore, dataset: str) -> LabellingSession | None:
        """The dataset's newest labelling session in ``store``, or None."""
        paths = (
            sorted(
                store.labelling_dir.glob(f"{slug(dataset)}-*.json"), key=lambda p: p.stat().st_mtime
            )
            if store.labelling_dir.is_dir()
            else []
        )
        found = [
            s
            for p in reversed(paths)
            if (s := LabellingSession.read(p)) is not None and s.dataset == dataset
        ]
        return found[0] if found else None

    @property
    def to_add(self) -> int:
        """The answers that add a text (a class)."""
        return sum(label not in (NONE_OF_THESE, SKIPPED) for label in self.answers.values())


@dataclass
class BeforeAfter:
    """What labelled pool texts did: per class (``rows``: class, group, texts before, added,
    F1 before, F1 after; the group is the dataset's own, before the texts were added) and over
    the tail and every class, the recommended candidate of each dataset on the same test
    texts; the tail F1's spread over seeds where a side has more than one."""

    base: str
    added: str
    method_before: str
    method_after: str
    rows: list[dict]
    tail_f1: tuple[float, float]
    f1: tuple[float, float]
    tail_spread: tuple[float | None, float | None] = (None, None)  # over seeds, before / after
    seeds: tuple[int, int] = (1, 1)


def added_base(dataset_id: str) -> str:
    """The dataset an ``+added-N-<digest>`` variant added texts to (itself when none)."""
    return dataset_id.split(ADDED, 1)[0]


def _class_f1(runs: list[Run], tail: list[str]) -> tuple[str, dict[str, float], list] | None:
    """Home's answer on ``runs``: the recommended candidate, or where the best few are within
    noise their probabilities averaged (issue #81), as Home answers and exports; its name, its
    per-class test F1 (mean over seeds) and, a seed each, its tail F1 over ``tail`` (the classes
    present)."""
    rec = recommend(runs)
    if rec is None:
        return None
    if rec.ensemble is not None:  # named as the recommendation names them: head (pooling)
        chosen = list(rec.ensemble.answers)
        name = "the average of " + " + ".join(
            f"{p.method} ({p.pooling})" for p in rec.ensemble.members
        )
    else:
        chosen = [
            r for r in runs if r.setting == rec.chosen.setting and r.method == rec.chosen.method
        ]
        name = rec.chosen.method
    classes = chosen[0].metrics.per_class
    per_seed = [
        100 * float(np.mean([r.metrics.per_class[c].f1 for c in tail if c in r.metrics.per_class]))
        for r in chosen
        if any(c in r.metrics.per_class for c in tail)
    ]
    return (
        name,
        {
            c: 100
            * float(
                np.mean([r.metrics.per_class[c].f1 for r in chosen if c in r.metrics.per_class])
            )
            for c in classes
        },
        per_seed,
    )


def before_after(
    base_runs: list[Run],
    added_runs: list[Run],
    counts: dict[str, int],
    added: dict[str, int],
    tail: list[str],
) -> BeforeAfter | None:
    """The before and after of adding labelled texts (``added``: a class's texts added;
    ``counts``: its training texts before; ``tail``: the tail classes before), from each
    dataset's recommended candidate; None until both have one."""
    before, after = _class_f1(base_runs, tail), _class_f1(added_runs, tail)
    if before is None or after is None:
        return None
    rows = [
        {
            "class": c,
            "group": "tail" if c in tail else "head",
            "texts": counts.get(c, 0),
            "added": added.get(c, 0),
            "F1 before": round(before[1].get(c, np.nan), 1),
            "F1 after": round(after[1].get(c, np.nan), 1),
        }
        for c in counts
    ]
    frame = pd.DataFrame(rows)
    tails = frame[frame["group"] == "tail"]

    def mean(column: str, part: pd.DataFrame) -> float:
        return float(part[column].mean()) if len(part) else float("nan")

    return BeforeAfter(
        base_runs[0].dataset,
        added_runs[0].dataset,
        before[0],
        after[0],
        rows,
        (mean("F1 before", tails), mean("F1 after", tails)),
        (mean("F1 before", frame), mean("F1 after", frame)),
        (_spread(before[2]), _spread(after[2])),
        (len(before[2]), len(after[2])),
    )


def _spread(values: list[float]) -> float | None:
    """The sample standard deviation over seeds (None with fewer than two)."""
    return float(np.std(values, ddof=1)) if len(values) > 1 else None


BACKTEST = Path(__file__).with_name("backtest.json")  # bench/pool_backtest.py --reference


@dataclass(frozen=True)
class RandomShare:
    """What the backtest measured of random texts against ``auto``'s: the tail-F1 gain random
    texts gave as a share of the gain ``auto``'s gave (``share``), summed over its datasets
    (``sets``) at the budget nearest the texts added (``added``, in rounds of 50, 10% of every
    class labelled), each the mean over ``seeds``; ``command``: what measured it; ``strategy``:
    the one ``auto`` stood for there (the ratio is that strategy's)."""

    share: float
    added: int
    sets: tuple[str, ...]
    seeds: int
    command: str
    strategy: str

    def expected(self, gain: float) -> float:
        """What random texts would have been expected to give where ``auto``'s gave ``gain``."""
        return gain * self.share


def random_share(added: int, path: Path = BACKTEST) -> RandomShare | None:
    """The backtest's :class:`RandomShare` nearest ``added`` texts; None where it has none or
    where ``auto`` gained nothing there (no share to take)."""
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
        cells = [
            c
            for c in values["cells"]
            if c["rounds"]
            and abs(c["labelled"] - 0.1) < 1e-9
            and c["strategy"] in ("auto", "random")
        ]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not cells:
        return None
    budget = min({c["added"] for c in cells}, key=lambda b: (abs(b - added), b))
    here = [c for c in cells if c["added"] == budget]
    gains = {
        side: sum(c["tail_f1_gain"] for c in here if c["strategy"] == side)
        for side in ("auto", "random")
    }
    if gains["auto"] <= 0:
        return None
    return RandomShare(
        share=gains["random"] / gains["auto"],
        added=budget,
        sets=tuple(sorted({c["dataset"] for c in here})),
        seeds=min(c["seeds"] for c in here),
        command=values.get("command", ""),
        strategy=values.get("auto", "rare-margin"),  # a file from before it said: auto's then
    )
