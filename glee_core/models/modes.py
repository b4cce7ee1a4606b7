"""The ways of tuning a masked LM, declared once: ``MODES`` maps a ``--mode`` name to a
:class:`TuningMode` that says what trains and at which learning rates.

* ``finetune``: the whole model (the paper's set-up);
* ``frozen``: quick mode, heads alone on the frozen encoder's cached states;
* ``lora``: low-rank adapters in the encoder's attention (Hu et al., ICLR 2022), through ``peft``;
* ``ptuning2``: P-tuning v2 (Liu et al., ACL 2022): trained key/value prefixes in every layer,
  peft's prefix tuning on the encoder;
* ``ia3``: IA³ (Liu et al., NeurIPS 2022): learned rescaling vectors in every layer, through
  ``peft`` (added as the proof that a new peft mode is one class here and its test);
* ``prompt-tuning``: prompt tuning (Lester et al., EMNLP 2021): trained virtual tokens at the
  input only, through ``peft``;
* ``bitfit``: BitFit (Ben Zaken et al., ACL 2022): only the encoder's biases train;
* ``adapter``: bottleneck adapters (Houlsby et al., ICML 2019) after each layer's attention and
  feed-forward, a module of our own (``adapters``).

In the parameter-efficient modes the backbone's pretrained weights, its MLM head included, never
change: the head trains its own copies of what it starts from (the pt. LN, a prompt head's
transform) and a prompt head scores with the pretrained label-word rows kept frozen (w/ ed.
trains its own rows), P-tuning v2's own setting. The trainer asks the mode, never its name; a new
way of tuning is one entry here: a ``TuningMode`` subclass (:mod:`glee_core.models.tuning`) for
a peft method, which builds its configuration, counts what it adds and declares its settings
(``Setting``: default, bounds, help, protocol form; ``TrainConfig`` makes each a field of its
own, so each is a flag, a widget on the Train page and a part of the run's identity).

The module imports nothing heavy (``peft`` is imported when a model is built)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from ..core.errors import GleeError
from .tuning import Setting, TuningMode


@dataclass(frozen=True)
class LoraMode(TuningMode):
    """LoRA: low-rank adapters beside the encoder's linear layers (the attention's query and
    value unless ``lora_targets`` names others), ``r (d_in + d_out)`` parameters each."""

    peft: str | None = "lora"
    merges: bool = True
    settings: tuple[Setting, ...] = (
        # the LoRA paper's GLUE set-up: r 8, alpha 16, dropout 0.1 on query and value
        Setting("lora_r", "LoRA rank r", 8, 1, help="LoRA's rank", protocol="LoRA r {}"),
        Setting(
            "lora_alpha", "LoRA alpha", 16, 1, help="LoRA's scaling alpha", protocol="alpha {}"
        ),
        Setting(
            "lora_dropout",
            "LoRA dropout",
            0.1,
            0,
            1,
            below=True,
            step=0.05,
            help="dropout on LoRA's input",
            protocol="LoRA dropout {:g}",
        ),
        Setting(
            "lora_targets",
            "Adapted modules (blank: peft's default)",
            None,
            placeholder="query,value",
            protocol="on {}",
            help="the modules LoRA adapts, comma-separated names (default: peft's for the "
            "model type: the attention's query and value for BERT)",
        ),
    )

    @staticmethod
    def targets(config) -> list[str] | None:
        return (
            [t.strip() for t in config.lora_targets.split(",") if t.strip()]
            if config.lora_targets
            else None
        )

    def peft_config(self, config):
        from peft import LoraConfig, TaskType  # noqa: PLC0415 (heavy)

        return LoraConfig(
            task_type=TaskType.FEATURE_EXTRACTION,
            r=config.lora_r,
            lora_alpha=config.lora_alpha,
            lora_dropout=config.lora_dropout,
            target_modules=self.targets(config),
        )

    def added_parameters(self, config, layers: int, hidden: int, inner: int) -> int:
        return layers * len(self.targets(config) or ("query", "value")) * config.lora_r * 2 * hidden


@dataclass(frozen=True)
class PrefixMode(TuningMode):
    """P-tuning v2: a trained key and value for each of ``prefix_length`` virtual tokens in
    every layer, ``2 h`` parameters a token and layer."""

    peft: str | None = "prefix"
    settings: tuple[Setting, ...] = (
        Setting(
            "prefix_length",
            "Prefix length (virtual tokens per layer)",
            20,
            1,
            help="P-tuning v2's prefix: virtual tokens per layer",
            protocol="prefix {}",
        ),
    )

    def peft_config(self, config):
        from peft import PrefixTuningConfig, TaskType  # noqa: PLC0415 (heavy)

        return PrefixTuningConfig(
            task_type=TaskType.FEATURE_EXTRACTION, num_virtual_tokens=config.prefix_length
        )

    def added_parameters(self, config, layers: int, hidden: int, inner: int) -> int:
        return config.prefix_length * layers * 2 * hidden

    def positions_taken(self, config) -> int:
        """Its virtual tokens come before the text's, in the position embeddings too: a
        prefix of 512 and texts of 512 tokens need 1,024 positions (BERT has 512)."""
        return config.prefix_length


@dataclass(frozen=True)
class Ia3Mode(TuningMode):
    """IA³ (Liu et al., NeurIPS 2022): learned vectors that rescale the attention's keys and
    values and the inputs of the layers peft names for the model type (for BERT and RoBERTa every
    ``output.dense``: the attention's output, ``h`` wide, and the feed-forward's, ``inner``
    wide), one number a channel: ``3 h + inner`` a layer, the fewest of any mode. No settings."""

    peft: str | None = "ia3"
    merges: bool = True

    def peft_config(self, config):
        from peft import IA3Config, TaskType  # noqa: PLC0415 (heavy)

        return IA3Config(task_type=TaskType.FEATURE_EXTRACTION)

    def added_parameters(self, config, layers: int, hidden: int, inner: int) -> int:
        return layers * (3 * hidden + inner)


PROMPT_INITS = ("label-words", "random")


@dataclass(frozen=True)
class PromptTuningMode(TuningMode):
    """Prompt tuning (Lester et al., EMNLP 2021): ``prompt_tokens`` trained virtual tokens
    before the input's embeddings, the encoder frozen (peft's prompt tuning), ``h`` parameters
    a token. They start as the label words' embeddings, cycled (``label-words``), or as the
    embeddings of tokens drawn from the vocabulary (``random``: the paper's sampled vocabulary)."""

    peft: str | None = "prompt_tuning"
    soft_prompt: bool = True
    settings: tuple[Setting, ...] = (
        Setting(
            "prompt_tokens",
            "Virtual tokens at the input",
            20,
            1,
            200,
            help="prompt tuning's trained virtual tokens before the text",
            protocol="{} virtual tokens",
        ),
        Setting(
            "prompt_init",
            "How the virtual tokens start",
            "label-words",
            placeholder="label-words or random",
            help="prompt tuning's start: label-words (the label words' embeddings, cycled) or "
            "random (embeddings of tokens drawn from the vocabulary)",
            protocol="from {}",
            choices=PROMPT_INITS,
        ),
    )

    def peft_config(self, config):
        from peft import PromptTuningConfig, PromptTuningInit, TaskType  # noqa: PLC0415

        return PromptTuningConfig(
            task_type=TaskType.FEATURE_EXTRACTION,
            num_virtual_tokens=config.prompt_tokens,
            prompt_tuning_init=PromptTuningInit.RANDOM,  # replaced in prepare()
        )

    def added_parameters(self, config, layers: int, hidden: int, inner: int) -> int:
        return config.prompt_tokens * hidden

    def prepare(self, model, backbone, classes, verbalizer, config) -> None:
        import torch  # noqa: PLC0415 (heavy)

        table = model.adapter.base_model.get_input_embeddings().weight
        n = config.prompt_tokens
        ids: list[int] = []
        if config.prompt_init == "label-words":  # each class's words in turn, as tokenised
            unknown = backbone.tokenizer.unk_token_id
            words = [" " + w for c in classes for w in verbalizer.get(c, [c])]
            pieces = backbone.tokenizer(words, add_special_tokens=False)["input_ids"]
            ids = [i for word in pieces for i in word if i != unknown]
        if not ids:  # random, or no label word the vocabulary holds
            generator = torch.Generator().manual_seed(config.seed)
            ids = torch.randint(0, min(5000, table.shape[0]), (n,), generator=generator).tolist()
        rows = torch.tensor([ids[k % len(ids)] for k in range(n)], device=table.device)
        embedding = model.adapter.prompt_encoder["default"].embedding
        with torch.no_grad():
            embedding.weight.copy_(table[rows].detach().to(embedding.weight.dtype))


@dataclass(frozen=True)
class BitFitMode(TuningMode):
    """BitFit (Ben Zaken et al., ACL 2022): only the encoder's biases train, and the head, which
    trains its own copies of the MLM head's parts it starts from; every other weight stays as
    it was. A run stores the whole model, as a fine-tune does (it exports the same ways)."""

    partial: bool = True

    def added_parameters(self, config, layers: int, hidden: int, inner: int) -> int:
        # a layer's biases: query, key, value, the attention's output and its LayerNorm, the
        # feed-forward's two and its LayerNorm; the embeddings' LayerNorm
        return layers * (7 * hidden + inner) + hidden

    def prepare(self, model, backbone, classes, verbalizer, config) -> None:
        encoder = model.mlm.base_model
        biases = [p for name, p in encoder.named_parameters() if name.endswith(".bias")]
        if not biases:
            raise GleeError(
                f"--mode bitfit trains the encoder's biases, and {backbone.name} has none: "
                "choose another mode (lora, ia3)"
            )
        model.mlm.requires_grad_(False)
        for parameter in biases:
            parameter.requires_grad_(True)


ADAPTER_PLACES = {
    "both": ("attention.output.dense", "output.dense"),
    "attention": ("attention.output.dense",),
    "ffn": ("output.dense",),
}


@dataclass(frozen=True)
class AdapterMode(TuningMode):
    """Bottleneck adapters (Houlsby et al., ICML 2019): after the attention's output projection
    and the feed-forward's (``adapter_where``), each layer's output passes through a small
    down-project / GELU / up-project with a residual (``2 h s + h + s`` parameters an adapter of
    bottleneck ``s``), started as the identity; only they and the head train. No library fits
    this stack (``adapters`` pins transformers 4.57), so the module is ours
    (``glee_core.models.adapters``). A run stores the whole model, as a fine-tune does; it
    leaves as the studio's folder."""

    inserts: bool = True
    settings: tuple[Setting, ...] = (
        Setting(
            "adapter_size",
            "Adapter bottleneck",
            64,
            1,
            1024,
            help="the adapters' bottleneck width",
            protocol="adapters {}",
        ),
        Setting(
            "adapter_where",
            "Where the adapters go",
            "both",
            placeholder="both, attention or ffn",
            help="after the attention's output (attention), the feed-forward's (ffn) or both",
            protocol="after {}",
            choices=tuple(ADAPTER_PLACES),
        ),
    )

    def added_parameters(self, config, layers: int, hidden: int, inner: int) -> int:
        size = config.adapter_size
        return (
            layers * len(ADAPTER_PLACES[config.adapter_where]) * (2 * hidden * size + hidden + size)
        )

    def prepare(self, model, backbone, classes, verbalizer, config) -> None:
        from .adapters import insert_adapters  # noqa: PLC0415 (torch)

        model.mlm.requires_grad_(False)
        placed = insert_adapters(
            model.mlm.base_model, ADAPTER_PLACES[config.adapter_where], config.adapter_size
        )
        if not placed:
            raise GleeError(
                f"--mode adapter found no {' or '.join(ADAPTER_PLACES[config.adapter_where])} "
                f"layer in {backbone.name}: choose another mode (lora, ia3)"
            )


# In the order the Train page offers them: the quick compare first
MODES: dict[str, TuningMode] = {
    m.name: m
    for m in (
        TuningMode(
            "frozen",
            "frozen backbone (quick compare)",
            "Quick compare (frozen backbone)",
            "quick mode: heads alone on the frozen encoder's cached features",
            cached_features=True,
            lr=1e-3,
        ),
        TuningMode(
            "finetune",
            "fine-tuned",
            "Fine-tune",
            "train the whole model (the paper's set-up)",
            lr=1e-5,
            lr_candidates=(2e-5, 5e-5, 1e-4, 2e-4),
        ),
        # LoRA's GLUE runs on RoBERTa-base: 4e-4 to 5e-4; the search spans 10-100x a fine-tune's
        # rate
        LoraMode(
            "lora",
            "LoRA",
            "LoRA",
            "low-rank adapters in the encoder's attention (peft) and "
            "the head; the backbone's weights stay as they are",
            lr=5e-4,
            lr_candidates=(2e-4, 5e-4, 1e-3, 2e-3),
        ),
        # P-tuning v2 on BERT: 5e-3 to 1e-2 (its released scripts)
        PrefixMode(
            "ptuning2",
            "P-tuning v2",
            "P-tuning v2",
            "trained prefixes in every layer of "
            "the encoder (peft's prefix tuning) and the head; the backbone's weights stay as "
            "they are",
            lr=5e-3,
            lr_candidates=(2e-3, 5e-3, 1e-2, 2e-2),
        ),
        # T-Few trained IA³ at 3e-3; its vectors start at 1 and move little: rates like a prefix's
        Ia3Mode(
            "ia3",
            "IA³",
            "IA³",
            "learned rescaling of the encoder's keys, values and "
            "feed-forward inputs (peft's IA³) and the head; the backbone's weights stay as they "
            "are",
            lr=3e-3,
            lr_candidates=(1e-3, 3e-3, 1e-2, 3e-2),
        ),
        # prompt tuning's own paper trained at 0.3 (Adafactor); with AdamW a few virtual tokens
        # at the input take rates above P-tuning v2's
        PromptTuningMode(
            "prompt-tuning",
            "prompt tuning",
            "Prompt tuning",
            "trained virtual tokens before the text (peft's prompt tuning) and the head; the "
            "backbone's weights stay as they are",
            lr=3e-2,
            lr_candidates=(1e-2, 3e-2, 1e-1, 3e-1),
        ),
        # BitFit's GLUE runs: 1e-4 to 1e-3, above a fine-tune's (only biases move)
        BitFitMode(
            "bitfit",
            "BitFit",
            "BitFit",
            "only the encoder's biases and the head train",
            lr=5e-4,
            lr_candidates=(2e-4, 5e-4, 1e-3, 2e-3),
        ),
        # Houlsby et al. searched 3e-5 to 3e-3 for BERT's adapters; from the identity they move
        # at rates between a fine-tune's and LoRA's
        AdapterMode(
            "adapter",
            "adapters",
            "Bottleneck adapters",
            "small bottleneck modules after each layer's attention and feed-forward, and the "
            "head; the backbone's weights stay as they are",
            lr=1e-3,
            lr_candidates=(3e-4, 1e-3, 3e-3, 1e-2),
        ),
    )
}
MODE_LABELS = {name: mode.label for name, mode in MODES.items()}


def setting_default(field: str):
    """The default of a mode's setting."""
    return next(s.default for m in MODES.values() for s in m.settings if s.field == field)


def mode_settings() -> list[Setting]:
    """Every mode's settings, each field once (``TrainConfig`` holds each in a field of its
    own: the run's identity, the flag, the protocol line)."""
    return list({s.field: s for m in MODES.values() for s in m.settings}.values())


@cache  # asked for every field of every TrainConfig made: the registry is fixed
def setting_modes(field: str) -> tuple[str, ...]:
    """The modes a ``TrainConfig`` field is a setting of; every mode when it is none's."""
    owners = tuple(m.name for m in MODES.values() if any(s.field == field for s in m.settings))
    return owners or tuple(MODES)


def get_mode(name: str) -> TuningMode:
    try:
        return MODES[name]
    except KeyError:
        raise GleeError(f"--mode must be one of {', '.join(MODES)}, got {name!r}") from None
