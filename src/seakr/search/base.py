"""The search-engine protocol and the passage record every backend returns."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Iterable, Protocol, Sequence, runtime_checkable

#: Lucene's EnglishAnalyzer stop set (33 words), which ES's ``english`` analyzer also uses.
LUCENE_ENGLISH_STOPWORDS = (
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no",
    "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this",
    "to", "was", "will", "with",
)

#: The paper's engine: ES 7.17 default BM25 and multi_match best_fields over (title, text), tie 0.5.
BM25_K1, BM25_B, TIE_BREAKER = 1.2, 0.75, 0.5


class SearchError(RuntimeError):
    """A missing, corrupt, partial or foreign index, or an unreachable cluster."""


@dataclass
class Passage:
    id: str
    title: str
    text: str
    score: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


@runtime_checkable
class SearchEngine(Protocol):
    """What methods need from retrieval. Backends: ``TantivyEngine`` (embedded), ``ElasticEngine``."""

    def search(self, query: str, k: int = 3) -> list[Passage]: ...

    def search_many(self, queries: Sequence[str], k: int = 3) -> list[list[Passage]]: ...

    def count(self) -> int: ...

    def metadata(self) -> dict: ...


def iter_batches(items: Iterable, size: int):
    batch = []
    for x in items:
        batch.append(x)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
