"""Each method driven through its branches by a scripted model (given texts, log-probs and states)
over a real tantivy index: SeaKR's retrieval decision, stop rules, re-rank and final pick; FLARE's
trigger; DRAGIN's RIND and QFS on hand-computed attention; capabilities checked at construction."""

import math

import numpy as np
import pytest

from scripted import Reply, ScriptedLM, eigen, engine
from seakr.methods import DRAGIN, FLARE, IRCoT, SeaKR
from seakr.methods.records import FinalAnswer
from seakr.methods.base import pick
from seakr.models.base import GENERATE, MissingCapability, STATES

Q = "What nationality was the director of 2001: A Space Odyssey?"
STEP1 = "The film was directed by Stanley Kubrick"
GUESS = "Kubrick was French"  # uncertain: its samples disagree
BEST = "Stanley Kubrick was an American film director, producer and screenwriter born in New York City, who later lived and worked in England for most of his long career"
PASSAGES = {"Stanley Kubrick": BEST, "Kubrick (crater)": "Kubrick is a small crater.", "Kubrick (band)": "Kubrick were a band."}
CERTAIN, UNSURE = 0.0, 3.0
DELTA = (eigen(CERTAIN) + eigen(UNSURE)) / 2


def kubrick_script(v):
    """The model's outputs as a function of what it sees (context passages, answer so far)."""
    if v.forced:  # "... So the answer is" -> the answer phrase
        return Reply("American", 0.1)
    if not v.answer and v.passages:  # final answer from the knowledge alone
        return Reply("He was American. So the answer is American.", 1.0)
    if not v.answer:
        return Reply(STEP1, CERTAIN)
    if v.answer.endswith(f"{STEP1}.") and v.passages:  # re-rank: the next step with one candidate
        if v.has("American"):
            return Reply("Kubrick was American", 0.2)
        return Reply("Kubrick was lunar", 2.0) if v.has("crater") else Reply("Kubrick was Dutch", 1.5)
    if v.answer.endswith(f"{STEP1}."):
        return Reply(GUESS, UNSURE, logprobs=[-0.01, -0.01, -3.0])  # "French" is a low-probability word
    return Reply("So the answer is American", CERTAIN)


@pytest.fixture
def kubrick(tmp_path):
    return engine(tmp_path, PASSAGES)


def seakr(lm, eng, **kw):
    return SeaKR(lm, eng, **{"delta": DELTA, "k": 5, **kw})


def test_retrieves_exactly_when_u_exceeds_delta_and_keeps_the_min_u_candidate(kubrick):
    a = seakr(ScriptedLM(kubrick_script), kubrick).answer(Q)
    steps = a.trace["steps"]
    assert [s["retrieved"] for s in steps] == [False, True, False]
    for s in steps:
        assert s["retrieved"] == (s["u"] > DELTA)
    st = steps[1]
    assert st["query"] == "Kubrick"  # "French" (p < keep_p) and stop words dropped, "Kubrick" kept
    order = next(e for e in a.trace["events"] if e["type"] == "retrieval")["hits"]
    assert order[0]["title"] != "Stanley Kubrick"  # BM25 puts the long passage lower ...
    us = [c["u"] for c in st["candidates"]]
    best = min(range(3), key=lambda j: us[j])
    assert st["candidates"][best]["chosen"] and st["candidates"][best]["title"] == "Stanley Kubrick"  # ... U picks it
    assert st["kept"]["title"] == "Stanley Kubrick" and st["text"] == "Kubrick was American"
    f = a.trace["final"]
    assert f["stop_reason"] == "answered" and f["choice"] == "rationale" and a.answer == "American"
    assert f["candidates"]["rationale"]["u"] < f["candidates"]["knowledge"]["u"]
    assert [p["title"] for p in f["passages"]] == ["Stanley Kubrick"]


def test_engine_rerank_ablation_scores_and_keeps_only_the_top_hit(kubrick):
    a = seakr(ScriptedLM(kubrick_script), kubrick, rerank="engine").answer(Q)
    st = a.trace["steps"][1]
    top = next(e for e in a.trace["events"] if e["type"] == "retrieval")["hits"][0]
    assert len(st["candidates"]) == 1 and st["kept"]["id"] == top["id"]


def test_always_retrieve_ablation(kubrick):
    a = seakr(ScriptedLM(kubrick_script), kubrick, retrieval="always").answer(Q)
    assert a.trace["steps"][0]["retrieved"] and a.trace["steps"][0]["u"] < DELTA


