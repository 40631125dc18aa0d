"""The decode loop on a tiny random model: equivalence with transformers, states, stops, seeds."""

import math
import re

import numpy as np
import pytest
import torch

from seakr.models import GenerationConfig

P1 = "Question: Who wrote Hamlet? Answer:"
P2 = "Paris is the capital of"


def hf_greedy(lm, ids, n):
    out = lm.model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                            do_sample=False, max_new_tokens=n, min_new_tokens=n, pad_token_id=lm.pad_id)
    return out[0, len(ids):].tolist()


def test_greedy_token_identical_to_transformers_generate(tiny_lm):
    g = tiny_lm.generate([P1], GenerationConfig(n=0, max_new_tokens=12))[0].greedy
    ref = hf_greedy(tiny_lm, tiny_lm.encode(P1), 12)
    # our row stops at EOS; compare up to it
    n = len(g.token_ids)
    assert g.token_ids == ref[:n]
    assert g.finish_reason in ("length", "eos")


def test_batched_prompts_match_one_by_one(tiny_lm):
    cfg = GenerationConfig(n=0, max_new_tokens=10)
    both = tiny_lm.generate([P1, P2], cfg)
    for p, g in zip([P1, P2], both):
        alone = tiny_lm.generate([p], cfg)[0]
        assert g.greedy.token_ids == alone.greedy.token_ids
        assert np.allclose(g.greedy.logprobs, alone.greedy.logprobs, atol=1e-4)


def test_state_is_mlp_output_at_eos_replacing_the_last_token(tiny_lm):
    cfg = GenerationConfig(n=3, greedy=False, max_new_tokens=6, seed=7)
    g = tiny_lm.generate([P1], cfg)[0]
    ids = tiny_lm.encode(P1)
    layer = tiny_lm.model.model.layers[tiny_lm.state_layer].mlp
    for s in g.samples:
        assert s.state is not None and s.state.shape == (64,)
        if s.finish_reason == "length":  # EOS is fed in place of the last sampled token
            seq = ids + s.token_ids[:-1] + [tiny_lm.eos_id]
        else:  # eos: the sampled EOS itself
            seq = ids + s.token_ids + [tiny_lm.eos_id]
        got = {}
        h = layer.register_forward_hook(lambda m, i, o: got.__setitem__("o", o[0, -1].float()))
        with torch.inference_mode():
            tiny_lm.model(torch.tensor([seq]))
        h.remove()
        assert np.allclose(s.state, got["o"].numpy(), atol=1e-4)


def test_default_layer_is_middle_mlp(tiny_lm):
    assert tiny_lm.state_layer == 4 // 2 - 1


