"""Elasticsearch 7.17+/8.x and OpenSearch 2.x behind the same :class:`SearchEngine` protocol.

URL forms (the path is the index name)::

    http://localhost:9200/wiki                Elasticsearch, official ``elasticsearch`` client
    es+https://user:pass@es.example:9200/wiki
    opensearch+http://localhost:9200/wiki     OpenSearch, official ``opensearch-py`` client

(``elasticsearch-py`` >= 7.14 refuses OpenSearch in its product check, hence the explicit scheme.)

Index: ``title`` and ``text`` as ``text`` fields with the built-in ``english`` analyzer, default
BM25 (k1=1.2, b=0.75) -- the paper's setup. An existing index is read with the fields its mapping has:
the reference code's ``title`` + ``txt`` (``TEXT_FIELDS``). Query: ``multi_match`` best_fields over both fields,
tie-breaker 0.5, ``dfs_query_then_fetch`` (global statistics on multi-shard clusters), ``size`` k
(the reference asked for 1,000 hits with full source and kept 3; we ask for k).

Ingest: ``streaming_bulk`` with retries and exponential back-off on 429 (back-pressure), then a
refresh and a count check that raises on a partial index -- the reference stack's indexes were
silently partial when a node ran low on disk. A build is all or nothing (:meth:`ElasticEngine.build`): a new
index that fails is deleted, and an overwrite fills a staged index (``NAME-seakr-<hex>``) that the name is
switched to in one alias update only once it is whole -- searches see the old passages until then.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Iterable, Sequence
from urllib.parse import urlsplit, urlunsplit

from ..common.console import first_line
from .base import TIE_BREAKER, Intake, Passage, SearchError, check_search, redact

MAPPING = {
    "settings": {"analysis": {"analyzer": {"default": {"type": "english"}}}},
    "mappings": {
        "properties": {
            "id": {"type": "keyword"},
            "title": {"type": "text", "analyzer": "english"},
            "text": {"type": "text", "analyzer": "english"},
        }
    },
}


#: What no Elasticsearch or OpenSearch index, alias or pattern is named with (capitals, spaces, control
#: characters), refused before any connection; patterns (``wiki-*``), ``_all`` and cross-cluster names pass.
_INDEX_NAME = re.compile(r"[^A-Z\s\x00-\x1f]+")


def _url_parts(url: str):
    """``http(s)://host:port/INDEX`` split, or one line naming the URL: a bad port or host, a query or fragment
    (which would be dropped), or an index name the cluster refuses."""
    said = redact(url)  # as every refusal below names it: without its password
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises on a port that is not a number in range)
    except ValueError as e:
        raise SearchError(f"{said}: not a URL ({e})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:  # a URL with no host names none
        raise SearchError(f"{said}: expected http(s)://host:port/INDEX")
    if not re.fullmatch(r"[\w.\-:%]+", parts.hostname):
        raise SearchError(f"{said}: host {parts.hostname!r} is not a host name or address")
    if parts.query or parts.fragment:
        raise SearchError(f"{said}: an index URL has no ?query or #fragment: http(s)://host:port/INDEX")
    index = parts.path.strip("/")
    if not index or "/" in index:
        raise SearchError(f"{said}: put the index name in the URL path, e.g. http://localhost:9200/wiki")
    if not _INDEX_NAME.fullmatch(index):
        raise SearchError(f"{said}: the cluster has no index named {index!r}: index names are lowercase, without "
                          "spaces")
    return parts, index


#: Where an index keeps a passage's text, in the order looked for: ours; the reference code's (DRAGIN's
#: ``prep_elastic.py`` through BEIR's helper: ``title`` + ``txt``); Pyserini's and other common names
TEXT_FIELDS = ("text", "txt", "contents", "content", "passage", "body")


class ElasticEngine:
    def __init__(self, client, index: str, flavour: str = "elasticsearch", url: str = ""):
        self.client, self.index, self.flavour, self.url = client, index, flavour, url
        self._fields: tuple[str, str | None] | None = None  # (text, title) of an existing index, read once

    def fields(self) -> tuple[str, str | None]:
        """(text field, title field or None) of the index, from its mapping (read at the first search). An index
        built by the reference code keeps its text in ``txt``, which is then the field queried and read."""
        if self._fields is None:
            try:
                m = self.client.indices.get_mapping(index=self.index)
            except Exception as e:
                if "index_not_found" in str(e) or "no such index" in str(e):
                    raise SearchError(f"{self.url}: the cluster has no index {self.index!r}") from None
                raise SearchError(f"{self.url}: search failed: cannot read the index's fields "
                                  f"({first_line(e)})") from None
            props: dict = {}
            for mapping in _mappings(m):
                props.update(mapping.get("properties") or {})
            text = next((f for f in TEXT_FIELDS if f in props), None if props else "text")  # no field yet: ours
            if text is None:
                raise SearchError(f"{self.url}: no passage text field: the index maps "
                                  f"{', '.join(sorted(props)) or 'no field'}; "
                                  f"the text is read from one of {', '.join(TEXT_FIELDS)}")
            self._fields = (text, "title" if "title" in props or not props else None)
        return self._fields

    @classmethod
    def from_url(cls, url: str, timeout: float = 30.0, **kwargs) -> "ElasticEngine":
        flavour = "elasticsearch"
        if url.lower().startswith("opensearch+"):
            flavour, url = "opensearch", url[len("opensearch+"):]
        elif url.lower().startswith("es+"):
            url = url[3:]
        parts, index = _url_parts(url)
        host = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
        name = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname  # IPv6 keeps its brackets
        safe = urlunsplit((parts.scheme, name + (f":{parts.port}" if parts.port else ""), "/" + index, "", ""))
        if flavour == "opensearch":
            try:
                from opensearchpy import OpenSearch
            except ImportError:
                raise SearchError("OpenSearch needs the client: pip install 'seakr[opensearch]'") from None
            client = OpenSearch(hosts=[host], timeout=timeout, **kwargs)
        else:
            try:
                from elasticsearch import Elasticsearch
            except ImportError:
                raise SearchError("Elasticsearch needs the client: pip install 'seakr[es]'") from None
            client = Elasticsearch(host, timeout=timeout, **kwargs)
        return cls(client, index, flavour, safe)

    # ------------------------------------------------------------------ build
    def create(self, overwrite: bool = False) -> None:
        """An empty index under the name; ``overwrite`` retires what the name held first, at once (``build`` is the
        all-or-nothing way to replace an index with passages)."""
        if self._exists(overwrite):
            self._switch_to(None)
        self._make(self.index)

    def build(self, passages: Iterable[Passage], overwrite: bool = False, progress=None,
              sources: Sequence[str] = ()) -> dict:
        """A whole index of ``passages`` under the name, or none. A new name is filled in place and deleted if the
        build fails; an existing one is filled as a staged index and switched over in one alias update once whole
        (the old stays searchable until then, and is kept if the build fails: a bad line deep in a corpus, a full
        disk, Ctrl-C)."""
        exists = self._exists(overwrite)
        target = f"{self.index}{_STAGED}{uuid.uuid4().hex[:12]}" if exists else self.index
        self._make(target)
        staged = ElasticEngine(self.client, target, self.flavour, self.url)
        try:
            st = staged.ingest(passages, progress=progress, sources=sources)
            if exists:
                self._switch_to(target)
        except BaseException:
            _drop(self.client, target)
            raise
        self._fields = None
        return st

    def _exists(self, overwrite: bool) -> bool:
        """Whether the name holds an index (or alias) already; refused unless ``overwrite``."""
        exists = self.client.indices.exists(index=self.index)
        if exists and not overwrite:
            raise SearchError(f"{self.url}: index exists (pass overwrite / --overwrite to replace it)")
        return exists

    def _make(self, index: str) -> None:
        self._fields = None  # the new mapping's (ours)
        if self.flavour == "opensearch":
            self.client.indices.create(index=index, body=MAPPING)
        else:
            self.client.indices.create(index=index, **MAPPING)

    def _switch_to(self, target: str | None) -> None:
        """Point the name at ``target`` (None: at nothing) in one alias update, retiring what it named: an index
        under the name is removed in that update; behind an alias, the indexes a seakr overwrite staged are
        deleted after it, and one's own index the alias named is left as it is (only the alias moves)."""
        ind = self.client.indices
        if ind.exists_alias(name=self.index):
            old = list(ind.get_alias(name=self.index))
            actions = [{"remove": {"index": i, "alias": self.index}} for i in old]
        else:
            old, actions = [], [{"remove_index": {"index": self.index}}]
        if target:
            actions.append({"add": {"index": target, "alias": self.index}})
        ind.update_aliases(body={"actions": actions})
        for i in old:
            if i.startswith(self.index + _STAGED):
                _drop(self.client, i)

    def ingest(self, passages: Iterable[Passage], chunk: int = 500, max_retries: int = 5, progress=None,
               sources: Sequence[str] = ()) -> dict:
        """Bulk-index with retries/back-off, then verify the count; raises on a partial index. ``sources``: the
        corpus files the passages came from, listed in the index's mapping as a tantivy manifest lists them."""
        if self.flavour == "opensearch":
            from opensearchpy.helpers import streaming_bulk
        else:
            from elasticsearch.helpers import streaming_bulk
        before = self.count(refresh=True)
        # an index of the reference code keeps its text in "txt": added passages go where its own are searched
        # (and adding to no index was the cluster's auto-created one, without the english analyzer)
        text_field, title_field = self.fields()
        took, failed = Intake(), 0

        def actions():
            for p in passages:
                if took.take(p):
                    source = {"id": p.id, title_field or "title": p.title, text_field: p.text}
                    yield {"_index": self.index, "_id": p.id, "_source": source}

        t0 = time.time()
        for ok, item in streaming_bulk(self.client, actions(), chunk_size=chunk, max_retries=max_retries,
                                       initial_backoff=1, max_backoff=60, raise_on_error=False):
            if not ok:
                failed += 1
            if progress:
                progress(1)
        after = self.count(refresh=True)
        # A fresh index must hold exactly what was sent; on an incremental add re-sent ids replace
        # documents (same _id), so only failures or a shrinking count can be detected there.
        if failed or (before == 0 and after != took.taken) or after < before:
            raise SearchError(f"{self.url}: partial index: sent {took.taken} documents, {failed} failed, count "
                              f"{before} "
                              f"-> {after}")
        self._record(took.longest, fresh=before == 0, sent_ids=took.seen, sources=sources)
        return {"sent": took.taken, "duplicates": took.duplicates, "empty": took.empty, "long": took.long,
                "count": after, "seconds": time.time() - t0}

    def _meta(self) -> dict:
        """What seakr recorded in the index's mapping (``_meta.seakr``); {} for an index built elsewhere or before."""
        try:
            m = self.client.indices.get_mapping(index=self.index)
        except Exception:
            return {}
        for mapping in _mappings(m):
            meta = (mapping.get("_meta") or {}).get("seakr")
            if isinstance(meta, dict):
                return meta
        return {}

    def _record(self, longest: dict | None, fresh: bool, sent_ids: set[str], sources: Sequence[str]) -> None:
        """Keep in the index's mapping what a tantivy manifest keeps: its longest passage (id, characters), by
        which the service counts every passage of its index, and the corpus files it was built from (an add of
        one read another way is refused by them). An index built elsewhere gets no record of either."""
        meta = {} if fresh else self._meta()
        if not fresh and not meta:
            return
        meta["longest_passage"] = _longest_after(meta.get("longest_passage"), longest, fresh, sent_ids)
        meta["sources"] = list(meta.get("sources") or []) + list(sources)
        self.client.indices.put_mapping(index=self.index, body={"_meta": {"seakr": meta}})

    def sources(self) -> list[str]:
        """The corpus files a seakr build and every add since listed ([] for an index built elsewhere)."""
        return [x for x in self._meta().get("sources") or [] if isinstance(x, str)]

    def passage(self, pid: str) -> Passage | None:
        """The passage of id ``pid`` (its document id, as a build writes it), or None where the index holds none."""
        text, title = self.fields()
        try:
            d = self.client.get(index=self.index, id=pid)
        except Exception as e:
            if getattr(e, "status_code", None) == 404 or getattr(getattr(e, "meta", None), "status", None) == 404:
                return None
            raise SearchError(f"{self.url}: cannot read passage {pid!r} ({first_line(e)})") from None
        src = d.get("_source") or {}
        return Passage(str(src.get("id", d["_id"])), _text(src.get(title, "") if title else ""),
                       _text(src.get(text, "")))

    def longest_passage(self) -> Passage | None:
        """The longest passage in characters, as recorded by a seakr build and every add since; None for an index
        built elsewhere or before the record (the service then counts passages as 200 tokens)."""
        known = self._meta().get("longest_passage")
        return self.passage(known["id"]) if isinstance(known, dict) and isinstance(known.get("id"), str) else None

    # ------------------------------------------------------------------ query
    def _body(self, query: str, k: int) -> dict:
        text, title = self.fields()
        fields = [f for f in (title, text) if f]
        return {
            "query": {"multi_match": {"query": query, "type": "best_fields", "fields": fields,
                                      "tie_breaker": TIE_BREAKER}},
            "size": k,
            "_source": ["id", *fields],
        }

    def search(self, query: str, k: int = 3) -> list[Passage]:
        return self.search_many([query], k)[0]

    def search_many(self, queries: Sequence[str], k: int = 3) -> list[list[Passage]]:
        searched = []
        for q in queries:
            q, k = check_search(q, k)
            searched.append(q)
        if not queries:
            return []
        body = []
        for q in searched:
            body += [{"index": self.index, "search_type": "dfs_query_then_fetch"}, self._body(q, k)]
        try:
            res = self.client.msearch(body=body)
        except Exception as e:
            raise SearchError(f"{self.url}: search failed ({e})") from None
        out = []
        for r in res["responses"]:
            if "error" in r:
                raise SearchError(f"{self.url}: search failed ({r['error']})")
            text, title = self.fields()
            out.append([Passage(str(h["_source"].get("id", h["_id"])),
                                _text(h["_source"].get(title, "") if title else ""),
                                _text(h["_source"].get(text, "")), float(h["_score"])) for h in r["hits"]["hits"]])
        return out

    def count(self, refresh: bool = False) -> int:
        try:
            if refresh:
                self.client.indices.refresh(index=self.index)
            return int(self.client.count(index=self.index)["count"])
        except Exception as e:
            if "index_not_found" in str(e) or "no such index" in str(e):
                return 0
            raise SearchError(f"{self.url}: cannot count documents ({e})") from None

    def metadata(self) -> dict:
        n = self.count()
        # an empty index may not exist yet
        fields = [f for f in reversed(self.fields()) if f] if n else ["title", "text"]
        return {"engine": self.flavour, "url": self.url, "index": self.index, "doc_count": n,
                "analyzer": "english", "bm25": {"k1": 1.2, "b": 0.75},
                "query": {"type": "multi_match best_fields", "fields": fields, "tie_breaker": TIE_BREAKER}}


