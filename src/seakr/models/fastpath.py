"""One decode step of a Llama/Qwen2-family model, run outside transformers' module machinery.

Why: after packing the weights (kernels.py), SmolLM2's batch-1 decode step spent ~60 % of its time
outside the matmuls: ``nn.Module.__call__`` bookkeeping, keyword plumbing, mask construction and
output dataclasses around ~12 module calls per layer. This step calls the same parameters and the
same tensor operations in the same order (so results are bit-identical to transformers' forward
through our shared-prefix attention, which ``tests/models/test_fastpath.py`` checks), reads the state
vector directly instead of through a forward hook, and computes logits only for the last position.

Covers ``model_type`` llama and qwen2 (SmolLM2, Qwen2.5) with RMSNorm + SiLU-gated MLP; anything
else (Gemma's scaled embeddings and extra norms, Qwen3's q/k norms ...) returns None from
:func:`build` and keeps transformers' forward.
"""

from __future__ import annotations

import torch

SUPPORTED = ("llama", "qwen2")


def _rms(x: torch.Tensor, norm) -> torch.Tensor:
    # exactly transformers' LlamaRMSNorm / Qwen2RMSNorm, op for op
    dt = x.dtype
    x = x.to(torch.float32)
    var = x.pow(2).mean(-1, keepdim=True)
    x = x * torch.rsqrt(var + norm.variance_epsilon)
    return norm.weight * x.to(dt)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class FastDecoder:
    """``step(ids, pos, state, capture)`` -> (last-position logits in fp32, captured state or None)."""

    def __init__(self, model, state_layer: int, state_source: str):
        self.inner = model.model
        self.layers = list(self.inner.layers)
        self.head = model.lm_head
        self.taps = [(state_layer, state_source)]  # where states are read; HFLanguageModel.probing widens it
        a = self.layers[0].self_attn
        self.head_dim = a.head_dim

    def step(self, ids: torch.Tensor, pos: torch.Tensor, state, capture: bool):
        B = ids.shape[0]
        D = self.head_dim
        h = self.inner.embed_tokens(ids[:, None])  # (B, 1, d)
        cos, sin = self.inner.rotary_emb(h, pos[:, None])  # (B, 1, D)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # broadcast over heads: (B, 1, 1, D)
        caps = {}
        want = {li for li, _ in self.taps} if capture else ()
        for li, layer in enumerate(self.layers):
            a, m = layer.self_attn, layer.mlp
            x = _rms(h, layer.input_layernorm)
            # .forward, not __call__: these are plain (possibly packed) linears with no hooks of ours
            q = a.q_proj.forward(x).view(B, 1, -1, D).transpose(1, 2)
            k = a.k_proj.forward(x).view(B, 1, -1, D).transpose(1, 2)
            v = a.v_proj.forward(x).view(B, 1, -1, D).transpose(1, 2)
            q = (q * cos) + (_rotate_half(q) * sin)
            k = (k * cos) + (_rotate_half(k) * sin)
            o = state.attend(li, q, k, v, a.scaling)  # (B, 1, H, D)
            h = h + a.o_proj.forward(o.reshape(B, 1, -1))
            x = _rms(h, layer.post_attention_layernorm)
            y = m.down_proj.forward(m.act_fn(m.gate_proj.forward(x)) * m.up_proj.forward(x))
            h = h + y
            if li in want:
                caps[li, "mlp"], caps[li, "residual"] = y, h  # references: only the tapped ones are copied below
        h = _rms(h, self.inner.norm)
        return self.head.forward(h[:, -1, :]).float(), stack_taps([caps[t] for t in self.taps]) if capture else None


def stack_taps(outs: list[torch.Tensor]) -> torch.Tensor:
    """The last position of each tapped output, in fp32: (B, d) for one tap, (B, taps, d) for several."""
    last = [o[:, -1, :].float() for o in outs]
    return last[0] if len(last) == 1 else torch.stack(last, 1)


def build(model, state_layer: int, state_source: str) -> FastDecoder | None:
    """A :class:`FastDecoder` for ``model``, or None where this step would not match its forward."""
    cfg = model.config
    if getattr(cfg, "model_type", None) not in SUPPORTED or getattr(cfg, "hidden_act", None) != "silu":
        return None
    if getattr(cfg, "mlp_bias", False) or any(t != "full_attention" for t in (getattr(cfg, "layer_types", None) or [])):
        return None
    if not hasattr(model, "model") or not hasattr(model, "lm_head"):
        return None
    if getattr(model.lm_head, "bias", None) is not None:
        return None
    for layer in model.model.layers:
        a, m = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
        if a is None or m is None or not all(hasattr(a, n) for n in ("q_proj", "k_proj", "v_proj", "o_proj", "scaling",
                                                                     "head_dim")):
            return None
        if not all(hasattr(m, n) for n in ("gate_proj", "up_proj", "down_proj", "act_fn")):
            return None
        if not hasattr(layer.input_layernorm, "variance_epsilon") or hasattr(a, "q_norm"):
            return None
    if not hasattr(model.model.norm, "variance_epsilon"):
        return None
    return FastDecoder(model, state_layer, state_source)
