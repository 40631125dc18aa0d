"""Learned probes: a known linear label is recovered; a probe refuses another model, tap or width with
one line; files round-trip; the fitter says when the labels cannot support it."""

import json
import re

import numpy as np
import pytest

from seakr.eval.metrics import auroc
from seakr.probes import Probe, fit_probe, load_probe
from seakr.probes.bank import SelfKnowledge


def synthetic(n=400, d=24, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.5, 3.0, size=d) + rng.normal(size=d)  # unequal scales, offsets
    w = rng.normal(size=d)
    wrong = (X - X.mean(0)) @ w + 0.2 * rng.normal(size=n) > 0
    return X, wrong


def test_probe_recovers_a_known_linear_label_on_held_out_states():
    X, wrong = synthetic(800)
    p = fit_probe(X[:600], wrong[:600], model="m", tap="L3:mlp", form="short")
    assert auroc(list(p.scores(X[600:])), list(wrong[600:])) > 0.95
    assert p.provenance["cv_auroc"] > 0.95 and p.provenance["n"] == 600
    assert 0.0 <= p.score(X[0]) <= 1.0


def test_a_probe_fits_and_scores_torch_states_of_any_dtype():
    """bf16 states (a model computing in bf16) were "probe fit: X must hold numbers"."""
    torch = pytest.importorskip("torch")
    X, wrong = synthetic(300)
    t = torch.tensor(X, dtype=torch.float32).bfloat16()
    p = fit_probe(t, wrong, model="m", tap="L3:mlp", form="short")
    assert p.score(t[0]) == pytest.approx(p.score(t[0].float().numpy()), abs=1e-12)
    assert list(p.scores(t[:4])) == [p.score(x) for x in t[:4].float().numpy()]
    assert p.provenance["cv_auroc"] > 0.9


def test_a_probes_probabilities_can_be_recalibrated_on_out_of_fold_logits():
    """``recalibrate=True``: over many features and a strong penalty a logistic fit's probabilities may sit in a
    narrow band (0.37-0.40 here) or at 0 and 1; a Platt fit on out-of-fold logits rescales them: held-out log-loss
    and Brier score fall, the ranking stays. (Off by default: on real train states it gained nothing.)"""
    rng = np.random.default_rng(1)
    for n, d, noise in ((200, 300, 2.0), (600, 24, 0.5)):
        X = rng.normal(size=(n + 2000, d))
        w = np.zeros(d)
        w[:10] = rng.normal(size=10)
        wrong = X @ w + noise * rng.normal(size=n + 2000) > 0.5
        held, y = X[n:], wrong[n:].astype(float)
        raw, cal = (fit_probe(X[:n], wrong[:n], model="m", tap="L1:mlp", form="short", recalibrate=r) for r in (False, True))
        loss = {}
        for name, p in (("raw", raw), ("cal", cal)):
            q = np.clip(p.scores(held), 1e-12, 1 - 1e-12)
            loss[name] = (-np.mean(y * np.log(q) + (1 - y) * np.log(1 - q)), np.mean((q - y) ** 2))
        assert loss["cal"][0] < loss["raw"][0] and loss["cal"][1] < loss["raw"][1], loss
        assert auroc(list(cal.scores(held)), list(y)) == pytest.approx(auroc(list(raw.scores(held)), list(y)))
        assert cal.provenance["platt"]["a"] > 0 and "platt" not in raw.provenance
    flat = fit_probe(rng.normal(size=(200, 8)), [True, False] * 100, model="m", tap="L1:mlp", form="short",
                     recalibrate=True)
    assert "skipped" in flat.provenance["platt"] or flat.provenance["platt"]["a"] > 0  # no signal: never inverted


def test_a_probe_fitted_on_fewer_answers_than_features_says_it_is_overconfident(capsys):
    """`docs/your-model.md` run with 60 tuning answers: the probe gave P(correct) 1.00 to a wrong answer, silently."""
    X, wrong = synthetic(260, d=300)
    fit_probe(X[:60], wrong[:60], model="m", tap="L3:mlp", form="short")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("seakr: warning: probe fit (short, L3:mlp): 60 answers for 300 features")
    fit_probe(X[:250], wrong[:250], model="m", tap="L3:mlp", form="short")  # enough answers
    fit_probe(*synthetic(60, d=8), model="m", tap="L3:mlp", form="short")  # few features (the re-rank's second stage)
    assert capsys.readouterr().err == ""


