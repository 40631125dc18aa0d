"""Every method and ablation end to end on the real smollm2-135m and a tantivy index of our fixture questions."""

import json
import math
import re

import pytest

from helpers import HOTPOT
from seakr.methods import METHODS, SeaKR, build_method
from seakr.search.corpora import read_corpus
from seakr.search.tantivy_engine import TantivyEngine

pytestmark = pytest.mark.slow
#: Short chains: two demonstrations instead of the set's all, three samples and 16-token steps (a chain still
#: takes two or three steps, each retrieving and re-ranking at delta = -inf): ~275 s to ~180 s on an AVX2 CPU.
FAST = dict(k=3, max_new_tokens=16, max_steps=3, max_passages=3, n_shot=2)


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    return TantivyEngine.build(read_corpus(HOTPOT), tmp_path_factory.mktemp("idx") / "hp")


@pytest.fixture(scope="module")
def question():
    return json.load(open(HOTPOT))[0]["question"]


@pytest.fixture(scope="module")
def seakr_answer(smol, engine, question):
    """SeaKR's answer to ``question`` at ``delta`` with ``opts`` over FAST, each configuration run once a module:
    one answer is 15-30 s of float32 decoding on an AVX2 CPU, and several tests read the same run (the
    answers are deterministic: the reasoning-ablation test below relies on that across runs)."""
    done = {}

    def run(delta, **opts):
        key = (delta, tuple(sorted(opts.items())))
        if key not in done:
            done[key] = SeaKR(smol, engine, delta=delta, **FAST, **opts).answer(question)
        return done[key]
    return run


def check_trace(ans):
    t = ans.trace
    assert set(t) >= {"question", "method", "steps", "final", "events", "totals"}
    assert t["totals"]["model_calls"] == sum(e["type"] == "model_call" for e in t["events"]) > 0
    assert t["totals"]["retrievals"] == sum(e["type"] == "retrieval" for e in t["events"])
    assert t["totals"]["seconds"]["total"] > 0
    json.dumps(ans.to_dict(), allow_nan=False)  # JSON-safe, no NaN/inf
    assert isinstance(ans.answer, str)


def test_delta_plus_inf_never_retrieves(smol, engine, question):
    a = SeaKR(smol, engine, delta=math.inf, **FAST).answer(question)
    check_trace(a)
    assert a.trace["totals"]["retrievals"] == 0
    assert all(not s["retrieved"] for s in a.trace["steps"])


def test_delta_minus_inf_retrieves_every_step(seakr_answer):
    a = seakr_answer(-math.inf)
    check_trace(a)
    steps = a.trace["steps"]
    assert steps and all(s["retrieved"] or s["note"] for s in steps)
    assert a.trace["totals"]["retrievals"] == sum(1 for s in steps if s["query"])


def test_rerank_keeps_min_u_candidate_and_final_is_min_u(seakr_answer):
    a = seakr_answer(-math.inf)
    for s in a.trace["steps"]:
        if s["candidates"]:
            us = [math.inf if c["u"] is None else c["u"] for c in s["candidates"]]
            chosen = [c for c in s["candidates"] if c["chosen"]]
            assert len(chosen) == 1 and (math.inf if chosen[0]["u"] is None else chosen[0]["u"]) == min(us)
            assert s["kept"]["id"] == chosen[0]["id"] and s["text"] == chosen[0]["step"]
    f = a.trace["final"]
    r, k = f["candidates"]["rationale"], f["candidates"]["knowledge"]
    ru = math.inf if r["u"] is None else r["u"]
    ku = math.inf if k["u"] is None else k["u"]
    unknown = lambda x: not x or "unknown" in x.lower()
    if not unknown(r["answer"]) and not unknown(k["answer"]):
        assert f["choice"] == ("rationale" if ru < ku else "knowledge")
    assert a.answer == (r if f["choice"] == "rationale" else k)["answer"]


@pytest.mark.parametrize("name", [m for m in METHODS if m != "seakr"])
def test_every_baseline_runs(smol, engine, question, name):
    a = build_method(name, smol, engine, **FAST).answer(question)
    check_trace(a)
    if name in ("single", "ircot"):
        assert a.trace["totals"]["retrievals"] >= 1
    if name == "cot":
        assert a.trace["totals"]["retrievals"] == 0


