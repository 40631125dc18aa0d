"""Should two answers that agree outvote the knowledge answer? Decided on decision data only (no model runs): chains
whose rows carry the knowledge answer, the rationale answer and the knowledge check's closed-book answer.

Past the gate the default gives the knowledge answer (read from the kept passages). A calibrated choice among the
answers lost on decision data (the probes' P(correct) was not comparable across forms), but agreement needs no
calibration: two answers reached by different routes (closed-book, and the chain's own rationale) that agree are
more often right than either alone. The rule replayed here, on the questions the shipped gate sends to the chain
(P(check) < ``--gate``): give the rationale answer where it agrees with the check's answer and the knowledge answer
agrees with neither; else the knowledge answer. Two answers agree where they are equal once normalised (SQuAD's
normalisation) or their token F1 is at least 0.5.

Written before this file ran: the rule is adopted only if it gains at least +1.0 F1 over the knowledge answer on
every run given (the HotpotQA decision sample's chains and the 2Wiki train chains). The rationale answer costs one
more model call a chain question, so a rule that passes is then measured for its seconds before any default moves.

    python benchmarks/final_vote.py RUN... > benchmarks/results/final-vote-qwen.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _common import chain_rows_args  # noqa: E402

from seakr.eval.metrics import f1_score, paired_bootstrap  # noqa: E402

AGREE_F1 = 0.5


def agree(a: str, b: str) -> bool:
    return bool(a.strip()) and bool(b.strip()) and f1_score(a, [b]) >= AGREE_F1


def chain_triples(run: Path, gate: float) -> list[dict]:
    """The (check, rationale, knowledge) candidates of each question the gate sends to the chain."""
    out = []
    for line in (run / "scores.jsonl").read_text(encoding="utf-8").splitlines():
        c = json.loads(line)["final"]["candidates"]
        if {"check", "rationale", "knowledge"} <= set(c) and c["check"]["p"] < gate:
            out.append(c)
    return out


def vote(c: dict) -> str:
    """The form the rule answers with."""
    k, r, x = (c[f]["answer"] or "" for f in ("knowledge", "rationale", "check"))
    return "rationale" if agree(r, x) and not agree(k, r) and not agree(k, x) else "knowledge"


def replay(triples: list[dict]) -> dict:
    """Each single answer, their oracle and the vote, against the knowledge answer (paired CI)."""
    f1 = {f: np.array([c[f]["f1"] for c in triples]) for f in ("knowledge", "rationale", "check")}
    chosen = [vote(c) for c in triples]
    voted = np.array([c[f]["f1"] for c, f in zip(triples, chosen)])
    return {"n": len(triples), "f1": {f: round(float(v.mean()), 4) for f, v in f1.items()}
            | {"oracle": round(float(np.max(np.stack(list(f1.values())), axis=0).mean()), 4)},
            "vote": {"takes_rationale": chosen.count("rationale"), "f1": round(float(voted.mean()), 4),
                     "minus_knowledge": paired_bootstrap(voted, f1["knowledge"])}}


def main() -> None:
    a = chain_rows_args(__doc__)
    per_run = {str(r): replay(chain_triples(r, a.gate)) for r in a.runs}
    worst = min(v["vote"]["minus_knowledge"]["mean_difference"] for v in per_run.values())
    print(json.dumps({"gate": a.gate, "agree_f1": AGREE_F1, "runs": per_run, "worst_run_gain": worst,
                      "adopt": bool(worst >= 0.01)}, indent=1))


if __name__ == "__main__":
    main()
