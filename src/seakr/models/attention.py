"""Decode-time attention that shares each prompt's KV cache across all of its rows.

Why: SeaKR decodes k=20 (and on re-rank N*k=60) continuations of the *same* prompt. Copying the
prompt's keys/values 20 times and growing them with ``torch.cat`` every step (transformers'
``DynamicCache``) cost 52 % of decode time in our profile, and padded SDPA over the copies another
34 %; the matmuls themselves were 9 %. Here every prompt keeps one copy of its prompt KV; each row
owns only a small pre-allocated buffer for the tokens it generates. Per layer and step::

    scores = [ q . K_prompt(row's prompt) | q . K_generated(row) ]  -> one softmax -> weighted V

computed in float32 (grouped-query heads broadcast, never materialised). Registered with
transformers' ``AttentionInterface`` under the name ``"seakr"``; a forward that is not given a
``seakr_state`` (plain ``model(...)`` calls) runs SDPA, so the model behaves exactly as before.
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

NAME = "seakr"


def _fp32(x, transpose: bool) -> torch.Tensor:
    """One float32 copy of a (kv_heads, L, d) tensor or of segments of one along L; (kv_heads, d, L) if transposed."""
    segs = x if isinstance(x, (list, tuple)) else [x]
    kvh, d, L = segs[0].shape[0], segs[0].shape[-1], sum(s.shape[-2] for s in segs)
    shape = (kvh, d, L) if transpose else (kvh, L, d)
    out = torch.empty(shape, device=segs[0].device)
    a = 0
    for s in segs:
        n = s.shape[-2]
        if transpose:
            out[:, :, a : a + n].copy_(s.transpose(1, 2))
        else:
            out[:, a : a + n].copy_(s)
        a += n
    return out


class SharedPrefixState:
    """Per-call decode state: prompt KV per (layer, prompt), generated KV per (layer, row)."""

    def __init__(self, prompt_kv: list[list[tuple]], row_prompt: list[int], max_new: int):
        # prompt_kv[j][layer] = (K, V), each a (kv_heads, L_j, d) tensor or a list of such segments along
        # L (a cached prefix and the prompt's own tokens); kept in float32 for the softmax, joined in
        # that one conversion copy. K stored transposed, (kv_heads, d, L), so q @ K^T is a plain
        # batched matmul with no per-step copy.
        n_layers = len(prompt_kv[0])
        self.pk = [[_fp32(prompt_kv[j][li][0],
                          transpose=True) for j in range(len(prompt_kv))] for li in range(n_layers)]
        self.pv = [[_fp32(prompt_kv[j][li][1],
                          transpose=False) for j in range(len(prompt_kv))] for li in range(n_layers)]
        kvh, d = self.pk[0][0].shape[0], self.pk[0][0].shape[1]
        B = len(row_prompt)
        if any(x > y for x, y in zip(row_prompt, row_prompt[1:])):
            raise ValueError("rows must be grouped by prompt (row_prompt non-decreasing)")
        # Batch position == buffer row: rows that finish are compacted away in select(), so a step
        # writes and reads its own tokens with plain slices (no per-step gather of whole buffers).
        dev = self.pk[0][0].device
        self.gk = [torch.zeros(B, kvh, max_new + 1, d, device=dev) for _ in range(n_layers)]
        self.gv = [torch.zeros(B, kvh, max_new + 1, d, device=dev) for _ in range(n_layers)]
        self.row_prompt = list(row_prompt)
        self.t = 0  # number of generated tokens already written (position of the next write)
        self._groups()

    def _groups(self):
        # each prompt's rows are one contiguous slice of the batch (select keeps the order)
        rp = self.row_prompt
        self.groups = [(j, rp.index(j), len(rp) - rp[::-1].index(j)) for j in sorted(set(rp))]

    def select(self, keep: torch.Tensor) -> None:
        """Keep only these batch positions (rows that finished leave the batch), in increasing order."""
        t = self.t  # positions 0..t-1 hold generated tokens; t is the next write
        for bufs in (self.gk, self.gv):
            for i, x in enumerate(bufs):
                y = x.new_zeros(len(keep), *x.shape[1:])
                y[:, :, :t] = x[keep, :, :t]  # only the tokens written so far
                bufs[i] = y
        self.row_prompt = [self.row_prompt[int(b)] for b in keep]
        self._groups()

    def _own(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write this step's K, V at position t; the rows' own tokens so far (views, t + 1 of them)."""
        t = self.t
        gk, gv = self.gk[layer], self.gv[layer]
        gk[:, :, t] = k[:, :, 0]
        gv[:, :, t] = v[:, :, 0]
        return gk[:, :, : t + 1], gv[:, :, : t + 1]

    def _own_scores(self, sg: torch.Tensor) -> torch.Tensor:
        return sg

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
        B, H, T, D = q.shape
        assert T == 1, "shared-prefix attention handles one new token per row"
        kvh = k.shape[1]
        g = H // kvh
        kg, vg = self._own(layer, k, v)  # (B, kvh, S, d): each row's own tokens
        qf = (q[:, :, 0].float() * scale).reshape(B, kvh, g, D)  # scaled once here, not every score
        sg = self._own_scores(torch.matmul(qf, kg.transpose(-1, -2)))  # (B, kvh, g, S)
        outs = []
        for j, lo, hi in self.groups:
            Kt, V = self.pk[layer][j], self.pv[layer][j]  # (kvh, d, L), (kvh, L, d), shared by the rows
            qj, sgj, vgj = qf[lo:hi], sg[lo:hi], vg[lo:hi]
            n = hi - lo
            # fold the rows into the matmul's M dimension: one (n*g x d) @ (d x L) product per kv head
            sp = torch.bmm(qj.permute(1, 0, 2, 3).reshape(kvh, n * g, D), Kt)  # (kvh, n*g, L)
            sp = sp.view(kvh, n, g, -1).permute(1, 0, 2, 3)  # (n, kvh, g, L)
            m = torch.maximum(sp.amax(-1, keepdim=True), sgj.amax(-1, keepdim=True))
            ep, eg = sp.sub_(m).exp_(), (sgj - m).exp_()  # in place over the big prompt scores
            den = ep.sum(-1, keepdim=True) + eg.sum(-1, keepdim=True)
            op = torch.bmm(ep.permute(1, 0, 2, 3).reshape(kvh, n * g, -1), V).view(kvh, n, g, D).permute(1, 0, 2, 3)
            outs.append((op + torch.matmul(eg, vgj)) / den)
        out = outs[0] if len(outs) == 1 else torch.cat(outs, 0)
        return out.reshape(B, H, D)[:, None].to(q.dtype)  # (B, T=1, H, D), as transformers expects


