"""The request bodies every HTTP door reads (``/v1/answer`` and ``/v1/chat/completions``): one schema per
body, so a passage or a question is held to the same bounds whichever route it comes by."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter, WithJsonSchema, \
    field_validator, model_validator

from ..methods import METHODS, MethodConfig
from ..methods.config import NoRoom, check_lengths
from ..common.checks import question_text
from ..common.schema import SchemaError
from ..prompts import FAMILIES
from ..search.base import whole_characters

MAX_QUESTION = 2000
#: Passages a request may bring to be searched instead of the server's index, and their sizes
MAX_PASSAGES, MAX_PASSAGE_TEXT, MAX_PASSAGE_TITLE = 64, 4000, 300
#: Per-request ceilings on the options that scale compute or memory (the service protects itself).
LIMITS = {"k": 64, "max_new_tokens": 256, "max_steps": 12, "max_passages": 12, "n_candidates": 10, "n_shot": 16,
          "query_max_words": 256, "keep_top_k": 200, "top_k": 1000}
MethodName = Literal[tuple(METHODS)]


def _text(**sizes):
    """Text as a passage's schema holds it (:func:`~seakr.search.base.whole_characters`), within the service's sizes."""
    return Annotated[str, Field(**sizes), AfterValidator(whole_characters)]


class PassageIn(BaseModel):
    """A request's own passage: its fields as the passage schema takes them, within the service's sizes; an id, or
    none (``doc-<position>``)."""
    model_config = ConfigDict(extra="forbid")
    id: _text(min_length=1, max_length=200) | None = Field(default=None, description="default: doc-<position>")
    title: _text(max_length=MAX_PASSAGE_TITLE) = ""
    text: _text(min_length=1, max_length=MAX_PASSAGE_TEXT)


#: A request's own passages, as ``/v1/answer`` and ``/v1/chat/completions`` take them: a text, or an object of
#: fields; each refused in the words of the form it was given in, not of both.
Passages = list[Annotated[Annotated[_text(min_length=1, max_length=MAX_PASSAGE_TEXT), Tag("text")]
                          | Annotated[PassageIn, Tag("passage")],
                          Discriminator(lambda v: "text" if isinstance(v, str) else "passage")]]


class OptionRefused(ValueError):
    """A request's option refused, in one line; ``field``: the option it is about (None: the options together)."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


@dataclasses.dataclass(frozen=True)
class Door:
    """The server's side of every request's options: its method, and its ``--option`` defaults under the request's.

    :meth:`settle` makes the method's config (the schema every door shares) from them and holds it to what a client
    may ask of this server: the packaged prompt sets (the operator's own, set at start, stays allowed), no probe
    folder (the operator's, set at start), generation lengths that leave a prompt room in the model's window
    (``context``: its tokens, None where unknown), no option past :data:`LIMITS`. The server's own request
    (``config``) is settled once, when the door is made, so defaults that would refuse every request refuse the
    server instead."""

    method: str = "seakr"
    defaults: dict = dataclasses.field(default_factory=dict)
    context: int | None = None
    config: MethodConfig = dataclasses.field(init=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "config", self._held(self.method, self.defaults))  # every default, unknown ones too

    def defaults_for(self, name: str) -> dict:
        """The server's defaults that method ``name`` has: k or max_new_tokens for every method, SeaKR's gate for
        SeaKR only, so a client asking another method is not refused for an option it never sent."""
        own = {f.name for f in dataclasses.fields(METHODS[name].Config)}
        return {k: v for k, v in self.defaults.items() if k in own}

    def settle(self, name: str | None, given: dict | None) -> MethodConfig:
        """The config method ``name`` (None: the server's) answers with, the request's options ``given`` over the
        server's defaults; :class:`OptionRefused` naming the option where the server refuses it."""
        name, given = name or self.method, given or {}
        if name == self.method and not given:
            return self.config
        # before the schema, which reads a prompt set's file and looks a probe folder up: its error would tell a
        # client which files the server has
        if given.get("prompt_set") not in (None, *FAMILIES, self.defaults.get("prompt_set")):
            raise OptionRefused(f"option prompt_set: one of {', '.join(FAMILIES)}", "prompt_set")
        if given.get("probes", self.defaults.get("probes")) != self.defaults.get("probes"):
            raise OptionRefused("option probes: a folder on the server, set when it starts (seakr serve --option "
                                "probes=DIR), not per request", "probes")
        return self._held(name, {**self.defaults_for(name), **given})

    def _held(self, name: str, options: dict) -> MethodConfig:
        try:
            config = METHODS[name].Config.from_dict(options)
        except SchemaError as e:
            loc = (e.errors or [{}])[0].get("loc") or ()
            raise OptionRefused(str(e), loc[0] if loc and isinstance(loc[0], str) else None) from None
        try:
            check_lengths(config, self.context)
        except NoRoom as e:
            raise OptionRefused(str(e), e.option) from None
        for key, cap in LIMITS.items():
            v = getattr(config, key, None)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v > cap:
                raise OptionRefused(f"option {key}: at most {cap} on this server, got {v}", key)
        return config


