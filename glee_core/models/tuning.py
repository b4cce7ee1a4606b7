"""What a way of tuning is: a :class:`TuningMode` (what trains, at which learning rates, its
peft configuration, what it adds and its settings) and a :class:`Setting` (one knob: default,
bounds, help, protocol form). The ways themselves, and the registry ``MODES``, are in
:mod:`glee_core.models.modes`. Imports nothing heavy."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import GleeError


@dataclass(frozen=True)
class Setting:
    """One knob of a way of tuning (or of an executor): the field that holds it, its default,
    bounds, help and protocol form, and the Train page's label. A mode's settings become
    ``TrainConfig`` fields (``config.with_mode_settings``: a flag, a protocol-line part and a
    place in the run's identity each); the page draws them from these alone."""

    field: str
    label: str
    default: int | float | str | None
    low: float | None = None  # inclusive, unless ``above``
    high: float | None = None  # inclusive, unless ``below``
    below: bool = False  # ``high`` excluded: a dropout in [0, 1)
    above: bool = False  # ``low`` excluded: a layer decay in (0, 1]
    off: int | float | None = None  # the page's value that means "not set" (0 = off)
    placeholder: str = ""  # a blank setting's hint: what leaving it blank means
    of: type | None = None  # its type, where the default (None) does not say
    step: float = 1  # the page's step for a number
    help: str = ""  # the flag's help and the page's tooltip (its default is added)
    protocol: str | None = None  # how the value reads in a run's protocol line
    choices: tuple[str, ...] = ()  # a word among these (none: any)

    @property
    def help_text(self) -> str:
        return self.help + (f" (default {self.default})" if self.default is not None else "")

    @property
    def kind(self) -> type:
        return self.of or (type(self.default) if self.default is not None else str)

    def check(self, value) -> None:
        """A value given for it (None: its default) within its bounds, else a GleeError naming
        the flag."""
        flag = f"--{self.field.replace('_', '-')}"
        if value is not None and self.choices and value not in self.choices:
            words = ", ".join(self.choices[:-1]) + " or " + self.choices[-1]
            raise GleeError(f"{flag} must be {words}, got {value!r}")
        if value is None or self.kind is str:
            return
        if self.low is not None and (value <= self.low if self.above else value < self.low):
            raise GleeError(
                f"{flag} must be {'above' if self.above else 'at least'} {self.low:g}, got {value}"
            )
        if self.high is not None and (value >= self.high if self.below else value > self.high):
            raise GleeError(
                f"{flag} must be {'below' if self.below else 'at most'} {self.high:g}, got {value}"
            )


@dataclass(frozen=True)
class TuningMode:
    """One way of tuning: what trains, the rates that suit it, its settings and what it builds.
    The plain modes (a fine-tune, quick mode) are this class; a parameter-efficient one is a
    subclass that builds its peft configuration and says what it adds."""

    name: str
    label: str  # how the app, the tables and the reports name a run of it
    choice: str  # how the Train page offers it
    help: str  # one line for --help and the Train page
    cached_features: bool = False  # heads alone on cached states: the encoder never runs again
    peft: str | None = None  # the peft method that wraps the encoder ("lora", "prefix")
    lr: float = 1e-5  # the one rate without a search (the paper recipe, or --recipe paper)
    lr_candidates: tuple[float, ...] | None = None  # the practical recipe's search on dev
    settings: tuple[Setting, ...] = ()
    merges: bool = False  # its adapters fold into the encoder's weights (an export merges them)
    partial: bool = False  # trains some of the encoder's own weights (BitFit: the biases)
    soft_prompt: bool = False  # trained virtual tokens at the input (a plain encoder cannot)
    inserts: bool = False  # modules of its own inside the encoder (bottleneck adapters)

    @property
    def trains_encoder(self) -> bool:
        """Do gradients flow through the encoder (so a closed-form probe cannot be used)?"""
        return not self.cached_features

    @property
    def parameter_efficient(self) -> bool:
        return self.peft is not None

    @property
    def own_head(self) -> bool:
        """Does the head train its own copies of the MLM head's parts it starts from (the
        backbone's stay as they were, or train only as the mode says)?"""
        return self.cached_features or self.parameter_efficient or self.partial or self.inserts

    @property
    def whole_encoder(self) -> bool:
        """Does every weight of the encoder train (a fine-tune)?"""
        return not (self.cached_features or self.parameter_efficient or self.partial) and not (
            self.inserts
        )

    @property
    def plain_encoder(self) -> bool:
        """Is what scores the text the backbone's own encoder, weights aside (no virtual
        tokens before it, no modules inside it)?"""
        return not (self.soft_prompt or self.inserts)

    @property
    def keeps_backbone(self) -> bool:
        """Are the pretrained backbone's weights unchanged, so a run stores only what it trained
        (the head, and an adapter or prefix) and scoring needs the same backbone?"""
        return self.cached_features or self.parameter_efficient

    def check(self, config) -> None:
        """Its settings' values in ``config`` (a ``TrainConfig``) within their bounds."""
        for setting in self.settings:
            setting.check(getattr(config, setting.field))

    def defaults(self, config) -> dict:
        """Its settings as a run of ``config`` uses them: given, or their defaults (what
        ``TrainConfig.resolved`` fills in)."""
        given = {s.field: getattr(config, s.field) for s in self.settings}
        return {
            s.field: s.default if given[s.field] is None else given[s.field] for s in self.settings
        }

    def peft_config(self, config):
        """The ``peft`` configuration of the encoder (the model's ``base_model``, which returns
        hidden states: peft's feature-extraction task) for a resolved ``config``."""
        raise GleeError(f"mode {self.name!r} has no peft method")

    def added_parameters(self, config, layers: int, hidden: int, inner: int) -> int:
        """About how many parameters it trains in an encoder of ``layers`` x ``hidden``
        (feed-forward width ``inner``) besides the head (a run records the exact count)."""
        raise GleeError(f"mode {self.name!r} adds no parameters to the encoder")

    def positions_taken(self, config) -> int:
        """The backbone's positions it takes before a text's tokens (none by default)."""
        return 0

    def prepare(self, model, backbone, classes: list[str], verbalizer: dict, config) -> None:
        """What the mode does to a model once its encoder is built (``GleeModel``): which of
        the encoder's weights train, how what it added starts. Nothing by default."""
