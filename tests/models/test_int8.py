"""int8 linears (models/kernels.py) against their fp32 reference, and ``precision`` plumbing."""

import copy

import numpy as np
import pytest
import torch
from helpers import tiny_qwen

from seakr.models import GenerationConfig
from seakr.models.hf import HFLanguageModel, choose_precision
from seakr.models.options import LoadOptions
from seakr.models import kernels
from seakr.models.kernels import int8_available, quantize_int8, quantize_linears_int8

needs_int8 = pytest.mark.skipif(not int8_available(), reason="torch without fbgemm/x86 quantised kernels")


def test_quantize_int8_error_within_half_a_step_per_channel():
    torch.manual_seed(0)
    w = torch.randn(300, 96) * torch.rand(300, 1) * 3
    q, s = quantize_int8(w)
    assert q.dtype == torch.int8 and s.shape == (300,)
    err = (q.float() * s[:, None] - w).abs()
    assert bool((err <= s[:, None] / 2 + 1e-6).all())
    assert int(q.abs().max()) == 127  # every row's largest entry maps to the end of the range


@needs_int8
def test_int8_linear_close_to_fp32_reference_with_and_without_bias():
    # tolerance: int8 weights (step = max|w_row|/127) x uint8 activations (step = range(x)/255) give a
    # relative error of about 1 % of the output's scale on random data; we allow 3 %
    torch.manual_seed(0)
    for bias in (False, True):
        lin = torch.nn.Linear(256, 300, bias=bias)
        lin_ref = copy.deepcopy(lin)
        x = torch.randn(21, 256)
        with torch.inference_mode():
            ref = lin(x)
            assert quantize_linears_int8(lin) == 1
            out = lin(x)
            big = torch.randn(kernels.INT8_MAX_ROWS + 1, 256)
            exact = big @ lin_ref.weight.T + (lin_ref.bias if bias else 0)
            torch.testing.assert_close(lin(big), exact)  # a prefill-sized call runs the float kernel
        assert lin.weight.numel() == 0  # the plain float weight is freed
        rel = (out - ref).norm() / ref.norm()
        assert out.shape == ref.shape and float(rel) < 0.03, float(rel)


@needs_int8
def test_int8_model_decodes_close_to_fp32_and_keeps_a_tied_head(tiny_lm):
    tok = tiny_lm.tokenizer
    ref = HFLanguageModel(_modules=(tiny_qwen(tok), tok), precision="float32", threads=1)
    q8 = HFLanguageModel(_modules=(tiny_qwen(tok), tok), precision="int8", threads=1)
    assert q8.info()["precision"] == "int8" and q8.speedups.int8_linears == 3 * 7 + 1  # 7 per layer + lm_head
    prompt = "Question: Who wrote Hamlet? Answer:"
    with torch.inference_mode():
        a, b = ref.prefill(prompt, None).logits, q8.prefill(prompt, None).logits
    assert float(torch.nn.functional.cosine_similarity(a, b, dim=0)) > 0.99
    cfg = GenerationConfig(n=4, max_new_tokens=8, seed=3, ignore_eos=True)
    g = q8.generate([prompt], cfg)[0]
    assert len(g.samples) == 4 and all(s.state is not None and np.isfinite(s.state).all() for s in g.samples)
    tied = HFLanguageModel(_modules=(tiny_qwen(tok, tie=True), tok), precision="int8", threads=1)
    assert tied.speedups.int8_linears == 3 * 7  # the head shares the embedding table: left in float
    assert tied.model.get_input_embeddings().weight.numel() > 0


@pytest.mark.parametrize("vnni, seven_bits", [(True, False), (False, True), (None, True)])
def test_int8_activations_take_7_bits_where_the_cpu_lacks_vnni(monkeypatch, tiny_lm, vnni, seven_bits):
    """Without AVX512-VNNI fbgemm adds each pair of uint8 x int8 products into an int16 with saturation:
    full-range activations turned SmolLM2's greedy text into word salad on an AVX2 CPU (2 % of its
    teacher-forced tokens equal fp32's). A torch that cannot say gets 7 bits, which never saturate."""
    if vnni is None:
        monkeypatch.delattr(torch.cpu, "_is_vnni_supported", raising=False)
    else:
        monkeypatch.setattr(torch.cpu, "_is_vnni_supported", lambda: vnni, raising=False)
    assert kernels.int8_reduce_range() is seven_bits
    if not int8_available():
        return
    asked = []
    if vnni is not None:  # the CPU is asked once a model, at load, and every layer keeps the answer
        monkeypatch.setattr(torch.cpu, "_is_vnni_supported", lambda: asked.append(1) or vnni)
    model = tiny_qwen(tiny_lm.tokenizer)
    n = quantize_linears_int8(model)
    packed = {id(getattr(m, kernels._ATTR)): getattr(m, kernels._ATTR).packed
              for m in model.modules() if hasattr(m, kernels._ATTR)}
    assert n > 1 and len(asked) == (vnni is not None)
    assert len(packed) > 1 and all(q8[2] is seven_bits for q8, _ in packed.values())
    torch.manual_seed(0)
    lin = torch.nn.Linear(256, 300)
    packed = kernels._pack_int8(lin.weight.detach(), lin.bias.detach(), seven_bits)
    if seven_bits:  # 7 bits never saturate, on any CPU (full range is checked above, on this CPU's choice)
        x = torch.randn(21, 256)
        with torch.inference_mode():
            ref, out = lin(x), kernels._int8_linear(x, packed)
        assert float((out - ref).norm() / ref.norm()) < 0.03


