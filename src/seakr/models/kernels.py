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
input tensor (transformers' modules do exactly that); any other call runs the fused product on its
own and returns its slice (the plain weight may be freed).

Only for bf16 on CPUs where oneDNN runs bf16 natively. The loaded model frees the plain weights once
packed (``free_plain``; a head tied to the input embedding keeps its table); :func:`pack_linears`
without it keeps them, so :func:`unpack_linears` can switch back (benchmarks do).

The same install serves int8 (:func:`quantize_linears_int8`): fbgemm int8 on decode-sized calls,
the packed float kernel on prefills (docs/design-notes.md section 4).
"""

from __future__ import annotations

import contextlib
import functools
import warnings

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


_SIBLINGS = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))


class _Fused:
    """One packed matmul serving sibling projections; holds the split output until the last reads it.

    ``pack(weight, bias)`` -> an opaque packed form; ``run(x, packed)`` -> ``x @ weight.T + bias``."""

    def __init__(self, mods: list[torch.nn.Linear], pack, run):
        weights = torch.cat([m.weight.detach() for m in mods])
        has_bias = [m.bias is not None for m in mods]
        bias = torch.cat([m.bias.detach() for m in mods]) if all(has_bias) else None
        self.packed, self.run = pack(weights, bias), run
        self.splits = [m.out_features for m in mods]
        self.x = None
        self.parts: list[torch.Tensor] = []

    def forward(self, i: int, mod: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
        if i == 0:
            out = self.run(x, self.packed)
            self.x, self.parts = x, list(out.split(self.splits, -1))
        elif x is not self.x:  # not the sibling call pattern: compute this projection on its own
            return self.run_one(i, x)
        part = self.parts[i]
        if i == len(self.splits) - 1:
            self.x, self.parts = None, []  # release the input and the output
        return part

    def run_one(self, i: int, x: torch.Tensor) -> torch.Tensor:
        lo = sum(self.splits[:i])
        return self.run(x, self.packed)[..., lo: lo + self.splits[i]]


def _fusable(mods, packable) -> bool:
    ok = all(packable(m) for m in mods)
    return ok and len({m.in_features for m in mods}) == 1 and len({m.bias is None for m in mods}) == 1


def _packable(m) -> bool:
    return isinstance(m, torch.nn.Linear) and m.weight.dtype == torch.bfloat16 and m.weight.device.type == "cpu"


class _Single:
    """One packed projection (no siblings)."""

    def __init__(self, m: torch.nn.Linear, pack, run):
        self.packed = pack(m.weight.detach(), None if m.bias is None else m.bias.detach())
        self.run = run

    def forward(self, i, mod, x):
        return self.run(x, self.packed)


def _install(model: torch.nn.Module, packable, pack, run, drop_weights) -> int:
    """Give every linear ``packable`` accepts a packed weight (fused with its siblings where they share
    an input) and a forward that uses it. ``drop_weights(module)`` says whether to free its original
    weight (only when the packed copy is all anyone reads)."""
    n = 0
    done: set[int] = set()
    with torch.inference_mode():
        groups = []
        for parent in model.modules():
            for names in _SIBLINGS:
                mods = [getattr(parent, a, None) for a in names]
                if all(m is not None for m in mods) and _fusable(mods,
                                                                 packable) and not any(id(m) in done for m in mods):
                    groups.append(mods)
                    done.update(id(m) for m in mods)
        groups += [[m] for m in model.modules() if packable(m) and id(m) not in done]
        for mods in groups:
            impl = _Fused(mods, pack, run) if len(mods) > 1 else _Single(mods[0], pack, run)
            for i, m in enumerate(mods):
                setattr(m, _ATTR, impl)
                m.forward = (lambda f, i, m: lambda x: f.forward(i, m, x))(impl, i, m)
                if drop_weights(m):  # keep a 0-size tensor: dtype/device queries on the module still work
                    m.weight = torch.nn.Parameter(m.weight.new_empty(0), requires_grad=False)
                n += 1
    return n


def pack_linears(model: torch.nn.Module, *, free_plain: bool = False) -> int:
    """Give every bf16 ``nn.Linear`` of ``model`` a weight packed in oneDNN's blocked layout (fused
    with its siblings where they share an input) and a forward that uses it. ``free_plain`` frees the
    plain weights (half the memory; :func:`unpack_linears` then cannot restore them); a head tied to
    the input embedding keeps its table.

    Returns how many layers now run packed. Call again after changing weights; :func:`unpack_linears`
    restores the stock forward."""
    tied = _tied_head(model)
    return _install(model, _packable, lambda w, b: (torch.ops.mkldnn._reorder_linear_weight(w), b),
                    lambda x, p: _packed_linear(x, p[0], p[1]), drop_weights=lambda m: free_plain and m is not tied)


# ------------------------------------------------------------------------------------------- int8
def int8_available() -> bool:
    """fbgemm/x86 quantised kernels are built into this torch (x86 CPU wheels have them)."""
    return any(e in torch.backends.quantized.supported_engines for e in ("x86", "fbgemm"))


def quantize_int8(w: torch.Tensor, chunk: int = 4096) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric per-output-channel int8: ``w ~= q * scale[:, None]``, |error| <= scale / 2 per entry.
    Row blocks of ``chunk`` keep the float temporaries small (a 151936-row head in one piece would
    hold several fp32 copies of 0.9 GB at once)."""
    q = torch.empty(w.shape, dtype=torch.int8)
    scale = torch.empty(w.shape[0], dtype=torch.float32)
    for i in range(0, w.shape[0], chunk):
        b = w[i: i + chunk].detach().float()
        s = (b.abs().amax(1) / 127).clamp(min=1e-12)
        q[i: i + chunk] = torch.clamp(torch.round(b / s[:, None]), -127, 127).to(torch.int8)
        scale[i: i + chunk] = s
    return q, scale


