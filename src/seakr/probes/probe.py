"""A linear probe on one state vector: P(the answer is wrong) = sigmoid(w . (x - mean) / scale + b).

A probe of re-rank candidates (form ``candidate``) reads, after the state, the engine's view of the
passage (:data:`ENGINE_FEATURES`: its rank and its score against the top score), so it can learn when
to keep the engine's order; its "wrong" is "the passage does not support the answer". A short-form probe
may read the knowledge check's own uncertainty scores after the state (:func:`score_features`), so one
probability carries both the state's signal and the samples' agreement.

Fitted with scikit-learn (standardise, then L2 logistic regression with its strength chosen by
stratified cross-validation on AUROC); applied with numpy alone, so answering needs no scikit-learn.
A probe belongs to one model and one tap (layer, source) and one decision form: it refuses any other
with one line, because a state from another layer or model is another coordinate system.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import re
import time
from dataclasses import asdict, field
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, Sequence

import numpy as np
from pydantic import AfterValidator, Field, PlainValidator, model_validator

from ..common.runs import check_not_a_record
from ..common.checks import labels
from ..common.schema import PositiveReal, Real, Whole, check_type, check_value, schema
from ..common.console import repeated, warn
from ..common.files import given_path, missing
from ..common.jsontext import json_file
from ..common.writing import write_atomic
from ..uncertainty import ESTIMATORS, as_array

#: Decision forms a probe or calibration can belong to (where SeaKR decides, in its own prompt form).
FORMS = ("short", "cot", "step", "candidate", "final-rationale", "final-knowledge")

#: What a candidate probe reads beside the state: the engine's rank (one-hot; the third and later
#: share one), the candidate's score over the top score, and its gap to the top score.
ENGINE_FEATURES = ("rank-0", "rank-1", "rank-2+", "score/top", "score-top")

#: cross-validation folds (C is chosen by them): two at the least
Folds = Annotated[Whole, Field(ge=2)]


def engine_features(rank: int, score: float | None, top: float | None) -> np.ndarray:
    """:data:`ENGINE_FEATURES` of one candidate (a missing score reads as the top score)."""
    top = float(top) if top else 0.0
    s = top if score is None else float(score)
    return np.array([rank == 0, rank == 1, rank >= 2, s / top if top > 0 else 1.0, s - top], dtype=np.float64)


#: Scores of the knowledge check's own samples a short-form probe may read after the state (a stacked
#: probe): any of :data:`seakr.uncertainty.ESTIMATORS` but ``prompt``. Perplexities enter on their log scale
#: (the mean negative log-likelihood): their tails would otherwise dominate a standardised feature.
LOG_SCALE = frozenset({"perplexity", "multi-perplexity"})


def check_score_names(names: Sequence[str], where: str) -> None:
    """One line naming any of ``names`` that is not an estimator of the check's samples."""
    bad = [str(n) for n in names if n not in ESTIMATORS or n == "prompt"]
    if bad:
        raise ValueError(f"{where}: {', '.join(bad)} is not an estimator of the check's samples "
                         f"(one of {', '.join(e for e in ESTIMATORS if e != 'prompt')})")
    twice = repeated(names)
    if twice is not None:  # its column went in twice, and the probe file listed it twice
        raise ValueError(f"{where}: {twice} is named twice")


def score_features(scores: dict, names: Sequence[str]) -> np.ndarray | None:
    """The named estimators' values of one answer as probe features; None where one failed (an empty
    answer: the probe then reads it as maximally uncertain)."""
    out = []
    for n in names:
        v = scores.get(n)
        if v is None or not math.isfinite(float(v)):
            return None
        out.append(math.log(max(float(v), 1e-12)) if n in LOG_SCALE else float(v))
    return np.array(out, dtype=np.float64)


#: A tap as probes name it: the 0-based layer and the state's source (models.hf probing taps).
TAP = re.compile(r"L\d+:\w+")


def _tap(v: str) -> str:
    if not TAP.fullmatch(v):
        raise ValueError(f"must read LAYER:SOURCE such as L11:mlp, not {v!r}")
    return v


def _vector(v) -> np.ndarray:
    """A list of finite numbers (a weight vector as a file holds it), as float64."""
    ok = isinstance(v, (list, tuple, np.ndarray)) and all(
        isinstance(x, numbers.Real) and not isinstance(x, bool) for x in np.asarray(v, dtype=object).ravel())
    a = np.asarray(v, dtype=np.float64).ravel() if ok else None
    if a is None or not np.isfinite(a).all():
        raise ValueError(f"must be a list of finite numbers, not {json.dumps(v if a is None else a.tolist())[:40]}")
    return a


