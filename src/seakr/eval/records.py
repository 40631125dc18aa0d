"""The question records of each dataset layout, as schemas: what a loader reads of a record, its kinds, and how a
file's values become an :class:`~seakr.eval.example.Example`'s (an id of text or a whole number; an answer of text,
a number or true/false; a missing value as none). A record is read with :func:`~seakr.search.records.read`, which
names the file, line and field of a refusal; fields a loader does not read are left alone."""

from __future__ import annotations

import json
import math
from dataclasses import field
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AliasChoices, BeforeValidator, Field, Strict, model_validator

from ..common.schema import Said, schema
from ..search import records as search
from ..search.records import Cell, Context, MusiqueParagraph, Title, missing_value
from .metrics import number_text

Text = Annotated[str, Strict()]
#: A question's id: text, or a whole number (2Wiki and IIRC ids are numbers in some copies), read as text.
QuestionId = Annotated[Text | Annotated[int, Strict()], AfterValidator(str),
                       Said("a question id (text or a whole number)", "question ids")]


def _answer_text(v) -> str:
    """An answer as text: a number as its digits (a year, a count), true and false "yes" and "no" (BoolQ's,
    StrategyQA's and HotpotQA's comparison answers); null, NaN or an object is a malformed answer, not "None"."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float)) and math.isfinite(v):
        return number_text(v)
    if not isinstance(v, str):
        said = json.dumps(v) if isinstance(v, float) else "null" if v is None else type(v).__name__  # NaN, Infinity
        raise ValueError(f"{said} is no answer; answers are text, numbers or true/false")
    return v


def _one(v) -> list:
    """A record's one answer as a list: absent, null or NaN (a test split's question) is none."""
    return [] if v is None or missing_value(v) else [_answer_text(v)]


AnswerText = Annotated[str, BeforeValidator(_answer_text)]
#: A list of answers.
Answers = Annotated[list[AnswerText], Said("a list of answers", "lists of answers")]
#: One answer, or none.
Answer = Annotated[list[AnswerText], BeforeValidator(_one), Said("an answer (text, a number or true/false)", "answers")]
#: One answer or a list of them (a plain question file's ``answer``); none where null.
SomeAnswers = Annotated[list[AnswerText], BeforeValidator(lambda v: v if isinstance(v, list) else _one(v)),
                        Said("an answer or a list of answers", "answers")]
def _null_is(empty: type) -> BeforeValidator:
    """Null read as an empty ``empty`` (a list, an object, text): how a file says "none"."""
    return BeforeValidator(lambda v: empty() if v is None else v)


Kind = Annotated[str, _null_is(str), Strict(), Said("text (a question's type)", "")]


def _titles(sf) -> list[str]:
    """The supporting titles of ``supporting_facts``: official ``[[title, sentence], ...]`` or HF's
    ``{"title": [...], "sent_id": [...]}``; another shape is refused (a string's letters are not titles)."""
    if sf is None:
        return []
    rows = sf.get("title") if isinstance(sf, dict) else [r[0] if isinstance(r, list) and r else None for r in sf] \
        if isinstance(sf, list) else None
    if not isinstance(rows, list) or not all(isinstance(t, str) for t in rows):
        raise ValueError('should be [[title, sentence], ...] or {"title": [...], "sent_id": [...]}')
    return list(dict.fromkeys(rows))


Titles = Annotated[list[str], BeforeValidator(_titles)]
#: Texts, anything else in the list left out (TriviaQA's aliases).
TextsOnly = Annotated[list[Any], _null_is(list), AfterValidator(lambda xs: [x for x in xs if isinstance(x, str)])]


@schema("field", extra="ignore", strict=False)
class HotpotQuestion:
    """HotpotQA (official, Hugging Face) and 2Wiki's official layout."""

    question: Text
    id: QuestionId = Field(validation_alias=AliasChoices("_id", "id"))
    answer: Answer = field(default_factory=list)
    supporting_facts: Titles = field(default_factory=list)
    context: Context = field(default_factory=list)
    type: Kind = ""
    answer_id: Text | None = None  # 2Wiki: the key of the answer's aliases in id_aliases.json


@schema("field", extra="ignore", strict=False)
class FlashragMeta:
    supporting_facts: Titles = field(default_factory=list)
    context: Context = field(default_factory=list)
    type: Kind = ""


@schema("field", extra="ignore", strict=False)
class FlashragQuestion:
    """FlashRAG's JSON lines (2Wiki's among them): answers and aliases merged in ``golden_answers``."""

    id: QuestionId
    question: Text
    golden_answers: Answers
    metadata: Annotated[FlashragMeta, _null_is(dict)] = field(default_factory=FlashragMeta)


@schema("field", extra="ignore", strict=False)
class Aliases:
    """A line of 2Wiki's ``id_aliases.json``: an answer's Wikidata id and its other names."""

    Q_id: Text
    aliases: Annotated[Answers, _null_is(list)] = field(default_factory=list)


@schema("field", extra="ignore", strict=False)
class NQContext:
    title: Title = ""
    text: Annotated[str, _null_is(str), Strict()] = ""
    isgold: bool | None = True  # null: not gold, as false


@schema("field", extra="ignore", strict=False)
class NQQuestion:
    """NQ-open (FlashRAG/DPR's, with ``ctxs``; the official release's), any plain question-answer file, PopQA."""

    question: Text
    id: QuestionId = Field(None, validation_alias=AliasChoices("id", "qid", "question_id", "_id"))
    answers: SomeAnswers = Field(default_factory=list,
                                 validation_alias=AliasChoices("answers", "answer", "possible_answers"))
    ctxs: Annotated[list[NQContext], _null_is(list)] = field(default_factory=list)


@schema("field", extra="ignore", strict=False)
class Span:
    """An answer given as an object with its text (SQuAD's, IIRC's spans)."""

    text: Text


@schema("field", extra="ignore", strict=False)
class SquadQA:
    id: QuestionId
    question: Text
    answers: list[Span] = field(default_factory=list)
    is_impossible: bool | None = False  # SQuAD 2.0's unanswerable questions: dropped


@schema("field", extra="ignore", strict=False)
class SquadParagraph(search.SquadParagraph):
    qas: list[SquadQA]


@schema("field", extra="ignore", strict=False)
class SquadArticle(search.SquadArticle):
    paragraphs: list[SquadParagraph]


@schema("field", extra="ignore", strict=False)
class SquadQuestions(search.SquadFile):
    """A SQuAD file as the passages' reader takes it, its questions read too."""

    data: list[SquadArticle]


@schema("field", extra="ignore", strict=False)
class SquadTexts:
    text: Answers


@schema("field", extra="ignore", strict=False)
class SquadHFQuestion:
    """SQuAD as Hugging Face has it: ``{id, title, context, question, answers: {text: [...], answer_start}}``."""

    id: QuestionId
    question: Text
    context: Text
    answers: SquadTexts
    title: Title = ""


def _either(name: str):
    """A field TriviaQA's official file spells capitalised (``Question``) and Hugging Face's copy not."""
    return AliasChoices(name, name.title().replace("_", ""))


@schema("field", extra="ignore", strict=False)
class TriviaAnswer:
    value: Text = Field(validation_alias=_either("value"))
    aliases: TextsOnly = Field(default_factory=list, validation_alias=_either("aliases"))


@schema("field", extra="ignore", strict=False)
class TriviaQuestion:
    """TriviaQA: a question of the official file's ``Data``, or of Hugging Face's copy (one a record)."""

    question: Text = Field(validation_alias=_either("question"))
    question_id: QuestionId = Field(validation_alias=_either("question_id"))
    answer: TriviaAnswer | None = Field(None, validation_alias=_either("answer"))  # none: the test split


@schema("field", extra="ignore", strict=False)
class TriviaQuestions:
    Data: list[TriviaQuestion]


@schema("field", extra="ignore", strict=False)
class IIRCAnswer:
    type: Literal["span", "value", "binary", "none"]
    answer_spans: list[Span] = field(default_factory=list)
    answer_value: Cell | None = None

    @model_validator(mode="after")
    def _value_given(self):
        if self.type in ("value", "binary") and self.answer_value is None:
            raise ValueError(f"an answer of type {self.type} needs a field 'answer_value'")
        return self


@schema("field", extra="ignore", strict=False)
class IIRCQuestion:
    question: Text
    answer: IIRCAnswer
    qid: QuestionId | None = None


@schema("field", extra="ignore", strict=False)
class IIRCPassage:
    """IIRC (official JSON): a passage and the questions asked of it."""

    questions: list[IIRCQuestion]
    title: Title = ""


@schema("field", extra="ignore", strict=False)
class MusiqueQuestion:
    """MuSiQue (official JSON lines): its paragraphs with ``is_supporting``."""

    id: QuestionId
    question: Text
    answer: Text
    paragraphs: list[MusiqueParagraph]
    answer_aliases: Annotated[Answers, _null_is(list)] = field(default_factory=list)
    answerable: bool | None = None
