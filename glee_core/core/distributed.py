"""Data-parallel training under ``accelerate launch`` (or ``torchrun``), unchanged commands.

    accelerate launch --multi_gpu --num_processes 4 -m glee_core train --dataset r52 ...

Every process draws the same shuffled batches (same seed); each takes its slice of every global
batch, so the effective batch size stays ``--batch-size`` and DDP's gradient averaging gives the
update single-process training would. Evaluation runs on every process (they hold identical
weights); only the main process writes the run, the others wait and then read it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache

import numpy as np
import torch
from accelerate import Accelerator
from accelerate.utils import broadcast_object_list


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


@dataclass
class DataParallel:
    """The process's place in a data-parallel group, and the wrappers it needs."""

    accelerator: object

    @property
    def rank(self) -> int:
        return self.accelerator.process_index

    @property
    def size(self) -> int:
        return self.accelerator.num_processes

    @property
    def is_main(self) -> bool:
        return self.accelerator.is_main_process

    @property
    def device(self) -> torch.device:
        return self.accelerator.device

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """DistributedDataParallel around ``model`` (gradients averaged across processes)."""
        return self.accelerator.prepare_model(model)

    def shard(self, index: np.ndarray) -> np.ndarray:
        """This process's slice of a global batch."""
        return index[self.rank :: self.size]

    def broadcast(self, value):
        """The main process's ``value`` on every process."""
        return broadcast_object_list([value], from_process=0)[0]

    def barrier(self) -> None:
        self.accelerator.wait_for_everyone()


@cache
def _context(cpu: bool) -> DataParallel:
    return DataParallel(Accelerator(cpu=cpu))


def data_parallel(device: str = "auto") -> DataParallel | None:
    """The data-parallel context when launched with several processes, else None."""
    if world_size() <= 1:
        return None
    cpu = device == "cpu" or not torch.cuda.is_available()
    return _context(cpu)
