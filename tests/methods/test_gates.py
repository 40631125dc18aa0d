"""SeaKR driven by fitted self-knowledge, through the scripted model: the knowledge check (gate=check:
its U through a calibration map; gate=probe: a probe on its answer's state) answers at once exactly when
P(correct) reaches gate_p and otherwise retrieves at every step; the final choice follows each form's
calibrated probability (reasoning=calibrated) or probe (reasoning=probe), not the raw U."""

import json

import numpy as np
import pytest

from scripted import Reply, ScriptedLM, eigen, engine
from seakr.methods import SeaKR
from seakr.probes import Calibration, Probe
from seakr.prompts import SHORT_INSTRUCTION

KNOWN, UNKNOWN = "Who directed the film Jaws?", "What nationality was the director of 2001: A Space Odyssey?"
CERTAIN, UNSURE = 0.0, 3.0
PASSAGES = {"Stanley Kubrick": "Stanley Kubrick was an American film director.",
            "Kubrick (crater)": "Kubrick is a small crater."}
DIM = 16


def state(wrong: bool) -> list[float]:
    return [2.0 if wrong else -2.0] + [0.0] * (DIM - 1)  # the probes below read feature 0


def script(final_states=(True, False)):
    def run(v):
        if SHORT_INSTRUCTION in v.prompt:  # the knowledge check
            known = v.question.startswith("Who directed")
            return Reply("Steven Spielberg" if known else "French", CERTAIN if known else UNSURE, state=state(not known))
        if v.forced:  # the rationale-based final answer: low raw U
            return Reply("French", 0.05, state=state(final_states[0]))
        if not v.answer and v.passages:  # the knowledge-based final answer: higher raw U
            return Reply("He was American. So the answer is American.", 1.0, state=state(final_states[1]))
        if not v.answer:
            return Reply("The film was directed by Stanley Kubrick", CERTAIN)
        return Reply("So the answer is French", CERTAIN)
    return run


def write_bank(folder, final_p=(0.2, 0.6)):
    """Fitted files for the scripted model: the short form's map and probe, and both final forms'."""
    lo, hi = eigen(CERTAIN, k=5, dim=DIM, text="Steven Spielberg"), eigen(UNSURE, k=5, dim=DIM, text="French")
    Calibration("short", "eigen", "isotonic", x=[lo, hi], y=[0.9, 0.1]).save(folder / "scripted-short-eigen.calibration.json")
    for form, p in zip(("final-rationale", "final-knowledge"), final_p):
        Calibration(form, "eigen", "platt", a=0.0, b=float(np.log(p / (1 - p)))).save(
            folder / f"scripted-{form}-eigen.calibration.json")
    for form in ("short", "final-rationale", "final-knowledge"):
        Probe("scripted", "L0:mlp", form, [3.0] + [0.0] * (DIM - 1), 0.0, [0.0] * DIM, [1.0] * DIM).save(
            folder / f"scripted-{form}.probe.json")
    return str(folder)


@pytest.fixture
def idx(tmp_path):
    return engine(tmp_path / "idx", PASSAGES)


def run(tmp_path, idx, question, **kw):
    lm = ScriptedLM(script(kw.pop("final_states", (True, False))), dim=DIM)
    m = SeaKR(lm, idx, **{"k": 5, "delta": 100.0, "probes": write_bank(tmp_path, kw.pop("final_p", (0.2, 0.6))), **kw})
    return m, lm, m.answer(question)


@pytest.mark.parametrize("gate", ["check", "probe"])
def test_a_known_answer_is_given_at_once_without_retrieval(tmp_path, idx, gate):
    m, lm, a = run(tmp_path, idx, KNOWN, gate=gate, gate_p=0.5)
    assert a.answer == "Steven Spielberg" and a.trace["final"]["choice"] == "check"
    assert len(lm.calls) == 1 and a.trace["totals"]["retrievals"] == 0
    assert a.trace["final"]["candidates"]["check"]["p"] > 0.5
    assert "check: 'Steven Spielberg'" in a.summary() and "answered at once" in a.summary()


