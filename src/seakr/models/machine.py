"""What the machine offers a model, checked without importing torch (so a command refuses a bad
``--threads``, ``--precision`` or ``--device cpu`` in milliseconds, before anything slow): the CPUs this
process may use, the thread count, the precision names, and the device (torch is imported only to check a
GPU)."""

from __future__ import annotations

import os

from ..common.console import said


def default_threads() -> int:
    """``SEAKR_THREADS``, else every CPU this process may run on (``sched_getaffinity``: a container's
    limit, not the host's count; hyper-threads count as CPUs here, so set ``SEAKR_THREADS`` to the
    physical cores to leave them out)."""
    env = os.environ.get("SEAKR_THREADS")
    if env is None:
        return available_cpus()
    try:
        n = int(env)
    except ValueError:
        n = 0
    if n < 1 or too_many_threads(n):
        raise ValueError(f"SEAKR_THREADS={env!r}: expected a whole number from 1 to the "
                         f"{available_cpus()} CPUs this process may use")
    return n


def available_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def free_memory(device) -> int | None:
    """Bytes the device can still give: a GPU's free memory with what torch keeps cached for reuse (a call as
    large as the last one fits again), the CPU's MemAvailable (Linux); None where it cannot be read (then
    nothing is refused for it)."""
    if device.type == "cuda":  # what the driver has free, and what torch's allocator holds but no tensor uses
        import torch

        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return int(torch.cuda.mem_get_info(device)[0] + cached)
    if device.type != "cpu":
        return None
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return None


def too_many_threads(threads: int) -> str | None:
    """Why ``threads`` torch threads are too many for the CPUs this process may use, or None where they are not."""
    cpus = available_cpus()
    return f"this process may use {cpus} CPUs; more threads than CPUs only contend" if threads > cpus else None


def layer_problem(layer, depth: int | None = None) -> str | None:
    """What is wrong with a 0-based decoder layer (a whole number >= 0, below ``depth`` where it is known: a
    registry model's, or the loaded model's), or None; checked before any weights load."""
    if isinstance(layer, bool) or not isinstance(layer, int) or layer < 0 or (depth and layer >= depth):
        return "expected a 0-based decoder layer " + (f"in 0..{depth - 1}" if depth else ">= 0")
    return None


def check_layer(layer, name: str = "state_layer", depth: int | None = None) -> int:
    """:func:`layer_problem`'s refusal, in one line led by ``name``."""
    if why := layer_problem(layer, depth):
        raise ValueError(f"{name} {said(layer)}: {why}")
    return layer


def device_problem(device: str) -> str | None:
    """What this torch build or machine lacks for ``device`` (one the settings' spelling admits), or None."""
    import torch

    try:
        dev = torch.device(device)
    except RuntimeError:
        return "expected cpu, cuda, cuda:N (N a GPU number), mps or auto"
    if dev.type == "cuda" and not torch.cuda.is_available():
        return "CUDA is not available in this torch build or machine"
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        return f"this machine has {torch.cuda.device_count()} CUDA device(s), numbered from 0"
    if dev.type == "mps" and not torch.backends.mps.is_available():
        return "MPS (Apple GPU) is not available in this torch build or machine"
    if dev.type not in ("cpu", "cuda", "mps"):
        return "expected cpu, cuda, cuda:N (N a GPU number), mps or auto"
    if dev.type in ("cpu", "mps") and dev.index:  # torch takes cpu:7 as the one CPU, silently
        return f"there is one {dev.type} device ({dev.type} or {dev.type}:0)"
    return None


def resolve_device(device: str):
    """The torch device for ``device``, refused in one line (before any weights load) where this torch
    build or machine does not have it (:func:`device_problem`)."""
    import torch

    if not isinstance(device, (str, torch.device)):  # torch's own refusal is a many-line signature listing
        raise TypeError(f"device: expected cpu, cuda, cuda:N, mps or auto as text, got {type(device).__name__}")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if why := device_problem(device):
        raise ValueError(f"device {device!r}: {why}")
    dev = torch.device(device)
    return torch.device(dev.type) if dev.type != "cuda" else dev  # cpu:0 is cpu: one spelling in every record


def device_name(device: str) -> str:
    """One spelling of a device (``cpu:0`` -> ``cpu``, ``mps:0`` -> ``mps``), as a run's record and the service's
    memory check read it; any other text comes back as given, for :func:`resolve_device` to judge."""
    if isinstance(device, str) and device in ("cpu:0", "mps:0"):
        return device[:-2]
    return device


def missing_device(device: str) -> str | None:
    """:func:`device_problem` of a device as the settings spell it, without importing torch for the CPU (every
    machine has one) or for ``auto`` (whatever the machine has)."""
    return None if device_name(device) in ("cpu", "auto") else device_problem(device)


#: Where a layer's state is read: its feed-forward output (the paper's tap), or the residual stream after it.
STATE_SOURCES = ("mlp", "residual")
PRECISIONS = ("auto", "float32", "bfloat16", "float16", "int8")
_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def precision_name(precision: str) -> str:
    """A precision's full name (``bf16`` -> ``bfloat16``); unknown names come back as given."""
    return _ALIASES.get(precision, precision) if isinstance(precision, str) else precision
