"""The decode step outside transformers' modules (models/fastpath.py) against transformers' forward."""

import numpy as np
import pytest
import torch
from transformers import GemmaConfig, GemmaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from seakr.models import GenerationConfig
from seakr.models import fastpath
from seakr.models.hf import HFLanguageModel

PROMPTS = ["Question: Who wrote Hamlet? Answer:", "Paris is the capital of"]


def _qwen(tok, dtype, source="mlp"):
    torch.manual_seed(2)
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=64, intermediate_size=160, num_hidden_layers=4,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    m = Qwen2ForCausalLM(cfg)
    with torch.no_grad():  # non-zero q/k/v biases, so a dropped bias would show
        for mod in m.modules():
            if isinstance(mod, torch.nn.Linear) and mod.bias is not None:
                mod.bias.normal_(0, 0.5)
    return HFLanguageModel(_modules=(m, tok), dtype=dtype, threads=1, state_source=source)


def _both(lm, cfg):
    """The same generate call through the fast step and through transformers' forward."""
    fast = lm.speedups.fast_step
    assert fast is not None
    try:
        a = lm.generate(PROMPTS, cfg)
        lm.speedups.fast_step = None  # the same model through transformers' forward
        b = lm.generate(PROMPTS, cfg)
    finally:
        lm.speedups.fast_step = fast
    return a, b


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("source", ["mlp", "residual"])
def test_fast_step_is_bit_identical_to_transformers_forward(tiny_lm, dtype, source):
    lm = _qwen(tiny_lm.tokenizer, dtype, source)
    assert lm.info()["state_source"] == source
    cfg = GenerationConfig(n=3, max_new_tokens=8, seed=11, stop=(".",))
    a, b = _both(lm, cfg)
    for ga, gb in zip(a, b):
        for sa, sb in zip([ga.greedy] + ga.samples, [gb.greedy] + gb.samples):
            assert sa.token_ids == sb.token_ids and sa.finish_reason == sb.finish_reason
            assert sa.logprobs == sb.logprobs and sa.entropies == sb.entropies
            if sb.state is not None:
                assert np.array_equal(sa.state, sb.state)
        assert ga.states.shape[0] > 0


def test_llama_fixture_takes_the_fast_step(tiny_lm):
    assert tiny_lm.info()["fast_decode"]
    a, b = _both(tiny_lm, GenerationConfig(n=2, max_new_tokens=6, seed=4))
    assert [g.greedy.token_ids for g in a] == [g.greedy.token_ids for g in b]
    assert all(np.array_equal(x, y) for ga, gb in zip(a, b) for x, y in zip(ga.states, gb.states))


def test_unsupported_architecture_keeps_transformers_forward(tiny_lm):
    tok = tiny_lm.tokenizer
    cfg = GemmaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=1, head_dim=16, max_position_embeddings=512,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.eos_token_id)
    assert fastpath.build(GemmaForCausalLM(cfg), 0, "mlp") is None
