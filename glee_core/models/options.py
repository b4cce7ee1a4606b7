"""The options shared by the commands beside training's hyper-parameters (``config.TrainConfig``):
which dataset and how to read it (:class:`DataOptions`), where runs execute
(:class:`ExecutorOptions`), task-adaptive pretraining (:class:`AdaptOptions`). A feature's own
options live in its package (``pool.options``, ``health.options``, ``budget.options``). The
requests a job runs are :mod:`glee_core.models.requests`'."""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass

from ..core.errors import GleeError
from ..core.plugins import named
from ..data.sources import SOURCES
from .config import PRECISION_HELP, PRECISIONS
from .fields import _boolean, option
from .tuning import Setting


@dataclass
class DataOptions:
    """Which dataset, and how to read it."""

    dataset: str = option(
        MISSING,
        "demo, a paper id (r52 r8 cmid ...), "
        + ", ".join(f"{s.usage} ({s.help})" for s in SOURCES.values()),
    )
    data_dir: str | None = option(
        None, "folder of the paper's datasets (default $GLEE_DATA_DIR, else ./data)"
    )
    threshold: float | None = option(
        None, "head/tail threshold on the cumulative training share (default: the paper's)"
    )
    template: str | None = option(
        None,
        "prompt template with {text} and [MASK] (one that "
        "differs from the dataset's ends its id in +prompt-<digest>)",
    )
    verbalizer: str | None = option(
        None,
        "JSON file: label -> label word(s) (words that differ "
        "from the dataset's end its id in +prompt-<digest>)",
    )
    head_tail: str = option(
        "train",
        "head/tail rule: train (training counts, <= threshold: "
        "what a user's data needs, the test split never decides) or "
        "released (the authors' code: the test labels, < threshold)",
        choices=("train", "released"),
    )
    text_column: str | None = option(None, "CSV/HF: the text column")
    label_column: str | None = option(None, "CSV/HF: the label column")
    text_b_column: str | None = option(None, "CSV/HF: an optional second text column")
    uploads_dir: str | None = option(
        None, "folder of upload:NAME datasets (default $GLEE_UPLOADS_DIR, else ./uploads)"
    )
    keep_rare: bool = option(
        False,
        "demo/CSV/upload: keep the classes with too few texts for a "
        "dev and test split in training (learned and predicted, never "
        "scored; the dataset id ends in +rare): yes/no",
    )
    exclude: str | None = option(
        None,
        "a file of training rows to leave out: health's "
        "label_issues.csv (its suspected rows) or one 0-based row of "
        "the training split a line; the dataset id ends in "
        "+without-N-<digest>, so its runs stay apart",
    )
    add: str | None = option(
        None,
        "a labelled file of pool texts to add to the training split "
        "(suggest's CSV with its label column filled; empty or '(none of "
        "these)' rows are skipped); the dataset id ends in "
        "+added-N-<digest>, so its runs stay apart",
    )

    def __post_init__(self):
        self.keep_rare = _boolean(self.keep_rare, "--keep-rare")

    def load(self):
        """The dataset (see :func:`glee_core.data.datasets.load_dataset`)."""
        from ..data.datasets import load_dataset  # noqa: PLC0415 (pandas: only to read a dataset)

        return load_dataset(
            self.dataset, **{k: v for k, v in asdict(self).items() if k != "dataset"}
        )


@dataclass(frozen=True)
class Executor:
    """Where planned runs train: its words (the flag's help, the error), the package it needs,
    its settings (``ExecutorOptions`` fields, checked by it; the Train page draws them as a
    mode's), how it is made (``factory``, ``"module:function"`` taking the options and the
    progress, imported only when it runs) and whether its runs train on other machines
    (``remote``: the device is checked there, the pool's pseudo-labels cannot be made here, no
    estimate of the cluster's time). A new executor is a record here and its class."""

    name: str
    words: str
    factory: str
    title: str = ""  # the Train page's section for a remote one
    remote: bool = False
    needs: str | None = None  # a module that must be installed
    install: str = ""  # how to install it
    settings: tuple[Setting, ...] = ()

    def make(self, options, progress):
        """The executor of ``options`` (its module imported now)."""
        return named(self.factory)(options, progress)


