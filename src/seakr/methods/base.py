"""What every method shares: the model-call helper that scores uncertainty, searching, and answering."""

from __future__ import annotations

import dataclasses
import math
import os
import time
from dataclasses import dataclass
from typing import Self, Sequence

from .. import uncertainty as U
from ..models.base import (CHAT, GENERATE, NEXT_TOKEN, STATES, Cancelled, Generation, GenerationConfig, Generator,
                           cancellable, prompt_session, require)
from ..prompts import PromptBuilder
from ..search.base import Passage, SearchEngine, check_hits
from ..common.checks import check_question
from ..common.console import said, warn, without_controls
from .text import extract_answer, has_answer, is_unknown
from .records import FinalAnswer
from .trace import Answer, Tracer
from .config import PACKAGED, MethodConfig, check_lengths, options_of_others
from .deltas import default_prompt_style
from ..search import as_engine
from ..models import DEFAULT_MODEL, LOAD_KEYS, load_model, model_path
from ..models.figures import model_context


#: Stop strings of one reasoning step: one sentence (our demonstrations have no internal ". ").
STEP_STOPS = (". ", ".\n", "\n", "\nQuestion:", "\nContext", " Question:")


#: Stop strings of a whole answer (final reasoning / CoT).
ANSWER_STOPS = ("\n\n", "\nQuestion:", "\nContext", "\n", " Question:")


#: A sentence that ends with no space before the next ("American.What is ...", "Indiana.**Created
#: Question**" from the 1.5B): a word of two or more lower-case letters, a period, then a capital or
#: the start of markup (* # [). Abbreviations ("St. Louis", "U.S.") never match. Letters of every cased
#: script ("Reykjavík.Östersund"), so the pattern is the `regex` module's (Python's `re` has no case classes).
RUN_ON = r"(?<=\p{Ll}{2})\.(?=[\p{Lu}*#\[])"


@dataclass
class Scored:
    """One prompt's generation and its uncertainty (None when the call was not scored)."""

    gen: Generation
    u: float | None

    @property
    def text(self) -> str:
        return self.gen.greedy.text.strip() if self.gen.greedy else ""


def min_u_index(us: Sequence[float | None]) -> int:
    """The candidate with the lowest U; None counts as +inf and ties go to the earlier (better-ranked) one."""
    return min(range(len(us)), key=lambda j: (math.inf if us[j] is None else us[j], j))


def sufficiency(lm, prompt: str, question: str) -> float:
    """The prompting estimator (paper §5.1): ask after the prompt whether the model knows enough to
    answer; U = P(No) normalised over {Yes, No}."""
    lp = lm.next_token_logprobs([prompt + U.SUFFICIENCY_QUESTION.format(question=question)], [" Yes", " No"])[0]
    return U.prompt_score(lp[" Yes"], lp[" No"])


def warn_unread_tap(method, given: Sequence[str]) -> None:
    """Say once that the model's tap (``given``, as its door spells it: ``--layer 3``, ``state_layer=3``) is set
    for a method that reads no hidden state (a baseline decodes greedily; SeaKR with token-level estimators and
    no probe): it is recorded in the run's config and never read."""
    if given and STATES not in method.requires():
        warn(f"{' and '.join(given)} {'are' if len(given) > 1 else 'is'} not read: {method.name} reads no hidden "
             "state here", once=True)


def estimator_needs(estimator: str) -> set[str]:
    """Model capabilities an estimator reads."""
    return {GENERATE} | ({STATES} if estimator.startswith("eigen") or estimator == "hidden-score" else set()) | (
        {NEXT_TOKEN} if estimator == "prompt" else set())


