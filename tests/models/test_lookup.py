"""Prompt-lookup decoding: the guesses, which calls take it, and the same text as one token a forward."""

import numpy as np
import pytest

from seakr.models import GenerationConfig
from seakr.models.lookup import draft, drafts
from seakr.models.prefill import Prefilled

PROMPTS = [
    "Paris is the capital of France. The Seine flows through Paris. Paris is the capital of",
    "Question: Who wrote Hamlet? Answer: William Shakespeare wrote Hamlet. Question: Who wrote Hamlet? Answer:",
    "Numbers 1 2 3 4 5 6 7 8 9 10. Numbers 1 2 3",
]


def test_draft_copies_what_followed_the_latest_earlier_match():
    assert draft([1, 2, 3, 9, 8, 7, 1, 2, 3], 2) == [9, 8]
    assert draft([1, 2, 3, 4, 0, 2, 3, 5, 6, 2, 3], 3) == [5, 6, 2]  # the latest of two matches
    assert draft([5, 6, 7, 8, 6], 3) == [7, 8, 6]  # no 3- or 2-token match: the last token alone
    assert draft([1, 2, 3, 4], 5) == []  # the last token occurs nowhere before
    assert draft([7], 4) == [] and draft([], 4) == []


def test_only_a_lone_greedy_row_without_states_is_drafted():
    one = [Prefilled(tokens=3, cached=0, logits=None)]
    greedy = GenerationConfig(n=0, greedy=True)
    assert drafts(greedy, one, 10)
    assert not drafts(greedy, one, 0)  # off
    assert not drafts(greedy, one * 2, 10)  # two prompts in one call
    assert not drafts(GenerationConfig(n=2, greedy=True), one, 10)  # sampled rows
    for flag in ("greedy_state", "greedy_trail", "ignore_eos"):
        assert not drafts(GenerationConfig(n=0, greedy=True, **{flag: True}), one, 10)
    assert not drafts(greedy, [Prefilled(tokens=3, cached=0, logits=None, cache=object())], 10)  # sliding window


def _both(lm, monkeypatch, prompt: str, cfg: GenerationConfig, k: int = 6):
    """The greedy sample of one call decoded one token a forward, then with drafting, and the tokens guessed right."""
    monkeypatch.setattr(lm, "draft_tokens", 0)
    plain = lm.generate([prompt], cfg)[0].greedy
    monkeypatch.setattr(lm, "draft_tokens", k)
    before = lm.stats.get("accepted_tokens", 0)
    fast = lm.generate([prompt], cfg)[0].greedy
    return plain, fast, lm.stats.get("accepted_tokens", 0) - before


def _same(plain, fast) -> None:
    assert fast.token_ids == plain.token_ids
    assert fast.text == plain.text and fast.finish_reason == plain.finish_reason
    for a, b in ((plain.logprobs, fast.logprobs), (plain.entropies, fast.entropies), (plain.logsumexp, fast.logsumexp)):
        assert np.allclose(a, b, atol=1e-4)


@pytest.mark.parametrize("max_new", [1, 7, 60])
def test_drafted_text_is_the_one_token_a_forward_text(tiny_lm, monkeypatch, max_new):
    accepted = 0
    for p in PROMPTS:
        plain, fast, right = _both(tiny_lm, monkeypatch, p, GenerationConfig(n=0, max_new_tokens=max_new))
        _same(plain, fast)
        accepted += right
    if max_new > 1:
        assert accepted > 0  # guesses were kept, so the comparison covers the multi-token forward


