"""Calibration sweep, detection and re-rank studies: the arithmetic on hand-made rows, the studies
end to end with the real smollm2 on a few fixture questions, and resuming a killed study."""

import dataclasses
import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from helpers import HOTPOT, fixture_path, run_cli
from seakr.eval.datasets import load_dataset
from seakr.eval.rowlog import RowLog
from seakr.eval.calibrate import calibrate, calibration_sweep
from seakr.eval.detect import detect, parse_taps
from seakr.eval.rerankstudy import gold_lower_u, rerank_study, rerank_summary


def test_sweep_is_exact_and_prefers_fewer_retrievals():
    # closed-book right when confident (low u), retrieval right when not: the best threshold sits between
    rows = [{"u": -3.0, "f1_direct": 1.0, "f1_rag": 0.0},
            {"u": -2.0, "f1_direct": 1.0, "f1_rag": 1.0},
            {"u": 1.0, "f1_direct": 0.0, "f1_rag": 1.0},
            {"u": None, "f1_direct": 0.0, "f1_rag": 1.0}]  # +inf: always retrieves
    sweep, best = calibration_sweep(rows)
    by = {s["delta"]: s for s in sweep}
    assert by[-math.inf]["retrieval_rate"] == 1.0 and by[-math.inf]["f1"] == 0.75
    # delta=+inf never retrieves, like SeaKR itself (U > delta is false even for U=+inf)
    assert by[math.inf]["retrieval_rate"] == 0.0 and by[math.inf]["f1"] == 0.5
    assert best["f1"] == 1.0
    # any delta in [-3, 1) reaches F1 1.0; the cost rule takes the fewest retrievals (half), from -2 up
    assert -2.0 <= best["delta"] < 1.0 and best["retrieval_rate"] == 0.5
    assert best["tied_delta_min"] == -3.0 and best["tied_retrieval_rate_max"] == 0.75  # where the tie begins
    for s in sweep:  # every point recomputed by hand
        use = [(r["u"] if r["u"] is not None else math.inf) > s["delta"] for r in rows]
        assert s["f1"] == pytest.approx(sum(r["f1_rag"] if u else r["f1_direct"] for r, u in zip(rows, use)) / 4)


def test_rerank_signal_counts_gold_against_non_gold_pairs_within_each_question():
    rows = [
        # gold A vs non-gold B, C: lower than B, higher than C -> 1/2
        {"titles": ["A", "B", "C"], "gold": ["A"], "u": [-2.0, -1.0, -3.0], "u_se": [0.4, 0.6, 0.5],
         "engine_top1_gold": True, "seakr_top1_gold": False, "guarded_top1_gold": True, "any_gold_in_top_n": True},
        # golds A, C vs non-gold B: C lower (1), A tied with B (1/2) -> 3/4
        {"titles": ["A", "B", "C"], "gold": ["A", "C", "Z"], "u": [-1.0, -1.0, -2.0], "u_se": [0.2, 0.2, None],
         "engine_top1_gold": True, "seakr_top1_gold": True, "guarded_top1_gold": True, "any_gold_in_top_n": True},
        # a failed gold (U +inf, stored as None) loses to a finite non-gold -> 0
        {"titles": ["A", "B"], "gold": ["B"], "u": [-1.0, None], "u_se": [0.3, None],
         "engine_top1_gold": False, "seakr_top1_gold": False, "guarded_top1_gold": False, "any_gold_in_top_n": True},
        # no gold among the candidates: no pair, still in the recall figures
        {"titles": ["A", "B"], "gold": ["Z"], "u": [-1.0, -1.5], "u_se": [0.5, 0.5],
         "engine_top1_gold": False, "seakr_top1_gold": False, "guarded_top1_gold": False, "any_gold_in_top_n": False},
        {"titles": [], "gold": ["Z"], "u": []},  # no hits: outside every figure
    ]
    g = gold_lower_u(rows)
    assert g["questions"] == 3 and g["fraction"] == pytest.approx((0.5 + 0.75 + 0.0) / 3)
    assert g["ci95"][0] <= g["fraction"] <= g["ci95"][1]
    assert g["median_u_se"] == pytest.approx(0.45)  # of 0.4 0.6 0.5 0.2 0.2 0.3 0.5 0.5
    assert g["median_gap"] == pytest.approx(1.0)  # adjacent finite gaps 1, 1; 1, 0; none; 0.5
    s = rerank_summary(rows)
    assert s["n"] == 4 and s["recall@1_engine"] == 0.5 and s["recall@1_self_aware"] == 0.25
    assert s["gold_in_top_n"] == 0.75 and s["gold_lower_u"] == g
    assert s["paired_vs_engine"]["seakr_top1_gold"]["mean_difference"] == pytest.approx(-0.25)
    # one pair, won: 1.0; nothing to pair: no figure rather than a wrong one
    assert gold_lower_u([{"titles": ["A", "B"], "gold": ["A"], "u": [-2.0, -1.0]}])["fraction"] == 1.0
    assert gold_lower_u([])["fraction"] is None


def test_a_re_rank_study_says_when_the_index_held_nothing_the_questions_need(tmp_path, capsys):
    """A study whose searches found nothing (an index of other passages) printed n 0 and nulls, and no reason."""
    from seakr.eval.rerankstudy import _rerank_result

    empty = [{"id": f"q{i}", "titles": [], "gold": ["Z"], "u": []} for i in range(3)]
    assert _rerank_result(empty, "m", 3, 1.645, tmp_path)["n"] == 0
    err = capsys.readouterr().err
    assert err.startswith("seakr: warning: re-rank study: 3 of 3 questions found no passage (left out of the figures): "
                          "does the index hold these questions' passages?"), err
    other = [{"id": "q9", "titles": ["A"], "gold": ["Z"], "u": [-1.0], "engine_top1_gold": False,
              "seakr_top1_gold": False, "guarded_top1_gold": False, "any_gold_in_top_n": False}]
    _rerank_result(empty[:1] + other, "m", 3, 1.645, tmp_path)
    assert "1 of 2 questions found no passage (left out of the figures); no question's top 3 held a gold passage" \
        in capsys.readouterr().err
    _rerank_result([{**other[0], "gold": ["A"], "engine_top1_gold": True, "any_gold_in_top_n": True}], "m", 3, 1.645,
                   tmp_path)
    assert capsys.readouterr().err == ""


def test_rowlog_needs_resume_drops_torn_tail_and_refuses_other_config(tmp_path):
    cfg = {"method": {"config": {"k": 20}, "model": {"model": "m", "threads": 2}}}
    with RowLog(tmp_path, "rows.jsonl", cfg) as log:
        log.append({"id": "a"})
        log.append({"id": "b"})
    with open(tmp_path / "rows.jsonl", "a") as f:
        f.write('{"id": "c", "tru')  # kill -9 in the middle of a write
    with pytest.raises(ValueError, match="pass --resume"):
        RowLog(tmp_path, "rows.jsonl", cfg)
    with pytest.raises(ValueError, match="different method config"):
        RowLog(tmp_path, "rows.jsonl", {"method": {"config": {"k": 10}, "model": {"model": "m"}}}, resume=True)
    other_threads = {"method": {"config": {"k": 20}, "model": {"model": "m", "threads": 8}}}
    with RowLog(tmp_path, "rows.jsonl", other_threads, resume=True) as log:
        assert [r["id"] for r in log.rows] == ["a", "b"]
        log.append({"id": "c"})
        from types import SimpleNamespace as Ex

        # a resumed log may hold more than this run asks for (a smaller --limit): only these count
        assert [r["id"] for r in log.rows_for([Ex(id="c"), Ex(id="a"), Ex(id="z")])] == ["a", "c"]
        assert [e.id for e in log.todo([Ex(id="c"), Ex(id="z")])] == ["z"]
    lines = (tmp_path / "rows.jsonl").read_text().splitlines()
    assert [json.loads(x)["id"] for x in lines] == ["a", "b", "c"]