@pytest.mark.parametrize("gate", ["check", "probe"])
def test_an_unknown_answer_retrieves_at_every_step_though_delta_says_never(tmp_path, idx, gate):
    m, lm, a = run(tmp_path, idx, UNKNOWN, gate=gate, gate_p=0.5)
    assert a.trace["final"]["choice"] != "check"
    assert a.trace["steps"] and all(s["retrieved"] for s in a.trace["steps"][:1])
    assert a.trace["totals"]["retrievals"] >= 1
    assert not a.trace["final"]["candidates"]["check"]["sure"] and "-> retrieve" in a.summary()


@pytest.mark.parametrize("gate", ["check", "probe"])
@pytest.mark.parametrize("rerank", ["self-aware", "engine"])
def test_simple_mode_gated_by_the_check_answers_from_memory_or_from_one_passage(tmp_path, idx, gate, rerank):
    """Simple QA with a knowledge check as its gate: the check's closed-book answer where it is sure (one call, no
    search), else one search with the question and the kept passage's answer, the check's answer beside it. Only
    the paper's re-rank draws samples for the passages' answers; no direct answer is asked beside the check."""
    m, lm, a = run(tmp_path, idx, KNOWN, gate=gate, gate_p=0.5, mode="simple", rerank=rerank)
    assert a.answer == "Steven Spielberg" and a.trace["final"]["choice"] == "check"
    assert len(lm.calls) == 1 and a.trace["totals"]["retrievals"] == 0
    m, lm, b = run(tmp_path, idx, UNKNOWN, gate=gate, gate_p=0.5, mode="simple", rerank=rerank)
    final, step = b.trace["final"], b.trace["steps"][0]
    assert final["choice"] == "passage" and set(final["candidates"]) == {"check", "passage"}
    assert step["retrieved"] and step["query"] == UNKNOWN and step["threshold"] is None
    calls = [e for e in b.trace["events"] if e["type"] == "model_call"]
    assert [e["purpose"] for e in calls][0] == "check" and not any(e["purpose"] == "direct" for e in calls)
    answered = [e for e in calls if e["purpose"].startswith("rerank")]
    assert answered and all((e["samples"] > 0) == (rerank == "self-aware") for e in answered)
    assert len(step["candidates"]) == 1 or rerank == "self-aware"


@pytest.mark.parametrize("gate", ["check", "probe"])
def test_a_check_sure_of_an_abstention_retrieves(tmp_path, idx, gate):
    """A check that says "I don't know" with every sign of certainty (low U, a "known" state) answered with it at
    once: only the word "unknown" was read as no answer."""
    base = script()

    def abstains(v):
        if SHORT_INSTRUCTION in v.prompt:
            return Reply("I don't know.", CERTAIN, state=state(False))
        return base(v)

    m = SeaKR(ScriptedLM(abstains, dim=DIM), idx, k=5, delta=100.0, gate=gate, gate_p=0.5, probes=write_bank(tmp_path))
    a = m.answer(KNOWN)
    check = a.trace["final"]["candidates"]["check"]
    assert check["p"] >= 0.5 and not check["sure"] and a.trace["final"]["choice"] != "check"
    assert a.trace["totals"]["retrievals"] >= 1


@pytest.mark.parametrize("gate", ["check", "probe"])
def test_past_a_failed_check_the_pseudo_step_draws_no_samples(tmp_path, idx, gate):
    # every step retrieves after the check found the model unsure: the step's U would decide nothing
    _, _, a = run(tmp_path, idx, UNKNOWN, gate=gate, gate_p=0.5)
    calls = [e for e in a.trace["events"] if e["type"] == "model_call"]
    pseudo = [e for e in calls if e["purpose"] == "pseudo-step"]
    assert pseudo and all(e["samples"] == 0 and e["u"] is None for e in pseudo)
    assert all(s["retrieved"] and s["threshold"] is None for s in a.trace["steps"][:1])
    said = [e for e in a.trace["events"] if e.get("what") == "retrieve" and e.get("step", -1) >= 0]
    assert said and all(e["rule"] == f"gate={gate}" and e["delta"] is None for e in said)
    # the paper's gate still reads the pseudo-step's U, from its k samples
    _, _, paper = run(tmp_path, idx, UNKNOWN, gate="step", delta=-100.0)
    assert all(e["samples"] == 5 and e["u"] is not None
               for e in paper.trace["events"] if e["type"] == "model_call" and e["purpose"] == "pseudo-step")


