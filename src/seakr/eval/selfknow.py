"""Self-knowledge where SeaKR decides, measured from rows: the final choice between the two answers and
the knowledge-check gate, each against its alternatives on the same questions.

final_choice     SeaKR eval rows (both final answers with their U and F1): how well the raw-U rule and the
                 calibrated rule rank "the knowledge answer is better" where the two differ, and the F1 of
                 every rule (raw U, calibrated, rationale only, knowledge only, oracle), paired.
gate_sweep       detect rows of the knowledge check (short answer, its P(correct)) beside chain rows of SeaKR
                 retrieving at every step: the gated system answers with the short answer where P(correct)
                 >= gate_p and takes the chain's answer elsewhere. F1 and retrievals per question for every
                 gate_p (the trade-off curve), each against the chain alone. Exact for the short branch;
                 for the chain branch it is exact when the chain run retrieved at every step (its rows say).
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from .metrics import CORRECT_F1, auroc, bootstrap_ci, paired_bootstrap
from .rows import ResultRow



def final_choice(rows: Sequence[ResultRow], p_rationale: Callable, p_knowledge: Callable) -> dict:
    """The final choice's signal and F1 under each rule. ``p_*``: U -> P(correct) for that form."""
    rows = [r for r in rows if {"rationale", "knowledge"} <= set(r.final.candidates)]
    if not rows:
        raise ValueError("no rows with both final answers (SeaKR with reasoning=self-aware)")
    rat = [r.final.candidates["rationale"] for r in rows]
    kno = [r.final.candidates["knowledge"] for r in rows]
    ur, uk = [c.u for c in rat], [c.u for c in kno]
    pr, pk = [p_rationale(u) for u in ur], [p_knowledge(u) for u in uk]
    fr, fk = [c.f1 for c in rat], [c.f1 for c in kno]
    raw = [a if u_r < u_k else b for a, b, u_r, u_k in zip(fr, fk, ur, uk)]  # pick(): tie -> knowledge
    cal = [a if p_r > p_k else b for a, b, p_r, p_k in zip(fr, fk, pr, pk)]
    differ = [i for i in range(len(rows)) if fr[i] != fk[i]]
    better = [fk[i] > fr[i] for i in differ]
    diff = lambda xs: [xs[i] for i in differ]  # noqa: E731
    best_single = fk if np.mean(fk) >= np.mean(fr) else fr
    return {"n": len(rows), "differ": len(differ),
            "auroc_raw_u": auroc([ur[i] - uk[i] for i in differ], better) if differ else None,
            "auroc_calibrated": auroc(diff([k - r for k, r in zip(pk, pr)]), better) if differ else None,
            "chose_knowledge_calibrated": float(np.mean([p_r <= p_k for p_r, p_k in zip(pr, pk)])),
            "f1": {"raw_u": float(np.mean(raw)), "calibrated": float(np.mean(cal)), "rationale": float(np.mean(fr)),
                   "knowledge": float(np.mean(fk)), "oracle": float(np.mean(np.maximum(fr, fk)))},
            "calibrated_minus": {"raw_u": paired_bootstrap(cal, raw), "rationale": paired_bootstrap(cal, fr),
                                 "knowledge": paired_bootstrap(cal, fk),
                                 "better_single": paired_bootstrap(cal, best_single)}}


def chain_f1(row: ResultRow, rule: str, p_rationale: Callable | None = None,
             p_knowledge: Callable | None = None) -> float:
    """A SeaKR row's F1 under another final rule, read off its two candidates (``as-run`` keeps its own)."""
    if rule == "as-run":
        return row.f1
    c = row.final.candidates
    if rule in ("rationale", "knowledge"):
        return c[rule].f1
    pr, pk = p_rationale(c["rationale"].u), p_knowledge(c["knowledge"].u)
    return c["rationale"].f1 if pr > pk else c["knowledge"].f1


def gate_sweep(short: dict[str, dict], chain: dict[str, ResultRow], p_correct: Callable[[dict], float],
               grid: Sequence[float] = tuple(np.round(np.linspace(0, 1, 21), 2)),
               chain_f1_of: Callable[[ResultRow], float] = lambda r: r.f1) -> dict:
    """``short``: id -> detect row of the knowledge check; ``chain``: id -> SeaKR row retrieving at every step.
    For each gate_p: F1 and retrievals per question of the gated system, paired against the chain."""
    ids = sorted(set(short) & set(chain))
    if not ids:
        raise ValueError("the check rows and the chain rows share no question")
    p = {i: p_correct(short[i]) for i in ids}
    base = [chain_f1_of(chain[i]) for i in ids]
    ret = [chain[i].retrievals for i in ids]
    curve = []
    for g in grid:
        sure = [p[i] >= g and bool(str(short[i].get("answer", "")).strip()) for i in ids]
        f1 = [short[i]["f1"] if s else b for i, s, b in zip(ids, sure, base)]
        r = [0 if s else x for s, x in zip(sure, ret)]
        curve.append({"gate_p": float(g), "f1": float(np.mean(f1)), "answered_by_check": float(np.mean(sure)),
                      "retrievals_per_q": float(np.mean(r)), "minus_chain": paired_bootstrap(f1, base)})
    steps = [s for i in ids for s in chain[i].steps]
    return {"n": len(ids), "chain_f1": float(np.mean(base)), "chain_retrievals_per_q": float(np.mean(ret)),
            "chain_steps_retrieved": float(np.mean([s.retrieved for s in steps])) if steps else None,
            "check_auroc_wrong": auroc([-p[i] for i in ids], [short[i]["f1"] < CORRECT_F1 for i in ids]),
            "curve": curve}


def choose_gate_p(curve: Sequence[dict]) -> dict:
    """On tuning data: the gate level with the best F1; ties go to the one answering most by the check
    (fewest retrievals)."""
    return dict(max(curve, key=lambda c: (round(c["f1"], 6), c["answered_by_check"])))


def rerank_signal(questions: Sequence[tuple[Sequence[float], Sequence[bool]]]) -> dict:
    """How well a re-rank score (higher: more likely a supporting passage) orders each question's
    candidates: the within-question AUROC (gold against non-gold pairs; ties 1/2; each question that has
    both counts once, CI over questions) and recall@1 of its top candidate (ties: the engine's order)."""
    per_q, top1 = [], []
    for scores, gold in questions:
        a = auroc(list(scores), list(gold))
        if math.isfinite(a):
            per_q.append(a)
        best = max(range(len(scores)), key=lambda j: (scores[j], -j))
        top1.append(float(gold[best]))
    return {"n": len(top1), "pairs_questions": len(per_q),
            "auroc_within": float(np.mean(per_q)) if per_q else None,
            "auroc_ci95": bootstrap_ci(per_q) if per_q else None,
            "recall@1": float(np.mean(top1)) if top1 else None, "top1": top1}