class Method:
    """Base class: holds the model, the engine and the prompt builder; one public ``answer``.

    Subclasses implement ``_run(question, tr) -> answer`` and declare what they need of the model in
    :meth:`requires`; construction fails with one line when the model lacks it."""

    name = "method"
    Config = MethodConfig
    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if cls.__module__.startswith("seakr.methods."):
            PACKAGED[cls.name] = cls
    #: whether every call also reads the greedy answer's state (a probe on the final answers needs it)
    greedy_states = False
    #: whether it may search (then a command without an index is refused before the model loads)
    retrieves = True

    @classmethod
    def from_config(cls, model: str | os.PathLike | Generator | None = None,
                    index: str | os.PathLike | SearchEngine | list | None = None, **options) -> Self:
        """``SeaKR.from_config(model="qwen2.5-coder-0.5b", index="idx/", delta=-5.2)`` (or ``IRCoT.from_config``, any
        method's): the options and the index are checked (and the index opened) before the model loads; ``index``
        may also be any search engine or a list of passages or texts (:func:`seakr.search.passages_engine`).
        ``model`` may also be a model already loaded (``load_model(...)``), shared by several methods; options
        that say how a model loads (``precision``, ``threads``) go to its load."""
        lm_opts = {k: options.pop(k) for k in list(options) if k in LOAD_KEYS}
        config = cls.Config.from_dict(options)  # a bad option fails here, not after the load
        loaded = isinstance(model, Generator)
        if loaded and lm_opts:
            raise ValueError(f"{', '.join(lm_opts)}: set when a model loads, and this model is loaded; give them to "
                             "load_model")
        engine = as_engine(index)
        if not loaded:  # a bad name, or a length its window cannot hold, fails before the load (cls checks again)
            check_lengths(config, model_context(model_path(DEFAULT_MODEL if model is None else model)))
        m = cls(model if loaded else load_model(model or DEFAULT_MODEL, **lm_opts), engine, **options)
        warn_unread_tap(m, [f"{k}={said(lm_opts[k])}" for k in ("state_layer", "state_source") if k in lm_opts])
        return m

    def __init__(self, lm: Generator, engine: SearchEngine | str | None = None,
                 config: MethodConfig | dict | None = None,
                 **overrides):
        """``engine``: a search engine, or an index folder / URL to open; ``config``: the method's config or a
        dict of its options; ``overrides``: options over either."""
        if not callable(getattr(lm, "generate", None)):  # else an AttributeError deep in the first use of it
            hint = f"; load one by name with seakr.models.load_model({lm!r})" if isinstance(lm, str) else ""
            raise TypeError(f"lm: expected a language model (seakr.models.load_model), got {type(lm).__name__}{hint}")
        self.lm, self.engine = lm, as_engine(engine)
        if isinstance(config, dict):
            config = self.Config.from_dict(config)
        elif config is not None and not isinstance(config, self.Config):
            raise TypeError(f"config: expected {self.Config.__name__} or a dict of options, got "
                            f"{type(config).__name__}")
        self.config = (config or self.Config()).replace(**overrides) if overrides else (config or self.Config())
        if self.config.prompt_style == "auto":
            self.config = self.config.replace(prompt_style=default_prompt_style(lm))
        self.config = self.resolve(self.config)
        c = self.config
        require(lm, sorted(self.requires()),
                f"method {self.name!r} (estimator={c.estimator}, prompt_style={c.prompt_style})")
        check_lengths(c, lm.info().get("context_tokens"))  # the lengths must leave the prompt room
        self.prompts = PromptBuilder(c.prompt_set, c.n_shot, c.prompt_style,
                                     lm.format_chat if c.prompt_style == "chat" else None, c.titles, c.marker)
        whys: dict[str, list[str]] = {}
        for name, why in self.unread():  # said, not refused: a grid's or a server's options may serve several methods
            whys.setdefault(why, []).append(f"{name}={said(c.others.get(name, getattr(c, name, None)))}")
        for why, given in whys.items():
            warn(f"option{'s' * (len(given) > 1)} {', '.join(given)} {'are' if len(given) > 1 else 'is'} not read: "
                 f"{why}",
                 once=True)

    def resolve(self, config: MethodConfig) -> MethodConfig:
        """Settle options that depend on the model (``auto`` values), before anything reads them."""
        return config

    def unread(self) -> list[tuple[str, str]]:
        """The options given (other than their defaults) that this method, as settled, never reads, and why: here
        another method's (:attr:`MethodConfig.others`); a method adds its own to these."""
        owners = options_of_others(type(self.config))
        return [(k, f"an option of {', '.join(owners[k])}, which {self.name} does not read")
                for k in self.config.others]

    def requires(self) -> set[str]:
        return estimator_needs(self.config.estimator) | ({CHAT} if self.config.prompt_style == "chat" else set())

    # ------------------------------------------------------------------ prompts within the context window
    def prompt_budget(self) -> int | None:
        """Prompt tokens that leave room for the longest generation, or None when the model does not
        say its context size (looked up once)."""
        if not hasattr(self, "_budget"):
            ctx = self.lm.info().get("context_tokens")
            longest = max(self.config.max_new_tokens, self.config.answer_tokens)  # a step's, or a forced answer's
            self._budget = None if not ctx else int(ctx) - longest
        return self._budget

    def _fits(self, prompt: str, budget: int) -> bool:
        # a token covers at least one byte (byte-level BPE, SentencePiece byte fallback): when the bytes
        # (plus a few special tokens) fit, the tokens do, and the tokenizer need not run
        return len(prompt.encode()) + 8 <= budget or self.lm.count_tokens(prompt) <= budget

    def check_question(self, question: str) -> None:
        """Refuse a question whose bare prompt (demonstrations + question) leaves no room to answer."""
        budget = self.prompt_budget()
        if budget is not None and not self._fits(self.prompts.render(question)[0], budget):
            n = self.lm.count_tokens(self.prompts.render(question)[0])
            if n > budget:
                raise ValueError(f"question too long: its prompt is {n} tokens, and with {self.config.max_new_tokens} "
                                 f"to generate it exceeds the model's {budget + self.config.max_new_tokens}-token "
                                 "context")

    def render(self, tr: Tracer, question: str, steps: Sequence[str] = (), passages: Sequence = (), tail: str = ""):
        """The prompt and its cacheable prefix, fitted to the context window.

        Truncation rule: when the prompt would not leave room for ``max_new_tokens``, every passage is
        cut to the same number of leading words, the most that fits (a trace ``truncate`` decision says
        how many); passages are never dropped and the question and steps are never cut."""
        prompt, prefix = self.prompts.render(question, steps, passages, tail)
        budget = self.prompt_budget()
        if budget is None or not passages or self._fits(prompt, budget):
            return prompt, prefix
        words = [p.text.split() for p in passages]
        cut = lambda m: [dataclasses.replace(p, text=" ".join(w[:m]) + " ...") for p,
                         w in zip(passages, words)]  # noqa: E731
        lo, hi = 0, max(len(w) for w in words)  # the largest m whose prompt fits
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._fits(self.prompts.render(question, steps, cut(mid), tail)[0], budget):
                lo = mid
            else:
                hi = mid - 1
        tr.decision("truncate", words_per_passage=lo, passages=len(passages), budget_tokens=budget)
        return self.prompts.render(question, steps, cut(lo), tail)

    # ------------------------------------------------------------------ model calls
    def gen_config(self, stops: Sequence[str], sampled: bool, max_new: int | None = None,
                   final: bool = False) -> GenerationConfig:
        c = self.config
        n = c.k if (sampled and U.NEEDS[c.estimator] == "samples") else 0
        return GenerationConfig(n=n, greedy=True, temperature=c.temperature, top_k=c.top_k, top_p=c.top_p,
                                max_new_tokens=max_new or c.max_new_tokens, stop=tuple(stops), stop_patterns=(RUN_ON,),
                                seed=c.seed, with_states=n > 0 and c.estimator.startswith("eigen"),
                                greedy_state=self.greedy_states, greedy_trail=c.estimator == "hidden-score",
                                final=final)

    def uncertainty(self, prompt: str, gen: Generation, question: str) -> float:
        """The configured estimator on one generation; an empty greedy step is a failed step (+inf,
        as the reference treats it)."""
        if gen.greedy is not None and not gen.greedy.text.strip():
            return U.UNCERTAIN
        if self.config.estimator == "prompt":
            return sufficiency(self.lm, prompt, question)
        return U.score(self.config.estimator, gen, self.config.alpha)

    def call(self, tr: Tracer, purpose: str, prompts: Sequence[str], prefix: str, stops: Sequence[str], *,
             scored: bool = True, max_new: int | None = None, final: bool = False) -> list[Scored]:
        """Generate for several prompts in one batched call, each scored when ``scored``; ``final``: the calls
        are answers whose text and log-probs no later decision reads (an unscored answer: the model may draft it)."""
        self._cancelled(tr)
        t = time.perf_counter()
        gens = self.lm.generate(list(prompts), self.gen_config(stops, scored, max_new, final), prefix=prefix)
        us = [self.uncertainty(p, g, tr.question) if scored else None for p, g in zip(prompts, gens)]
        dt = (time.perf_counter() - t) / max(1, len(gens))
        for p, g, u in zip(prompts, gens, us):
            tr.model_call(purpose, p, g, u, dt)
        return [Scored(g, u) for g, u in zip(gens, us)]

    @staticmethod
    def _cancelled(tr: Tracer) -> None:
        if tr.cancel is not None and tr.cancel.is_set():
            raise Cancelled()

    def search(self, tr: Tracer, query: str, k: int) -> list[Passage]:
        if self.engine is None:
            raise ValueError(f"method {self.name!r} needs a search engine (pass --index)")
        # a query with nothing left (an empty step, a question of stop words only) searches the question:
        # an empty query finds nothing and would end the chain on a retrieval that never happened
        query = query if query.strip() else tr.question
        t = time.perf_counter()
        hits = check_hits(self.engine.search(query, k), k, self.engine)
        tr.retrieval(query, hits, time.perf_counter() - t)
        return hits

    # ------------------------------------------------------------------ answering
    def answer_prompt(self, tr: Tracer, question: str, steps: Sequence[str], passages: Sequence, purpose: str,
                      scored: bool = True) -> FinalAnswer:
        """A full answer (CoT) from (steps, passages); see :meth:`answer_prompts`."""
        return self.answer_prompts(tr, question, [(steps, passages)], purpose, scored)[0]

    def answer_prompts(self, tr: Tracer, question: str, contexts: Sequence[tuple], purpose: str,
                       scored: bool = True) -> list[FinalAnswer]:
        """Full answers for several (steps, passages) contexts in one batched call; an answer without
        the marker is forced by appending it. U is the one of the call that produced the answer (the
        forced call when forcing happened, as the reference does)."""
        rendered = [self.render(tr, question, st, ps) for st, ps in contexts]
        res = self.call(tr, purpose, [p for p, _ in rendered], rendered[0][1], ANSWER_STOPS, scored=scored,
                        final=not scored)
        said = [extract_answer(r.gen.greedy.text, self.config.marker) for r in res]
        out = [_final(a or "", r, r.gen.greedy.text, False) for a, r in zip(said, res)]
        todo = [i for i, a in enumerate(said) if a is None]
        if todo:
            # the forced prompt continues the model's own unfinished answer, then the marker
            heads = [(" " + out[i].text.strip() if out[i].text.strip() else "") for i in todo]
            forced = self.forced_answers(tr, question, [contexts[i] for i in todo], purpose + "/forced", scored, heads)
            for i, f in zip(todo, forced):
                out[i] = f  # its text is the head (the reasoning), the marker and the answer: the whole answer once
        return out

    def forced_answers(self, tr: Tracer, question: str, contexts: Sequence[tuple], purpose: str, scored: bool,
                       heads: Sequence[str] | None = None) -> list[FinalAnswer]:
        """Force an answer after each (steps, passages) context (paper B.3): the prompt ends with the
        context's ``head`` text and the marker ("So the answer is"); the answer is the phrase that
        follows; ``text`` = head + marker + continuation."""
        heads = list(heads) if heads is not None else [""] * len(contexts)
        tails = [f"{h} {self.config.marker}" for h in heads]
        rendered = [self.render(tr, question, st, ps, tail=t) for (st, ps), t in zip(contexts, tails)]
        res = self.call(tr, purpose, [p for p, _ in rendered], rendered[0][1], ANSWER_STOPS, scored=scored,
                        max_new=self.config.answer_tokens, final=not scored)
        said = [extract_answer(f"the answer is {r.gen.greedy.text}", self.config.marker) for r in res]
        return [_final(a or "", r, t + r.gen.greedy.text, True) for a, t, r in zip(said, tails, res)]

    def answer(self, question: str, listener=None, cancel=None) -> Answer:
        """Answer one question; ``listener(event)`` sees every trace event as it happens; setting the
        ``cancel`` event (a ``threading.Event``) stops the work at its next decode step (:class:`Cancelled`)."""
        check_question(question)  # the one rule of every door (common.checks)
        if listener is not None and not callable(listener):
            raise TypeError(f"listener: expected a callable that takes each trace event, got {type(listener).__name__}")
        if cancel is not None and not callable(getattr(cancel, "is_set", None)):
            raise TypeError(f"cancel: expected a threading.Event (or None), got {type(cancel).__name__}")
        if self.retrieves and self.engine is None:  # else it fails at its first search, after the first model calls
            raise ValueError(f"method {self.name!r} searches: give it a search engine (from_config(index=...), "
                             "or an engine as the second argument)")
        asked = without_controls(question)  # the prompts and the searches read it without a console's escapes
        self.check_question(asked)
        tr = Tracer(question, self.name, listener, cancel)
        with cancellable(cancel), prompt_session():  # this answer's calls reuse each other's prompts, no others
            ans = self._run(asked, tr)
        return Answer(question, ans, self.name, tr.to_dict(), self.describe(), states=tr.final_states())

    def _run(self, question: str, tr: Tracer) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def describe(self) -> dict:
        info = self.lm.info()
        eng = self.engine.metadata() if self.engine is not None else None
        return {"method": self.name, "config": self.config.to_dict(), "prompt": self.prompts.to_dict(),
                "model": {k: info.get(k) for k in ("model", "precision", "dtype", "device", "state_layer",
                                                   "state_source", "threads")},
                "engine": {k: eng.get(k) for k in ("engine", "path", "url", "doc_count", "checksum")} if eng else None}


