"""Fitting from a study's rows and stored states: the best tap wins by cross-validation, runs of another
model are refused, a calibration reads detect rows or SeaKR's final answers; the knowledge-check gate and
the final choice measured from rows, checked by hand."""

import json
import math
import re
import shutil

import numpy as np
import pytest

from helpers import run_cli
from seakr.eval.metrics import auroc
from seakr.eval.rows import ResultRow
from seakr.eval.selfknow import choose_gate_p, final_choice, gate_sweep
from seakr.eval.states import StateStore
from seakr.probes import load_probe
from seakr.eval.fitting import calibrate_from_studies, fit_from_studies, load_states


def make_study(folder, model="m", n=120, seed=0, taps=("L1:mlp", "L2:mlp"), wording=None, sampling=None, form=None):
    """A detect study on disk: the label is a linear function of the state at L2 only. ``sampling``: the
    method's sampling fields its config records (k, temperature, ...); ``form``: the answers' form it records."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"data": "train.csv", "method": {
        "model": {"model": model}, "config": {"prompt_style": "chat", **(sampling or {})}},
        **({"wording": wording} if wording else {}), **({"form": form} if form else {})}))
    store = StateStore(folder / "states", list(taps))
    w = rng.normal(size=8)
    rows = []
    for i in range(n):
        z = rng.normal(size=(len(taps), 8))
        wrong = z[-1] @ w > 0
        store.put(f"q{i}", z)
        rows.append({"id": f"q{i}", "f1": 0.0 if wrong else 1.0, "answer": "x",
                     "scores": {"eigen": float(z[-1] @ w + rng.normal() * 0.1)}})
    (folder / "detect_rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_the_tap_that_carries_the_label_wins(tmp_path):
    run = make_study(tmp_path / "s")
    probe, table = fit_from_studies([run], form="short")
    assert probe.tap == "L2:mlp" and table["L2:mlp"] > 0.9 > table["L1:mlp"]
    assert probe.provenance["taps_tried"] == table and probe.provenance["data"] == "train.csv"
    only, t = fit_from_studies([run], tap="L1:mlp")
    assert only.tap == "L1:mlp" and set(t) == {"L1:mlp"}
    with pytest.raises(ValueError, match="L9:mlp"):
        fit_from_studies([run], tap="L9:mlp")
    # spelled as `detect --probe` takes it: "1:mlp" was "the studies stored L1:mlp, L2:mlp"
    assert fit_from_studies([run], tap=" 1:mlp")[0].tap == "L1:mlp"
    for bad in ("L1", "all", "1:mlp,2:mlp", "", "l1:mlp"):
        with pytest.raises(ValueError, match=r"^--tap: .* is not one LAYER:SOURCE"):
            fit_from_studies([run], tap=bad)
    other = make_study(tmp_path / "o", model="other")
    with pytest.raises(ValueError, match="other"):
        fit_from_studies([run, other])


def test_a_question_two_studies_of_one_file_answered_counts_once(tmp_path):
    a = make_study(tmp_path / "a", n=60)
    b = make_study(tmp_path / "b", n=90, seed=1)  # ids q0..q59 again, of the same train.csv
    cfg = json.loads((b / "config.json").read_text())
    c = make_study(tmp_path / "c", n=60, seed=2)
    (c / "config.json").write_text(json.dumps({**cfg, "data": "other/train.csv"}))  # same ids, another file
    kept = []
    _, _, X, wrong, names, _ = load_states([a, b, c], kept)
    assert len(X) == len(kept) == 60 + 30 + 60 and names == ["train.csv", "other/train.csv"]
    assert [r["id"] for r in kept[60:90]] == [f"q{i}" for i in range(60, 90)]  # b's own rows, after a's
    assert {r["run"] for r in kept[60:90]} == {str(b)}  # each kept row names the study it came from
    assert np.allclose(X[0], StateStore.open(a / "states").get("q0"))  # the first run's copy is the one read


def test_a_fitted_file_names_the_form_its_studies_answered_in(tmp_path):
    """A probe or map of one form is refused on studies of another (a "short" gate probe fitted on
    chain-of-thought answers would read its threshold on the wrong scale); the step form, whose states no
    study stores, is refused by name; a study given twice counts once in a calibration, as in a probe."""
    cot, short = make_study(tmp_path / "cot", form="cot"), make_study(tmp_path / "short", form="short")
    with pytest.raises(ValueError, match=r"cot: a detect study of --form cot answers, not short"):
        fit_from_studies([short, cot], form="short")
    with pytest.raises(ValueError, match="--form short answers, not cot"):
        calibrate_from_studies([short], "eigen", form="cot")
    assert fit_from_studies([cot], form="cot")[0].form == "cot"
    for call in (lambda: fit_from_studies([short], form="step"), lambda: calibrate_from_studies([short], "eigen", form="step")):
        with pytest.raises(ValueError, match="--form step: no study stores"):
            call()
    with pytest.raises(ValueError, match="--form candidate: a re-rank candidate is scored by its probe"):
        calibrate_from_studies([short], "eigen", form="candidate")
    from seakr.eval.fitting import gate_from_runs

    with pytest.raises(ValueError, match="--form cot answers, not short"):  # the gate reads the check's answers
        gate_from_runs([cot], [], "check", bank=None)
    twice = calibrate_from_studies([short, short], "eigen")
    assert twice.provenance["n"] == 120 and twice.provenance["data"] == "train.csv"


def test_calibration_from_detect_rows_and_from_final_answers(tmp_path, capsys):
    cal = calibrate_from_studies([make_study(tmp_path / "s")], "eigen")
    assert cal(-3.0) > 0.8 and cal(3.0) < 0.2 and cal.provenance["model"] == "m"
    run = tmp_path / "eval"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"data": "t.json", "method": {
        "model": {"model": "m"}, "config": {"estimator": "eigen", "prompt_style": "chat"}}}))
    rows = [{"id": f"q{i}", "em": 0.0, "f1": 0.0, "final": {"candidates": {
        "rationale": {"answer": "a", "u": -6.0 + i, "f1": float(i < 3)},
        "knowledge": {"answer": "b", "u": -2.0, "f1": 1.0}}}} for i in range(6)]
    (run / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = calibrate_from_studies([run], "eigen", form="final-rationale")
    err = capsys.readouterr().err  # only that isotonic maps of 120 and 6 answers are unreliable
    assert r(-6.0) == 1.0 and r(0.0) == 0.0 and err.count("seakr: warning:") == err.count("an isotonic map of") == 2
    k = calibrate_from_studies([run], "eigen", form="final-knowledge")  # every knowledge answer right: fitted silently
    assert k(-2.0) == 1.0 and "calibration final-knowledge/eigen: all 6 answers are right; the map is the constant " \
        "base rate and ranks nothing" in capsys.readouterr().err
    with pytest.raises(ValueError, match="'prompt'"):
        calibrate_from_studies([make_study(tmp_path / "t")], "prompt")


def test_final_choice_rules_scored_by_hand():
    def row(ur, fr, uk, fk):  # score rows as a run commits them (a missing U is null there)
        return ResultRow.from_dict({"id": "q", "prediction": "", "em": 0, "f1": 0, "final": {"candidates": {
            "rationale": {"answer": "r", "u": ur, "f1": fr}, "knowledge": {"answer": "k", "u": uk, "f1": fk}}}})
    rows = [row(-6, 0.0, -2, 1.0), row(-6, 1.0, -2, 0.0), row(-5, 0.0, -5, 1.0), row(None, 0.0, -1, 0.0)]
    # calibrated: the knowledge form is right more often at any U, the rationale only below U -5.5
    pr = lambda u: 0.9 if u < -5.5 else 0.1  # noqa: E731
    pk = lambda u: 0.5  # noqa: E731
    t = final_choice(rows, pr, pk)
    assert t["n"] == 4 and t["differ"] == 3
    assert t["f1"]["raw_u"] == pytest.approx((0 + 1 + 1 + 0) / 4)  # lower U; tie -> knowledge; None = +inf
    assert t["f1"]["calibrated"] == pytest.approx((0 + 1 + 1 + 0) / 4)
    assert t["f1"]["rationale"] == 0.25 and t["f1"]["knowledge"] == 0.5 and t["f1"]["oracle"] == 0.75
    # differing rows: knowledge better in rows 0 and 2; U_r - U_k = -4, -4, 0 -> AUROC (0.5 + 1) / 2
    assert t["auroc_raw_u"] == pytest.approx(0.75)


def test_gate_sweep_composes_check_and_chain_by_hand():
    short = {"a": {"answer": "x", "f1": 1.0, "p": 0.9}, "b": {"answer": "y", "f1": 0.0, "p": 0.6},
             "c": {"answer": "", "f1": 0.0, "p": 0.95}, "d": {"answer": "z", "f1": 0.0, "p": 0.1}}
    chain = {k: ResultRow.from_dict({"id": k, "prediction": "", "em": f, "f1": f, "totals": {"retrievals": 2},
                                     "steps": [{"retrieved": True}]}) for k, f in zip("abcd", (0.0, 1.0, 1.0, 0.0))}
    s = gate_sweep(short, chain, lambda r: r["p"], grid=(0.0, 0.5, 0.7, 1.0))
    by = {c["gate_p"]: c for c in s["curve"]}
    assert by[1.0]["f1"] == s["chain_f1"] == 0.5 and by[1.0]["retrievals_per_q"] == 2
    assert by[0.7]["f1"] == 0.75 and by[0.7]["answered_by_check"] == 0.25  # a by the check; c has no answer
    assert by[0.5]["f1"] == 0.5 and by[0.0]["f1"] == 0.5 and by[0.0]["retrievals_per_q"] == 0.5
    assert choose_gate_p(s["curve"])["gate_p"] == 0.7
    assert s["check_auroc_wrong"] == pytest.approx(2 / 3)  # wrong b, c, d by -p: a ranks last
    assert math.isfinite(s["curve"][0]["minus_chain"]["mean_difference"])


def test_gate_level_is_the_chains_expected_f1_on_tuning_runs(tmp_path, capsys):
    from seakr.probes import Calibration
    from seakr.probes.bank import SelfKnowledge
    from seakr.eval.fitting import gate_from_runs

    bank_dir = tmp_path / "bank"
    bank_dir.mkdir()
    Calibration("short", "eigen", "isotonic", x=[-6.0, 0.0], y=[0.9, 0.1]).save(bank_dir / "m-short-eigen.calibration.json")
    for form, b in (("final-rationale", -2.0), ("final-knowledge", 0.0)):  # the knowledge answer is always preferred
        Calibration(form, "eigen", "platt", a=0.0, b=b).save(bank_dir / f"m-{form}-eigen.calibration.json")
    check = tmp_path / "check"
    check.mkdir()
    (check / "config.json").write_text(json.dumps({"data": "t.json"}))
    us = {"a": -6.0, "b": -3.0, "c": 0.0, "d": -5.4}  # P(correct) 0.9, 0.5, 0.1, 0.82
    (check / "detect_rows.jsonl").write_text("".join(
        json.dumps({"id": i, "answer": "x", "f1": float(i in "ab"), "scores": {"eigen": u}}) + "\n" for i, u in us.items()))
    chain = tmp_path / "chain"
    chain.mkdir()
    (chain / "config.json").write_text(json.dumps({"method": {"config": {}}}))
    rows = [{"id": i, "em": 0.0, "f1": 0.0, "totals": {"retrievals": 2}, "steps": [], "final": {"candidates": {
        "rationale": {"u": -6.0, "f1": 0.0}, "knowledge": {"u": -3.0, "f1": f}}}} for i, f in zip("abcd", (1.0, 0.0, 1.0, 0.0))]
    (chain / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = gate_from_runs([check], [chain], "check", SelfKnowledge("m", str(bank_dir)))
    assert res["chain_f1"] == 0.5 and res["gate_p"] == 0.5  # the knowledge answers' mean F1
    at = res["at_gate_p"]
    assert at["answered_by_check"] == 0.75 and at["f1"] == pytest.approx((1 + 1 + 1 + 0) / 4)  # a, b, d by the check; c by the chain
    assert at["retrievals_per_q"] == 0.5 and len(res["curve"]) == 101
    assert "another data file" not in capsys.readouterr().err  # the chain's config names no data: nothing to say
    (chain / "config.json").write_text(json.dumps({"method": {"config": {}}, "data": "/elsewhere/u.json"}))
    assert gate_from_runs([check], [chain], "check", SelfKnowledge("m", str(bank_dir)))["n"] == 4
    err = capsys.readouterr().err  # two files may number their questions alike (nq-0, row-2): paired by id, said
    assert f"{chain} read another data file than {check}: check and chain rows are paired by question id" in err
    # a check run of the chain's own file beside it (a fit's several train files): each chain run has its check
    own = tmp_path / "own"
    shutil.copytree(check, own)
    (own / "config.json").write_text(json.dumps({"data": "/elsewhere/u.json"}))
    gate_from_runs([check, own], [chain], "check", SelfKnowledge("m", str(bank_dir)))
    assert "another data file" not in capsys.readouterr().err


def test_the_probe_commands_write_files_that_load(tmp_path):
    from seakr.probes import Calibration, load_probe

    run = make_study(tmp_path / "s")
    fit = run_cli("probe", "fit", str(run), "--out", str(tmp_path / "p.json"))
    assert fit.returncode == 0, fit.stderr
    assert "at L2:mlp: cross-validated AUROC" in fit.stdout and "L1:mlp: cross-validated AUROC" in fit.stderr
    assert load_probe(tmp_path / "p.json").tap == "L2:mlp"
    cal = run_cli("probe", "calibrate", str(run), "--estimator", "eigen", "--kind", "platt", "--out", str(tmp_path / "c.json"))
    assert cal.returncode == 0 and Calibration.load(tmp_path / "c.json").kind == "platt", cal.stderr
    bad = run_cli("probe", "fit", str(tmp_path), "--out", str(tmp_path / "q.json"))
    assert bad.returncode == 2 and "not a detect study" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def rerank_study(folder, n_q=60, d=12, seed=0):
    """A re-rank study as `seakr rerank-study` leaves it: rows with the engine's scores, a state per candidate.
    The gold passage is the engine's top-1 on 70 % of questions; the state's feature 0 marks it on all."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"method": {"model": {"model": "m"}}, "data": "/x/train.json"}))
    store = StateStore(folder / "states", ["L3:mlp"])
    rows = []
    for q in range(n_q):
        gold = 0 if rng.random() < 0.7 else int(rng.integers(1, 3))
        titles = [f"t{q}-{j}" for j in range(3)]
        for j in range(3):
            store.put(f"q{q}#{j}", np.r_[(-1.0 if j == gold else 1.0) + 0.8 * rng.normal(), rng.normal(size=d - 1)])
        rows.append({"id": f"q{q}", "titles": titles, "gold": [titles[gold]], "scores": [12.0, 10.0, 9.0], "u": [None] * 3})
    (folder / "rerank_rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_the_candidate_probe_stacks_state_and_engine_into_one_linear_probe(tmp_path):
    from seakr.eval.fitting import candidate_rows, fit_candidate_probe

    run = rerank_study(tmp_path / "study")
    c = candidate_rows([run])
    assert c["states"].shape == (180, 12) and c["engine"].shape == (180, 5) and c["wrong"].sum() == 120
    full = fit_candidate_probe([run])
    assert full.form == "candidate" and full.dim == 17 and full.features[0] == "rank-0"
    assert "stacked" in full.provenance  # state logit first, then the engine features beside it
    # the folded probe is one linear function of [state, engine], scored as SeaKR scores it
    p = np.array([full.score(s, e) for s, e in zip(c["states"], c["engine"])])
    assert auroc(list(p), list(c["wrong"])) > max(auroc(list(-c["engine"][:, 0]), list(c["wrong"])), 0.8)
    assert fit_from_studies([run], form="candidate", tap="3:mlp")[0].tap == "L3:mlp"
    with pytest.raises(ValueError, match=r"^--tap L2:mlp: the re-rank studies stored L3:mlp only$"):  # was unread
        fit_from_studies([run], form="candidate", tap="L2:mlp")
    state_only, engine_only = fit_candidate_probe([run], with_engine=False), fit_candidate_probe([run], with_state=False)
    assert state_only.dim == 12 and not state_only.features and engine_only.dim == 5
    assert full.provenance["cv_auroc"] > engine_only.provenance["cv_auroc"]


def test_a_question_two_re_rank_studies_of_one_file_asked_counts_once(tmp_path):
    """As in a detect study: the same study named twice, or two overlapping studies of one file, pool each
    question once (a doubled question doubled its weight and the n a fitted file records)."""
    from seakr.eval.fitting import candidate_rows, fit_candidate_probe

    a, b = rerank_study(tmp_path / "a", n_q=40), rerank_study(tmp_path / "b", n_q=60, seed=1)  # q0..q39 again
    c = candidate_rows([a, a, b])
    assert c["states"].shape == (180, 12) and c["data"] == ["x/train.json"]
    assert c["keys"][:3] == [("q0", 0), ("q0", 1), ("q0", 2)] and np.allclose(c["states"][0], StateStore.open(a / "states").get("q0#0"))
    assert fit_candidate_probe([a, a]).provenance["n"] == fit_candidate_probe([a]).provenance["n"] == 120


def test_probe_fit_candidate_from_the_command_line(tmp_path):
    from seakr.cli import main

    run = rerank_study(tmp_path / "study")
    out = tmp_path / "m-candidate.probe.json"
    assert main(["probe", "fit", str(run), "--form", "candidate", "--out", str(out)]) == 0
    p = load_probe(out)
    assert p.form == "candidate" and p.tap == "L3:mlp" and p.features
    # a study from before the engine's scores were kept: one line saying to run it again
    old = rerank_study(tmp_path / "old")
    (old / "rerank_rows.jsonl").write_text("".join(json.dumps({k: v for k, v in json.loads(x).items() if k != "scores"}) + "\n"
                                                   for x in (old / "rerank_rows.jsonl").read_text().splitlines()))
    assert main(["probe", "fit", str(old), "--form", "candidate", "--out", str(out)]) == 2


def test_fitted_files_record_the_checks_wording_and_seakr_refuses_another(tmp_path):
    from scripted import ScriptedLM
    from seakr.methods import SeaKR
    from seakr.prompts import check_wording, wording_record

    ours, theirs = wording_record(), {**wording_record(), "system": "Say it in one word."}
    run = make_study(tmp_path / "s", wording=ours)
    probe, _ = fit_from_studies([run], form="short")
    cal = calibrate_from_studies([run], "eigen")
    assert probe.provenance["wording"] == ours == cal.provenance["wording"]
    check_wording(probe.provenance, "p")  # the same wording (or none recorded) passes
    check_wording({}, "old file")
    with pytest.raises(ValueError, match="different wordings"):  # two wordings' answers are not pooled
        fit_from_studies([run, make_study(tmp_path / "t", wording=theirs)], form="short")
    other, _ = fit_from_studies([make_study(tmp_path / "u", wording=theirs)], form="short")
    bank = tmp_path / "bank"
    bank.mkdir()
    other.model = "scripted"
    other.save(bank / "scripted-short.probe.json")
    calibrate_from_studies([make_study(tmp_path / "v", model="scripted", wording=theirs)], "eigen").save(
        bank / "scripted-short-eigen.calibration.json")
    for gate in ("probe", "check"):  # both gates read the short form's fitted files through one loader
        with pytest.raises(ValueError, match="another wording.*refit"):
            SeaKR(ScriptedLM(lambda v: None, dim=8), None, gate=gate, probes=str(bank))
    from seakr.eval.detect import detect
    with pytest.raises(ValueError, match="--probe-file.*another wording"):  # nor does a study score with it
        detect(SeaKR(ScriptedLM(lambda v: None, dim=8), None, gate="step"), [], str(tmp_path / "d"), form="short",
               probe_model=other)


def test_a_map_of_sampled_scores_is_read_only_under_its_sampling(tmp_path):
    """EigenScore at k = 5 or at another temperature is on another scale than a map fitted at k = 20: the map
    records how its studies sampled, and SeaKR (every door builds one), a study's --probe-file and the
    gate fit refuse it under another sampling with one line; greedy-only maps and state probes are not bound."""
    from scripted import ScriptedLM
    from seakr.methods import SeaKR
    from seakr.probes.bank import check_sampling, sampling_record

    ref = {"k": 20, "temperature": 1.0, "top_k": 50, "top_p": 0.9, "alpha": 1e-3}
    run = make_study(tmp_path / "s", model="scripted", sampling=ref)
    f = run / "detect_rows.jsonl"  # a greedy-only score beside EigenScore
    f.write_text("".join(json.dumps({**r, "scores": {**r["scores"], "max-entropy": r["scores"]["eigen"]}}) + "\n"
                         for r in map(json.loads, f.read_text().splitlines())))
    cal = calibrate_from_studies([run], "eigen")
    assert cal.provenance["sampling"] == ref
    assert "sampling" not in calibrate_from_studies([run], "max-entropy").provenance  # greedy: any sampling
    assert sampling_record(ref, ["ln-entropy"]) == {k: ref[k] for k in ("k", "temperature", "top_k", "top_p")}
    with pytest.raises(ValueError, match="sampled differently"):  # two samplings' scores are not pooled
        calibrate_from_studies([run, make_study(tmp_path / "t", model="scripted", sampling={**ref, "temperature": 0.5})], "eigen")
    state, _ = fit_from_studies([run, make_study(tmp_path / "u", model="scripted", sampling={**ref, "k": 5})], form="short")
    assert "sampling" not in state.provenance  # a state probe reads the greedy answer only
    bank = tmp_path / "bank"
    bank.mkdir()
    cal.save(bank / "scripted-short-eigen.calibration.json")
    lm = lambda: ScriptedLM(lambda v: None, dim=8)  # noqa: E731
    assert SeaKR(lm(), None, gate="check", probes=str(bank)).config.k == 20  # the fitted sampling reads it
    # the method's temperature is the chain's: the check samples at its map's unless told otherwise
    assert SeaKR(lm(), None, gate="check", probes=str(bank), temperature=0.7).config.check_temperature == 1.0
    for change in ({"k": 5}, {"check_temperature": 0.7}, {"top_p": 0.5}, {"alpha": 0.01}):
        with pytest.raises(ValueError, match=r"calibration\.json: fitted on eigen of samples drawn with .*this run samples with"):
            SeaKR(lm(), None, gate="check", probes=str(bank), **change)
    SeaKR(lm(), None, gate="check", probes=str(bank), check_estimator="eigen", max_new_tokens=50)  # not a sampling field
    stacked = state
    stacked.features, stacked.provenance["sampling"] = ["ln-entropy"], ref
    with pytest.raises(ValueError, match="--probe-file: fitted on ln-entropy"):
        check_sampling(stacked, {**ref, "k": 10}, "--probe-file")
    check_sampling(stacked, {**ref, "alpha": 0.5}, "--probe-file")  # alpha moves EigenScore, not LN-entropy


def test_an_eval_run_keeps_the_final_answers_states_and_a_final_form_probe_fits_on_them(tmp_path):
    """SeaKR through the scripted model in a real ``run_eval``: each final answer's greedy state lands in
    ``states/final-<form>/`` beside its row, and ``probe fit --form final-knowledge`` recovers the label
    (the knowledge answer is wrong exactly where feature 0 of its state is positive)."""
    from scripted import Reply, ScriptedLM, engine
    from seakr.eval.example import Example
    from seakr.eval.runner import run_eval
    from seakr.methods import SeaKR

    rng, dim = np.random.default_rng(0), 8
    wrong = {f"Which country is place {i} in?": bool(i % 2) for i in range(40)}

    def script(v):
        if not v.answer and v.passages:  # the knowledge answer: its state says whether it is wrong
            z = rng.normal(size=dim) * 0.3
            z[0] += 1.0 if wrong[v.question] else -1.0
            return Reply("It is in France. So the answer is France.", state=list(z))
        if v.forced:
            return Reply("France", state=list(rng.normal(size=dim)))
        return Reply("Place is in France" if not v.answer else "So the answer is France")

    idx = engine(tmp_path / "idx", {"France": "France is a country in Europe."})
    m = SeaKR(ScriptedLM(script, dim=dim), idx, k=2, gate="step", retrieval="always", rerank="probe",
              probes=_candidate_bank(tmp_path / "bank", dim))
    examples = [Example(f"q{i}", q, ["Spain" if w else "France"]) for i, (q, w) in enumerate(wrong.items())]
    run_eval(m, examples, tmp_path / "run")
    for form in ("final-rationale", "final-knowledge"):
        assert len(list((tmp_path / "run" / "states" / form).glob("*.npy"))) == 40
    probe, table = fit_from_studies([tmp_path / "run"], form="final-knowledge", folds=3)
    assert probe.form == "final-knowledge" and probe.tap == "L0:mlp" and table["L0:mlp"] > 0.95
    twice, _ = fit_from_studies([tmp_path / "run", tmp_path / "run"], form="final-knowledge", folds=3)
    assert twice.provenance["n"] == probe.provenance["n"] == 40  # a question in two runs counts once
    assert twice.provenance["data"] == probe.provenance["data"]  # and their one data file is named once
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "config.json").write_text((tmp_path / "run" / "config.json").read_text())
    (tmp_path / "bare" / "scores.jsonl").write_text((tmp_path / "run" / "scores.jsonl").read_text())
    with pytest.raises(ValueError, match="no states of the final-knowledge answers") as e:
        fit_from_studies([tmp_path / "bare"], form="final-knowledge")
    assert "\n" not in str(e.value)


