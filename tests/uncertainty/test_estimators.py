"""Estimators against independent float64 computations written here, plus their properties."""

import math

import numpy as np
import pytest

from seakr import uncertainty as U


def ref_eigen(z, alpha=1e-3):
    # Independent: explicit centring matrix J_d and eigenvalues, as in INSIDE's formula.
    z = np.array(z, dtype=np.float64)
    k, d = z.shape
    J = np.eye(d) - np.ones((d, d)) / d
    G = z @ J @ z.T + alpha * np.eye(k)
    return float(np.sum(np.log(np.linalg.eigvalsh(G))) / k)


@pytest.mark.parametrize("k,d", [(2, 5), (20, 64), (20, 576), (7, 3)])
def test_eigen_matches_reference(k, d):
    z = np.random.default_rng(k * d).normal(size=(k, d)).astype(np.float32)
    assert U.eigen_score(z) == pytest.approx(ref_eigen(z), rel=1e-9, abs=1e-9)


def test_identical_samples_give_the_minimum_and_match_closed_form():
    rng = np.random.default_rng(0)
    v = rng.normal(size=64)
    same = np.tile(v, (20, 1))
    s = U.eigen_score(same)
    c = v - v.mean()
    closed = (math.log(20 * c @ c + 1e-3) + 19 * math.log(1e-3)) / 20  # rank-one Gram
    assert s == pytest.approx(closed, rel=1e-9)
    noisy = same + rng.normal(scale=0.01, size=same.shape)
    assert U.eigen_score(noisy) > s


def test_more_dispersed_is_more_uncertain():
    rng = np.random.default_rng(1)
    base = rng.normal(size=128)
    scores = [U.eigen_score(base + rng.normal(scale=s, size=(20, 128))) for s in (0.01, 0.1, 1.0)]
    assert scores[0] < scores[1] < scores[2]


def test_permutation_invariance_and_feature_shift_invariance():
    z = np.random.default_rng(2).normal(size=(20, 32))
    perm = np.random.default_rng(3).permutation(20)
    assert U.eigen_score(z[perm]) == pytest.approx(U.eigen_score(z), rel=1e-10)
    # centring over features removes a per-row constant offset
    assert U.eigen_score(z + 5.0) == pytest.approx(U.eigen_score(z), rel=1e-10)


def test_scale_behaviour():
    # Gram scales with c^2: for alpha -> 0 the score shifts by 2 log c; with alpha it is monotone in c.
    z = np.random.default_rng(4).normal(size=(10, 50))
    assert U.eigen_score(z * 10) > U.eigen_score(z)
    assert U.eigen_score(z * 10, alpha=1e-12) - U.eigen_score(z, alpha=1e-12) == pytest.approx(2 * math.log(10), rel=1e-6)


def test_degenerate_inputs_never_nan():
    assert U.eigen_score(np.zeros((1, 8))) == U.UNCERTAIN
    assert U.eigen_score(np.zeros((0, 0))) == U.UNCERTAIN
    assert math.isfinite(U.eigen_score(np.zeros((5, 8))))  # all-zero states: alpha keeps it finite
    assert U.eigen_score_inside(np.zeros((1, 8))) == U.UNCERTAIN
    assert U.perplexity([]) == U.UNCERTAIN and U.energy([]) == U.UNCERTAIN
    assert U.ln_entropy([[], []]) == U.UNCERTAIN


def test_non_finite_inputs_read_as_uncertain_never_nan():
    """A NaN or inf state (fp16 overflow, a damaged model) gave a NaN EigenScore, and NaN > delta is False:
    the step gate did not retrieve, and the re-rank and final choice fell to list order."""
    z = np.random.default_rng(0).normal(size=(5, 8))
    z[1, 2] = np.nan
    assert U.eigen_score(z) == U.eigen_score_inside(z) == U.UNCERTAIN
    assert U.eigen_score(np.full((5, 8), np.inf)) == U.UNCERTAIN
    nan = float("nan")
    assert U.perplexity([nan, -1.0]) == U.max_entropy([nan, 1.0]) == U.mean_entropy([nan]) == U.UNCERTAIN
    assert U.multi_perplexity([[nan]]) == U.ln_entropy([[nan]]) == U.energy([nan]) == U.prompt_score(nan, -1.0) == U.UNCERTAIN
    for alpha in (0.0, -1.0, nan, math.inf, True):  # alpha 0 drops the ridge that keeps logdet finite
        with pytest.raises(ValueError, match=r"^alpha: expected a number in \(0, inf\), got"):
            U.eigen_score(z, alpha)
    assert math.isfinite(U.eigen_score(np.abs(z[[0, 2, 3]]), np.float32(1e-3)))


