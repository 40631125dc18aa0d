"""A prompt that begins as a recent one did is served from that prompt's KV (the recent-prompt cache): a chain's
next step repeats the last one's demonstrations, passages and question, its final answer's prompt is the last
step's up to "Answer:". What the cache serves must be what one forward over the whole prompt gives, and only the
prompts of one answer serve each other, so an answer never depends on what was asked before it."""

import pytest
import torch
from hypothesis import given, strategies as st

from seakr.models import prefill as P
from seakr.models.base import GenerationConfig, prompt_session

DEMOS = "Question: Who wrote Hamlet? Answer: William Shakespeare wrote Hamlet. So the answer is Shakespeare.\n\n"
P1 = "Paris is the capital of France. The Seine flows through Paris.\n"
P2 = "Berlin is in Germany. The quick brown fox jumps over the lazy dog.\n"
Q = "Question: Which river flows through the capital of France?\nAnswer:"
STEP = Q + " The capital of France is Paris."


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
    (DEMOS + P1 + Q, "all but the last token"),  # the final answer's prompt: the step's up to "Answer:"
    (DEMOS + P1 + STEP, "the whole prompt"),  # the same prompt again
])
def test_a_prompt_begun_as_a_recent_one_is_served_from_it_as_one_forward_would_be(tiny_lm, second, served):
    tiny_lm.prefill.clear()
    demo_tokens = len(tiny_lm.encode(DEMOS))
    with torch.inference_mode(), prompt_session():
        tiny_lm.prefill(DEMOS + P1 + STEP, DEMOS)
        hits = tiny_lm.stats["prompt_hits"]
        pf = tiny_lm.prefill(second, DEMOS)
    assert tiny_lm.stats["prompt_hits"] == hits + 1
    ids, first = tiny_lm.encode(second), tiny_lm.encode(DEMOS + P1 + STEP)
    shared = P.common_length(ids, first)
    assert pf.cached == {"the whole prompt": len(ids), "all but the last token": len(ids) - 1}.get(served, shared)
    assert pf.cached > demo_tokens
    _same_as_one_forward(tiny_lm, pf, second)


def test_a_chain_s_generations_are_the_same_with_the_recent_prompts_served_or_not(tiny_lm):
    prompts = [DEMOS + P1 + Q, DEMOS + P1 + P2 + Q, DEMOS + P1 + P2 + STEP, DEMOS + P1 + P2 + Q]
    cfg = GenerationConfig(n=3, max_new_tokens=6, seed=3, ignore_eos=True, with_states=True)
    runs = {}
    for size in (0, 4):
        tiny_lm.prefill.clear()
        tiny_lm.prefill.recent = P.RecentPrompts(size)
        before = tiny_lm.stats["prefill_tokens"]
        with prompt_session():
            runs[size] = ([tiny_lm.generate([p], cfg, prefix=DEMOS)[0] for p in prompts],
                          tiny_lm.stats["prefill_tokens"] - before)
    tiny_lm.prefill.recent = P.RecentPrompts(4)
    (cold, cold_tokens), (warm, warm_tokens) = runs[0], runs[4]
    assert warm_tokens < cold_tokens / 2  # each prompt after the first prefills what it adds
    assert cold[0].cached_prefix_tokens == warm[0].cached_prefix_tokens  # nothing recent yet
    assert all(a.cached_prefix_tokens < b.cached_prefix_tokens for a, b in zip(cold[1:], warm[1:]))
    assert warm[3].cached_prefix_tokens == warm[3].prompt_tokens  # the second prompt again: served whole
    for a, b in zip(cold, warm):
        assert a.prompt_tokens == b.prompt_tokens
        assert a.greedy.token_ids == b.greedy.token_ids
        assert [s.token_ids for s in a.samples] == [s.token_ids for s in b.samples]
        assert torch.allclose(torch.as_tensor(a.greedy.logprobs), torch.as_tensor(b.greedy.logprobs), atol=1e-4)
        for x, y in zip(a.samples, b.samples):
            assert torch.allclose(torch.as_tensor(x.state), torch.as_tensor(y.state), atol=1e-4)


def test_the_cache_keeps_its_last_prompts_only(tiny_lm):
    tiny_lm.prefill.clear()
    tiny_lm.prefill.recent = P.RecentPrompts(2)
    try:
        with torch.inference_mode(), prompt_session():
            for p in (P1, P2, DEMOS):  # the first falls out
                tiny_lm.prefill(DEMOS + p + Q, DEMOS)
            first = tiny_lm.prefill(DEMOS + P1 + Q, DEMOS)
            last = tiny_lm.prefill(DEMOS + DEMOS + Q, DEMOS)
    finally:
        tiny_lm.prefill.recent = P.RecentPrompts(4)
    assert first.cached < first.tokens - 1 and last.cached == last.tokens


def test_only_the_prompts_of_one_answer_serve_each_other(tiny_lm):
    """Outside an answer nothing is kept; one answer's prompts never serve another's; and the same calls in two
    answers give the same numbers bit for bit, whatever came between them."""
    first, second = DEMOS + P1 + STEP, DEMOS + P1 + P2 + Q
    tiny_lm.prefill.clear()
    with torch.inference_mode():
        tiny_lm.prefill(first, DEMOS)
        hits = tiny_lm.stats["prompt_hits"]
        with prompt_session():
            alone = tiny_lm.prefill(second, DEMOS)  # the first was prefilled outside any answer: not kept
            assert tiny_lm.stats["prompt_hits"] == hits
            tiny_lm.prefill(first, DEMOS)
        runs = []
        for between in ("", DEMOS + P1 + P2 + "Question: Who?\nAnswer:"):  # another answer's prompt in between
            with prompt_session():
                if between:
                    tiny_lm.prefill(between, DEMOS)
            with prompt_session():
                runs.append((tiny_lm.prefill(first, DEMOS), tiny_lm.prefill(second, DEMOS)))
    (a1, a2), (b1, b2) = runs
    assert a1.cached == b1.cached == alone.cached  # a new answer: the earlier answers' prompts do not serve it
    assert a2.cached == b2.cached > alone.cached  # its own first prompt does
    for x, y in ((a1, b1), (a2, b2)):
        assert torch.equal(x.logits, y.logits)
        assert all(torch.equal(torch.cat(k1, 2), torch.cat(k2, 2)) for (k1, _), (k2, _) in zip(x.kv, y.kv))


def test_answers_side_by_side_keep_their_own_prompts_and_drop_them_when_done(tiny_lm):
    """Another worker's answer, interleaved, neither serves this one nor pushes its prompts out; an answer's
    prompts go with it."""
    import gc

    tiny_lm.prefill.clear()
    tiny_lm.prefill.recent = P.RecentPrompts(1)
    try:
        with torch.inference_mode(), prompt_session():
            tiny_lm.prefill(DEMOS + P1 + STEP, DEMOS)
            with prompt_session():  # another answer's call between two of this one's
                other = tiny_lm.prefill(DEMOS + P1 + P2 + Q, DEMOS)
            served = tiny_lm.prefill(DEMOS + P1 + P2 + Q, DEMOS)
        gc.collect()
        assert served.cached > other.cached and not tiny_lm.prefill.recent._sessions
    finally:
        tiny_lm.prefill.recent = P.RecentPrompts(4)


@given(st.lists(st.integers(0, 3), max_size=40), st.lists(st.integers(0, 3), max_size=40))
def test_common_length_is_the_length_of_the_shared_start(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    assert P.common_length(a, b) == n
