"""Where things live, from the environment: the one home of every ``GLEE_*`` variable.

| variable | default | what |
|---|---|---|
| ``GLEE_RUNS_DIR`` | ``./runs`` | the run store |
| ``GLEE_UPLOADS_DIR`` | ``./uploads`` | CSVs uploaded in the app |
| ``GLEE_DATA_DIR`` | ``./data`` | the paper's datasets (one folder per id) |
| ``GLEE_DEFAULT_MODEL`` | ``auto`` | the backbone the app starts with |
| ``GLEE_MAX_CONCURRENT_RUNS`` | ``1`` | runs training at once per store |
"""

from __future__ import annotations

import os
from pathlib import Path

from .config import AUTO_MODEL


def _path(variable: str, default: str) -> Path:
    return Path(os.environ.get(variable) or default).expanduser()


def runs_dir() -> Path:
    return _path("GLEE_RUNS_DIR", "runs")


def uploads_dir() -> Path:
    return _path("GLEE_UPLOADS_DIR", "uploads")


def data_dir() -> Path:
    return _path("GLEE_DATA_DIR", "data")


def default_model() -> str:
    return os.environ.get("GLEE_DEFAULT_MODEL") or AUTO_MODEL


def max_concurrent_runs() -> int:
    return max(1, int(os.environ.get("GLEE_MAX_CONCURRENT_RUNS") or 1))
