"""What a prompt token costs to prefill, and how long a cancelled request keeps its worker: one pass against
CHUNK-token chunks, side by side in one process, for prompts of growing length.

    python benchmarks/prefill_chunks.py --model smollm2-135m --out benchmarks/results/prefill_chunks_smollm2.json

Prints one JSON line: per prompt length, seconds for one pass and in chunks (their ratio), the longest chunk, and
the seconds from setting the cancel event to the worker being free (a cancel set while the first chunk runs)."""

import argparse
import threading
import time

import torch

from _common import emit
from seakr.models import load_model
from seakr.models import prefill as P
from seakr.models.base import Cancelled, GenerationConfig, cancellable


def prompt_of(lm, tokens: int) -> str:
    unit = "日本 東京 the river flows through the capital city of the country. "
    text = unit
    while len(lm.encode(text)) < tokens:
        text += unit
    ids = lm.encode(text)[:tokens]
    return lm.tokenizer.decode(ids, skip_special_tokens=True)


def timed_prefill(lm, prompt: str, chunk: int) -> tuple[float, float]:
    """(seconds for the prefill, the longest single forward)."""
    P.CHUNK = chunk
    longest, forward = [0.0], lm.model.forward

    def timing(*a, **kw):
        t = time.perf_counter()
        out = forward(*a, **kw)
        longest[0] = max(longest[0], time.perf_counter() - t)
        return out

    lm.model.forward = timing
    try:
        with torch.inference_mode():
            t = time.perf_counter()
            lm.prefill(prompt, None)
            return time.perf_counter() - t, longest[0]
    finally:
        del lm.model.forward


def cancel_latency(lm, prompt: str, chunk: int, after: float) -> float:
    """Seconds from the cancel event being set (``after`` s into the request) to the call returning."""
    P.CHUNK = chunk
    cancel, out = threading.Event(), {}

    def work():
        try:
            with cancellable(cancel):
                lm.generate([prompt], GenerationConfig(n=0, max_new_tokens=4))
        except Cancelled:
            out["end"] = time.perf_counter()

    th = threading.Thread(target=work)
    th.start()
    time.sleep(after)
    t = time.perf_counter()
    cancel.set()
    th.join()
    return out.get("end", time.perf_counter()) - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--lengths", default="1024,2048,4096,8000")
    ap.add_argument("--chunk", type=int, default=P.CHUNK)
    ap.add_argument("--out")
    a = ap.parse_args()
    lm = load_model(a.model)
    rows = []
    for n in map(int, a.lengths.split(",")):
        prompt = prompt_of(lm, n)
        whole, _ = timed_prefill(lm, prompt, 1 << 30)
        chunked, longest = timed_prefill(lm, prompt, a.chunk)
        rows.append({"prompt_tokens": n, "one_pass_s": round(whole, 3), "chunked_s": round(chunked, 3),
                     "chunked_over_one_pass": round(chunked / whole, 3), "longest_chunk_s": round(longest, 3),
                     "ms_per_token_one_pass": round(1000 * whole / n, 3),
                     "cancel_to_free_s": round(cancel_latency(lm, prompt, a.chunk, min(0.2, whole / 4)), 3),
                     "cancel_to_free_one_pass_s": round(cancel_latency(lm, prompt, 1 << 30, min(0.2, whole / 4)), 3)})
    emit({"benchmark": "prefill_chunks", "model": a.model, "precision": lm.info().get("precision"),
          "threads": torch.get_num_threads(), "chunk": a.chunk, "rows": rows}, a.out)


if __name__ == "__main__":
    main()
