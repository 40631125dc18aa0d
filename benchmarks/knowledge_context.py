"""The knowledge answer's context, decided on decision data: SeaKR answers from the passages the chain kept (one a
search, BM25's top-1), or from every passage its searches returned (each search's top ``n_candidates``, in the order
found, each once). IRCoT's paper reads K > 1 paragraphs a step; ours keeps one, so the runner-ups a search already
found are read by no answer. Both contexts are read from one run of the chain per question, so the chain is the same
for both and only the final answer differs.

The rule, fixed before this ran: the wider context becomes the default only if, on each of two decision runs (the
HotpotQA decision sample, every 4th of ``dev_decide246``; 2Wiki train ``train_migres500``, every 8th), with the
shipped gate replayed, its F1 is at least the kept context's plus 1.0, and its seconds a chain question are at most
1.15x the kept context's. Otherwise the kept passages stay the knowledge answer's context.

The gold supporting titles found are counted for each context (recall), so a difference in F1 can be told apart
from a difference in what was there to read.

Usage: python benchmarks/knowledge_context.py [--data FILE] [--family hotpotqa] [--every 4] [--limit 62]
[--precision fp32] [--out FILE]. Prints a JSON summary; ``--out`` keeps per-question rows (ids, answers, scores,
seconds; no question or passage text).
"""

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import CHAIN, beside_row, decision_args, decision_run, recall, replayed_pair  # noqa: E402

from seakr.methods import METHODS  # noqa: E402

class BothContexts(METHODS["seakr"]):
    """SeaKR that records every passage its searches return and, beside the knowledge answer from the kept
    passages, answers from all of them (timed apart, outside the final stage's timer)."""

    def _run(self, question, tr):
        self.found = []  # one question at a time: every passage the searches returned, in the order found
        return super()._run(question, tr)

    def search(self, tr, query, k):
        hits = super().search(tr, query, k)
        seen = {p.id for p in self.found}
        self.found += [h for h in hits if h.id not in seen]
        return hits

    def _reason(self, question, tr, steps, kept, known=None):
        out = super()._reason(question, tr, steps, kept, known)
        t = time.perf_counter()
        wide = self.answer_prompt(tr, question, [], self.found, "final/knowledge-found", False)
        tr.decision("knowledge-found", answer=wide.answer, seconds=time.perf_counter() - t,
                    kept_titles=[p.title for p in kept], found_titles=[p.title for p in self.found])
        return out


def row(ex, ans, level: float) -> dict:
    """One question: the check's, the kept context's and the found context's F1, seconds and gold recall."""
    out, found = beside_row(ex, ans, level, "knowledge-found", "kept", "found")
    gold = list(getattr(ex, "supporting_titles", []) or [])
    return {**out, "passages_kept": len(found["kept_titles"]), "passages_found": len(found["found_titles"]),
            "recall_kept": recall(found["kept_titles"], gold), "recall_found": recall(found["found_titles"], gold)}


def summary(rows: list[dict]) -> dict:
    chain = [r for r in rows if not r["gate_sure"]]

    def mean(key):
        xs = [r[key] for r in chain if r[key] is not None]
        return round(statistics.mean(xs), 3) if xs else None

    pair = replayed_pair(rows, "found", "kept")
    ratio = mean("seconds_found") / mean("seconds_kept") if chain else None
    return {"questions": len(rows), "chain_questions": len(chain), **pair,
            "chain_seconds_kept": mean("seconds_kept"), "chain_seconds_found": mean("seconds_found"),
            "seconds_ratio": None if ratio is None else round(ratio, 3),
            "passages_kept": mean("passages_kept"), "passages_found": mean("passages_found"),
            "recall_kept": mean("recall_kept"), "recall_found": mean("recall_found"),
            "passes_bar": pair["found_minus_kept"] >= 1.0 and ratio is not None and ratio <= 1.15}


def main():
    ap = argparse.ArgumentParser()
    decision_args(ap, limit=62)
    decision_run(ap.parse_args(), "knowledge_context", BothContexts, CHAIN, row, summary=summary, said=lambda r: (
        f"sure={r['gate_sure']} kept {r['f1_kept']:.2f} found {r['f1_found']:.2f} ({r['passages_kept']} / "
        f"{r['passages_found']} passages; {r['seconds_kept']:.1f} / {r['seconds_found']:.1f} s)"))


if __name__ == "__main__":
    sys.exit(main())