class StaticShapeState(SharedPrefixState):
    """The same attention with every shape fixed for the whole call, so a CUDA graph can replay the step:
    the write position is a device tensor (``t_index``, set before each step), and the scores run over
    each row's whole generated-token buffer with the positions not yet written masked out (exp(-inf) = 0:
    the same softmax). Rows never leave the batch here; the graphed backend maps live rows to slots."""

    def __init__(self, prompt_kv, row_prompt, max_new: int):
        super().__init__(prompt_kv, row_prompt, max_new)
        dev = self.gk[0].device
        self.t_index = torch.zeros(1, dtype=torch.long, device=dev)
        self._positions = torch.arange(max_new + 1, device=dev)

    def _own(self, layer, k, v):
        gk, gv = self.gk[layer], self.gv[layer]
        gk.index_copy_(2, self.t_index, k.to(gk.dtype))  # the buffers are float32, as the slice writes cast
        gv.index_copy_(2, self.t_index, v.to(gv.dtype))
        return gk, gv

    def _own_scores(self, sg):
        return sg.masked_fill(self._positions > self.t_index, -float("inf"))

    def select(self, keep) -> None:  # pragma: no cover - the graphed backend keeps every slot
        raise RuntimeError("a static-shape state keeps its rows; map live rows to slots instead")


