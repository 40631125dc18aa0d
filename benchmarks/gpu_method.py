"""The shipped default SeaKR on a CUDA device, beside IRCoT, with weights that need not travel.

The model is the packaged model's architecture, config and tokenizer (a converted folder, e.g.
``~/.cache/seakr/models/qwen2.5-coder-0.5b-*``: everything but model.safetensors) with random weights,
named as the packaged model so that its fitted files load: the default path (probe gate on the greedy
state, the candidate probe with the engine's rank and score, the final rule) runs on the device end to
end. Random weights write nonsense until the token limit, so the seconds are a full-length cost per
question, not a quality figure; answers are not scored.

Prints one JSON line: seconds per question, model calls and retrievals of each method (same questions,
one process), the ratios to IRCoT, and the options SeaKR settled on.
Usage: python benchmarks/gpu_method.py --model-dir DIR [--name qwen2.5-coder-0.5b] [--data FILE] [--n 3]
"""

from _common import emit  # noqa: E402
import argparse
import json
import tempfile
import time
from pathlib import Path

import torch


def random_model(folder: str, name: str, device: str):
    """The architecture and tokenizer of ``folder``, random weights, ``name`` as the model's name."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from seakr.models.hf import HFLanguageModel

    cfg = AutoConfig.from_pretrained(folder)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    model.config.name_or_path = name  # the fitted files are looked up (and checked) by this name
    return HFLanguageModel(_modules=(model, AutoTokenizer.from_pretrained(folder)), device=device)


def main():
    from seakr.methods import build_method
    from seakr.search.corpora import read_corpus
    from seakr.search.tantivy_engine import TantivyEngine

    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--name", default="qwen2.5-coder-0.5b")
    ap.add_argument("--data", default=str(Path(__file__).parents[1] / "tests/fixtures/hotpotqa_mini.official.json"))
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    lm = random_model(a.model_dir, a.name, a.device)
    engine = TantivyEngine.build(read_corpus(a.data), Path(tempfile.mkdtemp()) / "idx")
    questions = [q["question"] for q in json.load(open(a.data))[: a.n]]
    res = {"benchmark": "gpu_method", "device": torch.cuda.get_device_name() if a.device.startswith("cuda") else "cpu",
           "model": a.name, "weights": "random", "questions": len(questions)}
    # seakr-chain: the default with gate_p 1, so that the gate never answers at once and the chain's own
    # stages (re-rank probe, final rule) run too; random states can make the default gate stop at the check
    for name, method_name, options in (("seakr", "seakr", {}), ("seakr-chain", "seakr", {"gate_p": 1.0}),
                                       ("ircot", "ircot", {})):
        method = build_method(method_name, lm, engine, **options)
        method.answer(questions[0])  # warm-up: kernels, the prefix cache's first fill
        t = time.perf_counter()
        traces = [method.answer(q).trace for q in questions]
        res[f"{name}_seconds_per_question"] = round((time.perf_counter() - t) / len(questions), 2)
        res[f"{name}_model_calls"] = sum(tr["totals"]["model_calls"] for tr in traces) / len(questions)
        res[f"{name}_retrievals"] = sum(tr["totals"]["retrievals"] for tr in traces) / len(questions)
        if method_name == "seakr":
            res[f"{name}_settled"] = {k: method.describe()["config"][k] for k in ("gate", "rerank", "reasoning", "gate_p")}
    for name in ("seakr", "seakr-chain"):
        res[f"ratio_{name}_over_ircot"] = round(res[f"{name}_seconds_per_question"] / res["ircot_seconds_per_question"], 2)
    res["info"] = lm.info()
    emit(res, a.out)


if __name__ == "__main__":
    main()
