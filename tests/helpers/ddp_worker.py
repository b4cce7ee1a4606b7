"""One process of a two-process data-parallel training (launched by test_distributed.py)."""

import os
import sys

from safetensors.torch import save_model

from glee_core.data.datasets import load_dataset
from glee_core.models.config import TrainConfig
from glee_core.models.methods import get_method
from glee_core.models.scoring import get_backbone
from glee_core.train.setup import TrainingContext
from glee_core.train.training import train_and_evaluate

model_dir, csv_path, out_dir, method = sys.argv[1:5]
dataset = load_dataset(f"csv:{csv_path}")
config = TrainConfig(epochs=1, batch_size=16, lr=1e-3, limit=64, device="cpu")
result = train_and_evaluate(
    TrainingContext(dataset, get_backbone(model_dir)), get_method(method), config
)
rank = int(os.environ["RANK"])
save_model(result.model, os.path.join(out_dir, f"rank{rank}.safetensors"))
print(f"rank {rank} of {os.environ['WORLD_SIZE']}: f1={result.metrics.f1:.4f}")