def test_a_chain_reads_its_own_last_prompts_and_answers_as_without_them(smol, engine, question):
    """The recent-prompt cache through whole answers: each chain call after the first is served more of its
    prompt than the demonstrations, and the answer, its steps and its calls are those of the cache off; the same
    question asked again gives the same trace, whatever came before it."""
    from seakr.models.prefill import RecentPrompts

    def calls(a):
        return [e for e in a.trace["events"] if e["type"] == "model_call"]

    def run(size):
        smol.prefill.clear()
        smol.prefill.recent = RecentPrompts(size)
        try:
            return build_method("ircot", smol, engine, **FAST).answer(question)
        finally:
            smol.prefill.recent = RecentPrompts(4)

    off, on = run(0), run(4)
    again = build_method("ircot", smol, engine, **FAST).answer(question)
    assert len(calls(on)) >= 2
    assert all(b["cached_prefix_tokens"] > a["cached_prefix_tokens"] for a, b in zip(calls(off)[1:], calls(on)[1:]))
    for a in (on, again):
        assert (a.answer, a.trace["steps"]) == (off.answer, off.trace["steps"])
        assert [(c["greedy"], c["prompt_tokens"]) for c in calls(a)] == [(c["greedy"], c["prompt_tokens"]) for c in calls(off)]
    assert [c["cached_prefix_tokens"] for c in calls(again)] == [c["cached_prefix_tokens"] for c in calls(on)]


#: Each estimator once on the real model, each with one of the stage switches (the switches' control flow is
#: pinned exactly by the scripted model in test_control_flow.py; here they meet real samples and states). At
#: delta = -inf every step retrieves, so each estimator also scores real re-rank candidates, which at delta 0
#: one whose U sits below 0 on this question (energy) never reached.
ABLATIONS = [
    {"estimator": "perplexity", "rerank": "engine"}, {"estimator": "multi-perplexity", "retrieval": "always"},
    {"estimator": "ln-entropy", "mode": "simple"}, {"estimator": "energy"}, {"estimator": "prompt"},
    {"estimator": "eigen-inside"},
]


@pytest.mark.parametrize("opts", ABLATIONS)
def test_every_estimator_and_stage_switch_runs(seakr_answer, opts):
    a = seakr_answer(-math.inf, **opts)
    check_trace(a)
    assert a.trace["totals"]["retrievals"] >= 1
    if opts.get("rerank") == "engine":
        assert all(len(s["candidates"]) == 1 for s in a.trace["steps"] if s["retrieved"])
    elif opts.get("mode") != "simple":
        scored = [c for s in a.trace["steps"] for c in s["candidates"]]
        assert len(scored) > 1 and any(c["u"] is not None for c in scored)


def test_the_reasoning_ablations_return_the_full_runs_candidate(seakr_answer):
    """What lets ``compare`` read the reasoning ablations off a self-aware run's rows
    (``compare.final_stage_table``): the stages before the final one do not depend on it, so each
    ablation returns exactly the candidate of its name that the full run generated (the full run here
    retrieves at every step, so the stages before the final one hold retrievals and re-ranks)."""
    full = seakr_answer(-math.inf).trace["final"]["candidates"]
    assert seakr_answer(-math.inf).trace["totals"]["retrievals"] >= 1
    for rule, name in (("rationales", "rationale"), ("knowledge", "knowledge")):
        a = seakr_answer(-math.inf, reasoning=rule)
        assert a.trace["final"]["choice"] == name
        assert a.answer == full[name]["answer"]


def test_unknown_options_are_clear_errors(smol):
    with pytest.raises(ValueError, match="unknown option"):
        SeaKR(smol, None, delta=0.0, tempature=2)
    with pytest.raises(ValueError, match="option rerank: one of"):
        SeaKR(smol, None, delta=0.0, rerank="random")
    with pytest.raises(ValueError, match="unknown method"):
        build_method("selfrag", smol)
    with pytest.raises(ValueError, match=re.escape("unknown method 'SeaKR' (did you mean 'seakr'?)")):
        build_method("SeaKR", smol)