def _candidate_bank(folder, dim):
    """A candidate probe for the scripted model (the re-rank reads it; this test only needs it to load)."""
    from seakr.probes.probe import ENGINE_FEATURES

    from seakr.probes import Probe

    folder.mkdir(parents=True)
    Probe("scripted", "L0:mlp", "candidate", [0.0] * (dim + len(ENGINE_FEATURES)), 0.0,
          [0.0] * (dim + len(ENGINE_FEATURES)), [1.0] * (dim + len(ENGINE_FEATURES)),
          features=list(ENGINE_FEATURES)).save(folder / "scripted-candidate.probe.json")
    return str(folder)


def test_a_stacked_check_probe_learns_what_the_scores_carry_beyond_the_state(tmp_path):
    """The label depends on the state at L2 and, as much, on a score the state does not show: the stacked
    probe beats the state probe and keeps both parts in one linear probe that re-scores its rows."""
    rng = np.random.default_rng(3)
    run = make_study(tmp_path / "s", n=300)
    rows = [json.loads(line) for line in (run / "detect_rows.jsonl").read_text().splitlines()]
    store = StateStore.open(run / "states")
    w = np.random.default_rng(0).normal(size=8)  # make_study's weights (its first draw)
    for r in rows:
        e = rng.normal()
        r["scores"] = {"eigen": e, "perplexity": float(np.exp(rng.normal()))}
        r["f1"] = 0.0 if store.get(r["id"])[-1] @ w / np.linalg.norm(w) + 1.5 * e > 0 else 1.0
    (run / "detect_rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    plain, _ = fit_from_studies([run], tap="L2:mlp")
    stacked, _ = fit_from_studies([run], tap="L2:mlp", features=["eigen", "perplexity"])
    assert stacked.features == ["eigen", "perplexity"] and stacked.dim == 8 + 2
    assert stacked.provenance["cv_auroc"] > plain.provenance["cv_auroc"] + 0.05
    wrong = [r["f1"] < 0.5 for r in rows]
    p = [stacked.score_check(store.get(r["id"])[1], r["scores"]) for r in rows]
    assert auroc(p, wrong) > 0.9
    with pytest.raises(ValueError, match="--features: prompt is not an estimator"):
        fit_from_studies([run], features=["prompt"])
    with pytest.raises(ValueError, match="only a short-form"):
        fit_from_studies([run], form="cot", features=["eigen"])


@pytest.mark.parametrize("features, says", [("eigen,prompt", "prompt is not an estimator"), (",,", "expected comma-separated names"),
                                             ("eigen,ln-entropy,eigen", "--features: eigen is named twice")])
def test_probe_fit_features_refuses_bad_names_in_one_line(tmp_path, features, says):
    run = make_study(tmp_path / "s")
    r = run_cli("probe", "fit", str(run), "--features", features, "--out", str(tmp_path / "p.json"))
    assert r.returncode == 2 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "p.json").exists()


