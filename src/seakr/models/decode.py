"""One decode call: the loop, and the backends that run one step of it.

The loop (:func:`decode`) is the same for every model: pick each live row's next token
(:mod:`~seakr.models.sampling`), record it (:class:`~seakr.models.rows.RowBook`), drop the rows that
are done, run one step, store the states read at EOS, repeat. A *backend* owns the KV state and runs
the step; it is built lazily at the first step, for the rows still alive, so a call that ends on the
prefill's own token never converts the prompt KV.

Backends:
* :class:`SharedPrefixBackend` -- one copy of each prompt's KV shared by all of its rows
  (:class:`~seakr.models.attention.SharedPrefixState`); the step is the model's forward with that
  state as an argument, or a faster step function where the architecture allows (``fast``).
* :class:`CacheBackend` -- transformers' own cache, prompts laid side by side (left padding) or a
  sliding-window cache; the reference path that the shared one is tested against.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Protocol, Sequence

import torch

from .attention import SharedPrefixState
from .base import GenerationConfig, check_cancelled
from .fastpath import stack_taps
from .prefill import Prefilled, cache_kwarg
from .rows import RowBook
from .sampling import choose_next, token_stats


class DecodeBackend(Protocol):
    def start(self, prefilled: Sequence[Prefilled], row_prompt: list[int], max_new: int) -> None:
        """Build the KV state for these rows (``row_prompt[b]``: the prompt of batch row b)."""

    def step(self, feed: torch.Tensor, pos: torch.Tensor, capture: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Feed one token per row at these positions: (fp32 next-token logits, state vectors or None)."""

    def select(self, keep: torch.Tensor) -> None:
        """Keep only these batch rows (in increasing order)."""


@contextmanager
def tap(modules: Sequence[torch.nn.Module], enabled: bool):
    """Read each module's output at the last position during the forward inside the block:
    ``box["state"]`` is (B, d) for one module, (B, modules, d) for several (fastpath.stack_taps).

    The hooks exist only while the block runs, so nothing outside this call can see or change them."""
    box: dict[str, torch.Tensor] = {}
    if not enabled:
        yield box
        return
    outs: list = [None] * len(modules)

    def hook_for(j):
        def hook(mod, inputs, output):
            out = output[0] if isinstance(output, tuple) else output
            # decode feeds one token per row, so a (rows, d) output (OPT's fc2 runs on the flattened tokens) is
            # that token's state: given its position axis here, as every other tap's output has one
            outs[j] = out[:, None, :] if out.dim() == 2 else out

        return hook

    handles = [m.register_forward_hook(hook_for(j)) for j, m in enumerate(modules)]
    try:
        yield box
        if all(o is not None for o in outs):
            box["state"] = stack_taps(outs)
    finally:
        for h in handles:
            h.remove()


class SharedPrefixBackend:
    def __init__(self, model, state_modules: Sequence[torch.nn.Module], fast=None):
        self.model, self.state_modules, self.fast = model, state_modules, fast
        self.state: SharedPrefixState | None = None

    def start(self, prefilled, row_prompt, max_new):
        used = sorted(set(row_prompt))  # prompts whose rows all finished are never converted
        # per prompt, per layer: ([K segments], [V segments]) without the batch dimension
        kv = [[([k[0] for k in ks], [v[0] for v in vs]) for ks, vs in prefilled[j].kv] for j in used]
        self.state = SharedPrefixState(kv, [used.index(j) for j in row_prompt], max_new)

    def step(self, feed, pos, capture):
        if self.fast is not None:
            logits, states = self.fast.step(feed, pos, self.state, capture)
        else:
            with tap(self.state_modules, capture) as box:
                out = self.model(input_ids=feed[:, None], position_ids=pos[:, None], use_cache=False,
                                 seakr_state=self.state)
            logits, states = out.logits[:, -1].float(), box.get("state")
        self.state.t += 1
        return logits, states

    def select(self, keep):
        self.state.select(keep)