Vector = Annotated[Any, PlainValidator(_vector)]


@schema("field")
class Probe:
    model: str
    # "L11:mlp": 0-based layer and source of the state (models.hf probing taps)
    tap: Annotated[str, AfterValidator(_tap)]
    form: Literal[FORMS]
    coef: Vector
    intercept: Real
    mean: Vector
    scale: Vector
    C: PositiveReal = 1.0
    provenance: dict[str, Any] = field(default_factory=dict)  # data, n, positives, cv_auroc, fitted_at, ...
    # what follows the state: ENGINE_FEATURES (candidates), estimators (short)
    features: list[str] = field(default_factory=list)

    @model_validator(mode="after")
    def _one_shape(self):
        if not (len(self.coef) == len(self.mean) == len(self.scale)) or not len(self.coef):
            raise ValueError(f"probe {self.tap}: weights, mean and scale must have one equal, non-zero length")
        if not (self.scale > 0).all():
            raise ValueError(f"probe {self.tap}: a non-positive scale")
        return self

    @model_validator(mode="after")
    def _scores_named(self):
        if self.form == "short" and self.features:
            check_score_names(self.features, f"probe short ({self.tap})")
        return self

    @property
    def scores_read(self) -> list[str]:
        """The estimators whose values it reads beside the state (a stacked short-form probe), as
        :meth:`Calibration.scores_read`: what binds it to the sampling of its studies."""
        return list(self.features) if self.form == "short" else []

    @property
    def layer_source(self) -> tuple[int, str]:
        li, src = self.tap.removeprefix("L").split(":")
        return int(li), src

    @property
    def dim(self) -> int:
        return len(self.coef)

    def check(self, info: dict) -> None:
        """Refuse a model this probe was not fitted for, with one line naming what differs (and the file, where
        the probe was read from one)."""
        at = f"{self.source}: " if getattr(self, "source", None) else ""
        if str(info.get("model")) != self.model:
            raise ValueError(f"{at}probe for {self.model!r} ({self.form}, {self.tap}) cannot read model "
                             f"{info.get('model')!r}: "
                             "fit one for it with `seakr probe fit`")
        layers = info.get("layers")
        li, _ = self.layer_source
        if layers is not None and li >= int(layers):
            raise ValueError(f"{at}probe tap {self.tap} is outside the model's {layers} layers")
        hidden = info.get("hidden_size")
        if hidden is not None and int(hidden) + len(self.features) != self.dim:
            raise ValueError(f"{at}probe tap {self.tap} has {self.dim - len(self.features)} state weights, the model's "
                             f"states have {hidden}")

    def score(self, state, extra=None) -> float:
        """P(wrong) for one state vector (and, for a probe with ``features``, those values after it); a
        missing state (an empty answer) is maximally uncertain."""
        if state is None:
            return 1.0
        x = as_array(state).ravel()
        if self.features:
            if extra is None or len(extra) != len(self.features):
                raise ValueError(f"probe {self.form}: reads {', '.join(self.features)} after the state")
            x = np.concatenate([x, as_array(extra, "extra").ravel()])
        if x.shape != self.coef.shape:
            raise ValueError(f"probe {self.tap}: a state of {x.size} features, the probe has {self.dim}")
        z = float(((x - self.mean) / self.scale) @ self.coef + self.intercept)
        return 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0

    def score_check(self, state, scores: dict) -> float:
        """P(wrong) of a knowledge-check answer from its state and, for a stacked probe, the named scores of
        its own samples; a failed score (an empty answer) is maximally uncertain, like a missing state."""
        extra = score_features(scores, self.features) if self.features else None
        return self.score(None if self.features and extra is None else state, extra)

    def scores(self, states: np.ndarray) -> np.ndarray:
        rows = states if isinstance(states, (list, tuple)) else as_array(states)  # a list may hold None (no state)
        return np.array([self.score(s) for s in rows])

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in ("coef", "mean", "scale"):
            d[k] = [float(x) for x in getattr(self, k)]
        return d

    @classmethod
    def from_dict(cls, d: dict, where: str = "probe") -> "Probe":
        if not isinstance(d, dict):
            raise ValueError(f"{where}: not a probe file (a JSON object of its fields)")
        try:
            probe = cls(**d)
        except ValueError as e:
            raise ValueError(f"{where}: {'not a probe file: ' if 'missing' in str(e) else ''}{e}") from None
        probe.source = where  # not a field: where it was read, for check()'s messages
        return probe

    def save(self, path: str | Path) -> None:
        check_not_a_record(given_path(path, "probe"), "probe")
        write_atomic(Path(path), json.dumps(self.to_dict()))


