"""rerank=probe through the scripted model: SeaKR keeps the candidate the candidate probe finds most
likely to support the answer, reading each candidate's greedy step state and the engine's rank and
score; the trace records each candidate's P(supporting)."""

import json

import numpy as np
import pytest

from scripted import Reply, ScriptedLM, engine
from seakr.methods import SeaKR
from seakr.probes import Probe
from seakr.probes.probe import ENGINE_FEATURES, engine_features

DIM = 16
Q = "What nationality was the director of 2001: A Space Odyssey?"
PASSAGES = {"Stanley Kubrick": "Stanley Kubrick directed 2001: A Space Odyssey and was an American director.",
            "Odyssey (crater)": "A Moon crater named for the film directed by Stanley Kubrick in 1968."}
MARK = {"Stanley Kubrick": "American director", "Odyssey (crater)": "Moon crater"}


def script(supportive: str):
    """The step generated with ``supportive`` in context has a state the probe reads as supporting."""
    def run(v):
        if v.forced or (not v.answer and v.passages and len(v.passages) > 1):
            return Reply("So the answer is American.")
        if v.passages:
            good = v.has(MARK[supportive])
            return Reply("Kubrick was American. So the answer is American.", state=[-2.0 if good else 2.0] + [0.0] * (DIM - 1))
        return Reply("The film was directed by Stanley Kubrick")
    return run


def bank(tmp_path, engine_weight=0.0):
    """A candidate probe on feature 0 of the state (and, with ``engine_weight``, on the engine's top-1)."""
    folder = tmp_path / "bank"
    folder.mkdir(exist_ok=True)
    coef = [3.0] + [0.0] * (DIM - 1) + [-engine_weight, 0.0, 0.0, 0.0, 0.0]
    Probe("scripted", "L0:mlp", "candidate", coef, 0.0, [0.0] * (DIM + 5), [1.0] * (DIM + 5),
          features=list(ENGINE_FEATURES)).save(folder / "scripted-candidate.probe.json")
    return str(folder)


@pytest.mark.parametrize("supportive", list(PASSAGES))
def test_probe_rerank_keeps_the_candidate_the_probe_reads_as_supporting(tmp_path, supportive):
    idx = engine(tmp_path / "idx", PASSAGES)
    m = SeaKR(ScriptedLM(script(supportive), dim=DIM), idx, k=3, delta=-100.0, rerank="probe", gate="step",
              reasoning="self-aware", probes=bank(tmp_path))
    a = m.answer(Q)
    step = a.trace["steps"][0]
    assert step["kept"]["title"] == supportive
    ps = {c["title"]: c["p"] for c in step["candidates"]}
    assert ps[supportive] > 0.99 and min(ps.values()) < 0.01
    json.dumps(a.to_dict())  # the states read by the probe never reach the trace


def test_a_heavy_engine_weight_keeps_the_engines_top1(tmp_path):
    idx = engine(tmp_path / "idx", PASSAGES)
    top = idx.search("The film was directed by Stanley Kubrick", 2)
    other = next(t for t in PASSAGES if t != top[0].title)
    m = SeaKR(ScriptedLM(script(other), dim=DIM), idx, k=3, delta=-100.0, rerank="probe", gate="step",
              reasoning="self-aware", probes=bank(tmp_path, engine_weight=50.0))
    assert m.answer(Q).trace["steps"][0]["kept"]["title"] == top[0].title


def test_probe_rerank_needs_its_probe_and_the_multihop_mode(tmp_path):
    idx = engine(tmp_path / "idx", PASSAGES)
    lm = ScriptedLM(script("Stanley Kubrick"), dim=DIM)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no 'candidate' probe"):
        SeaKR(lm, idx, rerank="probe", probes=str(tmp_path / "empty"))
    with pytest.raises(ValueError, match="rerank=probe"):
        SeaKR(lm, idx, rerank="probe", mode="simple")


def test_engine_features_of_a_candidate():
    np.testing.assert_allclose(engine_features(0, 12.0, 12.0), [1, 0, 0, 1.0, 0.0])
    np.testing.assert_allclose(engine_features(1, 9.0, 12.0), [0, 1, 0, 0.75, -3.0])
    np.testing.assert_allclose(engine_features(4, None, 12.0), [0, 0, 1, 1.0, 0.0])  # a missing score reads as the top


def test_rerank_auto_takes_the_probe_where_fitted_and_the_papers_rule_elsewhere(tmp_path):
    idx = engine(tmp_path / "idx", PASSAGES)
    lm = ScriptedLM(script("Stanley Kubrick"), dim=DIM)
    (tmp_path / "empty").mkdir()
    fitted = SeaKR(lm, idx, probes=bank(tmp_path), gate="step", reasoning="self-aware")
    assert fitted.config.rerank == "probe" and fitted.describe()["config"]["rerank"] == "probe"
    assert SeaKR(lm, idx, probes=str(tmp_path / "empty")).config.rerank == "self-aware"
    assert SeaKR(lm, idx, probes=bank(tmp_path), mode="simple").config.rerank == "self-aware"
    # the probe re-rank spends no samples on the candidates: one greedy row each
    calls = []
    counting = ScriptedLM(script("Stanley Kubrick"), dim=DIM)
    orig = counting.generate
    counting.generate = lambda prompts, config, **kw: calls.append((len(prompts), config.n)) or orig(prompts, config, **kw)
    SeaKR(counting, idx, k=4, delta=-100.0, probes=bank(tmp_path), gate="step", reasoning="self-aware").answer(Q)
    assert (2, 0) in calls and all(n in (0, 4) for _, n in calls)