@pytest.mark.parametrize("case,expect", [
    ("max_passages", "max_passages"), ("max_steps", "max_steps"), ("repeated_query", "repeated_query"),
    ("no_new_passage", "no_new_passage"), ("empty_step", "empty_step")])
def test_each_stop_rule(tmp_path, case, expect):
    passages, kw, script = PASSAGES, {}, kubrick_script
    if case == "max_passages":
        kw = {"max_passages": 1}
    elif case == "max_steps":
        kw, script = {"max_steps": 2}, (lambda v: Reply(f"Step {len(v.answer)}", CERTAIN))
    elif case == "repeated_query":  # after the retrieval the model is as unsure as before: same query again
        script = lambda v: kubrick_script(v) if not v.answer.endswith("American.") else Reply(GUESS, UNSURE, [-0.01, -0.01, -3.0])  # noqa: E731
    elif case == "no_new_passage":  # one passage only: the second retrieval finds nothing new
        passages = {"Stanley Kubrick": BEST}
        script = lambda v: kubrick_script(v) if not v.answer.endswith("American.") else Reply("Kubrick directed films", UNSURE)  # noqa: E731
    elif case == "empty_step":
        kw, script = {"delta": math.inf}, (lambda v: Reply("" if not v.forced else "x"))
    a = seakr(ScriptedLM(script), engine(tmp_path, passages), **kw).answer(Q)
    assert a.trace["final"]["stop_reason"] == expect
    stops = [e for e in a.trace["events"] if e.get("what") == "stop"]
    assert [e["reason"] for e in stops] == [expect]


@pytest.mark.parametrize("method", ["ircot", "flare"])
@pytest.mark.parametrize("first,expect", [("", "empty_step"), ("So the answer is Paris.", "answered")])
def test_baselines_end_a_chain_the_way_seakr_does(tmp_path, method, first, expect):
    """An empty step ends the chain without joining it; a step with the answer is the last one."""
    eng = engine(tmp_path, {"Paris": "Paris is the capital of France."})
    cls = {"ircot": IRCoT, "flare": FLARE}[method]
    a = cls(ScriptedLM(lambda v: Reply("Paris" if v.forced else first)), eng).answer("Which city is the capital of France?")
    assert a.trace["final"]["stop_reason"] == expect
    assert [e["reason"] for e in a.trace["events"] if e.get("what") == "stop"] == [expect]
    assert len(a.trace["steps"]) == 1 and a.answer == "Paris"


@pytest.mark.parametrize("method", ["cot", "ircot", "flare", "seakr"])
def test_a_chain_ends_where_it_says_the_methods_own_marker(tmp_path, method):
    """With ``marker="The result is"`` the prompts end each demonstration with it, and the model says it: that step
    was not read as an answer (only "the answer is" was), so a chain ran on to ``max_steps`` past it and the answer
    was forced again. (SeaKR forces its rationale answer by design, after the steps without their answer.)"""
    from seakr.methods import METHODS

    eng = engine(tmp_path, {"Paris": "Paris is the capital of France."})
    forced = []

    def script(v):
        if v.answer.rstrip().endswith("The result is"):
            forced.append(v.answer)
            return Reply("Paris", CERTAIN)
        return Reply("France's capital is Paris. The result is Paris", CERTAIN)

    kw = {"delta": DELTA, "k": 5} if method == "seakr" else {}
    a = METHODS[method](ScriptedLM(script), eng, marker="The result is", max_steps=3, **kw).answer(
        "Which city is the capital of France?")
    assert a.answer == "Paris" and forced == ([] if method != "seakr" else ["France's capital is Paris. The result is"])
    assert len(a.trace["steps"]) == 1 and a.trace["final"]["stop_reason"] == "answered"


def test_a_question_pasted_from_a_console_is_asked_and_searched_without_its_escapes(tmp_path):
    """"\x1b[1mWhich\x1b[0m city ..." reached the prompt as it was, and IRCoT's first search looked for "1mWhich";
    a question of escapes alone was asked as an empty one."""
    eng = engine(tmp_path, {"Paris": "Paris is the capital of France."})
    seen = []

    def script(v):
        seen.append(v.question)
        return Reply("Paris" if v.forced else "So the answer is Paris")

    a = IRCoT(ScriptedLM(script), eng).answer("\x1b[1mWhich\x1b[0m city is the capital\x07 of France?")
    assert a.trace["steps"][0]["query"] == "Which city is the capital of France?"
    assert set(seen) == {"Which city is the capital of France?"} and a.answer == "Paris"
    with pytest.raises(ValueError, match=r"^question: empty \(no visible text\)$"):  # as at every door
        IRCoT(ScriptedLM(script), eng).answer("\x1b[1m\x1b[0m")


