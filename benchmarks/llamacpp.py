"""The peer, side by side: llama.cpp on the same GGUF file and the same threads as seakr's model layer.

One JSON line: for seakr (each ``--precision`` given) and for llama.cpp (``llama-cpp-python`` built in
a benchmark-only virtualenv, never a dependency of the package), the prefill tokens/s of a ~600-token
prompt and batch-1 greedy decode tokens/s; seakr's k=20 call (greedy + 20 sampled rows in one batch)
and llama.cpp's k=20 as 20 sequential completions that reuse the prompt's KV (its API has no batched
sampling of one prompt, and no middle-layer states, which SeaKR needs). Runs are sequential (never two
compute processes at once); seakr's medians over ``--rounds``, llama.cpp's too.

Set-up of the peer (once; compiles llama.cpp for ~8 minutes on 2 cores):
    python3 -m venv ~/.cache/seakr/lcpp-venv && ~/.cache/seakr/lcpp-venv/bin/pip install llama-cpp-python==0.3.36
Usage: python benchmarks/llamacpp.py --model qwen2.5-coder-1.5b --llama-python ~/.cache/seakr/lcpp-venv/bin/python
"""

from _common import emit  # noqa: E402
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

#: run by the peer's interpreter: prints one JSON object
PEER = r"""
import json, statistics, sys, time
import llama_cpp, llama_cpp.llama_cpp as C
# this llama.cpp build segfaults on multi-token batches with the CPU "extra buffer types" (weight
# repacking) on; turning them off is the documented work-around (../shared/docs/models.md section 8)
_orig = C.llama_model_default_params
def _params():
    p = _orig(); p.use_extra_bufts = False; return p
C.llama_model_default_params = _params
gguf, threads, rounds, k, new, prompt = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.stdin.read()
# n_batch = n_ctx: without logits_all this llama-cpp-python sizes its score buffer by n_batch yet
# writes the row of the absolute position (IndexError past n_batch); the physical batch (n_ubatch,
# 512) is unchanged
llm = llama_cpp.Llama(model_path=gguf, n_threads=threads, n_threads_batch=threads, n_ctx=1024, n_batch=1024, verbose=False)
toks = llm.tokenize(prompt.encode())
pre, dec, kc = [], [], []
for _ in range(rounds):
    llm.reset(); t = time.perf_counter(); llm.eval(toks); pre.append(time.perf_counter() - t)
    t = time.perf_counter()
    for _ in range(new):  # greedy, EOS ignored: the same work as seakr's ignore_eos decode
        nxt = int(llm.scores[llm.n_tokens - 1].argmax()); llm.eval([nxt])
    dec.append(time.perf_counter() - t)
    llm.reset(); t = time.perf_counter()
    for i in range(k):  # the prompt's KV is reused after the first completion
        llm.create_completion(prompt, max_tokens=new, temperature=1.0, top_p=0.9, top_k=0, seed=i, logit_bias={llm.token_eos(): -1e9})
    kc.append(time.perf_counter() - t)
m = statistics.median
print(json.dumps({"prompt_tokens": len(toks), "prefill_s": m(pre), "prefill_tokens_per_s": len(toks) / m(pre),
                  "batch1_decode_tokens_per_s": new / m(dec), "k_sequential_s": m(kc), "version": llama_cpp.__version__}))
"""


def gguf_file(name: str) -> Path:
    """The packaged model's GGUF, assembled once into the cache (checked by size and sha256)."""
    from seakr.common.cache import cache_root
    from seakr.models.registry import REGISTRY, _assemble

    m = REGISTRY[name]
    out = cache_root() / "gguf" / f"{m.name}-{m.sha256[:16]}.gguf"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=out.parent) as td:
            src = _assemble(m, Path(td) / out.name)
            os.replace(src, out) if src.parent == Path(td) else os.symlink(src, out)
    return out


def ours(name: str, precision: str, prompt: str, a) -> dict:
    from seakr.models import GenerationConfig, load_model

    lm = load_model(name, precision=precision, threads=a.threads)
    one = GenerationConfig(n=0, max_new_tokens=1, ignore_eos=True, with_states=False)
    greedy = GenerationConfig(n=0, max_new_tokens=a.tokens + 1, ignore_eos=True, with_states=False)
    k = GenerationConfig(n=a.k, max_new_tokens=a.tokens, ignore_eos=True, seed=1)
    t: dict[str, list] = {}
    lm.generate([prompt], one)
    for _ in range(a.rounds):
        for key, cfg in (("prefill", one), ("greedy", greedy), ("k", k)):
            t0 = time.perf_counter()
            lm.generate([prompt], cfg)
            t.setdefault(key, []).append(time.perf_counter() - t0)
    m = {key: statistics.median(v) for key, v in t.items()}
    n = lm.count_tokens(prompt)
    res = {"precision": lm.precision, "prompt_tokens": n, "prefill_s": round(m["prefill"], 3),
           "prefill_tokens_per_s": round(n / m["prefill"], 1),
           "batch1_decode_tokens_per_s": round(a.tokens / (m["greedy"] - m["prefill"]), 2), "k_call_s": round(m["k"], 2)}
    del lm
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--llama-python", required=True, help="python of the virtualenv with llama-cpp-python")
    ap.add_argument("--precision", action="append", default=None, help="seakr precisions (default: int8, bf16)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    from seakr.prompts import PromptBuilder

    prompt, _ = PromptBuilder("hotpotqa").render("Which city is farther north, Oslo or Helsinki? Answer with the city and the reason.")
    path = gguf_file(a.model)
    res = {"benchmark": "llamacpp", "model": a.model, "gguf": path.name, "threads": a.threads, "new_tokens": a.tokens,
           "k": a.k, "rounds": a.rounds, "date": time.strftime("%Y-%m-%d")}
    for p in a.precision or ["int8", "bfloat16"]:
        res[f"seakr_{p}"] = ours(a.model, p, prompt, a)
    peer = subprocess.run([a.llama_python, "-c", PEER, str(path), str(a.threads), str(a.rounds), str(a.k), str(a.tokens)],
                          input=prompt, capture_output=True, text=True, timeout=3600)
    if peer.returncode != 0:
        raise SystemExit(f"llama.cpp run failed ({peer.returncode}): {peer.stderr.strip().splitlines()[-1:]}")
    res["llama_cpp"] = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in json.loads(peer.stdout.strip().splitlines()[-1]).items()}
    lc = res["llama_cpp"]
    for p in a.precision or ["int8", "bfloat16"]:
        s = res[f"seakr_{p}"]
        res[f"ratio_batch1_decode_{p}_over_llama_cpp"] = round(s["batch1_decode_tokens_per_s"] / lc["batch1_decode_tokens_per_s"], 2)
        res[f"ratio_prefill_{p}_over_llama_cpp"] = round(s["prefill_tokens_per_s"] / lc["prefill_tokens_per_s"], 2)
        res[f"ratio_k_llama_cpp_sequential_over_{p}_call"] = round(lc["k_sequential_s"] / s["k_call_s"], 2)
    emit(res, a.out)


if __name__ == "__main__":
    main()