@pytest.mark.skipif(sys.platform == "win32", reason="flock: POSIX only")
def test_one_run_writes_to_a_folder_at_a_time_and_a_killed_one_frees_it(tmp_path):
    from seakr.eval.specs import PlanError, check_output_dir

    cfg = {"method": {"config": {"k": 20}}}
    run = tmp_path / "grid" / "seakr"  # a grid's run folder inside --out
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from seakr.eval.rowlog import RowLog; "
                               f"log = RowLog({str(run)!r}, 'rows.jsonl', {cfg!r}); print('held', flush=True); "
                               "time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ValueError, match=rf"{run}: another seakr run \(pid {holder.pid}\) is writing here"):
            RowLog(run, "rows.jsonl", cfg, resume=True)
        with pytest.raises(PlanError, match="another seakr run"):  # before the model loads: --out or a run in it
            check_output_dir(str(tmp_path / "grid"))
    finally:
        holder.kill()  # kill -9: the operating system drops the lock with the process
        holder.wait()
    check_output_dir(str(tmp_path / "grid"))
    with RowLog(run, "rows.jsonl", cfg, resume=True) as log:
        log.append({"id": "a"})
    with RowLog(run, "rows.jsonl", cfg, resume=True) as log:  # a closed log released its folder
        assert [r["id"] for r in log.rows] == ["a"]


@pytest.mark.skipif(sys.platform == "win32", reason="flock: POSIX only")
def test_a_file_system_without_locks_still_runs(tmp_path, monkeypatch):
    import errno
    import fcntl

    def no_locks(*a):
        raise OSError(errno.ENOLCK, "No locks available")  # some NFS and FUSE mounts

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with RowLog(tmp_path, "rows.jsonl", {"method": {}}) as log:
        log.append({"id": "a"})
    from seakr.common.cache import cache_lock

    monkeypatch.setenv("SEAKR_CACHE", str(tmp_path / "cache"))
    with cache_lock("m"):
        pass


def test_resume_ignores_a_resolved_delta_only_where_the_run_never_reads_it(tmp_path):
    def cfg(retrieval, delta, source, pinned=None):
        return {"method": {"config": {"retrieval": retrieval, "delta": pinned}, "delta": delta, "delta_source": source}}

    always = tmp_path / "always"
    with RowLog(always, "rows.jsonl", cfg("always", -1.631, "packaged:m")) as log:
        log.append({"id": "a"})
    # the packaged table gained a key since: an always-retrieve run's answers cannot depend on it
    with RowLog(always, "rows.jsonl", cfg("always", -1.188, "packaged:m:multihop"), resume=True) as log:
        assert [r["id"] for r in log.rows] == ["a"]
    gated = tmp_path / "gated"
    with RowLog(gated, "rows.jsonl", cfg("self-aware", -1.631, "packaged:m")) as log:
        log.append({"id": "a"})
    with pytest.raises(ValueError, match="different method config"):  # a gated run reads it: refused
        RowLog(gated, "rows.jsonl", cfg("self-aware", -1.188, "packaged:m:multihop"), resume=True)
    with pytest.raises(ValueError, match="different method config"):  # a delta the user pinned stays checked
        RowLog(always, "rows.jsonl", cfg("always", 2.0, "config", pinned=2.0), resume=True)


@pytest.fixture(scope="module")
def seakr_smol(smol):
    from seakr.methods import SeaKR

    def make(engine=None, prompt_set="simpleqa"):
        return SeaKR(smol, engine, delta=0.0, prompt_set=prompt_set, k=3, n_candidates=2, max_new_tokens=8)
    return make


@pytest.mark.slow
def test_detect_resumes_and_scores_every_estimator(tmp_path, seakr_smol):
    exs = load_dataset(fixture_path("nq_mini.oracle.jsonl"))[:3]
    m = seakr_smol()
    calls = []
    first = detect(m, exs[:2], tmp_path, progress=lambda n=1, **kw: calls.append(n))
    assert first["n"] == 2
    with pytest.raises(ValueError, match="pass --resume"):
        detect(m, exs, tmp_path)
    r = detect(m, exs, tmp_path, resume=True)
    rows = [json.loads(x) for x in (tmp_path / "detect_rows.jsonl").read_text().splitlines()]
    assert [x["id"] for x in rows] == [e.id for e in exs]  # the first two kept, not recomputed
    assert r["n"] == 3
    from seakr.uncertainty import ESTIMATORS
    assert set(r["estimators"]) == set(ESTIMATORS) | {"prompt"} and len(ESTIMATORS) >= 6
    assert (tmp_path / "roc.png").stat().st_size > 1000
    assert json.loads((tmp_path / "detect.json").read_text())["n"] == 3