def test_a_one_layer_model_reads_its_only_layer_by_default(tiny_lm):
    """L/2 - 1 is -1 for one layer: such a model could not load without a --layer ("state_layer -1")."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from seakr.models.hf import HFLanguageModel

    tok = tiny_lm.tokenizer
    torch.manual_seed(0)
    one = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                       num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=128))
    lm = HFLanguageModel(_modules=(one, tok), dtype="float32", threads=1)
    assert lm.state_layer == 0 and lm.info()["layers"] == 1


def test_seed_reproducible_and_top_k_one_is_greedy(tiny_lm):
    cfg = GenerationConfig(n=4, max_new_tokens=8, seed=3)
    a = tiny_lm.generate([P2], cfg)[0]
    b = tiny_lm.generate([P2], cfg)[0]
    assert [s.token_ids for s in a.samples] == [s.token_ids for s in b.samples]
    c = tiny_lm.generate([P2], GenerationConfig(n=4, max_new_tokens=8, seed=4))[0]
    assert [s.token_ids for s in a.samples] != [s.token_ids for s in c.samples]
    k1 = tiny_lm.generate([P2], GenerationConfig(n=3, top_k=1, max_new_tokens=8, seed=5))[0]
    assert all(s.token_ids == k1.greedy.token_ids for s in k1.samples)


def test_stop_strings_cut_text_and_drop_trigger(tiny_lm):
    cfg = GenerationConfig(n=6, max_new_tokens=30, stop=(" ", "."), seed=1, temperature=1.5)
    g = tiny_lm.generate([P1], cfg)[0]
    for s in g.samples + [g.greedy]:
        assert " " not in s.text and "." not in s.text
        if s.finish_reason == "stop":
            assert len(s.token_ids) < 30
        assert len(s.logprobs) == len(s.token_ids) == len(s.entropies) == len(s.logsumexp)


def test_per_token_numbers_are_consistent(tiny_lm):
    g = tiny_lm.generate([P2], GenerationConfig(n=2, max_new_tokens=5, seed=2))[0]
    s = g.greedy
    for lp, ent, lse in zip(s.logprobs, s.entropies, s.logsumexp):
        assert lp <= 0 and ent >= 0 and np.isfinite(lse)


def test_prefix_cache_is_prefilled_once_and_matches_plain_prefill(tiny_lm):
    prefix = "The quick brown fox jumps over the lazy dog. " * 5
    q = "Question: Who wrote Hamlet? Answer:"
    before = dict(tiny_lm.stats)
    cfg = GenerationConfig(n=0, max_new_tokens=8)
    a = tiny_lm.generate([prefix + q], cfg, prefix=prefix)[0]
    mid = dict(tiny_lm.stats)
    b = tiny_lm.generate([prefix + q], cfg, prefix=prefix)[0]
    after = dict(tiny_lm.stats)
    assert a.cached_prefix_tokens > 0 and a.greedy.token_ids == b.greedy.token_ids
    assert after["prefix_hits"] == mid["prefix_hits"] + 1
    suffix_tokens = len(tiny_lm.encode(q, special=False))
    assert after["prefill_tokens"] - mid["prefill_tokens"] == suffix_tokens  # prefix not prefilled again
    assert mid["prefill_tokens"] - before["prefill_tokens"] > suffix_tokens  # ... as the first call did
    ids = tiny_lm.encode(prefix) + tiny_lm.encode(q, special=False)
    assert a.greedy.token_ids == hf_greedy(tiny_lm, ids, 8)[: len(a.greedy.token_ids)]


def test_cached_prefix_prefill_matches_one_forward_over_the_whole_prompt(tiny_lm):
    """A suffix after a cached prefix attends over the prefix's KV in place (CachedPrefixPrefill):
    same last logits and same KV as one forward over the whole prompt."""
    prefix = "The quick brown fox jumps over the lazy dog. " * 6
    prompt = prefix + "Question: Who wrote Hamlet? Answer:"
    ids = tiny_lm.encode(prefix) + tiny_lm.encode(prompt[len(prefix):], special=False)
    with torch.inference_mode():
        ref = tiny_lm.model(torch.tensor([ids]), use_cache=True)
        pf = tiny_lm.prefill(prompt, prefix)
    assert (pf.tokens, pf.cached) == (len(ids), len(tiny_lm.encode(prefix)))
    assert torch.allclose(pf.logits, ref.logits[0, -1], atol=1e-5)
    for (ks, vs), layer in zip(pf.kv, ref.past_key_values.layers):
        assert torch.allclose(torch.cat(ks, 2), layer.keys, atol=1e-5)
        assert torch.allclose(torch.cat(vs, 2), layer.values, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cached_prefix_attention_against_masked_attention(dtype):
    """The two flash products merged by log-sum-exp equal attention with the offset-causal mask; in
    bf16 the error against an fp32 reference stays within 2x that of SDPA with the mask in bf16."""
    import torch.nn.functional as F

    from seakr.models.attention import CachedPrefixPrefill

    g = torch.Generator().manual_seed(0)
    B, H, kvh, T, P, D = 1, 6, 2, 17, 150, 32
    q, k, v = (torch.randn(B, n, L, D, generator=g) * 2 for n, L in ((H, T), (kvh, P + T), (kvh, P + T)))
    mask = torch.ones(T, P + T, dtype=torch.bool).tril(P)  # query i sees the prefix and suffix keys 0..i
    rep = lambda x: x.repeat_interleave(H // kvh, 1)  # noqa: E731
    ref = F.scaled_dot_product_attention(q, rep(k), rep(v), attn_mask=mask).transpose(1, 2)
    st = CachedPrefixPrefill([(k[:, :, :P].to(dtype), v[:, :, :P].to(dtype))])
    out = st.attend(0, q.to(dtype), k[:, :, P:].to(dtype), v[:, :, P:].to(dtype), D**-0.5)
    assert out.shape == (B, T, H, D) and out.dtype == dtype
    assert torch.equal(st.kv[0][0], k[:, :, P:].to(dtype))
    err = (out.float() - ref).abs().max()
    if dtype == torch.float32:
        assert err < 1e-5
    else:
        q16, k16, v16 = (x.to(dtype) for x in (q, k, v))
        sdpa = F.scaled_dot_product_attention(q16, rep(k16), rep(v16), attn_mask=mask).transpose(1, 2)
        assert err <= 2 * (sdpa.float() - ref).abs().max(), err


def test_prompt_must_start_with_prefix(tiny_lm):
    with pytest.raises(ValueError, match="prefix"):
        tiny_lm.generate(["abc"], GenerationConfig(n=0, max_new_tokens=2), prefix="xyz")


def test_next_token_logprobs(tiny_lm):
    r = tiny_lm.next_token_logprobs([P1], [" Yes", " No"])[0]
    assert set(r) == {" Yes", " No"} and all(v <= 0 for v in r.values())


def test_shared_prefix_attention_matches_transformers_cache_path(tiny_lm):
    """The shared-prompt-KV decode (attention.py) against transformers' DynamicCache + SDPA path."""
    from seakr.models.hf import HFLanguageModel

    assert tiny_lm.shared_attention
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg0 = LlamaConfig(**{k: v for k, v in tiny_lm.model.config.to_dict().items() if k != "_attn_implementation"})
    twin = LlamaForCausalLM(cfg0)
    twin.load_state_dict(tiny_lm.model.state_dict())
    twin.config._attn_implementation = "sdpa"
    plain = HFLanguageModel(_modules=(twin, tiny_lm.tokenizer), dtype="float32", threads=1, attention="hf")
    assert not plain.shared_attention
    cfg = GenerationConfig(n=5, max_new_tokens=10, seed=11)
    a = tiny_lm.generate([P1, P2], cfg)
    b = plain.generate([P1, P2], cfg)
    # several prompts sharing one cached prefix (one of them is the bare prefix: nothing to prefill)
    pre = "The quick brown fox jumps over the lazy dog. " * 4
    shared = [pre + P1, pre + P2, pre]
    a += tiny_lm.generate(shared, cfg, prefix=pre)
    b += plain.generate(shared, cfg, prefix=pre)
    for ga, gb in zip(a, b):
        assert ga.greedy.token_ids == gb.greedy.token_ids
        for sa, sb in zip(ga.samples, gb.samples):
            assert sa.token_ids == sb.token_ids
            assert np.allclose(sa.logprobs, sb.logprobs, atol=1e-4)
            assert np.allclose(sa.state, sb.state, atol=1e-4)


def test_batching_model_merges_concurrent_calls(tiny_lm):
    import concurrent.futures as cf

    from seakr.models.batching import BatchingModel

    cfg = GenerationConfig(n=0, max_new_tokens=8)
    prompts = [P1, P2, "The quick brown fox", "Berlin is in"]
    alone = [tiny_lm.generate([p], cfg)[0].greedy.token_ids for p in prompts]
    bm = BatchingModel(tiny_lm, window=0.2)
    before = tiny_lm.stats["calls"]
    with cf.ThreadPoolExecutor(4) as ex:
        got = list(ex.map(lambda p: bm.generate([p], cfg)[0].greedy.token_ids, prompts))
    assert got == alone  # greedy results do not depend on who shares the batch
    assert tiny_lm.stats["calls"] - before < 4 and bm.requests == 4
    assert bm.token_strings(tiny_lm.encode("Paris"))  # other calls go through the worker too


