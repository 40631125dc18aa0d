"""What every framework door shares: a method chosen by name with its options, checked when the component is made
(the method's one config schema, as every other door), the model loaded once on first use; a foreign retriever
made into a seakr search engine; and the answer in the shape the doors return."""

from __future__ import annotations

import dataclasses
import importlib
import os
import threading
from typing import Any, Callable

from ..methods import METHODS, Method, method_name
from ..methods.trace import Answer, decisions
from ..models import DEFAULT_MODEL, LOAD_KEYS, LoadOptions, load_model, model_path
from ..models.registry import model_kind
from ..models.base import Generator
from ..common.checks import blank
from ..common.schema import SchemaError
from ..search.base import Passage
from ..search.corpora import row_passage


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
                self._lm = load_model(self.model, options=self._load)
            return self._lm

    def method(self, engine=None) -> Method:
        return METHODS[self.method_name](self.lm(), engine, self.config)


def passage(where: str, id: Any, title: Any, text: Any, score: Any) -> Passage | None:
    """A foreign document's fields as a passage, read as a corpus row is (:func:`~seakr.search.corpora.row_passage`:
    an id or title given as a number is its digits, a NaN title is none), a refusal naming ``where``; None where it
    has no text, so that a search skips it as an index build does. A score that is not a finite number is none (0)."""
    p = row_passage(where, {"id": id, "title": title, "text": "" if text is None else text})
    if blank(p.text):
        return None
    try:  # the passage schema's own rule for a score
        return dataclasses.replace(p, score=score)
    except SchemaError:
        return p


class ForeignEngine:
    """A seakr search engine over a framework's retriever: ``fetch(query, k)`` returns that framework's documents,
    ``fields(doc)`` a document's id, title, text and score, each read by :func:`passage` (a document without an id
    is ``doc-N``, N its place in the results). A document without text, or with an id the results already had, is
    skipped, as an index build skips them. Every document returned is remembered by id, so a door can hand back the
    framework's own documents the answer saw."""

    def __init__(self, fetch: Callable[[str, int], list], fields: Callable[[Any], tuple], name: str):
        self.fetch, self.fields, self.name = fetch, fields, name
        self.seen: dict[str, Any] = {}

    def search(self, query: str, k: int = 3) -> list[Passage]:
        out: dict[str, tuple[Passage, Any]] = {}
        for n, doc in enumerate(list(self.fetch(query, k))[:k]):
            id, title, text, score = self.fields(doc)
            p = passage(f"{self.name}: document {n}", f"doc-{n}" if id is None else id, title, text, score)
            if p is not None and p.id not in out:
                out[p.id] = p, doc
        self.seen.update((i, doc) for i, (_, doc) in out.items())
        return [p for p, _ in out.values()]

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