@pytest.mark.parametrize("gate", ["check", "probe"])
def test_the_gate_crosses_exactly_at_its_threshold(tmp_path, idx, gate):
    _, _, a = run(tmp_path, idx, KNOWN, gate=gate, gate_p=0.5)
    p = a.trace["final"]["candidates"]["check"]["p"]
    below = run(tmp_path, idx, KNOWN, gate=gate, gate_p=p)[2]  # P(correct) >= gate_p: answers at once
    above = run(tmp_path, idx, KNOWN, gate=gate, gate_p=min(1.0, p + 1e-9))[2]
    assert below.trace["final"]["choice"] == "check" and below.trace["totals"]["retrievals"] == 0
    gate = next(e for e in above.trace["events"] if e.get("type") == "decision" and e.get("step") == -1)
    assert gate["what"] == "retrieve" and above.trace["totals"]["retrievals"] >= 1  # the chain ran past the check


def test_calibrated_choice_compares_probabilities_not_raw_u(tmp_path, idx):
    _, _, raw = run(tmp_path, idx, UNKNOWN, delta=-100.0, gate="step", reasoning="self-aware")  # the paper's rule: the lower raw U (the rationale answer)
    assert raw.answer == "French"
    _, _, cal = run(tmp_path, idx, UNKNOWN, reasoning="calibrated", final_p=(0.2, 0.6), delta=-100.0)
    assert cal.answer == "American" and cal.trace["final"]["choice"] == "knowledge"
    cands = cal.trace["final"]["candidates"]
    assert cands["rationale"]["p"] == pytest.approx(0.2) and cands["knowledge"]["p"] == pytest.approx(0.6)
    _, _, flip = run(tmp_path, idx, UNKNOWN, reasoning="calibrated", final_p=(0.7, 0.6), delta=-100.0)
    assert flip.answer == "French"


def test_past_a_check_its_answer_joins_the_final_choice_by_its_probability(tmp_path, idx):
    """A check below gate_p sends the question to the chain, but its closed-book answer is still one the chain
    holds: with final_check the final choice takes it where its P(correct) beats both chain answers', and never
    without it or where it is less probable than one of them."""
    _, _, a = run(tmp_path, idx, UNKNOWN, gate="check", gate_p=0.5, reasoning="calibrated", final_p=(0.05, 0.08),
                  final_check=True)
    assert a.trace["totals"]["retrievals"] >= 1 and a.trace["final"]["choice"] == "check" and a.answer == "French"
    chose = [e for e in a.trace["events"] if e.get("what") == "final-choice"][-1]
    assert chose["p_check"] == pytest.approx(0.1) and chose["p_knowledge"] == pytest.approx(0.08)
    _, _, off = run(tmp_path, idx, UNKNOWN, gate="check", gate_p=0.5, reasoning="calibrated", final_p=(0.05, 0.08),
                    final_check=False)
    assert off.trace["final"]["choice"] == "knowledge" and "check" in off.trace["final"]["candidates"]
    _, _, less = run(tmp_path, idx, UNKNOWN, gate="check", gate_p=0.5, reasoning="calibrated", final_p=(0.05, 0.3),
                     final_check=True)
    assert less.trace["final"]["choice"] == "knowledge"


