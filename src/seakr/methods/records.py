"""The typed records a method produces: a re-rank candidate, a final answer, and SeaKR's chain between steps.

Uncertainties are floats in memory and +inf when missing or failed (too few valid samples, an empty
step, a call that was not scored); JSON has no infinities, so they cross the file boundary through one
function each way: :func:`u_to_json` (+inf and NaN -> null) and :func:`u_from_json` (null, and the
strings "inf"/"Infinity" older files hold, -> +inf). Every record serialises with ``to_dict`` and loads
with ``from_dict``; a state vector read for a probe stays in memory only.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any


def u_to_json(u: float | None) -> float | None:
    """An uncertainty as JSON writes it: finite floats as they are, +-inf and NaN as null."""
    return None if u is None or not math.isfinite(u) else float(u)


def u_from_json(v: Any) -> float:
    """An uncertainty as a file holds it, back in memory: a number as it is; null, NaN and the strings
    "inf"/"Infinity" as +inf (missing or failed); "-inf" as -inf (a threshold that never fires)."""
    if v is None:
        return math.inf
    if isinstance(v, str):
        s = v.strip().lower()
        if s in ("-inf", "-infinity"):
            return -math.inf
        if s in ("inf", "+inf", "infinity", "nan"):
            return math.inf
        raise ValueError(f"not an uncertainty: {v!r}")
    x = float(v)
    return math.inf if math.isnan(x) else x


def _opt(v: float | None) -> float | None:
    return None if v is None else float(v)


@dataclass
class Candidate:
    """One re-rank candidate: a retrieved passage, the step (or answer) generated with it in context,
    that generation's U and, when a probe read it, its P(the passage supports the answer)."""

    id: str
    title: str
    rank: int  # the engine's order, 0 = its top-1
    step: str = ""
    u: float = math.inf
    chosen: bool = False
    score: float | None = None  # the engine's score
    u_se: float | None = None  # the jackknife standard error of U (EigenScore only)
    p: float | None = None
    state: Any = field(default=None, repr=False, compare=False)  # the greedy step's state, for the probe
    scored: Any = field(default=None, repr=False, compare=False)  # the step's generation (memory only: a next query)

    def to_dict(self) -> dict:
        d = {"id": self.id, "title": self.title, "rank": self.rank, "step": self.step, "u": u_to_json(self.u),
             "chosen": self.chosen}
        for k in ("score", "u_se", "p"):
            if getattr(self, k) is not None:
                d[k] = u_to_json(getattr(self, k)) if k == "u_se" else getattr(self, k)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Candidate":
        return cls(id=str(d.get("id", "")), title=d.get("title", ""), rank=int(d.get("rank", 0)),
                   step=d.get("step", ""),
                   u=u_from_json(d.get("u")), chosen=bool(d.get("chosen", False)), score=_opt(d.get("score")),
                   u_se=None if "u_se" not in d else u_from_json(d["u_se"]), p=_opt(d.get("p")))


@dataclass
class FinalAnswer:
    """One answer a method considered at the end (SeaKR's rationale and knowledge answers, the check,
    a baseline's last step): the short answer, its U, the text it was read from, whether the marker had
    to be forced, and the probabilities a calibrated or probed choice read."""

    answer: str
    u: float = math.inf
    text: str = ""
    forced: bool = False
    p: float | None = None  # P(correct) (gate=check|probe, reasoning=calibrated|probe)
    gate_p: float | None = None  # the knowledge check's level
    sure: bool | None = None  # the knowledge check's decision
    em: float | None = None  # scored against the golds (result rows only)
    f1: float | None = None
    state: Any = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict:
        d = {"answer": self.answer, "u": u_to_json(self.u), "text": self.text, "forced": self.forced}
        for k in ("p", "gate_p", "sure", "em", "f1"):
            if getattr(self, k) is not None:
                d[k] = getattr(self, k)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "FinalAnswer":
        return cls(answer=d.get("answer") or "", u=u_from_json(d.get("u")), text=d.get("text") or "",
                   forced=bool(d.get("forced", False)), p=_opt(d.get("p")), gate_p=_opt(d.get("gate_p")),
                   sure=d.get("sure"), em=_opt(d.get("em")), f1=_opt(d.get("f1")))

    def replace(self, **kw) -> "FinalAnswer":
        return dataclasses.replace(self, **kw)



@dataclass
class Chain:
    """The chain's state between steps (Algorithm 1): the rationales R, the knowledge buffer K, the queries asked
    (a repeated one stops the chain), and the accepted step's generation (the next query, where query_from=step)."""

    steps: list[str] = field(default_factory=list)
    kept: list = field(default_factory=list)
    queries: set[str] = field(default_factory=set)
    last: Any = None


__all__ = ["Candidate", "Chain", "FinalAnswer", "u_from_json", "u_to_json"]
