"""SeaKR.from_config, the README's library entry: what it takes and what it refuses before the model loads."""

import re
import time

import pytest

from seakr import SeaKR
from seakr.search import Passage
from seakr.search.tantivy_engine import TantivyEngine

PASSAGES = [Passage("p1", "Stanley Kubrick", "Stanley Kubrick was an American film director."),
            Passage("p2", "2001: A Space Odyssey", "2001: A Space Odyssey is a 1968 film directed by Stanley Kubrick.")]


@pytest.mark.parametrize("kwargs,error,needle", [
    ({"index": 123}, TypeError, "index: expected an index folder, an http(s):// URL or a search engine, got int"),
    ({"model": 5}, TypeError, "model: expected a registry name"),
    ({"kk": 3}, ValueError, "unknown option(s) 'kk' (did you mean 'k'?)"),
    ({"confidence": 3}, ValueError, "unknown option(s) 'confidence'; its options: k, temperature, top_k, "),  # no hint
    # a model option's near name: "did you mean 'theta', an option of flare?"; the flag's --layer: no hint at all
    ({"thread": 2}, ValueError, "unknown option(s) 'thread' (did you mean 'threads'? how the model loads, not a method "
                                "option: --threads on the command line, threads at a grid's top, threads= in Python)"),
    ({"layer": 3}, ValueError, "'layer' (how the model loads, not a method option: --layer on the command line, layer "
                               "at a grid's top, state_layer= in Python)"),
    ({"marker": ""}, ValueError, "option marker"),
    ({"gate": "chek"}, ValueError, "option gate: one of"),
    # names as the field capitalises them had no suggestion, or a wrong one ("EigenScore": "hidden-score"?)
    ({"gate": "Probe"}, ValueError, "option gate: one of step, check, probe, auto, not 'Probe' (did you mean 'probe'?)"),
    ({"estimator": "EigenScore"}, ValueError, "option estimator: one of eigen, "),
    ({"check_estimator": "MaxEntropy"}, ValueError, "not 'MaxEntropy' (did you mean 'max-entropy'?)"),
    ({"index": "/nonexistent/idx"}, Exception, "no index here"),
    ({"probes": "/nonexistent/probes"}, ValueError, "probes=/nonexistent/probes: no such directory"),  # after the load
    ({"model": "smollm2-135m", "max_new_tokens": 8192}, ValueError,  # was after the load
     "option max_new_tokens: 8192 leaves no room for a prompt in the model's 8192-token context; lower it"),
    ({"model": "smollm2-135m", "answer_tokens": 9000}, ValueError,  # the forced answer's budget, an option now
     "option answer_tokens: 9000 leaves no room for a prompt in the model's 8192-token context; lower it"),
    ({"answer_tokens": 0}, ValueError, "answer_tokens"),
])
def test_bad_arguments_are_refused_before_the_model_loads(kwargs, error, needle, monkeypatch):
    import seakr.methods.base

    def no_load(*a, **k):
        raise AssertionError("the model was loaded before the arguments were checked")

    monkeypatch.setattr(seakr.methods.base, "load_model", no_load)
    with pytest.raises(error, match=re.escape(needle)):
        SeaKR.from_config(**kwargs)


@pytest.mark.slow
def test_an_index_as_a_path_or_an_engine_answers(tmp_path):
    engine = TantivyEngine.build(PASSAGES, tmp_path / "idx")
    for index in (tmp_path / "idx", engine):  # a pathlib.Path failed with AttributeError: no 'startswith'
        # one short step that retrieves (what differs between the two is only how the index is handed over)
        qa = SeaKR.from_config(model="smollm2-135m", index=index, gate="step", delta=-1e9, k=2, max_steps=1,
                               max_new_tokens=8, n_shot=1, reasoning="rationales")
        t = time.time()
        ans = qa.answer("What nationality was the director of 2001: A Space Odyssey?")
        assert isinstance(ans.answer, str) and ans.trace["totals"]["retrievals"] >= 1, time.time() - t
        assert isinstance(qa.engine, TantivyEngine)


def test_the_building_blocks_take_paths_and_dicts_and_refuse_other_types(tmp_path):
    """open_engine, load_model and a method's constructor: what a Python caller naturally hands them."""
    from scripted import Reply, ScriptedLM
    from seakr import load_model, open_engine
    from seakr.methods.baselines import IRCoT
    from seakr.methods.config import MethodConfig

    TantivyEngine.build(PASSAGES, tmp_path / "idx")
    assert open_engine(tmp_path / "idx").count() == 2  # a Path: it was an AttributeError
    with pytest.raises(TypeError, match="index: expected an index folder or an http"):
        open_engine(5)
    with pytest.raises(TypeError, match="model: expected a registry name"):
        load_model(5)
    lm = ScriptedLM(lambda v: Reply("Kubrick was American. So the answer is American."))
    ircot = IRCoT(lm, tmp_path / "idx", config={"max_steps": 1})  # an index folder and a dict of options
    assert isinstance(ircot.engine, TantivyEngine) and ircot.config.max_steps == 1
    assert ircot.answer("What nationality was Kubrick?").answer == "American"
    with pytest.raises(TypeError, match="index: expected an index folder, an http.* got float"):
        IRCoT(lm, 3.0)
    with pytest.raises(TypeError, match="config: expected SeaKRConfig or a dict of options, got MethodConfig"):
        SeaKR(lm, None, config=MethodConfig())
    with pytest.raises(ValueError, match=r"unknown option\(s\) 'kk'"):
        IRCoT(lm, None, config={"kk": 1})
    for lm in ("qwen2.5-coder-0.5b", None):  # an AttributeError ('str' object has no attribute 'info')
        with pytest.raises(TypeError, match=f"lm: expected a language model .* got {type(lm).__name__}"):
            IRCoT(lm, None)
    with pytest.raises(TypeError, match=re.escape("load one by name with seakr.models.load_model('qwen2.5-coder-0.5b')")):
        SeaKR("qwen2.5-coder-0.5b", None)


