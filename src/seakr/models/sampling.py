"""The sampler: how each row picks its next token, and the per-token numbers the estimators read.

Greedy rows take the argmax; sampled rows apply top-k, then the temperature, then top-p inside the
top-k only (the reference's vLLM request: T=1, top-k 50, top-p 0.9), so no full-vocabulary sort runs.
The numbers recorded per token (log-prob, entropy, logsumexp) are always those of the *raw*
distribution (temperature 1, no truncation), so greedy and sampled rows are comparable.
"""

from __future__ import annotations

import os
from typing import Collection

import torch

from .base import GenerationConfig


def make_generator(seed: int | None, device: torch.device | str = "cpu") -> torch.Generator:
    """A random stream for one call: the given seed, or fresh entropy when the seed is None."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed if seed is not None else int.from_bytes(os.urandom(4), "little"))
    return gen


def token_stats(logits: torch.Tensor, chosen: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per row: (logsumexp of the raw logits, log-prob of the chosen token, entropy of the softmax).

    The entropy is ``lse - E_p[logit]`` with the expectation as one dot product per row: two passes
    over the vocabulary fewer than materialising log p and p*log p (measured 2.4 vs 4.7 ms for 21 rows
    of SmolLM2's 49k vocabulary, 8.7 vs 15.5 ms for Qwen's 152k)."""
    lse = torch.logsumexp(logits, -1)
    p = torch.softmax(logits, -1)
    ent = lse - torch.bmm(p[:, None, :], logits[:, :, None])[:, 0, 0]
    return lse, logits.gather(1, chosen[:, None])[:, 0] - lse, ent


def uniform_streams(cfg: GenerationConfig, n_prompts: int, device) -> torch.Tensor:
    """(n_prompts, n, max_new_tokens) uniforms: the random numbers sample row q of each prompt draws.

    With ``common_random_numbers`` (the default) every prompt gets the *same* n streams: sample q of
    one prompt and sample q of another see the same numbers, so two identical prompts score
    identically and the streams depend only on the seed, never on which other prompts share the call.
    (Measured on re-rank candidates with SmolLM2, it does not narrow the spread of their U difference:
    README, "The state vector and the score".) Otherwise each prompt draws its own streams."""
    gen = make_generator(cfg.seed, device)
    shape = (1 if cfg.common_random_numbers else n_prompts, max(cfg.n, 1), cfg.max_new_tokens + 1)
    u = torch.rand(shape, generator=gen, device=device)
    return u.expand(n_prompts, -1, -1) if cfg.common_random_numbers else u


def choose_next(logits: torch.Tensor, greedy_rows: torch.Tensor, cfg: GenerationConfig, uniforms: torch.Tensor | None,
                end_ids: Collection[int]) -> torch.Tensor:
    """The next token of every row: argmax where ``greedy_rows`` is True, elsewhere a top-k/top-p draw
    by inverse CDF with the row's uniform from ``uniforms`` (one per row)."""
    if cfg.ignore_eos:  # benchmarks: force exactly max_new_tokens tokens
        logits = logits.clone()
        logits[:, list(end_ids)] = -float("inf")
    nxt = logits.argmax(-1)
    if bool(greedy_rows.all()):
        return nxt
    rows = (~greedy_rows).nonzero()[:, 0]
    lg = logits[rows]
    k = cfg.top_k if 0 < cfg.top_k < lg.shape[-1] else lg.shape[-1]
    vals, ids = torch.topk(lg, k, dim=-1)  # sorted descending; partial selection, no full sort
    # temperature after top-k: it keeps the order, so only k values per row get divided
    p = torch.softmax(vals / max(cfg.temperature, 1e-5), -1)
    if cfg.top_p < 1.0:
        excl = p.cumsum(-1) - p > cfg.top_p  # keep the smallest prefix whose mass reaches top_p
        p = p.masked_fill(excl, 0.0)
    cdf = p.cumsum(-1)
    u = uniforms[rows].to(cdf.dtype) * cdf[:, -1]  # the kept mass need not sum to 1
    pick = torch.searchsorted(cdf, u[:, None], right=True)[:, 0].clamp_(max=k - 1)
    nxt[rows] = ids.gather(1, pick[:, None])[:, 0]
    return nxt