@pytest.mark.slow
def test_calibrate_and_rerank_study_end_to_end(tmp_path, seakr_smol):
    from seakr.eval.corpus import pooled_index
    from seakr.search import open_engine

    data = HOTPOT
    exs = load_dataset(data)[:2]
    engine = open_engine(pooled_index(data, load_dataset(data), []))
    m = seakr_smol(engine, "hotpotqa")
    c = calibrate(m, exs, tmp_path / "cal", write=False)
    rows = [json.loads(x) for x in (tmp_path / "cal" / "calibration_rows.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and c["n"] == 2 and "written_to" not in c
    assert c["chosen"] == calibration_sweep(rows)[1]
    assert (tmp_path / "cal" / "calibration.png").exists()

    r = rerank_study(m, exs, tmp_path / "rr")
    rows = [json.loads(x) for x in (tmp_path / "rr" / "rerank_rows.jsonl").read_text().splitlines()]
    assert r["n"] == 2 and all(len(x["titles"]) == 2 and len(x["u"]) == 2 for x in rows)
    assert r["recall@1_engine"] == sum(x["engine_top1_gold"] for x in rows) / 2
    assert r["recall@1_self_aware"] == sum(x["seakr_top1_gold"] for x in rows) / 2
    for x in rows:  # self-aware pick = the candidate with the lowest U
        j = min(range(2), key=lambda i: (math.inf if x["u"][i] is None else x["u"][i], i))
        assert x["seakr_top1_gold"] == (x["titles"][j] in x["gold"])
        # guarded: the engine's top-1 unless the min-U candidate is lower by more than z x SE(difference)
        u = [math.inf if v is None else v for v in x["u"]]
        se = [math.inf if v is None else v for v in x["u_se"]]
        leave = j != 0 and (math.isinf(u[0]) and not math.isinf(u[j]) or
                            not math.isinf(u[0]) and u[0] - u[j] > r["rerank_z"] * math.hypot(se[0], se[j]))
        assert x["guarded_top1_gold"] == (x["titles"][j if leave else 0] in x["gold"])
    assert r["recall@1_guarded"] == sum(x["guarded_top1_gold"] for x in rows) / 2


@pytest.mark.slow
def test_open_book_detection_probes_every_tap_from_the_same_samples(tmp_path, seakr_smol):
    exs = load_dataset(fixture_path("nq_mini.oracle.jsonl"))[:2]
    m = seakr_smol()
    taps = [(0, "residual"), (20, "mlp")]
    r = detect(m, exs, tmp_path, setting="open-book", probe=taps)
    rows = [json.loads(x) for x in (tmp_path / "detect_rows.jsonl").read_text().splitlines()]
    own = f"L{m.lm.state_layer}:mlp"
    assert r["setting"] == "open-book" and r["state"] == own
    # the model's own state is always among the taps, and its slot at the study's k is the usual EigenScore;
    # k=3 here: it scores k=3 only (it recorded "5", "10" and "20", each of the three samples, and "k=20")
    assert set(rows[0]["probe"]) == {own, "L0:residual", "L20:mlp"}
    for x in rows:
        assert set(x["probe"][own]) == {"3"}
        assert x["probe"][own]["3"] == pytest.approx(x["scores"]["eigen"], abs=1e-9)
        assert x["probe"]["L0:residual"]["3"] != pytest.approx(x["probe"]["L20:mlp"]["3"])
    assert set(r["probe_auroc"]) == set(rows[0]["probe"]) and r["probe_best"]["tap"] in r["probe_auroc"]
    assert r["probe_best"]["k"] == 3 and set(r["probe_vs_own_k3"]) == {"L0:residual", "L20:mlp"}
    with pytest.raises(ValueError, match="gold passage"):
        bare = [dataclasses.replace(exs[0], contexts=[])]
        detect(m, bare, tmp_path / "bare", setting="open-book")


@pytest.mark.slow
def test_short_form_keeps_each_answers_state_and_scores_a_fitted_probe(tmp_path, seakr_smol):
    from seakr.eval.states import StateStore
    from seakr.probes import Probe

    exs = load_dataset(fixture_path("nq_mini.oracle.jsonl"))[:3]
    m = seakr_smol()
    info = m.lm.info()
    d = info["hidden_size"]
    probe = Probe(info["model"], "L3:residual", "short", np.eye(d)[0], 0.0, np.zeros(d), np.ones(d))
    r = detect(m, exs, tmp_path, form="short", probe=[(3, "residual")], probe_model=probe)
    rows = [json.loads(x) for x in (tmp_path / "detect_rows.jsonl").read_text().splitlines()]
    store = StateStore.open(tmp_path / "states")
    assert store.taps == [f"L{m.lm.state_layer}:mlp", "L3:residual"] and r["form"] == "short"
    for x in rows:
        z = store.get(x["id"])
        if z is None:  # an empty answer has no state; the probe calls it maximally uncertain
            assert x["scores"]["probe"] == 1.0
            continue
        assert z.shape == (2, d)
        # the probe's P(wrong) is its logistic on feature 0 of the stored L3 state (stored in float16)
        assert x["scores"]["probe"] == pytest.approx(1 / (1 + math.exp(-float(z[1][0]))), abs=1e-2)
        assert "\n" not in x["answer"]
    assert r["cost"]["estimators"]["eigen"]["rows"] == 4 and r["cost"]["estimators"]["probe"]["rows"] == 1
    assert r["empty_answers"] == sum(not x["answer"] for x in rows) and r["prompt_style"] == "plain"
    assert r["cost"]["estimators"]["max-entropy"]["rows"] == 1 and "probe" in r["estimators"]
    with pytest.raises(ValueError, match="fitted on 'short' answers; this study asks in form 'cot'"):
        detect(m, exs, tmp_path / "cot", form="cot", probe_model=probe)
    with pytest.raises(ValueError, match="cannot read model"):
        detect(m, exs, tmp_path / "other", form="short",
               probe_model=Probe("other-model", "L3:residual", "short", np.eye(d)[0], 0.0, np.zeros(d), np.ones(d)))


def test_a_probe_study_scores_only_the_k_values_it_drew():
    """A study drawing k samples scores k and the usual values below it; its summary names the k it compared
    at, and rows of an older study that scored other k values leave the probe table out, not mislabel it."""
    from seakr.eval.detect import _probe_summary, probe_ks

    assert probe_ks(20) == (5, 10, 20) and probe_ks(3) == (3,) and probe_ks(10) == (5, 10) and probe_ks(30) == (5, 10, 20, 30)
    wrong = [True, False, True, False]
    rows = [{"probe": {"L1:mlp": {"5": u, "8": u}, "L0:mlp": {"5": -u, "8": u}}} for u in (2.0, -1.0, 3.0, 0.5)]
    r = _probe_summary(rows, wrong, "L1:mlp")
    assert set(r["probe_auroc"]["L1:mlp"]) == {"5", "8"} and r["probe_best"] == {"tap": "L1:mlp", "k": 8, "auroc": 1.0}
    assert set(r["probe_vs_own_k8"]) == {"L0:mlp"}
    assert _probe_summary(rows[:2] + [{"probe": {"L1:mlp": {"20": 1.0}, "L0:mlp": {"20": 1.0}}}], wrong[:3], "L1:mlp") == {}


def test_probe_spec_names_every_tap_or_says_what_is_wrong():
    assert parse_taps("all", 2) == [(0, "mlp"), (1, "mlp"), (0, "residual"), (1, "residual")]
    assert parse_taps("residual", 2) == [(0, "residual"), (1, "residual")]
    assert parse_taps("11:mlp, L5:residual", 24) == [(11, "mlp"), (5, "residual")]
    assert parse_taps(None, 24) == []
    for bad in ("24:mlp", "x:mlp", "3:attn", "3"):
        with pytest.raises(ValueError, match="LAYER:SOURCE"):
            parse_taps(bad, 24)
    with pytest.raises(ValueError, match=r"'3:attn' is not LAYER:SOURCE \(LAYER a 0-based layer, SOURCE mlp or residual\)"):
        parse_taps("3:attn", None)  # before the load: it read "with LAYER and SOURCE mlp"


def _branch_run(d, rows, data=None, **config):
    """An eval run directory as `seakr eval` leaves it (config.json + score rows) for one SeaKR branch."""
    base = {"k": 20, "estimator": "eigen", "alpha": 1e-3, "prompt_style": "chat", "prompt_set": "2wikimultihopqa",
            "mode": "multihop", "retrieval": "self-aware", "delta": None}
    model = {"model": "qwen2.5-coder-0.5b", "state_layer": 11, "state_source": "mlp", "threads": 2}
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"name": d.name, "method": {"method": "seakr", "config": {**base, **config},
                                                                          "model": model}, **(data or {})}))
    (d / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


def _score(qid, f1, us):
    return {"id": qid, "f1": f1, "em": f1, "prediction": "x",
            "steps": [{"u": u, "threshold": None, "retrieved": False, "kept": None} for u in us]}


def test_multihop_calibration_retrieves_where_the_never_chain_first_exceeds_delta(tmp_path, monkeypatch, capsys):
    from seakr.eval.rows import ResultRow
    from seakr.eval.calibrate import calibrate_from_runs, largest_step_u
    from seakr.methods.deltas import calibration_path, default_delta

    monkeypatch.setenv("SEAKR_CACHE", str(tmp_path / "cache"))
    # q1: confident chain, right without retrieval; q2: one uncertain step (-1.0), retrieval helps;
    # q3: a failed estimate (null = +inf) retrieves at any delta; q4: no steps, never retrieves
    never = _branch_run(tmp_path / "never", [_score("q1", 1.0, [-4.0, -3.5]), _score("q2", 0.0, [-4.0, -1.0]),
                                             _score("q3", 0.0, [None]), _score("q4", 0.5, [])], delta="inf")
    always = _branch_run(tmp_path / "always", [_score("q1", 0.0, [-4.0]), _score("q2", 1.0, [-4.0]),
                                               _score("q3", 1.0, []), _score("q4", 0.0, []), _score("q9", 1.0, [])],
                         retrieval="always")
    assert largest_step_u(ResultRow.from_dict(_score("q", 0, [-4.0, -1.0]))) == -1.0
    r = calibrate_from_runs(str(never), str(always), str(tmp_path / "cal"))
    assert r["n"] == 4 and r["mode"] == "multihop"  # q9 has no never-run row: not paired, not used
    assert (f"δ from the 4 questions both runs answered; 0 answered by {never} only and 1 by {always} only are "
            "left out") in capsys.readouterr().err  # it was not said: a run stopped early tuned δ on fewer, unsaid
    # retrieving on q2 and q3 only (delta in [-3.5, -1.0)) gives F1 (1 + 1 + 1 + 0.5) / 4
    assert r["chosen"]["f1"] == pytest.approx(0.875) and r["chosen"]["retrieval_rate"] == 0.5
    assert -3.5 <= r["chosen"]["delta"] < -1.0
    rows = [json.loads(x) for x in (tmp_path / "cal" / "calibration_rows.jsonl").read_text().splitlines()]
    assert [x["u"] for x in rows] == [-3.5, -1.0, "inf", "-inf"]
    info = {"model": "qwen2.5-coder-0.5b", "state_layer": 11, "state_source": "mlp"}
    assert r["written_to"] == str(calibration_path(info, "chat", "multihop"))
    # the multi-hop file is SeaKR's multi-hop threshold, and only that: simple QA keeps its own
    assert default_delta(info, "eigen", "chat", "multihop") == (r["chosen"]["delta"], r["written_to"])
    assert default_delta(info, "eigen", "chat", "simple")[1].startswith("packaged:")


def test_multihop_calibration_refuses_runs_that_are_not_its_two_branches(tmp_path):
    from seakr.eval.calibrate import calibrate_from_runs

    rows = [_score("q1", 1.0, [-2.0])]
    never = _branch_run(tmp_path / "never", rows, delta="inf")
    always = _branch_run(tmp_path / "always", rows, retrieval="always")
    other_k = _branch_run(tmp_path / "k10", rows, retrieval="always", k=10)
    adaptive = _branch_run(tmp_path / "adaptive", rows, delta=-1.6)
    with pytest.raises(ValueError, match="differ in k"):
        calibrate_from_runs(str(never), str(other_k), str(tmp_path / "o"))
    with pytest.raises(ValueError, match="not a multi-hop SeaKR run with delta = inf"):
        calibrate_from_runs(str(adaptive), str(always), str(tmp_path / "o"))
    with pytest.raises(ValueError, match="not a multi-hop SeaKR run with retrieval = always"):
        calibrate_from_runs(str(never), str(never), str(tmp_path / "o"))
    with pytest.raises(ValueError, match="nowhere: no such folder"):
        calibrate_from_runs(str(tmp_path / "nowhere"), str(always), str(tmp_path / "o"))
    (tmp_path / "bare").mkdir()
    with pytest.raises(ValueError, match="bare: not a run directory \\(no config.json\\)"):
        calibrate_from_runs(str(tmp_path / "bare"), str(always), str(tmp_path / "o"))
    # the same ids in two datasets paired a HotpotQA chain with a 2Wiki answer
    n2 = _branch_run(tmp_path / "n2", rows, data={"data": "/d/hotpot.json", "data_sha256": "aa"}, delta="inf")
    a2 = _branch_run(tmp_path / "a2", rows, data={"data": "/d/2wiki.json", "data_sha256": "bb"}, retrieval="always")
    with pytest.raises(ValueError, match=r"n2 and .*a2 answered different data files: not two branches"):
        calibrate_from_runs(str(n2), str(a2), str(tmp_path / "o"))


def test_calibrate_cli_from_runs_and_its_one_line_errors(tmp_path, monkeypatch, capsys):
    from seakr.cli import main

    monkeypatch.setenv("SEAKR_CACHE", str(tmp_path / "cache"))
    never = _branch_run(tmp_path / "never", [_score("q1", 0.0, [-1.0]), _score("q2", 1.0, [-3.0])], delta="inf")
    always = _branch_run(tmp_path / "always", [_score("q1", 1.0, []), _score("q2", 0.0, [])], retrieval="always")
    assert main(["calibrate", "--from-runs", str(never), str(always), "--out", str(tmp_path / "cal")]) == 0
    out = capsys.readouterr().out
    assert "chosen delta (multihop) = " in out and "retrieval rate 0.50, n=2" in out and "-multihop.json" in out
    # F1 is 1.0 for any delta in [-3, -1): the output says the tie reaches down to -3
    assert "the same F1 from delta -3.000 up (retrieval rate up to 0.50)" in out
    assert main(["calibrate", "--out", str(tmp_path / "cal2")]) == 2
    assert "give --data (simple QA), or --from-runs" in capsys.readouterr().err
    assert main(["calibrate", "--from-runs", str(never), str(always), "--data", "x.jsonl", "--out", str(tmp_path / "c3"),
                 "--no-write"]) == 0  # said, not refused: the runs fix the data
    assert "seakr: warning: calibrate --from-runs: --data is not read: the two runs fix" in capsys.readouterr().err
    assert main(["calibrate", "--from-runs", str(never), str(always), "--out", str(tmp_path / "cal"), "--no-write"]) == 0
    capsys.readouterr()  # its own earlier output is recomputed from the runs: rewritten

    # a folder where a run or study keeps rows is not: a simple-QA study's rows (hours of sampling) were replaced
    study = tmp_path / "study"
    study.mkdir()
    (study / "config.json").write_text(json.dumps({"study": "calibrate"}))
    rows = json.dumps({"id": "z", "u": 1.0, "f1_direct": 1.0, "f1_rag": 0.0}) + "\n"
    (study / "calibration_rows.jsonl").write_text(rows)
    for out in (study, never):
        assert main(["calibrate", "--from-runs", str(never), str(always), "--out", str(out), "--no-write"]) == 2
        assert f"{out}: holds the rows of a run or study (config.json" in capsys.readouterr().err
    assert (study / "calibration_rows.jsonl").read_text() == rows and not (never / "calibration_rows.jsonl").exists()
    for flags, said in ((["--limit", "3"], "--limit is"), (["--model", "smollm2-135m", "--k", "4"], "--model, --k are")):
        # said, not refused: the runs fix the model, data and options
        assert main(["calibrate", "--from-runs", str(never), str(always), "--out", str(tmp_path / "c4"), "--no-write",
                     *flags]) == 0
        assert f"calibrate --from-runs: {said} not read: the two runs fix" in capsys.readouterr().err
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert main(["calibrate", "--from-runs", str(never), str(always), "--out", str(tmp_path / "dangling")]) == 2
    assert "a symbolic link to nothing" in capsys.readouterr().err


_LIMITED_STATES = """
import errno, resource, signal, sys
import numpy as np
from seakr.eval.states import StateStore

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), as on a full disk
store = StateStore(sys.argv[1], ["L1:mlp", "L2:mlp"])
resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))
store.put("small", np.ones((2, 100)))
try:
    store.put("big", np.ones((2, 10_000)))
except OSError as e:
    print(errno.errorcode.get(e.errno))
"""


def test_a_state_the_disk_refuses_is_a_refused_write_and_leaves_no_half_file(tmp_path):
    """numpy's own write to a full disk raised "OSError: 34560 requested and 18368 written" (no errno, so a
    traceback instead of the full-disk line) and left half a .npy (found running detect on a full tmpfs)."""
    from seakr.eval.states import StateStore

    r = subprocess.run([sys.executable, "-c", _LIMITED_STATES, str(tmp_path / "states")], capture_output=True,
                       text=True, timeout=120)
    assert r.stdout == "EFBIG\n", r.stdout + r.stderr
    store = StateStore.open(tmp_path / "states")
    assert store.get("small").shape == (2, 100) and store.get("big") is None
    assert sorted(p.name for p in (tmp_path / "states").iterdir()) == sorted([store.path("small").name, "taps.json"])


_CALIBRATING = """
import sys
from seakr.eval.calibrate import _write_calibration

info = {"model": "m", "state_layer": 3, "state_source": "mlp"}
for i in range(40):
    _write_calibration({"chosen": {"delta": -3.0, "f1": 0.5, "retrieval_rate": 0.5}, "estimator": f"{sys.argv[1]}{i}",
                        "n": 10}, info, "plain", "simple")
"""


def test_two_calibrations_at_once_both_reach_the_models_file(tmp_path):
    """The model's calibration file is read, extended and written back: two calibrations at once (of two
    estimators, by two shards) each wrote back what it had read, and 60 of 120 thresholds were lost."""
    from seakr.methods.deltas import calibration_path

    env = {**os.environ, "SEAKR_CACHE": str(tmp_path)}
    runs = [subprocess.Popen([sys.executable, "-c", _CALIBRATING, tag], env=env) for tag in "ab"]
    assert [p.wait(timeout=120) for p in runs] == [0, 0]
    cal = tmp_path / "calibration" / calibration_path({"model": "m", "state_layer": 3, "state_source": "mlp"}).name
    assert sorted(json.loads(cal.read_text())["delta"]) == sorted(f"{t}{i}" for t in "ab" for i in range(40))


def test_a_damaged_state_store_names_its_file(tmp_path):
    """A truncated .npy was numpy's "EOF: reading array header" and a malformed taps.json json's own message,
    neither naming the file (found by cutting a detect study's state short and fitting a probe on it)."""
    from seakr.eval.states import StateStore

    store = StateStore(tmp_path / "states", ["L1:mlp", "L2:mlp"])
    store.put("q1", np.ones((2, 4)))
    assert store.get("q1").shape == (2, 4) and store.get("missing") is None
    store.path("q1").write_bytes(store.path("q1").read_bytes()[:50])
    with pytest.raises(ValueError, match=r"\.npy: the stored state of question 'q1' is damaged \(EOF"):
        store.get("q1")
    np.save(store.path("q2"), np.ones(4, dtype=np.float16))
    with pytest.raises(ValueError, match=r"question 'q2' has shape \(4,\), expected \(2, d\)"):
        store.get("q2")
    (tmp_path / "states" / "taps.json").write_text("{bad")
    with pytest.raises(ValueError, match=r"taps\.json:1: invalid JSON"):
        StateStore.open(tmp_path / "states")
    (tmp_path / "states" / "taps.json").write_text('{"a": 1}')
    with pytest.raises(ValueError, match="taps.json: expected a list of tap names"):
        StateStore.open(tmp_path / "states")


def test_a_state_past_float16_range_is_stored_as_it_is(tmp_path):
    """States are kept as float16, whose largest value is 65,504: a residual stream's massive activation (1e5)
    came back as inf, and the probe fit refused the study's states as non-finite."""
    from seakr.eval.states import StateStore

    store = StateStore(tmp_path / "states", ["L1:residual"])
    big, small = np.array([[1.0e5, -3.0, 0.5]]), np.array([[2.0, -3.0, 0.5]])
    store.put("big", big)
    store.put("small", small)
    assert np.array_equal(store.get("big"), big.astype(np.float32))
    assert np.array_equal(store.get("small"), small) and np.load(store.path("small")).dtype == np.float16


def test_a_study_refuses_a_question_beyond_the_context_before_the_first_and_names_a_late_failure(tmp_path):
    """A question longer than the context ended a study where it stood (after the questions before it), with
    the model's line that named no question, and every --resume at the same place."""
    from types import SimpleNamespace

    from scripted import Reply, ScriptedLM
    from seakr.eval.example import Example
    from seakr.eval.studies import _each

    class Short(ScriptedLM):
        def info(self):
            return {**super().info(), "context_tokens": 50}

    method = SimpleNamespace(lm=Short(lambda v: Reply("x")), describe=lambda: {"method": "seakr"})
    exs = [Example("ok", "A short question?", ["a"]), Example("long", "word " * 60, ["a"])]
    with pytest.raises(ValueError, match="^question long: 60 tokens, more than the model's 50-token context; nothing more"):
        _each("s", method, exs, str(tmp_path / "a"), "rows.jsonl", lambda ex: {"id": ex.id})
    assert not (tmp_path / "a" / "rows.jsonl").read_text()

    def fails_late(ex):  # a prompt that, with the study's own text, no longer fits
        if ex.id == "late":
            raise ValueError("prompt of 70 tokens does not fit the model's 50-token context")
        return {"id": ex.id}

    exs = [Example("ok", "A short question?", ["a"]), Example("late", "A longer question?", ["a"])]
    with pytest.raises(ValueError, match=r"^question late: prompt of 70 tokens .*; the 1 rows before it are kept$"):
        _each("s", method, exs, str(tmp_path / "b"), "rows.jsonl", fails_late)


def test_a_resume_with_a_smaller_limit_keeps_the_studys_files_of_every_row(tmp_path, capsys):
    """`detect --resume --limit 5` over a study of 30 wrote detect.json (and roc.png) of its 5 questions over the
    study's; a calibration's resume wrote the threshold chosen on the few into the model's file. The summary
    printed is of the questions asked for; the study's files stay of every row it holds, and a warning says so."""
    from types import SimpleNamespace

    from scripted import Reply, ScriptedLM
    from seakr.eval.example import Example
    from seakr.eval.finished import study_of_rows
    from seakr.eval.studies import _each

    method = SimpleNamespace(lm=ScriptedLM(lambda v: Reply("x")), describe=lambda: {"method": "seakr"})
    exs = [Example(f"q{i}", f"Question {i}?", ["a"]) for i in range(6)]
    _each("s", method, exs, str(tmp_path / "e"), "rows.jsonl", lambda ex: {"id": ex.id})
    rows, held = _each("s", method, exs[:2], str(tmp_path / "e"), "rows.jsonl", lambda ex: {"id": ex.id}, resume=True)
    assert [r["id"] for r in rows] == ["q0", "q1"] and len(held) == 6
    cal = [{"id": f"q{i}", "u": float(i), "f1_direct": float(i < 3), "f1_rag": 1.0, "direct": "a", "rag": "b"}
           for i in range(6)]
    cfg = {"method": {"model": {"model": "m"}, "config": {"estimator": "eigen", "k": 4, "alpha": 0.001,
                                                          "prompt_style": "chat", "n_candidates": 3, "rerank_z": 1.645}}}
    s = study_of_rows("calibrate", str(tmp_path), cal, cfg, {"q0", "q1"}, write=False)
    assert s["n"] == 2 and json.loads((tmp_path / "calibration.json").read_text())["n"] == 6
    assert "calibrate: " in (err := capsys.readouterr().err) and "holds 6 answered questions, 4 beyond these 2" in err
    det = [{"id": f"q{i}", "answer": "x", "golds": ["x"], "f1": float(i % 2), "seconds": 0.1,
            "scores": {"eigen": float(i)}} for i in range(6)]
    assert study_of_rows("detect", str(tmp_path), det, cfg, {"q0", "q1", "q2"})["n"] == 3
    assert json.loads((tmp_path / "detect.json").read_text())["n"] == 6
    assert study_of_rows("detect", str(tmp_path), det, cfg, {f"q{i}" for i in range(6)})["n"] == 6
    assert capsys.readouterr().err.count("beyond these") == 1  # the whole study asked for: nothing to say


@pytest.mark.parametrize("cmd,rows_name,row,needle", [
    ("detect", "detect_rows.jsonl", {"id": "a", "answer": "x", "scores": {}}, "missing field 'f1'"),
    ("detect", "detect_rows.jsonl", {"id": "a", "f1": 0.0, "scores": {"eigen": [1]}}, "field scores.eigen: expected an uncertainty (a number) or null, got [1]"),
    ("rerank-study", "rerank_rows.jsonl", {"id": "a", "titles": "T", "gold": [], "u": []}, "field titles: expected a list of texts, got 'T'"),
    ("calibrate", "calibration_rows.jsonl", {"id": "a", "u": 1.0, "f1_direct": 1.0}, "missing field 'f1_rag'"),
    # each reached the summary's arithmetic after the last question: float("x"), auroc(1 U, 2 titles), 0 + None
    ("calibrate", "calibration_rows.jsonl", {"id": "a", "u": "x", "f1_direct": 1.0, "f1_rag": 0.0},
     "field u: not an uncertainty: 'x'"),
    ("rerank-study", "rerank_rows.jsonl", {"id": "a", "titles": ["T", "U"], "gold": [], "u": [1.0]},
     "field u holds 1 values for 2 titles"),
    ("rerank-study", "rerank_rows.jsonl", {"id": "a", "titles": ["T"], "gold": [], "u": [1.0], "u_se": "x"},
     "field u_se: expected a list of uncertainties, got 'x'"),
    ("rerank-study", "rerank_rows.jsonl", {"id": "a", "titles": ["T"], "gold": [], "u": [1.0], "engine_top1_gold": None},
     "field engine_top1_gold: expected true or false, got None"),
    ("eval", "scores.jsonl", {"id": "a", "em": 2, "f1": 1.0}, "field em: expected a number from 0 to 1 or null, got 2"),
])
def test_a_resume_reads_the_rows_it_continues_before_the_model_loads(tmp_path, cmd, rows_name, row, needle):
    """A study resumed over a row it did not write answered every new question, then stopped in its summary
    with a KeyError (the model had loaded, the questions had run); eval's resume read it only once loaded."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "config.json").write_text(json.dumps({"study": cmd}))
    (out / rows_name).write_text(json.dumps(row) + "\n")
    extra = ["--method", "cot"] if cmd == "eval" else []
    r = run_cli(cmd, "--data", HOTPOT, "--out", str(out), "--resume", *extra)
    assert r.returncode == 2 and "config:" not in r.stderr, r.stderr
    assert r.stderr.startswith(f"seakr: error: {out / rows_name}:1: {needle}") and r.stderr.count("\n") == 1, r.stderr


ROWS_OF = {"eval": "results.jsonl", "detect": "detect_rows.jsonl", "calibrate": "calibration_rows.jsonl",
           "rerank-study": "rerank_rows.jsonl"}


@pytest.mark.parametrize("cmd", list(ROWS_OF))
@pytest.mark.parametrize("record, flags, needle", [
    (True, [], "holds results already; pass --resume to continue or choose another --out"),
    (False, ["--resume"], "holds rows but no config.json, so nothing says which run they belong to"),
])
def test_every_refusal_of_a_runs_folder_comes_before_the_model_loads(tmp_path, cmd, record, flags, needle):
    """The row log's own refusals (rows there without --resume; rows that no record names) were made as it opened,
    after the model had loaded: each run's folder is claimed before the load, so none of them waits for it."""
    out = tmp_path / "out"
    out.mkdir()
    if record:
        (out / "config.json").write_text(json.dumps({"study": cmd}))
    (out / ROWS_OF[cmd]).write_text(json.dumps({"id": "a"}) + "\n")
    extra = ["--method", "cot"] if cmd == "eval" else []
    r = run_cli(cmd, "--data", HOTPOT, "--out", str(out), *flags, *extra)
    assert r.returncode == 2 and "config:" not in r.stderr, r.stderr
    assert r.stderr == f"seakr: error: {out}: {needle}" + r.stderr.split(needle, 1)[1], r.stderr
    assert r.stderr.count("\n") == 1 and sorted(p.name for p in out.iterdir()) == sorted(
        [ROWS_OF[cmd]] + (["config.json"] if record else [])), r.stderr  # as it was


def test_a_claimed_folder_that_never_began_is_left_as_it_was(tmp_path):
    """A run refused after its folders were claimed (here: nothing to pool for a method that searches) leaves
    none of the folders it made, so the same --out works at once for the next command."""
    from seakr.eval.plan import EvalPlan, run_plan
    from seakr.eval.specs import PlanError

    out = tmp_path / "new" / "grid"
    plan = EvalPlan(data=fixture_path("qa_mini.qa.csv"), out=str(out), runs=["ircot", "cot"])
    with pytest.raises(ValueError, match="carry no context paragraphs to pool"):
        run_plan(plan)
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "mine").mkdir()
    with pytest.raises(ValueError, match="carry no context paragraphs"):
        run_plan(EvalPlan(data=fixture_path("qa_mini.qa.csv"), out=str(tmp_path / "mine"), runs=["ircot"]))
    assert [p.name for p in tmp_path.iterdir()] == ["mine"] and list((tmp_path / "mine").iterdir()) == []
    (tmp_path / "mine" / "results.jsonl").write_text(json.dumps({"id": "a"}) + "\n")
    with pytest.raises(PlanError, match="holds results already"):  # before the data's paragraphs are looked at
        run_plan(EvalPlan(data=fixture_path("qa_mini.qa.csv"), out=str(tmp_path / "mine"), runs=["ircot"]))