@contextlib.contextmanager
def _fbgemm():
    # prepacking under the "x86" engine may pick oneDNN's int8 kernels, measured 1.5-2x slower than
    # fbgemm's at 1-21 rows here; the packed object then keeps its kernel whatever the engine later is
    old = torch.backends.quantized.engine
    if "fbgemm" in torch.backends.quantized.supported_engines:
        torch.backends.quantized.engine = "fbgemm"
    try:
        with warnings.catch_warnings():  # torch.ao's quantised tensors are deprecated in favour of torchao
            warnings.simplefilter("ignore", UserWarning)
            yield
    finally:
        torch.backends.quantized.engine = old


def _pack_int8(w: torch.Tensor, b: torch.Tensor | None, reduce_range: bool):
    q, scale = quantize_int8(w)
    with _fbgemm():
        qw = torch._make_per_channel_quantized_tensor(q, scale.double(), torch.zeros_like(scale, dtype=torch.long), 0)
        # the layer keeps its activation range: the CPU is asked once, at load, not on every decode step
        return torch.ops.quantized.linear_prepack(qw, None if b is None else b.float()), w.dtype, reduce_range


def int8_reduce_range() -> bool:
    """Whether activations must be quantised to 7 bits: True on a CPU without AVX512-VNNI.

    Why: there fbgemm multiplies uint8 activations by int8 weights with ``vpmaddubsw``, which adds each
    pair of products into an int16 with saturation (2 x 255 x 127 > 32767). Full-range activations
    saturated on a laptop-class AVX2 CPU: 5-7 % error per layer, and SmolLM2's greedy text became word
    salad ("foreforerenceing up hisfingrence"). 7-bit activations (2 x 127 x 127 fits) cost about twice the
    rounding error; VNNI's ``vpdpbusd`` accumulates in int32, so the full range is kept there. A torch
    that cannot say (the probe is private) gets the safe choice."""
    probe = getattr(torch.cpu, "_is_vnni_supported", None)
    try:
        return not (probe is not None and probe())
    except Exception:  # pragma: no cover - a torch whose probe fails: the choice that never saturates
        return True


