"""A quantised precision against bf16 on the same model: speed side by side, and the accuracy bar.

``--part speed`` (one JSON line): both precisions loaded in one process, interleaved rounds; per
precision the load time, the prefill of a ~600-token prompt, batch-1 greedy decode tokens/s, and one
k=20 call (the SeaKR uncertainty step: greedy + 20 sampled rows, 32 tokens, EOS ignored); ratios
candidate / bf16 taken from the same rounds.

``--part accuracy`` (one JSON line): on prompts drawn from tuning data that no reported table uses
(2Wiki ``extra500`` questions with the multi-hop demonstrations, NQ dev with the simple-QA ones):
* greedy continuations (32 tokens) identical to bf16's, and where not, the first differing token;
* EigenScore U of (prompt, k=20) at the same seed: Spearman against bf16's U;
* the bar: identical on >= 90 % and first difference at >= 20 tokens on the rest; Spearman >= 0.9.
Usage: python benchmarks/precision.py --model qwen2.5-coder-1.5b --part speed [--out FILE]
"""

from _common import emit  # noqa: E402
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

from seakr import uncertainty as U  # noqa: E402
from seakr.eval.datasets import load_dataset
from seakr.eval.metrics import spearman  # noqa: E402
from seakr.models import GenerationConfig, load_model  # noqa: E402
from seakr.prompts import PromptBuilder  # noqa: E402

SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")


def tuning_prompts(n: int) -> list[tuple[str, str]]:
    """(prompt, cacheable prefix) pairs: half 2Wiki extra500 (multi-hop), half NQ dev (simple QA)."""
    wiki = load_dataset(os.path.join(SHARED, "2wikimultihopqa", "extra500_maybe_train.official.json"), limit=n // 2)
    nq = load_dataset(os.path.join(SHARED, "nq", "dev_oracle_first1000.jsonl.gz"), limit=n - n // 2)
    mh, sq = PromptBuilder("2wikimultihopqa"), PromptBuilder("simpleqa")
    return [mh.render(e.question) for e in wiki] + [sq.render(e.question) for e in nq]


def rss_gb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def speed(a, models) -> dict:
    pb = PromptBuilder("hotpotqa")
    prompt, _ = pb.render("Which city is farther north, Oslo or Helsinki? Answer with the city and the reason.")
    one = GenerationConfig(n=0, max_new_tokens=1, ignore_eos=True, with_states=False)
    greedy = GenerationConfig(n=0, max_new_tokens=a.tokens, ignore_eos=True, with_states=False)
    k = GenerationConfig(n=a.k, max_new_tokens=a.tokens, ignore_eos=True, seed=1)
    t: dict[str, dict[str, list]] = {p: {} for p in models}
    for _ in range(a.rounds):
        for p, lm in models.items():
            for key, cfg in (("prefill", one), ("greedy", greedy), ("k", k)):
                t0 = time.perf_counter()
                lm.generate([prompt], cfg)
                t[p].setdefault(key, []).append(time.perf_counter() - t0)
    res = {"prompt_tokens": models[a.base].count_tokens(prompt), "new_tokens": a.tokens, "k": a.k}
    for p in models:
        med = {key: statistics.median(v) for key, v in t[p].items()}
        res[p] = {"prefill_s": round(med["prefill"], 3), "greedy_s": round(med["greedy"], 3),
                  "batch1_decode_tokens_per_s": round((a.tokens - 1) / (med["greedy"] - med["prefill"]), 2),
                  "k_call_s": round(med["k"], 3), "rounds_k_call_s": [round(x, 2) for x in t[p]["k"]]}
    b, c = res[a.base], res[a.candidate]
    res["k_call_speedup"] = round(b["k_call_s"] / c["k_call_s"], 2)
    res["batch1_decode_speedup"] = round(c["batch1_decode_tokens_per_s"] / b["batch1_decode_tokens_per_s"], 2)
    res["prefill_speedup"] = round(b["prefill_s"] / c["prefill_s"], 2)
    return res


def first_difference(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def accuracy(a, models) -> dict:
    prompts = tuning_prompts(a.prompts)
    greedy = GenerationConfig(n=0, max_new_tokens=a.tokens, with_states=False, stop=("\n",))
    toks = {p: [] for p in models}
    # chunks of one prefix each (a chunk across the two sets' prefixes was refused when --prompts was not a
    # multiple of twice --batch)
    chunks = [prompts[i: min(i + a.batch, j)] for j0, j in ((0, len(prompts) // 2), (len(prompts) // 2, len(prompts)))
              for i in range(j0, j, a.batch)]
    for n, chunk in enumerate(chunks, 1):
        for p, lm in models.items():  # one call per chunk: rows decode together, as SeaKR's calls do
            toks[p] += [g.greedy.token_ids for g in lm.generate([q for q, _ in chunk], greedy, prefix=chunk[0][1])]
        print(f"greedy chunk {n}/{len(chunks)}", file=sys.stderr, flush=True)
    diffs = [first_difference(x, y) for x, y in zip(toks[a.base], toks[a.candidate])]
    same = sum(d is None for d in diffs)
    late = [d for d in diffs if d is not None]
    us = {p: [] for p in models}
    kcfg = GenerationConfig(n=a.k, max_new_tokens=a.tokens, seed=7, stop=(". ", "\n"))
    for j, (q, pre) in enumerate(prompts[: a.pairs]):
        for p, lm in models.items():
            us[p].append(U.eigen_score(np.stack([s.state for s in lm.generate([q], kcfg, prefix=pre)[0].samples])))
        if (j + 1) % 10 == 0:
            print(f"U {j + 1}/{a.pairs}", file=sys.stderr, flush=True)
    rho = spearman(us[a.base], us[a.candidate])
    res = {"prompts": len(prompts), "identical_greedy_fraction": round(same / len(prompts), 3),
           "first_difference_tokens": late, "differing_before_20_tokens": sum(d < 20 for d in late),
           "u_pairs": len(us[a.base]), "u_spearman": round(rho, 3),
           "u_mean_abs_difference": round(float(np.mean(np.abs(np.array(us[a.base]) - np.array(us[a.candidate])))), 3)}
    res["passes_greedy_bar"] = res["identical_greedy_fraction"] >= 0.9 and res["differing_before_20_tokens"] == 0
    res["passes_u_bar"] = rho >= 0.9
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--base", default="bfloat16")
    ap.add_argument("--candidate", default="int8")
    ap.add_argument("--part", choices=["speed", "accuracy"], default="speed")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=200, help="greedy-agreement prompts")
    ap.add_argument("--pairs", type=int, default=200, help="(prompt, k) pairs for the U correlation")
    ap.add_argument("--batch", type=int, default=20, help="prompts per greedy call")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    models, load = {}, {}
    for p in (a.base, a.candidate):
        t0 = time.perf_counter()
        models[p] = load_model(a.model, precision=p)
        load[p] = round(time.perf_counter() - t0, 1)
    info = models[a.candidate].info()
    res = {"benchmark": f"precision_{a.part}", "model": a.model, "base": a.base, "candidate": a.candidate,
           "threads": info["threads"], "load_s": load, "peak_rss_gb_both_loaded": round(rss_gb(), 2),
           "candidate_speedups": {k: info[k] for k in ("packed_linear", "int8_linears", "fast_decode")}}
    res.update(speed(a, models) if a.part == "speed" else accuracy(a, models))
    res["date"] = time.strftime("%Y-%m-%d")
    emit(res, a.out)


if __name__ == "__main__":
    main()