def test_a_probe_is_not_fitted_on_a_detect_row_another_tool_wrote(tmp_path):
    from seakr.eval.fitting import fit_from_studies

    (tmp_path / "config.json").write_text(json.dumps({"study": "detect", "form": "short"}))
    (tmp_path / "detect_rows.jsonl").write_text(json.dumps({"id": "a", "answer": "x", "correct": True}) + "\n")
    with pytest.raises(ValueError, match=r"detect_rows.jsonl:1: missing fields 'f1', 'scores'"):
        fit_from_studies([str(tmp_path)], "short", None, 5)


def test_a_run_and_a_study_never_share_a_folder(tmp_path):
    """A detect study sent to an eval run's folder replaced the run's config.json: `compare` then called the
    run a detect study and its --resume was refused. Each door refuses the other kind's folder, the
    command line before the model loads."""
    from seakr.common.runs import SCORES

    run, study = tmp_path / "run", tmp_path / "study"
    with RowLog(run, "results.jsonl", {"name": "cot", "method": {"method": "cot"}}, companion=(SCORES, dict)) as log:
        log.append({"id": "a", "em": 1.0, "f1": 1.0})
    with RowLog(study, "detect_rows.jsonl", {"study": "detect"}) as log:
        log.append({"id": "a", "f1": 1.0, "scores": {}})
    before = (run / "config.json").read_text()
    for folder, rows, other in ((run, "detect_rows.jsonl", "an eval run (results.jsonl, scores.jsonl)"),
                                (study, "results.jsonl", "a detect study (detect_rows.jsonl)")):
        with pytest.raises(ValueError, match=re.escape(f"{folder}: holds the rows of {other}")):
            RowLog(folder, rows, {"study": "x"})
    assert (run / "config.json").read_text() == before
    for argv in (["detect", "--data", HOTPOT, "--out", str(run)], ["rerank-study", "--data", HOTPOT, "--out", str(run)],
                 ["eval", "--data", HOTPOT, "--method", "cot", "--out", str(study)]):
        r = run_cli(*argv)
        assert r.returncode == 2 and "holds the rows of" in r.stderr and "config:" not in r.stderr, r.stderr
    assert (run / "config.json").read_text() == before


