"""What a second row costs when it rides in a call SeaKR makes anyway: the knowledge answer beside a chain step (its
prompt is the step's prompt without the steps: the same demonstrations, passages and question), and the knowledge
check beside the chain's first step (a short closed-book prompt). On a CPU, decode reads every weight once per token
whatever the batch, so a row that shares a call's decode steps may cost little; a row decoded on its own pays for
every token. SeaKR spends 0.73 s a question on the check and 2.4 s on the knowledge answer's reasoning (bf16 report
rows, docs/results.md), the two parts of its cost IRCoT does not pay: this measures what they would cost riding.

Each question of the train file: the first passage BM25 finds for it, the first step decoded greedily with it, then
the second step's prompt (that passage, the first step). Every call decodes exactly ``--tokens`` tokens (no stop),
greedy, no states, after one untimed call of each prompt (so each prompt's KV is cached, as a chain's prefix is: the
timed calls compare decode). Medians over ``--repeat`` calls a question; ratios are side by side in this run.

Usage: python benchmarks/ride_along.py [--limit 6] [--tokens 14] [--repeat 3]
"""

import argparse
import os
import statistics
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import emit, median_time, pooled_args, pooled_setup  # noqa: E402


def prompts(m, engine, question: str) -> dict:
    """The three prompts of one question: the second step's, the knowledge answer's, and the check's."""
    from seakr.methods.base import STEP_STOPS
    from seakr.methods.trace import Tracer

    tr = Tracer(question, "seakr")
    kept = engine.search(question, 1)
    first, prefix = m.render(tr, question, [], kept)
    step = m.call(tr, "step", [first], prefix, STEP_STOPS, scored=False)[0].text.strip() or "It is not said."
    return {"step": m.render(tr, question, [step], kept), "knowledge": m.render(tr, question, [], kept),
            "check": m.prompts.render_short(question)}


def timings(lm, p: dict, tokens: int, repeat: int) -> dict:
    """Seconds of each call: a step alone, the knowledge answer alone, the check alone, and the step with each."""
    from seakr.models.base import GenerationConfig

    cfg = GenerationConfig(n=0, greedy=True, max_new_tokens=tokens, ignore_eos=True, with_states=False)
    calls = {"step": ["step"], "knowledge": ["knowledge"], "check": ["check"], "step+knowledge": ["step", "knowledge"],
             "step+check": ["step", "check"]}

    def run(names):  # the prefix the call's prompts share (the check's shares only the chat template's start)
        prefix = os.path.commonprefix([p[n][1] for n in names] + [p[n][0] for n in names]) or None
        return lambda: lm.generate([p[n][0] for n in names], cfg, prefix=prefix)

    for names in calls.values():
        run(names)()  # each prompt's KV cached before any timed call
    return {k: median_time(run(names), repeat) for k, names in calls.items()}


def main():
    ap = argparse.ArgumentParser()
    pooled_args(ap, "hotpotqa/train_hipporag100.official.jsonl")
    ap.add_argument("--limit", type=int, default=6)
    ap.add_argument("--tokens", type=int, default=14, help="tokens each call decodes (a chain step's mean)")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()

    from seakr.methods import build_method

    full, engine, lm = pooled_setup(a)
    m = build_method("seakr", lm, engine)
    rows = []
    for ex in full[: a.limit]:
        rows.append(timings(lm, prompts(m, engine, ex.question), a.tokens, a.repeat))
        print(" ".join(f"{k} {v:.2f}" for k, v in rows[-1].items()), file=sys.stderr, flush=True)
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    emit({"benchmark": "ride_along", "model": a.model, "precision": lm.precision, "questions": len(rows),
          "tokens": a.tokens, "seconds": {k: round(v, 3) for k, v in med.items()},
          "knowledge_riding_over_alone": round((med["step+knowledge"] - med["step"]) / med["knowledge"], 3),
          "check_riding_over_alone": round((med["step+check"] - med["step"]) / med["check"], 3)}, None)


if __name__ == "__main__":
    sys.exit(main())
