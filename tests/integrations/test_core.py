"""A framework's documents as seakr's passages, through each framework's real ``Document`` and its retriever door:
read by the one rule a corpus row is read by, whatever the retriever returns, and refused naming the retriever and
the document where a field cannot be read."""

import math

import numpy as np
import pytest


def _haystack(docs):
    haystack = pytest.importorskip("haystack")
    from seakr.integrations.haystack import retriever_engine

    class Listed:
        def run(self, query, top_k=3):
            return {"documents": [haystack.Document(id=i, content=t, meta=m, score=s) for i, t, m, s in docs]}

    return retriever_engine(Listed())


def _langchain(docs):
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    from seakr.integrations.langchain import retriever_engine

    class Listed(BaseRetriever):
        def _get_relevant_documents(self, query, *, run_manager=None):
            return [Document(id=i, page_content=t or "", metadata={**m, **({} if s is None else {"score": s})})
                    for i, t, m, s in docs]

    return retriever_engine(Listed())


FRAMEWORKS = [_haystack, _langchain]


@pytest.mark.parametrize("engine_of", FRAMEWORKS)
def test_a_retrievers_documents_are_read_as_a_corpus_row_is(engine_of):
    """A title given as a number is its digits (a book called 1984), a NaN title none, a score that is not a finite
    number none; a document without text, or with an id the results already had, is skipped (an index build skips
    both), and a document without an id is named by its place."""
    engine = engine_of([("a", "Orwell wrote it.", {"title": 1984}, float("nan")),
                        ("b", "   ", {"title": "Blank"}, 1.0),
                        ("a", "Another text under the same id.", {}, 2.0),
                        ("c", "Scored by NumPy.", {"title": float("nan")}, np.float32(0.5)),
                        (None, "No id.", {}, None), ("d", "Scored past a float.", {}, 10 ** 400)])
    got = engine.search("q", k=6)
    # Haystack makes an id of a document's content where none is given; LangChain leaves it None
    no_id = got[2].id if engine.name.startswith("haystack") else "doc-4"
    assert [(p.id, p.title, p.text) for p in got] == [("a", "1984", "Orwell wrote it."), ("c", "", "Scored by NumPy."),
                                                      (no_id, "", "No id."), ("d", "", "Scored past a float.")]
    assert [p.score for p in got] == [0.0, 0.5, 0.0, 0.0] and all(math.isfinite(p.score) for p in got)
    assert engine.seen["a"].id == "a" and set(engine.seen) == {"a", "c", no_id, "d"}


@pytest.mark.parametrize("engine_of", FRAMEWORKS)
def test_a_document_that_cannot_be_read_is_refused_naming_the_retriever_and_the_document(engine_of):
    engine = engine_of([("a", "Fine.", {}, None), ("b", "Fine too.", {"title": ["a", "list"]}, None)])
    with pytest.raises(ValueError, match=r"^(haystack|langchain):Listed: document 1: field title: "):
        engine.search("q", k=5)
