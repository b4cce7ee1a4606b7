"""Where and in what precision the maths runs."""

from __future__ import annotations

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
