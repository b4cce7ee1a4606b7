"""Run experiments through the store: train what is missing, load what is finished.

``run_experiments`` is what the CLI's ``train``, the app's Train page and the benchmarks call:
for each method and seed it derives the run id from the configuration, takes the run's lock, and
either loads the finished run or trains and stores it. ``score_texts`` re-loads a stored run's
weights to score new text.
"""

from __future__ import annotations

import contextlib
import platform
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import pandas as pd
import torch

from . import __version__
from .backbone import Backbone, load_backbone, model_fingerprint
from .datasets import LongTailDataset
from .devices import resolve_device
from .distributed import data_parallel
from .encoding import encode, unknown_token_share
from .errors import GleeError
from .methods import MethodSpec, build_model, get_method, label_word_token_ids
from .store import Run, RunStore, load_checked, make_run_id, write_json
from .training import RunResult, TrainConfig, predict, train_and_evaluate

_BACKBONES: dict[str, Backbone] = {}


def get_backbone(name: str) -> Backbone:
    """Load a backbone once per process (runs train deep copies of it)."""
    if name not in _BACKBONES:
        _BACKBONES[name] = load_backbone(name)
    return _BACKBONES[name]


def resolve_config(dataset: LongTailDataset, config: TrainConfig) -> TrainConfig:
    """Fill dataset-dependent defaults: max length and batch size (few-shot sets use 2)."""
    return replace(config, max_length=config.max_length or dataset.max_length,
                   batch_size=config.batch_size or dataset.batch_size or 32,
                   lr=config.learning_rate)


def run_identity(dataset: LongTailDataset, spec: MethodSpec, model_name: str,
                 config: TrainConfig) -> dict:
    """What makes two runs the same run (and so the run id)."""
    return {
        "dataset": dataset.id, "dataset_fingerprint": dataset.fingerprint(),
        "template": dataset.template, "verbalizer": dataset.verbalizer,
        "threshold": dataset.threshold,
        "model": model_name, "model_fingerprint": model_fingerprint(model_name),
        "method": spec.id, **config.identity(),
    }


def package_versions() -> dict:
    import sklearn
    import transformers
    return {"glee_core": __version__, "torch": torch.__version__,
            "transformers": transformers.__version__, "scikit-learn": sklearn.__version__,
            "numpy": np.__version__, "pandas": pd.__version__,
            "python": platform.python_version()}


def run_config(run_id: str, dataset: LongTailDataset, spec: MethodSpec, backbone: Backbone,
               config: TrainConfig, identity: dict) -> dict:
    head, tail = dataset.head_tail()
    notes = []
    if spec.uses_mlm_head and not backbone.mlm_head_pretrained:
        notes.append(f"{spec.id} starts from the MLM head, but the backbone {backbone.name!r} "
                     "has no pretrained MLM head transform (it was initialised fresh), so the "
                     "paper's prompt / pt. LN advantage cannot show with this backbone")
    return {
        "run_id": run_id,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "dataset": {"id": dataset.id, "fingerprint": identity["dataset_fingerprint"],
                    "classes": dataset.classes, "head_classes": head, "tail_classes": tail,
                    "threshold": dataset.threshold, "template": dataset.template,
                    "verbalizer": dataset.verbalizer,
                    "class_counts": {k: int(v) for k, v in dataset.class_counts().items()},
                    "sizes": {k: len(v) for k, v in dataset.splits.items()},
                    "warnings": dataset.warnings},
        "model": backbone.describe(),
        "method": {**spec.to_dict(), "uses_mlm_head": spec.uses_mlm_head},
        "seed": config.seed,
        "hyperparameters": config.identity(),
        "backbone_mode": config.backbone,
        "notes": notes,
        "versions": package_versions(),
        "identity": identity,
    }


def save_result(store: RunStore, run_id: str, config_json: dict, result: RunResult) -> Run:
    from safetensors.torch import save_model

    classes = config_json["dataset"]["classes"]

    def write(folder: Path) -> None:
        save_model(result.model.trained_module(), str(folder / "model.safetensors"))
        np.save(folder / "logits.npy", result.logits.astype(np.float32), allow_pickle=False)
        np.savez(folder / "features.npz", **result.features)
        result.predictions.to_csv(folder / "predictions.csv", index=False)
        write_json(folder / "weight_norms.json", dict(zip(classes, result.weight_norms)))
        write_json(folder / "history.json", result.history)
        write_json(folder / "config.json", {**config_json, "timing": result.timing})
        write_json(folder / "metrics.json", result.metrics)  # last: marks the run complete

    return store.write(run_id, write)