def test_the_gate_refuses_chains_and_models_it_cannot_compose(tmp_path):
    """The chain runs are read before any fitted file: a missing folder (read as no rows before), a
    baseline's or a study's run, or a run of another model than the check's is named in one line."""
    from seakr.eval.fitting import gate_from_runs

    check = make_study(tmp_path / "check", model="m", form="short")

    def run(name, method="seakr", model="m", study=None):
        d = tmp_path / name
        d.mkdir()
        cfg = {"method": {"method": method, "model": {"model": model}}, **({"study": study} if study else {})}
        (d / "config.json").write_text(json.dumps(cfg))
        return d

    cases = [(tmp_path / "missing", "missing: no such folder"),  # was "not a run directory", as if files were missing
             (check / "config.json", "config.json: a file, not a study folder"),
             (run("ircot", method="ircot"), "ircot: a run of ircot; the chain is a SeaKR eval run"),
             (run("study", study="detect"), "study: a run of detect"),
             (run("other", model="o"), "different models: .*check: m, .*other: o")]
    for chain, message in cases:
        with pytest.raises(ValueError, match=message):
            gate_from_runs([check], [chain], "check", bank=None)


def _gate_runs(tmp_path, check_f1=(0.0, 0.0)):
    """A probes folder with the maps ``probe gate`` reads, a check study of two questions and a chain run."""
    from seakr.probes import Calibration

    bank = tmp_path / "bank"
    bank.mkdir()
    Calibration("short", "eigen", "isotonic", x=[-6.0, 0.0], y=[0.9, 0.1]).save(bank / "m-short-eigen.calibration.json")
    for form, b in (("final-rationale", -2.0), ("final-knowledge", 0.0)):
        Calibration(form, "eigen", "platt", a=0.0, b=b).save(bank / f"m-{form}-eigen.calibration.json")
    check, chain = tmp_path / "check", tmp_path / "chain"
    check.mkdir(), chain.mkdir()
    (check / "config.json").write_text(json.dumps({"data": "t.json", "method": {"model": {"model": "m"}, "config": {}}}))
    (check / "detect_rows.jsonl").write_text("".join(json.dumps({"id": i, "answer": "x", "f1": f, "scores": {"eigen": u}}) + "\n"
                                                     for (i, u), f in zip((("a", -6.0), ("b", -3.0)), check_f1)))
    (chain / "config.json").write_text(json.dumps({"method": {"model": {"model": "m"}, "config": {}}}))
    (chain / "scores.jsonl").write_text("".join(json.dumps({"id": i, "em": 0.0, "f1": 0.0, "totals": {"retrievals": 2}, "steps": [],
                                                            "final": {"candidates": {"rationale": {"u": -6.0, "f1": 0.0},
                                                                                     "knowledge": {"u": -3.0, "f1": 0.0}}}}) + "\n"
                                                for i in "ab"))
    return bank, check, chain