def load_probe(path: str | Path) -> Probe:
    p = Path(given_path(path, "probe", "probe file"))
    if not p.exists():  # a pipe too: it is read once, here
        raise ValueError(f"{path}: {missing(os.fspath(path), 'probe file')}")
    return Probe.from_dict(json_file(p), str(p))


def packaged_name(model: str, form: str) -> str:
    return f"{model.replace('/', '_')}-{form}.probe.json"


def calibration_name(model: str, form: str, estimator: str) -> str:
    return f"{model.replace('/', '_')}-{form}-{estimator}.calibration.json"


def packaged_probe(model: str, form: str) -> Probe:
    """The probe shipped for a packaged model and form (``probes/data``), or a one-line error."""
    f = resources.files("seakr.probes").joinpath("data", packaged_name(model, form))
    if not f.is_file():
        raise ValueError(f"no packaged {form!r} probe for model {model!r}: fit one with `seakr probe fit --form "
                         f"{form} --out FILE` and read it with load_probe(FILE)")  # there is no probe= option
    return Probe.from_dict(json.loads(f.read_text(encoding="utf-8")), f"seakr/probes/data/{f.name}")


def _fit_inputs(X, wrong, *, folds, tap: str, form: str) -> tuple[np.ndarray, np.ndarray]:
    """The states as (n, d) finite floats and the labels as 0/1, or one line naming what is wrong, before any
    fitting (scikit-learn's own words come per fold, as a page)."""
    for name, v in (("form", form), ("tap", tap)):  # the probe's own schema, before the slow fit
        check_value(Probe, name, v, "probe fit:")
    try:  # a torch tensor of any dtype too (bf16 states included)
        X = as_array(X, "X")
    except ValueError:
        raise ValueError("probe fit: X must hold numbers (the states, one row an answer)") from None
    y = labels(wrong, None, "probe fit", "; True: the answer is wrong").astype(int)
    if X.ndim != 2 or len(X) != len(y):
        raise ValueError(f"probe fit: X must be (n, d) with one label per row, got {X.shape} and {len(y)} labels")
    if not np.isfinite(X).all():
        raise ValueError("probe fit: X holds non-finite values (first in row "
                         f"{int(np.argwhere(~np.isfinite(X))[0][0])})")
    if len(set(y)) < 2 or min(np.bincount(y)) < folds:
        raise ValueError(f"probe fit: need at least {folds} right and {folds} wrong answers, got "
                         f"{int((y == 0).sum())} right and {int(y.sum())} wrong")
    return X, y


#: Answers under which a probe over states of at least as many features is called overconfident.
FEW_ANSWERS = 200