class CacheBackend:
    def __init__(self, model, state_modules: Sequence[torch.nn.Module], pad_id: int):
        self.model, self.state_modules, self.pad_id = model, state_modules, pad_id
        self.cache = self.mask = None

    def start(self, prefilled, row_prompt, max_new):
        dev = prefilled[0].logits.device
        rp = torch.tensor(row_prompt, device=dev)
        if prefilled[0].cache is not None:  # sliding windows: one prompt per call, its own cache repeated
            assert len(prefilled) == 1, "sliding-window caches decode one prompt per call"
            self.cache = prefilled[0].cache
            self.cache.batch_repeat_interleave(len(row_prompt))
            self.mask = torch.ones(len(row_prompt), prefilled[0].tokens, dtype=torch.long, device=dev)
            return
        from transformers import DynamicCache

        lens = [p.tokens for p in prefilled]
        Lmax = max(lens)
        self.cache = DynamicCache(config=self.model.config)
        for li in range(len(prefilled[0].kv)):  # prompts side by side, left-padded to the longest
            kv = [p.layer_kv(li) for p in prefilled]
            pad = [(0, 0, Lmax - p.tokens, 0) for p in prefilled]
            K = torch.cat([torch.nn.functional.pad(k, d) for (k, _), d in zip(kv, pad)])[rp]
            V = torch.cat([torch.nn.functional.pad(v, d) for (_, v), d in zip(kv, pad)])[rp]
            self.cache.update(K, V, li)
        mask = torch.ones(len(prefilled), Lmax, dtype=torch.long, device=dev)
        for j, L in enumerate(lens):
            mask[j, : Lmax - L] = 0
        self.mask = mask[rp]

    def step(self, feed, pos, capture):
        self.mask = torch.cat([self.mask, self.mask.new_ones(len(feed), 1)], 1)
        with tap(self.state_modules, capture) as box:
            out = self.model(input_ids=feed[:, None], attention_mask=self.mask, position_ids=pos[:, None],
                             use_cache=True, **cache_kwarg(self.model, self.cache))
        return out.logits[:, -1].float(), box.get("state")

    def feed(self, tokens: list[int], pos: int) -> torch.Tensor:
        """One row: feed several tokens from position ``pos`` in one forward; the fp32 logits after each, (T, V)."""
        dev = self.mask.device
        self.mask = torch.cat([self.mask, self.mask.new_ones(1, len(tokens))], 1)
        out = self.model(input_ids=torch.tensor([tokens], device=dev), attention_mask=self.mask,
                         position_ids=torch.arange(pos, pos + len(tokens), device=dev)[None], use_cache=True,
                         **cache_kwarg(self.model, self.cache))
        return out.logits[0].float()

    def drop(self, n: int) -> None:
        """Forget the last ``n`` tokens fed (guesses that were wrong)."""
        if n:
            self.cache.crop(-n)
            self.mask = self.mask[:, :-n]

    def select(self, keep):
        for layer in self.cache.layers:
            layer.batch_select_indices(keep)
        self.mask = self.mask[keep]


def decode(backend: DecodeBackend, prefilled: Sequence[Prefilled], book: RowBook, cfg: GenerationConfig,
           streams: torch.Tensor, stats: dict) -> None:
    """Run the rows of ``book`` to completion; the results stay in ``book``. ``streams`` (prompts x
    samples x steps) holds the uniform each sampled row draws at each step (sampling.uniform_streams)."""
    dev = prefilled[0].logits.device
    logits = torch.stack([p.logits for p in prefilled]).repeat_interleave(book.R, 0)
    pos = torch.tensor([p.tokens for p in prefilled for _ in range(book.R)], dtype=torch.long, device=dev)
    started, t = False, 0
    while True:
        check_cancelled()  # a request that timed out stops here, between two steps
        rows = torch.tensor(book.row_prompts(), device=dev), torch.tensor(book.sample_index(), device=dev)
        nxt = choose_next(logits, book.greedy_mask().to(dev), cfg, streams[rows[0], rows[1], t], book.end_ids)
        t += 1
        lse, logprob, entropy = token_stats(logits, nxt)
        feed, keep = book.advance(nxt, logprob, entropy, lse)
        if not keep:
            return
        if len(keep) < len(book.alive):  # rows without a pending state read leave before the step
            sel = torch.tensor(keep, device=dev)
            book.keep(keep)
            pos, feed = pos[sel], feed[sel]
            if started:
                backend.select(sel)
        if not started:
            backend.start(prefilled, book.row_prompts(), cfg.max_new_tokens)
            started = True
        logits, states = backend.step(feed, pos, cfg.with_states or cfg.greedy_state or cfg.greedy_trail)
        stats["decode_steps"] += 1
        pos = pos + 1
        still = book.store_states(states)  # rows that were fed EOS take their state and leave
        if not still:
            return
        if len(still) < len(book.alive):
            sel = torch.tensor(still, device=dev)
            book.keep(still)
            pos, logits = pos[sel], logits[sel]
            backend.select(sel)