def test_a_merge_too_large_for_the_device_runs_its_callers_one_by_one(tiny_lm, monkeypatch):
    """Each question's call fits; eight merged did not, and the model's refusal reached every caller: the eval
    failed on a size no question asked for. The callers now get their own results, as if alone."""
    import concurrent.futures as cf

    import seakr.models.hf as hf
    from seakr.models.batching import BatchingModel

    cfg = GenerationConfig(n=3, max_new_tokens=6, seed=5)
    prompts = [P1, P2, "The quick brown fox", "Berlin is in"]
    alone = [[s.token_ids for s in tiny_lm.generate([p], cfg)[0].samples] for p in prompts]
    one = 4 * (2 * 6 * tiny_lm._kv_bytes_per_token() + tiny_lm.model.config.vocab_size * tiny_lm.SCORE_BYTES)
    monkeypatch.setattr(hf, "free_memory", lambda device: one)  # room for one prompt's rows, not two
    bm = BatchingModel(tiny_lm, window=0.2)
    with cf.ThreadPoolExecutor(4) as ex:
        got = list(ex.map(lambda p: [s.token_ids for s in bm.generate([p], cfg)[0].samples], prompts))
    assert got == alone and bm.merged_calls < 4
    with pytest.raises(MemoryError, match="cannot allocate"):  # one caller's own call too large: its error
        bm.generate([P1], GenerationConfig(n=7, max_new_tokens=6))


def test_one_callers_failing_call_does_not_fail_the_others_merged_with_it(tiny_lm):
    """A prompt past the model's context was refused for the whole merged call: every question that shared it
    failed with another question's error (``eval --concurrency``, the service). Each caller now gets its own."""
    import concurrent.futures as cf

    from seakr.models.batching import BatchingModel

    cfg = GenerationConfig(n=2, max_new_tokens=6, seed=3)
    good = [P1, P2, "Berlin is in"]
    alone = [[s.token_ids for s in tiny_lm.generate([p], cfg)[0].samples] for p in good]
    too_long = "Paris is the capital of France. " * 200  # over the tiny model's 512-token context
    bm = BatchingModel(tiny_lm, window=0.3)

    def call(p):
        try:
            return [s.token_ids for s in bm.generate([p], cfg)[0].samples]
        except ValueError as e:
            return str(e)

    with cf.ThreadPoolExecutor(4) as ex:
        got = list(ex.map(call, [*good, too_long]))
    assert got[:3] == alone and bm.merged_calls < 4
    assert "does not fit the model's 512-token context" in got[3]


def test_per_token_numbers_match_a_plain_forward(tiny_lm):
    """log-prob, entropy and logsumexp of every greedy step equal those of transformers' own logits."""
    g = tiny_lm.generate([P1], GenerationConfig(n=0, max_new_tokens=6, ignore_eos=True))[0].greedy
    ids = tiny_lm.encode(P1)
    with torch.inference_mode():
        logits = tiny_lm.model(torch.tensor([ids + g.token_ids])).logits[0, len(ids) - 1 : -1].float()
    logp = torch.log_softmax(logits, -1)
    ent = -(logp.exp() * logp).sum(-1)
    want_lp = logp.gather(1, torch.tensor(g.token_ids)[:, None])[:, 0]
    assert np.allclose(g.logprobs, want_lp.numpy(), atol=1e-4)
    assert np.allclose(g.entropies, ent.numpy(), atol=1e-4)
    assert np.allclose(g.logsumexp, torch.logsumexp(logits, -1).numpy(), atol=1e-4)


def test_one_token_calls_take_no_decode_step_unless_a_state_is_wanted(tiny_lm):
    steps = tiny_lm.stats["decode_steps"]
    g = tiny_lm.generate([P1, P2], GenerationConfig(n=2, max_new_tokens=1, with_states=False, ignore_eos=True, seed=1))
    assert tiny_lm.stats["decode_steps"] == steps  # the token comes from the prefill's logits
    ref = tiny_lm.generate([P1, P2], GenerationConfig(n=0, max_new_tokens=3, ignore_eos=True))
    assert [x.greedy.token_ids for x in g] == [r.greedy.token_ids[:1] for r in ref]
    s = tiny_lm.generate([P1], GenerationConfig(n=2, max_new_tokens=1, ignore_eos=True, seed=1))[0]
    assert s.states.shape[0] == 2 and np.isfinite(s.states).all()  # EOS fed once: one step for the states


@pytest.mark.parametrize("causal", [False, True])
def test_device_agnostic_attention_with_lse_matches_the_cpu_flash_kernel(causal):
    """The plain-matmul path other devices use returns what the CPU flash kernel does (output and
    log-sum-exp), so the cached-prefix merge is the same everywhere."""
    from seakr.models.attention import attend_with_lse, attend_with_lse_portable

    g = torch.Generator().manual_seed(1)
    S = 9 if causal else 30
    q, k, v = torch.randn(1, 4, 9, 16, generator=g), torch.randn(1, 4, S, 16, generator=g), torch.randn(1, 4, S, 16, generator=g)
    o_cpu, l_cpu = attend_with_lse(q, k, v, causal=causal, scale=0.25)
    o, l = attend_with_lse_portable(q, k, v, causal=causal, scale=0.25)
    assert torch.allclose(o, o_cpu, atol=1e-5) and torch.allclose(l, l_cpu, atol=1e-5)


