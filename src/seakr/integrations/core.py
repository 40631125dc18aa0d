"""What every framework door shares: a method chosen by name with its options, checked when the component is made
(the method's one config schema, as every other door), the model loaded once on first use; a foreign retriever
made into a seakr search engine; and the answer in the shape the doors return."""

from __future__ import annotations

import importlib
import os
import threading
from typing import Any, Callable

from ..methods import METHODS, Method, method_name
from ..methods.trace import Answer, decisions
from ..models import DEFAULT_MODEL, LOAD_KEYS, LoadOptions, model_path
from ..models.registry import model_kind
from ..models.base import Generator
from ..search.base import Passage


def require(module: str, extra: str):
    """Import an optional framework, or say in one line which extra brings it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(f"seakr.integrations.{extra} needs {module}: pip install 'seakr[{extra}]'") from None


class Asker:
    """A method by name and its options, and the model with how it loads, checked now (an unknown method, model or
    option, a value out of range, a model file that is not there: one ValueError naming it, as every other door
    refuses it); the model (a registry name, a path, or a model already loaded) loads on first use, once, shared by
    every call."""

    def __init__(self, model: str | os.PathLike | Generator | None = None, method: str = "seakr",
                 options: dict[str, Any] | None = None):
        options = dict(options or {})
        self.load_options = {k: options.pop(k) for k in list(options) if k in LOAD_KEYS}
        self.config = METHODS[method_name(method)].Config.from_dict(options)
        self.model, self.method_name, self.options = model or DEFAULT_MODEL, method, options
        self._lm = model if isinstance(model, Generator) else None
        if self._lm is None:  # what the load would refuse after the first question's wait, refused now
            self._load = LoadOptions(**self.load_options)
            model_kind(model_path(self.model))
        self._lock = threading.Lock()

    def init_parameters(self) -> dict:
        """What a component's ``to_dict`` records of it: the model (a loaded one by the name it reports), the
        method, and the options with how the model loads."""
        model = str(self.model.info().get("model")) if isinstance(self.model, Generator) else os.fspath(self.model)
        return {"model": model, "method": self.method_name, "options": {**self.options, **self.load_options}}

    def lm(self) -> Generator:
        with self._lock:
            if self._lm is None:
                from ..models import load_model

                self._lm = load_model(self.model, options=self._load)
            return self._lm

    def method(self, engine=None) -> Method:
        return METHODS[self.method_name](self.lm(), engine, self.config)


def passage(id: str | None, title: str | None, text: str | None, score: float | None, n: int) -> Passage:
    """A foreign document as a passage: its id (else its position), title, text and score (0 where none)."""
    return Passage(str(id) if id is not None else f"doc-{n}", title or "", text or "", float(score or 0.0))


class ForeignEngine:
    """A seakr search engine over a framework's retriever: ``fetch(query, k)`` returns that framework's documents;
    ``convert(doc, n)`` makes one a :class:`Passage`. Every document returned is remembered by id, so a door can
    hand back the framework's own documents the answer saw."""

    def __init__(self, fetch: Callable[[str, int], list], convert: Callable[[Any, int], Passage], name: str):
        self.fetch, self.convert, self.name = fetch, convert, name
        self.seen: dict[str, Any] = {}

    def search(self, query: str, k: int = 3) -> list[Passage]:
        docs = list(self.fetch(query, k))[:k]
        out = [self.convert(d, n) for n, d in enumerate(docs)]
        self.seen.update((p.id, d) for p, d in zip(out, docs))
        return out

    def search_many(self, queries, k: int = 3) -> list[list[Passage]]:
        return [self.search(q, k) for q in queries]

    def count(self) -> int:
        return 0  # a framework's store may not say; nothing here reads it

    def metadata(self) -> dict:
        return {"engine": self.name}


def result(ans: Answer) -> dict:
    """An answer as the framework doors return it: the answer, the ids of the passages it could see, and its
    decisions (:func:`seakr.methods.trace.decisions`), the method and its settled config."""
    d = ans.to_dict()
    return {"answer": ans.answer, "passage_ids": [p["id"] for p in (d["trace"].get("final") or {}).get("passages", [])],
            "meta": {"question": ans.question, "method": ans.method, "decisions": decisions(d["trace"]),
                     "config": d["config"]}}