def test_a_study_resumes_only_as_it_was_asked(tmp_path):
    """`seakr detect --form short --resume` over a cot study appended short answers to cot ones and recorded
    the study as short: a probe fitted on it read cot states as short-form ones."""
    cfg = {"study": "detect", "method": {"config": {"k": 3}}, "setting": "closed-book", "form": "cot", "states": ["L14:mlp"]}
    with RowLog(tmp_path, "detect_rows.jsonl", cfg) as log:
        log.append({"id": "a", "f1": 1.0, "scores": {}})
    for key, value in (("form", "short"), ("setting", "open-book"), ("states", ["L14:mlp", "L3:mlp"])):
        with pytest.raises(ValueError, match=f"--resume with {key} .* but the study recorded {key}"):
            RowLog(tmp_path, "detect_rows.jsonl", {**cfg, key: value}, resume=True)
    assert json.loads((tmp_path / "config.json").read_text())["form"] == "cot"
    with RowLog(tmp_path, "detect_rows.jsonl", cfg, resume=True) as log:  # as it was asked: resumes
        assert [r["id"] for r in log.rows] == ["a"]
    older = {k: v for k, v in cfg.items() if k != "form"}  # a study recorded before the form was: taken as it is
    (tmp_path / "config.json").write_text(json.dumps(older))
    with RowLog(tmp_path, "detect_rows.jsonl", cfg, resume=True) as log:
        assert [r["id"] for r in log.rows] == ["a"]


