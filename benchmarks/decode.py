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
* all of it for the shipped path (packed bf16 weights, kernels.py; the decode step outside
  transformers' modules, fastpath.py) and for the stock one (F.linear, transformers' forward), in
  interleaved rounds so the shared machine's drift hits both alike;
* a read-only bandwidth (a reduction over a large tensor) beside the copy figure: decode only reads.
* what merging pays (``--in-flight`` questions, the continuous batching of ``BatchingModel``): one
  k-sample call over that many distinct prompts against as many one-prompt calls (the gain if the
  questions' calls met in perfect step), and the linears alone at that many times k+1 rows (the
  same gain with zero framework overhead and free attention: the ceiling this CPU sets).
Usage: python benchmarks/decode.py --model smollm2-135m [--out FILE]
"""

from _common import emit, median_time  # noqa: E402
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from seakr.models import GenerationConfig, load_model  # noqa: E402
from seakr.models.kernels import pack_linears, packing_available, unpack_linears  # noqa: E402
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


def read_bandwidth(mb=1024, repeat=5):
    """Bytes read per second by a reduction over a large tensor: what decode does with the weights
    (reads, no writes). The copy figure above counts read + write traffic."""
    a = torch.empty(mb * 2**20 // 4, dtype=torch.float32).fill_(1.0)
    a.sum()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        a.sum()
        ts.append(time.perf_counter() - t)
    return a.numel() * 4 / min(ts)


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
    ap.add_argument("--repeat", type=int, default=5, help="interleaved rounds")
    ap.add_argument("--in-flight", type=int, default=8, help="prompts merged into one call (0: skip)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    # plain weights kept (packed_linear=False): this benchmark switches packing on and off
    lm = load_model(a.model, dtype=a.dtype, packed_linear=False)
    pb = PromptBuilder("hotpotqa")
    prompt, _ = pb.render("Which city is farther north, Oslo or Helsinki?")
    # distinct prompts of about the same length, as concurrent questions' calls would be
    cities = ["Oslo or Helsinki", "Lisbon or Madrid", "Rome or Athens", "Paris or Vienna", "Dublin or London",
              "Berlin or Warsaw", "Prague or Budapest", "Riga or Tallinn", "Bern or Brussels", "Sofia or Zagreb"]
    many = [pb.render(f"Which city is farther north, {c}?")[0] for c in cities[: a.in_flight]]
    one = GenerationConfig(n=0, max_new_tokens=1, ignore_eos=True, with_states=False)
    greedy = GenerationConfig(n=0, max_new_tokens=a.tokens, ignore_eos=True, with_states=False)
    ksamp = GenerationConfig(n=a.k, max_new_tokens=a.tokens, ignore_eos=True, seed=1)
    wb = weight_bytes(lm.model)
    flags = cpu_flags()

    can_pack = packing_available(lm.model.dtype)
    modes = {"shipped": (can_pack, lm.speedups.fast_step)}
    if can_pack or lm.speedups.fast_step is not None:
        modes["stock"] = (False, None)  # F.linear on plain weights, transformers' module forward

    def set_mode(name):
        packed, fast = modes[name]
        unpack_linears(lm.model)
        if packed:
            pack_linears(lm.model)
        lm.speedups.fast_step, lm.speedups.packed_linear = fast, packed

    # Interleaved rounds (shipped, stock, shipped, stock ...) so the machine's drift hits both alike;
    # medians over rounds. The bandwidth is measured in every round too.
    t: dict[str, dict[str, list]] = {m: {} for m in modes}
    bws, rbws = [], []
    lm.generate([prompt], greedy)
    for _ in range(a.repeat):
        bws.append(bandwidth(repeat=3))
        rbws.append(read_bandwidth(repeat=3))
        for name in modes:
            set_mode(name)
            lm.generate([prompt], one)  # warm this mode
            for key, cfg in (("prefill", one), ("greedy", greedy), ("k", ksamp)):
                t0 = time.perf_counter()
                lm.generate([prompt], cfg)
                t[name].setdefault(key, []).append(time.perf_counter() - t0)
            t[name].setdefault("lin1", []).append(linear_step_seconds(lm.model, 1, 5))
            t[name].setdefault("link", []).append(linear_step_seconds(lm.model, a.k + 1, 5))
            if a.in_flight and name == "shipped":
                t0 = time.perf_counter()
                lm.generate(many, ksamp)
                t[name].setdefault("k_merged", []).append(time.perf_counter() - t0)
                t[name].setdefault("link_merged", []).append(linear_step_seconds(lm.model, a.in_flight * (a.k + 1), 3))
    set_mode("shipped")
    bw, rbw = max(bws), max(rbws)
    bound = bw / wb

    def summary(name) -> dict:
        med = {k: statistics.median(v) for k, v in t[name].items()}
        tps = (a.tokens - 1) / max(1e-9, med["greedy"] - med["prefill"])
        return {"batch1_decode_tokens_per_s": round(tps, 2), "decode_ms_per_token": round(1000 / tps, 2),
                "fraction_of_bound": round(tps / bound, 3), "fraction_of_read_bound": round(tps * wb / rbw, 3),
                "greedy_seconds": round(med["greedy"], 3), "k_samples_seconds": round(med["k"], 3),
                "ratio_k_over_greedy": round(med["k"] / med["greedy"], 2),
                "linear_only_ms_per_step_batch1": round(1000 * med["lin1"], 2),
                f"linear_only_ms_per_step_batch{a.k + 1}": round(1000 * med["link"], 2),
                "linear_only_ratio_floor": round(med["link"] / med["lin1"], 2),
                "linear_batch1_fraction_of_decode_step": round(med["lin1"] * tps, 3)}

    res = {"benchmark": "decode", "model": a.model, "dtype": lm.dtype, "threads": torch.get_num_threads(),
           **lm.speedups.info(),
           "prompt_tokens": lm.count_tokens(prompt), "new_tokens": a.tokens, "k": a.k,
           "bandwidth_gb_s": round(bw / 1e9, 2), "bandwidth_gb_s_rounds": [round(x / 1e9, 1) for x in bws],
           "read_bandwidth_gb_s": round(rbw / 1e9, 2), "read_bandwidth_gb_s_rounds": [round(x / 1e9, 1) for x in rbws],
           "weight_mb_per_token": round(wb / 1e6, 1), "bound_tokens_per_s": round(bound, 1),
           **summary("shipped"),
           "cpu_amx": any(f.startswith("amx") for f in flags), "cpu_avx512_bf16": "avx512_bf16" in flags,
           "statistic": "median over interleaved rounds", "rounds": a.repeat}
    if a.in_flight:
        med = {k: statistics.median(v) for k, v in t["shipped"].items()}
        n = a.in_flight
        res[f"merged_{n}_prompts_k_samples_seconds"] = round(med["k_merged"], 3)
        res[f"merged_{n}_throughput_gain"] = round(n * med["k"] / med["k_merged"], 2)
        res[f"linear_only_ms_per_step_batch{n * (a.k + 1)}"] = round(1000 * med["link_merged"], 2)
        res[f"linear_only_merged_{n}_gain_ceiling"] = round(n * med["link"] / med["link_merged"], 2)
    if "stock" in modes:
        st = summary("stock")
        res["stock"] = st
        res["speedup_over_stock_greedy"] = round(st["greedy_seconds"] / res["greedy_seconds"], 2)
        res["speedup_over_stock_k_samples"] = round(st["k_samples_seconds"] / res["k_samples_seconds"], 2)
        res["speedup_over_stock_decode_step"] = round(st["decode_ms_per_token"] / res["decode_ms_per_token"], 2)
    emit(res, a.out)


if __name__ == "__main__":
    sys.exit(main())
