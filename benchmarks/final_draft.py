"""The final answer decoded by prompt lookup in bf16, decided on decision data. Prompt-lookup decoding (guessing a
greedy call's next tokens from its prompt and checking ten in one forward) is on by default in float32 only: in bf16
an eleven-token forward rounds otherwise than a one-token one, so a token's log-prob moves by up to about 0.05, and
drafting every call moved SeaKR's chain onto other passages on 8 of 62 decision questions (-2.2 F1,
``lookup_decode.py``). A final answer is the one call whose text no later decision reads: nothing is searched with
it and no threshold reads its log-probs, so rounding can move it only where two tokens tie. It is also the largest
cost SeaKR has beyond IRCoT's loop (the knowledge answer: a sentence of reasoning over the kept passages, about 30
tokens, largely copied from them).

The rule, fixed before this ran: in bf16, the final answer's calls draft 10 tokens by default only if, on the
decision sample's 62 questions (every 4th of ``dev_decide246``), with the shipped gate replayed, the drafted
knowledge answer's F1 is at least the plain one's minus 1.0 and its seconds a chain question are lower. Both are
read from one run of the chain per question (the chain as decided), so only the final answer's decoding differs;
the drafted one is decoded second, after the plain one's prompt is cached, as the plain one found it cached by the
chain's steps.

Usage: python benchmarks/final_draft.py [--precision auto] [--every 4] [--limit 62] [--out FILE]
or ``--decide RUN.json`` (the rule over a run's kept rows). Prints a JSON summary; ``--out`` keeps the per-question
rows (ids, answers, scores, seconds; no question text).
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import CHAIN, beside_row, cheaper_form_summary, decision_args, decision_run, emit  # noqa: E402

from seakr.methods import METHODS  # noqa: E402

#: the tokens a drafted call guesses a forward (the float32 default's)
DRAFT = 10


class BothDecodings(METHODS["seakr"]):
    """SeaKR whose final stage also answers from the kept passages with drafting on, recorded beside the plain
    answer (timed apart, outside the final stage's timer)."""

    def _reason(self, question, tr, steps, kept, known=None):
        out = super()._reason(question, tr, steps, kept, known)
        t, plain = time.perf_counter(), self.lm.draft_tokens
        self.lm.draft_tokens = DRAFT  # read by each generate call
        try:
            drafted = self.answer_prompt(tr, question, [], kept, "final/drafted", False)
        finally:
            self.lm.draft_tokens = plain
        tr.decision("drafted-knowledge", answer=drafted.answer, text=drafted.text, seconds=time.perf_counter() - t)
        return out


def row(ex, ans, level: float) -> dict:
    """One question: the check's, the plain and the drafted answer's F1, each one's seconds, and whether the two
    answers' whole texts (reasoning and answer) are the same."""
    r, second = beside_row(ex, ans, level, "drafted-knowledge", "whole", "drafted")
    plain = ans.to_dict()["trace"]["final"]["candidates"]["knowledge"]
    return {**r, "same_text": plain.get("text") == second.get("text")}


def summary(rows: list[dict]) -> dict:
    chain = [r for r in rows if not r["gate_sure"]]
    return {"draft_tokens": DRAFT, "same_text_on_chain_questions": sum(r["same_text"] for r in chain),
            **cheaper_form_summary(rows, "drafted")}


def main():
    ap = argparse.ArgumentParser()
    decision_args(ap, limit=62)
    ap.add_argument("--decide", default=None, metavar="RUN.json", help="apply the rule to a run's kept rows")
    a = ap.parse_args()
    if a.decide:
        emit(summary(json.load(open(a.decide))["rows"]), None)
        return
    if a.precision == "fp32":
        ap.error("float32 drafts by default already; this decides bf16 (--precision auto or bf16)")
    decision_run(a, "final_draft", BothDecodings, CHAIN, row, summary=summary, said=lambda r: (
        f"sure={r['gate_sure']} plain {r['f1_whole']:.2f} drafted {r['f1_drafted']:.2f} same={r['same_text']} "
        f"({r['seconds_whole']:.1f} / {r['seconds_drafted']:.1f} s)"))


if __name__ == "__main__":
    sys.exit(main())
