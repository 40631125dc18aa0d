"""The trace vocabulary every method shares: model calls, retrievals, re-ranks, steps, the final choice.

A trace is a list of events (dicts with a ``type``) plus per-step summaries and totals. In memory the
steps, re-rank candidates and final answers are typed records (:mod:`.records`); ``to_dict`` makes the
JSON form (+inf uncertainties as ``null``; a model-call event adds ``"inf": true`` beside it).
"""

from __future__ import annotations

import hashlib
import math
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import Any, Iterator

from ..common.console import shown
from ..common.jsontext import finite
from .records import Candidate, FinalAnswer


def clean(x: Any) -> Any:
    """JSON-safe copy: non-finite floats -> None (:func:`seakr.common.jsontext.finite`)."""
    return finite(x)


def prompt_hash(prompt: str) -> str:
    return hashlib.sha1(prompt.encode()).hexdigest()[:12]


@dataclass
class Step:
    """One iteration of a multi-step method, as the compact trace line shows it."""

    index: int
    pseudo: str = ""  # the tentative step (pseudo-generation) before any retrieval
    u: float | None = None  # its uncertainty (or the trigger score for FLARE/DRAGIN)
    threshold: float | None = None
    retrieved: bool = False
    query: str = ""
    kept: dict | None = None  # the passage kept (id, title, score)
    candidates: list[Candidate] = field(default_factory=list)  # the re-rank's, in the engine's order
    text: str = ""  # the accepted step
    u_step: float | None = None  # uncertainty of the accepted step's generation
    note: str = ""

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["candidates"] = [c.to_dict() for c in self.candidates]
        return clean(d)


