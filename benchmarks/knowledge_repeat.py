"""The knowledge answer's restated sentence, decided on decision data: SeaKR's final answer from the kept passages
is a whole answer (reasoning up to a stop or ``max_new_tokens``, then "So the answer is", forced where it lacks it),
or the same answer whose reasoning ends where a sentence starts with the same four words as an earlier one
(``repeat_stop=4``), the marker forced there. Traces of the chain show the 0.5B restating its sentence word for word
before the forced marker on most questions ("X. X."), about a third of the answer's decoded tokens. Both are read
from one run of the chain per question, so only the final answer differs.

The rule, fixed before this ran: ``repeat_stop=4`` becomes SeaKR's default only if, on the decision sample's 62
questions (every 4th of ``dev_decide246``), with the shipped gate replayed, its F1 is at least the whole answer's
minus 1.0 and its seconds a chain question are lower, at the default precision (``auto``). Otherwise it stays off.

Usage: python benchmarks/knowledge_repeat.py [--data FILE] [--every 4] [--limit 62] [--precision auto] [--out FILE]
Prints a JSON summary; ``--out`` keeps the per-question rows (ids, answers, scores, seconds; no question text).
"""

import argparse
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import beside_row, cheaper_form_summary, decision_args, decision_run  # noqa: E402

from seakr.methods import METHODS  # noqa: E402

#: the chain as decided (docs/results.md), the check drawn and recorded but never obeyed: the gate is replayed
CHAIN = {"gate_p": 1.0, "query_from": "step", "rerank": "engine", "reasoning": "knowledge", "repeat_stop": 0}
#: the words a restated sentence shares with an earlier one's start
WORDS = 4


class BothStops(METHODS["seakr"]):
    """SeaKR whose final stage also answers from the kept passages with ``repeat_stop=WORDS``, recorded beside the
    whole answer (timed apart, outside the final stage's timer)."""

    def _reason(self, question, tr, steps, kept, known=None):
        from seakr.methods.base import said_again

        out = super()._reason(question, tr, steps, kept, known)
        t = time.perf_counter()
        cut = self.answer_prompt(tr, question, [], kept, "final/repeat", False, (said_again(WORDS),))
        tr.decision("repeat-knowledge", answer=cut.answer, seconds=time.perf_counter() - t)
        return out


def row(ex, ans, level: float) -> dict:
    """One question: the check's, the whole answer's and the repeat-stopped answer's F1, and each form's seconds."""
    return beside_row(ex, ans, level, "repeat-knowledge", "whole", "repeat")[0]


def summary(rows: list[dict]) -> dict:
    return {"repeat_words": WORDS, **cheaper_form_summary(rows, "repeat")}


def main():
    ap = argparse.ArgumentParser()
    decision_args(ap, limit=62)
    decision_run(ap.parse_args(), "knowledge_repeat", BothStops, CHAIN, row, summary=summary, said=lambda r: (
        f"sure={r['gate_sure']} whole {r['f1_whole']:.2f} repeat {r['f1_repeat']:.2f} ({r['seconds_whole']:.1f} / "
        f"{r['seconds_repeat']:.1f} s)"))


if __name__ == "__main__":
    sys.exit(main())
