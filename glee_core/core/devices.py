"""Where and in what precision the maths runs."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
import secrets
import sys
import time
from pathlib import Path

import torch
from filelock import FileLock

from . import environment
from .errors import GleeError


def resolve_device(device: str = "auto") -> torch.device:
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise GleeError("--device cuda asked for, but no CUDA GPU is available; use --device cpu")
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise GleeError(f"unknown device {device!r}; use auto, cpu or cuda")
    if device.startswith("cuda"):
        configure_cuda()
    return torch.device(device)


def adamw(params, device: torch.device, **options) -> torch.optim.AdamW:
    """AdamW fused into one kernel for all parameters, on a CPU as on CUDA: one optimizer for
    every device. Fine-tuning MiniLM on 2 CPU cores: ×1.02-1.03 training examples/s and 70 MB
    less peak memory than the single-tensor step (BENCHMARKS.md, "CPU"); results differ from it
    in the last bits only."""
    return torch.optim.AdamW(params, fused=device.type in ("cpu", "cuda"), **options)


@functools.cache
def configure_cuda() -> None:
    """Once per process on a GPU: leave cuDNN out of scaled-dot-product attention unless
    ``GLEE_CUDNN_SDPA=1``: its kernels are planned per tensor shape, which a new batch width
    pays again (BENCHMARKS.md, "GPU check"); the flash and memory-efficient kernels need no
    plan."""
    torch.backends.cuda.enable_cudnn_sdp(os.environ.get("GLEE_CUDNN_SDPA") == "1")


def cpu_has_bf16() -> bool:
    """Does this CPU do bf16 matrix maths natively (AVX512-BF16 / AMX)? Elsewhere bf16 is slower."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def cpu_has_amx() -> bool:
    """Does this CPU have AMX tiles (Intel Sapphire Rapids and later)? Its bf16 training runs
    ~1.6x an AVX512-BF16 CPU's (BENCHMARKS.md, "Where the estimates' typical rates come from")."""
    try:
        return bool(torch.cpu._is_amx_tile_supported())
    except (AttributeError, RuntimeError):
        return False


@functools.cache
def device_name(device: torch.device) -> str:
    """What the hardware is, for a run's record: the GPU's name, or the CPU's model and the
    instruction set torch's kernels use (bf16 results differ between CPUs whose kernels differ,
    so two runs of one seed agree bit for bit only on the same kind of machine)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    model = ""
    with contextlib.suppress(OSError):
        info = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        for line in info.splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    extra = ["AMX" if cpu_has_amx() else "", "bf16" if cpu_has_bf16() else ""]
    return " · ".join(
        v for v in (model or "CPU", torch.backends.cpu.get_cpu_capability(), *extra) if v
    )


def cuda_has_bf16(device: torch.device) -> bool:
    """Does this GPU do bf16 natively (compute capability 8.0 and up: Ampere, Ada, Hopper)?"""
    return torch.cuda.get_device_capability(device) >= (8, 0)


def resolve_precision(precision: str, device: torch.device) -> str:
    """``auto`` -> ``bf16`` on GPUs and CPUs that do it natively, ``fp16`` (with a gradient
    scaler) on older GPUs, else ``fp32``. ``fp16`` needs a CUDA GPU."""
    if precision == "auto":
        if device.type == "cuda":
            return "bf16" if cuda_has_bf16(device) else "fp16"
        return "bf16" if cpu_has_bf16() else "fp32"
    if precision == "fp16" and device.type != "cuda":
        raise GleeError(
            "--precision fp16 needs a CUDA GPU; on a CPU use fp32 (or bf16 where "
            "the CPU has it natively)"
        )
    return precision


AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def autocast(device: torch.device, precision: str):
    """Mixed-precision autocast (matmuls in bf16 / fp16, weights and optimizer state stay
    fp32), or nothing for fp32."""
    return torch.autocast(
        device.type,
        dtype=AUTOCAST_DTYPES.get(precision, torch.bfloat16),
        enabled=precision in AUTOCAST_DTYPES,
    )


def grad_scaler(device: torch.device, precision: str) -> torch.amp.GradScaler | None:
    """fp16 training's loss scaler (bf16 and fp32 need none)."""
    return torch.amp.GradScaler(device.type) if precision == "fp16" else None


def scaled_backward(loss: torch.Tensor, scaler: torch.amp.GradScaler | None) -> None:
    """Backpropagate ``loss``, scaled first under fp16."""
    (loss if scaler is None else scaler.scale(loss)).backward()


def clipped_step(
    optimizer: torch.optim.Optimizer, params, max_norm: float, scaler: torch.amp.GradScaler | None
) -> torch.Tensor | None:
    """Clip the gradient norm to ``max_norm`` and step the optimizer; under fp16 through the
    scaler: unscaled before clipping, and a step with inf/NaN gradients is skipped. Returns,
    under fp16, whether this step was skipped (a tensor on the device: no sync), else None."""
    if scaler is None:
        torch.nn.utils.clip_grad_norm_(params, max_norm)
        optimizer.step()
        return None
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(params, max_norm)
    before = scaler._scale.clone()  # set by scale(); read on the device, no sync
    scaler.step(optimizer)
    scaler.update()
    return scaler._scale < before  # the scale backs off after a skip


GPU_PAD_MULTIPLE = 64  # on CUDA, batches are padded to a multiple of this (few tensor shapes)


def resolve_pad_multiple(pad_multiple: int | None, device: torch.device) -> int:
    """``None`` (auto) -> pad GPU batches to multiples of 64 tokens, so the kernels see a few
    shapes (a new shape costs a GPU a plan: BENCHMARKS.md, "GPU check"); on a CPU pad each
    batch to its own longest text only (1), which wins there."""
    if pad_multiple is None:
        return GPU_PAD_MULTIPLE if device.type == "cuda" else 1
    return max(int(pad_multiple), 1)