class Tracer:
    """Records what a method emits while it answers: steps starting and ending, model calls,
    retrievals, decisions, timings and the final choice. A ``listener`` sees each event as it happens
    (the service's server-sent events)."""

    def __init__(self, question: str, method: str, listener=None, cancel=None):
        self.question, self.method = question, method
        self.listener, self.cancel = listener, cancel
        self.events: list[dict] = []
        self.steps: list[Step] = []
        self.final: dict = {}  # set by finish(); its "candidates" are FinalAnswer records
        self.stop_reason: str | None = None
        self.t0 = time.perf_counter()
        self.totals = {"model_calls": 0, "sampled_sequences": 0, "generated_tokens": 0, "prompt_tokens": 0,
                       "retrievals": 0, "empty_retrievals": 0, "seconds": {}}

    def emit(self, event: dict) -> None:
        self.events.append(event)
        if self.listener is not None:
            self.listener(clean(event))

    @contextmanager
    def step(self, index: int, threshold: float | None = None) -> Iterator[Step]:
        """One iteration: yields its record for the method to fill; the record is sent when the step ends."""
        st = Step(index=index, threshold=None if threshold is None or math.isinf(threshold) else threshold)
        self.steps.append(st)
        self.emit({"type": "step_started", "index": index})
        try:
            yield st
        finally:
            if self.listener is not None:
                self.listener({"type": "step", **st.to_dict()})

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self.add_seconds(stage, time.perf_counter() - t)

    def add_seconds(self, stage: str, seconds: float) -> None:
        s = self.totals["seconds"]
        s[stage] = round(s.get(stage, 0.0) + seconds, 4)

    def model_call(self, purpose: str, prompt: str, gen, u: float | None, seconds: float) -> None:
        self.totals["model_calls"] += 1
        self.totals["sampled_sequences"] += len(gen.samples) + (1 if gen.greedy else 0)
        self.totals["generated_tokens"] += gen.new_tokens
        self.totals["prompt_tokens"] += gen.prompt_tokens
        self.add_seconds("model", seconds)
        self.emit({
            "type": "model_call", "purpose": purpose, "prompt_hash": prompt_hash(prompt),
            "prompt_tokens": gen.prompt_tokens, "cached_prefix_tokens": gen.cached_prefix_tokens,
            "greedy": gen.greedy.text if gen.greedy else None, "u": u, "inf": u is not None and math.isinf(u),
            "samples": len(gen.samples), "valid_samples": int(gen.states.shape[0]) if gen.samples else 0,
            "tokens_out": gen.new_tokens, "seconds": round(seconds, 3),
        })

    def retrieval(self, query: str, hits, seconds: float) -> None:
        self.totals["retrievals"] += 1
        self.totals["empty_retrievals"] += not hits  # an index of other passages: every search finds nothing
        self.add_seconds("search", seconds)
        self.emit({"type": "retrieval", "query": query, "seconds": round(seconds, 4),
                   "hits": [{"id": h.id, "title": h.title, "score": round(h.score, 4)} for h in hits]})

    def decision(self, what: str, **kw) -> None:
        self.emit({"type": "decision", "what": what, **kw})

    def stop(self, reason: str, **kw) -> str:
        """The loop ends here, for this reason (returned, so ``return tr.stop(...)`` reads as it means)."""
        self.stop_reason = reason
        self.decision("stop", reason=reason, **kw)
        return reason

    def finish(self, answer: str, choice: str, candidates: dict[str, FinalAnswer], *, rule: str | None = None,
               passages=(), note: str = "", scored: bool = False) -> str:
        """The final choice, in the one shape every method shares: the answer, which candidate it came
        from (``choice``), every candidate answer considered, the rule that chose and whether a decision read the
        candidates' scores (``scored``; a rule that takes one form's answer reads none), why the loop
        stopped, and the passages the answer could see."""
        self.final = {"answer": answer, "choice": choice, "rule": rule or choice, "scored": scored,
                      "stop_reason": self.stop_reason, "candidates": candidates,
                      "passages": [{"id": p.id, "title": p.title} for p in passages], "note": note}
        self.decision("final", choice=choice, rule=rule or choice)
        return answer

    def final_states(self) -> dict:
        """{candidate name: the greedy answer's state} for the final candidates whose call read one (a
        probe on the final forms is fitted on these; never part of the trace)."""
        cands = self.final.get("candidates", {}) if self.final else {}
        return {n: c.state for n, c in cands.items() if getattr(c, "state", None) is not None}

    def to_dict(self) -> dict:
        self.totals["seconds"]["total"] = round(time.perf_counter() - self.t0, 3)
        final = {**self.final, "candidates": {n: c.to_dict() for n, c in self.final.get("candidates", {}).items()}} \
            if self.final else {}
        return clean({"question": self.question, "method": self.method, "steps": [s.to_dict() for s in self.steps],
                      "final": final, "events": self.events, "totals": self.totals})