#: JSON Schema's words for a number's bounds, which pydantic leaves in its own where a constraint sits on a
#: converting type (``common.schema.Whole``)
_BOUNDS = {"ge": "minimum", "gt": "exclusiveMinimum", "le": "maximum", "lt": "exclusiveMaximum"}


def _standard(node):
    """``node`` with each number schema's bounds in JSON Schema's words; property names stay as they are."""
    if isinstance(node, list):
        return [_standard(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _standard(v) for k, v in node.items()}
    return {_BOUNDS.get(k, k): v for k, v in out.items()} if out.get("type") in ("integer", "number") else out


def _options_schema() -> dict:
    """Each method's options as its config schema takes them, for the OpenAPI document."""
    each = [{**_standard(TypeAdapter(c.Config).json_schema()), "title": f"{n} options"} for n, c in METHODS.items()]
    return {"anyOf": [*each, {"type": "null"}],
            "description": "method options (the method's; the server's defaults fill the rest), e.g. "
                           "{\"estimator\": \"energy\", \"max_steps\": 4}"}


class AnswerRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: str = Field(max_length=MAX_QUESTION, description="the question (visible text, at most 2,000 characters)")
    method: MethodName | None = Field(default=None, description="default: the server's method")
    # any JSON value: the method's config schema (Door.settle) refuses a value of the wrong kind, naming the option
    options: Annotated[dict[str, Any] | None, WithJsonSchema(_options_schema())] = None
    passages: Passages | None = Field(
        default=None, min_length=1, max_length=MAX_PASSAGES,
        description="passages (texts, or {id, title, text}) searched for this request instead of the server's index")

    @field_validator("question")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        return question_text(v)  # the question's one rule (common.checks)


class AnswerResponse(BaseModel):
    question: str
    answer: str
    method: str
    trace: dict[str, Any]
    config: dict[str, Any]


class ContentPart(BaseModel):
    """One part of a message's content; only text parts are read."""
    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")  # name, tool_call_id ...: carried by clients, never read
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None

    def text(self) -> str | None:
        """The message's text (its text parts joined), or None where it has a part that is not text."""
        if self.content is None or isinstance(self.content, str):
            return self.content
        if any(p.type != "text" or p.text is None for p in self.content):
            return None
        return "\n".join(p.text for p in self.content)


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


#: Chat-completions fields that ask for something a SeaKR answer cannot give, with what to do instead; each is
#: refused by name where its value asks for it (a client's neutral default, such as a penalty of 0, is read as not
#: given). The sampling fields temperature, top_p and seed are method options of the same name.
UNSUPPORTED = {
    "max_tokens": "a chain's length is set by max_new_tokens (each step) and answer_tokens (the answer)",
    "max_completion_tokens": "a chain's length is set by max_new_tokens (each step) and answer_tokens (the answer)",
    "stop": "a step ends at a sentence and the answer after the method's marker",
    "logprobs": "the decisions' uncertainties are in the reply's seakr object", "top_logprobs": "not returned",
    "tools": "no tool calls", "tool_choice": "no tool calls", "functions": "no tool calls",
    "function_call": "no tool calls", "response_format": "the answer is text",
    "logit_bias": "not applied", "presence_penalty": "not applied", "frequency_penalty": "not applied",
    "audio": "the answer is text", "prediction": "not applied",
}
_NEUTRAL = (None, 0, False, [], {}, {"type": "text"})


class ChatRequest(BaseModel):
    """``POST /v1/chat/completions``: the last user message is the question; a method's options ride as extra
    fields (as vLLM takes ``top_k``), checked by that method's config schema as every other door's are."""
    model_config = ConfigDict(extra="allow")
    model: str = Field(min_length=1, max_length=300, description="MODEL/METHOD as GET /v1/models lists them")
    messages: list[ChatMessage] = Field(min_length=1, max_length=256)
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: Literal[1] = Field(default=1, description="one answer per request")
    user: str | None = Field(default=None, description="the client's end-user id; not read")
    passages: Passages | None = Field(default=None, min_length=1, max_length=MAX_PASSAGES,
                                      description="passages searched for this request instead of the server's index")

    @model_validator(mode="after")
    def _supported(self):
        for name, why in UNSUPPORTED.items():
            if (self.model_extra or {}).get(name, None) not in _NEUTRAL:
                raise ValueError(f"{name} is not supported by seakr ({why})")
        return self

    def options(self) -> dict:
        """The method options the request gave: its extra fields, less the refused ones at their neutral values."""
        return {k: v for k, v in (self.model_extra or {}).items() if k not in UNSUPPORTED}

    def question(self) -> tuple[str, list[str]]:
        """The last user message's text and a note for each message that is not read; ValueError where the last
        message is not a user's text."""
        last = self.messages[-1]
        text = last.text()
        if last.role != "user" or not text:
            raise ValueError(f"messages[{len(self.messages) - 1}]: the last message must be the user's question, "
                             "as text")
        earlier = len(self.messages) - 1
        said = f"{earlier} earlier message(s) not read: seakr answers the last user message on its own"
        return text, [said] if earlier else []
