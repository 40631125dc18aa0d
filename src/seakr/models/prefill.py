"""Prefill: run a prompt once and keep what its decode starts from (its KV and last logits).

Methods send the same long demonstration prefix with every prompt, so its KV is computed once per
process (:class:`PrefixCache`, least recently used out) and each prompt prefills only what follows.
Each answer's last few prompts' KV is kept too (:class:`RecentPrompts`): a chain's next prompt repeats the last
one's demonstrations, kept passages and question, and its final answer's prompt is the last step's up to
"Answer:", so a prompt prefills only what no recent prompt of its answer began with.
With our attention installed (``in_place``), that suffix attends over the cached prefix's KV where it
lies (:class:`~seakr.models.attention.CachedPrefixPrefill`) and the prompt's KV stays in two segments
(prefix, suffix) that the decode state joins in the one float32 copy it makes anyway.

A prompt is prefilled in chunks of :data:`CHUNK` tokens, and a cancelled request (its client gone, its deadline
passed) stops between two chunks, so no prompt is one call nothing can interrupt. The chunks attend
over everything before them, so the KV and the logits are those of one pass (up to float rounding).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable

import torch

from .attention import CachedPrefixPrefill
from .base import check_cancelled, current_session
import inspect
import weakref

#: Tokens prefilled in one forward pass: a cancelled request stops within one chunk. On a 2-core AVX2 CPU (fp32) a
#: chunk took at most 2.6 s (SmolLM2-135M, 4k tokens of context) and 5.2 s (Qwen2.5-0.5B); chunks cost 1.03-1.13x
#: one pass (docs/performance.md, benchmarks/prefill_chunks.py).
CHUNK = 512


def cache_kwarg(model, cache) -> dict:
    """The key/value cache argument under the name this transformers version takes: ``cache`` since
    5.24 (``past_key_values`` is deprecated there and warns on every call), ``past_key_values`` before."""
    return {_CACHE_KW.get(type(model)) or _cache_name(type(model)): cache}


_CACHE_KW: dict[type, str] = {}


def _cache_name(cls: type) -> str:
    _CACHE_KW[cls] = "cache" if "cache" in inspect.signature(cls.forward).parameters else "past_key_values"
    return _CACHE_KW[cls]


#: per layer: ([K segments], [V segments]), each segment (1, kv_heads, L_s, head_dim), joined along L
LayerKV = tuple[list[torch.Tensor], list[torch.Tensor]]


@dataclass
class Prefilled:
    """One prompt after its prefill."""

    tokens: int  # prompt length in tokens
    cached: int  # of which were served from the prefix cache
    logits: torch.Tensor  # (vocab,) float32 logits at the last prompt position
    kv: list[LayerKV] | None = None  # the prompt's keys/values per layer
    cache: Any = None  # a transformers cache instead of ``kv`` (sliding-window models decode through it)
    ids: list[int] | None = None  # the prompt's tokens (a drafted call's guesses come from them)

    def layer_kv(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """One layer's (K, V) as single tensors (segments joined)."""
        ks, vs = self.kv[layer]
        return (ks[0], vs[0]) if len(ks) == 1 else (torch.cat(ks, -2), torch.cat(vs, -2))


@dataclass
class PrefixEntry:
    text: str
    ids: list[int]
    kv: list[tuple[torch.Tensor, torch.Tensor]]  # per layer (K, V), shared by every prompt, never written
    logits: torch.Tensor | None  # at its last token (None for a prefix cut short of its text, Prefiller._split)


class PrefixCache:
    """The KV of the last ``size`` prefixes, least recently used out."""

    def __init__(self, size: int):
        self.size = size
        self._entries: OrderedDict[str, PrefixEntry] = OrderedDict()

    def get(self, prefix: str) -> PrefixEntry | None:
        hit = self._entries.get(prefix)
        if hit is not None:
            self._entries.move_to_end(prefix)
        return hit

    def put(self, prefix: str, entry: PrefixEntry) -> None:
        self._entries[prefix] = entry
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)


class RecentPrompts:
    """The KV of each answer's last ``size`` prompts prefilled after a prefix, least recently used out: the entry
    whose tokens a new prompt begins with longest serves those tokens (a causal KV is the same for any text that
    follows it, up to the rounding of where the prefill was split). Only the prompts of the same answer serve each
    other, and each answer keeps its own (:func:`~seakr.models.base.prompt_session`): an answer's calls come in the
    same order each time it is asked, so what is served, and every rounding, is the same whatever was asked before
    or beside it; an answer's entries go with it. It holds references to the prompts' own tensors (the decode
    copies them, never writes them), and joins an entry's segments only when it serves."""

    def __init__(self, size: int):
        self.size = size
        self._sessions: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # session -> {prompt: (ids, done)}

    def put(self, prompt: str, ids: list[int], done: Prefilled) -> None:
        session = current_session()
        if self.size < 1 or done.kv is None or session is None:
            return
        entries = self._sessions.setdefault(session, OrderedDict())
        entries[prompt] = (ids, done)
        entries.move_to_end(prompt)
        while len(entries) > self.size:
            entries.popitem(last=False)

    def serve(self, ids: list[int], than: int) -> PrefixEntry | None:
        """The longest run of ``ids``' first tokens that a recent prompt holds, where it is longer than ``than``
        (what the prefix cache serves), as a prefix entry; at most all but the last token unless the prompt is
        one of them whole (its last logits are then known)."""
        best, ids_b, done_b = than, None, None
        session = current_session()
        for r_ids, done in self._sessions.get(session, {}).values() if session is not None else ():
            n = common_length(r_ids, ids)
            if n > best:
                best, ids_b, done_b = n, r_ids, done
        if done_b is None:
            return None
        whole = best == len(ids) == len(ids_b)
        n = best if whole else min(best, len(ids) - 1)
        if n <= than:
            return None
        kv = [(_first(ks, n), _first(vs, n)) for ks, vs in done_b.kv]
        return PrefixEntry("", ids[:n], kv, done_b.logits if whole else None)


