"""The search-engine protocol and the passage record every backend returns."""

from __future__ import annotations

import operator
import os
import re
from dataclasses import asdict, replace
from pathlib import Path
from typing import Annotated, Iterable, Iterator, Protocol, Sequence, runtime_checkable

from pydantic import AfterValidator, BeforeValidator

from ..common.checks import blank, encodable
from ..common.runs import RUN_FILES, index_holding, seakr_config
from ..common.schema import Real, schema
from ..common.console import without_controls


def seakr_own(path: str | os.PathLike) -> tuple[str, str] | None:
    """What of seakr's own ``path`` is, where it is neither a corpus nor a dataset of one's own: ("run", "the folder
    of a seakr run or study (its config and rows)" or "a file of the seakr run or study RUN (...)"), ("index", "the
    seakr index IDX" or "a file of the seakr index IDX"); None otherwise (a file of one's own kept in a run's folder
    too). Each door that reads a corpus or questions refuses these in its own words."""
    p = Path(os.path.abspath(path))
    if (p.is_dir() or p.name in RUN_FILES) and seakr_config(p if p.is_dir() else p.parent) is not None:
        return "run", ("the folder of a seakr run or study" if p.is_dir() else f"a file of the seakr run or study "
                       f"{p.parent}") + " (its config and rows)"
    idx = index_holding(p)
    return None if idx is None else ("index", f"{'a file of ' if idx != p else ''}the seakr index {idx}")


#: Lucene's EnglishAnalyzer stop set (33 words), which ES's ``english`` analyzer also uses.
LUCENE_ENGLISH_STOPWORDS = (
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no",
    "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this",
    "to", "was", "will", "with",
)

#: The paper's engine: ES 7.17 default BM25 and multi_match best_fields over (title, text), tie 0.5.
BM25_K1, BM25_B, TIE_BREAKER = 1.2, 0.75, 0.5


#: What names a search cluster rather than an index folder (Elasticsearch, OpenSearch), at every door.
URL_PREFIXES = ("http://", "https://", "es+", "opensearch+")


_CREDENTIALS = re.compile(r"(?<=://)([^/@:\s]*):[^/@\s]*@")


def redact(text: str) -> str:
    """``text`` with every URL's password masked (``http://user:***@host``): an index URL may carry the cluster's
    credentials, and it is echoed on stderr (``index: ...``), in errors and in the server's first line, which
    land in job logs."""
    return _CREDENTIALS.sub(r"\1:***@", text) if isinstance(text, str) else text


def is_url(spec: str) -> bool:
    """Whether an index argument names a search cluster rather than a folder, in any case (``HTTP://host/x``);
    another scheme (``ftp://``, ``file://``) is refused in one line."""
    low = spec.lower()
    if low.startswith(URL_PREFIXES):
        return True
    if re.match(r"[a-z][a-z0-9+.\-]*://", low):
        raise SearchError(f"{redact(spec)}: expected an index folder or an http(s)://host:port/INDEX URL")
    return False


class SearchError(RuntimeError):
    """A missing, corrupt, partial or foreign index, or an unreachable cluster."""


def whole_characters(v: str) -> str:
    if not encodable(v):  # said here, naming the field, not as the index's UnicodeEncodeError
        raise ValueError("not valid UTF-8 text (half a surrogate pair)")
    return v


def _visible_id(v: str) -> str:
    if blank(v):  # an id names the passage in traces, rows and the duplicate check
        raise ValueError(f"{v!r} has no visible character; ids are visible text")
    return v


def _no_title(v):
    return "" if v is None else v  # a row's null title, a table's missing one: a passage without a title


#: Text that every file and index can hold: valid UTF-8 (no half of a surrogate pair).
Text = Annotated[str, AfterValidator(whole_characters)]


@schema("passage")
class Passage:
    """One passage, held to one schema wherever it is made (a corpus reader, an index, a search engine or a
    retriever of one's own, Python code): an id of visible text, a title (None is none) and a text, a finite score
    (a NumPy one as Python's float)."""

    id: Annotated[Text, AfterValidator(_visible_id)]
    title: Annotated[Text, BeforeValidator(_no_title)]
    text: Text
    score: Real = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


@runtime_checkable
class SearchEngine(Protocol):
    """What methods need from retrieval. Backends: ``TantivyEngine`` (embedded), ``ElasticEngine``. Optional:
    ``longest_passage() -> Passage | None``, which ``seakr serve`` reads to count every passage of its index at the
    longest one's tokens in a request's worst case (without it, 200 tokens: a DPR passage)."""

    def search(self, query: str, k: int = 3) -> list[Passage]: ...

    def search_many(self, queries: Sequence[str], k: int = 3) -> list[list[Passage]]: ...

    def count(self) -> int: ...

    def metadata(self) -> dict: ...


