"""Retrieval: the SearchEngine protocol, the embedded tantivy backend, Elasticsearch/OpenSearch, corpora."""

import inspect
import os
import tempfile
import urllib.parse
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..common.checks import blank
from ..common.console import repeated
from ..common.schema import SchemaError
from .base import Passage, SearchEngine, SearchError, check_many, is_url, redact
from .build import corpus_index, is_corpus_folder, warn_long
from .corpora import FORMATS, CorpusError, check_passage_words, read_corpus, row_passage, split_passages
from .elastic import ElasticEngine
from .tantivy_engine import TantivyEngine
from ..common.files import DATA_SUFFIXES, check_rereadable, missing, user_path


def open_engine(spec: str | os.PathLike, **kwargs) -> SearchEngine:
    """An index directory (tantivy; a ``pathlib.Path`` too), an ``http(s)://host:port/index`` URL
    (Elasticsearch/OpenSearch), or a corpus file or folder, indexed once into the cache
    (:func:`.build.corpus_index`)."""
    if not isinstance(spec, (str, os.PathLike)):
        raise TypeError(f"index: expected an index folder or an http(s):// URL, got {type(spec).__name__}")
    spec = user_path(spec)
    if not spec.strip():  # else read as the working folder, and the error would name "." instead of the mistake
        raise SearchError("index: an empty path; name the index folder or URL")
    if spec == "-":  # "-: no index here": a corpus piped in is indexed by `index build -`, then named
        raise SearchError("index -: standard input is not read as an index; index it first (seakr index build - "
                          "--out IDX < corpus.jsonl) and name IDX")
    if is_url(spec):
        if _url_path(spec).lower().endswith(DATA_SUFFIXES):  # a corpus file's URL, not a cluster's
            raise SearchError(redact(f"{spec}: {missing(spec)}, and give the file (it is indexed once)"))
        return ElasticEngine.from_url(spec, **kwargs)
    check_rereadable(spec, "a corpus given as the index is read twice (its digest, its passages)", SearchError)
    if os.path.isfile(spec) or is_corpus_folder(spec):  # a corpus file or folder: indexed once into the cache
        spec = corpus_index(spec)
    return TantivyEngine(spec)


def _url_path(url: str) -> str:
    try:
        return urllib.parse.urlsplit(url).path
    except ValueError:  # a malformed host: the cluster's URL check names it
        return ""


def as_engine(index) -> "SearchEngine | None":
    """What a method searches: None, any object with ``search`` (a :class:`SearchEngine`; one with only
    ``search`` gets the rest of the protocol from :class:`SearchOnly`), an index folder or URL, opened, or a
    collection of passages (a list or any iterable of them, a dict of id -> text), indexed for this process
    (:func:`passages_engine`); anything else is refused in one line."""
    if _collection(index):  # a list, a generator, a dict of id -> text, rows of a dataset, a table
        return passages_engine(index)
    if index is not None and callable(getattr(index, "search", None)):
        _check_search_call(index)
        if not isinstance(index, SearchEngine):
            return SearchOnly(index)
    if index is None or hasattr(index, "search"):
        return index
    if isinstance(index, (str, os.PathLike)):
        return open_engine(index)
    raise TypeError("index: expected an index folder, an http(s):// URL or a search engine, got "
                    f"{type(index).__name__}")


def _check_search_call(engine) -> None:
    """An engine's ``search`` takes ``(query, k)`` as seakr calls it, checked when the engine is given, not at
    the first retrieval after the model has loaded."""
    try:
        sig = inspect.signature(engine.search)
    except (TypeError, ValueError):  # a C extension's method may not say; its first call will
        return
    try:
        sig.bind("query", 3)
    except TypeError:
        raise TypeError(f"search engine {type(engine).__name__}: search{sig} cannot be called as search(query, k), "
                        "as seakr calls it (k: how many passages to return)") from None


def _collection(index) -> bool:
    if isinstance(index, (str, bytes, os.PathLike)) or hasattr(index, "search"):
        return False
    return isinstance(index, (Mapping, Iterable)) or hasattr(index, "columns")