def _final(answer: str, r: Scored, text: str, forced: bool) -> FinalAnswer:
    """An answer record, with the greedy answer's state when the call read it (for a probe; memory only)."""
    return FinalAnswer(answer, U.UNCERTAIN if r.u is None else r.u, text, forced,
                       state=r.gen.greedy.state if r.gen.greedy is not None else None)


def take_step(tr: Tracer, steps: list[str], text: str, marker: str | None = None) -> str | None:
    """Add a finished step to the chain; return why the chain ends here, if it does. Every multi-step method
    ends the same two ways, so they share this: an empty step (nothing more to say) is not added, and a
    step that gives the answer (after "the answer is" or the method's ``marker``) is the last one."""
    if not text:
        return tr.stop("empty_step")
    steps.append(text)
    if has_answer(text, marker):
        return tr.stop("answered")
    return None


def final_from_steps(steps: Sequence[str], marker: str | None = None) -> str | None:
    for s in reversed(steps):
        a = extract_answer(s, marker)
        if a is not None:
            return a
    return None


def pick(rationale: FinalAnswer, knowledge: FinalAnswer) -> str:
    """Self-aware reasoning (reference compare_answer): "unknown"/empty defers to the other answer;
    else the lower U wins (a missing U is +inf); a tie goes to the knowledge answer."""
    ra, ka = rationale.answer, knowledge.answer
    if is_unknown(ra) and not is_unknown(ka):
        return "knowledge"
    if is_unknown(ka) and not is_unknown(ra):
        return "rationale"
    return "rationale" if rationale.u < knowledge.u else "knowledge"