@dataclass(frozen=True)
class PlannedRun:
    spec: MethodSpec
    config: TrainConfig
    identity: dict
    run_id: str


def plan_runs(dataset: LongTailDataset, methods: Iterable[MethodSpec], seeds: Iterable[int],
              model_name: str, config: TrainConfig | None = None) -> list[PlannedRun]:
    """Every method x seed with its resolved configuration and run id, in training order."""
    base = resolve_config(dataset, config or TrainConfig())
    planned = []
    for spec in methods:
        for seed in seeds:
            cfg = replace(base, seed=seed)
            identity = run_identity(dataset, spec, model_name, cfg)
            planned.append(PlannedRun(spec, cfg, identity,
                                      make_run_id(dataset.id, spec.id, seed, identity)))
    return planned


UNKNOWN_SHARE_WARNING = 0.05
VOCABULARY_SAMPLE = 500


def preflight(dataset: LongTailDataset, plan: list[PlannedRun], model_name: str,
              store: RunStore, force: bool = False) -> list[str]:
    """Checks that need the backbone, made before anything trains (and only when something
    will): the verbalizer's label words must be in its vocabulary (an error naming them), and a
    vocabulary that maps much of the data to the unknown token earns a note (returned)."""
    pending = [p for p in plan if force or store.get(p.run_id) is None]
    if not pending:
        return []
    tokenizer = get_backbone(model_name).tokenizer
    if any(p.spec.predictor == "mlm" for p in pending):
        label_word_token_ids(tokenizer, dataset.verbalizer, dataset.classes)
    share = unknown_token_share(tokenizer, dataset.splits["train"]["text"]
                                .head(VOCABULARY_SAMPLE).tolist())
    if share <= UNKNOWN_SHARE_WARNING:
        return []
    return [f"{share:.0%} of the tokens of {dataset.id}'s training texts (first "
            f"{VOCABULARY_SAMPLE}) are the unknown token for {model_name!r}: its vocabulary "
            f"does not cover this data's language ({dataset.language}), so the results say "
            "little; use a model made for it" + (" (e.g. bert-base-chinese)"
                                                 if dataset.language == "zh" else "")]


def run_experiments(dataset: LongTailDataset, methods: Iterable[MethodSpec],
                    seeds: Iterable[int], model_name: str = "auto",
                    config: TrainConfig | None = None, store: RunStore | None = None,
                    force: bool = False, progress: Callable[[dict], None] | None = None
                    ) -> list[Run]:
    """Train (or load from the store) every method x seed; returns the runs in that order.

    ``progress`` receives the trainer's events plus ``{"stage": "run", "run_id", "method",
    "seed", "index", "total", "cached"}`` before each run."""
    store = store or RunStore()
    progress = progress or (lambda event: None)
    device = (config or TrainConfig()).device
    resolve_device(device)  # fail before any work on a bad device
    ddp = data_parallel(device)  # several processes: the main one decides and writes
    main = ddp is None or ddp.is_main
    jobs = plan_runs(dataset, methods, seeds, model_name, config)
    vocabulary_notes = preflight(dataset, jobs, model_name, store, force)
    for note in vocabulary_notes:
        progress({"stage": "note", "message": note})
    runs = []
    for index, job in enumerate(jobs, 1):
        spec, cfg, run_id = job.spec, job.config, job.run_id
        with store.lock(run_id) if main else contextlib.nullcontext():
            train = force or store.get(run_id) is None
            if ddp is not None:
                train = ddp.broadcast(train)
            progress({"stage": "run", "run_id": run_id, "method": spec.id, "seed": cfg.seed,
                      "index": index, "total": len(jobs), "cached": not train})
            if train:
                backbone = get_backbone(model_name)
                queued = {"stage": "queued", "run_id": run_id}
                with store.training_slot(lambda: progress(queued)) if main \
                        else contextlib.nullcontext():
                    result = train_and_evaluate(dataset, spec, backbone, cfg, progress,
                                                feature_cache=store.root / ".features")
                if main:
                    config_json = run_config(run_id, dataset, spec, backbone, cfg, job.identity)
                    config_json["notes"] += vocabulary_notes + result.notes
                    save_result(store, run_id, config_json, result)
            if ddp is not None:
                ddp.barrier()  # the others read the run once the main process has written it
        runs.append(Run(store.path(run_id)))
    return runs


