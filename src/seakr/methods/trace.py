"""The trace vocabulary every method shares: model calls, retrievals, re-ranks, steps, the final choice.

A trace is a list of events (dicts with a ``type``) plus per-step summaries and totals, all JSON-safe
(+inf uncertainties are written as ``null`` with ``"inf": true`` beside them).
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any


def clean(x: Any) -> Any:
    """JSON-safe copy: non-finite floats -> None."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    return x


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
    candidates: list[dict] = field(default_factory=list)  # re-rank: id, title, step, u, chosen
    text: str = ""  # the accepted step
    u_step: float | None = None  # uncertainty of the accepted step's generation
    note: str = ""


class Tracer:
    def __init__(self, question: str, method: str, listener=None):
        self.question, self.method = question, method
        self.listener = listener  # called with each event as it happens (server-sent events)
        self.streamed = False
        self.events: list[dict] = []
        self.steps: list[Step] = []
        self.final: dict = {}
        self.t0 = time.perf_counter()
        self.totals = {"model_calls": 0, "sampled_sequences": 0, "generated_tokens": 0, "prompt_tokens": 0,
                       "retrievals": 0, "seconds": {}}

    def emit(self, event: dict) -> None:
        self.events.append(event)
        if self.listener is not None:
            self.listener(clean(event))

    def step_done(self, st: "Step") -> None:
        self.streamed = True
        if self.listener is not None:
            self.listener(clean({"type": "step", **asdict(st)}))

    def stage(self, name: str, seconds: float) -> None:
        s = self.totals["seconds"]
        s[name] = round(s.get(name, 0.0) + seconds, 4)

    def model_call(self, purpose: str, prompt: str, gen, u: float | None, seconds: float) -> None:
        self.totals["model_calls"] += 1
        self.totals["sampled_sequences"] += len(gen.samples) + (1 if gen.greedy else 0)
        self.totals["generated_tokens"] += gen.new_tokens
        self.totals["prompt_tokens"] += gen.prompt_tokens
        self.stage("model", seconds)
        self.emit({
            "type": "model_call", "purpose": purpose, "prompt_hash": prompt_hash(prompt),
            "prompt_tokens": gen.prompt_tokens, "cached_prefix_tokens": gen.cached_prefix_tokens,
            "greedy": gen.greedy.text if gen.greedy else None, "u": u, "inf": u is not None and math.isinf(u),
            "samples": len(gen.samples), "valid_samples": int(gen.states.shape[0]) if gen.samples else 0,
            "tokens_out": gen.new_tokens, "seconds": round(seconds, 3),
        })

    def retrieval(self, query: str, hits, seconds: float) -> None:
        self.totals["retrievals"] += 1
        self.stage("search", seconds)
        self.emit({"type": "retrieval", "query": query, "seconds": round(seconds, 4),
                            "hits": [{"id": h.id, "title": h.title, "score": round(h.score, 4)} for h in hits]})

    def decision(self, what: str, **kw) -> None:
        self.emit({"type": "decision", "what": what, **kw})

    def to_dict(self) -> dict:
        self.totals["seconds"]["total"] = round(time.perf_counter() - self.t0, 3)
        return clean({"question": self.question, "method": self.method, "steps": [asdict(s) for s in self.steps],
                      "final": self.final, "events": self.events, "totals": self.totals})


@dataclass
class Answer:
    question: str
    answer: str
    method: str
    trace: dict
    config: dict

    def to_dict(self) -> dict:
        return clean(asdict(self))

    def summary(self) -> str:
        """Compact readable trace: one line per step (U vs threshold, retrieved, passage kept)."""
        lines = [f"Q: {self.question}"]
        for s in self.trace["steps"]:
            u = "inf" if s["u"] is None and s.get("pseudo") else ("-" if s["u"] is None else f"{s['u']:.2f}")
            thr = "" if s["threshold"] is None else f" vs {s['threshold']:.2f}"
            ret = "RETRIEVE" if s["retrieved"] else "no-retr."
            kept = f" kept [{s['kept']['title']}]" if s.get("kept") else ""
            q = f" q={s['query']!r}" if s["query"] else ""
            lines.append(f"  {s['index'] + 1}. U={u}{thr} {ret}{q}{kept}\n     -> {s['text']}")
        f = self.trace.get("final", {})
        if "rationale" in f or "knowledge" in f:
            def fmt(d):
                u = d.get("u")
                return f"{d.get('answer')!r} (U={'inf' if u is None else format(u, '.2f')})"
            lines.append(f"  final: rationales {fmt(f.get('rationale', {}))} | knowledge {fmt(f.get('knowledge', {}))}"
                         f" -> {f.get('choice')}")
        t = self.trace["totals"]
        lines.append(f"A: {self.answer}   [{t['model_calls']} model calls, {t['retrievals']} retrievals, "
                     f"{t['seconds'].get('total', 0):.1f} s]")
        return "\n".join(lines)