def _int8_linear(x: torch.Tensor, packed) -> torch.Tensor:
    # activations are quantised per call (dynamic, per tensor, asymmetric uint8) and the int32
    # accumulator is rescaled to fp32 by fbgemm; we hand back the model's dtype
    w, dtype, reduce_range = packed
    shape = x.shape
    y = torch.ops.quantized.linear_dynamic(x.reshape(-1, shape[-1]).float(), w, reduce_range)
    return y.reshape(*shape[:-1], y.shape[-1]).to(dtype)


#: a call with at most this many rows runs int8, a larger one the float kernel. Measured on the
#: project's Zen 4 (2 threads, Qwen-1.5B shapes, docs/design-notes.md section 4): fbgemm int8 is 2-3x
#: bf16 at 1 row, 1.6-1.9x at 21 rows (k+1) on the MLP and head matrices, and slower from ~60 rows on
#: (0.5-0.9x at 63, 0.3-0.6x at a 500-token prefill), where oneDNN's bf16 kernel is compute-efficient.
INT8_MAX_ROWS = 40


def _pack_dual(w: torch.Tensor, b: torch.Tensor | None, reduce_range: bool):
    packed = packing_available(w.dtype)
    flt = torch.ops.mkldnn._reorder_linear_weight(w) if packed else w.clone()
    return _pack_int8(w, b, reduce_range), (packed, flt, b)


def _dual_linear(x: torch.Tensor, p) -> torch.Tensor:
    q8, (packed, w, b) = p
    if x.numel() // x.shape[-1] <= INT8_MAX_ROWS:
        return _int8_linear(x, q8)
    return _packed_linear(x, w, b) if packed else torch.nn.functional.linear(x, w, b)


def _int8able(m) -> bool:
    return isinstance(m, torch.nn.Linear) and m.weight.device.type == "cpu" and m.weight.numel() > 0


def quantize_linears_int8(model: torch.nn.Module) -> int:
    """Run every ``nn.Linear`` of ``model`` as int8
    weights x dynamically quantised int8 activations (fbgemm) on calls of at most
    :data:`INT8_MAX_ROWS` rows (decode steps: greedy and k+1 sampled rows) and as the float kernel
    (packed bf16 where native) on larger ones (prefills), fused with siblings like
    :func:`pack_linears`; the plain float weights are freed. The lm_head is left alone when it is tied
    to the input embedding (the lookup still needs the float table)."""
    tied = _tied_head(model)
    pack = functools.partial(_pack_dual, reduce_range=int8_reduce_range())  # one question to the CPU a model
    return _install(model, lambda m: _int8able(m) and m is not tied, pack, _dual_linear, drop_weights=lambda m: True)


def _tied_head(model) -> torch.nn.Module | None:
    """The output head when it shares its weight with the input embedding (the lookup needs that float
    table, so it is never freed), else None."""
    out = getattr(model, "get_output_embeddings", lambda: None)()
    inp = getattr(model, "get_input_embeddings", lambda: None)()
    if out is not None and inp is not None and out.weight.data_ptr() == inp.weight.data_ptr():
        return out
    return None


def unpack_linears(model: torch.nn.Module) -> int:
    """Undo :func:`pack_linears` (drops the packed copies)."""
    n = 0
    for m in model.modules():
        if hasattr(m, _ATTR) and m.weight.numel() == 0:
            raise ValueError("these linears were packed with their plain weights freed; load the model with "
                             "packed_linear=False to switch between packed and plain")
        if hasattr(m, _ATTR):
            delattr(m, _ATTR)
            del m.forward  # the instance attribute; the class's forward is visible again
            n += 1
    return n
