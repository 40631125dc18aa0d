"""Calibration maps: monotone non-increasing in the score, a failed score at the uncertain end, a
wrong-way score clipped to the base rate, files round-trip."""

import json
import math
import re

import numpy as np
import pytest

from seakr.probes import Calibration, fit_calibration


def rows(n=300, seed=1):
    rng = np.random.default_rng(seed)
    u = rng.normal(size=n)
    correct = rng.random(n) < 1 / (1 + np.exp(2.5 * u))  # lower U -> more often right
    return list(u), list(correct)


@pytest.mark.parametrize("kind", ["isotonic", "platt"])
def test_maps_are_monotone_and_round_trip(kind, tmp_path):
    u, c = rows()
    cal = fit_calibration(u, c, form="short", estimator="eigen", kind=kind)
    grid = np.linspace(-4, 4, 81)
    ps = [cal(x) for x in grid]
    assert all(b <= a + 1e-12 for a, b in zip(ps, ps[1:])), "P(correct) must not rise with U"
    assert ps[0] > 0.8 and ps[-1] < 0.2
    assert cal(math.inf) == pytest.approx(min(ps), abs=0.05) and cal(None) == cal(math.inf)
    cal.save(tmp_path / "c.json")
    back = Calibration.load(tmp_path / "c.json")
    assert [back(x) for x in grid] == ps and back.provenance["n"] == 300


def test_platt_clips_a_score_that_ranks_the_wrong_way_to_the_base_rate():
    u, c = rows()
    cal = fit_calibration([-x for x in u], c, form="final-knowledge", estimator="eigen", kind="platt")
    assert cal.a == 0 and cal.provenance["slope_clipped"]
    assert cal(-3) == cal(3) == pytest.approx(np.mean(c))


def test_a_failed_estimate_is_the_least_certain():
    cal = fit_calibration([-2.0, -1.0, 0.0, None, math.inf], [True, True, False, False, False], form="short",
                          estimator="eigen")
    assert cal(-2.0) == 1.0 and cal(None) == 0.0


def test_hand_written_maps_are_checked():
    with pytest.raises(ValueError, match="non-increasing"):
        Calibration("short", "eigen", "isotonic", x=[0.0, 1.0], y=[0.2, 0.8])
    with pytest.raises(ValueError, match="slope"):
        Calibration("short", "eigen", "platt", a=1.0, b=0.0)
    iso = Calibration("short", "eigen", "isotonic", x=[0.0, 1.0], y=[0.8, 0.2])
    assert iso(0.5) == pytest.approx(0.5) and iso(-5) == 0.8 and iso(5) == 0.2


def test_a_map_file_without_its_kind_s_parameters_is_refused(tmp_path):
    """A Platt file without ``a`` and ``b`` loaded as the constant P(correct) 0.5, a map that ranks nothing."""
    f = tmp_path / "c.json"
    for d, said in (({"form": "short", "estimator": "eigen", "kind": "platt", "a": -1.0}, "b missing"),
                    ({"form": "short", "estimator": "eigen", "kind": "isotonic"}, "x, y missing")):
        f.write_text(json.dumps(d))
        with pytest.raises(ValueError, match=f"^{re.escape(str(f))}: a {d['kind']} map needs the fields .*; {said}$"):
            Calibration.load(f)


def test_fit_names_scores_and_labels_it_cannot_use():
    """A text score was numpy's "could not convert string to float"; 3 scores and 2 labels read as "need at
    least two scored rows"; labels other than right/wrong fitted a map of nothing."""
    for scores, correct, needle in (([1.0, 2.0, 3.0], [True, False], "got 3 scores and 2 labels"),
                                    (["a", "b"], [True, False], "scores must be numbers (None for a failed estimate), got 'a' at row 0"),
                                    ([1.0, 2.0], [2, 0], "labels must be booleans")):
        with pytest.raises(ValueError, match=re.escape(needle)):
            fit_calibration(scores, correct, form="short", estimator="eigen")
    assert fit_calibration([1.0, np.float32(2.0), None], [np.bool_(True), 0, 1], form="short", estimator="eigen")(1.0) == 1.0


def test_an_isotonic_map_of_few_answers_is_called_unreliable(capsys):
    """``seakr probe calibrate`` fitted an isotonic map on 12 answers without a word (its steps put P(correct)
    at 0 or 1 where one answer decides), while ``probe fit`` warns under 200; the packaged final-form maps,
    fitted on 50, are Platt's for that reason."""
    u, c = rows(n=300)
    fit_calibration(u[:12], c[:12], form="short", estimator="eigen")
    err = capsys.readouterr().err
    assert "an isotonic map of 12 answers steps on a few answers each" in err and "--kind platt" in err
    fit_calibration(u[:12], c[:12], form="short", estimator="eigen", kind="platt")
    fit_calibration(u, c, form="short", estimator="eigen")
    assert capsys.readouterr().err == ""


def test_a_map_left_to_its_count_is_isotonic_only_on_enough_answers():
    """``kind=None`` (what ``seakr fit`` asks): Platt's two parameters below FEW_FOR_ISOTONIC answers, isotonic
    steps from there on."""
    from seakr.probes.calibration import FEW_FOR_ISOTONIC

    def kind(n):
        return fit_calibration([float(i) for i in range(n)], [i % 3 == 0 for i in range(n)], form="short",
                               estimator="eigen", kind=None).kind

    assert kind(FEW_FOR_ISOTONIC // 2) == kind(FEW_FOR_ISOTONIC - 1) == "platt"
    assert kind(FEW_FOR_ISOTONIC) == "isotonic"
