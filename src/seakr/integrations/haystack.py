"""SeaKR as Haystack components (``pip install 'seakr[haystack]'``).

* :class:`SeaKRAnswerer` answers with SeaKR (or a baseline) over **any retriever the pipeline already has**: the
  retriever becomes SeaKR's search engine, called at each step SeaKR decides to retrieve, with the query it makes.
  ``run(query) -> {"replies": [answer], "documents": [the retriever's documents the answer saw], "meta": [decisions]}``.
  A dense retriever takes the text embedder that feeds it (``text_embedder=``), run on each query.
* :class:`SeaKRRouter` is the knowledge check alone: ``run(query) -> {"route": "answer" | "retrieve", "p_correct",
  "answer", "query"}``, for a ``ConditionalRouter`` in front of any RAG branch.
* :class:`SeaKRIndexRetriever` is a seakr index as a Haystack retriever.

Each checks its options in ``__init__`` (the method's one config schema), loads the model in ``warm_up`` (or on its
first run), and round-trips through ``to_dict``/``from_dict`` and a pipeline's YAML. Importing this module adds
its own path to Haystack's deserialization allowlist, so a saved pipeline that names these components loads.
"""

from __future__ import annotations

import os
from typing import Any

from ..common.schema import Positive, check_type
from .core import Asker, ForeignEngine, require, result

haystack = require("haystack", "haystack")
from haystack import Document, component, default_from_dict, default_to_dict  # noqa: E402
from haystack.core.serialization import allow_deserialization_module  # noqa: E402
from ..search import open_engine

allow_deserialization_module(__name__)


def retriever_engine(retriever, text_embedder=None) -> ForeignEngine:
    """A Haystack retriever as seakr's search engine: ``run(query=..., top_k=k)``; with a text embedder,
    ``run(query_embedding=embedder.run(text=query)["embedding"], top_k=k)``."""
    def fetch(query: str, k: int) -> list:
        if text_embedder is not None:
            emb = text_embedder.run(text=query)["embedding"]
            return retriever.run(query_embedding=emb, top_k=k)["documents"]
        return retriever.run(query=query, top_k=k)["documents"]

    def fields(doc) -> tuple:
        return doc.id, (doc.meta or {}).get("title"), doc.content, doc.score

    return ForeignEngine(fetch, fields, f"haystack:{type(retriever).__name__}")


def _check_runs(obj, name: str) -> None:
    if obj is not None and not callable(getattr(obj, "run", None)):
        raise TypeError(f"{name}: expected a Haystack component (with run()), got {type(obj).__name__}")


@component
class SeaKRAnswerer:
    """Answers a query with a seakr method over ``retriever`` (any Haystack retriever that takes ``query``, or
    ``query_embedding`` with ``text_embedder``); ``options`` are the method's (``seakr.methods.SeaKRConfig``'s
    fields, e.g. ``{"gate": "step", "max_steps": 4}``) and how the model loads (``precision``, ``device``)."""

    def __init__(self, retriever: Any, model: str | None = None, method: str = "seakr",
                 options: dict[str, Any] | None = None, text_embedder: Any = None):
        _check_runs(retriever, "retriever")
        _check_runs(text_embedder, "text_embedder")
        self.retriever, self.text_embedder = retriever, text_embedder
        self.asker = Asker(model, method, options)

    def warm_up(self) -> None:
        self.asker.lm()
        for part in (self.retriever, self.text_embedder):
            if callable(getattr(part, "warm_up", None)):
                part.warm_up()

    @component.output_types(replies=list[str], documents=list[Document], meta=list[dict[str, Any]])
    def run(self, query: str) -> dict[str, Any]:
        engine = retriever_engine(self.retriever, self.text_embedder)
        out = result(self.asker.method(engine).answer(query))
        docs = [engine.seen[i] for i in out["passage_ids"] if i in engine.seen]
        return {"replies": [out["answer"]], "documents": docs, "meta": [out["meta"]]}

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, retriever=self.retriever, text_embedder=self.text_embedder,
                               **self.asker.init_parameters())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SeaKRAnswerer":
        return default_from_dict(cls, data)


@component
class SeaKRRouter:
    """The knowledge check before any retrieval: the model answers closed-book and reads P(correct) from its
    fitted self-knowledge (gate=probe, or gate=check through a calibration map); ``route`` is ``"answer"`` where
    P(correct) reaches the level (``gate_p``) with a real answer, else ``"retrieve"``. Needs files fitted for
    the model (the package's for the default model, or ``options={"probes": DIR}``)."""

    def __init__(self, model: str | None = None, options: dict[str, Any] | None = None):
        self.asker = Asker(model, "seakr", options)
        self._method = None

    def warm_up(self) -> None:
        if self._method is None:
            method = self.asker.method()
            method.require_check()  # its one-line refusal, said when the pipeline warms up
            self._method = method

    @component.output_types(route=str, p_correct=float, answer=str, query=str, level=float)
    def run(self, query: str) -> dict[str, Any]:
        self.warm_up()
        known = self._method.knows(query)
        return {"route": "answer" if known.sure else "retrieve", "p_correct": float(known.p),
                "answer": known.answer, "query": query, "level": float(known.gate_p)}

    def to_dict(self) -> dict[str, Any]:
        params = self.asker.init_parameters()
        return default_to_dict(self, model=params["model"], options=params["options"])  # always SeaKR: no method

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SeaKRRouter":
        return default_from_dict(cls, data)


@component
class SeaKRIndexRetriever:
    """A seakr index (``seakr index build``, or an Elasticsearch URL) as a Haystack retriever: BM25 over title and
    text, each passage a ``Document`` with its id, ``meta["title"]`` and score."""

    def __init__(self, index: str, top_k: int = 3):
        self.index, self.top_k = os.fspath(index), check_type(Positive, top_k, "top_k")
        self.engine = open_engine(self.index)

    @component.output_types(documents=list[Document])
    def run(self, query: str, top_k: int | None = None) -> dict[str, list[Document]]:
        hits = self.engine.search(query, top_k or self.top_k)
        return {"documents": [Document(id=p.id, content=p.text, meta={"title": p.title}, score=p.score) for p in hits]}

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, index=self.index, top_k=self.top_k)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SeaKRIndexRetriever":
        return default_from_dict(cls, data)