def test_a_gate_file_is_strict_json_when_an_auroc_has_no_value(tmp_path):
    """Check answers all wrong: the check's AUROC has no value. The gate file held a bare NaN (jq and
    JSON.parse refuse the whole file, as they refuse Python's Infinity); it is null there, as in every file."""
    from seakr.cli import main

    bank, check, chain = _gate_runs(tmp_path)
    out = tmp_path / "gate.json"
    assert main(["probe", "gate", "--check", str(check), "--chain", str(chain), "--probes", str(bank), "--out", str(out)]) == 0
    res = json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in the gate file"))
    assert res["check_auroc_wrong"] is None and res["n"] == 2


def test_the_chosen_gate_level_is_saved_where_a_run_reads_it(tmp_path, capsys):
    """`probe gate` wrote its curve and level to --out only: a model of one's own gated at the default level
    unless the level was copied into gates.json by hand. --save-level writes it there, keeping other entries."""
    from seakr.cli import main
    from seakr.probes.bank import DEFAULT_GATE_P, SelfKnowledge

    bank, check, chain = _gate_runs(tmp_path, check_f1=(1.0, 0.0))
    argv = ["probe", "gate", "--check", str(check), "--chain", str(chain), "--out", str(tmp_path / "g.json"), "--save-level"]
    assert main(argv) == 2 and "give it with --probes DIR" in capsys.readouterr().err  # the package's folder is not written
    assert SelfKnowledge("m", str(bank)).gate_p("check") == (DEFAULT_GATE_P, "default")
    (bank / "gates.json").write_text(json.dumps({"other-model": {"check": {"gate_p": 0.7}}}))
    assert main(argv + ["--probes", str(bank)]) == 0
    level = json.loads((tmp_path / "g.json").read_text())["gate_p"]
    assert f"gate level {level} for m (check) -> {bank / 'gates.json'}" in capsys.readouterr().out
    assert SelfKnowledge("m", str(bank)).gate_p("check") == (level, f"{bank / 'gates.json'}:m:check")
    saved = json.loads((bank / "gates.json").read_text())
    assert saved["other-model"] == {"check": {"gate_p": 0.7}} and saved["m"]["check"]["n"] == 2