def test_probe_refuses_another_model_tap_or_width_with_one_line():
    X, wrong = synthetic()
    p = fit_probe(X, wrong, model="qwen2.5-coder-0.5b", tap="L11:mlp", form="short")
    p.check({"model": "qwen2.5-coder-0.5b", "layers": 24, "hidden_size": 24})
    for info, word in (({"model": "smollm2-135m", "layers": 30, "hidden_size": 24}, "smollm2-135m"),
                       ({"model": "qwen2.5-coder-0.5b", "layers": 8, "hidden_size": 24}, "outside"),
                       ({"model": "qwen2.5-coder-0.5b", "layers": 24, "hidden_size": 896}, "896")):
        with pytest.raises(ValueError, match=word) as e:
            p.check(info)
        assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="25 features"):
        p.score(np.zeros(25))


def test_a_probe_read_from_a_file_names_it_when_it_refuses_a_model(tmp_path):
    X, wrong = synthetic()
    fit_probe(X, wrong, model="qwen2.5-coder-0.5b", tap="L11:mlp", form="short").save(tmp_path / "p.json")
    with pytest.raises(ValueError) as e:
        load_probe(tmp_path / "p.json").check({"model": "qwen2.5-coder-0.5b", "layers": 8, "hidden_size": 24})
    assert str(e.value) == f"{tmp_path / 'p.json'}: probe tap L11:mlp is outside the model's 8 layers"


def test_probe_file_round_trips_and_bad_files_are_named(tmp_path):
    X, wrong = synthetic()
    p = fit_probe(X, wrong, model="m", tap="L2:residual", form="short", data="train.csv")
    p.save(tmp_path / "p.json")
    q = load_probe(tmp_path / "p.json")
    assert q.tap == "L2:residual" and q.layer_source == (2, "residual") and q.provenance["data"] == "train.csv"
    assert np.allclose(p.scores(X[:20]), q.scores(X[:20]))
    (tmp_path / "bad.json").write_text(json.dumps({"model": "m"}))
    with pytest.raises(ValueError, match="bad.json: not a probe file"):
        load_probe(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="form: one of short, cot"):
        Probe("m", "L1:mlp", "nope", [1.0], 0.0, [0.0], [1.0])


def test_fit_refuses_labels_that_cannot_support_cross_validation():
    X, _ = synthetic(40)
    for folds in (1, 0, 2.5):
        with pytest.raises(ValueError, match=r"^probe fit: folds: expected a whole number in \[2, inf\), got"):
            fit_probe(X, [True, False] * 20, model="m", tap="L1:mlp", form="short", folds=folds)
    with pytest.raises(ValueError, match="need at least 5 right and 5 wrong"):
        fit_probe(X, [True] * 38 + [False] * 2, model="m", tap="L1:mlp", form="short")


@pytest.mark.parametrize("edit,needle", [
    (dict(X="nan"), "X holds non-finite values (first in row 3)"),  # scikit-learn's "All the 5 fits failed" page
    (dict(wrong=[0, 1, 2] * 20), "labels must be booleans"),  # a probe of nothing, a traceback per fold
    (dict(wrong=["a", "b"] * 30), "labels must be booleans"),  # int()'s message
    (dict(X=[["x"] * 4] * 60), "X must hold numbers"),
    (dict(tap="eleven"), "probe fit: tap: must read LAYER:SOURCE"),  # written, then refused by every reader
    (dict(form="zzz"), "form: one of short, cot"),
    (dict(form="Final-Knowledge"), "not 'Final-Knowledge' (did you mean 'final-knowledge'?)"),  # the list alone
])
def test_fit_names_bad_states_labels_and_taps_before_fitting(edit, needle):
    X, wrong = synthetic(60, 4)
    if edit.get("X") == "nan":
        X[3, 1] = np.nan
        edit = {}
    kw = {**dict(X=X, wrong=wrong, model="m", tap="L1:mlp", form="short"), **edit}
    with pytest.raises(ValueError, match=re.escape(needle)):
        fit_probe(kw.pop("X"), kw.pop("wrong"), **kw)


