"""Data-parallel training: two processes on CPU (gloo), as `accelerate launch` runs them."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("method", ["prompt", "cls-relu-pt-ln"])
@pytest.mark.slow
def test_two_process_data_parallel_step_ends_with_identical_weights(
    tiny_bert, toy_csv, tmp_path, method
):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--master_addr",
            "127.0.0.1",
            "--master_port",
            str(free_port()),
            str(ROOT / "tests" / "helpers" / "ddp_worker.py"),
            str(tiny_bert),
            str(toy_csv),
            str(tmp_path),
            method,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "rank 0 of 2" in out.stdout and "rank 1 of 2" in out.stdout
    rank0 = load_file(tmp_path / "rank0.safetensors")
    rank1 = load_file(tmp_path / "rank1.safetensors")
    assert rank0.keys() == rank1.keys()
    assert all(torch.equal(rank0[k], rank1[k]) for k in rank0)
    initial = load_file(next(Path(tiny_bert).glob("*.safetensors")))
    key = "mlm.bert.encoder.layer.0.attention.self.query.weight"
    assert not torch.equal(rank0[key], initial[key.split("mlm.", 1)[1]])  # it did train
