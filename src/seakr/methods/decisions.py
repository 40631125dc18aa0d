"""SeaKR's three self-aware decisions as small strategy objects, each chosen once from the settled configuration
(:meth:`~seakr.methods.seakr.SeaKR._decisions`), so Algorithm 1 (:meth:`~seakr.methods.seakr.SeaKR._run`) reads
the same whichever signal decides:

* the **gate** -- whether to retrieve: the paper's step U against delta (:class:`StepGate`), or a knowledge check
  before the chain (:class:`CheckGate`) past which every step retrieves;
* the **re-ranker** -- which of the engine's candidates to keep: the lowest U (the paper), the engine's top-1, the
  lowest U only beyond its noise (``guarded``), or the candidate probe;
* the **final choice** -- which answer to give: the lower U (the paper), one form only, or the most probable by each
  form's fitted P(correct), the knowledge check's answer among them where one ran (``final_check``).

Each says whether the model calls before it must draw k samples for a U (``scored``), so no call draws samples
nobody reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Protocol

from .base import min_u_index, pick
from .records import Candidate, FinalAnswer
from .text import is_unknown


# ---------------------------------------------------------------------------------------------------- the gate
@dataclass(frozen=True)
class StepGate:
    """The paper's gate (§3.1): retrieve when the pseudo-step's U exceeds delta; ``always`` (the ablation
    "- S.A. retrieval") retrieves at every step."""

    delta: float
    always: bool = False
    checks = False  # no knowledge check before the chain
    scored = True  # the pseudo-step's U is read: its k samples are drawn

    @property
    def threshold(self) -> float:
        return self.delta

    def retrieve(self, u: float | None) -> bool:
        return self.always or (u is not None and u > self.delta)

    def said(self) -> dict:
        return {"delta": self.delta, "rule": "always" if self.always else "self-aware"}


@dataclass(frozen=True)
class CheckGate:
    """A knowledge check before the chain (``check``: its U through the short form's calibration map; ``probe``:
    the short-form probe on its answer's state) answers at once when P(correct) reaches ``level`` with a real
    answer; past it every step retrieves, so the pseudo-step's U would decide nothing and is not sampled."""

    name: str
    level: float
    checks = True
    scored = False
    threshold = None

    def sure(self, known: FinalAnswer) -> bool:
        return known.p >= self.level and not is_unknown(known.answer)

    def retrieve(self, u: float | None) -> bool:
        return True

    def said(self) -> dict:
        return {"delta": None, "rule": f"gate={self.name}"}


# ---------------------------------------------------------------------------------------------------- re-ranking
def guarded_departs(u_top: float | None, u_alt: float | None, se_top: float, se_alt: float, z: float) -> bool:
    """Whether an alternative beats the engine's top-1 by more than the noise: U_top - U_alt > z x the
    standard error of the difference (the two estimates' jackknife errors, independent samples).
    A top-1 that failed (U = +inf or None) yields to any finite alternative; an alternative with no
    error estimate never displaces a finite top-1."""
    top = math.inf if u_top is None else u_top
    alt = math.inf if u_alt is None else u_alt
    if math.isinf(top):
        return not math.isinf(alt)
    if math.isinf(alt) or math.isinf(se_top) or math.isinf(se_alt):
        return False
    return top - alt > z * math.hypot(se_top, se_alt)


def guarded_choice(us: list[float | None], ses: list[float], z: float) -> int:
    """The guarded re-rank: the min-U candidate where it departs from the engine's top-1 by more
    than the noise (:func:`guarded_departs`), else the top-1."""
    best = min_u_index(us)
    return best if best == 0 or guarded_departs(us[0], us[best], ses[0], ses[best], z) else 0


class Reranker(Protocol):
    name: str
    scored: bool  # each candidate's step is sampled for its U
    only_top: bool  # only the engine's top-1 is decoded

    def choose(self, cands: list[Candidate]) -> int: ...


@dataclass(frozen=True)
class LowestU:
    """The paper's re-rank (§3.2): the candidate whose step has the lowest U (ties: the engine's order)."""

    name = "self-aware"
    scored = True
    only_top = False

    def choose(self, cands: list[Candidate]) -> int:
        return min_u_index([c.u for c in cands])


@dataclass(frozen=True)
class EngineOrder:
    """The ablation ``rerank=engine``: trust the engine's order; only its top-1's step is decoded, unsampled."""

    name = "engine"
    scored = False
    only_top = True

    def choose(self, cands: list[Candidate]) -> int:
        return 0


@dataclass(frozen=True)
class Guarded:
    """``rerank=guarded``: the lowest U only where it beats the engine's top-1 by ``z`` standard errors."""

    z: float
    name = "guarded"
    scored = True
    only_top = False

    def choose(self, cands: list[Candidate]) -> int:
        return guarded_choice([c.u for c in cands], [0.0 if c.u_se is None else c.u_se for c in cands], self.z)


@dataclass(frozen=True)
class ProbeRanker:
    """``rerank=probe``: the candidate the candidate probe finds most likely to support the answer, from its
    step's greedy state and the engine's rank and score (ties: the engine's order). ``p_of(candidate, top_score)``
    is the probe's P(supports)."""

    p_of: Callable[[Candidate, float], float]
    name = "probe"
    scored = False
    only_top = False

    def choose(self, cands: list[Candidate]) -> int:
        for c in cands:
            c.p = self.p_of(c, cands[0].score)
        return max(range(len(cands)), key=lambda j: (cands[j].p, -j))


# ---------------------------------------------------------------------------------------------------- final choice
#: The order a tie between equally probable answers goes by: the answer read from the passages first (on train
#: chains it was the better single answer), then the chain's own, then the closed-book one.
FINAL_ORDER = ("knowledge", "rationale", "check")


def most_probable(answers: dict[str, FinalAnswer]) -> str:
    """The name of the answer with the highest P(correct); an abstention ("unknown", empty) yields to any real
    answer, and a tie goes by :data:`FINAL_ORDER`. With the chain's two answers alone this is the pairwise rule
    (the more probable, ties to the knowledge answer)."""
    names = [n for n in FINAL_ORDER if n in answers]
    real = [n for n in names if not is_unknown(answers[n].answer)] or names
    return max(real, key=lambda n: (answers[n].p, -FINAL_ORDER.index(n)))


@dataclass(frozen=True)
class LowerU:
    """The paper's final choice (§3.3): the answer with the lower U (tie: knowledge; an abstention defers)."""

    name = "self-aware"
    forms = ("rationale", "knowledge")
    scored = True

    def choose(self, cands: dict[str, FinalAnswer], known: FinalAnswer | None) -> tuple[str, dict]:
        return pick(cands["rationale"], cands["knowledge"]), {}


@dataclass(frozen=True)
class OneForm:
    """The ablations ``reasoning=rationales`` / ``knowledge``, and IRCoT's reading (``steps``): one answer, generated
    alone, unsampled."""

    name: str

    @property
    def forms(self) -> tuple[str, ...]:
        return ({"rationales": "rationale", "steps": "steps"}.get(self.name, "knowledge"),)

    scored = False

    def choose(self, cands: dict[str, FinalAnswer], known: FinalAnswer | None) -> tuple[str, dict]:
        return self.forms[0], {}


@dataclass(frozen=True)
class MostProbable:
    """The final choice on one scale (``calibrated``: each answer's U through its form's calibration map;
    ``probe``: its form's probe on the answer's state): the most probable answer wins, the knowledge check's
    closed-book answer among them by the P(correct) its gate read where ``with_check`` and a check ran.
    ``p_of(form, answer)`` is the answer's P(correct)."""

    name: str
    p_of: Callable[[str, FinalAnswer], float]
    with_check: bool
    forms = ("rationale", "knowledge")

    @property
    def scored(self) -> bool:
        return self.name == "calibrated"  # a calibration map reads the U of k samples; a probe reads the state

    def choose(self, cands: dict[str, FinalAnswer], known: FinalAnswer | None) -> tuple[str, dict]:
        for name in self.forms:
            cands[name].p = self.p_of(f"final-{name}", cands[name])
        held = {**cands, **({"check": known} if known is not None and self.with_check else {})}
        return most_probable(held), {f"p_{n}": x.p for n, x in held.items()}


__all__ = ["CheckGate", "EngineOrder", "FINAL_ORDER", "Guarded", "LowerU", "LowestU", "MostProbable", "OneForm",
           "ProbeRanker", "Reranker", "StepGate", "guarded_choice", "guarded_departs", "most_probable"]