def test_common_random_numbers_make_identical_prompts_score_identically(tiny_lm):
    from seakr import uncertainty as U

    cfg = GenerationConfig(n=6, max_new_tokens=8, seed=3, temperature=1.5)
    a, b = tiny_lm.generate([P1, P1], cfg)
    assert [s.token_ids for s in a.samples] == [s.token_ids for s in b.samples]
    assert U.eigen_score(a.states) == U.eigen_score(b.states)
    alone = tiny_lm.generate([P1], cfg)[0]  # a prompt's samples do not depend on who shares the call
    assert [s.token_ids for s in alone.samples] == [s.token_ids for s in a.samples]
    own = GenerationConfig(n=6, max_new_tokens=8, seed=3, temperature=1.5, common_random_numbers=False)
    c, d = tiny_lm.generate([P1, P1], own)
    assert [s.token_ids for s in c.samples] != [s.token_ids for s in d.samples]


def test_common_random_numbers_reduce_the_noise_of_a_difference(tiny_lm):
    """Two near-identical contexts: across seeds, the difference of their sample-based uncertainty
    varies much less when both draw the same random streams. (Length-normalised entropy of the
    samples: a random 4-layer model's EOS state hardly depends on the context, so its EigenScore
    stays near -6.7 whatever is sampled; measured here: std of the difference 0.004 with common
    streams vs 0.010 without.)"""
    from seakr import uncertainty as U

    pa, pb = "Paris is the capital of", "Paris is the capital of the"
    diffs = {True: [], False: []}
    for crn in (True, False):
        for seed in range(8):
            cfg = GenerationConfig(n=8, max_new_tokens=6, seed=seed, common_random_numbers=crn)
            ga, gb = tiny_lm.generate([pa, pb], cfg)
            diffs[crn].append(U.ln_entropy([s.logprobs for s in ga.samples]) - U.ln_entropy([s.logprobs for s in gb.samples]))
    assert np.std(diffs[True]) < 0.6 * np.std(diffs[False]), diffs


def test_a_longer_shared_prefix_is_prefilled_once_with_the_same_results(tiny_lm):
    from seakr.models.hf import shared_prefix

    demos = "Question: Who wrote Hamlet? Answer: William Shakespeare wrote Hamlet.\n\n"
    kept = "Paris is the capital of France. The Seine flows through Paris. Berlin is in Germany.\n" * 2
    prompts = [demos + kept + f"{c}\nQuestion: Which city? Answer:" for c in
               ("The quick brown fox.", "Numbers 1 2 3.", "Berlin is in Germany.")]
    assert shared_prefix(prompts, demos) == demos + kept
    assert shared_prefix(prompts, demos, min_gain=10_000) == demos  # too little to gain: the cached prefix only
    assert shared_prefix(["a\n b", "a\n c"], "") == ""  # no newline followed by a non-space: no cut
    cfg = GenerationConfig(n=2, max_new_tokens=6, seed=5, ignore_eos=True)
    before = tiny_lm.stats["prefill_tokens"]
    together = tiny_lm.generate(prompts, cfg, prefix=demos)
    spent = tiny_lm.stats["prefill_tokens"] - before
    alone = [tiny_lm.generate([p], cfg, prefix=demos)[0] for p in prompts]
    kept_tokens = len(tiny_lm.encode(kept, False))
    assert spent <= sum(len(tiny_lm.encode(p)) for p in prompts) - 2 * kept_tokens  # the shared part once, not 3x
    for g, a in zip(together, alone):
        assert g.prompt_tokens == a.prompt_tokens
        assert g.greedy.token_ids == a.greedy.token_ids
        assert np.allclose(g.greedy.logprobs, a.greedy.logprobs, atol=1e-4)


@pytest.mark.parametrize("fast", [True, False])
def test_probing_reads_every_tap_from_one_generation(tiny_lm, monkeypatch, fast):
    """The probe study's premise: under probing(), each sample's state stack holds, at every
    (layer, source), what a forward over prompt + sample + EOS computes there, and the model's own
    tap is exactly its usual state; afterwards the model reads its one state again."""
    if not fast:
        monkeypatch.setattr(tiny_lm.speedups, "fast_step", None)  # the hooked module path
    cfg = GenerationConfig(n=3, greedy=False, max_new_tokens=6, seed=7)
    plain = tiny_lm.generate([P1], cfg)[0]
    taps = [(0, "residual"), (tiny_lm.state_layer, "mlp"), (3, "mlp")]
    with tiny_lm.probing(taps):
        probed = tiny_lm.generate([P1], cfg)[0]
    assert [s.text for s in probed.samples] == [s.text for s in plain.samples]
    assert probed.states.shape == (len(plain.states), 3, 64)
    assert np.allclose(probed.states[:, 1], plain.states, atol=1e-5)
    assert tiny_lm.generate([P1], cfg)[0].states.shape == plain.states.shape
    layers, ids = tiny_lm.model.model.layers, tiny_lm.encode(P1)
    s = probed.samples[0]
    seq = ids + (s.token_ids[:-1] if s.finish_reason == "length" else s.token_ids) + [tiny_lm.eos_id]
    got = {}
    hooks = [layers[0].register_forward_hook(lambda m, i, o: got.__setitem__("res0", (o[0] if isinstance(o, tuple) else o)[0, -1])),
             layers[3].mlp.register_forward_hook(lambda m, i, o: got.__setitem__("mlp3", o[0, -1]))]
    with torch.inference_mode():
        tiny_lm.model(torch.tensor([seq]))
    for h in hooks:
        h.remove()
    assert np.allclose(s.state[0], got["res0"].float().numpy(), atol=1e-4)
    assert np.allclose(s.state[2], got["mlp3"].float().numpy(), atol=1e-4)


def test_probing_refuses_a_tap_outside_the_model(tiny_lm):
    with pytest.raises(ValueError, match="layer must be in 0..3"):
        with tiny_lm.probing([(4, "mlp")]):
            pass
    with pytest.raises(ValueError, match="source mlp or residual"):
        with tiny_lm.probing([(1, "attn")]):
            pass