def test_bank_says_how_to_fit_a_missing_file(tmp_path):
    bank = SelfKnowledge("some-model", str(tmp_path))
    with pytest.raises(ValueError, match="seakr probe fit"):
        bank.probe("short")
    with pytest.raises(ValueError, match="seakr probe calibrate"):
        bank.calibration("short", "eigen")
    assert bank.gate_p("check") == (0.5, "default")
    (tmp_path / "gates.json").write_text(json.dumps({"some-model": {"check": {"gate_p": 0.3}}}))
    assert bank.gate_p("check")[0] == 0.3 and bank.gate_p("probe")[0] == 0.5


def test_bank_names_a_file_that_is_not_json_and_a_folder_that_is_a_file(tmp_path):
    (tmp_path / "some-model-short.probe.json").write_text("{not json")
    (tmp_path / "gates.json").write_bytes(b"\xff\xfe")
    bank = SelfKnowledge("some-model", str(tmp_path))
    with pytest.raises(ValueError, match=r"some-model-short\.probe\.json:1: invalid JSON \(Expecting property name"):
        bank.probe("short")
    with pytest.raises(ValueError, match=r"gates\.json: not UTF-8 text"):
        bank.gate_p("check")
    with pytest.raises(ValueError, match="probes=.*gates.json: not a directory"):
        SelfKnowledge("some-model", str(tmp_path / "gates.json"))


@pytest.mark.parametrize("gates,needle", [
    ({"some-model": {"check": {"gate_p": 7}}}, "check: field gate_p: expected a number in [0, 1], got 7"),  # retrieved always
    ({"some-model": {"check": {"gate_p": "high"}}}, "field gate_p: expected a number in [0, 1], got 'high'"),
    ({"some-model": {"check": {"gate_p": float("nan")}}}, "field gate_p: expected a number in [0, 1], got nan"),
    ({"some-model": {"check": {"gate_p": True}}}, "field gate_p: expected a number in [0, 1], got True"),
    ({"some-model": {"check": {}}}, "check: missing field 'gate_p'"),
    ({"some-model": {"check": 0.3}}, 'check: expected {"gate_p": p, ...}, got 0.3'),
    ({"some-model": 3}, "expected {model: {check: ...}}"),
    ([1], "expected {model: {check: ...}}"),
])
def test_a_gate_level_that_is_not_a_probability_is_named_with_its_file(tmp_path, gates, needle):
    (tmp_path / "gates.json").write_text(json.dumps(gates))
    with pytest.raises(ValueError) as e:
        SelfKnowledge("some-model", str(tmp_path)).gate_p("check")
    assert str(e.value).startswith(f"{tmp_path / 'gates.json'}: ") and needle in str(e.value), str(e.value)
    (tmp_path / "gates.json").write_text(json.dumps({"other-model": gates}))  # another model's entry is not read
    assert SelfKnowledge("some-model", str(tmp_path)).gate_p("check") == (0.5, "default")


def test_a_table_that_is_not_an_object_is_refused_with_the_options(tmp_path):
    from seakr.methods.seakr import SeaKRConfig

    for name in ("gates.json", "reasoning.json", "decisions.json"):
        (tmp_path / name).write_text("[1]")
        with pytest.raises(ValueError, match=re.escape(f"{tmp_path / name}: expected {{model: {{")):
            SeaKRConfig(probes=str(tmp_path))
        (tmp_path / name).write_text("{}")
    SeaKRConfig(probes=str(tmp_path))


def test_a_reasoning_table_of_another_shape_is_named_with_its_file(tmp_path):
    bank = SelfKnowledge("some-model", str(tmp_path))
    assert bank.reasoning(["probe"]) == (None, "auto")
    for table, needle in (([1], "expected {model: {reasoning: ...}}"), ({"some-model": "probe"}, "expected {model"),
                          ({"some-model": {"reasoning": "zzz"}}, "reasoning 'zzz' is not one of probe")):
        (tmp_path / "reasoning.json").write_text(json.dumps(table))
        with pytest.raises(ValueError, match=re.escape(needle)):
            SelfKnowledge("some-model", str(tmp_path)).reasoning(["probe"])
    (tmp_path / "reasoning.json").write_text(json.dumps({"some-model": {"reasoning": "probe"}}))
    assert SelfKnowledge("some-model", str(tmp_path)).reasoning(["probe"])[0] == "probe"