def test_query_from_step_searches_with_the_last_step_and_decodes_each_step_once(tmp_path, idx):
    """query_from=step (IRCoT's query): the first search is the question, each later one the step accepted last minus
    its low-probability words; no pseudo-step is decoded. Beside the step gate, which reads the pseudo-step's U, it
    is refused in one line."""
    _, lm, a = run(tmp_path, idx, UNKNOWN, gate="probe", gate_p=0.99, rerank="engine", query_from="step", max_steps=3)
    purposes = [e["purpose"] for e in a.trace["events"] if e["type"] == "model_call"]
    assert "pseudo-step" not in purposes and purposes.count("rerank") == a.trace["totals"]["retrievals"] >= 1
    queries = [s["query"] for s in a.trace["steps"] if s["retrieved"]]
    assert queries[0] == UNKNOWN and all("Kubrick" in q for q in queries[1:])
    _, _, paper = run(tmp_path, idx, UNKNOWN, gate="probe", gate_p=0.99, rerank="engine", max_steps=3)
    assert "pseudo-step" in [e["purpose"] for e in paper.trace["events"] if e["type"] == "model_call"]
    with pytest.raises(ValueError, match="query_from=step drops the pseudo-step") as e:
        run(tmp_path, idx, UNKNOWN, gate="step", query_from="step")
    assert "\n" not in str(e.value)


def test_the_most_probable_answer_wins_and_an_abstention_yields():
    from seakr.methods.records import FinalAnswer
    from seakr.methods.decisions import most_probable

    fa = lambda a, p: FinalAnswer(a, p=p)  # noqa: E731
    assert most_probable({"rationale": fa("x", 0.3), "knowledge": fa("y", 0.3)}) == "knowledge"  # tie: passages
    assert most_probable({"rationale": fa("x", 0.4), "knowledge": fa("y", 0.3), "check": fa("z", 0.5)}) == "check"
    assert most_probable({"rationale": fa("x", 0.4), "knowledge": fa("unknown", 0.9), "check": fa("", 0.95)}) == "rationale"
    assert most_probable({"rationale": fa("", 0.4), "knowledge": fa("unknown", 0.9)}) == "knowledge"  # none real


def test_probe_choice_follows_the_probes_on_each_answers_state(tmp_path, idx):
    _, _, a = run(tmp_path, idx, UNKNOWN, reasoning="probe", final_states=(True, False), delta=-100.0)
    assert a.answer == "American"
    _, _, b = run(tmp_path, idx, UNKNOWN, reasoning="probe", final_states=(False, True), delta=-100.0)
    assert b.answer == "French"
    json.dumps(b.to_dict())  # states are dropped once read: the trace stays JSON


def test_missing_fitted_files_fail_at_construction_with_one_line(tmp_path, idx):
    lm = ScriptedLM(script(), dim=DIM)
    (tmp_path / "empty").mkdir()
    for opts, word in (({"gate": "check"}, "calibration"), ({"gate": "probe"}, "probe"),
                       ({"reasoning": "probe"}, "probe"), ({"reasoning": "calibrated"}, "calibration")):
        with pytest.raises(ValueError, match=word) as e:
            SeaKR(lm, idx, probes=str(tmp_path / "empty"), **opts)
        assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="option gate: one of"):
        SeaKR(lm, idx, gate="sometimes")
    with pytest.raises(ValueError, match="gate_p"):
        SeaKR(lm, idx, gate_p=1.5)
    with pytest.raises(ValueError, match="calibration"):  # simple mode reads the same fitted files
        SeaKR(lm, idx, gate="check", mode="simple", probes=str(tmp_path / "empty"))


