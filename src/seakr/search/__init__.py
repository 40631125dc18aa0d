"""Retrieval: the SearchEngine protocol, the embedded tantivy backend, Elasticsearch/OpenSearch, corpora."""

from .base import Passage, SearchEngine, SearchError
from .corpora import FORMATS, CorpusError, read_corpus


def open_engine(spec: str, **kwargs) -> SearchEngine:
    """An index directory (tantivy) or an ``http(s)://host:port/index`` URL (Elasticsearch/OpenSearch)."""
    if spec.startswith(("http://", "https://", "es+", "opensearch+")):
        from .elastic import ElasticEngine

        return ElasticEngine.from_url(spec, **kwargs)
    from .tantivy_engine import TantivyEngine

    return TantivyEngine(spec)


__all__ = ["FORMATS", "CorpusError", "Passage", "SearchEngine", "SearchError", "open_engine", "read_corpus"]
