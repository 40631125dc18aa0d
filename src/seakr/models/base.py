"""The language-model protocol every method talks to, and the records a generation returns.

One call, :meth:`LanguageModel.generate`, serves every method: it returns, per prompt, the greedy
continuation and/or ``n`` sampled continuations, each with the per-token numbers the uncertainty
estimators need (chosen-token log-probabilities, entropies, logsumexp of the logits) and the
*state vector* SeaKR reads at an EOS token appended after the continuation (paper §3.4).
"""

from __future__ import annotations

import contextvars
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Annotated, Protocol, Sequence, runtime_checkable

import numpy as np
import regex
from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from ..common.checks import encodable
from ..common.schema import Count, NonNegative, Positive, Real, Whole, schema
from ..common.console import said


@dataclass
class Sample:
    """One continuation of a prompt.

    ``logprobs``/``entropies``/``logsumexp`` are per generated token, measured on the model's raw
    distribution (temperature 1, no truncation), so greedy and sampled rows are comparable.
    ``state`` is the state vector at the appended EOS (None when not requested or when the
    continuation is empty: the reference drops empty samples from the Gram matrix).
    """

    text: str
    token_ids: list[int]
    logprobs: list[float]
    entropies: list[float]
    logsumexp: list[float]
    finish_reason: str  # "stop" (stop string) | "eos" | "length"
    state: np.ndarray | None = None
    trail: np.ndarray | None = None  # (tokens, d): the state at each token, the last at the EOS (greedy_trail)

    def to_dict(self, with_state: bool = False) -> dict:
        d = asdict(self)
        d["state"] = self.state.tolist() if (with_state and self.state is not None) else None
        d.pop("trail")  # tokens x d floats: read where it is made, never written into a row
        return d


@dataclass
class Generation:
    """Everything one prompt produced in one :meth:`LanguageModel.generate` call."""

    prompt_tokens: int
    greedy: Sample | None = None
    samples: list[Sample] = field(default_factory=list)
    cached_prefix_tokens: int = 0  # prompt tokens served from the prefix cache
    seconds: float = 0.0

    @property
    def states(self) -> np.ndarray:
        """(k, d) matrix of the valid samples' state vectors (empty samples excluded)."""
        rows = [s.state for s in self.samples if s.state is not None and s.text.strip()]
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack(rows).astype(np.float32)

    @property
    def new_tokens(self) -> int:
        n = len(self.greedy.token_ids) if self.greedy else 0
        return n + sum(len(s.token_ids) for s in self.samples)


def _texts(v) -> tuple[str, ...]:
    """Stop strings (or patterns) as a tuple; one string is one stop, not its characters."""
    items = (v,) if isinstance(v, str) else tuple(v) if isinstance(v, (list, tuple)) else None
    if items is None or not all(isinstance(x, str) and x for x in items):
        raise ValueError(f"expected non-empty strings, got {said(v)}")
    return items


def _patterns(v: tuple[str, ...]) -> tuple[str, ...]:
    for p in v:
        try:
            regex.compile(p)
        except regex.error as e:
            raise ValueError(f"{said(p)} is not a regular expression ({e})") from None
    return v


Stops = Annotated[tuple[str, ...], BeforeValidator(_texts)]


@schema("GenerationConfig")
class GenerationConfig:
    """Sampling knobs of one call (defaults: the reference code's k=20 request: T=1, top-k 50, top-p 0.9)."""

    n: Count = 20
    greedy: bool = True
    temperature: NonNegative = 1.0
    top_k: Positive = 50
    top_p: Annotated[Real, Field(gt=0, le=1)] = 0.9
    max_new_tokens: Positive = 100
    stop: Stops = ()
    stop_patterns: Annotated[Stops, AfterValidator(_patterns)] = ()  # `regex`'s (\p{Lu} works); a match ends the text
    seed: Annotated[Whole, Field(ge=0, le=2 ** 64 - 1)] | None = 42
    common_random_numbers: bool = True  # sample q of every prompt draws the same random stream (sampling.py)
    with_states: bool = True
    greedy_state: bool = False  # also read the state at EOS after the greedy row (learned probes read one state)
    greedy_trail: bool = False  # also keep the greedy row's state at every token (the one-response hidden score)
    ignore_eos: bool = False  # benchmarks: force exactly max_new_tokens tokens
    final: bool = False  # a final answer: no later decision reads its text or log-probs (lookup.py drafts it)

    @model_validator(mode="after")
    def _something_to_generate(self):
        if not self.greedy and self.n == 0:
            raise ValueError("GenerationConfig: nothing to generate (greedy=False and n=0)")
        return self

    def to_dict(self) -> dict:
        d = asdict(self)
        d["stop"] = list(self.stop)
        d["stop_patterns"] = list(self.stop_patterns)
        return d


# ---------------------------------------------------------------- a call's arguments
def check_texts(texts, what: str = "prompts") -> list[str]:
    """A call's texts (prompts, or next-token options), refused in one line before any work: a list of visible,
    encodable strings (one string is not a list of its characters)."""
    if isinstance(texts, str):
        raise TypeError(f"{what}: a list of texts, got one string; pass [{what[:-1]}]")
    if not isinstance(texts, (list, tuple)):
        raise TypeError(f"{what}: a list of texts, got {type(texts).__name__}")
    for i, t in enumerate(texts):
        check_text(t, f"{what}[{i}]")
    return list(texts)