def test_auto_settles_on_what_is_fitted_for_the_model(tmp_path, idx, capsys):
    lm = ScriptedLM(script(), dim=DIM)
    fitted = SeaKR(lm, idx, gate="auto", reasoning="auto", probes=write_bank(tmp_path))
    assert (fitted.config.gate, fitted.config.reasoning) == ("probe", "calibrated")
    assert fitted.describe()["config"]["gate"] == "probe"  # the run records the settled values
    assert "warning" not in capsys.readouterr().err
    (tmp_path / "none").mkdir()
    bare = SeaKR(lm, idx, gate="auto", reasoning="auto", probes=str(tmp_path / "none"))
    assert (bare.config.gate, bare.config.reasoning) == ("step", "self-aware")
    # a folder with nothing for this model (fitted for another, a typo) fell back without a word; said once
    warned = f"seakr: warning: probes={tmp_path / 'none'} holds nothing fitted for model scripted: gate, rerank and "
    assert capsys.readouterr().err.count(warned) == 1
    SeaKR(lm, idx, gate="auto", reasoning="auto", probes=str(tmp_path / "none"))
    assert capsys.readouterr().err == ""
    SeaKR(lm, idx, gate="step", reasoning="self-aware", rerank="self-aware", probes=str(tmp_path / "none"))
    assert capsys.readouterr().err == ""  # asked for the paper's rules: nothing to say
    simple = SeaKR(lm, idx, gate="auto", reasoning="auto", mode="simple", probes=write_bank(tmp_path))
    assert (simple.config.gate, simple.config.rerank) == ("probe", "self-aware")  # both decided on decision data


def test_an_option_the_settled_configuration_does_not_read_is_said(tmp_path, idx, capsys):
    """``--delta`` beside gate=auto, settled to the model's fitted probe (the default 0.5B's), was taken, recorded
    and unread: past the check every step retrieves. So were gate_p under the step gate, the check's options
    without a check and rerank_z beside another re-rank. Each is said once, naming what would read it."""
    lm = ScriptedLM(script(), dim=DIM)
    bank = write_bank(tmp_path)
    SeaKR(lm, idx, delta=-1.25, gate_p=0.45, probes=bank)  # auto: the probe fitted for "scripted"
    err = capsys.readouterr().err
    assert "option delta=-1.25 is not read: gate=probe (auto's choice for scripted) decides retrieval" in err
    assert "gate_p" not in err  # the probe gate reads it
    SeaKR(lm, idx, gate="step", delta=-1.5, gate_p=0.35, rerank_z=2.5, check_estimator="ln-entropy",
          check_temperature=0.7, probes=bank)
    err = capsys.readouterr().err
    assert "option delta" not in err and "option gate_p=0.35 is not read: gate=step reads no probability" in err
    assert "option rerank_z=2.5 is not read: rerank=self-aware (auto's choice) does not weigh" in err
    assert "options check_estimator='ln-entropy', check_temperature=0.7 are not read: gate=step draws no check" in err
    SeaKR(lm, idx, gate="step", retrieval="always", delta=-1.75, probes=bank)
    assert "option delta=-1.75 is not read: retrieval=always retrieves at every step" in capsys.readouterr().err
    SeaKR(lm, idx, mode="simple", gate="probe", delta=-1.5, probes=bank)  # one search, no chain past the gate
    assert "option delta=-1.5 is not read: gate=probe decides retrieval (gate=step reads delta)" in \
        capsys.readouterr().err
    SeaKR(lm, idx, gate="check", gate_p=0.45, check_temperature=0.7, rerank="guarded", rerank_z=2.5, probes=bank)
    assert capsys.readouterr().err == ""  # each read
    from seakr.methods import build_method  # the baselines decode greedily: the sampling options were unread too

    build_method("ircot", lm, idx, k=7, seed=3, max_passages=2, query_max_words=9)
    err = capsys.readouterr().err
    assert "options k=7, seed=3 are not read: ircot decodes greedily and draws no samples" in err
    assert "option query_max_words=9 is not read: ircot does not read it" in err and "max_passages" not in err
    build_method("cot", lm, None, n_candidates=2, titles=True)
    err = capsys.readouterr().err
    assert "options n_candidates=2, titles=True are not read: cot does not retrieve" in err
    build_method("single", lm, idx, titles=True)
    assert capsys.readouterr().err == ""  # its passages show their titles
    # simple mode searches once with the question and answers from one passage: the chain's options were unread
    SeaKR(lm, idx, mode="simple", max_steps=2, max_passages=2, keep_p=0.5, reasoning="knowledge", probes=bank)
    err = capsys.readouterr().err
    for said in ("max_steps=2 is not read: mode=simple answers in one step", "max_passages=2 is not read: mode=simple "
                 "keeps one passage", "keep_p=0.5 is not read: mode=simple searches with the question itself",
                 "reasoning='knowledge' is not read: mode=simple answers from the passage it keeps"):
        assert said in err, err
    SeaKR(lm, idx, mode="simple", reasoning="auto", n_candidates=2, probes=bank)
    assert capsys.readouterr().err == ""