EXECUTORS = {
    e.name: e
    for e in (
        Executor("local", "one after another here", "glee_core.train.executors:local_executor"),
        Executor(
            "ray",
            "one Ray task per run; pip install -e '.[cluster]'",
            "glee_core.train.executors:ray_executor",
            title="Run on a Ray cluster (one Ray task per run)",
            remote=True,
            needs="ray",
            install='pip install -e ".[cluster]"',
            settings=(
                Setting("ray_address", "Ray address", None, placeholder="local Ray"),
                Setting("cpus_per_run", "CPUs per run", 1.0, 0.1, 256.0, step=0.5),
                Setting(
                    "gpus_per_run",
                    "GPUs per run",
                    None,
                    0.0,
                    8.0,
                    of=float,
                    placeholder="1 if the cluster has GPUs",
                ),
            ),
        ),
    )
}


@dataclass
class ExecutorOptions:
    """Where the planned runs train: one after another here, or as tasks on a Ray cluster."""

    executor: str = option(
        "local",
        " or ".join(f"{e.name} ({e.words})" for e in EXECUTORS.values()),
        choices=tuple(EXECUTORS),
    )
    ray_address: str | None = option(
        None,
        "Ray cluster to join: auto (a running one, as `ray "
        "start --head` leaves) or HOST:PORT (default: start a "
        "local Ray)",
    )
    cpus_per_run: float = option(1.0, "Ray: CPUs each run reserves")
    runs_at_once: str = option(
        "auto",
        "runs trained at once, each in a process of its own sharing the device: a "
        "number, or auto (1 on a CPU; on a GPU as many as its free memory holds at 6 GB a run, "
        "up to 8); with Ray, each run then reserves 1/N of a GPU. Quick-mode heads always "
        "train together in one process",
    )
    gpus_per_run: float | None = option(
        None,
        "Ray: GPUs each run reserves (default 1 when the "
        "cluster has GPUs, 1/N with --runs-at-once N, else 0)",
    )

    @property
    def remote(self) -> bool:
        """Do its runs train on other machines (:class:`Executor`)?"""
        return EXECUTORS[self.executor].remote

    def __post_init__(self):
        if self.executor not in EXECUTORS:
            raise GleeError(f"--executor must be {' or '.join(EXECUTORS)}, got {self.executor!r}")
        for executor in EXECUTORS.values():  # a value given is checked, whichever runs
            for setting in executor.settings:
                setting.check(getattr(self, setting.field))
        self.runs_at_once = str(self.runs_at_once).strip().lower()
        if self.runs_at_once != "auto" and (
            not self.runs_at_once.isdigit() or int(self.runs_at_once) < 1
        ):
            raise GleeError(
                f"--runs-at-once must be auto or a number of 1 or more, got {self.runs_at_once!r}"
            )


@dataclass(frozen=True)
class AdaptObjective:
    """An adaptation objective (``adapt --objective``): what it trains, and the settings it
    starts from where no flag says (``max_length`` None: the dataset's)."""

    name: str
    label: str
    help: str
    epochs: int
    lr: float
    max_length: int | None


ADAPT_OBJECTIVES = {
    o.name: o
    for o in (
        AdaptObjective(
            "mlm",
            "masked LM (TAPT: trains the MLM head the prompt heads read)",
            "the masked-LM objective: TAPT, the MLM head trained with the encoder (TAPT's "
            "paper trained 100 epochs on its small sets, on a GPU)",
            3,
            1e-4,
            None,
        ),
        # SimCSE's own settings for BERT (1 epoch, 3e-5, 32 tokens) beat 3 epochs at 1e-4 and
        # the dataset's length on the demo and r8-1500, in a tenth of the time (BENCHMARKS)
        AdaptObjective(
            "simcse",
            "SimCSE (the encoder alone: for the heads that read a pooled vector)",
            "unsupervised SimCSE, Gao et al. 2021: each text encoded twice, dropout the only "
            "difference, drawn toward itself and away from the batch's other texts; the encoder "
            "alone trains, for the heads that read a pooled sentence vector (its settings are "
            "SimCSE's for BERT)",
            1,
            3e-5,
            32,
        ),
    )
}


