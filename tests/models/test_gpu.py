"""On a machine with CUDA: the tiny-model equivalence tests run on the GPU against the CPU results.
Skipped (saying why) where no GPU is present; `pytest -m gpu` selects them."""

import numpy as np
import pytest
import torch

from seakr.models import GenerationConfig
from seakr.models.hf import HFLanguageModel

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")]
P = ["Question: Who wrote Hamlet? Answer:", "Paris is the capital of"]


@pytest.fixture(scope="module")
def pair(tiny_lm):
    import copy

    gpu = HFLanguageModel(_modules=(copy.deepcopy(tiny_lm.model), tiny_lm.tokenizer), dtype="float32", device="cuda",
                          threads=1)
    return tiny_lm, gpu


def test_gpu_model_runs_on_the_device_without_cpu_kernels(pair):
    _, gpu = pair
    info = gpu.info()
    assert info["device"].startswith("cuda") and not info["packed_linear"]
    assert next(gpu.model.parameters()).is_cuda


def test_greedy_tokens_and_states_match_the_cpu(pair):
    cpu, gpu = pair
    cfg = GenerationConfig(n=0, max_new_tokens=12)
    for a, b in zip(cpu.generate(P, cfg), gpu.generate(P, cfg)):
        assert a.greedy.token_ids == b.greedy.token_ids
        assert np.allclose(a.greedy.logprobs, b.greedy.logprobs, atol=1e-3)


def test_sampled_states_are_finite_and_seeded(pair):
    _, gpu = pair
    cfg = GenerationConfig(n=5, max_new_tokens=8, seed=3)
    a, b = gpu.generate(P, cfg), gpu.generate(P, cfg)
    for x, y in zip(a, b):
        assert [s.token_ids for s in x.samples] == [s.token_ids for s in y.samples]  # same seed, same device
        assert x.states.shape == (5, 64) and np.isfinite(x.states).all()


def test_greedy_with_prefix_cache_matches_the_cpu(pair):
    cpu, gpu = pair
    pre = "The quick brown fox jumps over the lazy dog. " * 4
    cfg = GenerationConfig(n=3, max_new_tokens=8, seed=1)
    for a, b in zip(cpu.generate([pre + p for p in P], cfg, prefix=pre), gpu.generate([pre + p for p in P], cfg, prefix=pre)):
        assert a.greedy.token_ids == b.greedy.token_ids


def test_the_graphed_step_decodes_what_the_eager_step_decodes(pair):
    """The decode step replayed from a CUDA graph (the default on CUDA) against the same step dispatched
    eagerly: rows that end early keep their slots in the graph; tokens, log-probs and states agree."""
    _, gpu = pair
    assert gpu.info()["cuda_graphs"]
    cfg = GenerationConfig(n=5, max_new_tokens=24, seed=4, stop=(" the", "."), with_states=True, greedy_state=True)
    graphed = gpu.generate(P, cfg)
    gpu.cuda_graphs = False
    try:
        eager = gpu.generate(P, cfg)
    finally:
        gpu.cuda_graphs = True
    for a, b in zip(graphed, eager):
        assert a.greedy.token_ids == b.greedy.token_ids
        assert np.allclose(a.greedy.logprobs, b.greedy.logprobs, atol=1e-4)
        assert [s.token_ids for s in a.samples] == [s.token_ids for s in b.samples]
        assert np.allclose(a.states, b.states, atol=1e-4) and np.allclose(a.greedy.state, b.greedy.state, atol=1e-4)


def test_bf16_is_the_native_float_on_the_gpu_and_its_states_are_finite(tiny_lm):
    import copy

    gpu = HFLanguageModel(_modules=(copy.deepcopy(tiny_lm.model), tiny_lm.tokenizer), device="cuda", threads=1)
    assert gpu.info()["dtype"] in ("bfloat16", "float16")  # what speedups.default_dtype picks for CUDA
    out = gpu.generate(P, GenerationConfig(n=4, max_new_tokens=8, seed=2))
    for x in out:
        assert x.states.shape == (4, 64) and np.isfinite(x.states).all()
        assert np.isfinite(x.greedy.logprobs).all()


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    pytest.importorskip("tantivy")
    from helpers import HOTPOT
    from seakr.search.corpora import read_corpus
    from seakr.search.tantivy_engine import TantivyEngine

    return TantivyEngine.build(read_corpus(HOTPOT), tmp_path_factory.mktemp("idx") / "hp")