def test_auto_reasoning_follows_the_rule_chosen_for_the_model_and_draws_no_final_samples(tmp_path, idx):
    bank = write_bank(tmp_path)
    (tmp_path / "reasoning.json").write_text(json.dumps({"scripted": {"reasoning": "knowledge", "n": 200}}))
    m = SeaKR(ScriptedLM(script(), dim=DIM), idx, k=5, delta=100.0, gate="probe", gate_p=0.5, probes=bank)
    assert m.config.reasoning == "knowledge"
    assert m.describe()["reasoning_source"].endswith("reasoning.json:scripted")
    a = m.answer(UNKNOWN)
    assert a.answer == "American" and set(a.trace["final"]["candidates"]) == {"knowledge", "check"}
    finals = [e for e in a.trace["events"] if e["type"] == "model_call" and e["purpose"].startswith("final")]
    assert finals and all(e["samples"] == 0 for e in finals)  # no rule reads the answer's U
    # the rules that read U still sample both answers; an explicit option overrides the file
    cal = SeaKR(ScriptedLM(script(), dim=DIM), idx, k=5, delta=100.0, gate="probe", gate_p=0.5, probes=bank,
                reasoning="calibrated").answer(UNKNOWN)
    assert all(e["samples"] == 5 for e in cal.trace["events"] if e["type"] == "model_call" and e["purpose"].startswith("final"))
    # a rule the file names that SeaKR does not know is a one-line error at construction
    (tmp_path / "reasoning.json").write_text(json.dumps({"scripted": {"reasoning": "vote"}}))
    with pytest.raises(ValueError, match="reasoning 'vote' is not one of") as e:
        SeaKR(ScriptedLM(script(), dim=DIM), idx, probes=bank)
    assert "\n" not in str(e.value)


def test_auto_rerank_follows_the_rule_chosen_for_the_model_and_decodes_only_the_top_passage(tmp_path, idx):
    """decisions.json names the re-rank chosen for a model on decision data: "engine" keeps BM25's top-1 and decodes only
    its step, unsampled; without the file, auto takes the candidate probe where one is fitted; a rule the file names
    that SeaKR does not know is one line at construction."""
    bank = write_bank(tmp_path)
    (tmp_path / "decisions.json").write_text(json.dumps({"scripted": {"rerank": "engine", "why": {"rerank": {"n": 42}}}}))
    m = SeaKR(ScriptedLM(script(), dim=DIM), idx, k=5, gate="probe", gate_p=0.5, probes=bank)
    assert m.config.rerank == "engine"
    a = m.answer(UNKNOWN)
    reranks = [e for e in a.trace["events"] if e["type"] == "model_call" and e["purpose"] == "rerank"]
    assert reranks and all(e["samples"] == 0 for e in reranks)
    assert all(len(s["candidates"]) == 1 for s in a.trace["steps"] if s["retrieved"])
    assert SeaKR(ScriptedLM(script(), dim=DIM), idx, probes=bank, rerank="self-aware").config.rerank == "self-aware"
    (tmp_path / "decisions.json").write_text(json.dumps({"scripted": {"rerank": "vote"}}))
    with pytest.raises(ValueError, match="rerank 'vote' is not one of") as e:
        SeaKR(ScriptedLM(script(), dim=DIM), idx, probes=bank)
    assert "\n" not in str(e.value)