def fit_probe(X: np.ndarray, wrong: Sequence[bool], *, model: str, tap: str, form: str, folds: int = 5,
              Cs: Sequence[float] = tuple(np.logspace(-4, -1, 7)), seed: int = 0, data: str = "",
              groups: Sequence | None = None, features: Sequence[str] = (), recalibrate: bool = False) -> Probe:
    """Standardise, then L2 logistic regression for "wrong", C chosen by stratified k-fold AUROC. ``recalibrate``:
    rescale its probabilities by :func:`platt` on out-of-fold logits; off by default, because on 600 train answers
    of the 0.5B the logistic fit's own probabilities were as well calibrated (benchmarks/probe_calibration.py).
    ``groups`` (e.g. the question of each re-rank candidate) keep a group's rows in one fold, so the
    cross-validated score is that of unseen questions."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_score

    folds = check_type(Folds, folds, "probe fit: folds")  # the count the splits and the provenance read
    X, y = _fit_inputs(X, wrong, folds=folds, tap=tap, form=form)
    if len(y) < FEW_ANSWERS <= X.shape[1]:
        warn(f"probe fit ({form}, {tap}): {len(y)} answers for {X.shape[1]} features; a probe fitted on so few is "
             f"overconfident (on 60 it gave P(correct) 1.00 to a wrong answer): fit it on {FEW_ANSWERS} or more, "
             "500 as docs/your-model.md does")
    mean, scale = X.mean(axis=0), X.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    Z = (X - mean) / scale
    # the regularisation strength by stratified k-fold AUROC (the folds are the same for every C)
    cv = _splits(Z, y, folds, seed, groups)
    # The grid stops at C = 0.1: on ~800 states of ~1,000 features weaker regularisation only lost
    # (cross-validated AUROC fell from 0.857 at C = 0.003 to 0.824 at C = 1 on the 0.5B's train states)
    # and made lbfgs ten times slower.
    cv_scores = {float(C): float(cross_val_score(LogisticRegression(C=C, max_iter=2000), Z, y, cv=cv,
                                                 scoring="roc_auc").mean())
                 for C in Cs}
    C = max(cv_scores, key=lambda c: (round(cv_scores[c], 6), -c))  # ties: the stronger regularisation
    lr = LogisticRegression(C=C, max_iter=5000).fit(Z, y)
    prov = {"data": data, "n": int(len(y)), "wrong": int(y.sum()), "cv_auroc": round(cv_scores[C], 4), "folds": folds,
            "fitted_at": time.strftime("%Y-%m-%d")}
    coef, intercept = lr.coef_[0], float(lr.intercept_[0])
    if recalibrate:
        a, b, prov["platt"] = platt(X, y, C=C, folds=folds, groups=groups, seed=seed)
        coef, intercept = a * coef, a * intercept + b
    return Probe(model, tap, form, coef, intercept, mean, scale, C, prov, list(features))


def platt(X: np.ndarray, y: np.ndarray, *, C: float, folds: int, groups=None,
          seed: int = 0) -> tuple[float, float, dict]:
    """(a, b, record) so that sigmoid(a z + b) of a probe's logit z is calibrated: a logistic fit of the labels on
    the out-of-fold logits of probes of strength ``C`` (each row scored by a probe that never saw it). In-sample
    logits of a probe over many features may overstate its certainty (a < 1 pulls them in) or a strong penalty
    squeeze them into a narrow band (a > 1 spreads them). The ranking (AUROC) is unchanged. Where the out-of-fold
    logits carry no signal the probe is left as fitted (a = 1, b = 0) and the record says why."""
    from sklearn.linear_model import LogisticRegression

    try:
        z = out_of_fold(X, y, folds, C=C, groups=groups, seed=seed, logit=True)
    except ValueError as e:  # a fold of one class (tiny grouped data)
        return 1.0, 0.0, {"skipped": f"out-of-fold logits failed ({e})"[:200]}
    fit = LogisticRegression(C=1e6, max_iter=5000).fit(z.reshape(-1, 1), y)
    a, b = float(fit.coef_[0][0]), float(fit.intercept_[0])
    if not (a > 0 and math.isfinite(a) and math.isfinite(b)):
        return 1.0, 0.0, {"skipped": f"no signal in the out-of-fold logits (slope {a:.3g})"}
    return a, b, {"a": round(a, 6), "b": round(b, 6)}


def out_of_fold(X: np.ndarray, wrong, folds: int = 5, *, C: float, groups=None, seed: int = 0,
                logit: bool = False) -> np.ndarray:
    """Each row's P(wrong) (or logit) from a probe of strength ``C`` fitted on the other folds
    (standardised within the fold; question-grouped folds where ``groups``)."""
    from sklearn.linear_model import LogisticRegression

    X, wrong = np.asarray(X, dtype=np.float64), np.asarray(wrong, dtype=int)
    out = np.zeros(len(wrong))
    for tr, te in _splits(X, wrong, folds, seed, groups):
        mu, sd = X[tr].mean(0), X[tr].std(0)
        lr = LogisticRegression(C=C, max_iter=5000).fit((X[tr] - mu) / np.where(sd > 0, sd, 1.0), wrong[tr])
        z = (X[te] - mu) / np.where(sd > 0, sd, 1.0)
        out[te] = lr.decision_function(z) if logit else lr.predict_proba(z)[:, 1]
    return out


def _splits(X: np.ndarray, y: np.ndarray, folds: int, seed: int, groups=None) -> list:
    """The (train, test) folds every probe fit reads: stratified by the label, shuffled by ``seed``, and keeping a
    group's rows in one fold where ``groups`` are given (a question's re-rank candidates)."""
    from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold

    if groups is None:
        return list(StratifiedKFold(folds, shuffle=True, random_state=seed).split(X, y))
    return list(StratifiedGroupKFold(folds, shuffle=True, random_state=seed).split(X, y, groups))