def check_search(query, k) -> tuple[str, int]:
    """One rule for a search call, whatever the engine: a text query and a whole k >= 0. Returns the query as it
    is searched (without a console's escapes) and k as an int."""
    if not isinstance(query, str):
        raise TypeError(f"search: the query must be text, got {type(query).__name__}")
    if not encodable(query):  # said here, in words, not as the engine's UnicodeEncodeError
        raise ValueError("search: the query is not valid UTF-8 text (undecodable bytes, or half a surrogate pair)")
    try:
        if isinstance(k, bool):  # an int to Python, but not a count
            raise TypeError
        k = operator.index(k)
    except TypeError:
        raise TypeError(f"search: k must be a whole number, got {k!r}") from None
    if k < 0:
        raise ValueError(f"search: k must be >= 0, got {k}")
    return without_controls(query), k


def check_passage(n: int, p) -> None:
    """What an index build or a search engine hands on is a :class:`Passage` (whose schema holds its fields); ``n``
    is its 0-based place in the input."""
    if not isinstance(p, Passage):
        hint = " (Passage(**record) makes one from a dict)" if isinstance(p, dict) else ""
        raise TypeError(f"passage {n}: expected a seakr.search.Passage, got {type(p).__name__}{hint}")


#: Words past which a passage given in a corpus file is called long (DPR's passages are 100, a Wikipedia lead ~300).
LONG_PASSAGE = 1000


def is_long(text: str) -> bool:
    """Over LONG_PASSAGE words: a method puts a whole passage into its prompt, so one fills it."""
    # under two characters a word, a text cannot be long: most are not split at all (21M DPR passages)
    return len(text) > 2 * LONG_PASSAGE and len(text.split()) > LONG_PASSAGE


class Intake:
    """What an index takes of a stream of passages, and what a build reports of it. Each item must be a
    :class:`Passage` (:func:`check_passage` names another by its place); one without text (nothing to put in a
    prompt) or with an id already taken (``seen``: this build's, or an existing index's for an add) is skipped and
    counted; of those taken, how many are long and which is the longest (the service budgets prompts by it). Both
    engines build through it, so an index of either takes and counts alike."""

    def __init__(self, seen=None):
        self.seen = set() if seen is None else seen
        self.taken = self.duplicates = self.empty = self.long = 0
        self._longest = (0, "")  # (characters, id); the larger id of two as long, whatever the order

    def take(self, p) -> bool:
        check_passage(self.taken + self.duplicates + self.empty, p)
        if blank(p.text):  # as a question's: control or zero-width characters alone are no text
            self.empty += 1
            return False
        if p.id in self.seen:
            self.duplicates += 1
            return False
        self.seen.add(p.id)
        self.taken += 1
        self.long += is_long(p.text)
        self._longest = max(self._longest, (len(p.text), p.id))
        return True

    @property
    def longest(self) -> dict | None:
        """The longest passage taken, ``{"id", "chars"}``; None before any."""
        return {"id": self._longest[1], "chars": self._longest[0]} if self.taken else None


def check_many(items, what: str) -> None:
    """``items`` hold passages (any collection of them), not one passage or one text (a string would be indexed
    letter by letter)."""
    if isinstance(items, (str, bytes, Passage)) or not isinstance(items, Iterable):
        one = "text" if isinstance(items, (str, bytes)) else "passage"
        raise TypeError(f"{what}: passages come as a list (or any collection) of them, not one "
                        f"{type(items).__name__}; give [{one}]")


def check_hits(hits, k: int, engine) -> list[Passage]:
    """What an engine's ``search`` returned, checked: a list (or a generator) of :class:`Passage`, each id once
    (the first; a repeated passage would be re-ranked against itself), cut to ``k``."""
    name = type(getattr(engine, "engine", engine)).__name__  # a SearchOnly wrapper: the user's class
    if isinstance(hits, Iterator):  # a generator (``yield`` in one's own search()) is a list to come
        hits = list(hits)
    if not isinstance(hits, (list, tuple)):
        raise TypeError(f"search engine {name}: search() returned {type(hits).__name__}, expected a list of "
                        "seakr.search.Passage")
    for n, p in enumerate(hits):
        try:
            check_passage(n, p)
        except TypeError as e:
            raise TypeError(f"search engine {name}: search() returned {e}") from None
    seen: set = set()
    # each held to the schema again: a field an engine set after making the passage was not (the candidate probe
    # reads the score as a feature); a passage of no visible text is none, as an index's intake skips it
    return [replace(p) for p in hits if not blank(p.text) and not (p.id in seen or seen.add(p.id))][:k]


def iter_batches(items: Iterable, size: int):
    batch = []
    for x in items:
        batch.append(x)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