def test_greedy_state_is_read_at_eos_without_any_sample(tiny_lm):
    """A probe reads one state: the greedy answer's, at the EOS fed after it, with no samples drawn."""
    cfg = GenerationConfig(n=0, max_new_tokens=6, with_states=False, greedy_state=True)
    g = tiny_lm.generate([P1], cfg)[0]
    assert not g.samples and g.greedy.state is not None and g.greedy.state.shape == (64,)
    ids = tiny_lm.encode(P1)
    # EOS replaces the last token of a row cut by length; it follows a row that stopped (eos or a stop string)
    last = g.greedy.token_ids[:-1] if g.greedy.finish_reason == "length" else g.greedy.token_ids
    got = {}
    layer = tiny_lm.model.model.layers[tiny_lm.state_layer].mlp
    h = layer.register_forward_hook(lambda m, i, o: got.__setitem__("o", o[0, -1].float()))
    with torch.inference_mode():
        tiny_lm.model(torch.tensor([ids + last + [tiny_lm.eos_id]]))
    h.remove()
    assert np.allclose(g.greedy.state, got["o"].numpy(), atol=1e-4)
    # and without the flag the greedy row carries none (the default costs nothing extra)
    assert tiny_lm.generate([P1], GenerationConfig(n=0, max_new_tokens=6))[0].greedy.state is None


@pytest.mark.parametrize("n,max_new", [(0, 6), (3, 6), (2, 40)])
def test_greedy_trail_is_the_state_at_every_token_of_one_forward(tiny_lm, n, max_new):
    """The one-response hidden score reads the greedy row's state at each token it fed, the last at the EOS that
    follows it (or replaces its last token, cut by length): the same vectors one forward over the whole text gives,
    with samples drawn beside it or not."""
    cfg = GenerationConfig(n=n, max_new_tokens=max_new, with_states=n > 0, greedy_trail=True)
    g = tiny_lm.generate([P1], cfg)[0]
    ids, tr = tiny_lm.encode(P1), g.greedy.trail
    fed = (g.greedy.token_ids[:-1] if g.greedy.finish_reason == "length" else g.greedy.token_ids) + [tiny_lm.eos_id]
    got = {}
    layer = tiny_lm.model.model.layers[tiny_lm.state_layer].mlp
    h = layer.register_forward_hook(lambda m, i, o: got.__setitem__("o", o[0, len(ids):].float()))
    with torch.inference_mode():
        tiny_lm.model(torch.tensor([ids + fed]))
    h.remove()
    assert tr.shape == (len(fed), 64) and np.allclose(tr, got["o"].numpy(), atol=1e-4)
    assert np.allclose(g.greedy.state if g.greedy.state is not None else tr[-1], tr[-1])
    assert all(s.trail is None for s in g.samples) and "trail" not in g.greedy.to_dict()
    assert tiny_lm.generate([P1], GenerationConfig(n=0, max_new_tokens=6))[0].greedy.trail is None  # costs nothing unasked


def test_cancel_takes_effect_between_decode_steps_not_after_the_call(tiny_lm, monkeypatch):
    """A timed-out request frees its worker within one step: the decode loop checks the answer's cancel
    event, set here at the fifth step of a 200-token call (from the per-step statistics)."""
    import threading

    from seakr.models import decode as decode_mod
    from seakr.models.base import Cancelled, cancellable

    ev, steps = threading.Event(), []
    real = decode_mod.token_stats

    def counting(*a, **kw):
        steps.append(1)
        if len(steps) == 5:
            ev.set()
        return real(*a, **kw)
    monkeypatch.setattr(decode_mod, "token_stats", counting)
    with cancellable(ev), pytest.raises(Cancelled):
        tiny_lm.generate([P1], GenerationConfig(n=2, max_new_tokens=200, ignore_eos=True))
    assert len(steps) == 5  # stopped at the step after the event, not at 200
    monkeypatch.setattr(decode_mod, "token_stats", real)
    assert len(tiny_lm.generate([P1], GenerationConfig(n=0, max_new_tokens=3))[0].greedy.token_ids) >= 1  # usable


