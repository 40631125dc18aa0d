"""The order of the knowledge answer's passages, decided on decision data: SeaKR's knowledge answer reads the
passages the chain kept in the order they were found (the first hop first, the last hop next to the question). A
small model reads what stands nearest the question best (the "lost in the middle" finding), and the last hop's
passage is the one that holds the answer of a bridge question; the reverse order puts the first hop there instead.
Both orders are read from one run of the chain per question, so the chain is the same for both and only the final
answer differs. The found order's prompt is the last step's prompt with the answer's tail (its prefix is cached);
the reverse order's is not, so its seconds include that prefill.

The rule, fixed before this ran: the reverse order becomes the default only if, on each of two decision runs (the
HotpotQA decision sample, every 4th of ``dev_decide246``, the first 62; 2Wiki train ``train_migres500``, every 8th,
the first 62), with the shipped gate replayed, its F1 is at least the found order's plus 1.0, and its seconds a
chain question at most 1.10x the found order's. Otherwise the found order stays. The first run that fails the bar
ends the decision (the rule needs both).

Usage: python benchmarks/knowledge_order.py [--data FILE] [--family hotpotqa] [--every 4] [--limit 62]
[--precision auto] [--out FILE]. Prints a JSON summary; ``--out`` keeps per-question rows (ids, answers, scores,
seconds; no question or passage text).
"""

import argparse
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import CHAIN, beside_row, costlier_form_summary, decision_args, decision_run  # noqa: E402

from seakr.methods import METHODS  # noqa: E402

class BothOrders(METHODS["seakr"]):
    """SeaKR that, beside the knowledge answer from the kept passages in the order found, answers from them in the
    reverse order (timed apart, outside the final stage's timer)."""

    def _reason(self, question, tr, steps, kept, known=None):
        out = super()._reason(question, tr, steps, kept, known)
        t = time.perf_counter()
        rev = self.answer_prompt(tr, question, [], list(reversed(kept)), "final/knowledge-reversed", False)
        tr.decision("knowledge-reversed", answer=rev.answer, seconds=time.perf_counter() - t, passages=len(kept))
        return out


def row(ex, ans, level: float) -> dict:
    out, rev = beside_row(ex, ans, level, "knowledge-reversed", "found", "reversed")
    return {**out, "passages": rev["passages"]}


def summary(rows: list[dict]) -> dict:
    several = [r for r in rows if not r["gate_sure"] and r["passages"] > 1]  # one passage reads the same either way
    return {**costlier_form_summary(rows, "reversed", "found"), "chain_questions_of_several_passages": len(several)}


def main():
    ap = argparse.ArgumentParser()
    decision_args(ap, limit=62)
    decision_run(ap.parse_args(), "knowledge_order", BothOrders, CHAIN, row, summary=summary, said=lambda r: (
        f"sure={r['gate_sure']} found {r['f1_found']:.2f} reversed {r['f1_reversed']:.2f} ({r['passages']} passages; "
        f"{r['seconds_found']:.1f} / {r['seconds_reversed']:.1f} s)"))


if __name__ == "__main__":
    sys.exit(main())
