"""A scripted language model: it returns given texts, log-probabilities and state vectors.

It stands in for a model's *outputs*, so tests can drive a method through each branch of its control
flow deterministically; the method, the estimators, the prompts and the search engine are the real
ones. A script is ``script(view) -> Reply`` where ``view`` is the parsed prompt (:class:`View`).
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np

from seakr.models.base import ATTENTION, GENERATE, NEXT_TOKEN, STATES, Generation, Sample
from seakr.prompts import CONTEXT_FOOTER, CONTEXT_HEADER, MARKER


@dataclass
class Reply:
    text: str
    spread: float = 0.0  # 0: the k sampled states agree (low EigenScore); larger: they disagree
    logprobs: list[float] | None = None  # one per word-token of ``text``; default -0.01 each
    entropies: list[float] | None = None
    state: list[float] | None = None  # the greedy answer's state (a probe reads it); default: the samples' direction


@dataclass
class View:
    """What the script sees of a prompt: the passages in its context, the question, the answer so far."""

    prompt: str
    passages: list[str]
    question: str
    answer: str  # text after "Answer:" (accepted steps, and a forced marker if any)

    @property
    def forced(self) -> bool:
        return self.answer.rstrip().endswith(MARKER)

    def has(self, word: str) -> bool:
        return any(word in p for p in self.passages)


def parse(prompt: str) -> View:
    head, _, tail = prompt.rpartition("Question: ")
    question, _, answer = tail.partition("\nAnswer:")
    passages = []
    if head.endswith(CONTEXT_FOOTER + "\n"):
        block = head[head.rindex(CONTEXT_HEADER) + len(CONTEXT_HEADER):]
        passages = [ln.split("] ", 1)[1] for ln in block.splitlines() if ln.startswith("[")]
    return View(prompt, passages, question.strip(), answer.strip())


class ScriptedLM:
    name = "scripted"

    def __init__(self, script: Callable[[View], Reply], *, dim: int = 16,
                 capabilities=(GENERATE, STATES, ATTENTION, NEXT_TOKEN), attention=None, yes_no=(-0.1, -2.0)):
        self.script, self.dim = script, dim
        self.capabilities = frozenset(capabilities)
        self._attention, self.yes_no = attention, yes_no
        self.vocab: list[str] = []
        self.calls: list[View] = []

    def _ids(self, text: str) -> list[int]:
        pieces = [w if i == 0 else " " + w for i, w in enumerate(text.split(" "))] if text else []
        ids = []
        for p in pieces:
            self.vocab.append(p)
            ids.append(len(self.vocab) - 1)
        return ids

    def _sample(self, r: Reply, state=None) -> Sample:
        ids = self._ids(r.text)
        lps = list(r.logprobs) if r.logprobs is not None else [-0.01] * len(ids)
        ents = list(r.entropies) if r.entropies is not None else [0.1] * len(ids)
        return Sample(r.text, ids, lps, ents, [5.0] * len(ids), "stop", state)

    def generate(self, prompts, config, *, prefix=None):
        out = []
        for p in prompts:
            if prefix is not None:
                assert p.startswith(prefix)
            v = parse(p)
            self.calls.append(v)
            r = self.script(v)
            # the k states: one direction shared by all samples, plus per-sample noise of size ``spread``
            rng = np.random.default_rng(zlib.crc32(r.text.encode()))
            base = rng.normal(size=self.dim)
            gstate = None
            if getattr(config, "greedy_state", False) and r.text.strip():
                gstate = np.asarray(r.state if r.state is not None else base, dtype=np.float32)
            g = Generation(prompt_tokens=len(p.split()), greedy=self._sample(r, gstate) if config.greedy else None)
            for j in range(config.n):
                noise = np.random.default_rng(j).normal(size=self.dim)
                st = (base + r.spread * noise).astype(np.float32) if config.with_states else None
                g.samples.append(self._sample(r, st))
            out.append(g)
        return out

    def count_tokens(self, text):
        return len(text.split())

    def token_strings(self, ids):
        return [self.vocab[i] for i in ids]

    def attention(self, text):
        ids = self._ids(text)
        return ids, self._attention(text, len(ids))

    def next_token_logprobs(self, prompts, options):
        return [{" Yes": self.yes_no[0], " No": self.yes_no[1]} for _ in prompts]

    def info(self):
        return {"model": "scripted", "state_layer": 0, "state_source": "mlp", "dtype": "float32"}


def engine(tmp_path, passages: dict[str, str]):
    """A real tantivy index over {title: text} (control-flow tests need small, known hit lists)."""
    from seakr.search.base import Passage
    from seakr.search.tantivy_engine import TantivyEngine

    return TantivyEngine.build([Passage(f"p-{i}", t, x) for i, (t, x) in enumerate(passages.items())], tmp_path / "idx")


def eigen(spread: float, k: int = 20, dim: int = 16, text: str = "x") -> float:
    """The EigenScore the scripted model's states give for this spread (computed like the model does)."""
    from seakr import uncertainty as U

    base = np.random.default_rng(zlib.crc32(text.encode())).normal(size=dim)
    z = np.stack([base + spread * np.random.default_rng(j).normal(size=dim) for j in range(k)])
    return U.eigen_score(z.astype(np.float32))


INF = math.inf
