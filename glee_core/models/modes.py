"""The ways of tuning a masked LM, declared once: ``MODES`` maps a ``--mode`` name to a
:class:`TuningMode` that says what trains and at which learning rates.

* ``finetune``: the whole model (the paper's set-up);
* ``frozen``: quick mode, heads alone on the frozen encoder's cached states;
* ``lora``: low-rank adapters in the encoder's attention (Hu et al., ICLR 2022), through ``peft``;
* ``ptuning2``: P-tuning v2 (Liu et al., ACL 2022): trained key/value prefixes in every layer,
  peft's prefix tuning on the encoder.

In the parameter-efficient modes the backbone's pretrained weights, its MLM head included, never
change: the head trains its own copies of what it starts from (the pt. LN, a prompt head's
transform) and a prompt head scores with the pretrained label-word rows kept frozen (w/ ed.
trains its own rows), P-tuning v2's own setting. The trainer asks the mode, never its name; a new
way of tuning is one entry here (and, for a peft method, its config in :func:`peft_config`).

The module imports nothing heavy (``peft`` is imported when a model is built)."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import GleeError


@dataclass(frozen=True)
class TuningMode:
    """One way of tuning: what trains and the rates that suit it."""

    name: str
    label: str  # how the app, the tables and the reports name a run of it
    choice: str  # how the Train page offers it
    help: str  # one line for --help and the Train page
    cached_features: bool = False  # heads alone on cached states: the encoder never runs again
    peft: str | None = None  # the peft method that wraps the encoder ("lora", "prefix")
    lr: float = 1e-5  # the one rate without a search (the paper recipe, or --recipe paper)
    lr_candidates: tuple[float, ...] | None = None  # the practical recipe's search on dev

    @property
    def trains_encoder(self) -> bool:
        """Do gradients flow through the encoder (so a closed-form probe cannot be used)?"""
        return not self.cached_features

    @property
    def parameter_efficient(self) -> bool:
        return self.peft is not None

    @property
    def keeps_backbone(self) -> bool:
        """Are the pretrained backbone's weights unchanged, so a run stores only what it trained
        (the head, and an adapter or prefix) and scoring needs the same backbone?"""
        return self.cached_features or self.parameter_efficient


# In the order the Train page offers them: the quick compare first
MODES: dict[str, TuningMode] = {m.name: m for m in (
    TuningMode("frozen", "frozen backbone (quick compare)", "Quick compare (frozen backbone)",
               "quick mode: heads alone on the frozen encoder's cached features",
               cached_features=True, lr=1e-3),
    TuningMode("finetune", "fine-tuned", "Fine-tune", "train the whole model (the paper's "
               "set-up)", lr=1e-5, lr_candidates=(2e-5, 5e-5, 1e-4, 2e-4)),
    # LoRA's GLUE runs on RoBERTa-base: 4e-4 to 5e-4; the search spans 10-100x a fine-tune's rate
    TuningMode("lora", "LoRA", "LoRA", "low-rank adapters in the encoder's attention (peft) and "
               "the head; the backbone's weights stay as they are", peft="lora",
               lr=5e-4, lr_candidates=(2e-4, 5e-4, 1e-3, 2e-3)),
    # P-tuning v2 on BERT: 5e-3 to 1e-2 (its released scripts)
    TuningMode("ptuning2", "P-tuning v2", "P-tuning v2", "trained prefixes in every layer of "
               "the encoder (peft's prefix tuning) and the head; the backbone's weights stay as "
               "they are", peft="prefix", lr=5e-3, lr_candidates=(2e-3, 5e-3, 1e-2, 2e-2)),
)}
MODE_LABELS = {name: mode.label for name, mode in MODES.items()}

# The defaults of the papers: LoRA r 8, alpha 16, dropout 0.1 on the query and value projections
# (Hu et al.'s GLUE set-up); P-tuning v2's prefix of 20 virtual tokens in every layer.
LORA_R, LORA_ALPHA, LORA_DROPOUT = 8, 16, 0.1
PREFIX_LENGTH = 20


def get_mode(name: str) -> TuningMode:
    try:
        return MODES[name]
    except KeyError:
        raise GleeError(f"--mode must be one of {', '.join(MODES)}, got {name!r}") from None


def peft_config(mode: TuningMode, lora_r: int, lora_alpha: int, lora_dropout: float,
                lora_targets: str | None, prefix_length: int):
    """The ``peft`` configuration of a parameter-efficient mode, for the encoder (the model's
    ``base_model``, which returns hidden states: peft's feature-extraction task)."""
    from peft import LoraConfig, PrefixTuningConfig, TaskType  # noqa: PLC0415 (heavy)

    if mode.peft == "lora":
        targets = [t.strip() for t in lora_targets.split(",")] if lora_targets else None
        return LoraConfig(task_type=TaskType.FEATURE_EXTRACTION, r=lora_r, lora_alpha=lora_alpha,
                          lora_dropout=lora_dropout, target_modules=targets)
    if mode.peft == "prefix":
        return PrefixTuningConfig(task_type=TaskType.FEATURE_EXTRACTION,
                                  num_virtual_tokens=prefix_length)
    raise GleeError(f"mode {mode.name!r} has no peft method")