def load_run(path: str | Path) -> Run:
    """A finished run from its directory, or a :class:`GleeError` saying what is wrong."""
    path = Path(path).expanduser()
    if not path.is_dir():
        raise GleeError(f"run directory not found: {path}")
    run, problem = load_checked(path)
    if problem:
        raise GleeError(f"{path} is not a finished run: {problem}")
    return run


def load_run_model(run: Run, device: str = "cpu"):
    """Rebuild a run's model from its config and load its saved weights (the head alone for a
    frozen-backbone run); returns ``(model, backbone)``."""
    from safetensors.torch import load_model

    if not run.weights_path.is_file():
        raise GleeError(f"{run.path}: model.safetensors missing - the run cannot score text; "
                        "retrain it with --force")
    config = run.config
    frozen = config.get("backbone_mode") == "frozen"
    backbone = get_backbone(config["model"]["name"]) if frozen else \
        load_backbone(config["model"]["name"])
    spec = get_method(config["method"]["id"])
    model = build_model(spec, backbone, config["dataset"]["classes"],
                        config["dataset"]["verbalizer"], frozen=frozen)
    try:
        load_model(model.trained_module(), str(run.weights_path))
    except Exception as exc:  # a truncated or foreign file
        raise GleeError(f"{run.weights_path}: cannot load the weights ({exc})") from None
    return model.to(resolve_device(device)).eval(), backbone


def text_logits(model, backbone: Backbone, template: str, max_length: int, texts: list[str],
                texts_b: list[str] | None = None, device: str = "cpu") -> np.ndarray:
    """Calibrated logits of ``model`` (as a run evaluated them) for new texts."""
    from .features import FeatureSplit, compute_hidden

    frame = pd.DataFrame({"text": texts, "text_b": texts_b or [""] * len(texts),
                          "label": np.zeros(len(texts), dtype=np.int64)})
    split = encode(frame, backbone.tokenizer, model.spec.input_format, template, max_length)
    torch_device = resolve_device(device)
    if model.frozen:
        split = FeatureSplit(compute_hidden(backbone, split, torch_device), split.labels)
    logits, _ = predict(model, split, backbone.tokenizer.pad_token_id or 0, torch_device)
    return logits


def score_texts(run: Run, texts: list[str], texts_b: list[str] | None = None,
                device: str = "cpu") -> pd.DataFrame:
    """Every class's probability for each text (rows: texts, columns: classes)."""
    model, backbone = load_run_model(run, device)
    config = run.config
    logits = text_logits(model, backbone, config["dataset"]["template"],
                         config["hyperparameters"]["max_length"], texts, texts_b, device)
    probs = torch.softmax(torch.from_numpy(logits), dim=1).numpy()
    return pd.DataFrame(probs, columns=config["dataset"]["classes"])


def class_score_table(logits: np.ndarray, classes: list[str], verbalizer: dict[str, list[str]],
                      head: list[str]) -> pd.DataFrame:
    """One text's scores as a table: class, probability, logit, label words, head/tail."""
    probs = torch.softmax(torch.from_numpy(logits.reshape(-1)), dim=0).numpy()
    return pd.DataFrame({"class": classes, "score": probs, "logit": logits.reshape(-1),
                         "label words": [" | ".join(verbalizer.get(c, [])) for c in classes],
                         "group": ["head" if c in head else "tail" for c in classes]})


def zero_shot_logits(backbone: Backbone, dataset: LongTailDataset, texts: list[str],
                     max_length: int | None = None) -> np.ndarray:
    """The untrained backbone's MLM head scoring the verbalizer's label words at ``[MASK]``."""
    model = build_model(get_method("prompt"), backbone, dataset.classes, dataset.verbalizer)
    return text_logits(model, backbone, dataset.template, max_length or dataset.max_length, texts)
