"""The recent-prompt cache, measured: each question answered with it off (prompt_cache_size 0) and on (4), side by
side in one process, for IRCoT and for SeaKR with every default. A chain's next prompt begins as the last one did
(demonstrations, kept passages, question), and SeaKR's final answer's prompt is the last step's up to "Answer:",
so the cache spares prefill; this prints how much of each method's seconds that is, and whether any answer moved.

Usage: python benchmarks/prompt_cache.py [--data FILE] [--questions 12] [--every 8] [--precision fp32] [--out FILE]
The default questions are HotpotQA train (the file with paragraphs): a cost measurement chooses nothing, and train
keeps the decision and report sets untouched. The pooled index (the file's paragraphs + filler) is cached.
"""

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import emit, pooled_args, pooled_setup  # noqa: E402

from seakr.eval.specs import method_options  # noqa: E402
from seakr.methods import build_method  # noqa: E402
from seakr.models.prefill import RecentPrompts  # noqa: E402

SIZES = (0, 4)  # off, on (the default)


def answer_once(lm, method, question: str, size: int) -> dict:
    """One answer with a recent-prompt cache of ``size`` that starts empty (the demonstrations stay cached, as
    they do from one question to the next in a run)."""
    lm.prefill.recent = RecentPrompts(size)
    before, t = dict(lm.stats), time.perf_counter()
    ans = method.answer(question)
    seconds = time.perf_counter() - t
    delta = {k: lm.stats[k] - before.get(k, 0) for k in ("prefill_seconds", "prefill_tokens", "prompt_hits", "calls")}
    return {"answer": ans.answer, "seconds": seconds, **delta}


def measure(lm, method, questions, order) -> dict:
    """Every question with the cache off and on; the order alternates by question so drift falls on both."""
    rows = {s: [] for s in SIZES}
    for i, ex in enumerate(questions):
        for size in order if i % 2 == 0 else order[::-1]:
            rows[size].append(answer_once(lm, method, ex.question, size))
        print(f"  {i + 1}/{len(questions)}: " + ", ".join(f"{s}: {rows[s][-1]['seconds']:.1f} s" for s in SIZES),
              file=sys.stderr, flush=True)
    off, on = rows[0], rows[4]
    mean = lambda rs, k: statistics.mean(r[k] for r in rs)  # noqa: E731
    return {
        "seconds_per_question": {"off": round(mean(off, "seconds"), 2), "on": round(mean(on, "seconds"), 2)},
        "on_over_off_seconds": round(mean(on, "seconds") / mean(off, "seconds"), 3),
        "median_on_over_off": round(statistics.median(b["seconds"] / a["seconds"] for a, b in zip(off, on)), 3),
        "prefill_share_off": round(sum(r["prefill_seconds"] for r in off) / sum(r["seconds"] for r in off), 3),
        "prefill_tokens_per_question": {"off": round(mean(off, "prefill_tokens")), "on": round(mean(on, "prefill_tokens"))},
        "prompt_hits_per_question": round(mean(on, "prompt_hits"), 2),
        "model_calls_per_question": round(mean(off, "calls"), 2),
        "same_answer": sum(a["answer"] == b["answer"] for a, b in zip(off, on)),
        "questions": len(questions),
    }


def main():
    ap = argparse.ArgumentParser()
    pooled_args(ap, "hotpotqa/train_hipporag100.official.jsonl", precision="auto")
    ap.add_argument("--questions", type=int, default=12)
    ap.add_argument("--every", type=int, default=8)
    ap.add_argument("--methods", default="ircot,seakr")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    full, engine, lm = pooled_setup(a)
    questions = full[:: a.every][: a.questions]
    res = {"benchmark": "prompt_cache", "model": a.model, "precision": lm.precision, "data": os.path.basename(a.data),
           "every": a.every, "threads": __import__("torch").get_num_threads()}
    for name in a.methods.split(","):
        method = build_method(name, lm, engine, **method_options(name, {}, "hotpotqa"))
        method.answer(questions[0].question)  # warm: the demonstrations' KV, the first call's allocations
        print(f"{name}:", file=sys.stderr)
        res[name] = measure(lm, method, questions, SIZES)
    if "seakr" in res and "ircot" in res:
        res["seakr_over_ircot_seconds"] = {
            k: round(res["seakr"]["seconds_per_question"][k] / res["ircot"]["seconds_per_question"][k], 3)
            for k in ("off", "on")}
    res["date"] = time.strftime("%Y-%m-%d")
    emit(res, a.out)


if __name__ == "__main__":
    sys.exit(main())