def test_the_query_keeps_the_words_at_the_level_decided_for_the_step_query(tmp_path, idx):
    """keep_p unset settles to the level decisions.json names for the model where the chain searches with its accepted
    step, to the paper's 0.9 for a pseudo-step, and an explicit level stays; the run's config records it. A level the
    file names outside [0, 1] is one line at construction."""
    bank = write_bank(tmp_path)
    (tmp_path / "decisions.json").write_text(json.dumps({"scripted": {"keep_p": 0.0}}))
    kw = dict(gate="probe", gate_p=0.99, rerank="engine", max_steps=3)
    step = SeaKR(ScriptedLM(script(), dim=DIM), idx, k=5, probes=bank, query_from="step", **kw)
    assert step.config.keep_p == 0.0 and step.describe()["config"]["keep_p"] == 0.0
    assert SeaKR(ScriptedLM(script(), dim=DIM), idx, k=5, probes=bank, query_from="pseudo", **kw).config.keep_p == 0.9
    assert SeaKR(ScriptedLM(script(), dim=DIM), idx, k=5, probes=bank, query_from="step", keep_p=0.5,
                 **kw).config.keep_p == 0.5
    everything = [s["query"] for s in step.answer(UNKNOWN).trace["steps"] if s["retrieved"]]
    paper = SeaKR(ScriptedLM(script(), dim=DIM), idx, k=5, probes=bank, query_from="step", keep_p=0.9, **kw)
    sure = [s["query"] for s in paper.answer(UNKNOWN).trace["steps"] if s["retrieved"]]
    assert all(set(b.split()) <= set(a.split()) for a, b in zip(everything, sure))  # level 0 drops no word
    (tmp_path / "decisions.json").write_text(json.dumps({"scripted": {"keep_p": 1.5}}))
    with pytest.raises(ValueError, match=r"decisions\.json: scripted: keep_p") as e:
        SeaKR(ScriptedLM(script(), dim=DIM), idx, k=5, probes=bank, query_from="step", **kw)
    assert "\n" not in str(e.value)


def test_a_stacked_probe_reads_the_scores_of_the_checks_own_samples(tmp_path, idx):
    # state weights 0, one weight on EigenScore: the decision can only come from the check's k samples
    lo, hi = eigen(CERTAIN, k=5, dim=DIM, text="Steven Spielberg"), eigen(UNSURE, k=5, dim=DIM, text="French")
    bank = write_bank(tmp_path)
    Probe("scripted", "L0:mlp", "short", [0.0] * DIM + [4.0], 0.0, [0.0] * DIM + [(lo + hi) / 2], [1.0] * (DIM + 1),
          features=["eigen"]).save(tmp_path / "scripted-short.probe.json")
    for question, sure in ((KNOWN, True), (UNKNOWN, False)):
        lm = ScriptedLM(script(), dim=DIM)
        a = SeaKR(lm, idx, k=5, delta=100.0, probes=bank, gate="probe", gate_p=0.5).answer(question)
        check = next(e for e in a.trace["events"] if e["type"] == "model_call" and e["purpose"] == "check")
        assert check["samples"] == 5  # the plain state probe reads one greedy row; the stacked one needs samples
        assert a.trace["final"]["candidates"]["check"]["sure"] is sure
        expected = 1 / (1 + np.exp(-4.0 * ((lo if sure else hi) - (lo + hi) / 2)))
        assert a.trace["final"]["candidates"]["check"]["u"] == pytest.approx(expected, rel=1e-5)
    with pytest.raises(ValueError, match="prompt is not an estimator of the check's samples"):
        Probe("scripted", "L0:mlp", "short", [0.0] * (DIM + 1), 0.0, [0.0] * (DIM + 1), [1.0] * (DIM + 1), features=["prompt"])