def test_11_no_future_warning_from_transformers_on_a_generation(tiny_lm):
    """The KV cache goes under the argument name the installed transformers takes (``cache`` since 5.24,
    where ``past_key_values`` warns on every forward)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        g = tiny_lm.generate([P1, P1 + " Paris"], GenerationConfig(n=2, max_new_tokens=4), prefix="Question:")
    assert len(g) == 2


def test_a_call_the_device_cannot_hold_is_refused_before_it_starts(tiny_lm, monkeypatch):
    """k = 100,000 samples grew the process until the system killed it (no message); a call is sized (its rows'
    attention cache and a step's vocabulary scores) against what the device has free, and refused before it
    starts with what it asks (the command line says it in one line, exit 3)."""
    import seakr.models.hf as hf

    cfg = GenerationConfig(n=40, max_new_tokens=8)
    rows = 41
    need = rows * (2 * 8 * tiny_lm._kv_bytes_per_token() + tiny_lm.model.config.vocab_size * tiny_lm.SCORE_BYTES)
    monkeypatch.setattr(hf, "free_memory", lambda device: need - 1)
    with pytest.raises(MemoryError, match=rf"cannot allocate [0-9.]+ GB for a call of {rows} rows \(8 new tokens each\)"):
        tiny_lm.generate(["Hello"], cfg)
    monkeypatch.setattr(hf, "free_memory", lambda device: need)
    assert len(tiny_lm.generate(["Hello"], cfg)[0].samples) == 40
    monkeypatch.setattr(hf, "free_memory", lambda device: None)  # unreadable: nothing refused for it
    assert len(tiny_lm.generate(["Hello"], cfg)[0].samples) == 40


def test_free_memory_reads_the_machine(monkeypatch):
    """A GPU's count adds what torch's allocator keeps cached but no tensor uses: after a call of 60 GB on an
    80 GB card the driver reports 20 GB free, and a second call as large must not be refused."""
    from seakr.models.machine import free_memory

    free = free_memory(torch.device("cpu"))
    assert free is None or 0 < free < 2 ** 50
    GB = 2 ** 30
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (20 * GB, 80 * GB))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 60 * GB)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 2 * GB)
    assert free_memory(torch.device("cuda:0")) == 78 * GB
    assert free_memory(torch.device("mps")) is None


def test_a_generation_past_the_context_is_refused_naming_max_new_tokens(tiny_lm):
    """`seakr uncertainty --max-new-tokens 100000` was "out of memory (asked for 96.8 GB) ...: lower k": the call
    runs past the model's context window (512 tokens here) whatever memory there is."""
    ctx = tiny_lm.info()["context_tokens"]
    n = len(tiny_lm.encode("the cat sat"))
    with pytest.raises(ValueError, match=rf"^max_new_tokens {ctx} after a prompt of {n} tokens runs past the model's "
                                         rf"{ctx}-token context; lower it \(at most {ctx - n} here\)$"):
        tiny_lm.generate(["the cat sat"], GenerationConfig(n=2, max_new_tokens=ctx))
    assert tiny_lm.generate(["the cat sat"], GenerationConfig(n=0, max_new_tokens=ctx - n))  # to the last position


def test_a_call_too_large_is_refused_before_its_random_numbers_are_drawn(tiny_lm):
    """k = 10**12 from Python was torch's "can't allocate memory: you tried to allocate 404000000000000 bytes"
    (the (k, T) uniforms drawn before the memory check) and k = 10**5000 a TypeError from torch.rand."""
    for n in (10 ** 12, 10 ** 5000):
        with pytest.raises(MemoryError, match=r"^cannot allocate .* for a call of .* rows \(4 new tokens each\)"):
            tiny_lm.generate(["the cat sat"], GenerationConfig(n=n, max_new_tokens=4))
    with pytest.raises(ValueError, match=r"^max_new_tokens a whole number of about 5,001 digits after a prompt"):
        tiny_lm.generate(["the cat sat"], GenerationConfig(n=2, max_new_tokens=10 ** 5000))


def test_every_end_token_the_generation_config_lists_ends_an_answer(tiny_lm):
    """Gemma-3 and Llama-3 instruct models end a turn with a token of their own beside the tokenizer's EOS
    (listed in generation_config.eos_token_id, where transformers.generate stops); decoding went on past it."""
    import copy

    from seakr.models.hf import HFLanguageModel

    cfg = GenerationConfig(n=0, max_new_tokens=6, ignore_eos=False)
    first = tiny_lm.generate([P1], cfg)[0].greedy.token_ids[2]  # the greedy answer's third token
    model = copy.deepcopy(tiny_lm.model)
    model.generation_config.eos_token_id = [tiny_lm.eos_id, first]
    lm = HFLanguageModel(_modules=(model, tiny_lm.tokenizer), dtype="float32", threads=1)
    assert lm.info()["end_ids"] == [tiny_lm.eos_id, first] and lm.eos_id == tiny_lm.eos_id
    g = lm.generate([P1], GenerationConfig(n=2, max_new_tokens=6, seed=3, greedy_state=True))[0]
    assert g.greedy.finish_reason == "eos" and g.greedy.token_ids == tiny_lm.generate([P1], cfg)[0].greedy.token_ids[:2]
    assert all(first not in s.token_ids for s in g.samples)
    forced = lm.generate([P1], GenerationConfig(n=0, max_new_tokens=6, ignore_eos=True))[0].greedy
    assert len(forced.token_ids) == 6 and first not in forced.token_ids  # ignore_eos: none of them is drawn


GEMMA2_LIKE = ("{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
               "{% endif %}{% for m in messages %}<start_of_turn>{{ m['role'] }}\n{{ m['content'] }}<end_of_turn>\n"
               "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")


def test_a_chat_template_without_a_system_turn_gets_it_in_the_first_user_turn(tiny_lm):
    """Gemma 1 and 2 templates raise "System role not supported" from inside the template: prompt_style=chat and
    the knowledge check's prompts ended in a jinja2 traceback."""
    import copy

    from seakr.models.hf import HFLanguageModel
    from seakr.models.registry import ModelError
    from seakr.prompts import PromptBuilder

    tok = copy.deepcopy(tiny_lm.tokenizer)
    tok.chat_template = GEMMA2_LIKE
    lm = HFLanguageModel(_modules=(tiny_lm.model, tok), dtype="float32", threads=1)
    text = lm.format_chat([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}])
    assert text == "<s><start_of_turn>user\nBe brief.\n\nHi?<end_of_turn>\n<start_of_turn>model\n"
    prompt, prefix = PromptBuilder("hotpotqa", style="chat", chat=lm.format_chat).render("Who wrote Hamlet?")
    assert prompt.startswith(prefix) and "Who wrote Hamlet?" in prompt and "<start_of_turn>model" in prompt
    tok.chat_template = "{{ raise_exception('no') }}"
    with pytest.raises(ModelError, match=r"its chat template refused the prompt \(no\); run with prompt_style=plain"):
        lm.format_chat([{"role": "user", "content": "Hi?"}])