def test_inside_variant_matches_numpy_cov():
    z = np.random.default_rng(5).normal(size=(10, 40))
    c = np.cov(z) + 1e-3 * np.eye(10)
    assert U.eigen_score_inside(z) == pytest.approx(np.mean(np.log10(np.linalg.eigvalsh(c))), rel=1e-10)


def test_token_level_estimators_hand_checked():
    lp = [math.log(0.5), math.log(0.25)]
    assert U.perplexity(lp) == pytest.approx(math.sqrt(8))
    assert U.multi_perplexity([lp, [0.0]]) == pytest.approx((math.sqrt(8) + 1) / 2)
    assert U.ln_entropy([lp, [0.0]]) == pytest.approx((1.5 * math.log(2) + 0) / 2)
    assert U.energy([2.0, 4.0]) == -3.0
    assert U.prompt_score(math.log(0.2), math.log(0.6)) == pytest.approx(0.75)
    assert U.prompt_score(-1000.0, -1000.0) == pytest.approx(0.5)


def test_edges_read_as_maximally_uncertain_not_as_errors():
    """A mean log-probability past float range was "OverflowError: math range error" (one question's failure in a
    run); states of width 0 gave a finite EigenScore from the mean of an empty slice."""
    assert U.perplexity([-1000.0]) == U.multi_perplexity([[-1000.0]]) == math.inf
    assert U.eigen_score(np.zeros((3, 0))) == U.eigen_score_inside(np.zeros((3, 0))) == U.UNCERTAIN


def test_torch_tensors_of_any_dtype_and_generators_are_read_as_arrays():
    """A bfloat16 tensor of states (a model computing in bf16) was "Got unsupported ScalarType BFloat16", and a
    tensor of log-probabilities "mean() got an unexpected keyword argument 'axis'"."""
    torch = pytest.importorskip("torch")
    z = np.random.default_rng(6).normal(size=(6, 16))
    t = torch.tensor(z, dtype=torch.float32, requires_grad=True)
    assert U.eigen_score(t) == pytest.approx(U.eigen_score(z), rel=1e-5)
    assert U.eigen_score(t.bfloat16()) == pytest.approx(U.eigen_score(t.bfloat16().float().detach().numpy()), rel=1e-9)
    assert U.eigen_score_inside(t.half()) == pytest.approx(U.eigen_score_inside(z), rel=1e-2)
    assert U.jackknife_se(t) == pytest.approx(U.jackknife_se(z), rel=1e-4)
    assert U.hidden_score(t.bfloat16()) == pytest.approx(U.hidden_score(t.bfloat16().float().detach().numpy()), rel=1e-9)
    lp = [math.log(0.5), math.log(0.25)]
    assert U.perplexity(torch.tensor(lp)) == pytest.approx(math.sqrt(8), rel=1e-6)
    assert U.perplexity(x for x in lp) == pytest.approx(math.sqrt(8))
    assert U.multi_perplexity([torch.tensor(lp), torch.tensor([0.0])]) == pytest.approx((math.sqrt(8) + 1) / 2, rel=1e-6)
    assert U.ln_entropy(torch.tensor([lp])) == pytest.approx(1.5 * math.log(2), rel=1e-6)
    assert U.energy(torch.tensor([2.0, 4.0])) == -3.0
    assert U.max_entropy(torch.tensor([0.5, 2.0]).half()) == 2.0 == U.mean_entropy(torch.tensor([1.0, 3.0]))


