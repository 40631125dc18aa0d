"""Pre-packed bf16 weights for every ``nn.Linear``: the decode step's matmuls at memory speed.

Why: at decode time each linear layer multiplies a handful of rows by a weight matrix, so its cost is
reading the weight. ``F.linear`` on a plain (row-major) bf16 weight re-lays the weight out for
oneDNN's kernel on every call; measured here (2 cores, AVX512-BF16, no AMX) that reaches 13-16 GB/s
on Qwen 0.5B's layers. Re-ordering each weight once into oneDNN's blocked layout
(``mkldnn._reorder_linear_weight``, what inductor's CPU "freezing" does) and calling the packed
kernel reads it at 20-40 GB/s: 1.3-1.8x faster at 1-21 rows with bit-identical results in our
checks (same kernel family, same fp32 accumulation). ``benchmarks/decode.py`` measures both.

Only for bf16 on CPUs where oneDNN runs bf16 natively; the packed copy costs one extra copy of the
weights in memory (the original stays: the tied input embedding and transformers' own code read it).
"""

from __future__ import annotations

import types

import torch

_ATTR = "_seakr_packed"


def packing_available(dtype: torch.dtype) -> bool:
    """True where packed bf16 linears run natively (oneDNN built in, CPU with AVX512-BF16/AMX)."""
    if dtype != torch.bfloat16 or not torch.backends.mkldnn.is_available():
        return False
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def _packed_forward(self, x):
    return torch.ops.mkldnn._linear_pointwise(x, getattr(self, _ATTR), self.bias, "none", [None], "")


def pack_linears(model: torch.nn.Module) -> int:
    """Give every bf16 ``nn.Linear`` of ``model`` a packed weight and a forward that uses it.

    Returns how many layers were packed. Call again after changing weights; :func:`unpack_linears`
    restores the stock forward."""
    n = 0
    with torch.inference_mode():
        for m in model.modules():
            if isinstance(m, torch.nn.Linear) and m.weight.dtype == torch.bfloat16 and m.weight.device.type == "cpu":
                setattr(m, _ATTR, torch.ops.mkldnn._reorder_linear_weight(m.weight.detach()))
                m.forward = types.MethodType(_packed_forward, m)
                n += 1
    return n


def unpack_linears(model: torch.nn.Module) -> int:
    """Undo :func:`pack_linears` (drops the packed copies)."""
    n = 0
    for m in model.modules():
        if hasattr(m, _ATTR):
            delattr(m, _ATTR)
            del m.forward  # the instance attribute; the class's forward is visible again
            n += 1
    return n
