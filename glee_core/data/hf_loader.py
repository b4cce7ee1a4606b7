"""A Hugging Face dataset as a :class:`~glee_core.data.datasets.LongTailDataset`:
``hf:NAME[:CONFIG]`` through ``datasets.load_dataset`` (NAME may be a local folder), its own
splits kept (a missing dev or test split held out of train, stratified).
:data:`~glee_core.data.sources.SOURCES` names its loader as ``"module:function"``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..core.errors import GleeError
from ..core.hub import hub_reachable
from .catalog import DEFAULT_TEMPLATE, DEFAULT_THRESHOLD
from .csvfile import LABEL_COLUMN_NAMES, TEXT_COLUMN_NAMES, Columns, pick_column
from .datasets import SPLITS, LongTailDataset, _frame, _from_labelled_frames
from .splits import stratified_holdout


def load_hf_dataset(
    spec: str, columns: Columns = Columns(), threshold: float | None = None
) -> LongTailDataset:
    """``hf:NAME[:CONFIG]`` through ``datasets.load_dataset`` (NAME may be a local folder); the
    ``columns`` named, else found by their names."""
    text_column, label_column, text_b_column = columns.text, columns.label, columns.text_b
    try:
        import datasets as hf_datasets  # noqa: PLC0415 (heavy: only for hf: specs)
    except ImportError:
        raise GleeError("hf: datasets need the 'datasets' package: pip install datasets") from None
    name, _, config = spec.partition(":")
    if not Path(name).expanduser().is_dir() and not hub_reachable():
        raise GleeError(
            f"cannot load Hugging Face dataset {spec!r}: it is not a local folder and "
            "the hub is unreachable from this machine; use csv:PATH or a local folder"
        )
    try:
        loaded = hf_datasets.load_dataset(name, config or None)
    except Exception as exc:  # the hub raises many types; all mean "cannot load this"
        raise GleeError(
            f"cannot load Hugging Face dataset {spec!r}: {type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''} (is the hub reachable? "
            "offline, use a local folder or csv:PATH)"
        ) from None
    frames, names = {}, None
    for split_name, part in loaded.items():
        key = {"validation": "dev", "valid": "dev"}.get(split_name, split_name)
        if key not in SPLITS:
            continue
        feature = part.features.get(label_column or "label")
        if names is None and getattr(feature, "names", None):
            names = list(feature.names)
        frames[key] = part.to_pandas()
    if "train" not in frames:
        raise GleeError(f"{spec}: has no 'train' split (splits: {list(loaded)})")
    columns = [str(c) for c in frames["train"].columns]
    text_col = pick_column(columns, text_column, TEXT_COLUMN_NAMES, "text", spec)
    label_col = pick_column(columns, label_column, LABEL_COLUMN_NAMES, "label", spec)
    splits = {}
    for key, frame in frames.items():
        labels = frame[label_col]
        if names is not None:
            labels = labels.map(lambda i: names[int(i)] if int(i) >= 0 else "")
        splits[key] = _frame(
            frame[text_col],
            labels.astype(str),
            frame[text_b_column] if text_b_column else None,
            rows=np.arange(len(frame)),
        )
        splits[key] = splits[key][
            (splits[key]["text"].str.strip() != "") & (splits[key]["label"] != "")
        ]
    warnings: list[str] = []
    if "test" not in splits:
        splits["train"], splits["test"] = stratified_holdout(splits["train"], 0.2)
        warnings.append("no test split: 20% of train (stratified, seed 42) is used as test")
    if "dev" not in splits:
        splits["train"], splits["dev"] = stratified_holdout(splits["train"], 0.1)
        warnings.append("no dev split: 10% of train (stratified, seed 42) is used as dev")
    return _from_labelled_frames(
        f"hf:{spec}",
        splits,
        template=DEFAULT_TEMPLATE,
        verbalizer=None,
        threshold=threshold or DEFAULT_THRESHOLD,
        max_length=128,
        warnings=warnings,
    )


# the loader of sources.SOURCES' hf: (its signature: see loaders.csv_source)
def hf_source(rest, threshold, columns: Columns, uploads_dir, keep_rare) -> LongTailDataset:
    return load_hf_dataset(rest, columns, threshold)  # the hub's own splits
