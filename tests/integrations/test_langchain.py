"""SeaKR in a real LangChain chain: the runnable over a retriever answers, batches and streams its decisions as
they are made, with the same answer and decisions as ``seakr ask``; a seakr index serves LangChain as a retriever;
and any ``BaseRetriever`` of one's own is searched with SeaKR's queries."""

import pytest

from helpers import FAST, QUESTION, same_decisions

pytest.importorskip("langchain_core")
from langchain_core.documents import Document  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from langchain_core.runnables import RunnableLambda  # noqa: E402

from seakr.integrations.langchain import SeaKRRetriever, SeaKRRunnable  # noqa: E402
from seakr.methods.trace import decisions  # noqa: E402


def test_options_and_the_retriever_are_checked_when_the_runnable_is_made(small_index):
    with pytest.raises(ValueError, match="max_step.*max_steps"):
        SeaKRRunnable(SeaKRRetriever(index=small_index), options={"max_step": 2})
    with pytest.raises(TypeError, match="BaseRetriever"):
        SeaKRRunnable(object())
    with pytest.raises(ValueError):
        SeaKRRetriever(index=small_index, k=0)
    # the model and how it loads, too: they failed at the chain's first invoke
    with pytest.raises(ValueError, match=r"^unknown model 'nope': not a registry name"):
        SeaKRRunnable(SeaKRRetriever(index=small_index), model="nope")
    with pytest.raises(ValueError, match=r"^option threads: 4096: this process may use \d+ CPUs"):
        SeaKRRunnable(SeaKRRetriever(index=small_index), model="smollm2-135m", options={"threads": 4096})


def test_a_seakr_index_is_a_langchain_retriever(small_index):
    docs = SeaKRRetriever(index=small_index, k=2).invoke("Jaws novel author")
    assert len(docs) == 2 and all(isinstance(d, Document) for d in docs)
    assert docs[0].metadata["title"] == "Jaws (novel)" and docs[0].id == docs[0].metadata["id"]


@pytest.mark.slow
def test_a_chain_answers_and_streams_as_seakr_ask_does(small_index, asked):
    qa = SeaKRRunnable(SeaKRRetriever(index=small_index), model="smollm2-135m", options=FAST)
    chain = RunnableLambda(lambda q: {"question": q}) | qa
    out = chain.invoke(QUESTION)
    assert out["answer"] == asked["answer"]
    assert same_decisions(out["meta"]["decisions"], decisions(asked["trace"]))
    kept = [s["kept"]["id"] for s in out["meta"]["decisions"]["steps"] if s["kept"]]
    assert [d.id for d in out["documents"]] == kept and all(isinstance(d, Document) for d in out["documents"])
    parts = list(qa.stream(QUESTION))
    events = [p["event"] for p in parts[:-1]]
    assert {"model_call", "decision", "retrieval", "step"} <= {e["type"] for e in events}
    assert parts[-1]["answer"] == asked["answer"] and same_decisions(parts[-1]["meta"]["decisions"],
                                                                     out["meta"]["decisions"])
    assert [r["answer"] for r in qa.batch([QUESTION, {"query": QUESTION}])] == [asked["answer"]] * 2


class Shelf(BaseRetriever):
    """A retriever of one's own: the documents whose text shares a word with the query, as they were given."""

    docs: list[Document]
    seen: list[str] = []

    def _get_relevant_documents(self, query, *, run_manager):
        self.seen.append(query)
        words = set(query.lower().split())
        return [d for d in self.docs if words & set(d.page_content.lower().split())]


@pytest.mark.slow
def test_any_retriever_is_searched_with_seakrs_own_queries(smol):
    shelf = Shelf(docs=[Document(page_content="Jaws is a novel written by Peter Benchley.", metadata={"title": "Jaws"}),
                        Document(page_content="Peter Benchley was an American author.", id="pb")])
    out = SeaKRRunnable(shelf, model=smol, method="ircot", options=FAST).invoke(QUESTION)
    assert shelf.seen and out["meta"]["decisions"]["steps"][0]["query"] == shelf.seen[0]
    assert all(isinstance(d, Document) for d in out["documents"]) and out["documents"]
