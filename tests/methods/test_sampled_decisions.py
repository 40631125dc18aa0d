"""A decision that reads a sample-based U (EigenScore, LN-entropy, ...) needs samples with a spread: with
k < 2 every U is +inf (always retrieve, the engine's order, a tie at the end) and at temperature 0 the k
samples are copies of the greedy answer. Such options are refused in one line naming the option, before
the model loads where the options alone decide it, and once the model has settled an ``auto`` decision
to the paper's U otherwise; decisions that read no samples take k = 0."""

import pytest

from scripted import Reply, ScriptedLM, engine
from seakr.cli.flags import parse_options
from seakr.eval.specs import PlanError, run_spec
from seakr.methods import SeaKR, SeaKRConfig


def script(v):
    return Reply("So the answer is American" if v.passages else "Kubrick directed it", 1.0)


@pytest.mark.parametrize("opts,needle", [
    ({"gate": "step", "k": 1}, "option k: 1 sample(s), but retrieval (gate=step) reads estimator eigen"),
    ({"gate": "step", "retrieval": "always", "rerank": "self-aware", "k": 0}, "but rerank=self-aware reads"),
    ({"gate": "step", "retrieval": "always", "rerank": "engine", "reasoning": "self-aware", "k": 0},
     "but reasoning=self-aware reads"),
    ({"mode": "simple", "gate": "step", "k": 1, "estimator": "ln-entropy"}, "reads estimator ln-entropy"),
    ({"gate": "step", "temperature": 0}, "option temperature: 0 draws k copies of the greedy answer"),
    ({"gate": "check", "check_temperature": 0}, "option check_temperature: 0 draws k copies"),
])
def test_explicit_decisions_are_refused_before_the_model_loads(opts, needle):
    with pytest.raises(ValueError, match="^option ") as e:
        SeaKRConfig(**opts)
    assert needle in str(e.value) and "\n" not in str(e.value)
    flag = [f"{k}={v}" for k, v in opts.items()]  # the same through --option and a grid's check
    with pytest.raises(PlanError, match="option"):
        run_spec("--option", "seakr", parse_options(flag))


def test_decisions_that_read_no_samples_take_k_zero(tmp_path):
    idx = engine(tmp_path, {"Kubrick": "Stanley Kubrick was an American director."})
    for opts in ({"gate": "step", "retrieval": "always", "rerank": "engine", "reasoning": "knowledge", "k": 0},
                 {"gate": "step", "estimator": "max-entropy", "delta": -9.0, "k": 0, "temperature": 0},  # a greedy estimator
                 {"gate": "step", "k": 2}):
        a = SeaKR(ScriptedLM(script), idx, **opts).answer("Who directed 2001: A Space Odyssey?")
        assert a.answer == "American", opts


def test_an_auto_decision_is_checked_once_the_model_settles_it(tmp_path):
    """The scripted model has no fitted probes: gate, rerank and reasoning "auto" settle to the paper's U."""
    SeaKRConfig(k=0)  # the options alone cannot tell: with the default model's probes k = 0 is fine
    idx = engine(tmp_path, {"Kubrick": "Stanley Kubrick was an American director."})
    with pytest.raises(ValueError, match=r"^option k: 0 sample\(s\), but retrieval \(gate=step\)"):
        SeaKR(ScriptedLM(script), idx, k=0)


def test_the_service_answers_422_naming_the_option():
    """Refused by the options' schema (temperature 0 beside an estimator that reads the samples' spread: a body
    error at ``options``) or by the method as the server's model settles it (k=1): a 422 naming the option."""
    from fastapi.testclient import TestClient

    from seakr.serve.app import AnswerService, create_app

    c = TestClient(create_app(AnswerService(ScriptedLM(script), None)))
    for opts, name in (({"k": 1}, "k"), ({"gate": "step", "temperature": 0}, "temperature")):
        r = c.post("/v1/answer", json={"question": "q", "method": "seakr", "options": opts})
        body = r.json()
        said = body["detail"] if isinstance(body["detail"], str) and "errors" not in body else body["errors"][0]["error"]
        assert r.status_code == 422 and f"option {name}:" in said and "\n" not in said, body


def test_an_empty_query_searches_the_question(tmp_path):
    """A pseudo-step with nothing left to search (here: empty) must not search "" (which finds nothing and
    ends the chain on a retrieval that never happened): the question is searched."""
    idx = engine(tmp_path, {"Kubrick": "Who was he? He was Stanley Kubrick, an American director."})

    def empty_step(v):
        if v.passages:
            return Reply("So the answer is American", 1.0)
        return Reply("" if not v.answer else "So the answer is French", 1.0)
    a = SeaKR(ScriptedLM(empty_step), idx, k=2, gate="step", retrieval="always", rerank="engine",
              reasoning="knowledge").answer("Who was he?")
    searched = [e["query"] for e in a.trace["events"] if e["type"] == "retrieval"]
    assert searched and "" not in searched and searched[0] == "Who was he?"
    assert a.trace["steps"][0]["kept"]["title"] == "Kubrick"