def test_a_missing_fitted_file_names_the_command_whose_output_a_run_finds(tmp_path, capsys):
    """The bank reads a folder's files by their packaged names only: the refusal spelled no name, so a probe
    fitted to ``p.json`` as told was never found. Its command, run as written, now makes the file the bank reads."""
    import re
    import shlex

    from seakr.cli import main
    from seakr.probes.bank import SelfKnowledge

    run = make_study(tmp_path / "s")
    (tmp_path / "bank").mkdir()
    bank = SelfKnowledge("m", str(tmp_path / "bank"))
    for read in (lambda: bank.probe("short"), lambda: bank.calibration("short", "eigen")):
        with pytest.raises(ValueError, match="give .*bank as the probes option") as e:
            read()
        command = shlex.split(re.search(r"`seakr (.+?)`", str(e.value)).group(1))
        assert main(command + [str(run)]) == 0
        assert "note:" not in capsys.readouterr().err  # the name the bank reads: nothing to add
        assert read().form == "short"
    assert main(["probe", "fit", str(run), "--out", str(tmp_path / "p.json")]) == 0
    assert "a SeaKR run reads it from its probes folder only under the name m-short.probe.json" in capsys.readouterr().err


def test_a_map_of_studies_that_name_no_model_is_written_without_a_name_to_tell(tmp_path, capsys):
    """The note on the packaged name built it from the recorded model: a study that recorded none (an older one)
    failed with an AttributeError after its map was written."""
    from seakr.cli import main

    run = make_study(tmp_path / "s")
    cfg = json.loads((run / "config.json").read_text())
    del cfg["method"]["model"]
    (run / "config.json").write_text(json.dumps(cfg))
    assert main(["probe", "calibrate", str(run), "--estimator", "eigen", "--out", str(tmp_path / "c.json")]) == 0
    assert (tmp_path / "c.json").exists() and "note:" not in capsys.readouterr().err


