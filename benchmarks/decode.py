"""Decode speed against this machine's memory-bandwidth bound, and k samples vs one greedy run.

Prints one JSON object per model, measured side by side in one process:
* bandwidth: a large tensor copy (read + write bytes / seconds), the machine's streaming bound;
* weight bytes read per decoded token (every parameter except the input embedding, which is only
  gathered row-wise; tied lm_head counted once) -> the bound in tokens/s = bandwidth / bytes;
* batch-1 greedy decode tokens/s (prefill excluded) and its fraction of the bound;
* the k-sample estimate (greedy + k rows, same prompt and budget) / one greedy generation;
* the same model's linear layers alone (every weight matrix applied once, as in one decode step) at
  batch 1 and at batch k+1: the floor of a decode step with zero framework overhead. Their ratio is
  the best k-vs-greedy ratio this CPU allows once greedy decode runs at that floor (without AMX the
  batch-(k+1) matmuls are compute-bound, not bandwidth-bound).
* the same again with stock ``F.linear`` after unpacking the packed bf16 weights (models/kernels.py).
Usage: python benchmarks/decode.py --model smollm2-135m [--out FILE]
"""

from _common import emit, median_time  # noqa: E402
import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from seakr.models import GenerationConfig, load_model  # noqa: E402
from seakr.models.kernels import unpack_linears  # noqa: E402
from seakr.prompts import PromptBuilder  # noqa: E402


def bandwidth(mb=1024, repeat=5):
    a = torch.empty(mb * 2**20 // 4, dtype=torch.float32).fill_(1.0)
    b = torch.empty_like(a)
    b.copy_(a)
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        b.copy_(a)
        ts.append(time.perf_counter() - t)
    return 2 * a.numel() * 4 / min(ts)


def weight_bytes(model):
    emb = model.get_input_embeddings().weight
    out = model.get_output_embeddings().weight if model.get_output_embeddings() is not None else None
    total = 0
    for p in model.parameters():
        if p is emb and (out is None or out is not emb):
            continue  # untied input embedding: one row per token, negligible
        total += p.numel() * p.element_size()
    return total




def cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def linear_step_seconds(model, rows: int, repeat: int) -> float:
    """Every nn.Linear (lm_head included) applied to ``rows`` vectors, through the module's own forward
    (packed or not): one decode step's matmuls."""
    ms = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    xs = {m.in_features: torch.randn(rows, m.in_features, dtype=m.weight.dtype) for m in ms}

    def step():
        for m in ms:
            m(xs[m.in_features])

    with torch.inference_mode():
        step()
        return median_time(step, repeat)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    lm = load_model(a.model, dtype=a.dtype)
    prompt, _ = PromptBuilder("hotpotqa").render("Which city is farther north, Oslo or Helsinki?")
    one = GenerationConfig(n=0, max_new_tokens=1, ignore_eos=True, with_states=False)
    greedy = GenerationConfig(n=0, max_new_tokens=a.tokens, ignore_eos=True, with_states=False)
    ksamp = GenerationConfig(n=a.k, max_new_tokens=a.tokens, ignore_eos=True, seed=1)
    wb = weight_bytes(lm.model)
    flags = cpu_flags()

    def measure() -> dict:
        """Greedy, k samples and the linear-only floor with the model's current linear kernels."""
        lm.generate([prompt], greedy)
        t_prefill = median_time(lambda: lm.generate([prompt], one), a.repeat)
        t_greedy = median_time(lambda: lm.generate([prompt], greedy), a.repeat)
        t_k = median_time(lambda: lm.generate([prompt], ksamp), a.repeat)
        lin1 = linear_step_seconds(lm.model, 1, 5 * a.repeat)
        link = linear_step_seconds(lm.model, a.k + 1, 5 * a.repeat)
        tps = (a.tokens - 1) / max(1e-9, t_greedy - t_prefill)
        return {"batch1_decode_tokens_per_s": tps, "decode_ms_per_token": 1000 / tps, "greedy_seconds": t_greedy,
                "k_samples_seconds": t_k, "ratio_k_over_greedy": t_k / t_greedy,
                "linear_only_ms_per_step_batch1": 1000 * lin1, f"linear_only_ms_per_step_batch{a.k + 1}": 1000 * link,
                "linear_only_ratio_floor": link / lin1, "linear_batch1_fraction_of_decode_step": lin1 * tps}

    # Side by side in one process: the shipped path (packed bf16 weights where available), then the
    # same model with stock F.linear. Bandwidth is measured before and after; the bound uses the
    # higher of the two (the conservative choice on a noisy shared machine).
    bw0 = bandwidth()
    shipped = measure()
    stock = None
    if lm.packed_linear:
        unpack_linears(lm.model)
        stock = measure()
    bw1 = bandwidth()
    bw = max(bw0, bw1)
    bound = bw / wb
    r2 = lambda d: {k: round(v, 3) for k, v in d.items()}  # noqa: E731
    res = {"benchmark": "decode", "model": a.model, "dtype": lm.dtype, "threads": torch.get_num_threads(),
           "packed_linear": lm.packed_linear, "prompt_tokens": lm.count_tokens(prompt), "new_tokens": a.tokens, "k": a.k,
           "bandwidth_gb_s": round(bw / 1e9, 2), "bandwidth_gb_s_runs": [round(bw0 / 1e9, 2), round(bw1 / 1e9, 2)],
           "weight_mb_per_token": round(wb / 1e6, 1), "bound_tokens_per_s": round(bound, 1),
           **r2(shipped), "fraction_of_bound": round(shipped["batch1_decode_tokens_per_s"] / bound, 3),
           "cpu_amx": any(f.startswith("amx") for f in flags), "cpu_avx512_bf16": "avx512_bf16" in flags,
           "statistic": "median", "repeat": a.repeat}
    if stock is not None:
        res["stock_linear"] = {**r2(stock), "fraction_of_bound": round(stock["batch1_decode_tokens_per_s"] / bound, 3)}
        res["packed_speedup_greedy"] = round(stock["greedy_seconds"] / shipped["greedy_seconds"], 2)
        res["packed_speedup_k_samples"] = round(stock["k_samples_seconds"] / shipped["k_samples_seconds"], 2)
    emit(res, a.out)


if __name__ == "__main__":
    sys.exit(main())