def test_detect_says_an_index_it_would_never_search_and_leaves_it_out(tmp_path, capsys):
    """`seakr detect --index IDX` (or --filler) was taken, opened and never read: the study searches nothing, so
    it is said and left out (not opened: a folder that is no index is no error here)."""
    from seakr.cli import main

    for flag in ("--index", "--filler"):
        assert main(["detect", "--data", str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "d"), flag,
                     str(tmp_path)]) == 2
        warning, error = capsys.readouterr().err.splitlines()
        assert warning.startswith(f"seakr: warning: detect: {flag} is not read: the study searches nothing")
        assert "none.jsonl" in error
    assert not (tmp_path / "d").exists()


def test_detect_resumed_in_another_form_is_refused_before_the_model_loads(tmp_path):
    out = tmp_path / "study"
    out.mkdir()
    (out / "config.json").write_text(json.dumps({"study": "detect", "form": "cot", "setting": "closed-book"}))
    r = run_cli("detect", "--data", HOTPOT, "--out", str(out), "--resume", "--form", "short")
    assert r.returncode == 2 and "config:" not in r.stderr, r.stderr
    assert f'{out}: --resume with form "short" but the study recorded form "cot"' in r.stderr


def test_open_book_detection_without_gold_passages_is_refused_before_the_model_loads(tmp_path, capsys):
    """A data file without each question's gold passage was refused only once the model had loaded (7 s with
    the test model); the Python API's detect() refuses it the same way."""
    from seakr.cli import main
    from seakr.eval.detect import check_open_book

    data = tmp_path / "qa.jsonl"
    data.write_text('{"id": "q1", "question": "Where?", "answer": "x"}\n')
    assert main(["detect", "--data", str(data), "--out", str(tmp_path / "o"), "--setting", "open-book",
                 "--model", "smollm2-135m"]) == 2
    err = capsys.readouterr().err
    assert "open-book detection needs each question's gold passage; 1 have none (first: q1)" in err
    assert "config:" not in err
    check_open_book([], "closed-book")


