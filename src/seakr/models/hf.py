"""Hugging Face causal LMs on CPU with SeaKR's state vector, in our own batched decode loop.

Why our own loop instead of ``transformers.generate``: one call must serve a greedy row and k sampled
rows of *several* prompts (the N re-rank candidates), read one layer's output at an EOS fed in place of
the stop-trigger token, and stop paying for a row as soon as it hits its stop string. The loop:

1. prefill each prompt once (its long demonstration prefix comes from a per-process KV cache);
2. lay the prompts' KV caches side by side, left-padded to the longest, one row per requested
   continuation (the prompt's KV is shared by copy, never re-prefilled: models.md §5);
3. decode all rows together; per step, take top-k *then* top-p (no full-vocabulary sort), record the
   chosen token's log-prob, the entropy and the logsumexp of the raw logits;
4. a row that hits a stop string / EOS / the token budget is fed EOS *instead of* its last token
   (the reference's ``_change_last_token``), the hooked layer's output at that step is its state
   vector, and the row leaves the batch.

Greedy rows are token-identical to ``transformers.generate(do_sample=False)`` (tested in fp32).
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from typing import Sequence

import numpy as np

from . import fastpath
from .attention import CachedPrefixPrefill, SharedPrefixState, install
from .base import Generation, GenerationConfig, Sample
from .kernels import pack_linears, packing_available
from .registry import DEFAULT_MODEL, resolve


def cpu_has_bf16() -> bool:
    """AVX512-BF16 or AMX: bf16 matmuls are fast here (measured ~2x for batched decode, models.md §6)."""
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def default_threads() -> int:
    # Physical cores: hyper-threads only add contention to memory-bound decode.
    n = os.cpu_count() or 1
    return max(1, int(os.environ.get("SEAKR_THREADS", n)))


def token_stats(logits, chosen_ids):
    """Per row: logsumexp of the raw logits, log-prob of the chosen token, entropy of the softmax.

    The entropy is ``lse - E_p[logit]`` with the expectation as one dot product per row: two passes
    over the vocabulary fewer than materialising log p and p*log p (2.4 vs 4.7 ms for 21 rows of
    SmolLM2's 49k vocabulary, 8.7 vs 15.5 ms for Qwen's 152k)."""
    import torch

    lse = torch.logsumexp(logits, -1)
    p = torch.softmax(logits, -1)
    ent = lse - torch.bmm(p[:, None, :], logits[:, :, None])[:, 0, 0]
    return lse, logits.gather(1, chosen_ids[:, None])[:, 0] - lse, ent


class HFLanguageModel:
    """A transformers causal LM behind the :class:`~seakr.models.base.LanguageModel` protocol.

    Args:
        model: registry name (``smollm2-135m``, ``qwen2.5-coder-0.5b`` ...), a ``.gguf`` file or a HF folder.
        dtype: ``"auto"`` (bf16 where the CPU has AVX512-BF16/AMX, else fp32), ``"float32"`` or ``"bfloat16"``.
        threads: torch intra-op threads (default: ``SEAKR_THREADS`` or the core count).
        state_layer: 0-based decoder layer whose output is the state vector; default ``L//2 - 1``
            (the reference's layer 15 of 32, "the middle layer").
        state_source: ``"mlp"`` (FFN sub-layer output, as the reference) or ``"residual"`` (the
            decoder layer's residual-stream output, an ablation).
        prefix_cache_size: how many demonstration prefixes keep their KV cache in memory.
        packed_linear: pre-pack bf16 weights into oneDNN's blocked layout (kernels.py): ``None``
            (default) packs where the CPU runs bf16 natively, ``False`` keeps ``F.linear``.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        dtype: str = "auto",
        threads: int | None = None,
        state_layer: int | None = None,
        state_source: str = "mlp",
        prefix_cache_size: int = 4,
        packed_linear: bool | None = None,
        _modules=None,
    ):
        import torch

        if state_source not in ("mlp", "residual"):
            raise ValueError(f"state_source must be 'mlp' or 'residual', not {state_source!r}")
        self._torch = torch
        torch.set_num_threads(threads or default_threads())
        if dtype == "auto":
            dtype = "bfloat16" if cpu_has_bf16() else "float32"
        if dtype not in ("float32", "bfloat16"):
            raise ValueError(f"dtype must be auto, float32 or bfloat16, not {dtype!r}")
        self.dtype = dtype
        t0 = time.time()
        if _modules is not None:  # an already-built (model, tokenizer), e.g. a tiny random model in tests
            self.model, self.tokenizer = _modules
            self.model = self.model.to(getattr(torch, dtype)).eval()
            self.name, self.source = getattr(self.model.config, "name_or_path", "custom") or "custom", {"name": "custom"}
        else:
            from transformers import AutoModelForCausalLM, AutoTokenizer
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()

            path, self.source = resolve(model)
            self.name = model
            self.tokenizer = AutoTokenizer.from_pretrained(path)
            self.model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype)).eval()
        if packed_linear is None:
            packed_linear = packing_available(getattr(torch, dtype))
        elif packed_linear and not packing_available(getattr(torch, dtype)):
            raise ValueError("packed_linear=True needs bfloat16 on a CPU where oneDNN runs bf16 natively")
        self.packed_linear = bool(packed_linear) and pack_linears(self.model) > 0
        self.load_seconds = time.time() - t0
        cfg = self.model.config
        self.num_layers = cfg.num_hidden_layers
        self.state_layer = self.num_layers // 2 - 1 if state_layer is None else state_layer
        if not 0 <= self.state_layer < self.num_layers:
            raise ValueError(f"state_layer {self.state_layer} outside 0..{self.num_layers - 1}")
        self.state_source = state_source
        eos = self.tokenizer.eos_token_id if self.tokenizer.eos_token_id is not None else cfg.eos_token_id
        self.eos_id = int(eos[0] if isinstance(eos, (list, tuple)) else eos)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.eos_id
        layers = self.model.get_decoder().layers
        self._sliding = "sliding_attention" in (getattr(cfg, "layer_types", None) or [])
        # Decode through shared-prefix attention where the architecture allows (attention.py);
        # SEAKR_ATTENTION=hf keeps transformers' own cache + SDPA path (used by equivalence tests).
        self._holder = install(self.model) if os.environ.get("SEAKR_ATTENTION", "shared") == "shared" else None
        # Decode steps outside transformers' module machinery where the architecture allows (fastpath.py)
        self._fast = fastpath.build(self.model, self.state_layer, state_source) if self._holder is not None else None
        target = layers[self.state_layer].mlp if state_source == "mlp" else layers[self.state_layer]
        self._capture = False
        self._captured = None
        target.register_forward_hook(self._hook)
        self._prefixes: OrderedDict[str, tuple] = OrderedDict()
        self._prefix_cache_size = prefix_cache_size
        self.stats = {"prefill_tokens": 0, "prefix_hits": 0, "decode_steps": 0, "generated_tokens": 0, "calls": 0}

    # ---------------------------------------------------------------- helpers
    def _hook(self, module, inputs, output):
        # Only the last position matters (decode steps feed one token per row): never keep all states.
        if self._capture:
            out = output[0] if isinstance(output, tuple) else output
            self._captured = out[:, -1, :].float()

    def encode(self, text: str, special: bool = True) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=special)

    def count_tokens(self, text: str) -> int:
        return len(self.encode(text))

    @property
    def chat_template(self) -> bool:
        return bool(getattr(self.tokenizer, "chat_template", None))

    def info(self) -> dict:
        return {
            "model": self.name,
            "dtype": self.dtype,
            "packed_linear": self.packed_linear,
            "fast_decode": self._fast is not None,
            "threads": self._torch.get_num_threads(),
            "layers": self.num_layers,
            "state_layer": self.state_layer,
            "state_source": self.state_source,
            "hidden_size": self.model.config.hidden_size,
            "vocab_size": self.model.config.vocab_size,
            "eos_id": self.eos_id,
            "source": self.source,
        }

    def _new_cache(self):
        from transformers import DynamicCache

        return DynamicCache(config=self.model.config)

    def _forward(self, ids, cache, **kw):
        torch = self._torch
        return self.model(input_ids=torch.tensor([ids]), past_key_values=cache, use_cache=True, logits_to_keep=1, **kw)

    def _prefix_entry(self, prefix: str):
        """(ids, [(k, v)] per layer, last logits) of a demonstration prefix, computed once per process."""
        hit = self._prefixes.get(prefix)
        if hit is not None:
            self._prefixes.move_to_end(prefix)
            self.stats["prefix_hits"] += 1
            return hit
        ids = self.encode(prefix, special=True)
        cache = self._new_cache()
        out = self._forward(ids, cache)
        self.stats["prefill_tokens"] += len(ids)
        entry = (ids, [(layer.keys, layer.values) for layer in cache.layers], out.logits[0, -1].float())
        self._prefixes[prefix] = entry
        while len(self._prefixes) > self._prefix_cache_size:
            self._prefixes.popitem(last=False)
        return entry

    def _prefill(self, prompt: str, prefix: str | None):
        """Return (n prompt tokens, n cached, [(k, v)] per layer, last-position logits) for one prompt."""
        torch = self._torch
        if prefix and not self._sliding:
            if not prompt.startswith(prefix):
                raise ValueError("prompt does not start with the given prefix")
            pids, kv, logits = self._prefix_entry(prefix)
            rest = self.encode(prompt[len(prefix) :], special=False)
            if not rest:
                return len(pids), len(pids), kv, logits
            self.stats["prefill_tokens"] += len(rest)
            P, T = len(pids), len(rest)
            if self._holder is not None:  # attend over the cached prefix in place (attention.py)
                st = CachedPrefixPrefill(kv)
                self._holder.state = st
                try:
                    out = self.model(input_ids=torch.tensor([rest]), position_ids=torch.arange(P, P + T)[None],
                                     use_cache=False, logits_to_keep=1)
                finally:
                    self._holder.state = None
                # the prompt's KV stays in two segments (prefix, suffix): the decode state joins them in the
                # one fp32 copy it makes anyway, and a call that takes no decode step never joins them
                segs = [([pk, k], [pv, v]) for (pk, pv), (k, v) in zip(kv, st.kv)]
                return P + T, P, segs, out.logits[0, -1].float()
            cache = self._new_cache()
            for i, (k, v) in enumerate(kv):  # shares the prefix tensors; update() concatenates into new ones
                cache.update(k, v, i)
            out = self._forward(rest, cache)
            return P + T, P, [(l.keys, l.values) for l in cache.layers], out.logits[0, -1].float()
        ids = self.encode(prompt, special=True)
        cache = self._new_cache()
        out = self._forward(ids, cache)
        self.stats["prefill_tokens"] += len(ids)
        return len(ids), 0, cache, out.logits[0, -1].float()

    # ---------------------------------------------------------------- API
    def token_strings(self, ids: Sequence[int]) -> list[str]:
        """The text each token contributes (for aligning token probabilities to words)."""
        out, prev = [], ""
        for i in range(len(ids)):  # decode prefixes: robust to multi-byte and space-marker tokens
            cur = self.tokenizer.decode(list(ids[: i + 1]), skip_special_tokens=True)
            out.append(cur[len(prev):] if cur.startswith(prev) else self.tokenizer.decode([ids[i]]))
            prev = cur
        return out

    def attention(self, text: str) -> tuple[list[int], "np.ndarray"]:
        """Token ids of ``text`` and the last layer's attention averaged over heads, (T, T) (DRAGIN)."""
        torch = self._torch
        ids = self.encode(text, special=False)
        impl = self.model.config._attn_implementation
        self.model.config._attn_implementation = "eager"  # the only implementation that returns weights
        try:
            with torch.inference_mode():
                out = self.model(input_ids=torch.tensor([ids]), output_attentions=True, use_cache=False)
        finally:
            self.model.config._attn_implementation = impl
        return ids, out.attentions[-1][0].float().mean(0).numpy()

    def next_token_logprobs(self, prompts: Sequence[str], options: Sequence[str]) -> list[dict[str, float]]:
        torch = self._torch
        res = []
        with torch.inference_mode():
            for p in prompts:
                _, _, _, logits = self._prefill(p, None)
                lp = torch.log_softmax(logits, -1)
                res.append({o: float(lp[self.encode(o, special=False)[0]]) for o in options})
        return res

    def generate(self, prompts: Sequence[str], config: GenerationConfig, *, prefix: str | None = None) -> list[Generation]:
        torch = self._torch
        t0 = time.time()
        self.stats["calls"] += 1
        gen = torch.Generator()
        gen.manual_seed(config.seed if config.seed is not None else int.from_bytes(os.urandom(4), "little"))
        results: list[Generation] = []
        with torch.inference_mode():
            prefilled = [self._prefill(p, prefix) for p in prompts]
            # Sliding-window caches cannot be left-padded side by side: decode those prompts one by one.
            groups = [list(range(len(prompts)))] if not self._sliding else [[i] for i in range(len(prompts))]
            out: dict[int, Generation] = {}
            for g in groups:
                out.update(self._decode([prefilled[i] for i in g], g, config, gen))
            results = [out[i] for i in range(len(prompts))]
        dt = time.time() - t0
        for r in results:
            r.seconds = dt / max(1, len(results))
        return results

    def _decode(self, prefilled, idx, cfg: GenerationConfig, gen) -> dict[int, Generation]:
        torch = self._torch
        kinds = ([True] if cfg.greedy else []) + [False] * cfg.n
        if not kinds:
            raise ValueError("nothing to generate: greedy=False and n=0")
        R = len(kinds)
        B = R * len(prefilled)
        lens = [p[0] for p in prefilled]
        Lmax = max(lens)
        shared = self._holder is not None
        if shared:
            # one copy of each prompt's KV, shared by its R rows (attention.py)
            def kv_of(kv):  # per layer ([K segments], [V segments]), each (kv_heads, L_s, d)
                if not isinstance(kv, list):
                    kv = [(l.keys, l.values) for l in kv.layers]
                seg = lambda x: [t[0] for t in x] if isinstance(x, list) else [x[0]]  # noqa: E731
                return [(seg(k), seg(v)) for k, v in kv]

            def build_state(alive):
                # Built at the first decode step, for the rows still alive: a call that ends on the
                # prefill's own token (max_new_tokens=1, or every row stopping at once) never pays for
                # converting the prompt KV, and finished prompts' KV is never converted at all.
                used = sorted({r // R for r in alive})
                return SharedPrefixState([kv_of(prefilled[j][2]) for j in used], [used.index(r // R) for r in alive],
                                         cfg.max_new_tokens)

            sps = None
            cache = mask = None
        elif self._sliding:
            cache = prefilled[0][2]
            cache.batch_repeat_interleave(R)
        else:  # lay the prompt caches side by side (left padding), R rows per prompt
            cache = self._new_cache()
            n_layers = len(prefilled[0][2]) if isinstance(prefilled[0][2], list) else len(prefilled[0][2].layers)
            for li in range(n_layers):
                ks, vs = [], []
                for (L, _, kv, _) in prefilled:
                    k, v = kv[li] if isinstance(kv, list) else (kv.layers[li].keys, kv.layers[li].values)
                    if L < Lmax:
                        pad = (0, 0, Lmax - L, 0)
                        k, v = torch.nn.functional.pad(k, pad), torch.nn.functional.pad(v, pad)
                    ks.append(k.expand(R, -1, -1, -1))
                    vs.append(v.expand(R, -1, -1, -1))
                cache.update(torch.cat(ks, 0), torch.cat(vs, 0), li)
        if not shared:
            mask = torch.ones(B, Lmax, dtype=torch.long)
            for j, L in enumerate(lens):
                mask[j * R : (j + 1) * R, : Lmax - L] = 0
        pos = torch.tensor([L for L in lens for _ in range(R)], dtype=torch.long)
        logits = torch.stack([p[3] for p in prefilled]).repeat_interleave(R, 0)
        greedy_row = torch.tensor(kinds * len(prefilled))

        def drop_rows(keep, mask, *row_tensors):
            """Keep only these batch positions in the KV state and in every per-row tensor."""
            sel = torch.tensor(keep)
            if shared:
                if sps is not None:
                    sps.select(sel)
            else:
                for layer in cache.layers:
                    layer.batch_select_indices(sel)
                mask = mask[sel]
            return (mask, *(x[sel] for x in row_tensors))

        # --- per-row bookkeeping (python lists indexed by original row id)
        toks: list[list[int]] = [[] for _ in range(B)]
        lps: list[list[float]] = [[] for _ in range(B)]
        ents: list[list[float]] = [[] for _ in range(B)]
        lses: list[list[float]] = [[] for _ in range(B)]
        finish = [""] * B
        text = [""] * B
        state: list[np.ndarray | None] = [None] * B
        alive = list(range(B))  # original row ids currently in the batch, in batch order
        stops = tuple(s for s in cfg.stop if s)
        want_state = [cfg.with_states and not kinds[r % R] for r in range(B)]
        while alive:
            # choose the next token of every live row from its logits
            nxt = self._choose(logits, greedy_row[alive], cfg, gen)
            lse, chosen, ent = token_stats(logits, nxt)
            feed = nxt.clone()
            keep = []
            for b, r in enumerate(alive):
                t = int(nxt[b])
                done = None
                if t == self.eos_id:
                    done = "eos"
                else:
                    toks[r].append(t)
                    lps[r].append(float(chosen[b]))
                    ents[r].append(float(ent[b]))
                    lses[r].append(float(lse[b]))
                    if stops:
                        s = self.tokenizer.decode(toks[r], skip_special_tokens=True)
                        cut = min((i for i in (s.find(x) for x in stops) if i >= 0), default=-1)
                        if cut >= 0:
                            text[r], done = s[:cut], "stop"
                            # the trigger token is not part of the continuation (replaced by EOS below)
                            toks[r].pop(), lps[r].pop(), ents[r].pop(), lses[r].pop()
                    if done is None and len(toks[r]) >= cfg.max_new_tokens:
                        done = "length"
                if done:
                    finish[r] = done
                    if done != "stop":
                        text[r] = self.tokenizer.decode(toks[r], skip_special_tokens=True)
                    if want_state[r]:
                        feed[b] = self.eos_id  # one more step with EOS in place of the last token
                        keep.append(b)
                else:
                    keep.append(b)
            if not keep:
                break
            # rows without a pending state read leave the batch now; pending ones leave after this step
            if len(keep) < len(alive):
                mask, pos, feed = drop_rows(keep, mask, pos, feed)
                alive = [alive[b] for b in keep]
            self._capture = cfg.with_states
            if shared and sps is None:
                sps = build_state(alive)
            if self._fast is not None:
                logits, captured = self._fast.step(feed, pos, sps, cfg.with_states)
            elif shared:
                self._holder.state = sps
                try:
                    out = self.model(input_ids=feed[:, None], position_ids=pos[:, None], use_cache=False)
                finally:
                    self._holder.state = None
            else:
                mask = torch.cat([mask, torch.ones(len(alive), 1, dtype=torch.long)], 1)
                out = self.model(
                    input_ids=feed[:, None],
                    attention_mask=mask,
                    position_ids=pos[:, None],
                    past_key_values=cache,
                    use_cache=True,
                )
            self._capture = False
            self.stats["decode_steps"] += 1
            pos = pos + 1
            if shared:
                sps.t += 1
            if self._fast is None:  # the fast step returned both already
                logits = out.logits[:, -1].float()
                captured = self._captured
            still = []
            for b, r in enumerate(alive):
                if finish[r]:
                    state[r] = captured[b].numpy().copy()
                else:
                    still.append(b)
            if len(still) < len(alive):
                if not still:
                    break
                mask, pos, logits = drop_rows(still, mask, pos, logits)
                alive = [alive[b] for b in still]
        # --- assemble results
        res: dict[int, Generation] = {}
        for j, (L, cached, _, _) in enumerate(prefilled):
            g = Generation(prompt_tokens=L, cached_prefix_tokens=cached)
            for q in range(R):
                r = j * R + q
                self.stats["generated_tokens"] += len(toks[r])
                s = Sample(text[r], toks[r], lps[r], ents[r], lses[r], finish[r] or "length", state[r])
                if kinds[q]:
                    g.greedy = s
                else:
                    g.samples.append(s)
            res[idx[j]] = g
        return res

    def _choose(self, logits, greedy_mask, cfg: GenerationConfig, gen):
        """Greedy rows: argmax. Sampled rows: temperature, then top-k, then top-p inside the top-k only."""
        torch = self._torch
        if cfg.ignore_eos:
            logits = logits.clone()
            logits[:, self.eos_id] = -float("inf")
        nxt = logits.argmax(-1)
        if bool(greedy_mask.all()):
            return nxt
        rows = (~greedy_mask).nonzero()[:, 0]
        lg = logits[rows]
        k = cfg.top_k if 0 < cfg.top_k < lg.shape[-1] else lg.shape[-1]
        vals, ids = torch.topk(lg, k, dim=-1)  # sorted descending; partial selection, no full sort
        # temperature after top-k: it keeps the order, so only k values per row get divided
        p = torch.softmax(vals / max(cfg.temperature, 1e-5), -1)
        if cfg.top_p < 1.0:
            excl = p.cumsum(-1) - p > cfg.top_p  # keep the smallest prefix whose mass reaches top_p
            p = p.masked_fill(excl, 0.0)
        pick = torch.multinomial(p, 1, generator=gen)[:, 0]
        nxt[rows] = ids.gather(1, pick[:, None])[:, 0]
        return nxt