@dataclass
class Answer:
    question: str
    answer: str
    method: str
    trace: dict
    config: dict
    #: {final candidate: its greedy answer's state} where the method read them (memory only: not in to_dict)
    states: dict = field(default_factory=dict, repr=False, compare=False)

    def to_dict(self) -> dict:
        return clean({f.name: getattr(self, f.name) for f in fields(self) if f.name != "states"})

    def summary(self) -> str:
        """Compact readable trace: one line per step (U vs threshold, retrieved, passage kept)."""
        lines = [f"Q: {self.question}"]
        for s in self.trace["steps"]:
            # no U: +inf ("uncertain") where a threshold was to judge a step that has none (an empty
            # pseudo-step retrieves as SeaKR's U=+inf); "-" where no threshold judged it (a method that
            # scores no steps, or a chain past a knowledge check, where every step retrieves)
            # a step that decided to retrieve has its query, whether or not a new passage came of it (a search
            # that found nothing new, after which the chain stopped, still retrieved)
            decided = bool(s["retrieved"] or s["query"])
            inf = s["threshold"] is not None and (s.get("pseudo") or decided)
            u = ("inf" if inf else "-") if s["u"] is None else f"{s['u']:.2f}"
            thr = "" if s["threshold"] is None else f" vs {s['threshold']:.2f}"
            ret = "RETRIEVE" if decided else "no-retr."
            kept = f" kept [{s['kept']['title']}]" if s.get("kept") else ""
            q = f" q={s['query']!r}" if s["query"] else ""
            note = f" ({s['note']})" if s.get("note") else ""
            lines.append(f"  {s['index'] + 1}. U={u}{thr} {ret}{q}{kept}{note}\n     -> {s['text']}")
        f = self.trace.get("final", {})
        cands = f.get("candidates") or {}
        chk = cands.get("check")
        if chk is not None and "p" in chk:  # the knowledge check before the chain (gate=check|probe)
            verdict = "answered at once" if f.get("choice") == "check" else "retrieve"
            lines.insert(1, f"  check: {chk.get('answer')!r} P(correct)={chk['p']:.2f} vs {chk.get('gate_p', 0):.2f} "
                            f"-> {verdict}")
        if len(cands) > 1:
            one_form = not f.get("scored", True)  # the rule took its one form's answer: it read no U

            def fmt(name, d):  # what the rule compared: P(correct) where one was read, else U, where U was
                u, p = d.get("u"), d.get("p")
                read = (f"P(correct)={p:.2f}" if p is not None else "unscored" if one_form
                        else f"U={'inf' if u is None else format(u, '.2f')}")
                return f"{name} {d.get('answer')!r} ({read})"
            lines.append("  final: " + " | ".join(fmt(n, d) for n, d in cands.items()) + f" -> {f.get('choice')}")
        t = self.trace["totals"]
        empty = f" ({t['empty_retrievals']} found nothing)" if t.get("empty_retrievals") else ""
        lines.append(f"A: {self.answer}   [{t['model_calls']} model calls, {t['retrievals']} retrievals{empty}, "
                     f"{t['seconds'].get('total', 0):.1f} s]")
        return shown("\n".join(lines))  # question, passages' titles and steps as a console should show them


def decisions(trace: dict) -> dict:
    """The decisions of one answer, read from its trace (the JSON form), as every door outside the trace viewer
    shows them (the chat-completions ``seakr`` object, the Haystack and LangChain ``meta``): the knowledge
    check, if one ran (its closed-book answer, P(correct), the level it was held to, answered at once or
    retrieved); each step (its U or probe score against the threshold, whether it retrieved, the query, the
    passage kept and the candidates' U or P); and the final choice over the candidate answers. One function,
    so the doors cannot drift apart."""
    final = trace.get("final") or {}
    cands = final.get("candidates") or {}
    check = cands.get("check")
    gate = None
    if check is not None and check.get("p") is not None:
        gate = {"answer": check.get("answer"), "p_correct": check.get("p"), "level": check.get("gate_p"),
                "decision": "answer" if final.get("choice") == "check" else "retrieve"}
    steps = [{"index": s["index"], "u": s.get("u"), "threshold": s.get("threshold"), "retrieved": s.get("retrieved"),
              "query": s.get("query") or None, "kept": s.get("kept"), "text": s.get("text"),
              "candidates": [{k: c.get(k) for k in ("id", "title", "rank", "u", "p", "chosen") if k in c}
                             for c in s.get("candidates") or []]}
             for s in trace.get("steps") or []]
    answers = {name: {k: c.get(k) for k in ("answer", "u", "p") if k in c} for name, c in cands.items()}
    totals = trace.get("totals") or {}
    return {"gate": gate, "steps": steps,
            "final": {"answer": final.get("answer"), "choice": final.get("choice"), "rule": final.get("rule"),
                      "stop_reason": final.get("stop_reason"), "candidates": answers,
                      "passages": final.get("passages") or []},
            "totals": {k: totals.get(k) for k in ("model_calls", "retrievals", "prompt_tokens", "generated_tokens")}
            | {"seconds": (totals.get("seconds") or {}).get("total")}}
