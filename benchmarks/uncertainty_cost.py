"""Cost of one SeaKR uncertainty estimate vs one greedy generation, measured side by side.

Prints one JSON object: model, dtype, threads, prompt tokens, greedy seconds, k-sample seconds (same
prompt, same token budget, EOS ignored so both produce exactly --max-new-tokens per row), their ratio,
tokens/s, the prefix-cache speedup (a ~1,500-token prefix + ~100-token suffix, cached vs re-prefilled)
and peak RSS. Usage: python benchmarks/uncertainty_cost.py --model smollm2-135m [--out FILE]
"""

from _common import emit, median_time  # noqa: E402
import argparse
import os
import platform
import resource
import statistics
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from seakr.models import GenerationConfig, load_model  # noqa: E402
from seakr.prompts import FAMILIES, PromptBuilder  # noqa: E402




def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--prefix-tokens", type=int, default=1500)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()

    lm = load_model(a.model, dtype=a.dtype, threads=a.threads)
    pb = PromptBuilder("hotpotqa")
    prompt, prefix = pb.render("Which city is farther north, Oslo or Helsinki?")
    n_prompt = lm.count_tokens(prompt)
    greedy = GenerationConfig(n=0, greedy=True, max_new_tokens=a.max_new_tokens, ignore_eos=True, with_states=False)
    ksamp = GenerationConfig(n=a.k, greedy=True, max_new_tokens=a.max_new_tokens, ignore_eos=True, seed=1)
    lm.generate([prompt], greedy)  # warm-up (allocator, oneDNN kernels)
    # Same prompt, no prefix cache for either side: the ratio is about sampling, not caching.
    t_greedy = median_time(lambda: lm.generate([prompt], greedy), a.repeat)
    t_k = median_time(lambda: lm.generate([prompt], ksamp), a.repeat)

    # Prefix cache: demonstrations of every family, repeated up to ~prefix_tokens, + a ~100-token suffix.
    blocks = [PromptBuilder(f).demos for f in FAMILIES]
    long_prefix, i = "", 0
    while lm.count_tokens(long_prefix) < a.prefix_tokens:
        long_prefix += blocks[i % len(blocks)] + "\n\n"
        i += 1
    # ~100 tokens after the prefix (99 SmolLM2, 95 Qwen tokens), as the target states (two retrieved passages + the question)
    suffix = ("Context:\n[1] Oslo is the capital of Norway and lies at about 59.9 degrees north. Helsinki is the capital "
              "of Finland and lies at about 60.2 degrees north, on the Gulf of Finland.\n"
              "[2] Stockholm, the capital of Sweden, lies at about 59.3 degrees north, on the Baltic coast, east of Oslo and west of Helsinki.\n"
              "Question: Which city is farther north, Oslo or Helsinki?\nAnswer:")
    one = GenerationConfig(n=0, greedy=True, max_new_tokens=1, ignore_eos=True, with_states=False)
    lm.generate([long_prefix + suffix], one, prefix=long_prefix)  # fills the cache once
    # cold and warm interleaved, round by round: the machine drifts by tens of percent between minutes
    colds, warms = [], []
    for _ in range(max(5, a.repeat)):
        colds.append(median_time(lambda: lm.generate([long_prefix + suffix], one), 1))
        warms.append(median_time(lambda: lm.generate([long_prefix + suffix], one, prefix=long_prefix), 1))
    t_cold, t_warm = statistics.median(colds), statistics.median(warms)

    res = {
        "benchmark": "uncertainty_cost",
        "model": a.model,
        "dtype": lm.dtype,
        "threads": lm.info()["threads"],
        "cpu": platform.processor() or platform.machine(),
        "prompt_tokens": n_prompt,
        "max_new_tokens": a.max_new_tokens,
        "k": a.k,
        "greedy_seconds": round(t_greedy, 3),
        "k_samples_seconds": round(t_k, 3),
        "ratio_k_over_greedy": round(t_k / t_greedy, 2),
        "greedy_tokens_per_s": round(a.max_new_tokens / t_greedy, 1),
        "k_tokens_per_s": round((a.k + 1) * a.max_new_tokens / t_k, 1),
        "prefix_tokens": lm.count_tokens(long_prefix),
        "suffix_tokens": lm.count_tokens(suffix) - 1,
        "prefill_uncached_seconds": round(t_cold, 3),
        "prefill_cached_prefix_seconds": round(t_warm, 3),
        "prefix_cache_speedup": round(t_cold / t_warm, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "repeat": a.repeat,
        "statistic": "median",
    }
    emit(res, a.out)


if __name__ == "__main__":
    sys.exit(main())
