"""One evaluated question, typed: :class:`ResultRow`.

A run writes two files of these rows: ``results.jsonl`` (the full row: the question, its gold answers
and the whole trace) and ``scores.jsonl`` (the same row without any text from the data: ids,
predictions, scores, U values, decisions, costs; the file a run commits so ``--resume`` continues on
another machine). :meth:`ResultRow.from_dict` reads either shape, older files included; ``to_dict``
writes the full one and ``to_score_dict`` the committed one. Uncertainties are +inf in memory when
missing (:mod:`seakr.methods.records`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..methods.records import FinalAnswer, u_from_json, u_to_json
from .metrics import exact_match, f1_score


@dataclass
class StepScore:
    """What a step decided: its U, the threshold it met, whether it retrieved, the passage kept."""

    u: float = float("inf")
    threshold: float | None = None
    retrieved: bool = False
    kept: str | None = None  # the kept passage's id

    def to_dict(self) -> dict:
        return {"u": u_to_json(self.u), "threshold": self.threshold, "retrieved": self.retrieved, "kept": self.kept}

    @classmethod
    def from_dict(cls, d: dict) -> "StepScore":
        kept = d.get("kept")
        return cls(u_from_json(d.get("u")), d.get("threshold"), bool(d.get("retrieved")),
                   kept.get("id") if isinstance(kept, dict) else kept)


@dataclass
class FinalChoice:
    """The final stage: which candidate answered, under which rule, why the chain stopped, and every
    candidate answer (with its own EM/F1 when the golds were at hand)."""

    choice: str | None = None
    rule: str | None = None
    stop_reason: str | None = None
    candidates: dict[str, FinalAnswer] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"choice": self.choice, "rule": self.rule, "stop_reason": self.stop_reason,
                "candidates": {n: _slim(c) for n, c in self.candidates.items()}}

    @classmethod
    def from_dict(cls, d: dict | None, golds: list | None = None) -> "FinalChoice":
        d = d or {}
        cands = {n: FinalAnswer.from_dict(c) for n, c in (d.get("candidates") or {}).items()}
        if golds:  # none, or an empty list (a question without gold answers): no scores to give
            for c in cands.values():
                c.em, c.f1 = exact_match(c.answer, golds), f1_score(c.answer, golds)
        return cls(d.get("choice"), d.get("rule"), d.get("stop_reason"), cands)


#: What a written row's totals carry: the summary table's cost columns read them.
TOTALS = ("retrievals", "empty_retrievals", "model_calls", "sampled_sequences", "generated_tokens")


def _check_id(d: Any) -> None:
    """Every row, of a run or a study: a JSON object with a question id."""
    if not isinstance(d, dict):
        raise ValueError("a row is not a JSON object")
    if isinstance(d.get("id"), bool) or not isinstance(d.get("id"), (str, int)):
        raise ValueError(f"field 'id' is {d.get('id')!r}, not a question id")


def check_row(d: Any) -> None:
    """Refuse a row this package did not write (a hand-edited, foreign or truncated-by-hand file) with one
    line naming the field, instead of a KeyError deep in a summary or a comparison. Either shape: the
    score row holds totals/steps/final at the top, the full row inside ``trace``."""
    _check_id(d)
    if not isinstance(d.get("prediction") or "", str):
        raise ValueError(f"field 'prediction' is {d['prediction']!r}, not a string")
    if not ("em" in d and "f1" in d and d["em"] is None and d["f1"] is None):  # both null: a question without gold
        check_fields(d, {"em": "score", "f1": "score"}, row=False)
    check_fields(d, {"seconds": "count", "order": "count"}, required=False, row=False)
    pre, body = ("trace.", d["trace"]) if d.get("trace") is not None else ("", d)
    if not isinstance(body, dict):
        raise ValueError("field 'trace' is not an object")
    totals = body.get("totals") or {}
    if not isinstance(totals, dict):
        raise ValueError(f"field '{pre}totals' is not an object")
    # a cost absent in a hand-made row: the summary then gives no figure for it, never a wrong one
    check_fields(totals, dict.fromkeys(TOTALS, "count"), prefix=f"{pre}totals.", required=False, row=False)
    if not isinstance(body.get("steps") or [], list) or not all(isinstance(s, dict) for s in body.get("steps") or []):
        raise ValueError(f"field '{pre}steps' is not a list of objects")
    for i, step in enumerate(body.get("steps") or []):  # the selfknow tables read each step's U (float([]) failed)
        check_fields(step, {"u": "u", "threshold": "u"}, prefix=f"{pre}steps[{i}].", required=False, row=False)
    final = body.get("final") or {}
    cands = final.get("candidates") or {} if isinstance(final, dict) else None
    if not isinstance(cands, dict) or not all(isinstance(c, dict) for c in cands.values()):
        raise ValueError(f"field '{pre}final' is not an object of candidate objects")
    for name, c in cands.items():
        check_fields(c, {"u": "u", "p": "u", "em": "score", "f1": "score"}, prefix=f"{pre}final.candidates.{name}.",
                     required=False, row=False)


def _is_u(v: Any) -> bool:
    """A U as a row holds it: a number, null (failed or missing) or a string older files hold for an
    infinity ("inf", "-inf", "Infinity", "nan"; any other string, "x", reached a summary's arithmetic)."""
    if isinstance(v, str):
        try:
            u_from_json(v)
        except ValueError:
            return False
    return v is None or isinstance(v, str) or (isinstance(v, (int, float)) and not isinstance(v, bool))


#: The kinds of field a study row declares (:func:`check_fields`): what the value must be, and how it is said.
FIELD_KINDS = {
    "score": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1, "a number from 0 to 1"),
    "count": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0, "a number >= 0"),
    "u": (_is_u, "an uncertainty (a number or null)"),
    "us": (lambda v: isinstance(v, list) and all(_is_u(x) for x in v), "a list of uncertainties"),
    "scores": (lambda v: isinstance(v, dict) and all(_is_u(x) for x in v.values()), "an object of uncertainties"),
    "names": (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v), "a list of strings"),
    "flag": (lambda v: isinstance(v, bool), "true or false"),
}


