"""A prompt that begins as a recent one did is served from that prompt's KV (the recent-prompt cache): a chain's
next step repeats the last one's demonstrations, passages and question, its final answer's prompt is the last
step's up to "Answer:". What the cache serves must be what one forward over the whole prompt gives, and bit for bit
what the prompt gives with nothing cached before it: an answer must not depend on what was asked before."""

import pytest
import torch
from hypothesis import given, strategies as st

from seakr.models import prefill as P
from seakr.models.base import GenerationConfig

DEMOS = "Question: Who wrote Hamlet? Answer: William Shakespeare wrote Hamlet. So the answer is Shakespeare.\n\n"
P1 = "Paris is the capital of France. The Seine flows through Paris.\n"
P2 = "Berlin is in Germany. The quick brown fox jumps over the lazy dog.\n"
Q = "Question: Which river flows through the capital of France?\nAnswer:"
STEP = Q + " The capital of France is Paris."


@pytest.fixture(autouse=True)
def grid(monkeypatch):
    monkeypatch.setattr(P, "GRID", 8)  # the tiny prompts span several grid cells
    return 8


def _whole(lm, prompt: str):
    ids = lm.encode(prompt)
    with torch.inference_mode():
        return ids, lm.model(torch.tensor([ids]), use_cache=True)


def _same_as_one_forward(lm, pf, prompt: str) -> None:
    ids, ref = _whole(lm, prompt)
    assert pf.tokens == len(ids)
    assert torch.allclose(pf.logits, ref.logits[0, -1], atol=1e-5)
    for (ks, vs), layer in zip(pf.kv, ref.past_key_values.layers):
        assert torch.allclose(torch.cat(ks, 2), layer.keys, atol=1e-5)
        assert torch.allclose(torch.cat(vs, 2), layer.values, atol=1e-5)


@pytest.mark.parametrize("second, served", [
    (DEMOS + P1 + P2 + Q, "the first prompt up to its passages' end"),  # the next step: a passage more
    (DEMOS + P1 + Q, "up to the grid before its last token"),  # the final answer's prompt: the step's up to "Answer:"
    (DEMOS + P1 + STEP, "the whole prompt"),  # the same prompt again
])
def test_a_prompt_begun_as_a_recent_one_is_served_from_it_as_one_forward_would_be(tiny_lm, grid, second, served):
    tiny_lm.prefill.clear()
    demo_tokens = len(tiny_lm.encode(DEMOS))
    with torch.inference_mode():
        tiny_lm.prefill(DEMOS + P1 + STEP, DEMOS)
        hits = tiny_lm.stats["prompt_hits"]
        pf = tiny_lm.prefill(second, DEMOS)
    assert tiny_lm.stats["prompt_hits"] == hits + 1
    ids, first = tiny_lm.encode(second), tiny_lm.encode(DEMOS + P1 + STEP)
    shared = min(P.common_length(ids, first), len(ids) - 1) // grid * grid
    assert pf.cached == (len(ids) if served == "the whole prompt" else shared) > demo_tokens
    _same_as_one_forward(tiny_lm, pf, second)
    tiny_lm.prefill.clear()
    with torch.inference_mode():
        fresh = tiny_lm.prefill(second, DEMOS)  # nothing asked before it
    assert fresh.cached < pf.cached and torch.equal(fresh.logits, pf.logits)
    for (ks, vs), (fk, fv) in zip(pf.kv, fresh.kv):
        assert torch.equal(torch.cat(ks, 2), torch.cat(fk, 2)) and torch.equal(torch.cat(vs, 2), torch.cat(fv, 2))


def test_a_chain_s_generations_are_the_same_with_the_recent_prompts_served_or_not(tiny_lm):
    prompts = [DEMOS + P1 + Q, DEMOS + P1 + P2 + Q, DEMOS + P1 + P2 + STEP, DEMOS + P1 + P2 + Q]
    cfg = GenerationConfig(n=3, max_new_tokens=6, seed=3, ignore_eos=True, with_states=True)
    runs = {}
    for size in (0, 4):
        tiny_lm.prefill.clear()
        tiny_lm.prefill.recent = P.RecentPrompts(size)
        before = tiny_lm.stats["prefill_tokens"]
        runs[size] = ([tiny_lm.generate([p], cfg, prefix=DEMOS)[0] for p in prompts],
                      tiny_lm.stats["prefill_tokens"] - before)
    tiny_lm.prefill.recent = P.RecentPrompts(4)
    (cold, cold_tokens), (warm, warm_tokens) = runs[0], runs[4]
    assert warm_tokens < cold_tokens / 2  # each prompt after the first prefills what it adds
    assert cold[0].cached_prefix_tokens == warm[0].cached_prefix_tokens  # nothing recent yet
    assert all(a.cached_prefix_tokens < b.cached_prefix_tokens for a, b in zip(cold[1:], warm[1:]))
    assert warm[3].cached_prefix_tokens == warm[3].prompt_tokens  # the second prompt again: served whole
    for a, b in zip(cold, warm):  # the same, bit for bit
        assert a.prompt_tokens == b.prompt_tokens
        assert a.greedy.token_ids == b.greedy.token_ids and list(a.greedy.logprobs) == list(b.greedy.logprobs)
        for x, y in zip(a.samples, b.samples):
            assert x.token_ids == y.token_ids and torch.equal(torch.as_tensor(x.state), torch.as_tensor(y.state))


def test_the_cache_keeps_its_last_prompts_only(tiny_lm):
    tiny_lm.prefill.clear()
    tiny_lm.prefill.recent = P.RecentPrompts(2)
    try:
        with torch.inference_mode():
            for p in (P1, P2, DEMOS):  # the first falls out
                tiny_lm.prefill(DEMOS + p + Q, DEMOS)
            first = tiny_lm.prefill(DEMOS + P1 + Q, DEMOS)
            last = tiny_lm.prefill(DEMOS + DEMOS + Q, DEMOS)
    finally:
        tiny_lm.prefill.recent = P.RecentPrompts(4)
    assert first.cached < first.tokens - 1 and last.cached == last.tokens


@given(st.lists(st.integers(0, 3), max_size=40), st.lists(st.integers(0, 3), max_size=40))
def test_common_length_is_the_length_of_the_shared_start(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    assert P.common_length(a, b) == n
