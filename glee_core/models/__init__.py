"""What a model is: the tuning modes (``modes.MODES``: fine-tune, frozen, LoRA, P-tuning v2),
the methods (``methods.METHODS``: the paper's twelve and seven more), every knob of a run
(``config.TrainConfig``), the backbone (any Hugging Face masked LM and its MLM head), the heads
that compose a method on it, cached features (quick mode), batched scoring and the
learning-rate search (``search``: successive halving and its schedule, over the trainer's
trials). Imports ``core`` and ``data``."""
