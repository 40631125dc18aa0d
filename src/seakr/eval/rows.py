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
from typing import Annotated, Any

from pydantic import AfterValidator, Field, Strict, model_validator

from ..common.schema import Said, schema
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


def _u(v):
    """A U as a row holds it: a number, null (failed or missing) or a string older files hold for an infinity
    ("inf", "-inf", "Infinity", "nan"); any other string is refused before a summary's arithmetic."""
    if isinstance(v, str):
        u_from_json(v)
    return v


#: What the readers of rows take (a row this package did not write is refused by file, line and field).
Score = Annotated[float, Strict(), Field(ge=0, le=1), Said("a number from 0 to 1", "numbers from 0 to 1")]
Count = Annotated[float, Strict(), Field(ge=0), Said("a number >= 0", "numbers >= 0")]
U = Annotated[Annotated[float, Strict(), Field(allow_inf_nan=True)] | Annotated[str, Strict()] | None,
              AfterValidator(_u), Said("an uncertainty (a number)", "uncertainties")]
Text = Annotated[str, Strict()]
Flag = Annotated[bool, Strict()]


@schema("field", extra="ignore", strict=False)
class _Identified:
    """Every row, of a run or a study: an object with a question id."""

    id: Annotated[Text | Annotated[int, Strict()], Said("a question id (text or a whole number)", "question ids")]


@schema("field", extra="ignore", strict=False)
class _Step:
    u: U = None
    threshold: U = None


@schema("field", extra="ignore", strict=False)
class _Candidate:
    u: U = None
    p: U = None
    em: Score | None = None
    f1: Score | None = None


@schema("field", extra="ignore", strict=False)
class _Final:
    candidates: dict[str, _Candidate] | None = None


@schema("field", extra="ignore", strict=False)
class _Totals:
    retrievals: Count | None = None
    empty_retrievals: Count | None = None
    model_calls: Count | None = None
    sampled_sequences: Count | None = None
    generated_tokens: Count | None = None


@schema("field", extra="ignore", strict=False)
class _Body:
    """What a score row holds at its top, and a full row inside ``trace``: the readers' costs, steps and final."""

    totals: _Totals | None = None
    steps: list[_Step] | None = None
    final: _Final | None = None


@schema("field", extra="ignore", strict=False)
class _Row(_Body, _Identified):
    prediction: Text | None = None
    em: Score | None = None  # both null: a question without gold answers
    f1: Score | None = None
    seconds: Count | None = None
    order: Count | None = None
    trace: _Body | None = None

    @model_validator(mode="after")
    def _scored_or_not(self):
        if (self.em is None) != (self.f1 is None):
            raise ValueError("field em and f1: both scores, or both null (a question without gold answers)")
        return self


@schema("field", extra="ignore", strict=False)
class CalibrationRow(_Identified):
    """A row of ``seakr calibrate``: the closed-book answer's U and both answers' F1."""

    u: U
    f1_direct: Score
    f1_rag: Score


@schema("field", extra="ignore", strict=False)
class DetectRow(_Identified):
    """A row of ``seakr detect``: the answer's F1 and every estimator's score of it."""

    f1: Score
    scores: dict[str, U]


@schema("field", extra="ignore", strict=False)
class RerankRow(_Identified):
    """A row of ``seakr rerank-study``: the candidates' titles, the gold ones, each candidate's U (and its
    standard error, and what each rule kept, in rows that have them: older rows lack them, none holds null)."""

    titles: list[Text]
    gold: list[Text]
    u: list[U]
    u_se: list[U] = None
    engine_top1_gold: Flag = None
    seakr_top1_gold: Flag = None
    guarded_top1_gold: Flag = None
    any_gold_in_top_n: Flag = None

    @model_validator(mode="after")
    def _one_per_title(self):
        """auroc() refused 3 Us for 2 titles only after the study's end."""
        for k in ("u", "u_se"):
            if getattr(self, k) is not None and len(getattr(self, k)) != len(self.titles):
                raise ValueError(f"field {k} holds {len(getattr(self, k))} values for {len(self.titles)} titles")
        return self


#: The file each study writes its rows to, by the study's name (its command).
STUDY_FILES = {"calibrate": "calibration_rows.jsonl", "detect": "detect_rows.jsonl",
               "rerank-study": "rerank_rows.jsonl"}
#: The schema of each study's rows, by file: what its summary and the probes fitted on it read.
STUDY_ROWS = {"calibration_rows.jsonl": CalibrationRow, "detect_rows.jsonl": DetectRow, "rerank_rows.jsonl": RerankRow}


def study_row_check(rows_name: str):
    """The check of a study's rows for ``read_results`` and ``RowLog``; None for rows no summary here reads."""
    schema_ = STUDY_ROWS.get(rows_name)
    if schema_ is None:
        return None

    def check(row) -> None:
        if not isinstance(row, dict):
            raise ValueError("a row is not a JSON object")
        schema_(**row)
    return check


def check_row(d: Any) -> None:
    """Refuse a row this package did not write (a hand-edited, foreign or truncated-by-hand file) with one
    line naming the field, instead of a KeyError deep in a summary or a comparison. Either shape: the
    score row holds totals/steps/final at the top, the full row inside ``trace``."""
    if not isinstance(d, dict):
        raise ValueError("a row is not a JSON object")
    _Row(**d)


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
            return cls(**base, totals=d.get("totals") or {},
                       steps=[StepScore.from_dict(s) for s in d.get("steps") or []],
                       final=FinalChoice.from_dict(d.get("final")))
        golds = d.get("golds")
        return cls(**base, totals=tr.get("totals") or {}, steps=[StepScore.from_dict(s) for s in tr.get("steps") or []],
                   final=FinalChoice.from_dict(tr.get("final"), golds), question=d.get("question"), golds=golds,
                   trace=tr)

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


__all__ = ["STUDY_FILES", "STUDY_ROWS", "TOTALS", "Count", "FinalChoice", "ResultRow", "Score", "StepScore", "U",
           "check_row", "study_row_check"]