def check_text(text, what: str) -> str:
    if not isinstance(text, str):
        raise TypeError(f"{what}: expected text, got {type(text).__name__}")
    if not text:
        raise ValueError(f"{what}: an empty text")
    if not encodable(text):
        raise ValueError(f"{what}: not valid UTF-8 (half a surrogate pair)")
    return text


def check_generate(prompts, config, prefix) -> list[str]:
    """:meth:`Generator.generate`'s arguments (a batching wrapper checks them in the caller's thread, before the
    call joins other questions' batch)."""
    if not isinstance(config, GenerationConfig):
        raise TypeError(f"config: expected a seakr GenerationConfig, got {type(config).__name__}")
    prompts = check_texts(prompts)
    if prefix is not None and not isinstance(prefix, str):
        raise TypeError(f"prefix: expected text or None, got {type(prefix).__name__}")
    if prefix:  # "" is no prefix
        if bad := [i for i, p in enumerate(prompts) if not p.startswith(prefix)]:
            raise ValueError(f"prefix: prompts[{bad[0]}] does not start with it (the prefix's cache is reused for "
                             "every prompt of the call)")
    return prompts


# ---------------------------------------------------------------- cancellation
class Cancelled(Exception):
    """The caller gave up (client gone, request timed out): the work stopped at its next decode step."""

    def __init__(self, msg: str = "cancelled: the cancel event was set (a client that went away, a request that "
                                  "timed out, or the caller's own event)"):
        super().__init__(msg)


#: The cancel event (a ``threading.Event``) of the answer running in this thread, if any. A context
#: variable rather than an argument: every model call of an answer honours it without each signature
#: carrying it, and the decode loop checks it between steps, so a timed-out request frees its worker
#: within one step instead of after its longest call.
_CANCEL: contextvars.ContextVar = contextvars.ContextVar("seakr_cancel", default=None)


@contextmanager
def cancellable(event):
    token = _CANCEL.set(event)
    try:
        yield
    finally:
        _CANCEL.reset(token)


_SESSION: contextvars.ContextVar = contextvars.ContextVar("seakr_prompt_session", default=None)


class PromptSession:
    """One answer's model calls (a weak reference keys what the model keeps for them: it goes with the answer)."""


@contextmanager
def prompt_session():
    """The model calls of one answer, made in this context: only they reuse each other's prompts' KV (the
    recent-prompt cache), so an answer never depends on what was asked before it or beside it. Outside one nothing
    is reused."""
    token = _SESSION.set(PromptSession())
    try:
        yield
    finally:
        _SESSION.reset(token)


def current_session() -> PromptSession | None:
    return _SESSION.get()


def check_cancelled() -> None:
    ev = _CANCEL.get()
    if ev is not None and ev.is_set():
        raise Cancelled()


# ---------------------------------------------------------------- capabilities
# What a model can do, declared by the model (``capabilities``) and required by a method at
# construction, so a missing one fails there with one line instead of mid-answer.
GENERATE = "generate"  #: generate() with per-token log-probs, entropies and logsumexp
STATES = "states"  #: generate(with_states=True) fills Sample.state (the state vector at EOS)
ATTENTION = "attention"  #: attention(text): last-layer attention (DRAGIN)
NEXT_TOKEN = "next_token"  #: next_token_logprobs(): the prompting estimator's Yes/No probe
CHAT = "chat"  #: format_chat(messages): the tokenizer's chat template
CAPABILITIES = (GENERATE, STATES, ATTENTION, NEXT_TOKEN, CHAT)


class MissingCapability(ValueError):
    """A method (or option) needs something the model does not provide."""


@runtime_checkable
class Generator(Protocol):
    """The core every model provides: batched generation with per-token statistics."""

    name: str
    capabilities: frozenset[str]

    def generate(self, prompts: Sequence[str], config: GenerationConfig, *,
                 prefix: str | None = None) -> list[Generation]:
        """Continue each prompt. When ``prefix`` is given every prompt must start with it; its
        key/value cache is computed once per process and reused (the in-context demonstrations)."""
        ...

    def count_tokens(self, text: str) -> int: ...

    def token_strings(self, ids: Sequence[int]) -> list[str]:
        """The text each token contributes, for aligning token-level numbers to words."""
        ...

    def info(self) -> dict: ...


@runtime_checkable
class AttentionReader(Protocol):
    def attention(self, text: str) -> tuple[list[int], np.ndarray]:
        """Token ids of ``text`` and its last-layer, head-averaged attention matrix (DRAGIN's signal)."""
        ...


@runtime_checkable
class NextTokenScorer(Protocol):
    def next_token_logprobs(self, prompts: Sequence[str], options: Sequence[str]) -> list[dict[str, float]]:
        """Log-probability of each option's first token right after each prompt (prompting estimator)."""
        ...


@runtime_checkable
class ChatFormatter(Protocol):
    def format_chat(self, messages: list[dict]) -> str: ...


#: The full set a transformers model provides (:class:`~seakr.models.hf.HFLanguageModel`).
@runtime_checkable
class LanguageModel(Generator, AttentionReader, NextTokenScorer, Protocol):
    pass


def require(lm, needs, who: str) -> None:
    """Raise :class:`MissingCapability` naming the first capability in ``needs`` that ``lm`` lacks."""
    have = frozenset(getattr(lm, "capabilities", ()))
    for cap in needs:
        if cap not in have:
            name = getattr(lm, "name", type(lm).__name__)
            raise MissingCapability(f"{who} needs the model capability {cap!r}, which {name} does not provide "
                                    f"(it provides: {', '.join(sorted(have)) or 'nothing declared'})")
