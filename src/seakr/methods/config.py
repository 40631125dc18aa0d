"""The options every method shares (:class:`MethodConfig`), read from any door into one typed, checked object."""

from __future__ import annotations

import dataclasses
import math
import os
import re
from dataclasses import asdict, dataclass
from typing import ClassVar

from .. import uncertainty as U
from ..prompts import ANSWER_SAYS, MARKER, PROMPT_STYLES, prompt_set
from ..common.checks import Range, blank, encodable
from ..common.console import did_you_mean, said
from ..common.files import user_path
from ..common.jsontext import native
from .text import answer_says


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


#: every method seakr ships, by name, as each class is defined (:class:`~seakr.methods.base.Method`): an
#: option's hint names the method it belongs to
PACKAGED: dict[str, type] = {}


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

            owners: dict[str, list[str]] = {}  # every method's options: "gate" given to cot is SeaKR's
            for m, klass in PACKAGED.items():
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


#: SeaKR's two modes. A threshold belongs to one: a confident closed-book answer to a simple question
#: is often right, a confident first step of a multi-hop chain often is not (measured on HotpotQA).
MODES = ("simple", "multihop")


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