def test_a_detect_resume_with_another_probe_file_or_wording_is_refused_before_the_model_loads(tmp_path, capsys):
    """Another --probe-file (or the check's wording) than the study recorded was refused by the row log, once
    the model had loaded; form and setting were already refused before."""
    from seakr.cli import main
    from seakr.prompts import wording_record

    out = tmp_path / "study"
    out.mkdir()
    from pathlib import Path

    import seakr.probes

    packaged = str(Path(seakr.probes.__file__).parent / "data" / "qwen2.5-coder-0.5b-short.probe.json")
    for recorded, needle in (({"probe_model": {"tap": "L1:mlp", "form": "short", "n": 1}}, "probe_model"),
                             ({"wording": {**wording_record(), "system": "Answer in one word."}}, "wording")):
        (out / "config.json").write_text(json.dumps({"study": "detect", "form": "short", "setting": "closed-book",
                                                     **recorded}))
        assert main(["detect", "--data", HOTPOT, "--out", str(out), "--resume", "--form", "short", "--probe-file",
                     packaged, "--model", "smollm2-135m"]) == 2
        err = capsys.readouterr().err
        assert f"--resume with {needle}" in err and "config:" not in err, err


def test_a_detect_resume_with_other_taps_is_refused_before_the_model_loads(tmp_path, capsys):
    """Other --probe taps than the study recorded were refused by the row log, once the model had loaded. The
    recorded taps begin with the model's own; the same taps again pass on to the load."""
    from types import SimpleNamespace

    from seakr.cli import main
    from seakr.cli.studies import detect_known
    from seakr.eval.resume import check_same_run

    def _detect_asks_as_before(args, probe):  # what the claimed log holds to the record
        recorded = json.loads((out / "config.json").read_text())
        check_same_run(recorded, detect_known(args, probe)(recorded), out, partial=True)

    out = tmp_path / "study"
    out.mkdir()
    (out / "config.json").write_text(json.dumps({"study": "detect", "form": "cot", "setting": "closed-book",
                                                 "states": ["L14:mlp", "L5:mlp"], "probe": ["L14:mlp", "L5:mlp"]}))
    for probe, now in (("6:mlp", '["L14:mlp", "L6:mlp"]'), ("5:mlp,L6:mlp", '["L14:mlp", "L5:mlp", "L6:mlp"]'),
                       (None, '["L14:mlp"]')):
        assert main(["detect", "--data", HOTPOT, "--out", str(out), "--resume", "--model", "smollm2-135m"]
                    + (["--probe", probe] if probe else [])) == 2
        err = capsys.readouterr().err
        assert f'--resume with states {now} but the study recorded states ["L14:mlp", "L5:mlp"]' in err, err
        assert "config:" not in err
    for probe in ("5:mlp", "L5:mlp,14:mlp"):  # as recorded (the model's own tap may be named)
        _detect_asks_as_before(SimpleNamespace(resume=True, out=str(out), form="cot", setting="closed-book",
                                               probe=probe, model="smollm2-135m"), None)
    # every layer of a packaged model is known before it loads (30 for the test model); another folder's, later
    with pytest.raises(ValueError, match=r'--resume with states \["L14:mlp", "L0:mlp", "L1:mlp", .* but the study recorded'):
        _detect_asks_as_before(SimpleNamespace(resume=True, out=str(out), form="cot", setting="closed-book",
                                               probe="mlp", model="smollm2-135m"), None)
    _detect_asks_as_before(SimpleNamespace(resume=True, out=str(out), form="cot", setting="closed-book",
                                           probe="all", model=str(out)), None)  # a folder without a depth: later
    folder = tmp_path / "model"  # a model folder's depth is in its config.json: no weights are needed to compare
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"num_hidden_layers": 30}))
    assert main(["detect", "--data", HOTPOT, "--out", str(out), "--resume", "--model", str(folder), "--probe",
                 "mlp"]) == 2
    err = capsys.readouterr().err
    assert '--resume with states ["L14:mlp", "L0:mlp", "L1:mlp",' in err and "cannot load" not in err, err
    for probe in ("30:mlp", "L2:mlp,99:residual"):  # beyond its layers: before the load too (it was after)
        assert main(["detect", "--data", HOTPOT, "--out", str(tmp_path / "new"), "--model", str(folder),
                     "--probe", probe]) == 2
        err = capsys.readouterr().err
        assert "(LAYER 0..29, SOURCE mlp or residual)" in err and "cannot load" not in err, err
    every = ["L14:mlp"] + [f"L{i}:{s}" for s in ("mlp", "residual") for i in range(30) if (i, s) != (14, "mlp")]
    (out / "config.json").write_text(json.dumps({"study": "detect", "form": "cot", "setting": "closed-book",
                                                 "states": every, "probe": every}))
    _detect_asks_as_before(SimpleNamespace(resume=True, out=str(out), form="cot", setting="closed-book",
                                           probe="all", model="smollm2-135m"), None)  # as it was asked: on to the load


def test_a_detect_table_over_one_class_says_why_it_has_no_auroc():
    """Every cell read "nan" when all answers were wrong (a first try on a few questions), saying nothing of why."""
    from seakr.eval.detect import detect_markdown

    nan = float("nan")
    r = {"n": 2, "setting": "closed-book", "accuracy_f1>=0.5": 0.0, "state": "L14:mlp",
         "estimators": {"eigen": {"auroc": nan, "pcc_with_1_minus_f1": nan}},
         "probe_best": {"auroc": nan, "tap": "L14:mlp", "k": 20}}
    text = detect_markdown(r)
    assert "nan" not in text and "| eigen | – | – |" in text and "best EigenScore AUROC – at L14:mlp" in text
    assert text.endswith("(no AUROC: it compares right answers with wrong ones, and all 2 were wrong)")
    r.update({"accuracy_f1>=0.5": 0.5, "estimators": {"eigen": {"auroc": 0.75, "pcc_with_1_minus_f1": 0.5}}})
    assert "| eigen | 0.750 | 0.500 |" in detect_markdown(r) and "no AUROC" not in detect_markdown(r)