# --runs-at-once auto on a GPU: as many runs as its free memory holds at this much each (a
# bert-base-sized run's peak, with room), at most the best count measured (BENCHMARKS.md, "GPU
# check": "Runs packed onto one GPU").
GPU_MEMORY_PER_RUN = 6 * 2**30
GPU_RUNS_AT_ONCE_BEST = 8


def resolve_runs_at_once(value: str | int, device: torch.device) -> int:
    """``--runs-at-once``: a number, or ``auto``: 1 on a CPU (the cores are shared anyway),
    on a GPU as many bert-base-sized runs as fit its free memory, up to
    :data:`GPU_RUNS_AT_ONCE_BEST`."""
    if str(value) != "auto":
        return max(int(value), 1)
    if device.type != "cuda":
        return 1
    free, _ = torch.cuda.mem_get_info(device)
    return max(1, min(GPU_RUNS_AT_ONCE_BEST, free // GPU_MEMORY_PER_RUN))


# Texts scored (or encoded) at once, per device: a GPU wants large batches; on a CPU batches of 32
# were ~25% faster than 128 (r8 at 256 and demo at 128, MiniLM, fp32 EPYC: BENCHMARKS.md, "CPU").
EVAL_BATCH_SIZES = {"cuda": 128, "cpu": 32}


def resolve_eval_batch_size(batch_size: int | None, device: torch.device) -> int:
    """``None`` (auto) -> the device's evaluation batch size (:data:`EVAL_BATCH_SIZES`)."""
    if batch_size is None:
        return EVAL_BATCH_SIZES.get(device.type, EVAL_BATCH_SIZES["cuda"])
    return max(int(batch_size), 1)


def padded_width(longest: int, multiple: int, cap: int) -> int | None:
    """The width a batch whose longest text is ``longest`` tokens is padded to: rounded up to
    ``multiple``, at most ``cap`` (never under ``longest``); None for its own length."""
    if multiple <= 1:
        return None
    return max(min(-(-longest // multiple) * multiple, cap), longest)


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


# --- threads per job on a CPU ----------------------------------------------------------------

THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")  # the user's choice wins
REBALANCE_SECONDS = 2.0


class CpuShare:
    """This process's share of the CPU while it trains or encodes on it: a locked file in the
    machine's folder of CPU jobs says it is working, and torch's thread pool is sized to
    ``threads ÷ jobs working now`` (at least 1), counted again every couple of seconds as jobs
    start and end. Three jobs on two cores each get one thread instead of fighting over six
    (BENCHMARKS.md, "Threads per job").

    Work that is not a glee job counts too: when the cores other processes kept busy over the
    last couple of seconds leave fewer spare cores than that share, the pool shrinks to the
    spare ones (at least 1). Threads that outnumber the free cores wait for each other at every
    step: beside one busy process on 2 cores a step took 1.5x as long on 2 threads as on 1
    (BENCHMARKS.md, "How long does a fine-tune take, alone and beside other work?")."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.base = torch.get_num_threads()
        self.file = folder / f"{os.getpid()}-{secrets.token_hex(4)}.job"
        self.lock = FileLock(str(self.file))
        self.checked = 0.0
        self.mark = environment.load_mark()

    def other_cores(self) -> float:
        """Cores' worth of work other processes did since the last look."""
        others, self.mark = environment.other_cores_since(self.mark), environment.load_mark()
        return others

    def threads(self) -> int:
        """The pool this job takes now: its share of the threads, or the spare cores when
        other work leaves fewer."""
        share = max(1, self.base // self.jobs())
        spare = environment.spare_cores(self.other_cores(), environment.core_count())
        return share if spare is None else min(share, spare)

    def jobs(self) -> int:
        """Jobs working now, this one included; a file whose process is gone is swept."""
        return 1 + len(environment.live_cpu_jobs(self.folder, own=self.file))

    def rebalance(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.checked >= REBALANCE_SECONDS:
            self.checked = now
            threads = self.threads()
            if threads != torch.get_num_threads():
                torch.set_num_threads(threads)

    def __enter__(self) -> CpuShare:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.lock.acquire()
        self.rebalance(force=True)
        return self

    def __exit__(self, *exc) -> None:
        self.lock.release()
        self.file.unlink(missing_ok=True)
        torch.set_num_threads(self.base)


_SHARE: list[CpuShare] = []  # the share this process holds now (at most one)


@contextlib.contextmanager
def cpu_share(device: torch.device):
    """Hold this process's :class:`CpuShare` while a run works on the CPU (a no-op on a GPU,
    when the user set ``OMP_NUM_THREADS``, or when this process already holds one)."""
    if device.type != "cpu" or _SHARE or any(os.environ.get(v) for v in THREAD_ENV):
        yield
        return
    with CpuShare(environment.cpu_jobs_dir()) as share:
        _SHARE.append(share)
        try:
            yield
        finally:
            _SHARE.remove(share)


def rebalance_threads() -> None:
    """Called per batch by the passes that run long: resize the thread pool when the number of
    jobs working changed (checked at most every two seconds)."""
    if _SHARE:
        _SHARE[0].rebalance()


def batch_to(batch: dict, device: torch.device) -> dict:
    """The batch on ``device``; to a GPU from pinned memory, without waiting for the copy; on a
    CPU, this job's share of the cores checked first (:func:`rebalance_threads`)."""
    if device.type == "cuda":
        return {k: v.pin_memory().to(device, non_blocking=True) for k, v in batch.items()}
    rebalance_threads()
    return {k: v.to(device) for k, v in batch.items()}
