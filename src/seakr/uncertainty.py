"""Uncertainty estimators: pure functions over arrays. Higher = more uncertain, always.

SeaKR's self-aware uncertainty (paper §3.4) is INSIDE's EigenScore over the state vectors of k
sampled continuations. The reference computes, in float32 on CPU (docs/design-notes.md §1.4)::

    Z~ = Z J_d              # centre each vector over its own d features (not over the samples)
    G  = Z~ Z~^T            # k x k Gram matrix
    U  = (1/k) logdet(G + alpha I),  alpha = 1e-3 (natural log)

We compute it in float64 (``slogdet``); with k=20 identical vectors U ~= (1/k) log(k ||z~||^2) +
((k-1)/k) log(alpha) ~= -6.56 + small, which is why the paper's delta = -6 means "(almost) all samples
agree" *for that model, layer, k and alpha*: recalibrate for anything else.

The ablation estimators of paper Table 3 take the per-token numbers of a
:class:`~seakr.models.base.Generation`; :func:`score` dispatches by name.
"""

from __future__ import annotations
from .common.console import unknown_choice
from .common.schema import PositiveReal, check_type

import functools
import math
from collections.abc import Iterator
from typing import Callable, Sequence

import numpy as np

#: Returned when an estimator has too little to work with (e.g. < 2 non-empty samples): +inf is
#: "maximally uncertain", so it triggers retrieval, loses every re-rank and every final comparison.
#: The reference returns 0 in that case, which plays the same role only for its own scale.
UNCERTAIN = math.inf


def _never_nan(fn: Callable[..., float]) -> Callable[..., float]:
    """A NaN score (a non-finite state or log-probability: fp16 overflow on a GPU, a damaged model) reads
    as UNCERTAIN. Left NaN it decided silently: ``NaN > delta`` is False (no retrieval), and a NaN never
    wins or loses a comparison, so the re-rank and the final choice fell to list order."""
    @functools.wraps(fn)
    def wrapped(*args, **kwargs) -> float:
        v = fn(*args, **kwargs)
        return UNCERTAIN if v != v else v
    return wrapped


def as_array(x, what: str = "states") -> np.ndarray:
    """``x`` as float64 numbers: a NumPy array, a list, or a torch tensor on any device and of any dtype (a
    bfloat16 tensor, as a model computing in bf16 gives its hidden states)."""
    if hasattr(x, "detach") and hasattr(x, "float"):  # torch, imported only by whoever made the tensor
        x = x.detach().float().cpu().numpy()
    elif isinstance(x, Iterator):  # a generator: read once, here
        x = list(x)
    try:
        return np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{what}: expected numbers in an array, a list or a tensor, got {type(x).__name__} "
                         f"({e})") from None


def _matrix(states, what: str = "states") -> np.ndarray:
    """``states`` as a (rows, d) float64 matrix; one vector (or none) is a matrix of one row (or none), which
    the estimators read as too little to compare. More dimensions are a mistake, not uncertainty: a batch
    (1, k, d) is refused rather than scored as +inf."""
    z = as_array(states, what)
    if z.ndim > 2:
        raise ValueError(f"{what}: expected a (k, d) matrix, one state vector a row, got shape {tuple(z.shape)}")
    return z.reshape(1, -1) if z.ndim == 1 and z.size else z


#: EigenScore's ridge on the Gram matrix (a finite number > 0): the type a method's ``alpha`` option has too. One
#: object, so the schema's checker of it is made once, not at every score.
Alpha = PositiveReal


def _check_alpha(alpha: float) -> None:
    check_type(Alpha, alpha, "alpha")


@_never_nan
def eigen_score(states: np.ndarray, alpha: float = 1e-3) -> float:
    """SeaKR's EigenScore: (1/k) logdet(Z~ Z~^T + alpha I) with rows centred over their features."""
    _check_alpha(alpha)
    z = _matrix(states)
    if z.ndim != 2 or z.shape[0] < 2 or z.shape[1] == 0 or not np.isfinite(z).all():  # width 0: nothing to compare
        return UNCERTAIN
    return _gram_logdet(z, alpha)


