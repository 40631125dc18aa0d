"""SeaKR in LangChain (``pip install 'seakr[langchain]'``).

* :class:`SeaKRRunnable` answers with SeaKR (or a baseline) over **any** ``BaseRetriever``, which becomes SeaKR's
  search engine (called with SeaKR's own queries, when it decides to retrieve). ``invoke`` / ``batch`` return
  ``{"answer", "documents" (the retriever's documents the answer saw), "meta" (the decisions, the method, its
  config)}``; ``stream`` yields ``{"event": ...}`` for each decision as it is made, then that result. Input: the
  question as text, or a dict with ``question`` (or ``query`` / ``input``).
* :class:`SeaKRRetriever` is a seakr index as a ``BaseRetriever`` for LangChain's own chains.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Iterator

from .core import Asker, ForeignEngine, require, result

require("langchain_core", "langchain")
from langchain_core.callbacks import CallbackManagerForRetrieverRun  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from langchain_core.runnables import Runnable, RunnableConfig  # noqa: E402
from pydantic import ConfigDict, Field, PrivateAttr  # noqa: E402
from ..search import open_engine

#: The keys a dict input may give its question under, in the order they are looked for.
QUESTION_KEYS = ("question", "query", "input")


def retriever_engine(retriever) -> ForeignEngine:
    """A LangChain retriever as seakr's search engine: ``invoke(query)``, its first k documents."""
    def fields(doc) -> tuple:
        meta = doc.metadata or {}
        return doc.id or meta.get("id"), meta.get("title"), doc.page_content, meta.get("score")

    return ForeignEngine(lambda query, k: retriever.invoke(query), fields, f"langchain:{type(retriever).__name__}")


def question_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for key in QUESTION_KEYS:
            if isinstance(value.get(key), str):
                return value[key]
    raise TypeError(f"input: the question as text, or a dict with a text 'question', got {type(value).__name__}")


class SeaKRRunnable(Runnable[Any, dict]):
    """A seakr method over a LangChain retriever; ``options`` are the method's (``SeaKRConfig``'s fields) and how
    the model loads (``precision``, ``device``), checked here; the model loads on the first call."""

    def __init__(self, retriever: BaseRetriever | None = None, model: str | None = None, method: str = "seakr",
                 options: dict[str, Any] | None = None):
        if retriever is not None and not isinstance(retriever, BaseRetriever):
            raise TypeError(f"retriever: expected a langchain_core BaseRetriever, got {type(retriever).__name__}")
        self.retriever = retriever
        self.asker = Asker(model, method, options)

    def _answer(self, value: Any, listener=None, cancel=None) -> dict:
        engine = retriever_engine(self.retriever) if self.retriever is not None else None
        out = result(self.asker.method(engine).answer(question_of(value), listener=listener, cancel=cancel))
        docs = [engine.seen[i] for i in out["passage_ids"] if engine is not None and i in engine.seen]
        return {"answer": out["answer"], "documents": docs, "meta": out["meta"]}

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> dict:
        return self._call_with_config(lambda v: self._answer(v), input, config)

    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[dict]:
        """Each trace event as it happens (``{"event": ...}``), then the result; closing the stream early stops
        the work at its next decode step."""
        items: queue.Queue = queue.Queue()
        cancel = threading.Event()

        def work():
            try:
                items.put(("done", self._answer(input, lambda ev: items.put(("event", ev)), cancel)))
            except BaseException as e:  # raised where the caller reads the stream
                items.put(("error", e))

        worker = threading.Thread(target=work, name="seakr-stream", daemon=True)
        worker.start()
        try:
            while True:
                kind, data = items.get()
                if kind == "error":
                    raise data
                yield {"event": data} if kind == "event" else data
                if kind == "done":
                    return
        finally:
            cancel.set()
            worker.join()


class SeaKRRetriever(BaseRetriever):
    """A seakr index (``seakr index build``, or an Elasticsearch URL) as a LangChain retriever: BM25 over title and
    text, the top ``k``, each a ``Document`` with the passage's id, ``metadata["title"]`` and ``["score"]``."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    index: str
    k: int = Field(default=3, ge=1)
    _engine: Any = PrivateAttr(default=None)

    def model_post_init(self, context: Any) -> None:
        self._engine = open_engine(self.index)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [Document(id=p.id, page_content=p.text, metadata={"id": p.id, "title": p.title, "score": p.score})
                for p in self._engine.search(query, self.k)]
