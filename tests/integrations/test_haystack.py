"""SeaKR in a real Haystack pipeline: over Haystack's own in-memory BM25 retriever and document store, over a seakr
index as a Haystack retriever (the same answer and decisions as ``seakr ask``), through a pipeline's YAML, and the
knowledge check in front of a ``ConditionalRouter``."""

import pytest

from helpers import FAST, HOTPOT, QUESTION, same_decisions

haystack = pytest.importorskip("haystack")
from haystack import Document, Pipeline  # noqa: E402
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever  # noqa: E402
from haystack.components.routers import ConditionalRouter  # noqa: E402
from haystack.document_stores.in_memory import InMemoryDocumentStore  # noqa: E402

from seakr.integrations.haystack import SeaKRAnswerer, SeaKRIndexRetriever, SeaKRRouter  # noqa: E402
from seakr.methods.trace import decisions  # noqa: E402


def store_of_fixture(index_name: str) -> InMemoryDocumentStore:
    from seakr.search.corpora import read_corpus

    store = InMemoryDocumentStore(index=index_name)
    store.write_documents([Document(id=p.id, content=p.text, meta={"title": p.title}) for p in read_corpus(HOTPOT)])
    return store


def test_options_and_parts_are_checked_when_the_component_is_made():
    store = InMemoryDocumentStore()
    with pytest.raises(ValueError, match="max_step.*max_steps"):
        SeaKRAnswerer(InMemoryBM25Retriever(store), model="smollm2-135m", options={"max_step": 2})
    with pytest.raises(ValueError, match="unknown method 'seekr'.*seakr"):
        SeaKRAnswerer(InMemoryBM25Retriever(store), method="seekr")
    with pytest.raises(TypeError, match="retriever: expected a Haystack component"):
        SeaKRAnswerer(store)
    with pytest.raises(ValueError, match="option k"):
        SeaKRRouter(options={"k": -1})
    # the model and how it loads, too: they failed at the pipeline's first run, after its earlier components ran
    with pytest.raises(ValueError, match=r"unknown model 'qwen2.5-coder-05b' \(did you mean 'qwen2.5-coder-0.5b'\?\)"):
        SeaKRAnswerer(InMemoryBM25Retriever(store), model="qwen2.5-coder-05b")
    with pytest.raises(ValueError, match=r"^model '.*nothing.gguf': no such file or folder$"):
        SeaKRRouter(model="/nonexistent/nothing.gguf")
    with pytest.raises(ValueError, match=r"^option precision: 'fp8': expected auto, "):
        SeaKRRouter(model="smollm2-135m", options={"precision": "fp8"})


@pytest.mark.slow
def test_a_pipeline_answers_from_the_stores_documents_and_round_trips_through_yaml():
    store = store_of_fixture("seakr-haystack-test")
    pipe = Pipeline()
    pipe.add_component("seakr", SeaKRAnswerer(InMemoryBM25Retriever(store), model="smollm2-135m", options=FAST))
    out = pipe.run({"seakr": {"query": QUESTION}})["seakr"]
    assert out["replies"] and isinstance(out["replies"][0], str) and out["replies"][0]
    meta = out["meta"][0]
    assert meta["method"] == "seakr" and meta["decisions"]["steps"]
    kept = [s["kept"]["id"] for s in meta["decisions"]["steps"] if s["kept"]]
    assert kept and [d.id for d in out["documents"]] == kept  # the store's own documents the answer saw
    assert all(isinstance(d, Document) and store.filter_documents({"field": "id", "operator": "==", "value": d.id})
               for d in out["documents"])
    again = Pipeline.loads(pipe.dumps())
    assert isinstance(again.get_component("seakr"), SeaKRAnswerer)
    out2 = again.run({"seakr": {"query": QUESTION}})["seakr"]
    assert out2["replies"] == out["replies"] and same_decisions(out2["meta"][0]["decisions"], meta["decisions"])


@pytest.mark.slow
def test_over_a_seakr_index_it_answers_and_decides_as_seakr_ask(small_index, asked):
    comp = SeaKRAnswerer(SeaKRIndexRetriever(small_index), model="smollm2-135m", options=FAST)
    comp.warm_up()
    out = comp.run(QUESTION)
    assert out["replies"] == [asked["answer"]]
    assert same_decisions(out["meta"][0]["decisions"], decisions(asked["trace"]))
    assert SeaKRIndexRetriever.from_dict(SeaKRIndexRetriever(small_index, top_k=2).to_dict()).run(QUESTION)[
        "documents"][0].meta["title"]


def test_the_router_routes_by_the_knowledge_check_through_a_conditional_router(tmp_path):
    from scripted import Reply, ScriptedLM
    from seakr.probes import Probe
    from seakr.prompts import SHORT_INSTRUCTION

    dim = 16
    Probe("scripted", "L0:mlp", "short", [3.0] + [0.0] * (dim - 1), 0.0, [0.0] * dim, [1.0] * dim).save(
        tmp_path / "scripted-short.probe.json")

    def script(v):  # the probe reads feature 0: negative where the model knows
        known = v.question.startswith("Who directed")
        if SHORT_INSTRUCTION in v.prompt:
            return Reply("Steven Spielberg" if known else "French", state=[-2.0 if known else 2.0] + [0.0] * (dim - 1))
        return Reply("So the answer is French")

    router = SeaKRRouter(ScriptedLM(script, dim=dim), options={"gate": "probe", "gate_p": 0.5, "k": 5,
                                                               "probes": str(tmp_path)})
    routes = [{"condition": "{{route == 'answer'}}", "output": "{{answer}}", "output_name": "answer",
               "output_type": str},
              {"condition": "{{route == 'retrieve'}}", "output": "{{query}}", "output_name": "to_retrieve",
               "output_type": str}]
    pipe = Pipeline()
    pipe.add_component("check", router)
    pipe.add_component("route", ConditionalRouter(routes))
    for name in ("route", "answer", "query"):
        pipe.connect(f"check.{name}", f"route.{name}")
    known = pipe.run({"check": {"query": "Who directed Jaws?"}}, include_outputs_from={"check"})
    assert known["route"] == {"answer": "Steven Spielberg"} and known["check"]["p_correct"] > 0.5
    unknown = pipe.run({"check": {"query": "What nationality was Kubrick?"}}, include_outputs_from={"check"})
    assert unknown["route"] == {"to_retrieve": "What nationality was Kubrick?"}
    assert unknown["check"]["p_correct"] < 0.5 and unknown["check"]["level"] == 0.5


def test_the_router_refuses_a_model_without_fitted_self_knowledge(tmp_path):
    from scripted import Reply, ScriptedLM

    router = SeaKRRouter(ScriptedLM(lambda v: Reply("x")), options={"probes": str(tmp_path)})
    with pytest.raises(ValueError, match="knowledge check needs gate=check or gate=probe"):
        router.warm_up()