def test_an_engine_of_ones_own_needs_only_search_and_what_it_returns_is_checked():
    """The README promises any object with search(query, k) -> list[Passage]: one without metadata() failed
    with AttributeError; tuples reached the method as "'tuple' object has no attribute 'id'"."""
    from scripted import Reply, ScriptedLM
    from seakr.methods.baselines import IRCoT

    class Mine:
        def __init__(self, hits):
            self.hits, self.asked = hits, []

        def search(self, query, k):
            self.asked.append(k)
            return self.hits

    lm = ScriptedLM(lambda v: Reply("Kubrick was American. So the answer is American."))
    repeated = Mine([PASSAGES[0], PASSAGES[0], PASSAGES[1], Passage("p3", "x", "more than k")])
    ans = IRCoT(lm, repeated, config={"max_steps": 1, "n_candidates": 2}).answer("What nationality was Kubrick?")
    assert ans.answer == "American" and ans.to_dict()["config"]["engine"]["engine"] == "Mine"
    hits = [e for e in ans.trace["events"] if e["type"] == "retrieval"][0]["hits"]
    assert [h["id"] for h in hits] == ["p1", "p2"]  # each passage once, at most k
    class Lazy:  # a search() that yields its hits: read as the list it makes
        def search(self, query, k):
            yield from PASSAGES[:k]

    ans = IRCoT(lm, Lazy(), config={"max_steps": 1, "n_candidates": 2}).answer("What nationality was Kubrick?")
    assert [h["id"] for h in [e for e in ans.trace["events"] if e["type"] == "retrieval"][0]["hits"]] == ["p1", "p2"]
    for bad, needle in (([("p1", "text")], "search engine Mine: search() returned passage 0: expected a seakr.search.Passage, got tuple"),
                        ({"p1": PASSAGES[0]}, "search engine Mine: search() returned dict, expected a list"),
                        ([_scored(None)], "passage score: expected a number, got None"),  # set after it was made
                        ([_scored(float("inf"))], "passage score: expected a number, got inf")):
        with pytest.raises((TypeError, ValueError), match=re.escape(needle)):
            IRCoT(lm, Mine(bad), config={"max_steps": 1}).answer("What nationality was Kubrick?")
    # an id of no visible text (it names the passage in traces and rows) is no passage's, wherever it is made
    with pytest.raises(ValueError, match=re.escape("passage id: '\\u200b' has no visible character")):
        Passage("\u200b", "t", "x", 1.0)
    # FAISS's scores are float32 ("expected a finite number"), taken as floats; a passage of no visible text is
    # none (it was kept and put into the prompt empty), as an index's intake skips it
    import numpy as np

    mixed = Mine([Passage("p0", "Empty", "\x00 ", 3.0), Passage("p1", PASSAGES[0].title, PASSAGES[0].text, np.float32(2.5))])
    ans = IRCoT(lm, mixed, config={"max_steps": 1, "n_candidates": 2}).answer("What nationality was Kubrick?")
    (hit,) = [e for e in ans.trace["events"] if e["type"] == "retrieval"][0]["hits"]
    assert hit == {"id": "p1", "title": PASSAGES[0].title, "score": 2.5} and type(ans.trace["steps"][0]["kept"]["score"]) is float
    assert type(mixed.hits[1].score) is float  # the schema holds a NumPy score as Python's float


def _scored(score) -> Passage:
    """A passage whose score an engine of one's own set after making it (which the schema did not see)."""
    p = Passage("p1", "t", "x")
    p.score = score
    return p


