"""Row bookkeeping of one decode call: what each continuation has produced and when it is done.

A call decodes R rows per prompt (the greedy row and/or n sampled rows). Each row records its tokens
and their numbers until it stops: EOS, a stop string, or the token budget. A row whose state vector
is wanted is fed EOS *in place of* its last token for one more step (the reference's
``_change_last_token``); the state read at that step is stored, then the row leaves the batch.

Rows are addressed two ways: by *row id* (fixed, ``prompt * R + q``) and by *batch position* (their
place among the rows still in the batch, which shrinks as rows finish). :attr:`RowBook.alive` maps
batch positions to row ids.
"""

from __future__ import annotations

import regex
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import torch

from .base import Generation, Sample


@dataclass
class Row:
    greedy: bool
    want_state: bool
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    entropies: list[float] = field(default_factory=list)
    logsumexp: list[float] = field(default_factory=list)
    finish: str = ""  # "" while generating; then "stop" | "eos" | "length"
    text: str = ""
    state: np.ndarray | None = None
    trail: list | None = None  # the state at each token fed (a list only where the call keeps them)

    def push(self, token: int, logprob: float, entropy: float, lse: float) -> None:
        self.tokens.append(token)
        self.logprobs.append(logprob)
        self.entropies.append(entropy)
        self.logsumexp.append(lse)

    def pop(self) -> None:
        for xs in (self.tokens, self.logprobs, self.entropies, self.logsumexp):
            xs.pop()

    def sample(self) -> Sample:
        trail = np.stack(self.trail) if self.trail else None
        return Sample(self.text, self.tokens, self.logprobs, self.entropies, self.logsumexp,
                      self.finish or "length", self.state, trail)


class RowBook:
    """Per-row records of one decode call over ``n_prompts`` prompts with row kinds ``kinds``
    (True = greedy) repeated for each prompt."""

    def __init__(self, n_prompts: int, kinds: Sequence[bool], *, with_states: bool, stops: Sequence[str],
                 max_new: int, eos_id: int, detok: Callable[[list[int]], str], stop_patterns: Sequence[str] = (),
                 greedy_state: bool = False, greedy_trail: bool = False, end_ids: Sequence[int] = ()):
        if not kinds:
            raise ValueError("nothing to generate: greedy=False and n=0")
        self.R = len(kinds)
        # a trail ends with the state at EOS, as every state SeaKR reads does: the greedy row owes that step too
        self.rows = [Row(greedy=g, want_state=(greedy_state or greedy_trail) if g else with_states,
                         trail=[] if g and greedy_trail else None) for _ in range(n_prompts) for g in kinds]
        self.alive = list(range(len(self.rows)))  # batch position -> row id
        self.stops = tuple(s for s in stops if s)
        self.patterns = [regex.compile(p) for p in stop_patterns]  # `regex`: Unicode case classes (\p{Lu})
        self.max_new, self.eos_id, self.detok = max_new, eos_id, detok
        self.end_ids = frozenset(end_ids) | {eos_id}  # any of them ends a row; eos_id is what a state is read at

    def greedy_mask(self) -> torch.Tensor:
        return torch.tensor([self.rows[r].greedy for r in self.alive])

    def sample_index(self) -> list[int]:
        """For each row in the batch: which sample of its prompt it is (greedy rows: 0, unused)."""
        first = 1 if self.rows[0].greedy else 0
        return [max(0, r % self.R - first) for r in self.alive]

    def row_prompts(self) -> list[int]:
        """The prompt of every row in the batch, in batch order (non-decreasing)."""
        return [r // self.R for r in self.alive]

    def advance(self, nxt: torch.Tensor, logprob, entropy, lse) -> tuple[torch.Tensor, list[int]]:
        """Record every live row's chosen token. Returns the tokens to feed next (EOS for rows that
        finished and still owe their state) and the batch positions that take that step."""
        # one transfer to the host per step for all rows (stop strings need the tokens there anyway)
        toks, lps, ents, lses = (x.tolist() for x in (nxt, logprob, entropy, lse))
        keep, eos_rows = [], []
        for b, r in enumerate(self.alive):
            row = self.rows[r]
            self._record(row, toks[b], lps[b], ents[b], lses[b])
            if not row.finish:
                keep.append(b)
            elif row.want_state:
                eos_rows.append(b)  # one more step with EOS in place of the last token
                keep.append(b)
        feed = nxt.clone()
        if eos_rows:
            feed[torch.tensor(eos_rows, device=nxt.device)] = self.eos_id
        return feed, keep

    def _record(self, row: Row, token: int, logprob: float, entropy: float, lse: float) -> None:
        if token in self.end_ids:
            row.finish, row.text = "eos", _whole(self.detok(row.tokens))
            return
        row.push(token, logprob, entropy, lse)
        if self.stops or self.patterns:
            s = self.detok(row.tokens)
            found = [i for i in (s.find(x) for x in self.stops) if i >= 0]
            found += [m.start() for m in (p.search(s) for p in self.patterns) if m]
            cut = min(found, default=-1)
            if cut >= 0:
                row.finish, row.text = "stop", s[:cut]
                row.pop()  # the trigger token is not part of the continuation (EOS replaces it)
                return
        if len(row.tokens) >= self.max_new:
            row.finish, row.text = "length", _whole(self.detok(row.tokens))

    def keep(self, positions: Sequence[int]) -> None:
        self.alive = [self.alive[b] for b in positions]

    def store_states(self, states: torch.Tensor | None) -> list[int]:
        """After a step: finished rows take their state (row b of ``states``); returns the batch
        positions of the rows still generating."""
        still = []
        for b, r in enumerate(self.alive):
            row = self.rows[r]
            if row.trail is not None and states is not None:  # the state of the token this step fed
                row.trail.append(states[b].cpu().numpy().copy())
            if row.finish:
                row.state = states[b].cpu().numpy().copy() if states is not None else None
            else:
                still.append(b)
        return still

    def generations(self, prompt_tokens: Sequence[int], cached: Sequence[int]) -> list[Generation]:
        out = []
        for j, (n, c) in enumerate(zip(prompt_tokens, cached)):
            g = Generation(prompt_tokens=n, cached_prefix_tokens=c)
            for row in self.rows[j * self.R : (j + 1) * self.R]:
                if row.greedy:
                    g.greedy = row.sample()
                else:
                    g.samples.append(row.sample())
            out.append(g)
        return out

    @property
    def generated_tokens(self) -> int:
        return sum(len(r.tokens) for r in self.rows)


def _whole(text: str) -> str:
    """The text without the U+FFFD that the first bytes of an unfinished character decode to: a row ended by
    its token limit (or an end token) between the bytes of one character would show a replacement mark no model
    wrote."""
    return text.rstrip("\ufffd")
