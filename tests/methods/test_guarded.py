"""The guarded re-rank rule: its arithmetic, and the jackknife error it uses."""

import math

import numpy as np
import pytest

from seakr import uncertainty as U
from seakr.methods.decisions import guarded_departs
from seakr.methods.seakr import SeaKRConfig


def test_departs_only_beyond_z_standard_errors_of_the_difference():
    # se of the difference = hypot(0.3, 0.4) = 0.5; z = 2 -> the margin is 1.0
    assert guarded_departs(-1.0, -2.01, 0.3, 0.4, 2.0)
    assert not guarded_departs(-1.0, -1.99, 0.3, 0.4, 2.0)
    assert not guarded_departs(-1.0, -3.0, 0.3, math.inf, 2.0)  # no error estimate: keep the engine's top-1
    assert guarded_departs(math.inf, -1.0, math.inf, 0.1, 2.0)  # a failed top-1 yields to any finite one
    assert guarded_departs(None, -1.0, 0.0, 0.1, 2.0)
    assert not guarded_departs(-1.0, None, 0.1, 0.0, 2.0)
    assert guarded_departs(-1.0, -1.01, 0.0, 0.0, 1.645)  # no noise: the paper's rule


def test_jackknife_se_matches_its_definition_and_tracks_the_spread():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(8, 16))
    loo = np.array([U.eigen_score(np.delete(z, i, 0)) for i in range(8)])
    want = math.sqrt(7 / 8 * ((loo - loo.mean()) ** 2).sum())
    assert U.jackknife_se(z) == pytest.approx(want)
    tight = np.ones((20, 16)) + 1e-3 * rng.normal(size=(20, 16))  # near-identical samples
    mixed = tight.copy()
    mixed[0] += 5 * rng.normal(size=16)  # one sample far away: its removal moves the score a lot
    assert U.jackknife_se(mixed) > U.jackknife_se(tight)
    assert U.jackknife_se(z[:2]) == U.UNCERTAIN  # too few samples to say


def test_guarded_is_a_rerank_choice():
    assert SeaKRConfig(rerank="guarded").rerank == "guarded"
    with pytest.raises(ValueError, match="option rerank: one of"):
        SeaKRConfig(rerank="sometimes")
