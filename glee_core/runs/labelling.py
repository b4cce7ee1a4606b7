"""A labelling session: the texts ``suggest`` chose from a pool and the answers a person gave
them in the app (this class, another class, none of these, skip), every answer written to disk
as it is given (a reload or a killed server loses nothing), and the labelled file they make
(``train --add``'s, and the app's download).

One session per dataset and pool in a store's :attr:`~glee_core.runs.store.RunStore.labelling_dir`
(``<dataset>-<pool digest>.json``); a new suggestion on the same pool keeps the answers already
given to texts it suggests again."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.errors import GleeError
from ..core.files import write_json_atomic
from ..data.pool import ADDED, NONE_OF_THESE
from .recommend import recommend
from .store import Run, RunStore, slug

__all__ = [  # what this module offers (the app's door, glee_core.studio, reads it)
    "BeforeAfter",
    "LabellingSession",
    "SKIPPED",
    "added_base",
    "before_after",
]

SKIPPED = "(skipped)"  # a suggestion passed over for now: asked again later, never added


@dataclass
class LabellingSession:
    """The suggestions (``rows``: pool_row, text, predicted, confidence, rank) of ``pool`` for
    ``dataset`` by ``strategy`` with the head of ``run_id``, and ``answers`` (pool_row as text
    -> a class, :data:`NONE_OF_THESE` or :data:`SKIPPED`)."""

    dataset: str
    pool: str  # the kept pool file
    pool_name: str  # the file's name as the user gave it
    strategy: str
    run_id: str
    rows: list[dict]
    answers: dict[str, str] = field(default_factory=dict)
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    pool_classes: list[dict] = field(default_factory=list)  # suggest's likely_in_pool

    @staticmethod
    def path_for(store: RunStore, dataset: str, pool: str) -> Path:
        return store.labelling_dir / f"{slug(dataset)}-{Path(pool).stem}.json"

    @classmethod
    def read(cls, path: str | Path) -> LabellingSession | None:
        """The session written at ``path``, or None (none yet, or damaged: set aside as
        ``.damaged`` so the next suggestion starts a clean one)."""
        path = Path(path)
        try:
            values = json.loads(path.read_text(encoding="utf-8"))
            session = cls(
                **{
                    k: values[k]
                    for k in ("dataset", "pool", "pool_name", "strategy", "run_id", "rows")
                },
                answers=dict(values.get("answers") or {}),
                created=values.get("created", ""),
                pool_classes=list(values.get("pool_classes") or []),
            )
            if not all(
                isinstance(r, dict) and {"pool_row", "text"} <= set(r) for r in session.rows
            ):
                raise ValueError("rows")
            return session
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            path.replace(path.with_name(path.name + ".damaged"))
            return None

    def write(self, store: RunStore) -> Path:
        path = self.path_for(store, self.dataset, self.pool)
        write_json_atomic(path, asdict(self))
        return path

    def answer(self, store: RunStore, pool_row: int, label: str, classes: list[str]) -> None:
        """Keep ``label`` (a class, :data:`NONE_OF_THESE` or :data:`SKIPPED`) for the
        suggestion of ``pool_row``, on disk at once."""
        if label not in classes and label not in (NONE_OF_THESE, SKIPPED):
            raise GleeError(f"{label!r} is not a class of {self.dataset}")
        self.answers[str(int(pool_row))] = label
        self.write(store)

    def labelled(self) -> pd.DataFrame:
        """The suggestions with their answers, as ``suggest``'s CSV (``label`` filled where
        answered with a class or none of these; empty where skipped or not yet answered)."""
        frame = pd.DataFrame(self.rows)
        frame["label"] = [self.answers.get(str(int(r)), "") for r in frame["pool_row"]]
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
    texts."""

    base: str
    added: str
    method_before: str
    method_after: str
    rows: list[dict]
    tail_f1: tuple[float, float]
    f1: tuple[float, float]


def added_base(dataset_id: str) -> str:
    """The dataset an ``+added-N-<digest>`` variant added texts to (itself when none)."""
    return dataset_id.split(ADDED, 1)[0]


def _class_f1(runs: list[Run]) -> tuple[str, dict[str, float]] | None:
    """The recommended candidate of ``runs`` and its per-class test F1 (mean over seeds)."""
    rec = recommend(runs)
    if rec is None:
        return None
    chosen = [r for r in runs if r.setting == rec.chosen.setting and r.method == rec.chosen.method]
    classes = chosen[0].metrics.per_class
    return rec.chosen.method, {
        c: 100
        * float(np.mean([r.metrics.per_class[c].f1 for r in chosen if c in r.metrics.per_class]))
        for c in classes
    }


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
    before, after = _class_f1(base_runs), _class_f1(added_runs)
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
    )
