"""Pre-packed bf16 weights for every ``nn.Linear``: the decode step's matmuls at memory speed.

Why: at decode time each linear layer multiplies a handful of rows by a weight matrix, so its cost is
reading the weight. ``F.linear`` on a plain (row-major) bf16 weight re-lays the weight out for
oneDNN's kernel on every call; measured here (2 cores, AVX512-BF16, no AMX) that reaches 13-16 GB/s
on Qwen 0.5B's layers. Re-ordering each weight once into oneDNN's blocked layout
(``mkldnn._reorder_linear_weight``, what inductor's CPU "freezing" does) and calling the packed
kernel reads it at 20-40 GB/s: 1.3-1.8x faster at 1-21 rows with bit-identical results in our
checks (same kernel family, same fp32 accumulation). ``benchmarks/decode.py`` measures both.

Sibling projections that read the same input (q/k/v of an attention block, gate/up of an MLP) are
fused into one packed matrix: fewer, larger kernel calls (measured 16.2 -> 11.7 ms per step for
SmolLM2's 30 layers at batch 1, 40.0 -> 32.4 ms for Qwen 0.5B's 24). The first sibling computes
all of them and each later sibling returns its slice, as long as it is called with the very same
input tensor (transformers' modules do exactly that); any other call falls back to ``F.linear``.

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


def _packed_linear(x, packed, bias):
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [None], "")


def _packed_forward(self, x):
    return _packed_linear(x, getattr(self, _ATTR), self.bias)


_SIBLINGS = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))


class _Fused:
    """One packed matmul serving sibling projections; holds the split output until the last reads it."""

    def __init__(self, mods: list[torch.nn.Linear]):
        self.packed = torch.ops.mkldnn._reorder_linear_weight(torch.cat([m.weight.detach() for m in mods]))
        has_bias = [m.bias is not None for m in mods]
        self.bias = torch.cat([m.bias.detach() for m in mods]) if all(has_bias) else None
        self.splits = [m.out_features for m in mods]
        self.x = None
        self.parts: list[torch.Tensor] = []

    def forward(self, i: int, mod: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
        if i == 0:
            out = _packed_linear(x, self.packed, self.bias)
            self.x, self.parts = x, list(out.split(self.splits, -1))
        elif x is not self.x:  # not the sibling call pattern: compute this projection on its own
            return torch.nn.functional.linear(x, mod.weight, mod.bias)
        part = self.parts[i]
        if i == len(self.splits) - 1:
            self.x, self.parts = None, []  # release the input and the output
        return part


def _fusable(mods) -> bool:
    ok = all(_packable(m) for m in mods)
    return ok and len({m.in_features for m in mods}) == 1 and len({m.bias is None for m in mods}) == 1


def _packable(m) -> bool:
    return isinstance(m, torch.nn.Linear) and m.weight.dtype == torch.bfloat16 and m.weight.device.type == "cpu"


def pack_linears(model: torch.nn.Module) -> int:
    """Give every bf16 ``nn.Linear`` of ``model`` a packed weight (fused with its siblings where they
    share an input) and a forward that uses it.

    Returns how many layers now run packed. Call again after changing weights; :func:`unpack_linears`
    restores the stock forward."""
    n = 0
    done: set[int] = set()
    with torch.inference_mode():
        for parent in model.modules():
            for names in _SIBLINGS:
                mods = [getattr(parent, a, None) for a in names]
                if all(m is not None for m in mods) and _fusable(mods) and not any(id(m) in done for m in mods):
                    fused = _Fused(mods)
                    for i, m in enumerate(mods):
                        setattr(m, _ATTR, fused)
                        m.forward = (lambda f, i, m: lambda x: f.forward(i, m, x))(fused, i, m)
                        done.add(id(m))
                        n += 1
        for m in model.modules():
            if _packable(m) and id(m) not in done:
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