def test_an_engine_whose_search_cannot_take_query_and_k_is_refused_before_the_model_loads(monkeypatch):
    """``search(self, query)`` failed at the first retrieval, after the model had loaded, as "search() takes 2
    positional arguments but 3 were given"; a keyword-only ``k`` likewise. Both doors that take an engine say it."""
    from scripted import Reply, ScriptedLM
    from seakr.methods.baselines import IRCoT

    class QueryOnly:
        def search(self, query):
            return PASSAGES

    class KeywordK:
        def search(self, query, *, k=3):
            return PASSAGES[:k]

    class Flexible:  # other names and extra keywords are fine: seakr calls search(query, k)
        def search(self, q, n=3, **extra):
            return PASSAGES[:n]

    monkeypatch.setattr("seakr.methods.base.load_model", lambda *a, **k: pytest.fail("the model loaded"))
    for engine, sig in ((QueryOnly(), "search(query)"), (KeywordK(), "search(query, *, k=3)")):
        needle = f"search engine {type(engine).__name__}: {sig} cannot be called as search(query, k)"
        with pytest.raises(TypeError, match=re.escape(needle)):
            SeaKR.from_config(model="smollm2-135m", index=engine)
        with pytest.raises(TypeError, match=re.escape(needle)):
            IRCoT(ScriptedLM(lambda v: Reply("x")), engine)
    lm = ScriptedLM(lambda v: Reply("Kubrick was American. So the answer is American."))
    ans = IRCoT(lm, Flexible(), config={"max_steps": 1, "n_candidates": 2}).answer("What nationality was Kubrick?")
    assert ans.answer == "American"


def test_every_method_has_the_same_library_door(monkeypatch):
    """``IRCoT.from_config`` (any method's) as ``SeaKR.from_config``: its own options checked before any load, an
    index of passages opened, a loaded model taken as it is."""
    import seakr.methods.base
    from scripted import Reply, ScriptedLM
    from seakr.methods import CoT, IRCoT

    monkeypatch.setattr(seakr.methods.base, "load_model", lambda *a, **k: pytest.fail("the model loaded"))
    with pytest.raises(ValueError, match=re.escape("unknown option(s) 'gaet' (did you mean 'gate', an option of seakr?)")):
        IRCoT.from_config(model="smollm2-135m", index=PASSAGES, gaet="probe")
    with pytest.raises(ValueError, match="option max_steps: expected a whole number in"):
        CoT.from_config(max_steps=0)
    lm = ScriptedLM(lambda v: Reply("Kubrick was American. So the answer is American."))
    qa = IRCoT.from_config(model=lm, index=PASSAGES, max_steps=1)
    assert isinstance(qa, IRCoT) and qa.lm is lm and qa.answer("What nationality was Kubrick?").answer == "American"


def test_a_model_already_loaded_is_taken_as_it_is(tiny_lm, monkeypatch):
    """Several methods over one loaded model: ``from_config(model=lm)`` was "expected a registry name, ... got
    HFLanguageModel". Taken as it is, its context bounds the options, and load options are refused for it."""
    import seakr.methods.base

    monkeypatch.setattr(seakr.methods.base, "load_model", lambda *a, **k: pytest.fail("a second model was loaded"))
    qa = SeaKR.from_config(model=tiny_lm, index=PASSAGES, k=2, max_steps=1, max_new_tokens=8, n_shot=0, answer_tokens=8)
    assert qa.lm is tiny_lm and isinstance(qa.answer("Who directed 2001?").answer, str)
    with pytest.raises(ValueError, match="threads: set when a model loads, and this model is loaded"):
        SeaKR.from_config(model=tiny_lm, index=PASSAGES, threads=1)
    with pytest.raises(ValueError, match="option max_new_tokens: 600 leaves no room for a prompt in the model's 512-token"):
        SeaKR.from_config(model=tiny_lm, index=PASSAGES, max_new_tokens=600)


def test_a_tap_given_for_a_method_that_reads_no_state_is_said(tmp_path, monkeypatch, capsys):
    """``--layer 3`` for IRCoT, or ``state_layer=3`` for SeaKR with a token-level estimator, was taken, recorded in
    the run's config and never read (neither reads a hidden state). Said once, at each door."""
    import seakr.methods.base
    from helpers import HOTPOT
    from scripted import Reply, ScriptedLM
    from seakr.eval.plan import EvalPlan, run_plan
    from seakr.eval.specs import ModelSpec, RunSpec

    lm = ScriptedLM(lambda v: Reply("So the answer is Paris."))
    monkeypatch.setattr(seakr.methods.base, "load_model", lambda *a, **k: lm)
    SeaKR.from_config(model="smollm2-135m", index=["Paris is in France."], state_layer=3, estimator="ln-entropy",
                      gate="step", rerank="self-aware", reasoning="self-aware", delta=0.0)
    assert "state_layer=3 is not read: seakr reads no hidden state here" in capsys.readouterr().err
    SeaKR.from_config(model="smollm2-135m", index=["Paris is in France."], state_layer=4, gate="step", delta=0.0)
    assert "state_layer" not in capsys.readouterr().err  # EigenScore reads it
    plan = EvalPlan(data=HOTPOT, out=str(tmp_path / "o"), limit=1, model=ModelSpec("smollm2-135m", layer=5,
                    state_source="residual"), runs=[RunSpec("cot"), RunSpec("seakr", {"gate": "step", "delta": 0.0})])
    run_plan(plan, lm, progress=False, say=lambda s: None)
    err = capsys.readouterr().err
    assert "--layer 5 and --state-source residual are not read: cot reads no hidden state here" in err
    assert "seakr reads no" not in err