def passages_engine(docs, passage_words: int | None = None, *, advise: bool = True) -> SearchEngine:
    """BM25 over passages given in code: ``Passage``s, plain texts (ids ``doc-<i>``), dicts with ``text`` or
    ``contents`` (and ``id`` or ``_id``, ``title``: rows of a corpus loaded with ``datasets`` or pandas, read as a
    corpus file's lines are; other keys are not read), or a dict of id -> text; indexed into a temporary folder
    that lives as long as the engine (``index=[...]`` needed a folder built first). ``passage_words`` cuts longer
    documents into passages (:func:`split_passages`). ``advise``: say that long passages could be cut (a service
    indexing a client's passages does not log advice for Python code at every request)."""
    check_passage_words(passage_words)  # before the documents are read
    if hasattr(docs, "columns"):  # a table iterates its columns (a DataFrame their names): read its rows
        twice = repeated(str(c) for c in (docs.column_names if hasattr(docs, "column_names") else docs.columns))
        if twice is not None:  # its rows as dicts kept one of the two columns' cells, unsaid
            raise SearchError(f"index: the table names two columns {twice!r}; rename one")
        docs = docs.to_pylist() if hasattr(docs, "to_pylist") else docs.to_dict("records")
    if isinstance(docs, Mapping) and ("text" in docs or "contents" in docs) and \
            not any(isinstance(v, (Mapping, Passage)) for v in docs.values()):  # read as id -> text, its keys as ids
        raise SearchError("index: a dict with 'text' is one passage; give a list of passages ([{...}]) or a dict of "
                          "id -> text")
    check_many(docs, "index")
    if isinstance(docs, (set, frozenset)):  # no order, and a text's hash differs per process: its doc-<i> ids
        docs = sorted(docs, key=lambda d: d if isinstance(d, str) else repr(d))  # changed from run to run
    ps = [_passage(i, d) for i, d in enumerate(docs.items() if isinstance(docs, Mapping) else docs)]
    if not ps:
        raise SearchError("index: an empty list of passages; give at least one")
    # control characters alone are no text either
    if all(blank(p.text) for p in ps):
        raise SearchError("index: every passage's text is empty; nothing to search")
    twice = repeated(p.id for p in ps)
    if twice is not None:  # the build keeps the first and drops the rest without a word
        raise SearchError(f"index: passage id {twice!r} is given twice; ids name the passages in traces")
    tmp = tempfile.TemporaryDirectory(prefix="seakr-passages-", ignore_cleanup_errors=True)
    engine = TantivyEngine.build(split_passages(ps, passage_words), Path(tmp.name) / "index", threads=1)
    if advise and not passage_words:  # taken as given: say what a cut would spare
        warn_long("index", engine.manifest["long_passages"], "`passages_engine(docs, passage_words=100)` cuts them")
    engine.temporary_folder = tmp  # removed when the engine is collected or the process ends
    return engine


def _passage(i: int, d) -> Passage:
    """One passage given in code as a :class:`Passage`, a text, a dict with ``text``, or an (id, text) item."""
    if isinstance(d, Passage):
        return d
    if isinstance(d, str):
        return Passage(f"doc-{i}", "", d)
    if isinstance(d, tuple) and len(d) == 2 and not isinstance(d[1], (str, Passage, Mapping)):  # a dict's item
        raise TypeError(f"index: the passage of id {d[0]!r} is {type(d[1]).__name__}; a dict of passages maps each "
                        "id to its text (or to {'title', 'text'})")
    if isinstance(d, tuple) and len(d) == 2:
        key, d = d
        if isinstance(d, str):  # id -> text
            try:
                return Passage(key, "", d)
            except SchemaError as e:
                raise SearchError(f"index: {e}") from None
        if isinstance(d, Passage):
            return d
        d = {"id": key, **d}  # id -> {title, text}: the key names it unless the row does
    if isinstance(d, Mapping):  # read as a corpus file's line is: a DataFrame's NaN title, a numeric id, `contents`
        if "text" not in d and "contents" not in d:
            raise SearchError(f"index: passage {i} has no 'text' (its keys: {', '.join(map(str, d)) or 'none'})")
        try:
            return row_passage(f"index: passage {i}", d, default_id=f"doc-{i}")
        except CorpusError as e:
            raise SearchError(str(e)) from None
    raise TypeError("index: a list of passages holds Passage objects, texts or dicts with 'text', not "
                    f"{type(d).__name__}")


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
           "read_corpus", "split_passages"]