def _gram_logdet(z: np.ndarray, alpha: float) -> float:
    """(1/n) logdet(Z~ Z~^T + alpha I) of n finite rows, each centred over its features: EigenScore over k
    samples, the hidden score over one answer's tokens."""
    n = z.shape[0]
    z = z - z.mean(axis=1, keepdims=True)
    sign, logdet = np.linalg.slogdet(z @ z.T + alpha * np.eye(n))
    if sign <= 0:  # cannot happen for alpha > 0 (G is PSD), but never return NaN
        return UNCERTAIN
    return float(logdet / n)


def jackknife_se(states: np.ndarray, alpha: float = 1e-3) -> float:
    """Standard error of :func:`eigen_score` over its k samples, by the jackknife: the k leave-one-out
    scores' spread, scaled by (k-1)/k. Deterministic, and without the duplicated rows a bootstrap
    resample would put into the Gram matrix (duplicates collapse its log-determinant)."""
    z = _matrix(states)
    if z.ndim != 2 or z.shape[0] < 3:
        return UNCERTAIN
    k = z.shape[0]
    loo = np.array([eigen_score(np.delete(z, i, axis=0), alpha) for i in range(k)])
    if not np.isfinite(loo).all():
        return UNCERTAIN
    return float(np.sqrt((k - 1) / k * ((loo - loo.mean()) ** 2).sum()))


@_never_nan
def eigen_score_inside(states: np.ndarray, alpha: float = 1e-3) -> float:
    """INSIDE's original variant: covariance of the k vectors (``np.cov``, rows as variables, i.e.
    centred over features and divided by d-1), plus alpha I, then the mean of log10 eigenvalues."""
    _check_alpha(alpha)
    z = _matrix(states)
    if z.ndim != 2 or z.shape[0] < 2 or z.shape[1] == 0 or not np.isfinite(z).all():  # width 0: nothing to compare
        return UNCERTAIN
    cov = np.cov(z) + alpha * np.eye(z.shape[0])
    ev = np.linalg.eigvalsh(cov)
    if (ev <= 0).any():
        return UNCERTAIN
    return float(np.mean(np.log10(ev)))


@_never_nan
def perplexity(logprobs: Sequence[float]) -> float:
    """exp(-mean log p) of one continuation (the greedy one for the 'perplexity' ablation)."""
    logprobs = as_array(logprobs, "logprobs")
    if logprobs.size == 0:
        return UNCERTAIN
    try:
        return float(math.exp(-float(np.mean(logprobs))))
    except OverflowError:  # a mean log-probability below -709.8: past float range, not an error
        return math.inf


@_never_nan
def multi_perplexity(samples_logprobs: Sequence[Sequence[float]]) -> float:
    """Mean perplexity over the k samples (paper's Multi-Perplexity; also what the reference code
    reports under the name ``ln_entropy``)."""
    vals = [perplexity(lp) for lp in (as_array(x, "logprobs") for x in samples_logprobs) if lp.size]
    return float(np.mean(vals)) if vals else UNCERTAIN


@_never_nan
def ln_entropy(samples_logprobs: Sequence[Sequence[float]]) -> float:
    """Length-normalised predictive entropy (Malinin & Gales 2020), estimated from k samples:
    mean over samples of -(1/|s|) sum log p(s_t). Unlike the reference code, no exp()."""
    vals = [-float(np.mean(lp)) for lp in (as_array(x, "logprobs") for x in samples_logprobs) if lp.size]
    return float(np.mean(vals)) if vals else UNCERTAIN


@_never_nan
def energy(logsumexp: Sequence[float]) -> float:
    """Energy score (Liu et al. 2020) of one continuation: -mean_t logsumexp(logits_t).
    The reference stores +mean logsumexp (higher = confident); we flip it so higher = uncertain."""
    logsumexp = as_array(logsumexp, "logsumexp")
    return float(-np.mean(logsumexp)) if logsumexp.size else UNCERTAIN


@_never_nan
def max_entropy(entropies: Sequence[float]) -> float:
    """Single-pass: the largest per-token entropy of one continuation (the greedy one). The estimator
    that led the adaptive-retrieval comparison of Moskvoretskii et al. 2025 (AdaRAGUE); one decode, no
    samples, so it costs k times less than EigenScore."""
    entropies = as_array(entropies, "entropies")
    return float(np.max(entropies)) if entropies.size else UNCERTAIN


@_never_nan
def mean_entropy(entropies: Sequence[float]) -> float:
    """Single-pass: the mean per-token entropy of one continuation (the greedy one)."""
    entropies = as_array(entropies, "entropies")
    return float(np.mean(entropies)) if entropies.size else UNCERTAIN


