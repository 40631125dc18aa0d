"""EM/F1 on hand-checked cases (commas and numbers inside answers), CIs and AUROC."""

import re

import numpy as np
import pytest

from seakr.eval import metrics as m
from seakr.eval.metrics import auroc, bootstrap_ci, exact_match, f1_score, normalize, pearson


def test_normalize():
    assert normalize("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize("An apple, a day") == "apple day"
    assert normalize(None) == ""


def test_em_f1_hand_checked():
    assert exact_match("August 25, 1963", ["August 25, 1963"]) == 1.0
    assert exact_match("august 25", ["August 25, 1963"]) == 0.0
    assert f1_score("august 25", ["August 25, 1963"]) == pytest.approx(2 * 1.0 * (2 / 3) / (1 + 2 / 3))
    assert exact_match("15,140", ["15140"]) == 1.0  # punctuation inside numbers is stripped
    assert f1_score("the Danube river", ["Danube"]) == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert exact_match("Paris", ["Lyon", "paris"]) == 1.0  # max over golds and aliases
    assert f1_score("", ["x"]) == 0.0 and exact_match("", [""]) == 0.0


def test_one_gold_given_alone_and_numbers_are_answers():
    """A str gold was iterated as its characters (EM of "Paris" against "Paris" read 0.0), and a number
    (a prediction 1990, an answer 4) read as no answer."""
    assert exact_match("Paris", "Paris") == 1.0 and f1_score("Paris France", "Paris") == pytest.approx(2 / 3)
    assert exact_match(1990, ["1990"]) == 1.0 and f1_score("4", [4]) == 1.0 and exact_match("4", 4) == 1.0
    assert normalize(True) == "" and normalize(1990.0) == "1990"  # a bool is not the answer "True"
    with pytest.raises(ValueError, match="auroc: 2 scores but 1 labels"):  # numpy's boolean-index error before
        auroc([1.0, 2.0], [True])


def test_yes_no_rule():
    assert f1_score("yes", ["no"]) == 0.0
    assert f1_score("yes it is", ["yes"]) == 0.0  # differing normalised strings with a yes/no gold score 0
    assert f1_score("no", ["no"]) == 1.0


def test_bootstrap_and_auroc():
    lo, hi = bootstrap_ci([0, 1] * 50)
    assert lo < 0.5 < hi and hi - lo < 0.25
    assert auroc([3, 2, 1, 0], [True, True, False, False]) == 1.0
    assert auroc([0, 1, 2, 3], [True, True, False, False]) == 0.0
    assert auroc([1, 1], [True, False]) == 0.5
    assert auroc([float("inf"), 0.0, -1.0], [True, False, False]) == 1.0
    assert pearson([1, 2, 3, 4], [2, 4, 6, 8]) == pytest.approx(1.0)


def test_spearman_ranks_with_ties_and_monotone_maps():
    from seakr.eval.metrics import spearman

    x = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert spearman(x, [v ** 3 for v in x]) == pytest.approx(1.0)  # any increasing map: 1
    assert spearman(x, [-v for v in x]) == pytest.approx(-1.0)
    # ties share their mean rank: the textbook value for this pair is 0.9
    assert spearman([1, 2, 3, 4, 5], [1, 3, 2, 4, 5]) == pytest.approx(0.9)
    assert spearman([1, 1, 2, 3], [1, 2, 3, 4]) == pytest.approx(0.9486833, abs=1e-6)


def test_paired_bootstrap_sees_a_consistent_small_difference_that_unpaired_cis_miss():
    from seakr.eval.metrics import paired_bootstrap

    rng = np.random.default_rng(0)
    hard = rng.uniform(0, 1, 200)  # per-item difficulty shared by both methods
    a, b = hard + 0.05, hard
    r = paired_bootstrap(a, b)
    assert r["n"] == 200 and r["mean_difference"] == pytest.approx(0.05)
    assert r["ci95"][0] == pytest.approx(0.05) and r["ci95"][1] == pytest.approx(0.05)
    lo_a, hi_a = bootstrap_ci(a)
    lo_b, hi_b = bootstrap_ci(b)
    assert lo_a < hi_b  # the two unpaired intervals overlap
    with pytest.raises(ValueError, match="equal lengths"):
        paired_bootstrap([1.0], [1.0, 2.0])


def test_paired_auroc_difference_is_exact_and_its_interval_covers_it():
    from seakr.eval.metrics import paired_auroc_difference

    rng = np.random.default_rng(1)
    y = rng.uniform(size=300) < 0.5
    good = y + rng.normal(0, 0.8, 300)  # informative
    noise = rng.normal(0, 1, 300)  # not
    r = paired_auroc_difference(good, noise, y, n=300)
    assert r["difference"] == pytest.approx(auroc(good, y) - auroc(noise, y))
    assert 0 < r["ci95"][0] < r["difference"] < r["ci95"][1]
    same = paired_auroc_difference(good, good, y, n=50)
    assert same["difference"] == 0 and same["ci95"] == [0.0, 0.0]


def test_a_nan_score_ranks_as_uncertain_not_as_nothing():
    """A NaN compared as neither above nor tied with any score: each one pulled an AUROC towards 0 in silence
    (auroc([nan, 2], [True, False]) was 0.0). It ranks as +inf, as the estimators read a NaN."""
    from seakr.eval.metrics import auroc, roc_curve, spearman

    nan, inf = float("nan"), float("inf")
    assert auroc([nan, 2.0], [True, False]) == 1.0 == auroc([inf, 2.0], [True, False])
    assert auroc([nan, 2.0, inf], [True, False, True]) == 1.0 and auroc([nan, inf], [True, False]) == 0.5
    assert [list(v) for v in roc_curve([nan, 1.0, 2.0], [True, False, True])] == \
           [list(v) for v in roc_curve([inf, 1.0, 2.0], [True, False, True])]
    assert spearman([nan, 1.0, 2.0, 3.0], [4.0, 1.0, 2.0, 3.0]) == pytest.approx(1.0)


def test_labels_and_lengths_that_do_not_fit_are_refused_not_scored():
    """Text labels were all True ("no" is a non-empty string) and the AUROC NaN; a 2 among 0/1 labels counted
    as positive; correlations broadcast a length-1 list against the other; a bootstrap of n=0 resamples was
    "index -1 is out of bounds"."""
    for bad, said in ((["yes", "no"], "'yes'"), ([1, 0, 2], "2"), ([None, True], "None"), ([0.5, 1], "0.5")):
        with pytest.raises(ValueError, match=rf"^auroc: labels must be booleans \(True/False or 1/0\), got {re.escape(said)}$"):
            m.auroc([1.0, 2.0, 3.0][:len(bad)], bad)
    assert m.auroc([1, 2], [0.0, 1.0]) == m.auroc([1, 2], np.array([0, 1])) == m.auroc([1, 2], [False, True]) == 1.0
    with pytest.raises(ValueError, match=r"^roc_curve: 2 scores but 1 labels$"):
        m.roc_curve([1, 2], [True])
    for f in (m.pearson, m.spearman):
        with pytest.raises(ValueError, match=r"^a correlation pairs equal lengths, got 4 and 1 values$"):
            f([1, 2, 3, 4], [1])
    with pytest.raises(ValueError, match=r"^n \(resamples\): expected a whole number in \[1, inf\), got 0$"):
        m.bootstrap_ci([1.0, 2.0], n=0)
    with pytest.raises(ValueError, match=r"^level: expected a number in \(0, 1\), got 1.5$"):
        m.paired_bootstrap([1.0], [0.0], level=1.5)
    with pytest.raises(ValueError, match="labels must be booleans"):
        m.paired_auroc_difference([1, 2], [2, 1], ["a", "b"])
