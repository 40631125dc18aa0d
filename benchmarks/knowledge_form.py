"""The knowledge answer's form, decided on decision data: SeaKR's final answer from the kept passages is a whole
answer (a sentence of reasoning, then "So the answer is", forced where the sentence lacks it: two calls, about 50
generated tokens), or the marker forced at once after the passages (one call, a few tokens). Both are read from one
run of the chain per question, so the chain is the same for both and only the final call differs.

The rule, fixed before this ran: the direct form becomes the default only if, on the decision sample's 42 questions
(every 4th of ``dev_decide246``, the first 42, as every decision before), with the shipped gate replayed, its F1 is at
least the whole answer's minus 1.0 and its seconds per question are lower. Otherwise the whole answer stays.

Usage: python benchmarks/knowledge_form.py [--data FILE] [--every 4] [--limit 42] [--precision fp32] [--out FILE]
Prints a JSON summary; ``--out`` keeps the per-question rows (ids, answers, scores, seconds; no question text).
"""

import argparse
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import CHAIN, beside_row, cheaper_form_summary, decision_args, decision_run  # noqa: E402

from seakr.methods import METHODS  # noqa: E402

class BothForms(METHODS["seakr"]):
    """SeaKR whose final stage also forces the marker straight after the kept passages, recorded beside the
    whole answer (timed apart, outside the final stage's timer)."""

    def _reason(self, question, tr, steps, kept, known=None):
        out = super()._reason(question, tr, steps, kept, known)
        t = time.perf_counter()
        direct = self.forced_answers(tr, question, [([], kept)], "final/direct", False)[0]
        tr.decision("direct-knowledge", answer=direct.answer, seconds=time.perf_counter() - t)
        return out


def row(ex, ans, level: float) -> dict:
    """One question: the check's, the whole answer's and the direct answer's F1, and each form's seconds."""
    return beside_row(ex, ans, level, "direct-knowledge", "whole", "direct")[0]


def summary(rows: list[dict]) -> dict:
    return cheaper_form_summary(rows, "direct")


def main():
    ap = argparse.ArgumentParser()
    decision_args(ap, limit=42)
    decision_run(ap.parse_args(), "knowledge_form", BothForms, CHAIN, row, summary=summary, said=lambda r: (
        f"sure={r['gate_sure']} whole {r['f1_whole']:.2f} direct {r['f1_direct']:.2f} ({r['seconds_whole']:.1f} / "
        f"{r['seconds_direct']:.1f} s)"))


if __name__ == "__main__":
    sys.exit(main())