@needs_int8
@pytest.mark.slow
def test_int8_packaged_model_follows_its_float_tokens(smol):
    """Teacher-forced on fp32's greedy tokens, int8 SmolLM2 picks the same next token most of the time (0.85
    on an AVX2 CPU with 7-bit activations; 0.02 with saturating full-range ones)."""
    from transformers import DynamicCache

    from seakr.models import load_model
    from seakr.models.prefill import cache_kwarg

    q8 = load_model("smollm2-135m", precision="int8")
    tok = smol.tokenizer
    agree = total = 0
    for prompt in ("Question: Who wrote the novel Moby-Dick?\nAnswer:", "The history of the Roman Empire began when",
                   "Paris is the capital and largest city of"):
        ids = tok(prompt, return_tensors="pt").input_ids
        assert ids.shape[1] <= kernels.INT8_MAX_ROWS  # the prompt too runs the int8 kernel
        with torch.inference_mode():
            ref = smol.model.generate(ids, max_new_tokens=16, do_sample=False)[0, ids.shape[1]:].tolist()
            cache = DynamicCache()  # filled in place
            logits = q8.model(ids, use_cache=True, **cache_kwarg(q8.model, cache)).logits
            for t in ref:  # one row a step, as decode runs, each fed fp32's token
                agree += int(logits[0, -1].argmax()) == t
                logits = q8.model(torch.tensor([[t]]), use_cache=True, **cache_kwarg(q8.model, cache)).logits
        total += len(ref)
    assert agree / total >= 0.7, f"{agree}/{total}"


def test_precision_names_aliases_and_errors():
    cpu = torch.device("cpu")
    assert choose_precision("bf16", None, cpu) == "bfloat16" and choose_precision("fp32", None, cpu) == "float32"
    assert choose_precision("int8", None, cpu) == "int8"
    assert choose_precision("auto", None, cpu) in ("bfloat16", "float32")  # an unknown model: the native float
    with pytest.raises(ValueError, match=r"option precision: 'int3': expected auto, .*\(did you mean 'int8'\?\)"):
        LoadOptions(precision="int3")  # the load schema: every door to a model passes it


def test_int8_off_cpu_is_refused_in_one_line(tiny_lm):
    from seakr.models import speedups

    model = tiny_qwen(tiny_lm.tokenizer).to(torch.device("meta"))
    with pytest.raises(ValueError, match="precision int8 runs on CPU"):
        speedups.apply(model, state_layer=0, state_source="mlp", shared_attention=False, int8=True)


@needs_int8
@pytest.mark.slow
def test_precision_reaches_the_model_from_the_command_line():
    import json

    from helpers import run_cli

    run = lambda *a: run_cli(*a, text=False)  # noqa: E731
    r = run("ask", "--model", "smollm2-135m", "--precision", "int8", "--method", "cot", "--json", "Who wrote Hamlet?")
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    assert '"precision": "int8"' in r.stderr.decode() + r.stdout.decode()
    bad = run("ask", "--precision", "int3", "Who wrote Hamlet?")
    last = bad.stderr.decode().strip().splitlines()[-1]
    assert bad.returncode == 2 and "--precision" in last and "int3" in last
    json.loads(r.stdout.decode().strip().splitlines()[-1])


@needs_int8
def test_int8_on_a_model_without_linears_is_refused_not_run_in_bf16(tiny_lm):
    """GPT-2's blocks are Conv1D and its head is tied: nothing was quantised, the run said precision int8 and
    computed in bf16."""
    import transformers

    tok = tiny_lm.tokenizer
    torch.manual_seed(0)
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=2, n_head=2))
    with pytest.raises(ValueError, match=r"precision int8: GPT2LMHeadModel has no torch.nn.Linear layers"):
        HFLanguageModel(_modules=(gpt2, tok), precision="int8", threads=1)
