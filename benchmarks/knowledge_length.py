"""The knowledge answer's length, decided on decision data: SeaKR's final answer from the kept passages is a whole
answer (a sentence of reasoning of up to ``max_new_tokens``, then "So the answer is", forced where the sentence lacks
it), or the same answer with its sentence cut at 16 tokens before the marker is forced. Traces of the chain show the
sentence at about 30 tokens and the marker forced after it on most questions, so the sentence is the largest cost
SeaKR has beyond IRCoT's loop; forcing the marker at once (no sentence) lost 2.4 F1 (``knowledge_form.py``). Both are
read from one run of the chain per question, so only the final answer differs.

The rule, fixed before this ran: the cut sentence becomes the default only if, on the decision sample's 62
questions (every 4th of ``dev_decide246``), with the shipped gate replayed, its F1 is at least the whole answer's
minus 1.0 and its seconds a chain question are lower. Otherwise the whole answer stays.

Usage: python benchmarks/knowledge_length.py [--data FILE] [--every 4] [--limit 62] [--precision fp32] [--out FILE]
Prints a JSON summary; ``--out`` keeps the per-question rows (ids, answers, scores, seconds; no question text).
"""

import argparse
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import CHAIN, beside_row, cheaper_form_summary, decision_args, decision_run  # noqa: E402

from seakr.methods import METHODS  # noqa: E402

#: where the knowledge answer's sentence is cut before the marker is forced (about half its length in traces)
CUT = 16


class BothLengths(METHODS["seakr"]):
    """SeaKR whose final stage also answers from the kept passages with the sentence cut at ``CUT`` tokens,
    recorded beside the whole answer (timed apart, outside the final stage's timer)."""

    def _reason(self, question, tr, steps, kept, known=None):
        out = super()._reason(question, tr, steps, kept, known)
        t, whole = time.perf_counter(), self.config
        self.config = whole.replace(max_new_tokens=CUT)  # the one call of a whole answer reads it
        try:
            cut = self.answer_prompt(tr, question, [], kept, "final/cut", False)
        finally:
            self.config = whole
        tr.decision("cut-knowledge", answer=cut.answer, seconds=time.perf_counter() - t)
        return out


def row(ex, ans, level: float) -> dict:
    """One question: the check's, the whole answer's and the cut answer's F1, and each form's seconds."""
    return beside_row(ex, ans, level, "cut-knowledge", "whole", "cut")[0]


def summary(rows: list[dict]) -> dict:
    return {"cut_tokens": CUT, **cheaper_form_summary(rows, "cut")}


def main():
    ap = argparse.ArgumentParser()
    decision_args(ap, limit=62)
    decision_run(ap.parse_args(), "knowledge_length", BothLengths, CHAIN, row, summary=summary, said=lambda r: (
        f"sure={r['gate_sure']} whole {r['f1_whole']:.2f} cut {r['f1_cut']:.2f} ({r['seconds_whole']:.1f} / "
        f"{r['seconds_cut']:.1f} s)"))


if __name__ == "__main__":
    sys.exit(main())
