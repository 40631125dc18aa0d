"""The one seam where CPU-specific speed-ups meet the model layer.

Everything here changes how fast a step runs, never what it computes (each piece is tested
bit-identical, or within a stated tolerance, against the plain path):

* packed bf16 linears (:mod:`~seakr.models.kernels`) where oneDNN runs bf16 natively;
* int8 linears (int8 weights x dynamic int8 activations, fbgemm; 7-bit activations on CPUs without
  AVX512-VNNI) when the precision is int8: within a measured tolerance, not identical
  (``benchmarks/results/precision_*.json``);
* a decode step outside transformers' module machinery for Llama/Qwen2 (:mod:`~seakr.models.fastpath`).

Off CPU, or where a piece does not apply, :func:`apply` leaves the model as it is and says so in
:class:`Speedups`; the decode loop reads only ``Speedups.fast_step``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from . import fastpath
from .kernels import int8_available, pack_linears, packing_available, quantize_linears_int8


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:  # closed: a ResourceWarning on every load otherwise
            return f.read()
    except OSError:
        return ""


#: The CPU flags under which a float precision is computed natively (else it is emulated), and how a user names them.
NATIVE_FLAGS = {"bfloat16": (("avx512_bf16", "amx_bf16"), "AVX512-BF16 or AMX"),
                "float16": (("avx512_fp16", "amx_fp16"), "AVX512-FP16 or AMX-FP16")}


def cpu_runs_natively(precision: str, flags: str | None = None) -> bool:
    """Whether this CPU computes ``precision`` (a key of :data:`NATIVE_FLAGS`) natively; ``flags``: its
    /proc/cpuinfo text when the caller has read it already."""
    flags = _cpu_flags() if flags is None else flags
    return any(f in flags for f in NATIVE_FLAGS[precision][0])


def cpu_runs_bf16_natively() -> bool:
    """AVX512-BF16 or AMX in /proc/cpuinfo: bf16 matmuls are fast here (measured ~2x for batched decode
    on this project's Zen 4 machine); elsewhere bf16 is emulated and float32 is the better default."""
    return cpu_runs_natively("bfloat16")


class EmulatedPrecisionWarning(UserWarning):
    """An explicit float precision this device does not compute natively: it runs, but slower."""


def emulation_note(precision: str, device: torch.device) -> str | None:
    """One line when ``precision`` (an explicit float one) is emulated on ``device``, else None.

    Why: on a CPU without AVX512-BF16 the compute-bound work runs emulated. Measured on an AVX2 EPYC
    (Qwen2.5-Coder-0.5B, ``benchmarks/results/precision_speed_avx2_qwen05_fp32_bf16.json``): a 500-token
    prefill took 4.6x float32's time in bf16 and a k = 20 sampling call 2.2x (batch-1 decode, memory-bound,
    was 1.7x faster); nothing said so."""
    if device.type != "cpu" or precision not in NATIVE_FLAGS:
        return None
    flags = _cpu_flags()  # read once for both questions below
    if cpu_runs_natively(precision, flags):
        return None
    auto = str(default_dtype(device, flags)).replace("torch.", "")
    return (f"precision {precision} is emulated on this CPU (it has no {NATIVE_FLAGS[precision][1]}): prefills and "
            f"k-sample calls run slower than in float32 (bf16 measured 4.6x and 2.2x); precision 'auto' picks "
            f"{auto} here")


@dataclass
class Speedups:
    packed_linear: bool = False
    fast_step: fastpath.FastDecoder | None = None
    int8_linears: int = 0

    def info(self) -> dict:
        return {"packed_linear": self.packed_linear, "int8_linears": self.int8_linears,
                "fast_decode": self.fast_step is not None}


def apply(model, *, state_layer: int, state_source: str, shared_attention: bool,
          packed_linear: bool | None = None, fast_step: bool = True, int8: bool = False) -> Speedups:
    """Install what applies to ``model`` on this machine.

    Args:
        packed_linear: ``None`` packs where the CPU runs bf16 natively; ``True`` insists (error where
            it cannot); ``False`` keeps ``F.linear``.
        fast_step: use the module-free decode step where the architecture allows; it needs our
            shared-prefix attention.
        int8: run the linears as int8 (CPU only; replaces the bf16 packing).
    """
    dtype = next(model.parameters()).dtype
    on_cpu = next(model.parameters()).device.type == "cpu"
    packed, n8 = False, 0
    if int8:
        if not (on_cpu and int8_available()):
            raise ValueError("precision int8 runs on CPU with torch's fbgemm/x86 quantised kernels; use bf16 on this "
                             "device")
        n8 = quantize_linears_int8(model)
        if not n8:  # GPT-2's blocks are Conv1D: "int8" ran everything in bf16, and said int8
            raise ValueError(f"precision int8: {type(model).__name__} has no torch.nn.Linear layers to run in int8 "
                             "(GPT-2-style blocks are Conv1D); use bf16")
    else:
        can_pack = on_cpu and packing_available(dtype)
        if packed_linear and not can_pack:
            raise ValueError("packed_linear=True needs bfloat16 on a CPU where oneDNN runs bf16 natively")
        packed = bool(can_pack if packed_linear is None else packed_linear) and pack_linears(model, free_plain=True) > 0
    if packed or n8:
        release_file_maps(model)
    fast = fastpath.build(model, state_layer, state_source) if (fast_step and shared_attention) else None
    return Speedups(packed, fast, n8)


def release_file_maps(model) -> None:
    """Weights loaded from safetensors are views of the file's memory map, and the whole map stays
    resident (counted in RSS: 3.1 GB for the 1.5B) while any view of it lives. Once packing has freed
    most weights, copy the few left (embedding, norms, biases) into memory of their own so the map
    is released. Tied weights stay tied (one Parameter, new data)."""
    with torch.no_grad():
        for p in model.parameters():
            if p.numel() and p.device.type == "cpu":
                p.data = p.data.clone()
    _trim_heap()


def _trim_heap() -> None:
    """Hand the heap's free pages back to the OS (glibc keeps the quantiser's temporaries: 0.6 GB
    of RSS for the 1.5B in int8). Elsewhere a no-op."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def default_dtype(device: torch.device, flags: str | None = None) -> torch.dtype:
    """bf16 where the device computes it natively (this CPU with AVX512-BF16/AMX, a GPU that supports
    it), else float32. ``flags``: the CPU's /proc/cpuinfo text when the caller has read it already."""
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.bfloat16 if cpu_runs_natively("bfloat16", flags) else torch.float32
