"""Should the knowledge check's closed-book answer replace the chain's answer where it is the more probable one?
Decided on decision data only (no model runs): chains whose rows carry the check's answer with its P(correct)
(the probe gate's) and the knowledge answer with its P(correct) (the final-form probe's).

The default past the gate gives the knowledge answer (read from the kept passages) and drops the check's. The rule
replayed here keeps the check's answer where P(check) > P(knowledge) + margin, on the questions the shipped gate
sends to the chain (P(check) < ``--gate``). Written before this file ran: the rule is adopted only if one margin
gains at least +0.5 F1 over the knowledge answer on every run given (the HotpotQA decision sample and the 2Wiki
train chains); the oracle of the two answers bounds what any such rule could gain.

    python benchmarks/final_check.py RUN... > benchmarks/results/final-check-qwen.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _common import chain_rows_args  # noqa: E402

from seakr.eval.metrics import paired_bootstrap  # noqa: E402

MARGINS = (-0.1, 0.0, 0.05, 0.1, 0.2)


def chain_pairs(run: Path, gate: float) -> list[tuple[dict, dict]]:
    """(check, knowledge) candidates of each question the gate sends to the chain, where both carry a P(correct)."""
    out = []
    for line in (run / "scores.jsonl").read_text(encoding="utf-8").splitlines():
        c = json.loads(line)["final"]["candidates"]
        if "check" in c and "p" in c.get("knowledge", {}) and c["check"]["p"] < gate:
            out.append((c["check"], c["knowledge"]))
    return out


def replay(pairs: list[tuple[dict, dict]]) -> dict:
    """Each single answer, their oracle, and the rule at each margin against the knowledge answer (paired CI)."""
    check = np.array([c["f1"] for c, _ in pairs])
    know = np.array([k["f1"] for _, k in pairs])
    pc, pk = np.array([c["p"] for c, _ in pairs]), np.array([k["p"] for _, k in pairs])
    rules = {}
    for m in MARGINS:
        takes = pc > pk + m
        f1 = np.where(takes, check, know)
        rules[f"{m:+.2f}"] = {"takes_check": int(takes.sum()), "f1": round(float(f1.mean()), 4),
                              "minus_knowledge": paired_bootstrap(f1, know)}
    return {"n": len(pairs), "f1": {"knowledge": round(float(know.mean()), 4), "check": round(float(check.mean()), 4),
                                    "oracle": round(float(np.maximum(check, know).mean()), 4)}, "margins": rules}


def main() -> None:
    a = chain_rows_args(__doc__)
    per_run = {str(r): replay(chain_pairs(r, a.gate)) for r in a.runs}
    gains = {m: min(v["margins"][m]["minus_knowledge"]["mean_difference"] for v in per_run.values())
             for m in next(iter(per_run.values()))["margins"]}
    best = max(gains, key=gains.get)
    print(json.dumps({"gate": a.gate, "runs": per_run, "worst_run_gain_by_margin": gains,
                      "adopt": bool(gains[best] >= 0.005), "best_margin": best}, indent=1))


if __name__ == "__main__":
    main()