@pytest.mark.parametrize("r,k,want", [
    ({"answer": "American", "u": -5.0}, {"answer": "French", "u": -4.0}, "rationale"),
    ({"answer": "American", "u": -4.0}, {"answer": "French", "u": -5.0}, "knowledge"),
    ({"answer": "American", "u": -4.0}, {"answer": "French", "u": -4.0}, "knowledge"),  # tie -> knowledge
    ({"answer": "unknown", "u": -9.0}, {"answer": "French", "u": -1.0}, "knowledge"),  # unknown defers
    ({"answer": "American", "u": -1.0}, {"answer": "", "u": -9.0}, "rationale"),  # empty defers
    ({"answer": "American", "u": None}, {"answer": "French", "u": 2.0}, "knowledge"),  # None is +inf
])
def test_final_pick_rules(r, k, want):
    # the records as a trace file holds them: a missing U (null) loads as +inf
    assert pick(FinalAnswer.from_dict(r), FinalAnswer.from_dict(k)) == want


@pytest.mark.parametrize("rule,choice", [("rationales", "rationale"), ("knowledge", "knowledge")])
def test_reasoning_ablations_answer_from_one_source(kubrick, rule, choice):
    a = seakr(ScriptedLM(kubrick_script), kubrick, reasoning=rule).answer(Q)
    f = a.trace["final"]
    assert f["choice"] == choice and list(f["candidates"]) == [choice] and f["rule"] == rule


def simple_script(v):
    if v.forced:
        return Reply("Paris", 0.0)
    if not v.passages:
        return Reply("It might be Lyon. So the answer is Lyon.", UNSURE)
    return Reply("So the answer is Paris.", 0.1) if v.has("capital") else Reply("So the answer is Nice.", 2.0)


def test_simple_mode_retrieves_when_unsure_and_keeps_the_min_u_passage(tmp_path):
    eng = engine(tmp_path, {"Lyon": "Lyon is a city in France on the Rhone.",
                            "Paris": "Paris is the capital city of France, a long-established city on the Seine river in the north.",
                            "Nice": "Nice is a city in France."})
    a = seakr(ScriptedLM(simple_script), eng, mode="simple").answer("Which city is the capital of France?")
    st = a.trace["steps"][0]
    assert st["retrieved"] and st["u"] > DELTA and a.answer == "Paris"
    assert st["kept"]["title"] == "Paris" and a.trace["final"]["choice"] == "passage"
    certain = seakr(ScriptedLM(lambda v: Reply("So the answer is Paris.", CERTAIN)), eng, mode="simple")
    b = certain.answer("Which city is the capital of France?")
    assert not b.trace["steps"][0]["retrieved"] and b.trace["final"]["choice"] == "direct"
    assert b.trace["totals"]["retrievals"] == 0


def test_missing_capabilities_fail_at_construction_with_one_line(kubrick):
    bare = ScriptedLM(kubrick_script, capabilities=(GENERATE,))
    with pytest.raises(MissingCapability, match="method 'seakr'.* needs the model capability 'states'"):
        SeaKR(bare, kubrick, delta=0.0)
    with pytest.raises(MissingCapability, match="'next_token'"):
        SeaKR(ScriptedLM(kubrick_script, capabilities=(GENERATE, STATES)), kubrick, delta=0.0, estimator="prompt")
    with pytest.raises(MissingCapability, match="'attention'"):
        DRAGIN(bare, kubrick)
    with pytest.raises(MissingCapability, match="'chat'"):
        FLARE(bare, kubrick, prompt_style="chat")
    SeaKR(bare, kubrick, delta=0.0, estimator="perplexity")  # greedy-only estimators need no states
    FLARE(bare, kubrick)


# ---------------------------------------------------------------- FLARE
def flare_script(v):
    if v.passages:
        return Reply("So the answer is Stanley Kubrick.")
    return Reply("Jaws was directed by Spielberg", logprobs=[-0.01, -0.01, -0.01, math.log(0.05)])


