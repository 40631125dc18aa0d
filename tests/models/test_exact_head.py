"""The float32 head of a 16-bit model: its likeliest logits are the float32 product of the hidden state, a tie the
16-bit rounding makes goes to the likelier token, and every forward (prefill, fast step, drafted feed) reads it."""

import torch

from seakr.models import GenerationConfig
from seakr.models.head import TOP, ExactHead, install


def _linear(rows: list[list[float]], bias: list[float] | None = None) -> torch.nn.Linear:
    lin = torch.nn.Linear(len(rows[0]), len(rows), bias=bias is not None, dtype=torch.bfloat16)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor(rows))
        if bias is not None:
            lin.bias.copy_(torch.tensor(bias))
    return lin


def test_a_tie_of_the_rounding_goes_to_the_likelier_token():
    # 32.0 and 32.125 are both 32.0 in bf16 (0.25 apart there); the second token is the likelier
    lin = _linear([[16.0, 16.0], [16.0, 16.125], [1.0, 1.0]])
    h = torch.ones(1, 2, dtype=torch.bfloat16)
    exact = ExactHead(lin, lin.weight.detach())(h)
    assert exact.dtype == torch.float32
    assert exact[0].tolist() == [32.0, 32.125, 2.0]
    assert exact.argmax(-1).item() == 1
    assert ExactHead(lin, lin.weight.detach(), top=0)(h).tolist() == lin(h).float().tolist()  # off: the 16-bit ones


def test_the_top_logits_are_the_float32_product_and_the_rest_the_16_bit_ones():
    torch.manual_seed(0)
    rows = (torch.randn(500, 32) * 3).to(torch.bfloat16)
    lin = torch.nn.Linear(32, 500, bias=True, dtype=torch.bfloat16)
    with torch.no_grad():
        lin.weight.copy_(rows)
    h = torch.randn(2, 3, 32).to(torch.bfloat16)  # (batch, positions, d): a prefill's or a drafted feed's shape
    out = ExactHead(lin, rows)(h)
    ref = h.float() @ rows.float().T + lin.bias.float()
    top = out.topk(TOP, -1).indices
    assert torch.allclose(out.gather(-1, top), ref.gather(-1, top), atol=1e-4)
    rest = torch.ones_like(out, dtype=torch.bool).scatter(-1, top, False)
    assert torch.equal(out[rest], lin(h).float()[rest])


def test_install_reads_rows_a_conversion_copied_and_skips_float32(tiny_lm):
    from helpers import tiny_qwen

    model = tiny_qwen(tiny_lm.tokenizer)
    assert install(model) is None  # float32: its logits are float32 already
    model = model.to(torch.bfloat16)
    with torch.no_grad():
        model.lm_head.weight.copy_(model.get_input_embeddings().weight)  # a copied tie: the table is read
    head = install(model)
    assert isinstance(model.lm_head, ExactHead) and head.rows.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    assert model.get_output_embeddings() is head and head.weight is head.head.weight
    untied = tiny_qwen(tiny_lm.tokenizer).to(torch.bfloat16)
    head = install(untied)  # its own values: a copy of them, which packing cannot free
    assert head.rows.data_ptr() != untied.lm_head.head.weight.data_ptr()
    assert torch.equal(head.rows, untied.lm_head.head.weight)


def test_every_forward_reads_the_float32_head(tiny_lm):
    from helpers import float32_logprobs, tiny_qwen
    from seakr.models.hf import HFLanguageModel

    tok = tiny_lm.tokenizer
    lm = HFLanguageModel(_modules=(tiny_qwen(tok, tie=True).to(torch.bfloat16), tok), dtype="bfloat16", threads=1,
                         exact_logits=True)
    assert lm.info()["exact_logits"] and isinstance(lm.model.lm_head, ExactHead)
    assert lm.speedups.fast_step is None or lm.speedups.fast_step.head is lm.model.lm_head
    lm.model.lm_head.top = len(tok) + 10  # every logit recomputed: each log-prob is the float32 product's
    prompt = "Paris is the capital of France. The Seine flows through"
    cfg = GenerationConfig(n=0, greedy=True, max_new_tokens=6, with_states=False, ignore_eos=True)
    for k in (0, 4):  # one token a forward (the fast step), then drafted feeds; the first token: the prefill's
        lm.draft_tokens = k
        g = lm.generate([prompt], cfg)[0].greedy
        ids = lm.encode(prompt)
        for t, lp in zip(g.token_ids, g.logprobs):
            ref = float32_logprobs(lm, ids)
            assert t == int(ref.argmax()) and abs(lp - float(ref[t])) < 1e-3, (k, ids)
            ids.append(t)
    plain = HFLanguageModel(_modules=(tiny_qwen(tok).to(torch.bfloat16), tok), dtype="bfloat16", threads=1)
    assert not plain.info()["exact_logits"] and not isinstance(plain.model.lm_head, ExactHead)
