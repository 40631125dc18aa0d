"""Retrieval: the SearchEngine protocol, the embedded tantivy backend, Elasticsearch/OpenSearch, corpora."""

import os

from .base import URL_PREFIXES, Passage, SearchEngine, SearchError, is_url
from .corpora import FORMATS, CorpusError, read_corpus
from ..textio import user_path


def open_engine(spec: str | os.PathLike, **kwargs) -> SearchEngine:
    """An index directory (tantivy; a ``pathlib.Path`` too), an ``http(s)://host:port/index`` URL
    (Elasticsearch/OpenSearch), or a corpus file, indexed once into the cache (:func:`.build.corpus_index`)."""
    if not isinstance(spec, (str, os.PathLike)):
        raise TypeError(f"index: expected an index folder or an http(s):// URL, got {type(spec).__name__}")
    spec = user_path(spec)
    if not spec.strip():  # read as the working folder, whose error then named "." instead of the mistake
        raise SearchError("index: an empty path; name the index folder or URL")
    if is_url(spec):
        from .elastic import ElasticEngine

        return ElasticEngine.from_url(spec, **kwargs)
    from .tantivy_engine import TantivyEngine

    if os.path.isfile(spec):  # a corpus file: indexed once into the cache
        from .build import corpus_index

        spec = corpus_index(spec)
    return TantivyEngine(spec)


def as_engine(index) -> "SearchEngine | None":
    """What a method searches: None, any object with ``search`` (a :class:`SearchEngine`; one with only
    ``search`` gets the rest of the protocol from :class:`SearchOnly`), an index folder or URL, opened, or a
    list of passages (or texts), indexed for this process (:func:`passages_engine`); anything else is refused in
    one line."""
    if isinstance(index, (list, tuple)):
        return passages_engine(index)
    if index is not None and callable(getattr(index, "search", None)) and not isinstance(index, SearchEngine):
        return SearchOnly(index)
    if index is None or hasattr(index, "search"):
        return index
    if isinstance(index, (str, os.PathLike)):
        return open_engine(index)
    raise TypeError(f"index: expected an index folder, an http(s):// URL or a search engine, got {type(index).__name__}")


def passages_engine(docs) -> SearchEngine:
    """BM25 over passages given in code (``Passage`` or plain texts, ids ``doc-<i>``): indexed into a temporary
    folder that lives as long as the engine (``index=[...]`` needed a folder built first)."""
    import tempfile
    from pathlib import Path

    from .tantivy_engine import TantivyEngine

    if not docs:
        raise SearchError("index: an empty list of passages; give at least one")
    bad = next((d for d in docs if not isinstance(d, (Passage, str))), None)
    if bad is not None:
        raise TypeError(f"index: a list of passages holds Passage objects or texts, not {type(bad).__name__}")
    ps = [d if isinstance(d, Passage) else Passage(f"doc-{i}", "", d) for i, d in enumerate(docs)]
    if not any(p.text.strip() for p in ps if isinstance(p.text, str)):
        raise SearchError("index: every passage's text is empty; nothing to search")
    blank = next((p for p in ps if not isinstance(p.id, str) or not p.id.strip()), None)
    if blank is not None:  # the corpus readers refuse it too: an id names the passage in traces and rows
        raise SearchError(f"index: a passage's id is {blank.id!r}; ids are visible text")
    seen: set = set()
    twice = next((p.id for p in ps if p.id in seen or seen.add(p.id)), None)
    if twice is not None:  # the build keeps the first and drops the rest without a word
        raise SearchError(f"index: passage id {twice!r} is given twice; ids name the passages in traces")
    tmp = tempfile.TemporaryDirectory(prefix="seakr-passages-", ignore_cleanup_errors=True)
    engine = TantivyEngine.build(ps, Path(tmp.name) / "index", threads=1)
    engine.temporary_folder = tmp  # removed when the engine is collected or the process ends
    return engine


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
           "passages_engine",
           "read_corpus"]