def _longest_after(old, longest: dict | None, fresh: bool, sent_ids: set[str]) -> dict | None:
    """The longest passage after an ingest: the new one's in a fresh index; after an add, the longer of the two
    where the index had a record (re-sent ids replace passages here, so a record whose passage was re-sent
    shorter is dropped rather than kept wrong)."""
    if fresh:
        return longest
    if not isinstance(old, dict) or not longest:
        return old if isinstance(old, dict) else None
    if old.get("id") in sent_ids and longest["chars"] < old.get("chars", 0):
        return None
    return max(old, longest, key=lambda x: x.get("chars", 0))


#: What names the index an overwrite fills before the name is switched to it (``wiki`` -> ``wiki-seakr-<hex>``).
_STAGED = "-seakr-"


def _mappings(answer) -> list[dict]:
    """The mappings of a ``get_mapping`` answer, one an index (an alias may name several)."""
    return [m.get("mappings") or {} for m in dict(getattr(answer, "body", answer)).values()]


def _drop(client, index: str) -> None:
    """Delete ``index`` if the cluster lets us (a clean-up on the way out of a failure: never masks that failure)."""
    try:
        client.indices.delete(index=index)
    except Exception:
        pass


def _text(v) -> str:
    """A source field as text: a list (a passage stored as its sentences) joined, null as nothing."""
    if v is None:
        return ""
    return " ".join(map(str, v)) if isinstance(v, list) else str(v)
