"""Prompt-lookup decoding: a greedy call's tokens drafted from its own prompt, checked in one forward.

A greedy continuation in retrieval-augmented QA copies a great deal: a rationale restates a passage's words, an
answer repeats a title. Where the last few tokens written also occur earlier in the prompt (or in the text
written so far), the tokens that followed them there are a cheap guess at what comes next. One forward over the
token just chosen plus ``k`` guessed tokens returns the model's logits after each of them; the guesses are kept
while each is the argmax of the logits before it, so the text is the one plain greedy decoding writes, up to the
rounding of a wider matrix product. A step of 11 tokens costs about what a step of one does on a CPU (memory
bound: 80 against 71 ms for the 0.5B at 800 tokens of context in bf16), and a chain's calls need about a third of
the forwards. On by default on a CPU computing in float32: there an eleven-token forward rounds as a
one-token one does, and on the decision sample every answer was the same, at 1.12-1.15x the speed (less than in bf16:
a wider forward costs more in float32). In bf16 a log-prob moves by up to about 0.05, so a chain's step can go
another way and search other passages: there only a final answer's call drafts (``GenerationConfig.final``: no later
decision reads its text or log-probs); on the decision sample 56 of 59 answers kept their text, and F1 moved by -0.2,
for 0.80x the seconds a chain question (docs/results.md).

Only a call with one prompt, a greedy row alone and no state to read takes this path (a chain's step, a final
answer): sampled rows have no single text to guess, and a state at EOS needs the row's own last step.
"""

from __future__ import annotations

import os
from typing import Sequence

import torch

from ..common.schema import check_type
from .base import GenerationConfig, check_cancelled
from .options import DraftTokens
from .prefill import Prefilled
from .rows import RowBook
from .sampling import token_stats

NGRAMS = (3, 2, 1)  # the longest match that occurs wins: a longer one is a surer guess
FLOAT32_DRAFT = 10  # the default guesses a forward (benchmarks/lookup_decode.py, benchmarks/final_draft.py)


def draft_depths(given: int | None, precision: str, device: str = "cpu") -> tuple[int, int]:
    """How many tokens a greedy call guesses a forward: (any call, a final answer's call, whose text no later
    decision reads: ``GenerationConfig.final``). ``given`` (the load option), else ``SEAKR_DRAFT_TOKENS``, sets both.
    Else each is on where it was measured: every call on a CPU computing in float32, where the text is plain greedy
    decoding's; a final answer's on any CPU, where in bf16 rounding can move it only where two tokens tie
    (benchmarks/final_draft.py). A GPU's one-token step replays a CUDA graph, which a wider forward would give up, so
    there it stays off unless asked."""
    env = os.environ.get("SEAKR_DRAFT_TOKENS")  # text: its digits are the number
    if given is None and env is not None:
        given = check_type(DraftTokens, int(env) if env.strip().isdecimal() else env, "SEAKR_DRAFT_TOKENS")
    if given is not None:
        return given, given
    cpu = device == "cpu"
    return (FLOAT32_DRAFT if cpu and precision == "float32" else 0), (FLOAT32_DRAFT if cpu else 0)


def draft(seq: Sequence[int], k: int) -> list[int]:
    """Up to ``k`` tokens that followed the latest earlier occurrence of ``seq``'s last 3 (else 2, else 1) tokens;
    none where they occur nowhere before."""
    for g in NGRAMS:
        if len(seq) <= g:
            continue
        key = list(seq[-g:])
        for j in range(len(seq) - g - 1, -1, -1):
            if list(seq[j:j + g]) == key:
                return list(seq[j + g:j + g + k])
    return []


def drafts(cfg: GenerationConfig, prefilled: Sequence[Prefilled], k: int) -> bool:
    """Whether a call decodes by prompt lookup: one prompt (its KV in hand, not a sliding-window cache), the
    greedy row alone, no state read, and drafting on (``k`` > 0)."""
    return (k > 0 and len(prefilled) == 1 and prefilled[0].cache is None and cfg.greedy and cfg.n == 0
            and not (cfg.greedy_state or cfg.greedy_trail or cfg.ignore_eos))


def lookup_decode(backend, prefilled: Prefilled, book: RowBook, k: int, stats: dict) -> None:
    """Decode the greedy row of ``book`` to its end, guessing from the prompt's tokens (``prefilled.ids``);
    ``backend``: a :class:`~seakr.models.decode.CacheBackend` (it takes several tokens a step and drops the
    rejected ones)."""
    backend.start([prefilled], [0], 0)
    seq, pos, logits, done = list(prefilled.ids), prefilled.tokens, prefilled.logits, False
    while not (done or _take(book, logits, seq)):
        check_cancelled()  # a request that timed out stops here, between two forwards
        guess = draft(seq, k)
        out = backend.feed(seq[-1:] + guess, pos)  # logits after the token chosen and after each guess
        right = 0
        while not done and right < len(guess) and int(out[right].argmax()) == guess[right]:
            right += 1
            done = _take(book, out[right - 1], seq)
        stats["decode_steps"] += 1
        stats["drafted_tokens"] += len(guess)
        stats["accepted_tokens"] += right
        pos += 1 + right
        backend.drop(len(guess) - right)  # the KV of the guesses that were wrong
        logits = out[right]


def _take(book: RowBook, logits: torch.Tensor, seq: list[int]) -> bool:
    """Record the argmax of ``logits`` (V,) as the row's next token (appended to ``seq``); whether the row is done."""
    nxt = logits.argmax()[None]
    lse, logprob, entropy = token_stats(logits[None], nxt)
    _, keep = book.advance(nxt, logprob, entropy, lse)
    seq.append(int(nxt))
    return not keep