def test_flare_triggers_below_theta_and_masks_the_uncertain_word(tmp_path):
    eng = engine(tmp_path, {"Jaws": "Jaws is a film directed by Steven Spielberg.", "Psycho": "Psycho is a film by Hitchcock."})
    a = FLARE(ScriptedLM(flare_script), eng, theta=0.2).answer("Who directed Jaws?")
    st = a.trace["steps"][0]
    assert st["retrieved"] and st["u"] == pytest.approx(0.95)  # 1 - the least token probability
    assert st["query"] == "Jaws directed"  # "Spielberg" (p=0.05 < theta) masked, "was"/"by" stop words
    assert st["text"] == "So the answer is Stanley Kubrick." and a.answer == "Stanley Kubrick"
    sure = FLARE(ScriptedLM(lambda v: Reply("So the answer is Spielberg.")), eng, theta=0.2).answer("Who directed Jaws?")
    assert not sure.trace["steps"][0]["retrieved"] and sure.trace["totals"]["retrievals"] == 0


# ---------------------------------------------------------------- DRAGIN
SENT = "Kubrick directed Jaws"
QUESTION = "Which director made Jaws and Psycho?"


def dragin_attention(text, n):
    if text == SENT:  # RIND: attention within the sentence (row i: what token i attends to)
        return np.array([[1.0, 0.0, 0.0], [0.6, 0.4, 0.0], [0.2, 0.3, 0.5]])
    # QFS over "question + sentence": the flagged word "Jaws" (token 8) is predicted at row 7
    a = np.full((n, n), 0.01)
    a[7, 1], a[7, 5], a[7, 2] = 0.5, 0.3, 0.05  # " director", " Psycho?", " made"
    return a


def dragin_script(v):
    if v.passages:
        return Reply("So the answer is Alfred Hitchcock.")
    return Reply(SENT, entropies=[1.0, 2.0, 3.0])


def test_dragin_rind_and_qfs_on_hand_computed_attention(tmp_path):
    eng = engine(tmp_path, {"Psycho": "Psycho is a film by the director Alfred Hitchcock.", "Jaws": "Jaws is a shark film."})
    m = DRAGIN(ScriptedLM(dragin_script, attention=dragin_attention), eng, tau=2.0, keep_top_k=2)
    a = m.answer(QUESTION)
    st = a.trace["steps"][0]
    # received attention: Kubrick max(0.6, 0.2)=0.6, directed 0.3, Jaws (last: its own) 0.5 -> /1.4
    # RIND = share x entropy x 3 words: 1.2857, 1.2857, 3.2143; only "Jaws" exceeds tau=2
    assert st["u"] == pytest.approx(0.5 / 1.4 * 3.0 * 3)
    # QFS: the question's content words most attended from "Jaws", top 2, in text order
    assert st["retrieved"] and st["query"] == "director Psycho"
    assert a.answer == "Alfred Hitchcock"
    calm = DRAGIN(ScriptedLM(dragin_script, attention=dragin_attention), eng, tau=4.0).answer(QUESTION)
    assert not calm.trace["steps"][0]["retrieved"]


@pytest.mark.parametrize("options,want", [({}, 32), ({"answer_tokens": 5}, 5)])
def test_a_forced_answer_has_the_budget_its_option_sets(tmp_path, options, want):
    """The phrase forced after "So the answer is" had a fixed 32 tokens (a list answer was cut short); it is the
    option ``answer_tokens`` now, and only the forced call reads it."""
    class Recording(ScriptedLM):
        def generate(self, prompts, config, *, prefix=None):
            self.budgets = getattr(self, "budgets", []) + [(parse(p).forced, config.max_new_tokens) for p in prompts]
            return super().generate(prompts, config, prefix=prefix)

    from scripted import parse

    lm = Recording(lambda v: Reply("Paris" if v.forced else "The capital of France is a city"))
    a = IRCoT(lm, engine(tmp_path, {"Paris": "Paris is the capital of France."}), max_steps=1, **options).answer("Which city?")
    assert a.answer == "Paris" and (True, want) in lm.budgets
    assert all(n == 100 for forced, n in lm.budgets if not forced)