@pytest.fixture(scope="module")
def question():
    import json

    from helpers import HOTPOT

    return json.load(open(HOTPOT))[0]["question"]


def _methods():
    from seakr.methods import METHODS

    return sorted(METHODS)


@pytest.fixture(scope="module")
def long_pair(tiny_lm):
    """The tiny model with room for a method's prompts (demonstrations + passages run past 512 tokens of
    its byte-level vocabulary; rotary positions need no table, so only the declared limit changes)."""
    import copy

    def build(device):
        model = copy.deepcopy(tiny_lm.model)
        model.config.max_position_embeddings = 8192
        return HFLanguageModel(_modules=(model, tiny_lm.tokenizer), dtype="float32", device=device, threads=1)

    return build("cpu"), build("cuda")


@pytest.mark.parametrize("name", _methods())
def test_every_method_answers_end_to_end_on_the_gpu_and_repeats_itself(long_pair, engine, question, name):
    """The whole method (retrieval, re-rank, states, U, final choice) on the device, not only generate():
    a valid JSON-safe trace, finite U for every scored candidate, and the same answer twice (seeded)."""
    import json
    import math

    from seakr.methods import build_method

    _, gpu = long_pair
    fast = dict(k=4, max_new_tokens=16, max_steps=2, max_passages=2)
    if name == "seakr":  # the paper's path: retrieve at every step, re-rank by U, final choice by U
        fast.update(delta=-math.inf, gate="step", rerank="self-aware", reasoning="self-aware")
    a, b = (build_method(name, gpu, engine, **fast).answer(question) for _ in range(2))
    t = a.trace
    assert t["totals"]["model_calls"] == sum(e["type"] == "model_call" for e in t["events"]) > 0
    json.dumps(a.to_dict(), allow_nan=False)
    assert a.answer == b.answer and t["totals"]["retrievals"] == b.trace["totals"]["retrievals"]
    if name == "seakr":
        assert t["totals"]["retrievals"] >= 1
        us = [c["u"] for s in t["steps"] for c in s["candidates"]]
        us += [c["u"] for c in t["final"]["candidates"].values()]
        assert us and all(u is not None and math.isfinite(u) for u in us)


def test_a_greedy_method_gives_the_cpu_answer(long_pair, engine, question):
    from seakr.methods import build_method

    cpu, gpu = long_pair
    a, b = (build_method("cot", lm, engine, max_new_tokens=12).answer(question) for lm in (cpu, gpu))
    assert a.answer == b.answer


def test_drafted_greedy_tokens_match_the_cpu(pair, monkeypatch):
    """Prompt-lookup decoding on the device (the cache path, several tokens a forward) writes the CPU's tokens."""
    cpu, gpu = pair
    cfg = GenerationConfig(n=0, max_new_tokens=24)
    prompts = [p + " " + p for p in P]  # a repeated prompt, so guesses are drawn and some kept
    monkeypatch.setattr(gpu, "draft_tokens", 8)
    for p in prompts:
        a, b = cpu.generate([p], cfg)[0].greedy, gpu.generate([p], cfg)[0].greedy
        assert a.token_ids == b.token_ids
        assert np.allclose(a.logprobs, b.logprobs, atol=1e-3)
    assert gpu.stats.get("drafted_tokens", 0) > 0


@pytest.mark.skipif(not torch.cuda.is_available() or not torch.cuda.is_bf16_supported(), reason="no bf16 CUDA device")
def test_the_float32_head_on_the_device(tiny_lm):
    """The float32 head in a bf16 model on the device (the fast step, replayed from a CUDA graph): every greedy token
    and its log-prob are the float32 product's of the hidden state."""
    from helpers import float32_logprobs, tiny_qwen

    tok = tiny_lm.tokenizer
    gpu = HFLanguageModel(_modules=(tiny_qwen(tok, tie=True).to(torch.bfloat16), tok), dtype="bfloat16",
                          device="cuda", threads=1, exact_logits=True)
    gpu.model.lm_head.top = len(tok) + 10  # every logit recomputed
    g = gpu.generate([P[1]], GenerationConfig(n=0, max_new_tokens=8, ignore_eos=True, with_states=False))[0].greedy
    ids = gpu.encode(P[1])
    for t, lp in zip(g.token_ids, g.logprobs):
        ref = float32_logprobs(gpu, ids)
        assert t == int(ref.argmax()) and abs(lp - float(ref[t])) < 1e-3
        ids.append(t)