def test_a_prompt_is_tokenized_whole_wherever_its_prefix_was_cut(tiny_lm):
    """A GPT-2-style pre-tokenizer reads "\\n\\nQuestion" as "\\n", "\\n", "Question" but a prefix ending in
    "\\n\\n" alone as one "\\n\\n" token: the cached-prefix path fed other tokens than the whole prompt's (SmolLM2:
    72 of 80 SeaKR prompts, a token each). The prompt is tokenized whole; the cache serves what matches."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from seakr.models.hf import HFLanguageModel

    tk = Tokenizer(models.BPE(unk_token="<unk>"))  # as the session's, but trained on paragraphs: it knows "\n\n"
    tk.pre_tokenizer, tk.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    tk.train_from_iterator(["Paris is the capital of France.\n\nQuestion: Who wrote Hamlet?\nAnswer: Shakespeare.",
                            "Paris is the capital of France.\n\n", "\n\n", "\n\n"] * 20,
                           trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"],
                                               initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id))
    lm = HFLanguageModel(_modules=(model, tok), dtype="float32", threads=1)
    prefix = "Paris is the capital of France.\n\n"
    prompt = prefix + "Question: Who wrote Hamlet?\nAnswer:"
    whole, pre = lm.encode(prompt), lm.encode(prefix)
    assert pre + lm.encode(prompt[len(prefix):], False) != whole  # this tokenizer's merges span the cut
    a, b = lm.prefill(prompt, prefix), lm.prefill(prompt, None)
    assert (a.tokens, b.tokens) == (len(whole), len(whole)) and a.cached == len(pre) - 1
    assert torch.allclose(a.logits, b.logits, atol=1e-4)
    cfg = GenerationConfig(n=2, max_new_tokens=6, seed=4)
    g, h = lm.generate([prompt], cfg, prefix=prefix)[0], lm.generate([prompt], cfg)[0]
    assert [s.token_ids for s in g.samples] == [s.token_ids for s in h.samples]
    assert np.allclose(g.states, h.states, atol=1e-4)


def test_a_chat_template_s_own_bos_is_not_doubled(tiny_lm):
    """Gemma's and Llama 3's templates write the BOS into the text and their tokenizers add one: every chat prompt
    started with two BOS tokens."""
    import copy

    from tokenizers import processors

    from seakr.models.hf import HFLanguageModel

    tok = copy.deepcopy(tiny_lm.tokenizer)
    tok._tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", tok.bos_token_id)])
    tok.chat_template = "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
    lm = HFLanguageModel(_modules=(tiny_lm.model, tok), dtype="float32", threads=1)
    bos = tok.bos_token_id
    ids = lm.encode(lm.format_chat([{"role": "user", "content": "Hi"}]))
    assert ids[0] == bos and ids[1] != bos
    assert lm.encode("Hi")[:1] == [bos] and lm.encode("<s><s>Hi")[:2] == [bos, bos]  # a text's own two are kept


def test_a_tokenizer_that_appends_its_eos_does_not_end_the_prompt(tiny_lm):
    """A tokenizer set to append its EOS (add_eos_token, some Llama-2 fine-tunes) ended every prompt with it."""
    import copy

    from tokenizers import processors

    from seakr.models.hf import HFLanguageModel

    tok = copy.deepcopy(tiny_lm.tokenizer)
    tok._tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", tok.bos_token_id), ("</s>", tok.eos_token_id)])
    assert tok.encode("Hi")[-1] == tok.eos_token_id
    lm = HFLanguageModel(_modules=(tiny_lm.model, tok), dtype="float32", threads=1)
    assert lm.encode("Hi") == [tok.bos_token_id] + tok.encode("Hi", add_special_tokens=False)
    assert lm.encode("Hi</s>") == [tok.bos_token_id] + tok.encode("Hi</s>", add_special_tokens=False)  # its own kept


def test_a_character_split_over_byte_tokens_is_one_piece_of_its_word(tiny_lm, tmp_path):
    """The tiny tokenizer knows no merge for "Ł", "ó", "ź": each is two byte tokens. The pieces join to the
    decoded text with no U+FFFD, the word holds every token of its bytes (its confidence reads them all), and
    the query built from the pieces finds the passage the engine indexed under the whole word."""
    from seakr.methods.text import align_words, build_query
    from seakr.search import Passage
    from seakr.search.tantivy_engine import TantivyEngine

    ids = tiny_lm.encode(" Łódź and Kraków", special=False)
    pieces = tiny_lm.token_strings(ids)
    assert "".join(pieces) == tiny_lm.tokenizer.decode(ids) == " Łódź and Kraków"
    assert len(pieces) == len(ids) and not any("\ufffd" in p for p in pieces)
    first = pieces.index("")  # the first byte of "Ł"
    lps = [-0.01] * len(ids)
    lps[first] = -3.0  # an unsure word, whose unsureness sits in a token adding no character
    words = align_words(pieces, lps)
    assert [w.text for w in words] == ["Łódź", "and", "Kraków"]
    assert first in words[0].tokens and words[0].min_p == pytest.approx(math.exp(-3.0))
    # every token that adds a letter, or the first bytes of one, is in its word
    assert sorted(t for w in words for t in w.tokens) == [i for i, p in enumerate(pieces) if p != " "]
    engine = TantivyEngine.build([Passage("1", "Kraków", "Kraków lies on the Vistula."),
                                  Passage("2", "Vistula", "The Vistula flows to the Baltic.")], tmp_path / "idx")
    query, _ = build_query(words, "Which city lies on the Vistula?")
    assert query == "Kraków" and [h.id for h in engine.search(query, 1)] == ["1"]


@pytest.mark.parametrize("end", ["length", "eos"])
def test_a_row_ended_between_the_bytes_of_a_character_shows_no_replacement_mark(tiny_lm, end):
    from seakr.models.rows import RowBook

    ids = tiny_lm.encode(" Łó", special=False)
    assert tiny_lm.tokenizer.decode(ids[:-1]).endswith("\ufffd")  # the tiny tokenizer splits "ó" into two bytes
    fed = ids[:-1] + ([tiny_lm.tokenizer.eos_token_id] if end == "eos" else [])
    book = RowBook(1, [True], with_states=False, stops=(), max_new=len(ids) - (end == "length"),
                   eos_id=tiny_lm.tokenizer.eos_token_id,
                   detok=lambda t: tiny_lm.tokenizer.decode(t, skip_special_tokens=True))
    for t in fed:
        if not book.alive:
            break
        one = torch.tensor([0.0])
        _, keep = book.advance(torch.tensor([t]), one, one, one)
        book.keep(keep)
    assert book.rows[0].finish == end and book.rows[0].text == " Ł"


QWEN3_TAIL = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
              "{% if add_generation_prompt %}<|im_start|>assistant\n"
              "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}{% endif %}")
R1_TAIL = "{% for m in messages %}{{ m.content }}{% endfor %}{% if add_generation_prompt %}<|Assistant|><think>\n{% endif %}"


@pytest.mark.parametrize("template,tail", [(QWEN3_TAIL, "<|im_start|>assistant\n<think>\n\n</think>\n\n"),
                                           (R1_TAIL, "<|Assistant|><think>\n\n</think>\n\n"),
                                           ("{% for m in messages %}{{ m.content }}{% endfor %}", "Hi?")])
def test_the_answer_is_asked_for_without_a_thinking_block(tiny_lm, template, tail):
    """Qwen3's template thinks unless told not to: every step and short answer began with "<think>" (a one-line
    answer was that tag). Its switch is passed; a template that always opens the block gets it closed empty."""
    import copy

    from seakr.models.hf import HFLanguageModel

    tok = copy.deepcopy(tiny_lm.tokenizer)
    tok.chat_template = template
    lm = HFLanguageModel(_modules=(tiny_lm.model, tok), dtype="float32", threads=1)
    assert lm.format_chat([{"role": "user", "content": "Hi?"}]).endswith(tail)


@pytest.mark.parametrize("field,value,says", [
    ("n", -3, "n: expected a whole number in [0, inf), got -3"),
    ("n", "2", "n: expected a whole number in [0, inf), got '2'"),
    ("max_new_tokens", -1, "max_new_tokens: expected a whole number in [1, inf)"),
    ("max_new_tokens", 0, "max_new_tokens: expected a whole number in [1, inf)"),
    ("top_k", 0, "top_k: expected a whole number in [1, inf)"),
    ("seed", 2 ** 70, "seed: expected a whole number in [0, 18446744073709551615] or null, got 1180591620717411303424"),
    ("seed", -1, "seed: expected a whole number in [0,"),
    ("temperature", float("nan"), "temperature: expected a number in [0, inf), got nan"),
    ("temperature", -1.0, "temperature: expected a number in [0, inf)"),
    ("top_p", 0.0, "top_p: expected a number in (0, 1]"),
    ("top_p", 2, "top_p: expected a number in (0, 1]"),
    ("stop", ["\n", ""], "stop: expected non-empty strings"),
    ("stop", None, "stop: expected non-empty strings, got None"),
    ("stop_patterns", ("(",), "stop_patterns: '(' is not a regular expression (missing )"),
    ("greedy", "yes", "greedy: expected true or false, got 'yes'"),
])
def test_a_generation_config_names_a_bad_knob_where_it_is_set(field, value, says):
    """``seakr.GenerationConfig`` is public: from Python, n=-3 gave no sample and no error, max_new_tokens=-1 an
    IndexError inside the decode loop, seed=2**70 "Overflow when unpacking long long", a bad stop pattern the regex
    module's "missing ) at position 1", and NaN or negative temperatures and top_p of 0 or 2 were taken."""
    with pytest.raises(ValueError, match="^" + re.escape(f"GenerationConfig {says}")):
        GenerationConfig(**{field: value})