def attend_with_lse(q, k, v, *, causal: bool, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention output (B, H, T, D) and the log-sum-exp of each query's scores (B, H, T).

    On CPU, the flash kernel returns both; elsewhere (CUDA, ...) the same numbers in plain float32
    matmuls, so the merge below runs on any device."""
    if q.device.type == "cpu":
        o, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, is_causal=causal, scale=scale)[:2]
        return o, lse
    return attend_with_lse_portable(q, k, v, causal=causal, scale=scale)


def attend_with_lse_portable(q, k, v, *, causal: bool, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    s = torch.matmul(q.float(), k.float().transpose(-1, -2)) * scale
    if causal:
        T, S = s.shape[-2:]
        s = s.masked_fill(torch.ones(T, S, dtype=torch.bool, device=s.device).triu(S - T + 1), -float("inf"))
    lse = torch.logsumexp(s, -1)
    return torch.matmul(torch.softmax(s, -1), v.float()).to(q.dtype), lse


class CachedPrefixPrefill:
    """Prefill state for the tokens that follow a cached prefix: attend over the prefix's KV in place.

    Why: through transformers' ``DynamicCache`` a ~100-token suffix after a ~1,700-token cached prefix
    concatenated the prefix KV into new tensors in every layer, copied it once more per query head
    (``repeat_kv``: a mask rules out SDPA's grouped-query path) and ran SDPA with a materialised
    offset-causal mask: 72 % of the call was attention and copies, the linears 21 % (SmolLM2 profile).
    Here each layer runs two flash-attention products without a mask and merges them by their
    log-sum-exp: the suffix's queries against the whole prefix (query heads folded into the rows of
    their KV head, so no key is copied) and against the suffix's own keys (square, plain causal).
    The suffix's keys/values are kept per layer (:attr:`kv`) for the decode that follows."""

    def __init__(self, prefix_kv: list[tuple[torch.Tensor, torch.Tensor]]):
        self.prefix_kv = prefix_kv  # per layer (K, V), each (1, kv_heads, P, d), shared, never written
        self.kv: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * len(prefix_kv)

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
        B, H, T, D = q.shape
        kvh = k.shape[1]
        g = H // kvh
        self.kv[layer] = (k, v)
        pk, pv = self.prefix_kv[layer]
        # all T queries see every prefix key: no mask, GQA by folding the g query heads into the rows
        o1, l1 = attend_with_lse(q.reshape(B, kvh, g * T, D), pk, pv, causal=False, scale=scale)
        # the suffix's own keys: square and causal (copying these T keys per head is cheap)
        o2, l2 = attend_with_lse(q, repeat_kv(k, g), repeat_kv(v, g), causal=True, scale=scale)
        l1 = l1.reshape(B, H, T, 1)
        l2 = l2.reshape(B, H, T, 1)
        m = torch.maximum(l1, l2)
        w1, w2 = (l1 - m).exp_(), (l2 - m).exp_()
        out = (o1.reshape(B, H, T, D).float() * w1 + o2.float() * w2) / (w1 + w2)
        return out.transpose(1, 2).to(q.dtype)  # (B, T, H, D), as transformers expects


def text_config(model):
    """The config of the model's text decoder: the model's own, or a multimodal checkpoint's text part (Gemma-3
    from 4B up and Gemma-3n load as image-text models through ``AutoModelForCausalLM``, their depth and widths
    in ``text_config``)."""
    return model.config.get_text_config(decoder=True)


def _attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, seakr_state=None, **kwargs):
    # The decode/prefill state travels as an argument of the forward (transformers passes unknown
    # keyword arguments down to the attention function): no slot to set and clear around each call.
    if seakr_state is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    return seakr_state.attend(module.layer_idx, query, key, value, scale), None


class _Reached:
    """A state that notes which layers' attention it reached, and attends plainly (causal, over the call's own
    tokens): what :func:`install` runs one short forward with."""

    def __init__(self):
        self.layers: set[int] = set()

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
        self.layers.add(layer)
        g = q.shape[1] // k.shape[1]
        return attend_with_lse(q, repeat_kv(k, g), repeat_kv(v, g), causal=True, scale=scale)[0].transpose(1, 2)


def reaches_every_layer(model) -> bool:
    """Whether the state passed to the model's forward reaches our attention in every layer. A model whose
    attention is its own (XGLM: a ``q_proj`` and a ``layer_idx`` per layer, its own product) or whose blocks drop
    the forward's extra arguments (Nemotron's) never runs ours, and its prefix could not be reused. Asked of the
    model itself: one forward of two tokens."""
    reached = _Reached()
    with torch.inference_mode():
        model(input_ids=torch.zeros(1, 2, dtype=torch.long, device=model.device), use_cache=False,
              seakr_state=reached)
    return reached.layers == set(range(text_config(model).num_hidden_layers))


def has_sliding_window(cfg) -> bool:
    """Whether some layer attends over a window of the last tokens only: as its ``layer_types`` say, or, for
    configs without them, as a ``sliding_window`` its attention applies does (Mistral-7B-v0.1's 4096: past the
    window, full attention is another model's). Any layer kind but full attention counts: Llama 4's
    ``chunked_attention`` layers attend within chunks, which full attention does not."""
    types = getattr(cfg, "layer_types", None)
    if types:
        return any(t != "full_attention" for t in types)
    return bool(getattr(cfg, "sliding_window", None)) and getattr(cfg, "use_sliding_window", True) is not False


def supports(model) -> bool:
    """Whether this attention can stand in for the model's: no sliding-window layers, no logit soft-capping, keys
    and values cached per head (not a latent), and one attention module with a ``layer_idx`` per decoder layer
    (whether it is reached is :func:`reaches_every_layer`'s to tell)."""
    cfg = text_config(model)
    if has_sliding_window(cfg):
        return False
    if getattr(cfg, "attn_logit_softcapping", None):
        return False
    if getattr(cfg, "kv_lora_rank", None):  # multi-head latent attention (DeepSeek-V2/V3, Kimi): the cache holds
        return False                        # the compressed latent, not each head's keys (it failed at decode)
    n = sum(1 for m in model.modules() if hasattr(m, "layer_idx") and hasattr(m, "q_proj"))
    return n == cfg.num_hidden_layers


def install(model) -> bool:
    """Route ``model``'s attention through :func:`_attention` (plain calls still run SDPA). Returns
    False, changing nothing, for models this path does not cover (:func:`supports`) or does not reach."""
    if not supports(model):
        return False
    AttentionInterface.register(NAME, _attention)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    cfg = text_config(model)  # a multimodal model's image tower keeps its own
    before, cfg._attn_implementation = cfg._attn_implementation, NAME
    if not reaches_every_layer(model):
        cfg._attn_implementation = before
        return False
    return True
