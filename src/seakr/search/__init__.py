"""Retrieval: the SearchEngine protocol, the embedded tantivy backend, Elasticsearch/OpenSearch, corpora."""

import os

from .base import URL_PREFIXES, Passage, SearchEngine, SearchError, is_url
from .corpora import FORMATS, CorpusError, read_corpus


def open_engine(spec: str | os.PathLike, **kwargs) -> SearchEngine:
    """An index directory (tantivy; a ``pathlib.Path`` too) or an ``http(s)://host:port/index`` URL
    (Elasticsearch/OpenSearch)."""
    if not isinstance(spec, (str, os.PathLike)):
        raise TypeError(f"index: expected an index folder or an http(s):// URL, got {type(spec).__name__}")
    spec = os.fspath(spec)
    if not spec.strip():  # read as the working folder, whose error then named "." instead of the mistake
        raise SearchError("index: an empty path; name the index folder or URL")
    if is_url(spec):
        from .elastic import ElasticEngine

        return ElasticEngine.from_url(spec, **kwargs)
    from .tantivy_engine import TantivyEngine

    return TantivyEngine(spec)


def as_engine(index) -> "SearchEngine | None":
    """What a method searches: None, any object with ``search`` (a :class:`SearchEngine`; one with only
    ``search`` gets the rest of the protocol from :class:`SearchOnly`), or an index folder or URL, opened;
    anything else is refused in one line."""
    if index is not None and callable(getattr(index, "search", None)) and not isinstance(index, SearchEngine):
        return SearchOnly(index)
    if index is None or hasattr(index, "search"):
        return index
    if isinstance(index, (str, os.PathLike)):
        return open_engine(index)
    raise TypeError(f"index: expected an index folder, an http(s):// URL or a search engine, got {type(index).__name__}")


class SearchOnly:
    """A search engine of one's own that has only ``search(query, k)``: the rest of the protocol (a run records
    the engine's metadata; the service reports its size), answered from what the object has."""

    def __init__(self, engine):
        self.engine = engine

    def search(self, query: str, k: int = 3) -> list[Passage]:
        return self.engine.search(query, k)

    def search_many(self, queries, k: int = 3) -> list[list[Passage]]:
        return [self.search(q, k) for q in queries]

    def count(self) -> int:
        count = getattr(self.engine, "count", None)
        return int(count()) if callable(count) else 0

    def metadata(self) -> dict:
        meta = getattr(self.engine, "metadata", None)
        return dict(meta()) if callable(meta) else {"engine": type(self.engine).__name__}


__all__ = ["FORMATS", "CorpusError", "Passage", "SearchEngine", "SearchError", "SearchOnly", "as_engine", "open_engine",
           "read_corpus"]
