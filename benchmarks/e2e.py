"""End to end on HotpotQA dev: SeaKR's seconds per question vs IRCoT's, and SeaKR's throughput with
8 questions in flight (BatchingModel merges their decode batches) vs 1. One process, side by side.

Usage: python benchmarks/e2e.py --model qwen2.5-coder-0.5b --questions 50 [--out FILE]
The pooled index (the file's paragraphs + filler) is built once into the cache.
"""

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import emit  # noqa: E402

from seakr.eval.corpus import pooled_index  # noqa: E402
from seakr.eval.datasets import load_dataset
from seakr.eval.runner import run_eval
from seakr.methods import build_method  # noqa: E402
from seakr.models import load_model  # noqa: E402
from seakr.models.batching import BatchingModel  # noqa: E402
from seakr.search import open_engine  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.abspath(os.path.join(HERE, "..", "..", "shared", "data"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--questions", type=int, default=50)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--no-concurrent", action="store_true", help="skip the N-in-flight pass (4a only)")
    ap.add_argument("--precision", default="auto")
    ap.add_argument("--rows", default=None, help="keep per-question rows here (resumable; no question text)")
    ap.add_argument("--methods", default="ircot,seakr")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    data = os.path.join(DATA, "hotpotqa", "dev_hard100.hf.jsonl")
    filler = os.path.join(DATA, "corpus", "wiki_filler1000.flashrag.jsonl")
    full = load_dataset(data)
    exs = full[: a.questions]
    engine = open_engine(pooled_index(data, full, [filler]))
    t0 = time.perf_counter()
    lm = load_model(a.model, precision=a.precision)
    load_s = time.perf_counter() - t0
    opts = {"max_new_tokens": a.max_new_tokens, "prompt_set": "hotpotqa"}
    res = {"benchmark": "e2e", "model": a.model, "precision": lm.precision, "load_seconds": round(load_s, 1),
           "questions": len(exs),
           "concurrency": None if a.no_concurrent else a.concurrency, **opts}
    with tempfile.TemporaryDirectory() as td:
        td = a.rows or td
        passes = [(m, lm, 1) for m in a.methods.split(",")]
        if not a.no_concurrent:
            passes.append(("seakr", BatchingModel(lm), a.concurrency))
        for name, model, conc in passes:
            t, st = time.perf_counter(), dict(lm.stats)
            s = run_eval(build_method(name, model, engine, **opts), exs, os.path.join(td, f"{name}-{conc}"), resume=bool(a.rows),
                         concurrency=conc, name=name)
            wall = time.perf_counter() - t
            key = f"{name}_c{conc}"
            res[key] = {"wall_seconds": round(wall, 1), "seconds_per_question": round(wall / len(exs), 2),
                        "questions_per_minute": round(60 * len(exs) / wall, 3), "f1": round(s["f1"], 3),
                        "model_calls_per_question": round(s["model_calls_per_question"], 2),
                        "retrieval_rate": round(s["retrieval_rate"], 2),
                        "prefill_share_of_model_seconds": round((lm.stats["prefill_seconds"] - st["prefill_seconds"])
                                                                / max(1e-9, lm.stats["seconds"] - st["seconds"]), 3),
                        "prefill_tokens_per_question": round((lm.stats["prefill_tokens"] - st["prefill_tokens"]) / len(exs))}
    if "seakr_c1" in res and "ircot_c1" in res:
        res["seakr_over_ircot_seconds"] = round(res["seakr_c1"]["seconds_per_question"] / res["ircot_c1"]["seconds_per_question"], 2)
    import resource

    res["peak_rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2)
    res["date"] = time.strftime("%Y-%m-%d")
    if not a.no_concurrent:
        res["throughput_gain_c%d_over_c1" % a.concurrency] = round(
            res[f"seakr_c{a.concurrency}"]["questions_per_minute"] / res["seakr_c1"]["questions_per_minute"], 2)
    emit(res, a.out)


if __name__ == "__main__":
    sys.exit(main())