def hidden_score(trail: np.ndarray | None, alpha: float = 1e-3) -> float:
    """Single-pass, from states: LLM-Check's hidden score (Sriramanan et al., NeurIPS 2024) of one response,
    negated: minus the mean log eigenvalue of the Gram matrix of its tokens' states, each centred over its
    features, -(1/T) logdet(Z~ Z~^T + alpha I) for the T x d trail (the state at each token, the last at the
    EOS; with several taps, the model's own). EigenScore's formula over one response's tokens instead of k
    responses: one decode, no samples. Negated because a wrong answer's token states span *less* (AUROC for
    "wrong" as LLM-Check writes it 0.21 / 0.32, negated 0.79 / 0.68, on 200 HotpotQA / 200 2Wiki train questions
    with the 0.5B), and every estimator here reads higher = less certain."""
    if trail is None:
        return UNCERTAIN
    z = as_array(trail, "trail")
    if z.ndim > 3:
        raise ValueError(f"trail: expected a (T, d) or (T, taps, d) array, got shape {tuple(z.shape)}")
    z = z[:, 0, :] if z.ndim == 3 else z  # (T, taps, d): the first tap is the model's own
    if z.ndim != 2 or z.shape[0] == 0 or z.shape[1] == 0 or not np.isfinite(z).all():
        return UNCERTAIN
    _check_alpha(alpha)
    u = _gram_logdet(z, alpha)
    return -u if math.isfinite(u) else UNCERTAIN


@_never_nan
def prompt_score(logp_yes: float, logp_no: float) -> float:
    """Prompting estimator: P(No | 'Do you have sufficient knowledge ...?') normalised over {Yes, No}."""
    m = max(logp_yes, logp_no)
    py, pn = math.exp(logp_yes - m), math.exp(logp_no - m)
    return pn / (py + pn)


#: The question asked by the prompting estimator (paper §5.1), our wording.
SUFFICIENCY_QUESTION = (
    "\n\nBefore answering, consider: do you have sufficient knowledge to answer the question "
    "\"{question}\" correctly? Reply Yes or No.\nReply:"
)

#: Which parts of a generation each estimator needs (drives what methods request from the model).
NEEDS = {
    "eigen": "samples",
    "eigen-inside": "samples",
    "perplexity": "greedy",
    "multi-perplexity": "samples",
    "ln-entropy": "samples",
    "energy": "greedy",
    "max-entropy": "greedy",
    "mean-entropy": "greedy",
    "hidden-score": "greedy",  # the greedy row's states at every token (GenerationConfig.greedy_trail)
    "prompt": "prompt",
}
ESTIMATORS = tuple(NEEDS)


def _said(greedy) -> bool:
    """The greedy row produced a token (an empty answer's one state, at its EOS, describes no answer)."""
    return greedy is not None and bool(greedy.token_ids)


def score(name: str, generation, alpha: float = 1e-3) -> float:
    """Score one :class:`~seakr.models.base.Generation` with the named estimator (not 'prompt')."""
    fn: dict[str, Callable[[], float]] = {
        "eigen": lambda: eigen_score(generation.states, alpha),
        "eigen-inside": lambda: eigen_score_inside(generation.states, alpha),
        "perplexity": lambda: perplexity(generation.greedy.logprobs) if generation.greedy else UNCERTAIN,
        "multi-perplexity": lambda: multi_perplexity([s.logprobs for s in generation.samples]),
        "ln-entropy": lambda: ln_entropy([s.logprobs for s in generation.samples]),
        "energy": lambda: energy(generation.greedy.logsumexp) if generation.greedy else UNCERTAIN,
        "max-entropy": lambda: max_entropy(generation.greedy.entropies) if generation.greedy else UNCERTAIN,
        "mean-entropy": lambda: mean_entropy(generation.greedy.entropies) if generation.greedy else UNCERTAIN,
        "hidden-score": lambda: hidden_score(generation.greedy.trail, alpha) if _said(generation.greedy) else UNCERTAIN,
    }
    if name not in fn:
        raise ValueError(unknown_choice("estimator", name, ESTIMATORS))
    return fn[name]()


def all_scores(generation, alpha: float = 1e-3) -> dict[str, float]:
    """Every sample/greedy-based estimator on one generation (the detect study and the CLI)."""
    return {n: score(n, generation, alpha) for n in ESTIMATORS if n != "prompt"}