def test_the_hidden_score_asks_for_the_greedy_trail_and_no_samples(tmp_path):
    """estimator="hidden-score" (LLM-Check's one-response score) reads the states of the greedy row's tokens:
    every scored call asks for that trail and draws no samples; the method needs the model's states."""
    from scripted import parse

    class Recording(ScriptedLM):
        def generate(self, prompts, config, *, prefix=None):
            self.configs = getattr(self, "configs", []) + [(parse(prompts[0]).forced, config)]
            return super().generate(prompts, config, prefix=prefix)

    lm = Recording(lambda v: Reply("Paris" if v.forced else "Paris is the capital. So the answer is Paris."))
    m = SeaKR(lm, engine(tmp_path, {"Paris": "Paris is the capital of France."}), estimator="hidden-score",
              delta=0.0, gate="step", rerank="self-aware", reasoning="self-aware")
    assert STATES in m.requires()
    m.answer("Which city is the capital of France?")
    assert lm.configs and all(c.greedy_trail and c.n == 0 and not c.with_states for _, c in lm.configs)


@pytest.mark.parametrize("method,options", [("cot", {}), ("seakr", {"gate": "step", "retrieval": "always",
                                                                   "rerank": "engine", "reasoning": "knowledge"})])
def test_a_forced_answer_records_its_reasoning_once(tmp_path, method, options):
    """A whole answer whose reasoning lacks the marker is forced after that reasoning: the answer's text is the
    reasoning, the marker and the phrase, each once (the forced call's head already holds the reasoning)."""
    from seakr.methods import METHODS

    eng = engine(tmp_path, {"Paris": "Paris is the capital of France."})
    lm = ScriptedLM(lambda v: Reply(" Paris" if v.forced else "The capital of France is Paris."))
    a = METHODS[method](lm, eng, max_steps=1, **options).answer("Which city is the capital of France?")
    final = a.trace["final"]
    text = final["candidates"][final["choice"]]["text"]
    assert a.answer == "Paris" and text.split() == "The capital of France is Paris. So the answer is Paris".split()


class FinalFlags(ScriptedLM):
    """The scripted model, recording whether each prompt's call was marked a final answer."""

    def __init__(self, script):
        super().__init__(script, attention=lambda text, n: np.full((n, n), 1.0 / n))  # DRAGIN reads attention
        self.final = []

    def generate(self, prompts, config, *, prefix=None):
        self.final += [config.final] * len(prompts)
        return super().generate(prompts, config, prefix=prefix)


#: The calls that return a method's answer; unscored, no later decision reads their text or log-probs (the model may
#: draft them).
FINAL_PURPOSES = {"final/knowledge", "final/knowledge/forced", "final/rationale", "final/steps", "final/forced",
                  "cot", "cot/forced", "single", "single/forced"}


@pytest.mark.parametrize("method, options", [(SeaKR, {"delta": DELTA, "k": 5, "reasoning": "self-aware"}),
                                             (SeaKR, {"delta": DELTA, "k": 5, "reasoning": "knowledge",
                                                      "rerank": "engine"}),
                                             (SeaKR, {"delta": DELTA, "k": 5, "reasoning": "rationales"}),
                                             (SeaKR, {"delta": DELTA, "k": 5, "reasoning": "steps"}),
                                             (IRCoT, {}), (FLARE, {}), (DRAGIN, {}), ("cot", {}), ("single", {})])
def test_only_the_answers_a_method_returns_are_final_calls(kubrick, method, options):
    """A step, a pseudo-step, a re-rank candidate or a check feeds a later decision (a query, a U, a choice), so its
    call is never marked final; every unscored answer the method returns is (here forced: no step says it)."""
    from seakr.methods import METHODS

    lm = FinalFlags(lambda v: Reply("American", 0.1) if v.forced else Reply(STEP1, CERTAIN))  # forced at the end
    a = (METHODS[method] if isinstance(method, str) else method)(lm, kubrick, **options).answer(Q)
    calls = [(e["purpose"], e["u"] is None) for e in a.trace["events"] if e["type"] == "model_call"]
    assert len(calls) == len(lm.final) and any(lm.final) == (options.get("reasoning") != "self-aware")
    # an answer whose U a choice reads (reasoning=self-aware's pair) is not final: its log-probs feed that choice
    assert lm.final == [p in FINAL_PURPOSES and unscored for p, unscored in calls]
    # the trace says whether the final rule compared scores: the printed final line reads it
    assert a.trace["final"]["scored"] == (options.get("reasoning") == "self-aware")