PROBE = {"model": "some-model", "tap": "L1:mlp", "form": "short", "coef": [1.0], "intercept": 0.0,
         "mean": [0.0], "scale": [1.0], "C": 1.0, "provenance": {}, "features": []}
CAL = {"form": "short", "estimator": "eigen", "kind": "isotonic", "x": [-1.0, 1.0], "y": [0.9, 0.1],
       "provenance": {"model": "some-model"}}


@pytest.mark.parametrize("name,edit,message", [
    ("probe", {"coef": "abc"}, "field coef: must be a list of finite numbers"),  # numpy's "could not convert" before
    ("probe", {"intercept": None}, "field intercept: expected a number, got None"),  # a TypeError before
    ("probe", {"tap": "eleven"}, "field tap: must read LAYER:SOURCE"),
    ("probe", {"C": 0}, "field C: expected a number in \\(0, inf\\), got 0"),
    ("probe", {"features": "eigen"}, "field features: expected a list of texts"),
    ("probe", {"mean": [float("nan")]}, "field mean: must be a list of finite numbers"),
    ("probe", {"form": "cot"}, "holds a cot probe, read here as the short one"),  # was read as the gate's probe
    ("probe", {"coef": [1.0, 2.0]}, "probe L1:mlp: weights, mean and scale must have one equal"),
    ("cal", {"y": ["a"]}, "field y\\[0\\]: expected a number, got 'a'"),
    ("cal", {"y": [2.0, 2.0]}, "P\\(correct\\) outside 0..1"),
    ("cal", {"form": "final-knowledge"}, "holds a final-knowledge/eigen calibration, read here as the short/eigen one"),
    ("cal", {"estimator": "max-entropy"}, "holds a short/max-entropy calibration"),
    ("cal", {"form": "zzz"}, "field form: one of short, cot"),
    ("cal", {"provenance": {"model": "other"}}, "fitted on 'other''s scores, read here for 'some-model'"),
])
def test_a_hand_edited_fitted_file_is_named_with_its_field(tmp_path, name, edit, message):
    """A fitted file in a --option probes= folder is checked field by field where it is read, and read only
    under the form (and estimator, and model) its name says."""
    base, f = (PROBE, "some-model-short.probe.json") if name == "probe" else (CAL, "some-model-short-eigen.calibration.json")
    (tmp_path / f).write_text(json.dumps({**base, **edit}))
    bank = SelfKnowledge("some-model", str(tmp_path))
    read = (lambda: bank.probe("short")) if name == "probe" else (lambda: bank.calibration("short", "eigen"))
    with pytest.raises(ValueError, match=message) as e:
        read()
    assert str(e.value).startswith(f"{tmp_path / f}: ") and "\n" not in str(e.value)
    from seakr.methods.seakr import SeaKRConfig

    if message.startswith(("holds", "fitted on")):  # which model and decision read it: known once the model loads
        SeaKRConfig(probes=str(tmp_path))
    else:  # its content needs no model: the options refuse it, before any loads (it was refused after)
        with pytest.raises(ValueError, match=message):
            SeaKRConfig(probes=str(tmp_path))
    (tmp_path / f).write_text(json.dumps(base))  # the file as written by the fitter is read
    fresh = SelfKnowledge("some-model", str(tmp_path))
    assert fresh.probe("short").tap == "L1:mlp" if name == "probe" else fresh.calibration("short", "eigen")(0.0) == 0.5


def test_score_features_take_log_perplexity_and_a_failed_score_reads_as_unsure():
    from seakr.probes.probe import score_features

    x = score_features({"eigen": -3.0, "perplexity": np.e ** 2}, ["eigen", "perplexity"])
    assert x.tolist() == pytest.approx([-3.0, 2.0])
    assert score_features({"eigen": None}, ["eigen"]) is None and score_features({"eigen": float("inf")}, ["eigen"]) is None
    p = Probe("m", "L0:mlp", "short", [1.0, 1.0], 0.0, [0.0, 0.0], [1.0, 1.0], features=["eigen"])
    assert p.score_check([0.0], {"eigen": 0.0}) == pytest.approx(0.5)
    assert p.score_check([0.0], {"eigen": None}) == 1.0 and p.score_check(None, {"eigen": 0.0}) == 1.0
    assert Probe("m", "L0:mlp", "short", [1.0], 0.0, [0.0], [1.0]).score_check([0.0], {}) == pytest.approx(0.5)
