"""The graphed decode backend's static-shape step (models/graphs.py) against the shared-prefix backend.

A CPU cannot capture a CUDA graph, but everything the graph replays runs here eagerly: the masked
attention over whole token buffers, the write position as a device tensor, finished rows kept in
their slots. The capture itself is checked on a GPU (tests/models/test_gpu.py)."""

import numpy as np
import pytest
import torch

from seakr.models import GenerationConfig
from seakr.models import graphs, hf
from seakr.models.attention import SharedPrefixState, StaticShapeState

PROMPTS = ["Question: Who wrote Hamlet? Answer:", "Paris is the capital of", "The quick brown fox"]


@pytest.fixture
def static_path(tiny_lm, monkeypatch):
    """tiny_lm decoding through the graphed backend, eagerly (graph=False), for one test."""
    built = []

    class Checked(graphs.GraphedBackend):
        def step(self, feed, pos, capture):
            # no other thread may touch the device while a step can be captured
            assert graphs.DEVICE_LOCK._is_owned()
            return super().step(feed, pos, capture)

    def eager(fast):
        built.append(Checked(fast, graph=False))
        return built[-1]

    monkeypatch.setattr(tiny_lm, "cuda_graphs", True)
    monkeypatch.setattr(hf, "GraphedBackend", eager)
    yield tiny_lm
    assert built and all(b.state is not None for b in built)  # the static-shape step did decode


def _generate(lm, cfg, prefix=None):
    prompts = [prefix + p for p in PROMPTS] if prefix else PROMPTS
    return lm.generate(prompts, cfg, prefix=prefix)


@pytest.mark.parametrize("cfg", [
    GenerationConfig(n=0, max_new_tokens=20),  # greedy alone: one slot per prompt
    GenerationConfig(n=5, max_new_tokens=16, seed=4, stop=(" the", "."), with_states=True),  # rows end at different steps
    GenerationConfig(n=3, max_new_tokens=14, seed=8, greedy_state=True, stop=(" ",)),
])
def test_the_static_shape_step_decodes_what_the_shared_backend_decodes(tiny_lm, static_path, cfg, monkeypatch):
    with monkeypatch.context() as m:  # the reference: the shared-prefix backend, rows compacted as they end
        m.setattr(tiny_lm, "cuda_graphs", False)
        ref = _generate(tiny_lm, cfg)
    got = _generate(static_path, cfg)
    ended_early = 0
    for a, b in zip(ref, got):
        assert a.greedy.token_ids == b.greedy.token_ids
        assert np.allclose(a.greedy.logprobs, b.greedy.logprobs, atol=1e-5)
        assert [s.token_ids for s in a.samples] == [s.token_ids for s in b.samples]
        ended_early += sum(len(s.token_ids) < cfg.max_new_tokens for s in a.samples)
        if a.states is not None:
            assert np.allclose(a.states, b.states, atol=1e-5)
        if cfg.greedy_state:
            assert np.allclose(a.greedy.state, b.greedy.state, atol=1e-5)
    if cfg.n:
        assert ended_early > 0  # the case that matters: rows that finish keep their slots, unread


def test_the_static_shape_step_with_a_cached_prefix(tiny_lm, static_path, monkeypatch):
    pre = "The quick brown fox jumps over the lazy dog. " * 3
    cfg = GenerationConfig(n=4, max_new_tokens=12, seed=5, with_states=True)
    with monkeypatch.context() as m:
        m.setattr(tiny_lm, "cuda_graphs", False)
        ref = _generate(tiny_lm, cfg, prefix=pre)
    for a, b in zip(ref, _generate(static_path, cfg, prefix=pre)):
        assert a.greedy.token_ids == b.greedy.token_ids
        assert [s.token_ids for s in a.samples] == [s.token_ids for s in b.samples]
        assert np.allclose(a.states, b.states, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_masked_attention_over_the_whole_buffer_equals_attention_over_the_written_part(dtype):
    torch.manual_seed(0)
    kvh, d, H, L, max_new = 2, 8, 4, 7, 5
    prompt_kv = [[(torch.randn(kvh, L, d), torch.randn(kvh, L, d))]]
    row_prompt = [0, 0, 0]
    shared, static = SharedPrefixState(prompt_kv, row_prompt, max_new), StaticShapeState(prompt_kv, row_prompt, max_new)
    for t in range(max_new):
        q, k, v = (torch.randn(3, h, 1, d).to(dtype) for h in (H, kvh, kvh))  # a bf16 model's step feeds bf16
        static.t_index.fill_(t)
        a, b = shared.attend(0, q, k, v, 0.3), static.attend(0, q, k, v, 0.3)
        assert a.dtype == b.dtype == dtype and torch.allclose(a.float(), b.float(), atol=1e-6 if dtype == torch.float32 else 1e-2)
        shared.t += 1
        static.t += 1