def test_the_fitting_functions_take_one_study_alone_and_name_a_wrong_one(tmp_path):
    """fit_from_studies("studies/x") read the path letter by letter ("/: not a detect study"); calibrate_from_studies
    fitted from it but recorded its runs as letters; [] was ": no stored states to fit on", None Python's "not
    iterable"; load_probe(None) and Calibration.load(5) were pathlib's "expected str, bytes or os.PathLike object"."""
    from seakr.probes import Calibration

    make_study(tmp_path / "short", form="short")
    one = str(tmp_path / "short")
    assert fit_from_studies(one, form="short")[0].form == "short"
    assert calibrate_from_studies(one, "eigen").provenance["runs"] == ["short"]
    for call, error, said in ((lambda: fit_from_studies([]), ValueError, "studies: no study folder given"),
                              (lambda: fit_from_studies(None), TypeError, "studies: expected study folders (a list of "
                                                                          "paths), got NoneType"),
                              (lambda: calibrate_from_studies([one, 5], "eigen"), TypeError,
                               "studies: expected a folder's path, got int"),
                              (lambda: load_probe(None), TypeError, "probe: expected a probe file's path, got NoneType"),
                              (lambda: load_probe(" "), ValueError, "probe: an empty path; name the probe file"),
                              (lambda: Calibration.load(5), TypeError, "calibration: expected a calibration file's "
                                                                       "path, got int")):
        with pytest.raises(error, match="^" + re.escape(said) + "$"):
            call()