def test_stops_end_a_drafted_row_where_they_end_a_plain_one(tiny_lm, monkeypatch):
    plain0 = tiny_lm.generate([PROMPTS[0]], GenerationConfig(n=0, max_new_tokens=40))[0].greedy
    stop = plain0.text[len(plain0.text) // 2:][:3]  # a string the plain row writes midway
    for cfg in (GenerationConfig(n=0, max_new_tokens=40, stop=(stop,)),
                GenerationConfig(n=0, max_new_tokens=40, stop_patterns=(r"\d",))):
        plain, fast, _ = _both(tiny_lm, monkeypatch, PROMPTS[0], cfg)
        _same(plain, fast)


def test_a_sampled_call_is_decoded_as_before(tiny_lm, monkeypatch):
    cfg = GenerationConfig(n=3, max_new_tokens=12, seed=5)
    monkeypatch.setattr(tiny_lm, "draft_tokens", 0)
    plain = tiny_lm.generate([PROMPTS[1]], cfg)[0]
    monkeypatch.setattr(tiny_lm, "draft_tokens", 6)
    drafted = tiny_lm.stats.get("drafted_tokens", 0)
    again = tiny_lm.generate([PROMPTS[1]], cfg)[0]
    assert tiny_lm.stats.get("drafted_tokens", 0) == drafted
    assert [s.token_ids for s in again.samples] == [s.token_ids for s in plain.samples]
    assert np.allclose(again.states, plain.states)


def test_the_packaged_model_drafts_a_copied_answer_to_the_same_text(smol, monkeypatch):
    passage = ("Ouagadougou is the capital of Burkina Faso and the administrative, communications, cultural and "
               "economic centre of the nation. It is also the country's largest city, with a population of 2,415,266.")
    prompt = f"{passage}\nQuestion: What is the capital of Burkina Faso, and how many people live there?\nAnswer:"
    plain, fast, right = _both(smol, monkeypatch, prompt, GenerationConfig(n=0, max_new_tokens=40, stop=("\n",)))
    _same(plain, fast)
    assert right > 0


def test_the_setting_comes_from_the_keyword_else_the_environment(tiny_lm, monkeypatch):
    import copy

    from seakr.models.hf import HFLanguageModel

    def load(dtype="float32", **kw):
        return HFLanguageModel(_modules=(copy.deepcopy(tiny_lm.model), tiny_lm.tokenizer), dtype=dtype, threads=1, **kw)

    monkeypatch.delenv("SEAKR_DRAFT_TOKENS", raising=False)
    assert load().draft_tokens == load().final_draft_tokens == 10  # on in float32, where it writes the same text
    bf16 = load("bfloat16")  # every call off, where bf16's rounding moves a chain's steps; a final answer on
    assert (bf16.draft_tokens, bf16.final_draft_tokens) == (0, 10)
    monkeypatch.setenv("SEAKR_DRAFT_TOKENS", "4")
    assert load().info()["draft_tokens"] == load("bfloat16").info()["final_draft_tokens"] == 4
    off = load("bfloat16", draft_tokens=0)  # the keyword wins over the environment, for every call
    assert off.draft_tokens == off.final_draft_tokens == 0


def test_a_final_answers_call_drafts_where_the_model_drafts_no_other(tiny_lm, monkeypatch):
    """A call marked final (no later decision reads its text) takes the final depth, any other the plain one."""
    import seakr.models.hf as hf

    used = []
    real = hf.lookup_decode
    monkeypatch.setattr(hf, "lookup_decode", lambda *a: used.append(a[3]) or real(*a))
    monkeypatch.setattr(tiny_lm, "draft_tokens", 0)
    monkeypatch.setattr(tiny_lm, "final_draft_tokens", 7)
    step = tiny_lm.generate([PROMPTS[0]], GenerationConfig(n=0, max_new_tokens=8))[0].greedy
    assert used == []
    final = tiny_lm.generate([PROMPTS[0]], GenerationConfig(n=0, max_new_tokens=8, final=True))[0].greedy
    assert used == [7] and final.token_ids == step.token_ids  # float32: the same text
    tiny_lm.generate([PROMPTS[0]], GenerationConfig(n=2, max_new_tokens=8, final=True))  # sampled rows: never
    assert used == [7]


def test_the_default_depths_by_precision_and_device(monkeypatch):
    from seakr.models.lookup import draft_depths

    monkeypatch.delenv("SEAKR_DRAFT_TOKENS", raising=False)
    assert draft_depths(None, "float32") == (10, 10) and draft_depths(None, "bfloat16") == (0, 10)
    assert draft_depths(None, "bfloat16", "cuda") == draft_depths(None, "float32", "cuda") == (0, 0)
    assert draft_depths(3, "bfloat16", "cuda") == (3, 3)
    monkeypatch.setenv("SEAKR_DRAFT_TOKENS", "x")
    with pytest.raises(ValueError, match="SEAKR_DRAFT_TOKENS"):
        draft_depths(None, "float32")
