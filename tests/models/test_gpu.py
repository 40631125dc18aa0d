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