def check_fields(d: Any, spec: dict[str, str], prefix: str = "", required: bool = True, row: bool = True) -> None:
    """Refuse a row lacking a field its readers need, naming the field (``spec``: field -> kind of
    :data:`FIELD_KINDS`; ``prefix`` names where ``d`` sits in the row). ``required=False``: a missing or null
    field passes; a kind ending in "?" is a field older rows lack (absent passes, null does not). ``row``: ``d``
    is a whole row, whose id is checked first."""
    if row:
        _check_id(d)
    for k, kind in spec.items():
        if (not required and d.get(k) is None) or (kind.endswith("?") and k not in d):
            continue
        ok, want = FIELD_KINDS[kind.rstrip("?")]
        if k not in d or not ok(d[k]):
            raise ValueError(f"field {prefix + k!r} is {'missing' if k not in d else repr(d[k])[:40]}, not {want}")


def _slim(c: FinalAnswer) -> dict:
    """A final candidate as a score row keeps it: the answer, U, P(correct) and its scores, no text."""
    out = {"answer": c.answer, "u": u_to_json(c.u)}
    for k in ("p", "em", "f1"):
        if getattr(c, k) is not None:
            out[k] = getattr(c, k)
    return out


@dataclass
class ResultRow:
    """One question of an eval run (see the module doc for its two file shapes)."""

    id: str
    prediction: str
    em: float | None  # None: the question has no gold answer (a test split), answered but not scored
    f1: float | None
    seconds: float = 0.0
    order: int = 0
    type: str | None = None
    totals: dict = field(default_factory=dict)  # model_calls, retrievals, sampled_sequences, tokens, seconds
    steps: list[StepScore] = field(default_factory=list)
    final: FinalChoice = field(default_factory=FinalChoice)
    question: str | None = None  # full rows only (text from the data)
    golds: list | None = None
    trace: dict | None = None

    @property
    def retrievals(self) -> int:
        return int(self.totals.get("retrievals") or 0)  # absent or null in a row made by hand: none counted

    @classmethod
    def from_dict(cls, d: dict) -> "ResultRow":
        check_row(d)
        tr = d.get("trace")
        em, f1 = (None if d.get(k) is None else float(d[k]) for k in ("em", "f1"))
        base = dict(id=d["id"], prediction=d.get("prediction") or "", em=em, f1=f1,
                    seconds=float(d.get("seconds") or 0.0), order=int(d.get("order") or 0), type=d.get("type"))
        if tr is None:  # a score row
            return cls(**base, totals=d.get("totals") or {}, steps=[StepScore.from_dict(s) for s in d.get("steps") or []],
                       final=FinalChoice.from_dict(d.get("final")))
        golds = d.get("golds")
        return cls(**base, totals=tr.get("totals") or {}, steps=[StepScore.from_dict(s) for s in tr.get("steps") or []],
                   final=FinalChoice.from_dict(tr.get("final"), golds), question=d.get("question"), golds=golds, trace=tr)

    def _head(self) -> dict:
        out: dict[str, Any] = {"id": self.id, "order": self.order, "prediction": self.prediction, "em": self.em,
                               "f1": self.f1}
        if self.type is not None:
            out["type"] = self.type
        out["seconds"] = self.seconds
        return out

    def to_score_dict(self) -> dict:
        """The committed shape: no question, passage or trace text."""
        return {**self._head(), "totals": self.totals, "steps": [s.to_dict() for s in self.steps],
                "final": self.final.to_dict()}

    def to_dict(self) -> dict:
        """The full shape (results.jsonl) when the row has its trace, else the score shape."""
        if self.trace is None:
            return self.to_score_dict()
        return {**self._head(), "question": self.question, "golds": self.golds, "trace": self.trace}


__all__ = ["TOTALS", "FinalChoice", "ResultRow", "StepScore", "check_fields", "check_row"]
