"""What every method shares: its config, the model-call helper that scores uncertainty, answering."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar, Sequence

from .. import uncertainty as U
from ..models.base import (CHAT, GENERATE, NEXT_TOKEN, STATES, Cancelled, Generation, GenerationConfig, Generator,
                           cancellable, require)
from ..prompts import ANSWER_SAYS, MARKER, PROMPT_STYLES, PromptBuilder, prompt_set
from ..search.base import Passage, SearchEngine, check_hits
from ..textio import (Range, blank, check_question as check_typed, did_you_mean, encodable, json_file, native, said,
                      user_path, warn, without_controls)
from .text import answer_says, extract_answer, has_answer, is_unknown
from .records import FinalAnswer
from .trace import Answer, Tracer

#: Stop strings of one reasoning step: one sentence (our demonstrations have no internal ". ").
STEP_STOPS = (". ", ".\n", "\n", "\nQuestion:", "\nContext", " Question:")
#: Stop strings of a whole answer (final reasoning / CoT).
ANSWER_STOPS = ("\n\n", "\nQuestion:", "\nContext", "\n", " Question:")
#: A sentence that ends with no space before the next ("American.What is ...", "Indiana.**Created
#: Question**" from the 1.5B): a word of two or more lower-case letters, a period, then a capital or
#: the start of markup (* # [). Abbreviations ("St. Louis", "U.S.") never match. Letters of every cased
#: script ("Reykjavík.Östersund"), so the pattern is the `regex` module's (Python's `re` has no case classes).
RUN_ON = r"(?<=\p{Ll}{2})\.(?=[\p{Lu}*#\[])"
#: Fallback threshold: the paper's delta for Llama-2-7B layer 16. Wrong for other models: calibrate.
PAPER_DELTA = -6.0


#: the options that name a file or folder: a ``pathlib.Path`` is taken, and kept as text (a config is JSON)
PATH_OPTIONS = ("prompt_set", "probes")


def _float(name: str, v) -> float:
    try:
        return float(v)
    except OverflowError:  # a whole number past a float's range (delta=10**400 from Python): a traceback at use
        raise ValueError(f"option {name}: {said(v)} is past a float's range") from None


_INFINITY = re.compile(r"[+-]?inf(inity)?", re.IGNORECASE)  # a number option's infinity as text (JSON has no other)


def _typed(f: dataclasses.Field, v, rng: "Range | None"):
    """The value of option ``f`` as its declared type, or a one-line error naming it."""
    default = f.default
    if f.name in PATH_OPTIONS and isinstance(v, os.PathLike):  # a pathlib.Path, as Python code names files
        v = os.fspath(v)
    v = native(v)  # np.int64(5) from a sweep: Python's 5
    if isinstance(v, float) and math.isnan(v):
        raise ValueError(f"option {f.name}: expected a number, got NaN")
    whole = (isinstance(default, int) and not isinstance(default, bool)) or (
        default is None and rng is not None and rng.integer)
    if whole and isinstance(v, float) and math.isfinite(v) and v.is_integer():
        v = int(v)  # 16.0 or 1e3 (JSON, a sweep's np.float64(2.0)): the whole number it is
    if default is None and str(f.type).startswith("str"):  # optional text (a folder)
        if v is not None and not isinstance(v, str):
            raise ValueError(f"option {f.name}: expected a string or null, got {said(v)}")
        if isinstance(v, str) and not v.strip():  # read as "not given" (the package's files), or as "."
            raise ValueError(f"option {f.name}: an empty path; name the folder, or leave the option out")
        return v
    number = isinstance(v, (int, float)) and not isinstance(v, bool)
    if default is None:  # optional numbers (delta, n_shot, gate_p)
        if v is not None and (not number or (rng is not None and rng.integer and not isinstance(v, int))):
            kind = "a whole number" if rng is not None and rng.integer else "a number"
            raise ValueError(f"option {f.name}: expected {kind} or null, got {said(v)}")
        if number and "float" in str(f.type):
            _float(f.name, v)  # within a float's range (kept as given: a run's config records delta=3 as 3)
        return v
    if isinstance(default, bool):
        ok = isinstance(v, bool)
    elif isinstance(default, int):
        ok = number and isinstance(v, int)
    elif isinstance(default, float):
        ok, v = number, _float(f.name, v) if number else v
    else:
        ok = isinstance(v, type(default))
    if not ok:
        raise ValueError(f"option {f.name}: expected {type(default).__name__}, got {said(v)}")
    return v


POSITIVE = Range(1, None, integer=True)


@dataclass
class MethodConfig:
    """Knobs shared by every method; each field documents where its default comes from."""

    # sampling of every model call (reference code: n=20, T=1, top-k 50, top-p 0.9, 100 tokens, seed 42)
    k: int = 20
    temperature: float = 1.0
    top_k: int = 50
    top_p: float = 0.9
    max_new_tokens: int = 100
    seed: int = 42
    # uncertainty
    estimator: str = "eigen"  # eigen | eigen-inside | prompt | perplexity | multi-perplexity | ln-entropy | energy
    alpha: float = 1e-3
    # retrieval
    n_candidates: int = 3  # N: passages per retrieval
    max_steps: int = 7  # reference README
    max_passages: int = 5  # reference max_docs
    query_max_words: int = 64
    # prompts
    prompt_set: str = "hotpotqa"
    n_shot: int | None = None
    prompt_style: str = "auto"  # plain | chat | auto: the packaged model's measured better style, else plain
    titles: bool = False
    marker: str = MARKER  # said before the answer in every demonstration and forced answer; the answer is read after it
    answer_tokens: int = 32  # the forced answer's budget: the phrase after the marker (gold answers run < 20 tokens)

    #: Options added after runs were recorded, with the value that reproduces a run recorded without them
    #: (so ``--resume`` of such a run compares like with like).
    ADDED: ClassVar[dict] = {"answer_tokens": 32}

    #: The options schema every door goes through (``--option``, a TOML grid, the Python API, HTTP): each
    #: field's type comes from its default, its range from here; a subclass adds its own fields' ranges.
    RANGES: ClassVar[dict[str, Range]] = {
        "k": Range(0, None, integer=True), "temperature": Range(0, None, hi_open=True), "top_k": POSITIVE,
        "top_p": Range(0, 1, lo_open=True), "max_new_tokens": POSITIVE, "answer_tokens": POSITIVE,
        "seed": Range(0, 2 ** 32 - 1, integer=True),
        "alpha": Range(0, None, lo_open=True, hi_open=True), "n_candidates": POSITIVE, "max_steps": POSITIVE,
        "max_passages": POSITIVE, "query_max_words": POSITIVE, "n_shot": Range(0, None, integer=True),
    }

    def __post_init__(self):
        """Check every option against the schema (so a bad value fails here, not mid-answer)."""
        ranges = self.ranges()
        for f in dataclasses.fields(self):
            v = _typed(f, getattr(self, f.name), ranges.get(f.name))
            object.__setattr__(self, f.name, v)
            if f.name in ranges and v is not None:
                ranges[f.name].check(f.name, v)
        for name in PATH_OPTIONS:  # a path from a TOML grid or a sh script reached no ~ expansion
            if hasattr(self, name):
                object.__setattr__(self, name, user_path(getattr(self, name)))
        if self.estimator not in U.ESTIMATORS:
            raise ValueError(f"unknown estimator {self.estimator!r}{did_you_mean(self.estimator, U.ESTIMATORS)}; "
                             f"choose from {', '.join(U.ESTIMATORS)}")
        self._check_prompts()

    def _check_prompts(self) -> None:
        """The prompt options, checked with the others (they were read only when the method was built, after
        the model had loaded): a style, a marker the answer can be read after, a set with enough demonstrations."""
        if self.prompt_style not in PROMPT_STYLES:
            raise ValueError(f"option prompt_style: one of {', '.join(PROMPT_STYLES)}, not {said(self.prompt_style)}")
        if blank(self.marker) or "\n" in self.marker or ". " in self.marker or not encodable(self.marker):
            # the answer is the text after the marker, and a step ends at ". " or a newline
            raise ValueError(f"option marker: visible text on one line without '. ' (the answer is read after it), "
                             f"got {said(self.marker)}")
        try:
            demos = prompt_set(self.prompt_set).demos
        except ValueError as e:
            raise ValueError(f"option prompt_set: {e}") from None
        if self.n_shot is not None and self.n_shot > len(demos):
            raise ValueError(f"option n_shot: prompt set {self.prompt_set!r} has {len(demos)} demonstration(s), got {said(self.n_shot)}")
        self._check_marker(demos[: self.n_shot])

    def _check_marker(self, demos) -> None:
        """A demonstration step that says the marker would teach the model to end its chain there, as one saying
        "the answer is" would (a set is checked for that when it loads, before a method's marker is known):
        marker="is" read "Paris is the capital of France" as an answer."""
        says = answer_says(self.marker)
        if says is ANSWER_SAYS:  # the default's words: what the set's load checked
            return
        for i, d in enumerate(demos):
            for n, step in enumerate(d.steps, 1):
                if says.search(step):
                    raise ValueError(f"option marker: {said(self.marker)} is said in step {n} of demonstration {i} of "
                                     f"prompt set {self.prompt_set!r} ({step!r}), and a chain ends at a step that says "
                                     "it: choose words the demonstrations' steps do not say")

    @classmethod
    def ranges(cls) -> dict[str, "Range"]:
        out: dict[str, Range] = {}
        for klass in reversed(cls.__mro__):
            out.update(vars(klass).get("RANGES", {}))
        return out

    def to_dict(self) -> dict:
        return {k: (v if not isinstance(v, float) or math.isfinite(v) else str(v)) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict):
        if not isinstance(d, dict):  # a list was "'list' object has no attribute 'items'", None "not iterable"
            raise TypeError(f"{cls.__name__}.from_dict: expected a dict of options, got {type(d).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            import difflib

            from ..models import MODEL_OPTIONS
            from . import METHODS

            owners: dict[str, list[str]] = {}  # every method's options: "gate" given to cot is SeaKR's
            for m, klass in METHODS.items():
                for f in dataclasses.fields(klass.Config):
                    owners.setdefault(f.name, []).append(m)

            def hint(k: str) -> str:
                if (plain := k.lower().replace("-", "_")) != k and plain in names:  # "K": k had no suggestion
                    return f"{k!r} (did you mean {plain!r}?)"
                near = difflib.get_close_matches(k, MODEL_OPTIONS, n=1, cutoff=0.8) if k not in owners else []
                if near:  # "threads" was "did you mean 'theta', an option of flare?"
                    flag, grid, py = MODEL_OPTIONS[near[0]]
                    return (f"{k!r} ({'' if near[0] == k else f'did you mean {near[0]!r}? '}how the model loads, not a "
                            f"method option: {flag} on the command line, {grid} at a grid's top, {py}= in Python)")
                if k in owners:
                    return f"{k!r} (an option of {', '.join(owners[k])})"
                if close := difflib.get_close_matches(k, sorted(names), n=1):
                    return f"{k!r} (did you mean {close[0]!r}?)"
                if close := difflib.get_close_matches(k, sorted(owners), n=1):
                    return f"{k!r} (did you mean {close[0]!r}, an option of {', '.join(owners[close[0]])}?)"
                return repr(k)

            said = [hint(k) for k in unknown]
            every = ", ".join(f.name for f in dataclasses.fields(cls))  # where no hint helps: the list to pick from
            known = "" if all(h != repr(k) for h, k in zip(said, unknown)) else f"; its options: {every}"
            raise ValueError(f"{cls.__name__}: unknown option(s) {', '.join(said)}{known}")
        # JSON and TOML have no infinity: "inf" / "-inf" spell it for a number option (delta="-inf"); a text
        # option keeps the text (prompt_set="inf" was "expected str, got inf", not an unknown set)
        numbers = {f.name for f in dataclasses.fields(cls) if "float" in str(f.type)}
        vals = {k: (float(v) if k in numbers and isinstance(v, str) and _INFINITY.fullmatch(v.strip()) else v)
                for k, v in d.items()}  # "-Inf", "Infinity": as the flags (float()) read them
        return cls(**vals)

    def replace(self, **kw):
        return self.from_dict({**asdict(self), **kw})


def default_prompt_style(lm) -> str:
    """The packaged model's measured better prompt style (registry), where the model can take it."""
    from ..models.registry import REGISTRY

    style = getattr(REGISTRY.get(str(lm.info().get("model"))), "prompt_style", "plain")
    return style if style == "plain" or style in lm.capabilities else "plain"


def _style_tag(style: str) -> str:
    # U moves with the prompt's wording, so a threshold belongs to a prompt style; plain keeps the old names
    return "" if style == "plain" else f"-{style}"


#: SeaKR's two modes. A threshold belongs to one: a confident closed-book answer to a simple question
#: is often right, a confident first step of a multi-hop chain often is not (measured on HotpotQA).
MODES = ("simple", "multihop")


def _mode_tag(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {said(mode)}")
    return "" if mode == "simple" else f"-{mode}"  # simple-QA calibration keeps the old names


def calibration_path(model_info: dict, style: str = "plain", mode: str = "simple") -> Path:
    from ..models.registry import cache_root

    name = str(model_info.get("model", "model")).replace("/", "_")
    return cache_root() / "calibration" / (f"{name}-L{model_info.get('state_layer')}-{model_info.get('state_source', 'mlp')}"
                                           f"{_style_tag(style)}{_mode_tag(mode)}.json")


def _packaged_key(model_info: dict, style: str, mode: str) -> str:
    return (f"{model_info.get('model')}:L{model_info.get('state_layer')}:{model_info.get('state_source', 'mlp')}"
            + (_style_tag(style) + _mode_tag(mode)).replace("-", ":"))


def read_thresholds(p: Path) -> dict:
    """A model's calibration file ({"delta": {estimator: value}, ...}), checked: a hand-edited or damaged one
    is named with its line, not a traceback, wherever it is read (SeaKR's default, `seakr calibrate`'s write)."""
    d = json_file(p)
    if not isinstance(d, dict) or not isinstance(d.get("delta", {}), dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v)  # NaN: never retrieves
            for v in d.get("delta", {}).values()):
        raise ValueError(f"{p}: not a threshold file (expected {{\"delta\": {{estimator: value}}}}): "
                         "fix it, delete it, or run `seakr calibrate` again")
    return d


def default_delta(model_info: dict, estimator: str, style: str = "plain", mode: str = "simple") -> tuple[float, str]:
    """The threshold for this model/layer/prompt style/mode/estimator, and where it came from: the
    user's calibration file, else the packaged measurement (methods/deltas.json), for this mode; a
    multi-hop run with neither falls back to the simple-QA values (named as such in the source); else
    the paper's -6 (eigen only)."""
    packaged = json.loads((Path(__file__).parent / "deltas.json").read_text(encoding="utf-8"))
    for m in dict.fromkeys((mode, "simple")):
        p = calibration_path(model_info, style, m)
        if p.exists():
            d = read_thresholds(p)
            if estimator in d.get("delta", {}):
                return float(d["delta"][estimator]), str(p)
        key = _packaged_key(model_info, style, m)
        if not estimator.startswith("_") and estimator in packaged.get(key, {}):  # "_provenance" is not a value
            return float(packaged[key][estimator]), f"packaged:{key}"
    if estimator in ("eigen",):
        return PAPER_DELTA, "paper"
    raise ValueError(f"no threshold for estimator {estimator!r} on {_packaged_key(model_info, style, mode)}: "
                     "give one (delta= in Python, --delta on the command line, \"delta\" in a request's options) or "
                     "run `seakr calibrate`")


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
    """Say once that the model's tap (``given``, as its door spells it: ``--layer 3``, ``state_layer=3``) was set
    for a method that reads no hidden state (a baseline decodes greedily; SeaKR with token-level estimators and no
    probe): it was taken, recorded in the run's config and never read."""
    if given and STATES not in method.requires():
        warn(f"{' and '.join(given)} {'are' if len(given) > 1 else 'is'} not read: {method.name} reads no hidden "
             "state here", once=True)


def estimator_needs(estimator: str) -> set[str]:
    """Model capabilities an estimator reads."""
    return {GENERATE} | ({STATES} if estimator.startswith("eigen") or estimator == "hidden-score" else set()) | (
        {NEXT_TOKEN} if estimator == "prompt" else set())


def check_room(max_new_tokens: int, context: int | None, option: str = "max_new_tokens") -> None:
    """Refuse a generation length that leaves no token of the model's context window for a prompt (a window of
    None: not known, nothing to check). Where the model loads, :class:`Method` checks; before, the plan does."""
    if context and max_new_tokens >= context:
        raise ValueError(f"option {option}: {said(max_new_tokens)} leaves no room for a prompt in the model's "
                         f"{context}-token context; lower it")


def check_lengths(config: "MethodConfig", context: int | None) -> None:
    """:func:`check_room` for every generation length a config sets (a step's and a forced answer's)."""
    for option in ("max_new_tokens", "answer_tokens"):
        check_room(getattr(config, option), context, option)


class Method:
    """Base class: holds the model, the engine and the prompt builder; one public ``answer``.

    Subclasses implement ``_run(question, tr) -> answer`` and declare what they need of the model in
    :meth:`requires`; construction fails with one line when the model lacks it."""

    name = "method"
    Config = MethodConfig
    #: whether every call also reads the greedy answer's state (a probe on the final answers needs it)
    greedy_states = False
    #: whether it may search (then a command without an index is refused before the model loads)
    retrieves = True

    def __init__(self, lm: Generator, engine: SearchEngine | str | None = None, config: MethodConfig | dict | None = None,
                 **overrides):
        """``engine``: a search engine, or an index folder / URL to open; ``config``: the method's config or a
        dict of its options; ``overrides``: options over either."""
        from ..search import as_engine

        if not callable(getattr(lm, "generate", None)):  # else an AttributeError deep in the first use of it
            hint = f"; load one by name with seakr.models.load_model({lm!r})" if isinstance(lm, str) else ""
            raise TypeError(f"lm: expected a language model (seakr.models.load_model), got {type(lm).__name__}{hint}")
        self.lm, self.engine = lm, as_engine(engine)
        if isinstance(config, dict):
            config = self.Config.from_dict(config)
        elif config is not None and not isinstance(config, self.Config):
            raise TypeError(f"config: expected {self.Config.__name__} or a dict of options, got {type(config).__name__}")
        self.config = (config or self.Config()).replace(**overrides) if overrides else (config or self.Config())
        if self.config.prompt_style == "auto":
            self.config = self.config.replace(prompt_style=default_prompt_style(lm))
        self.config = self.resolve(self.config)
        c = self.config
        require(lm, sorted(self.requires()), f"method {self.name!r} (estimator={c.estimator}, prompt_style={c.prompt_style})")
        if (budget := self.prompt_budget()) is not None:  # was "question too long ... shorten it"
            check_lengths(c, budget + max(c.max_new_tokens, c.answer_tokens))
        self.prompts = PromptBuilder(c.prompt_set, c.n_shot, c.prompt_style,
                                     lm.format_chat if c.prompt_style == "chat" else None, c.titles, c.marker)
        whys: dict[str, list[str]] = {}
        for name, why in self.unread():  # said, not refused: a grid's or a server's options may serve several methods
            whys.setdefault(why, []).append(f"{name}={said(getattr(c, name))}")
        for why, given in whys.items():
            warn(f"option{'s' * (len(given) > 1)} {', '.join(given)} {'are' if len(given) > 1 else 'is'} not read: {why}",
                 once=True)

    def resolve(self, config: MethodConfig) -> MethodConfig:
        """Settle options that depend on the model (``auto`` values), before anything reads them."""
        return config

    def unread(self) -> list[tuple[str, str]]:
        """The options given (other than their defaults) that this method, as settled, never reads, and why."""
        return []

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
                                 f"to generate it exceeds the model's {budget + self.config.max_new_tokens}-token context")

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
        cut = lambda m: [dataclasses.replace(p, text=" ".join(w[:m]) + " ...") for p, w in zip(passages, words)]  # noqa: E731
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
    def gen_config(self, stops: Sequence[str], sampled: bool, max_new: int | None = None) -> GenerationConfig:
        c = self.config
        n = c.k if (sampled and U.NEEDS[c.estimator] == "samples") else 0
        return GenerationConfig(n=n, greedy=True, temperature=c.temperature, top_k=c.top_k, top_p=c.top_p,
                                max_new_tokens=max_new or c.max_new_tokens, stop=tuple(stops), stop_patterns=(RUN_ON,),
                                seed=c.seed, with_states=n > 0 and c.estimator.startswith("eigen"),
                                greedy_state=self.greedy_states, greedy_trail=c.estimator == "hidden-score")

    def uncertainty(self, prompt: str, gen: Generation, question: str) -> float:
        """The configured estimator on one generation; an empty greedy step is a failed step (+inf,
        as the reference treats it)."""
        if gen.greedy is not None and not gen.greedy.text.strip():
            return U.UNCERTAIN
        if self.config.estimator == "prompt":
            return sufficiency(self.lm, prompt, question)
        return U.score(self.config.estimator, gen, self.config.alpha)

    def call(self, tr: Tracer, purpose: str, prompts: Sequence[str], prefix: str, stops: Sequence[str], *,
             scored: bool = True, max_new: int | None = None) -> list[Scored]:
        """Generate for several prompts in one batched call, each scored when ``scored``."""
        self._cancelled(tr)
        t = time.perf_counter()
        gens = self.lm.generate(list(prompts), self.gen_config(stops, scored, max_new), prefix=prefix)
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
        res = self.call(tr, purpose, [p for p, _ in rendered], rendered[0][1], ANSWER_STOPS, scored=scored)
        said = [extract_answer(r.gen.greedy.text, self.config.marker) for r in res]
        out = [_final(a or "", r, r.gen.greedy.text, False) for a, r in zip(said, res)]
        todo = [i for i, a in enumerate(said) if a is None]
        if todo:
            # the forced prompt continues the model's own unfinished answer, then the marker
            heads = [(" " + out[i].text.strip() if out[i].text.strip() else "") for i in todo]
            forced = self.forced_answers(tr, question, [contexts[i] for i in todo], purpose + "/forced", scored, heads)
            for i, f in zip(todo, forced):
                out[i] = f.replace(text=out[i].text + f.text)
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
                        max_new=self.config.answer_tokens)
        said = [extract_answer(f"the answer is {r.gen.greedy.text}", self.config.marker) for r in res]
        return [_final(a or "", r, t + r.gen.greedy.text, True) for a, t, r in zip(said, tails, res)]

    def answer(self, question: str, listener=None, cancel=None) -> Answer:
        """Answer one question; ``listener(event)`` sees every trace event as it happens; setting the
        ``cancel`` event (a ``threading.Event``) stops the work at its next decode step (:class:`Cancelled`)."""
        check_typed(question)  # the one rule of every door (textio)
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
        with cancellable(cancel):
            ans = self._run(asked, tr)
        return Answer(question, ans, self.name, tr.to_dict(), self.describe(), states=tr.final_states())

    def _run(self, question: str, tr: Tracer) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def describe(self) -> dict:
        info = self.lm.info()
        eng = self.engine.metadata() if self.engine is not None else None
        return {"method": self.name, "config": self.config.to_dict(), "prompt": self.prompts.to_dict(),
                "model": {k: info.get(k) for k in ("model", "precision", "dtype", "device", "state_layer", "state_source", "threads")},
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
