"""The chain's query with the question's words beside the step's, decided on decision data. SeaKR's chain searches
with the step it accepted last, minus its low-probability words (IRCoT's query); the question itself is searched
only at the first step. ITER-RETGEN and Self-Ask search with the question and what the model last generated
together, so that a later hop's search still weighs the words of the relation asked about ("director", "born").
Each question is answered twice, by the chain as decided and by the same chain whose every query after the first
is the question's words followed by the step's words that the question lacks (the first query is the question
either way), on one model and index, one after the other, so the two are compared side by side.

The rule, fixed before this ran: the question-and-step query becomes the default only if, on each of two decision
runs (the HotpotQA decision sample, every 4th of ``dev_decide246``, the first 62; 2Wiki train ``train_migres500``,
every 8th, the first 62), with the shipped gate replayed, its F1 is at least the step query's plus 1.0 and its
seconds a chain question at most 1.10x the step query's. Otherwise the step's query stays. The first run that
fails the bar ends the decision (the rule needs both).

The gold supporting titles among the kept passages are counted for each query (recall), so a difference in F1 can
be told apart from a difference in what the searches found.

Usage: python benchmarks/question_in_query.py [--data FILE] [--family hotpotqa] [--every 4] [--limit 62]
[--precision auto] [--out FILE]. Prints a JSON summary; ``--out`` keeps per-question rows (ids, answers, scores,
seconds; no question or passage text).
"""

import argparse
import os
import statistics
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import CHAIN, costlier_form_summary, decision_args, decision_run, recall  # noqa: E402

from seakr.eval.metrics import f1_score  # noqa: E402
from seakr.methods import METHODS  # noqa: E402
from seakr.methods.text import is_unknown, question_words  # noqa: E402

class QuestionInQuery(METHODS["seakr"]):
    """SeaKR whose queries after the first are the question's words, then the step query's words the question
    lacks (each word once: a repeated term would weigh twice in BM25)."""

    def query(self, pseudo, question, steps):
        asked = question_words(question)
        seen = {w.lower() for w in asked}
        step = [w for w in super().query(pseudo, question, steps).split() if w.lower() not in seen]
        return " ".join((asked + step)[: self.config.query_max_words])


class BothQueries:
    """The chain as decided and the question-and-step one, on one model and index: ``answer`` gives both answers,
    one chain after the other."""

    def __init__(self, lm, engine, **options):
        self.step, self.both = METHODS["seakr"](lm, engine, **options), QuestionInQuery(lm, engine, **options)

    def answer(self, question):
        return self.step.answer(question), self.both.answer(question)


def _answered(ex, ans, name: str) -> dict:
    """One chain's answer to ``ex``: its F1, seconds, retrievals and the gold titles among its kept passages."""
    d = ans.to_dict()["trace"]
    kept = [p.get("title") for p in d["final"].get("passages") or []]
    return {name: ans.answer, f"f1_{name}": f1_score(ans.answer, ex.answers),
            f"seconds_{name}": d["totals"]["seconds"]["total"], f"retrievals_{name}": d["totals"]["retrievals"],
            f"recall_{name}": recall(kept, list(getattr(ex, "supporting_titles", []) or []))}


def row(ex, answers, level: float) -> dict:
    """One question: the check (and whether the shipped gate would have answered from memory), both chains."""
    step, both = answers
    check = step.to_dict()["trace"]["final"]["candidates"].get("check", {})
    return {"id": ex.id, "gate_sure": check.get("p", 0) >= level and not is_unknown(check.get("answer", "")),
            "check": check.get("answer"), "f1_check": f1_score(check.get("answer", ""), ex.answers),
            **_answered(ex, step, "step"), **_answered(ex, both, "both")}


def summary(rows: list[dict]) -> dict:
    chain = [r for r in rows if not r["gate_sure"]]

    def mean(key):
        xs = [r[key] for r in chain if r[key] is not None]
        return round(statistics.mean(xs), 3) if xs else None

    return {**costlier_form_summary(rows, "both", "step"),
            **{f"chain_{k}_{n}": mean(f"{k}_{n}") for k in ("retrievals", "recall") for n in ("step", "both")}}


def main():
    ap = argparse.ArgumentParser()
    decision_args(ap, limit=62)
    decision_run(ap.parse_args(), "question_in_query", BothQueries, CHAIN, row, summary=summary, said=lambda r: (
        f"sure={r['gate_sure']} step {r['f1_step']:.2f} both {r['f1_both']:.2f} "
        f"({r['seconds_step']:.1f} / {r['seconds_both']:.1f} s)"))


if __name__ == "__main__":
    sys.exit(main())
