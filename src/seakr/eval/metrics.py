"""EM/F1 with SQuAD normalisation (max over gold answers and aliases), bootstrap CIs, AUROC."""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from typing import Annotated, Sequence

import numpy as np
from pydantic import Field

from ..common.checks import labels
from ..common.schema import Positive, Real, check_type

_PUNCT = set(string.punctuation)


#: An answer with F1 >= 0.5 counts as right: the label every self-knowledge signal is fitted and scored on.
CORRECT_F1 = 0.5

def number_text(v: int | float) -> str:
    """A number as the answer it writes: 1990.0 is "1990" (``str`` writes "1990.0", which normalises to
    "19900")."""
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)


def normalize(s) -> str:
    """Lower-case, drop punctuation, drop articles a/an/the, collapse whitespace (SQuAD v1.1). A number is
    read as its text (a dataset's answer 4, a caller's prediction 1990); anything else is no answer."""
    if isinstance(s, (int, float)) and not isinstance(s, bool):
        s = number_text(s)
    if not isinstance(s, str):
        return ""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def _golds(golds) -> list:
    """The gold answers as a list: one answer given alone (a str) is one gold, not its characters (EM of
    "Paris" against "Paris" read 0.0)."""
    return [golds] if isinstance(golds, (str, int, float)) else list(golds)


def exact_match(pred, golds: Sequence[str]) -> float:
    p = normalize(pred)
    if not p:
        return 0.0
    return float(any(p == normalize(g) for g in _golds(golds)))


def _f1(pred: str, gold: str) -> float:
    p, g = normalize(pred), normalize(gold)
    # HotpotQA rule: yes/no/noanswer must match exactly
    if (p in ("yes", "no", "noanswer") or g in ("yes", "no", "noanswer")) and p != g:
        return 0.0
    pt, gt = p.split(), g.split()
    common = Counter(pt) & Counter(gt)
    same = sum(common.values())
    if same == 0:
        return 0.0
    prec, rec = same / len(pt), same / len(gt)
    return 2 * prec * rec / (prec + rec)


def f1_score(pred, golds: Sequence[str]) -> float:
    if not normalize(pred):
        return 0.0
    return max((_f1(pred, g) for g in _golds(golds)), default=0.0)


#: a confidence interval's level, e.g. 0.95
Level = Annotated[Real, Field(gt=0, lt=1)]


def _check_resampling(n, level) -> None:
    """A bootstrap's ``n`` resamples (one or more) and its CI ``level`` (between 0 and 1, e.g. 0.95), named as the
    options they are."""
    check_type(Positive, n, "n (resamples)")
    check_type(Level, level, "level")


def bootstrap_ci(values: Sequence[float], n: int = 1000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    _check_resampling(n, level)
    v = np.asarray(values, dtype=float)
    if len(v) == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, len(v), size=(n, len(v)))].mean(1)
    lo, hi = np.quantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


def paired_bootstrap(a: Sequence[float], b: Sequence[float], n: int = 2000, seed: int = 0,
                     level: float = 0.95) -> dict:
    """Mean of a - b over the same items and its bootstrap CI (items resampled together, so the
    items' shared difficulty cancels): the comparison of two methods on one question set."""
    if len(a) != len(b):
        raise ValueError(f"paired values need equal lengths, got {len(a)} and {len(b)}")
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    lo, hi = bootstrap_ci(d, n=n, seed=seed, level=level)
    return {"n": len(d), "mean_difference": float(d.mean()) if len(d) else float("nan"), "ci95": [lo, hi]}


def paired_auroc_difference(a: Sequence[float], b: Sequence[float], positives: Sequence[bool], n: int = 1000,
                            seed: int = 0, level: float = 0.95) -> dict:
    """AUROC(a) - AUROC(b) of two scores of the same items, with a bootstrap CI that resamples the
    items once for both (their shared items make the difference far tighter than two separate CIs)."""
    _check_resampling(n, level)
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) != len(b):
        raise ValueError(f"paired scores need equal lengths, got {len(a)} and {len(b)}")
    y = labels(positives, a.shape, "paired_auroc_difference")
    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(n):
        i = rng.integers(0, len(y), len(y))
        d = auroc(a[i], y[i]) - auroc(b[i], y[i])
        if math.isfinite(d):  # a resample with one class only has no AUROC
            diffs.append(d)
    lo, hi = np.quantile(diffs, [(1 - level) / 2, 1 - (1 - level) / 2]) if diffs else (float("nan"), float("nan"))
    return {"difference": auroc(a, y) - auroc(b, y), "ci95": [float(lo), float(hi)]}


def auroc_ci(scores: Sequence[float], positives: Sequence[bool], n: int = 1000, seed: int = 0,
             level: float = 0.95) -> tuple[float, float]:
    """A bootstrap CI of :func:`auroc` (items resampled; a resample of one class only has none and is skipped)."""
    _check_resampling(n, level)
    s, rng = _ranked(scores), np.random.default_rng(seed)
    y = labels(positives, s.shape, "auroc_ci")
    vals = [v for v in (auroc(s[i], y[i]) for i in rng.integers(0, len(y), size=(n, len(y)))) if math.isfinite(v)]
    if not vals:
        return (float("nan"), float("nan"))
    lo, hi = np.quantile(vals, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


def _ranked(scores) -> np.ndarray:
    """Scores with +inf ("uncertain") just above every finite score and -inf just below. NaN (an estimator's
    failure) ranks as +inf, as the estimators read it (uncertainty.UNCERTAIN): a NaN compares as neither above nor
    tied with anything, so each one left as it is would pull an AUROC towards 0."""
    s = np.asarray(scores, dtype=float)
    s = np.where(np.isnan(s), np.inf, s)
    fin = s[np.isfinite(s)]
    if len(fin):
        s = np.where(s == np.inf, fin.max() + 1, np.where(s == -np.inf, fin.min() - 1, s))
    return s


def auroc(scores: Sequence[float], positives: Sequence[bool]) -> float:
    """Probability a random positive scores higher than a random negative (ties count 1/2)."""
    s = _ranked(scores)
    y = labels(positives, s.shape, "auroc")
    pos, neg = s[y], s[~y]
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return float((greater + 0.5 * ties) / (len(pos) * len(neg)))


def roc_curve(scores, positives):
    s = _ranked(scores)
    y = labels(positives, s.shape, "roc_curve")
    order = np.argsort(-s, kind="stable")
    y = y[order]
    tp = np.concatenate([[0], np.cumsum(y)])
    fp = np.concatenate([[0], np.cumsum(~y)])
    return fp / max(1, (~y).sum()), tp / max(1, y.sum())


def pearson(x, y) -> float:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape:  # not broadcast: one y per x
        raise ValueError(f"a correlation pairs equal lengths, got {x.size} and {y.size} values")
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 3 or np.std(x[ok]) == 0 or np.std(y[ok]) == 0:
        return float("nan")
    return float(np.corrcoef(x[ok], y[ok])[0, 1])


def spearman(x, y) -> float:
    """Spearman's rank correlation: Pearson over average ranks (ties share their mean rank)."""
    from scipy.stats import rankdata

    return pearson(rankdata(_ranked(x)), rankdata(_ranked(y)))