def test_a_generation_config_takes_one_stop_string_whole_and_numpy_numbers():
    cfg = GenerationConfig(stop="\n\n", stop_patterns=[r"\p{Lu}"], n=np.int64(3), temperature=np.float32(0.5))
    assert cfg.stop == ("\n\n",) and cfg.stop_patterns == (r"\p{Lu}",)  # a string was read as its characters
    assert cfg.n == 3 and type(cfg.n) is int and cfg.temperature == 0.5 and type(cfg.temperature) is float
    with pytest.raises(ValueError, match="nothing to generate"):
        GenerationConfig(greedy=False, n=0)


@pytest.mark.parametrize("call,error,says", [
    (lambda lm, c: lm.generate("Hello", c), TypeError, "prompts: a list of texts, got one string; pass [prompt]"),
    (lambda lm, c: lm.generate([""], c), ValueError, "prompts[0]: an empty text"),
    (lambda lm, c: lm.generate(["Hi", None], c), TypeError, "prompts[1]: expected text, got NoneType"),
    (lambda lm, c: lm.generate(["Hi \ud800"], c), ValueError, "prompts[0]: not valid UTF-8"),
    (lambda lm, c: lm.generate(["Hi"], {"n": 2}), TypeError, "config: expected a seakr GenerationConfig, got dict"),
    (lambda lm, c: lm.generate(["Hi there", "Bye"], c, prefix="Hi"), ValueError, "prefix: prompts[1] does not start"),
    (lambda lm, c: lm.generate(["Hi"], c, prefix=3), TypeError, "prefix: expected text or None, got int"),
    (lambda lm, c: lm.next_token_logprobs(["Is it?"], [""]), ValueError, "options[0]: an empty text"),
    (lambda lm, c: lm.next_token_logprobs("Is it?", ["Yes"]), TypeError, "prompts: a list of texts, got one string"),
    (lambda lm, c: lm.attention(""), ValueError, "text: an empty text"),
])
def test_a_model_call_with_bad_arguments_is_one_line_before_any_work(tiny_lm, call, error, says):
    """From Python, one string was read as a prompt per character, an empty prompt crashed the embedding with a
    dtype error ("Expected tensor for argument #1 'indices' to have one of ... Long, Int"), an empty option was an
    IndexError, a dict for the config an AttributeError, and None or half a surrogate pair the tokenizer's words."""
    with pytest.raises(error, match="^" + re.escape(says)):
        call(tiny_lm, GenerationConfig(n=1, max_new_tokens=2))


def test_a_batched_model_refuses_a_bad_call_in_the_callers_thread_and_keeps_serving(tiny_lm):
    """A bad config reached the batching worker's loop, which raised outside any call: its thread ended and every
    later call, the bad one's included, waited for ever."""
    from seakr.models.batching import BatchingModel

    lm = BatchingModel(tiny_lm)
    with pytest.raises(TypeError, match="^config: expected a seakr GenerationConfig"):
        lm.generate(["Hi"], {"n": 2})
    assert lm.generate([], GenerationConfig(n=1, max_new_tokens=2)) == []
    assert len(lm.generate([P1, P2], GenerationConfig(n=1, max_new_tokens=2))) == 2
