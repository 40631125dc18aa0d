"""A prompt is prefilled in chunks, and a cancelled request stops between two of them: the chunks give the logits
and KV of one pass, and no chunk runs after the cancel event is set."""

import threading

import pytest
import torch

from seakr.models import prefill as P
from seakr.models.base import Cancelled, GenerationConfig, cancellable

PREFIX = "The quick brown fox jumps over the lazy dog. " * 4
PROMPT = PREFIX + "Paris is the capital of France. The Seine flows through Paris. " * 4 + "Question: Who? Answer:"


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(P, "CHUNK", 7)  # a prompt of dozens of tokens spans several chunks


@pytest.mark.parametrize("prefix", [None, PREFIX], ids=["whole", "after-a-cached-prefix"])
def test_chunks_give_the_logits_and_kv_of_one_pass(tiny_lm, small_chunks, prefix):
    ids = tiny_lm.encode(PROMPT)
    with torch.inference_mode():
        ref = tiny_lm.model(torch.tensor([ids]), use_cache=True)
        tiny_lm.prefill.prefixes = P.PrefixCache(4)  # the prefix, too, prefilled in chunks here
        pf = tiny_lm.prefill(PROMPT, prefix)
    assert pf.tokens == len(ids) > 3 * P.CHUNK
    assert torch.allclose(pf.logits, ref.logits[0, -1], atol=1e-4)
    for (ks, vs), layer in zip(pf.kv, ref.past_key_values.layers):
        assert torch.allclose(torch.cat(ks, 2), layer.keys, atol=1e-4)
        assert torch.allclose(torch.cat(vs, 2), layer.values, atol=1e-4)


@pytest.mark.parametrize("prefix", [None, PREFIX], ids=["whole", "after-a-cached-prefix"])
def test_a_cancel_during_a_prefill_stops_it_within_one_chunk(tiny_lm, small_chunks, prefix):
    tiny_lm.prefill.prefixes = P.PrefixCache(4)
    if prefix:
        tiny_lm.prefill.prefix(prefix)  # cached: the suffix alone is prefilled below
    cancel, calls = threading.Event(), []
    forward = tiny_lm.model.forward

    def counting(*a, **kw):  # the request's client hangs up while the first chunk runs
        calls.append(kw["input_ids"].shape[1])
        cancel.set()
        return forward(*a, **kw)

    tiny_lm.model.forward = counting
    try:
        with cancellable(cancel), pytest.raises(Cancelled):
            tiny_lm.generate([PROMPT], GenerationConfig(n=0, max_new_tokens=4), prefix=prefix)
    finally:
        del tiny_lm.model.forward
    assert calls == [P.CHUNK]  # one chunk ran; none after the cancel
