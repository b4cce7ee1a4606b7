"""Where and in what precision the maths runs."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys

import torch

from .errors import GleeError


def resolve_device(device: str = "auto") -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise GleeError("--device cuda asked for, but no CUDA GPU is available; use --device cpu")
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise GleeError(f"unknown device {device!r}; use auto, cpu or cuda")
    return torch.device(device)


def cpu_has_bf16() -> bool:
    """Does this CPU do bf16 matrix maths natively (AVX512-BF16 / AMX)? Elsewhere bf16 is slower."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def resolve_precision(precision: str, device: torch.device) -> str:
    """``auto`` -> ``bf16`` on CUDA and on CPUs with native bf16, else ``fp32``."""
    if precision == "auto":
        return "bf16" if device.type == "cuda" or cpu_has_bf16() else "fp32"
    return precision


def autocast(device: torch.device, precision: str):
    """bf16 autocast (matmuls in bf16, weights and optimizer state stay fp32) or nothing."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16")


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number (malloc.h)
MMAP_THRESHOLD_BYTES = 4 << 20  # blocks this large (a micro-batch's attention maps) are mmapped


@functools.cache
def _glibc():
    """The C library when it is glibc (it has ``malloc_trim``), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None
    except OSError:
        return None


@functools.cache
def keep_large_blocks_mapped() -> None:
    """Fix glibc's mmap threshold at 4 MB (once per process): training on the CPU with
    ``--micro-batch-size`` (the memory-saving mode) calls it.

    glibc raises its threshold to the largest block freed so far (up to 32 MB), after which a
    training step's activations come from the heap, and the heap keeps their pages when they are
    freed: the process's peak grows by what the next steps' differently sized blocks add on top.
    A fixed threshold returns each large block to the system when it is freed, at the price of
    faulting its pages in again (BENCHMARKS.md, "Memory of fine-tuning": -0.2 to -0.5 GB with
    micro-batches; 15-25% slower with whole batches of 32 at 256, hence only with them).
    A no-op elsewhere, or when ``MALLOC_MMAP_THRESHOLD_`` is set."""
    libc = _glibc()
    if libc is not None and "MALLOC_MMAP_THRESHOLD_" not in os.environ:  # the user's wins
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)


def release_freed_memory() -> None:
    """Give the pages the C allocator holds free back to the system (glibc ``malloc_trim``),
    between training and evaluation: the training steps' freed memory is not kept under the
    evaluation's. A no-op elsewhere."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
