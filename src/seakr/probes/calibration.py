"""Calibration maps: a score of one decision form (higher = less certain) -> P(correct) in that form.

SeaKR's final choice compares a rationale-based and a knowledge-based answer by their raw U; the two
prompt forms put U on different scales (the knowledge form dictates less, so its U sits higher whether
or not it is right). Mapping each through its own form's map compares probabilities instead. Maps are
monotone non-increasing in the score by construction: isotonic regression constrained that way, or
Platt scaling whose slope is clipped at zero (a score that ranks the wrong way on the tuning data is no
signal, and the map falls back to the form's base rate).
"""

from __future__ import annotations

import json
import math
import numbers
import os
import time
from dataclasses import asdict, field
from pathlib import Path
from typing import Any, Literal, Sequence

import numpy as np
from pydantic import model_validator

from ..common.runs import check_not_a_record
from ..common.checks import labels
from ..common.schema import Real, schema
from ..common.console import did_you_mean, warn
from ..common.files import given_path, missing
from ..common.jsontext import json_file
from ..common.writing import write_atomic
from .probe import FORMS

KINDS = ("isotonic", "platt")


@schema("field")
class Calibration:
    form: Literal[FORMS]
    estimator: str
    kind: Literal[KINDS]
    x: list[Real] | None = None  # isotonic: knots (increasing score)
    y: list[Real] | None = None  # isotonic: P(correct) at the knots (non-increasing)
    a: Real | None = None  # platt: P(correct) = sigmoid(a * score + b), a <= 0
    b: Real | None = None
    provenance: dict[str, Any] = field(default_factory=dict)

    @model_validator(mode="after")
    def _a_map(self):
        """The kind's own parameters, each given (a Platt map without them would be the constant 0.5); isotonic:
        increasing knots, a non-increasing P(correct) in 0..1; Platt: a slope <= 0."""
        need = {"isotonic": ("x", "y"), "platt": ("a", "b")}[self.kind]
        if missing := [k for k in need if getattr(self, k) is None]:
            raise ValueError(f"a {self.kind} map needs the fields {' and '.join(need)}; {', '.join(missing)} missing")
        if self.kind == "isotonic":
            if not self.x or len(self.x) != len(self.y) or any(b < a for a, b in zip(self.x, self.x[1:])) \
                    or any(b > a + 1e-12 for a, b in zip(self.y, self.y[1:])):
                raise ValueError(f"isotonic calibration {self.form}/{self.estimator}: knots must be increasing and "
                                 "P(correct) non-increasing, with one value per knot")
            if not all(0.0 <= v <= 1.0 for v in self.y):
                raise ValueError(f"isotonic calibration {self.form}/{self.estimator}: P(correct) outside 0..1")
        elif self.a > 0:
            raise ValueError(f"platt calibration {self.form}/{self.estimator}: slope must be finite and <= 0")
        return self

    @property
    def scores_read(self) -> list[str]:
        """The estimator whose values it maps (see :meth:`Probe.scores_read`)."""
        return [self.estimator]

    def __call__(self, score: float | None) -> float:
        """P(correct) for a score; a missing or +inf score (a failed estimate) maps to the least certain end."""
        s = math.inf if score is None or score != score else float(score)
        if self.kind == "isotonic":
            if math.isinf(s):
                return float(self.y[-1] if s > 0 else self.y[0])
            return float(np.interp(s, self.x, self.y))
        z = self.a * s + self.b if not (math.isinf(s) and self.a == 0) else self.b
        return 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict, where: str = "calibration") -> "Calibration":
        if not isinstance(d, dict):
            raise ValueError(f"{where}: not a calibration map (a JSON object of form, estimator, kind and its "
                             "parameters)")
        try:
            return cls(**d)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None

    def save(self, path: str | Path) -> None:
        check_not_a_record(given_path(path, "calibration"), "calibration")
        write_atomic(Path(path), json.dumps(self.to_dict()))

    @classmethod
    def load(cls, path: str | Path) -> "Calibration":
        p = Path(given_path(path, "calibration", "calibration file"))
        if not p.exists():  # a pipe too: it is read once, here
            raise ValueError(f"{path}: {missing(os.fspath(path), 'calibration file')}")
        return cls.from_dict(json_file(p), str(p))