def common_length(a: list[int], b: list[int]) -> int:
    """How many first tokens ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]: halve on slices compared in C
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if a[:mid] == b[:mid] else (lo, mid)
    return lo


def _first(segments: list[torch.Tensor], n: int) -> torch.Tensor:
    """The first ``n`` positions of a KV held in segments along L, as one tensor (a view where one segment holds
    them)."""
    if segments[0].shape[-2] >= n:
        return segments[0][:, :, :n]
    parts, left = [], n
    for s in segments:
        parts.append(s[:, :, :left])
        left -= parts[-1].shape[-2]
        if not left:
            break
    return torch.cat(parts, -2)


def _kv_of(cache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(layer.keys, layer.values) for layer in cache.layers]


class Prefiller:
    """``prefill(prompt, prefix)`` -> :class:`Prefilled`; counts prefilled tokens and prefix hits in ``stats``.

    Args:
        model: the transformers causal LM.
        encode: ``encode(text, special)`` -> token ids.
        in_place: our attention is installed: a suffix attends over the cached prefix in place.
        keep_cache: return the transformers cache itself (sliding-window models decode through it).
    """

    def __init__(self, model, encode: Callable[[str, bool], list[int]], *, in_place: bool, keep_cache: bool,
                 cache_size: int, stats: dict, context: int | None = None, recent: int = 4):
        self.model, self.encode, self.in_place, self.keep_cache = model, encode, in_place, keep_cache
        self.context = context  # the model's context window: longer prompts are refused before any work
        self.prefixes = PrefixCache(cache_size)
        self.recent = RecentPrompts(recent if in_place else 0)  # the in-place suffix attends over any entry
        self.stats = stats

    def clear(self) -> None:
        """Forget every cached prefix and recent prompt (a measurement that starts cold)."""
        self.prefixes = PrefixCache(self.prefixes.size)
        self.recent = RecentPrompts(self.recent.size)

    def _device(self):
        return self.model.device

    def _new_cache(self):
        from transformers import DynamicCache

        return DynamicCache(config=self.model.config)

    def _forward(self, ids: list[int], cache):
        """``ids`` through the model into ``cache``, :data:`CHUNK` tokens a pass; the last pass's output."""
        out = None
        for at in range(0, len(ids), CHUNK):
            check_cancelled()
            part = ids[at:at + CHUNK]
            self.stats["prefill_tokens"] += len(part)
            out = self.model(input_ids=torch.tensor([part], device=self._device()), use_cache=True, logits_to_keep=1,
                             **cache_kwarg(self.model, cache))
        return out

    def _fits(self, n: int) -> None:
        if self.context and n >= self.context:
            raise ValueError(f"prompt of {n} tokens does not fit the model's {self.context}-token context")

    def __call__(self, prompt: str, prefix: str | None, shared: PrefixEntry | None = None) -> Prefilled:
        """``shared``: the KV of a longer prefix this call's prompts have in common (:meth:`extend`)."""
        ids = self.encode(prompt, True)
        done = self._prefill(prompt, ids, prefix, shared)
        done.ids = ids
        return done

    def _prefill(self, prompt: str, ids: list[int], prefix: str | None, shared: PrefixEntry | None) -> Prefilled:
        # sliding-window layers keep only a window of the prefix: no prefix reuse for those models
        if not prefix or self.keep_cache:
            return self.whole(ids)
        if not prompt.startswith(prefix):
            raise ValueError("prompt does not start with the given prefix")
        entry = shared if shared is not None and prompt.startswith(shared.text) else self.prefix(prefix)
        self._fits(len(ids))
        entry, rest = self._best(entry, ids)
        P = len(entry.ids)
        if not P or (not rest and entry.logits is None):
            return self.whole(ids)
        if not rest:
            return Prefilled(P, P, entry.logits, kv=[([k], [v]) for k, v in entry.kv])
        suffix = self._in_place if self.in_place else self._through_cache
        done = suffix(entry, rest)
        self.recent.put(prompt, ids, done)
        return done

    def _best(self, entry: PrefixEntry, ids: list[int]) -> tuple[PrefixEntry, list[int]]:
        """(the cached tokens that serve the prompt ``ids`` longest: ``entry``'s or a recent prompt's, the rest)."""
        entry, rest = self._split(entry, ids)
        recent = self.recent.serve(ids, len(entry.ids))
        if recent is None:
            return entry, rest
        self.stats["prompt_hits"] = self.stats.get("prompt_hits", 0) + 1
        return recent, ids[len(recent.ids):]

    @staticmethod
    def _split(entry: PrefixEntry, ids: list[int]) -> tuple[PrefixEntry, list[int]]:
        """(the cached prefix as far as the whole prompt's tokens ``ids`` start with its tokens, the rest of
        ``ids``). The prompt is tokenized whole, so a prompt's tokens never depend on where its prefix was cut:
        tokenized apart, a GPT-2-style pre-tokenizer ends the prefix in one "\n\n" token where the whole prompt
        has "\n", "\n" before "Question" (SmolLM2: 72 of 80 prompts differed from their whole tokenization by a
        token). There the cache serves all but the prefix's last token: a causal KV is the same for any text
        that follows it."""
        n = 0
        for a, b in zip(entry.ids, ids):
            if a != b:
                break
            n += 1
        if n == len(entry.ids):
            return entry, ids[n:]
        return PrefixEntry(entry.text, entry.ids[:n], [(k[:, :, :n], v[:, :, :n]) for k, v in entry.kv], None), ids[n:]

    def whole(self, ids: list[int]) -> Prefilled:
        self._fits(len(ids))
        cache = self._new_cache()
        out = self._forward(ids, cache)
        logits = out.logits[0, -1].float()
        if self.keep_cache:
            return Prefilled(len(ids), 0, logits, cache=cache)
        return Prefilled(len(ids), 0, logits, kv=[([k], [v]) for k, v in _kv_of(cache)])

    def prefix(self, prefix: str) -> PrefixEntry:
        """The demonstration prefix's KV, computed once per process."""
        hit = self.prefixes.get(prefix)
        if hit is not None:
            self.stats["prefix_hits"] += 1
            return hit
        ids = self.encode(prefix, True)
        self._fits(len(ids))
        cache = self._new_cache()
        out = self._forward(ids, cache)
        entry = PrefixEntry(prefix, ids, _kv_of(cache), out.logits[0, -1].float())
        self.prefixes.put(prefix, entry)
        return entry

    def extend(self, prefix: str, longer: str) -> PrefixEntry | None:
        """The KV of ``longer`` (which starts with the cached ``prefix``), prefilled once on top of the
        prefix's KV, for the prompts of one call that share it (the re-rank candidates share the
        demonstrations, the kept passages and more). Not kept in the LRU: it is one call's. None
        where prefixes cannot be reused in place."""
        if self.keep_cache or not self.in_place or not longer.startswith(prefix) or len(longer) == len(prefix):
            return None
        ids = self.encode(longer, True)
        self._fits(len(ids))
        base, rest = self._best(self.prefix(prefix), ids)
        if not base.ids or not rest:
            return None
        part = self._in_place(base, rest)
        kv = [(torch.cat(ks, -2), torch.cat(vs, -2)) for ks, vs in part.kv]
        return PrefixEntry(longer, base.ids + rest, kv, part.logits)

    def _in_place(self, entry: PrefixEntry, rest: list[int]) -> Prefilled:
        """The suffix ``rest`` over the cached prefix, :data:`CHUNK` tokens a pass: each chunk attends over the
        prefix and the chunks before it (their KV joined once a chunk)."""
        P, T = len(entry.ids), len(rest)
        dev = self._device()
        done: list[tuple[list, list]] = [([], []) for _ in entry.kv]  # per layer, the suffix's KV so far
        for at in range(0, T, CHUNK):
            check_cancelled()
            part = rest[at:at + CHUNK]
            before = entry.kv if not at else [(torch.cat([pk, *ks], -2), torch.cat([pv, *vs], -2))
                                              for (pk, pv), (ks, vs) in zip(entry.kv, done)]
            st = CachedPrefixPrefill(before)
            self.stats["prefill_tokens"] += len(part)
            out = self.model(input_ids=torch.tensor([part], device=dev), use_cache=False, logits_to_keep=1,
                             position_ids=torch.arange(P + at, P + at + len(part), device=dev)[None], seakr_state=st)
            for (ks, vs), (k, v) in zip(done, st.kv):
                ks.append(k)
                vs.append(v)
        kv = [([pk, ks[0] if len(ks) == 1 else torch.cat(ks, -2)], [pv, vs[0] if len(vs) == 1 else torch.cat(vs, -2)])
              for (pk, pv), (ks, vs) in zip(entry.kv, done)]
        return Prefilled(P + T, P, out.logits[0, -1].float(), kv=kv)

    def _through_cache(self, entry: PrefixEntry, rest: list[int]) -> Prefilled:
        cache = self._new_cache()
        for i, (k, v) in enumerate(entry.kv):  # shares the prefix tensors; update() concatenates into new ones
            cache.update(k, v, i)
        out = self._forward(rest, cache)
        P = len(entry.ids)
        return Prefilled(P + len(rest), P, out.logits[0, -1].float(), kv=[([k], [v]) for k, v in _kv_of(cache)])
