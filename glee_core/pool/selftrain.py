"""A dataset with pseudo-labels from the user's unlabelled texts (``train --pool FILE --self-train
auto|yes``): pseudo-labels matched to the classes' shares (:mod:`glee_core.pool.pseudo`) on
the frozen backbone's features, the pool texts already in the data left out (exactly or as near-
duplicates, as ``suggest`` does), and the kept texts added to the training split as a variant
whose id ends in ``+pseudo-N-<digest>`` (its runs apart from the data's own, as ``+added-``
does). Whatever is trained on it (quick mode, fine-tuning) trains on the labelled and the
pseudo-labelled texts; its record's warnings say how many pseudo-labels each class got."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from ..core.errors import GleeError
from ..core.events import Note, ProgressFn
from ..data.datasets import LongTailDataset
from ..models.backbone import trained_pooling
from ..models.features import Encoder, FeatureInputs, cached_features
from .files import PSEUDO, append_rows
from .pseudo import HARM, helps, pseudo_labels
from .suggest import in_the_data, pool_features


def _pseudo_labels_help(train, states, k: int, progress: ProgressFn) -> bool:
    """``auto``: does cross-validation on the labelled texts say the pseudo-labels help (or
    cost at most :data:`HARM` points)? Said either way."""
    useful, without, with_pseudo = helps(train.hidden, train.labels, states, k)
    verdict = (
        f"cross-validation on the labelled texts: macro-F1 {without:.1f} without the "
        f"pseudo-labels, {with_pseudo:.1f} with them; auto leaves them out only when "
        f"they cost more than {HARM:g} points"
    )
    if not useful:
        progress(
            Note(
                message=f"self-training left out ({verdict}); the runs train on the "
                "labelled texts alone"
            )
        )
        return False
    progress(Note(message=f"self-training kept: {verdict}"))
    return True


def _with_pseudo_labels(dataset: LongTailDataset, texts, found, pooling: str):
    """The dataset with the kept pseudo-labels in its training split (a ``+pseudo-`` variant),
    and the sentence that says what the rule kept and why."""
    added = pd.DataFrame({"text": texts[found.rows], "text_b": "", "label": found.labels})
    train_split, ending = append_rows(dataset.splits["train"], added, PSEUDO)
    counts = ", ".join(
        f"{dataset.classes[c]} {n}"
        for c, n in sorted(found.per_class.items(), key=lambda kv: -kv[1])
    )
    said = (
        f"self-training kept {len(found.rows)} of {len(texts)} pool texts "
        f"({len(found.rows) / len(texts):.0%}) as pseudo-labels: each class keeps the pool "
        "texts predicted as it, its most confident first, up to its share of the labelled "
        "texts times the pool's size; the caps add up to the pool, so where the predictions "
        "follow the classes' shares most of it is kept, and a class predicted more often (the "
        "class-balanced probe predicts the rare ones often) loses its least sure (the "
        f"class-balanced probe on the frozen {pooling}-pooled features, {found.generations} "
        f"generation(s)): {counts}"
    )
    variant = replace(
        dataset,
        id=f"{dataset.id}{ending}",
        splits={**dataset.splits, "train": train_split},
        warnings=[*dataset.warnings, said],
        _fingerprint=None,
    )
    return variant, said


def self_trained(
    dataset: LongTailDataset,
    pool: pd.DataFrame,
    encoder: Encoder,
    how: str,
    progress: ProgressFn | None = None,
) -> LongTailDataset:
    """``dataset`` with the pseudo-labels of ``pool`` in its training split (``how``:
    ``yes``, or ``auto``: only where cross-validation on the labelled texts says they help;
    the dataset as it was otherwise, with a note saying why), on ``encoder``'s features (the
    launch's backbone, its store's feature cache)."""
    progress = progress or (lambda event: None)
    if how not in ("yes", "auto"):
        return dataset
    pooling = trained_pooling(encoder.backbone.name) or "mean"
    inputs = FeatureInputs("plain", dataset.max_length, pooling)
    features = cached_features(dataset, encoder, inputs, progress)
    space = encoder.space("plain", dataset.max_length, dataset.template)
    states = pool_features(pool, space, encoder, progress)[pooling]
    fresh = ~in_the_data(dataset, pool, states, features)
    if not fresh.any():
        raise GleeError(
            "every pool text is already in the dataset (exactly or as a "
            "near-duplicate): nothing to learn from"
        )
    texts, states = pool["text"].to_numpy()[fresh], states[fresh]
    train = features["train"]
    k = dataset.num_classes
    if how == "auto" and not _pseudo_labels_help(train, states, k, progress):
        return dataset
    found = pseudo_labels(
        train.hidden,
        train.labels,
        states,
        k,
        progress=lambda g, n: progress(Note(message=f"self-training: generation {g} of {n}")),
    )
    if not len(found.rows):
        progress(
            Note(
                message="self-training kept no pseudo-label: the runs train on the "
                "labelled texts alone"
            )
        )
        return dataset
    variant, said = _with_pseudo_labels(dataset, texts, found, pooling)
    progress(Note(message=said))
    return variant