#: Answers under which an isotonic map is called unreliable (its steps follow single answers).
FEW_FOR_ISOTONIC = 200


def fit_calibration(scores: Sequence[float | None], correct: Sequence[bool], *, form: str, estimator: str,
                    kind: str | None = "isotonic", data: str = "") -> Calibration:
    """Fit P(correct | score) on tuning rows. A failed score (None/inf) is placed above every finite
    one, as the least certain. ``kind=None``: isotonic on :data:`FEW_FOR_ISOTONIC` answers or more, else Platt's
    two parameters (as the packaged maps were chosen: the check's on 800 answers isotonic, the final forms' on 50
    Platt)."""
    where = f"calibration {form}/{estimator}"
    scores, correct = list(scores), list(correct)
    bad = next((i for i,
                v in enumerate(scores) if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Real))),
               None)
    if bad is not None:
        raise ValueError(f"{where}: scores must be numbers (None for a failed estimate), got {scores[bad]!r} at row "
                         f"{bad}")
    correct = list(labels(correct, None, where, "; True: the answer is right"))
    if len(scores) != len(correct) or len(scores) < 2:
        raise ValueError(f"{where}: need at least two scored rows with one label each, got {len(scores)} scores "
                         f"and {len(correct)} labels")
    if kind is None:
        kind = "isotonic" if len(scores) >= FEW_FOR_ISOTONIC else "platt"
    s = np.array([math.inf if v is None or v != v else float(v) for v in scores])
    c = np.asarray(correct, dtype=float)
    fin = np.isfinite(s)
    top = (s[fin].max() + 1.0) if fin.any() else 0.0
    s = np.where(fin, s, top)  # a failed estimate ranks as the least certain
    prov = {"data": data, "n": int(len(s)), "correct": int(c.sum()), "fitted_at": time.strftime("%Y-%m-%d")}
    if kind == "isotonic":
        from sklearn.isotonic import IsotonicRegression

        if len(s) < FEW_FOR_ISOTONIC:  # the packaged isotonic maps: 800 answers; the final forms' 50: Platt
            warn(f"{where}: an isotonic map of {len(s)} answers steps on a few answers each (P(correct) 0 or 1 "
                 f"where one decides): fit it on {FEW_FOR_ISOTONIC} or more, or use --kind platt (two parameters)")

        iso = IsotonicRegression(increasing=False, out_of_bounds="clip", y_min=0.0, y_max=1.0).fit(s, c)
        return Calibration(form, estimator, kind, [float(v) for v in iso.X_thresholds_],
                           [float(v) for v in iso.y_thresholds_], provenance=prov)
    if kind == "platt":
        from sklearn.linear_model import LogisticRegression

        if len(set(c)) < 2:  # one class only: the base rate, no slope
            p = min(max(c.mean(), 1e-3), 1 - 1e-3)
            return Calibration(form, estimator, kind, a=0.0, b=math.log(p / (1 - p)), provenance=prov)
        lr = LogisticRegression(C=1e6, max_iter=1000).fit(s.reshape(-1, 1), c)
        a, b = float(lr.coef_[0][0]), float(lr.intercept_[0])
        if a > 0:  # ranks the wrong way: no usable signal, keep the base rate
            p = c.mean()
            a, b, prov["slope_clipped"] = 0.0, math.log(p / (1 - p)), True
        return Calibration(form, estimator, kind, a=a, b=b, provenance=prov)
    raise ValueError(f"calibration kind must be one of {', '.join(KINDS)}, not {kind!r}{did_you_mean(kind, KINDS)}")
