"""The probe gate's level, decided on both decision sources: SeaKR answers from memory when the knowledge check's
P(correct) reaches ``gate_p`` (0.3 for the default 0.5B when this ran). That level was chosen on the HotpotQA decision sample
alone (42 questions, 2026-12-05); the protocol's 2Wiki source, ``train_migres500``, had no chains with a recorded
check then. A 2Wiki question is more often one the model knows closed-book (a comparison of two named things), so
the level that pays there may differ, and a lower level is also cheaper (a question answered at once costs the check
alone). The check probe was fitted on other questions (every 25th of the ``train_first10000`` files), none of them in
``train_migres500``.

Each question runs the check and then the chain whatever the check says (``gate_p = 1``, the shipped choices
otherwise), so every level replays exactly from one run: a level answers a question from memory where P(correct)
reaches it and the check's answer is a real one (as ``CheckGate.sure``), and costs the check's seconds there.

The rule, fixed before this ran: the levels tried are 0.05, 0.10, 0.15, 0.20, 0.25, 0.30 (shipped), 0.40 and 0.50.
Each level's score is the mean of its replayed F1 on the two decision runs (the HotpotQA decision sample, every 4th
of ``dev_decide246``, the first 62; 2Wiki train ``train_migres500``, every 8th, the first 62). Levels within 0.5 F1
of the best score are tied, and the tie goes to the lowest (it answers more at once, so it costs less). The chosen
level replaces 0.3 only if its score is at least 0.3's + 1.0 and it is not more than 1.0 below 0.3's replayed F1 on
either run; otherwise 0.3 stays. Both runs are needed, so both run whatever the first shows.

Usage: python benchmarks/gate_level.py [--data FILE] [--family hotpotqa] [--every 4] [--limit 62]
[--precision auto] [--out FILE] (one run), or ``--decide RUN.json RUN.json`` (the rule over two runs' rows). Prints
a JSON summary; ``--out`` keeps per-question rows (ids, answers, P(correct), scores, seconds; no question text).
"""

import argparse
import json
import os
import statistics

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import CHAIN, decision_args, decision_run, emit  # noqa: E402

from seakr.methods import METHODS  # noqa: E402

LEVELS = (0.05, 0.10, 0.15, 0.20, 0.25, 0.30, 0.40, 0.50)
BEFORE = 0.30  # the level shipped when the rule was written
TIE, BAR, FLOOR = 0.5, 1.0, 1.0  # F1 points


def row(ex, ans, level: float) -> dict:
    """One question: the check's answer, its P(correct) and whether it is a real answer, the chain's knowledge
    answer, both F1, the check's own seconds and the whole question's."""
    from seakr.eval.metrics import f1_score
    from seakr.methods.text import is_unknown

    d = ans.to_dict()["trace"]
    check = d["final"]["candidates"]["check"]
    call = next(e for e in d["events"] if e.get("type") == "model_call" and e.get("purpose") == "check")
    return {"id": ex.id, "p": round(check["p"], 4), "real": not is_unknown(check.get("answer", "")),
            "check": check.get("answer"), "chain": ans.answer,
            "f1_check": f1_score(check.get("answer", ""), ex.answers), "f1_chain": f1_score(ans.answer, ex.answers),
            "seconds_check": call["seconds"], "seconds": d["totals"]["seconds"]["total"]}


def replay(rows: list[dict], level: float) -> dict:
    """The gate at ``level`` over one run's rows: F1 (percent), the share answered at once, seconds a question."""
    sure = [r["real"] and r["p"] >= level for r in rows]
    f1 = [r["f1_check"] if s else r["f1_chain"] for r, s in zip(rows, sure)]
    secs = [r["seconds_check"] if s else r["seconds"] for r, s in zip(rows, sure)]
    return {"level": level, "f1": round(100 * statistics.mean(f1), 1), "at_once": sum(sure),
            "seconds": round(statistics.mean(secs), 2)}


def summary(rows: list[dict]) -> dict:
    return {"questions": len(rows), "levels": [replay(rows, lv) for lv in LEVELS],
            "check_alone": round(100 * statistics.mean(r["f1_check"] for r in rows), 1),
            "chain_alone": round(100 * statistics.mean(r["f1_chain"] for r in rows), 1)}


def decide(runs: list[dict]) -> dict:
    """The written rule over two runs' rows."""
    by = {lv: [replay(r["rows"], lv) for r in runs] for lv in LEVELS}
    score = {lv: statistics.mean(x["f1"] for x in v) for lv, v in by.items()}
    best = max(score.values())
    chosen = min(lv for lv in LEVELS if score[lv] >= best - TIE)
    floor_ok = all(a["f1"] >= b["f1"] - FLOOR for a, b in zip(by[chosen], by[BEFORE]))
    adopt = chosen != BEFORE and score[chosen] >= score[BEFORE] + BAR and floor_ok
    return {"benchmark": "gate_level", "runs": [r["data"] for r in runs],
            "score": {f"{lv:.2f}": round(s, 2) for lv, s in score.items()}, "best_within_tie": chosen,
            "floor_ok": floor_ok, "adopt": adopt, "level": chosen if adopt else BEFORE,
            "per_run": {f"{lv:.2f}": v for lv, v in by.items()}}


def main():
    ap = argparse.ArgumentParser()
    decision_args(ap, limit=62)
    ap.add_argument("--decide", nargs=2, default=None, metavar="RUN.json", help="apply the rule to two runs' rows")
    a = ap.parse_args()
    if a.decide:
        emit(decide([json.load(open(p)) for p in a.decide]), None)
        return
    decision_run(a, "gate_level", METHODS["seakr"], CHAIN, row, summary=summary, said=lambda r: (
        f"p={r['p']:.2f} check {r['f1_check']:.2f} chain {r['f1_chain']:.2f} ({r['seconds_check']:.1f} / "
        f"{r['seconds']:.1f} s)"))


if __name__ == "__main__":
    main()
