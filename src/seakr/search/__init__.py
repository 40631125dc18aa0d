"""Retrieval: the SearchEngine protocol, the embedded tantivy backend, Elasticsearch/OpenSearch, corpora."""

import os

from .base import Passage, SearchEngine, SearchError
from .corpora import FORMATS, CorpusError, read_corpus


def open_engine(spec: str | os.PathLike, **kwargs) -> SearchEngine:
    """An index directory (tantivy; a ``pathlib.Path`` too) or an ``http(s)://host:port/index`` URL
    (Elasticsearch/OpenSearch)."""
    if not isinstance(spec, (str, os.PathLike)):
        raise TypeError(f"index: expected an index folder or an http(s):// URL, got {type(spec).__name__}")
    spec = os.fspath(spec)
    if not spec.strip():  # read as the working folder, whose error then named "." instead of the mistake
        raise SearchError("index: an empty path; name the index folder or URL")
    if spec.startswith(("http://", "https://", "es+", "opensearch+")):
        from .elastic import ElasticEngine

        return ElasticEngine.from_url(spec, **kwargs)
    from .tantivy_engine import TantivyEngine

    return TantivyEngine(spec)


def as_engine(index) -> "SearchEngine | None":
    """What a method searches: None, any object with ``search`` (a :class:`SearchEngine`), or an index folder
    or URL, opened; anything else is refused in one line."""
    if index is None or hasattr(index, "search"):
        return index
    if isinstance(index, (str, os.PathLike)):
        return open_engine(index)
    raise TypeError(f"index: expected an index folder, an http(s):// URL or a search engine, got {type(index).__name__}")


__all__ = ["FORMATS", "CorpusError", "Passage", "SearchEngine", "SearchError", "as_engine", "open_engine", "read_corpus"]