def test_a_detect_table_says_how_many_answers_were_empty_and_what_to_try():
    """SmolLM2 (an instruct model) given the short form's plain prompt ended every reply at once: 12 empty
    answers, all "wrong", and the table said only that no AUROC could be drawn."""
    from seakr.eval.detect import detect_markdown

    r = {"n": 12, "setting": "closed-book", "accuracy_f1>=0.5": 0.0, "state": "L14:mlp", "estimators": {},
         "empty_answers": 12, "prompt_style": "plain"}
    assert detect_markdown(r).endswith("(12 of 12 answers were empty; an instruct model often ends its reply at "
                                       "once given the plain prompt style: try --option prompt_style=chat)")
    r.update(prompt_style="chat", empty_answers=3)
    assert detect_markdown(r).endswith("(3 of 12 answers were empty)")
    r.update(empty_answers=0)
    assert "empty" not in detect_markdown(r)
    del r["empty_answers"]  # a study written before the count
    assert "empty" not in detect_markdown(r)


@pytest.mark.slow
def test_the_rerank_study_prints_strict_json(tmp_path, capsys):
    """One candidate per question: no pair to compare, a CI with no value. The summary line printed NaN (not
    JSON to jq or JSON.parse) while rerank.json held null; both hold null."""
    from seakr.cli import main

    out = tmp_path / "r"
    assert main(["rerank-study", "--model", "smollm2-135m", "--data", HOTPOT, "--limit", "2", "--option", "k=2",
                 "--option", "n_candidates=1", "--option", "max_new_tokens=4", "--option", "rerank_z=2.5",
                 "--out", str(out)]) == 0
    said = capsys.readouterr()
    assert "not read" not in said.err  # the study's guarded rule reads rerank_z, whatever the chain's rerank is
    printed = said.out.strip().splitlines()[-1]
    strict = lambda t: json.loads(t, parse_constant=lambda c: pytest.fail(f"{c} in {t[:80]}"))  # noqa: E731
    assert strict(printed)["gold_lower_u"]["ci95"] == [None, None] == strict((out / "rerank.json").read_text())["gold_lower_u"]["ci95"]


def test_a_study_refuses_questions_it_cannot_answer_once_each(tmp_path):
    """As run_eval: a generator of questions was len()'s TypeError in a study, or read up by the gold check so that
    nothing was asked; a question given twice was asked and counted twice."""
    from seakr.eval.example import Example

    exs = [Example("q0", "Who?", ["a"])]
    for study in (lambda e: detect(None, e, tmp_path / "d"), lambda e: calibrate(None, e, tmp_path / "c"),
                  lambda e: rerank_study(None, e, tmp_path / "r")):
        with pytest.raises(TypeError, match=r"^examples: a list of seakr Examples .*, got generator$"):
            study(ex for ex in exs)
        with pytest.raises(ValueError, match=r"^examples\[1\]: id 'q0' repeats the question at examples\[0\]"):
            study(exs * 2)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("cmd,data,summary", [("detect", HOTPOT, "detect.json"),
                                              ("rerank-study", HOTPOT, "rerank.json"),
                                              ("calibrate", fixture_path("nq_mini.oracle.jsonl"), "calibration.json")])
def test_a_finished_study_resumed_is_summarised_without_loading_the_model(tmp_path, monkeypatch, capsys, cmd, data, summary):
    """A resumed study with a row for every question (a job resubmitted) loaded the model and pooled the index
    to find nothing to do. Its summary is now written again from the rows; a question left loads the model."""
    from scripted import Reply, ScriptedLM

    from seakr.cli import main
    from seakr.eval.specs import ModelSpec

    class Named(ScriptedLM):  # the model the command names, as its info() says
        def __init__(self, name):
            super().__init__(lambda v: Reply("Paris."))
            self.model_name = name

        def info(self):
            return {**super().info(), "model": self.model_name, "layers": 2}

    loads = []
    monkeypatch.setattr(ModelSpec, "load", lambda self: loads.append(self.model) or Named(self.model))
    out = tmp_path / "s"

    def argv(limit=2, model="smollm2-135m", *extra):
        return [cmd, "--data", data, "--out", str(out), "--model", model, "--limit", str(limit), "--option", "k=3",
                *(["--no-write"] if cmd == "calibrate" else []), *extra]

    assert main(argv()) == 0 and loads == ["smollm2-135m"]
    first, printed = (out / summary).read_text(), capsys.readouterr().out
    (out / summary).unlink()
    assert main(argv(2, "smollm2-135m", "--resume")) == 0 and loads == ["smollm2-135m"]  # not loaded again
    said = capsys.readouterr()
    assert said.err.startswith("nothing left to do: the study holds a row for each of its 2 question(s)")
    assert (out / summary).read_text() == first and said.out == printed
    assert main(argv(3, "smollm2-135m", "--resume")) == 0 and loads == ["smollm2-135m"] * 2  # one left: loads
    assert main(argv(3, "qwen2.5-coder-0.5b", "--resume")) != 0  # another model: refused before it loads
    assert loads[-1] == "smollm2-135m"


@pytest.mark.parametrize("cmd,option,says", [
    ("detect", "gate=check", "--option gate: not read, a detect study asks"),  # was "simple mode's closed-book ..."
    ("detect", "max_steps=2", "--option max_steps: not read, a detect study asks"),
    ("calibrate", "delta=1", "--option delta: not read, a calibration asks"),
    ("rerank-study", "max_passages=2", "--option max_passages: not read, a re-rank study asks"),
    ("detect --form short", "n_shot=2", "--option n_shot: not read, a detect study in the short form asks"),
])
def test_a_study_says_an_option_it_never_reads_before_the_model_loads(tmp_path, cmd, option, says):
    """A study asks its own questions: a chain's or a gate's option is said and left out, not refused (one set of
    flags serves every study), before anything else is checked or loaded."""
    r = run_cli(*cmd.split(), "--model", "smollm2-135m", "--data", str(tmp_path / "none.jsonl"), "--option", option,
                "--out", str(tmp_path / "s"))
    warning, error = r.stderr.strip().splitlines()
    assert r.returncode == 2 and warning.startswith("seakr: warning: ") and says in warning, r.stderr
    assert "it reads alpha, " in warning and "none.jsonl" in error and not (tmp_path / "s").exists()
    if "short" in cmd:  # the flag too
        r = run_cli(*cmd.split(), "--data", str(tmp_path / "none.jsonl"), "--prompt-set", "hotpotqa", "--out",
                    str(tmp_path / "s"))
        assert "seakr: warning: detect: --prompt-set is not read: the short form asks without" in r.stderr, r.stderr


def test_a_study_reads_its_own_options_only():
    from seakr.eval.studies import read_study_options

    assert read_study_options("detect", {"gate": "check", "k": 2}) == {"k": 2}
    assert read_study_options("detect", {"n_shot": 2, "k": 2}, form="short") == {"k": 2}
    assert read_study_options("calibrate", {"estimator": "energy"}) == {"estimator": "energy"}


def test_a_threshold_written_from_few_questions_is_said_to_be_thin(tmp_path, monkeypatch, capsys):
    """`seakr calibrate` on 6 questions wrote a delta that every later SeaKR run of the model read in place of the
    packaged one (taken from 30 to 50), with nothing said but "written to"."""
    from seakr.eval.calibrate import FEW_TUNING, _write_calibration

    monkeypatch.setenv("SEAKR_CACHE", str(tmp_path))
    info = {"model": "m", "state_layer": 3, "state_source": "mlp"}
    for n, said in ((6, True), (FEW_TUNING, False)):
        r = {"chosen": {"delta": -3.0, "f1": 0.5, "retrieval_rate": 0.5}, "estimator": "eigen", "n": n}
        _write_calibration(r, info, "plain", "simple")
        err = capsys.readouterr().err
        assert ("delta -3.000 chosen on 6 question(s)" in err and "every later SeaKR run of m at this tap reads it"
                in err) if said else err == "", err