def test_states_of_another_shape_are_refused_not_scored_uncertain():
    """A batch of one (1, k, d) scored +inf, "maximally uncertain", without a word; one vector (or none) is
    still too little to compare."""
    z = np.random.default_rng(7).normal(size=(5, 8))
    for f in (U.eigen_score, U.eigen_score_inside, U.jackknife_se):
        with pytest.raises(ValueError, match=r"^states: expected a \(k, d\) matrix.*got shape \(1, 5, 8\)$"):
            f(z[None])
        assert f(z[0]) == U.UNCERTAIN and f(np.zeros((0, 0))) == U.UNCERTAIN
    with pytest.raises(ValueError, match=r"^trail: expected a \(T, d\) or \(T, taps, d\) array"):
        U.hidden_score(z[None, None])
    with pytest.raises(ValueError, match=r"^states: expected numbers .* got list"):
        U.eigen_score([[1.0, 2.0], [3.0]])


def test_unknown_estimator_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown estimator"):
        U.score("entropy-ish", None)


def test_single_pass_entropies_read_the_greedy_tokens_only():
    from seakr.models.base import Generation, Sample

    g = Generation(3, greedy=Sample("a b c", [1, 2, 3], [-0.1, -0.2, -0.3], [0.5, 2.0, 0.2], [1, 1, 1], "stop"),
                   samples=[Sample("x", [4], [-9.0], [9.0], [1], "stop")])
    assert U.score("max-entropy", g) == 2.0
    assert U.score("mean-entropy", g) == pytest.approx(0.9)
    assert U.NEEDS["max-entropy"] == U.NEEDS["mean-entropy"] == "greedy"
    empty = Generation(3, greedy=Sample("", [], [], [], [], "eos"))
    assert U.score("max-entropy", empty) == U.score("mean-entropy", empty) == U.UNCERTAIN


def test_hidden_score_hand_checked_and_as_llm_check_defines_it():
    """LLM-Check's hidden score of one response, negated (higher = less certain): two token states (1,0,0) and
    (0,1,0), each centred over its features, have the Gram matrix [[2/3, -1/3], [-1/3, 2/3]]; the score is minus
    half the log-determinant of it + alpha I."""
    a = 1e-3
    assert U.hidden_score(np.array([[1.0, 0, 0], [0, 1.0, 0]]), a) == pytest.approx(-0.5 * math.log((2 / 3 + a) ** 2 - 1 / 9))
    z = np.random.default_rng(0).normal(size=(7, 32))  # tokens x features
    d = z.shape[1]
    j = np.eye(d) - np.ones((d, d)) / d  # LLM-Check: Sigma = Z^T J Z over Z = states^T, mean log singular value
    sigma = z @ j @ z.T + a * np.eye(len(z))
    assert U.hidden_score(z, a) == pytest.approx(-np.log(np.linalg.svd(sigma, compute_uv=False)).mean())
    assert U.hidden_score(np.stack([z, -z], axis=1), a) == pytest.approx(U.hidden_score(z, a))  # taps: the first
    assert U.hidden_score(None) == U.hidden_score(np.zeros((0, 4))) == U.hidden_score(z * np.nan) == U.UNCERTAIN


def test_hidden_score_reads_the_greedy_trail_and_nothing_of_an_empty_answer():
    from seakr.models.base import Generation, Sample

    trail = np.random.default_rng(1).normal(size=(3, 8))
    g = Generation(3, greedy=Sample("a b", [1, 2], [-0.1, -0.2], [0.5, 2.0], [1, 1], "stop", trail=trail))
    assert U.score("hidden-score", g) == U.hidden_score(trail) and U.NEEDS["hidden-score"] == "greedy"
    empty = Generation(3, greedy=Sample("", [], [], [], [], "eos", trail=trail[:1]))  # its one state is at the EOS
    assert U.score("hidden-score", empty) == U.UNCERTAIN


def test_the_alpha_check_is_made_once_not_at_every_score():
    """EigenScore checks its ridge through the schema's type checker, which is built once per type: a type made
    anew at each call built a new checker every time (a hot path: every step's U reads it)."""
    from seakr.common.schema import _adapter

    z = np.random.default_rng(0).random((5, 8))
    U.eigen_score(z)
    built = _adapter.cache_info().misses
    for _ in range(5):
        U.eigen_score(z, 0.01)
    assert _adapter.cache_info().misses == built