def test_the_check_samples_at_the_temperature_its_map_was_fitted_at(tmp_path, idx):
    """gate=check settles an unset check_temperature to its short-form map's recorded one (the chain keeps the
    method's), records it in the run's config, and refuses a check sampled otherwise with one line."""
    bank = write_bank(tmp_path)
    f = tmp_path / "scripted-short-eigen.calibration.json"
    fitted = {"k": 5, "temperature": 1.3, "top_k": 50, "top_p": 0.9, "alpha": 1e-3}
    f.write_text(json.dumps({**json.loads(f.read_text()), "provenance": {"sampling": fitted}}))
    lm = ScriptedLM(script(), dim=DIM)
    temps, generate = [], lm.generate
    lm.generate = lambda prompts, config, **kw: temps.append((config.n, config.temperature)) or generate(prompts, config, **kw)
    m = SeaKR(lm, idx, k=5, delta=100.0, probes=bank, gate="check", gate_p=0.5)
    assert m.config.check_temperature == 1.3 and m.describe()["config"]["check_temperature"] == 1.3
    m.answer(UNKNOWN)
    assert temps[0] == (5, 1.3) and len(temps) > 1 and all(t == 1.0 for _, t in temps[1:])  # the check, then the chain
    with pytest.raises(ValueError, match=r"short-eigen\.calibration\.json: fitted on eigen of samples drawn with "
                                         r"k=5, temperature=1\.3.*this run samples with k=5, temperature=0\.7"):
        SeaKR(ScriptedLM(script(), dim=DIM), idx, k=5, probes=bank, gate="check", check_temperature=0.7)
    assert SeaKR(ScriptedLM(script(), dim=DIM), idx, k=5, probes=bank, gate="step").config.check_temperature is None
    f.write_text(json.dumps({**json.loads(f.read_text()), "provenance": {}}))  # a map without the record
    assert SeaKR(ScriptedLM(script(), dim=DIM), idx, k=5, probes=bank, gate="check").config.check_temperature == 1.0


def test_the_settled_decisions_are_said_with_the_ones_that_read_sampled_u(tmp_path, idx):
    """``decisions()`` names the rule that makes each of Algorithm 1's decisions, and which of them read a U of k
    sampled continuations: the paper's configuration reads it at all three, a probe gate with BM25's top-1 and
    one answer (the 0.5B's defaults) at none."""
    paper, _, _ = run(tmp_path, idx, KNOWN, gate="step", rerank="self-aware", reasoning="self-aware")
    assert paper.decisions() == {"gate": "U > delta (100)", "rerank": "self-aware", "final": "self-aware",
                                 "sampled_u": ["gate", "rerank", "final"]}
    small, _, _ = run(tmp_path, idx, KNOWN, gate="probe", gate_p=0.3, rerank="engine", reasoning="knowledge")
    assert small.decisions() == {"gate": "knowledge check (probe) at P(correct) >= 0.3", "rerank": "engine",
                                 "final": "knowledge", "sampled_u": []}


def test_ircot_stopping_and_answer_reading_in_seakrs_chain(tmp_path, idx):
    """The attribution against IRCoT swaps its parts in one at a time: ``stopping="ircot"`` ends the chain only at
    an answer, an empty step or max_steps (SeaKR's also ends at a repeated query, no new passage, max_passages);
    ``reasoning="steps"`` reads the answer a step says, else forces one after the steps with the kept passages."""
    def never_answers(v):  # every step says the same sentence; a forced answer says French
        if SHORT_INSTRUCTION in v.prompt:
            return Reply("French", UNSURE, state=state(True))
        return Reply("French" if v.forced else "The film was directed by Stanley Kubrick", CERTAIN)

    def answer(**kw):
        m = SeaKR(ScriptedLM(never_answers, dim=DIM), idx, k=5, probes=write_bank(tmp_path), gate="probe", gate_p=0.99,
                  rerank="engine", query_from="step", max_steps=4, reasoning="steps", **kw)
        return m.answer(UNKNOWN)

    seakr = answer()
    assert seakr.trace["final"]["stop_reason"] in ("repeated_query", "no_new_passage") and len(seakr.trace["steps"]) < 4
    ircot = answer(stopping="ircot")
    assert ircot.trace["final"]["stop_reason"] == "max_steps" and len(ircot.trace["steps"]) == 4
    assert ircot.trace["final"]["choice"] == "steps" and ircot.answer == "French"  # forced: no step said it
    calls = [e["purpose"] for e in ircot.trace["events"] if e["type"] == "model_call"]
    assert "final/steps" in calls and "final/knowledge" not in calls and "step" in calls  # no new passage: decoded anyway
