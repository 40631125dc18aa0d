"""The options every method shares (:class:`MethodConfig`): one pydantic schema (``common.schema``) that every door
(``--option``, a TOML grid, the Python API, HTTP, the framework components) converts into; field constraints hold
each option's range, a model validator each rule between options."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict
from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from .. import uncertainty as U
from ..prompts import ANSWER_SAYS, MARKER, PROMPT_STYLES, prompt_set
from ..common.checks import blank, encodable
from ..common.console import nearest, said
from ..common.schema import Count, NonNegative, PathText, Positive, Real, Seed, schema
from .text import answer_says
from ..models import LOAD_KEYS, MODEL_OPTIONS


#: every method seakr ships, by name, as each class is defined (:class:`~seakr.methods.base.Method`): an
#: option's hint names the method it belongs to
PACKAGED: dict[str, type] = {}

Estimator = Literal[tuple(U.ESTIMATORS)]


def unknown_options(cls: type, unknown: list[str]) -> str:
    """The unknown option names, each with its nearest valid name: the option's spelling in this method, another
    method's option, or a model's loading knob given as a method option."""
    names = [f.name for f in dataclasses.fields(cls)]
    owners = options_of_others(cls)  # "gate" given to cot is SeaKR's

    def hint(k: str) -> str:
        near = nearest(k, {*MODEL_OPTIONS, *LOAD_KEYS}, 0.8) if k not in owners else None
        if near is not None and near not in names:  # "threads" is how the model loads, not flare's "theta"
            flag, grid, py = MODEL_OPTIONS.get(near, (None, None, near))
            doors = f"{flag} on the command line, {grid} at a grid's top, " if flag else ""
            return (f"{k!r} ({'' if near == k else f'did you mean {near!r}? '}how the model loads, not a "
                    f"method option: {doors}{py}= in Python)")
        if k in owners:
            return f"{k!r} (an option of {', '.join(owners[k])})"
        if (close := nearest(k, names)) is not None:
            return f"{k!r} (did you mean {close!r}?)"
        if (close := nearest(k, owners)) is not None:
            return f"{k!r} (did you mean {close!r}, an option of {', '.join(owners[close])}?)"
        return repr(k)

    hints = [hint(k) for k in unknown]
    known = "" if all(h != repr(k) for h, k in zip(hints, unknown)) else f"; its options: {', '.join(names)}"
    return f"unknown option(s) {', '.join(hints)}{known}"  # the field names the door: --option, options.k


@schema("option", unknown_options)
class MethodConfig:
    """Knobs shared by every method; each field documents where its default comes from."""

    # sampling of every model call (reference code: n=20, T=1, top-k 50, top-p 0.9, 100 tokens, seed 42)
    k: Count = 20
    temperature: NonNegative = 1.0
    top_k: Positive = 50
    top_p: Annotated[Real, Field(gt=0, le=1)] = 0.9
    max_new_tokens: Positive = 100
    seed: Seed = 42
    # uncertainty
    # eigen | eigen-inside | prompt | perplexity | multi-perplexity | ln-entropy | energy
    estimator: Estimator = "eigen"
    alpha: U.Alpha = 1e-3
    # retrieval
    n_candidates: Positive = 3  # N: passages per retrieval
    max_steps: Positive = 7  # reference README
    max_passages: Positive = 5  # reference max_docs
    query_max_words: Positive = 64
    # prompts
    prompt_set: PathText = "hotpotqa"
    n_shot: Count | None = None
    prompt_style: Literal[PROMPT_STYLES] = "auto"  # plain | chat | auto: the packaged model's measured better style
    titles: bool = False
    marker: str = MARKER  # said before the answer in every demonstration and forced answer; the answer is read after it
    # the forced answer's budget: the phrase after the marker (gold answers run < 20 tokens)
    answer_tokens: Positive = 32

    #: Options added after runs were recorded, with the value that reproduces a run recorded without them
    #: (so ``--resume`` of such a run compares like with like).
    ADDED: ClassVar[dict] = {"answer_tokens": 32}

    @model_validator(mode="after")
    def _marker_readable(self):
        """The answer is the text after the marker, and a step ends at ". " or a newline."""
        if blank(self.marker) or "\n" in self.marker or ". " in self.marker or not encodable(self.marker):
            raise ValueError(f"option marker: visible text on one line without '. ' (the answer is read after it), "
                             f"got {said(self.marker)}")
        return self

    @model_validator(mode="after")
    def _demonstrations(self):
        """A prompt set that loads, with the demonstrations ``n_shot`` asks for, none of whose steps says the
        marker (it would teach the model to end its chain there, as one saying "the answer is" would)."""
        try:
            demos = prompt_set(self.prompt_set).demos
        except ValueError as e:
            raise ValueError(f"option prompt_set: {e}") from None
        if self.n_shot is not None and self.n_shot > len(demos):
            raise ValueError(f"option n_shot: prompt set {self.prompt_set!r} has {len(demos)} demonstration(s), "
                             f"got {said(self.n_shot)}")
        says = answer_says(self.marker)
        if says is ANSWER_SAYS:  # the default's words: what the set's load checked
            return self
        for i, d in enumerate(demos[: self.n_shot]):
            for n, step in enumerate(d.steps, 1):
                if says.search(step):
                    raise ValueError(f"option marker: {said(self.marker)} is said in step {n} of demonstration {i} of "
                                     f"prompt set {self.prompt_set!r} ({step!r}), and a chain ends at a step that says "
                                     "it: choose words the demonstrations' steps do not say")
        return self

    def to_dict(self) -> dict:
        return {k: (v if not isinstance(v, float) or math.isfinite(v) else str(v)) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict):
        """The config a mapping of options names (a TOML table, a JSON body, a run's recorded config). An option of
        another packaged method (``gate`` given to CoT) is kept aside in :attr:`others`, not refused: this method
        never reads it (the method says so), and one set of options can then serve several methods (a loop of the
        same flags, a grid's or a server's defaults). A name no method has is refused, with the nearest one."""
        if not isinstance(d, dict):
            raise TypeError(f"{cls.__name__}.from_dict: expected a dict of options, got {type(d).__name__}")
        owned_elsewhere = options_of_others(cls)
        others = {k: v for k, v in d.items() if k in owned_elsewhere}
        config = cls(**{k: v for k, v in d.items() if k not in others})
        config.others = others
        return config

    def replace(self, **kw):
        return self.from_dict({**self.others, **asdict(self), **kw})

    #: the options of other methods it was given, which it never reads (:meth:`from_dict`); not a field: a run
    #: records and compares only what its method reads
    others: ClassVar[dict] = {}


def options_of_others(cls: type) -> dict[str, list[str]]:
    """{option: the packaged methods that have it} for the options ``cls`` lacks."""
    own = {f.name for f in dataclasses.fields(cls)}
    owners: dict[str, list[str]] = {}
    for m, klass in PACKAGED.items():
        for f in dataclasses.fields(klass.Config):
            if f.name not in own:
                owners.setdefault(f.name, []).append(m)
    return owners


#: SeaKR's two modes. A threshold belongs to one: a confident closed-book answer to a simple question
#: is often right, a confident first step of a multi-hop chain often is not (measured on HotpotQA).
MODES = ("simple", "multihop")


class NoRoom(ValueError):
    """A generation length that leaves no token of the model's context window for a prompt; ``option`` names it."""

    def __init__(self, option: str, tokens: int, context: int):
        super().__init__(f"option {option}: {said(tokens)} leaves no room for a prompt in the model's {context}-token "
                         "context; lower it")
        self.option = option


def check_lengths(config: "MethodConfig", context: int | None) -> None:
    """Refuse (:class:`NoRoom`) a step's or a forced answer's length that fills the model's window (``context``:
    None where it is not known: nothing to check). The plan and the server check before the model loads, with the
    window known without weights; :class:`Method` with the loaded model's own (and ``check_question`` holds each
    question's prompt to what the longest generation leaves)."""
    for option in ("max_new_tokens", "answer_tokens"):
        if context and getattr(config, option) >= context:
            raise NoRoom(option, getattr(config, option), context)
