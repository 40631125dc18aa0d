"""GPU benchmark, ready to run on a CUDA machine: the paper's claim that k=20 samples cost about one
generation, on a Llama-2-7B-shaped model with random weights (no weights need to travel).

Prints one JSON line: batch-1 greedy decode tokens/s against the HBM bandwidth bound (weight bytes
per token / measured copy bandwidth), and the time of one k=20 call (k samples + the greedy row,
states read at EOS) over one greedy generation of the same length, for a ~600-token prompt; each with
the decode step replayed from a CUDA graph (the default) and dispatched eagerly, side by side.
Usage: python benchmarks/gpu.py [--layers 32] [--tokens 64] [--k 20] [--out FILE]
"""

from _common import emit  # noqa: E402
import argparse
import statistics
import time

import torch


def tokenizer(vocab: int):
    """A word-level tokenizer built here (no files): every id decodes to one word."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = {f"w{i}": i for i in range(vocab - 3)}
    words.update({"<unk>": vocab - 3, "<s>": vocab - 2, "</s>": vocab - 1})
    tk = Tokenizer(models.WordLevel(words, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", bos_token="<s>", eos_token="</s>")


def hbm_bandwidth(mb=2048, repeat=5) -> float:
    x = torch.empty(mb * 2**20 // 2, dtype=torch.bfloat16, device="cuda")
    y = torch.empty_like(x)
    ts = []
    for _ in range(repeat):
        torch.cuda.synchronize()
        t = time.perf_counter()
        y.copy_(x)
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t)
    return 2 * x.numel() * 2 / min(ts) / 1e9


def main():
    from transformers import LlamaConfig, LlamaForCausalLM

    from seakr.models import GenerationConfig
    from seakr.models.hf import HFLanguageModel

    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    assert torch.cuda.is_available(), "this benchmark needs a CUDA device"
    tok = tokenizer(32000)
    cfg = LlamaConfig(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=a.layers,
                      num_attention_heads=32, num_key_value_heads=32, max_position_embeddings=4096,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    lm = HFLanguageModel(_modules=(model, tok), dtype="bfloat16", device="cuda")
    prompt = " ".join(f"w{(i * 7919) % 31000}" for i in range(600))
    greedy = GenerationConfig(n=0, max_new_tokens=a.tokens, ignore_eos=True, with_states=False)
    one = GenerationConfig(n=0, max_new_tokens=1, ignore_eos=True, with_states=False)
    ks = GenerationConfig(n=a.k, max_new_tokens=a.tokens, ignore_eos=True, seed=1)

    def timed(c):
        torch.cuda.synchronize()
        t = time.perf_counter()
        lm.generate([prompt], c)
        torch.cuda.synchronize()
        return time.perf_counter() - t

    def measure(graphs: bool) -> dict:
        lm.cuda_graphs = graphs  # the same model, its decode step replayed from a CUDA graph or dispatched eagerly
        timed(greedy)
        return {name: statistics.median(timed(c) for _ in range(a.repeat)) for name, c in (("one", one), ("greedy", greedy), ("k", ks))}

    info = lm.info()
    t, eager = measure(True), measure(False)  # side by side, one process
    bw = hbm_bandwidth()
    weight = sum(p.numel() * p.element_size() for n, p in model.named_parameters() if "embed_tokens" not in n)
    tps = (a.tokens - 1) / (t["greedy"] - t["one"])
    tps_eager = (a.tokens - 1) / (eager["greedy"] - eager["one"])
    emit({"benchmark": "gpu", "device": torch.cuda.get_device_name(), "layers": a.layers, "dtype": "bfloat16",
          "prompt_tokens": 600, "new_tokens": a.tokens, "k": a.k, "hbm_copy_gb_s": round(bw, 1),
          "weight_gb_per_token": round(weight / 1e9, 2), "bound_tokens_per_s": round(bw * 1e9 / weight, 1),
          "batch1_decode_tokens_per_s": round(tps, 1), "fraction_of_bound": round(tps * weight / (bw * 1e9), 3),
          "greedy_seconds": round(t["greedy"], 3), "k_samples_seconds": round(t["k"], 3),
          "ratio_k_over_greedy": round(t["k"] / t["greedy"], 2), "target_ratio": 1.3,
          "eager": {"batch1_decode_tokens_per_s": round(tps_eager, 1), "greedy_seconds": round(eager["greedy"], 3),
                    "k_samples_seconds": round(eager["k"], 3), "ratio_k_over_greedy": round(eager["k"] / eager["greedy"], 2)},
          "graphs_speedup_greedy": round(eager["greedy"] / t["greedy"], 2), "graphs_speedup_k": round(eager["k"] / t["k"], 2),
          "info": info}, a.out)


if __name__ == "__main__":
    main()