@dataclass
class AdaptOptions:
    """Task-adaptive pretraining (Gururangan et al., ACL 2020): the masked-LM objective continued
    on the task's own texts before tuning (``python -m glee_core adapt``)."""

    out: str = option(
        MISSING,
        "the folder to write the adapted backbone to (a new or empty folder; --model OUT loads it)",
    )
    texts: str | None = option(
        None,
        "a file of unlabelled texts, one a line, added to the "
        "training split's texts (never dev or test)",
    )
    epochs: int | None = option(
        None,
        "passes over the texts (default: "
        + ", ".join(f"{o.name} {o.epochs}" for o in ADAPT_OBJECTIVES.values())
        + ")",
    )
    batch_size: int = option(32, "texts per optimizer step")
    lr: float | None = option(
        None,
        "AdamW's learning rate (default: "
        + ", ".join(f"{o.name} {o.lr:g}" for o in ADAPT_OBJECTIVES.values())
        + ")",
    )
    max_length: int | None = option(
        None,
        "max tokens per text (default: "
        + ", ".join(
            f"{o.name} {o.max_length}" if o.max_length else f"{o.name} the dataset's"
            for o in ADAPT_OBJECTIVES.values()
        )
        + ")",
    )
    objective: str = option(
        "mlm",
        " or ".join(f"{o.name} ({o.help})" for o in ADAPT_OBJECTIVES.values()),
        choices=tuple(ADAPT_OBJECTIVES),
    )
    mlm_probability: float = option(0.15, "the share of tokens masked (BERT's)")
    whole_word: bool = option(
        True,
        "mask whole words where the tokenizer marks them (a fast "
        "tokenizer's offsets; every piece of a masked word becomes "
        "[MASK]): yes/no",
    )
    held_out: float = option(
        0.1,
        "the share of the training texts held out to measure the "
        "masked-LM loss and [MASK] top-1 accuracy before and after",
    )
    seed: int = option(1, "random seed (the held-out texts, masks and order)")
    precision: str = option("auto", PRECISION_HELP, choices=PRECISIONS)
    device: str = option("auto", "auto, cpu or cuda")

    def __post_init__(self):
        if isinstance(self.whole_word, str):
            self.whole_word = _boolean(self.whole_word, "--whole-word")
        if self.objective not in ADAPT_OBJECTIVES:
            raise GleeError(
                f"--objective must be {' or '.join(ADAPT_OBJECTIVES)}, got {self.objective!r}"
            )
        starts = ADAPT_OBJECTIVES[self.objective]  # what no flag said: the objective's own
        self.epochs = starts.epochs if self.epochs is None else self.epochs
        self.lr = starts.lr if self.lr is None else self.lr
        self.max_length = starts.max_length if self.max_length is None else self.max_length
        for name in ("epochs", "batch_size", "max_length"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise GleeError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
        if not 0 < self.mlm_probability < 1:
            raise GleeError(f"--mlm-probability must be in (0, 1), got {self.mlm_probability}")
        if not 0 <= self.held_out < 0.5:
            raise GleeError(f"--held-out must be in [0, 0.5), got {self.held_out}")
        if not 0 < self.lr < 1:
            raise GleeError(f"--lr must be between 0 and 1, got {self.lr}")


def parse_seeds(value: str) -> list[int]:
    """``"1,2,3"`` -> ``[1, 2, 3]`` (``--seeds`` of ``train`` and ``budget``)."""
    try:
        seeds = [int(s) for s in value.split(",") if s.strip()]
    except ValueError:
        raise GleeError(f"--seeds must be comma-separated integers, got {value!r}") from None
    if not seeds:
        raise GleeError("--seeds is empty; e.g. --seeds 1,2,3")
    return seeds