def test_a_state_that_cannot_be_pooled_is_named_with_its_question(tmp_path):
    """A non-finite state was "probe fit: X holds non-finite values (first in row 5)", a row of the pooled states
    (those without one left out), and a state of another width numpy's "all input arrays must have the same
    shape": neither named the study, the file or the question."""
    from seakr.eval.states import StateStore

    run = make_study(tmp_path / "s", n=40)
    StateStore.open(run / "states").put("q7", np.full((2, 8), np.nan))
    fit = run_cli("probe", "fit", str(run), "--out", str(tmp_path / "p.json"))
    assert fit.returncode == 2 and len(fit.stderr.strip().splitlines()) == 1, fit.stderr
    assert re.search(r"s/states/\w+\.npy: the stored state of question 'q7' holds non-finite values", fit.stderr)
    StateStore.open(run / "states").put("q7", np.zeros((2, 8)))
    other = make_study(tmp_path / "t", n=40, seed=1)
    cfg = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**cfg, "data": "train-2.csv"}))  # other questions, not read twice
    StateStore.open(other / "states").put("q3", np.zeros((2, 9)))
    for runs in ([run, other], [other]):  # another width in a second study, or within one
        with pytest.raises(ValueError, match=r"t/states/\w+\.npy: the stored state of question 'q3' is 9 wide, "
                                             r"the states read before it 8"):
            fit_from_studies(runs)
