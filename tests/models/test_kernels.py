"""Packed bf16 linears (models/kernels.py): same numbers as F.linear, same tokens through the loop."""

import numpy as np
import pytest
import torch
from helpers import tiny_qwen

from seakr.models import GenerationConfig
from seakr.models.hf import HFLanguageModel
from seakr.models.kernels import pack_linears, packing_available, unpack_linears

pytestmark = pytest.mark.skipif(not packing_available(torch.bfloat16), reason="CPU without native bf16 oneDNN")


def test_packed_linear_equals_f_linear_with_and_without_bias():
    torch.manual_seed(0)
    for bias in (False, True):
        lin = torch.nn.Linear(96, 200, bias=bias).to(torch.bfloat16)
        x = torch.randn(7, 3, 96, dtype=torch.bfloat16)
        with torch.inference_mode():
            ref = lin(x)
            assert pack_linears(lin) == 1
            out = lin(x)
            assert unpack_linears(lin) == 1
            back = lin(x)
        assert out.shape == ref.shape
        torch.testing.assert_close(out.float(), ref.float(), rtol=1e-2, atol=1e-2)
        assert torch.equal(back, ref)  # unpacking restores the stock forward exactly


def test_packed_model_decodes_like_the_stock_one(tiny_lm):
    tok = tiny_lm.tokenizer
    packed = HFLanguageModel(_modules=(tiny_qwen(tok), tok), dtype="bfloat16", threads=1)
    stock = HFLanguageModel(_modules=(tiny_qwen(tok), tok), dtype="bfloat16", threads=1, packed_linear=False)
    assert packed.speedups.packed_linear and not stock.speedups.packed_linear and packed.info()["packed_linear"]
    prompts = ["Question: Who wrote Hamlet? Answer:", "Paris is the capital of"]
    cfg = GenerationConfig(n=4, max_new_tokens=10, seed=3, ignore_eos=True)
    a, b = packed.generate(prompts, cfg), stock.generate(prompts, cfg)
    for ga, gb in zip(a, b):
        assert ga.greedy.token_ids == gb.greedy.token_ids
        assert np.allclose(ga.greedy.logprobs, gb.greedy.logprobs, atol=2e-2)
        for sa, sb in zip(ga.samples, gb.samples):
            assert sa.token_ids == sb.token_ids  # same seed, same logits -> same draws
            assert np.allclose(sa.state, sb.state, atol=2e-2 * (1 + np.abs(sb.state).max()))


def test_packed_needs_bf16(tiny_lm):
    tok = tiny_lm.tokenizer
    with pytest.raises(ValueError, match="packed_linear=True needs bfloat16"):
        HFLanguageModel(_modules=(tiny_qwen(tok), tok), dtype="float32", threads=1, packed_linear=True)
    assert not HFLanguageModel(_modules=(tiny_qwen(tok), tok), dtype="float32", threads=1).speedups.packed_linear


def test_sibling_projections_fuse_and_fall_back(tiny_lm):
    """q/k/v and gate/up share one packed matmul; a sibling called on another input computes its own."""
    m = tiny_qwen(tiny_lm.tokenizer).to(torch.bfloat16)
    attn, mlp = m.model.layers[0].self_attn, m.model.layers[0].mlp
    x, y = torch.randn(2, 5, 64, dtype=torch.bfloat16), torch.randn(2, 5, 64, dtype=torch.bfloat16)
    with torch.inference_mode():
        ref = [attn.q_proj(x), attn.k_proj(x), attn.v_proj(x), attn.k_proj(y), mlp.gate_proj(x), mlp.up_proj(x)]
        n = pack_linears(m)
        assert n == sum(isinstance(mod, torch.nn.Linear) for mod in m.modules())
        assert attn.q_proj._seakr_packed is attn.v_proj._seakr_packed  # one fused q/k/v matrix
        assert mlp.gate_proj._seakr_packed is mlp.up_proj._seakr_packed
        out = [attn.q_proj(x), attn.k_proj(x), attn.v_proj(x), attn.k_proj(y), mlp.gate_proj(x), mlp.up_proj(x)]
        assert attn.q_proj._seakr_packed.x is None  # the last sibling released the shared input
    for a, b in zip(out, ref):
        torch.testing.assert_close(a.float(), b.float(), rtol=1e-2, atol=1e-2)


def test_the_loaded_model_keeps_only_the_packed_weights(tiny_lm):
    tok = tiny_lm.tokenizer
    lm = HFLanguageModel(_modules=(tiny_qwen(tok), tok), dtype="bfloat16", threads=1)
    lins = [m for m in lm.model.modules() if isinstance(m, torch.nn.Linear)]
    head = lm.model.get_output_embeddings()
    tied = head.weight.data_ptr() == lm.model.get_input_embeddings().weight.data_ptr()
    assert all(m.weight.numel() == 0 for m in lins if not (tied and m is head))  # half the memory
    with pytest.raises(ValueError, match="packed_linear=False"):
        unpack_linears(lm.model)


def test_threads_sharing_one_model_get_what_one_thread_gets(tiny_lm):
    """A packed projection holds a call's fused output until its siblings read it, and the prefix cache is one
    dict: two threads calling one model at once (``serve --workers 2``, a web app's request threads) failed with
    an IndexError, or read the other call's projections and answered otherwise. Calls take turns on a model."""
    import threading

    tok = tiny_lm.tokenizer
    lm = HFLanguageModel(_modules=(tiny_qwen(tok), tok), dtype="bfloat16", threads=1)
    prompts = [["Question: Who wrote Hamlet? Answer:"], ["Paris is the capital of"], ["The quick brown fox"],
               ["Numbers 1 2 3 4"]]
    cfg = GenerationConfig(n=3, max_new_tokens=12, seed=5, ignore_eos=True)
    alone = [lm.generate(p, cfg)[0].greedy.token_ids for p in prompts]
    for _ in range(3):
        got, errors = {}, []

        def call(i):
            try:
                got[i] = lm.generate(prompts[i], cfg)[0].greedy.token_ids
            except Exception as e:  # noqa: BLE001  (what a thread raised is the finding)
                errors.append(repr(e))

        threads = [threading.Thread(target=call, args=(i,)) for i in range(len(prompts))]
        [t.start() for t in threads]
        [t.join() for t in threads]
        assert errors == [] and [got[i] for i in range(len(prompts))] == alone
