"""Any Hugging Face causal LM: tiny randomly initialised models of several families run through the
generic path (state vectors, stops, seeds), and the device-agnostic path matches the CPU fast path."""

import re

import numpy as np
import pytest
import torch
import transformers

from seakr.models import GenerationConfig
from seakr.models.hf import HFLanguageModel

P = ["Question: Who wrote Hamlet? Answer:", "Paris is the capital of"]
COMMON = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
              max_position_embeddings=512)
_MLA = {"num_key_value_heads": 4, "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
        "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1, "kv_lora_rank": 16, "qk_rope_head_dim": 8,
        "qk_nope_head_dim": 8, "v_head_dim": 16}
FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"head_dim": 16}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {"sliding_window": None}),
    # Mistral-7B-v0.1's window (4096) without layer_types: our full attention answered otherwise past it
    "mistral-window": ("MistralConfig", "MistralForCausalLM", {"sliding_window": 4}),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", {"head_dim": 16}),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", {"head_dim": 16, "sliding_window": 8}),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {"pad_token_id": 0}),
    # blocks kept elsewhere than model.layers (transformer.h): "'GPT2Model' object has no attribute 'layers'"
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", {}),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", {}),
    "falcon": ("FalconConfig", "FalconForCausalLM", {}),
    "bloom": ("BloomConfig", "BloomForCausalLM", {}),
    "gptj": ("GPTJConfig", "GPTJForCausalLM", {"rotary_dim": 8}),
    "phi": ("PhiConfig", "PhiForCausalLM", {}),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", {"num_local_experts": 4, "num_experts_per_tok": 2}),
    # the feed-forward linears kept in the block itself (fc1, fc2; no mlp): refused for want of an mlp. OPT is
    # one of the models INSIDE's EigenScore was defined on. XGLM computes its own attention (not transformers'
    # attention interface): ours was installed all the same and the first prefix reuse failed
    "opt": ("OPTConfig", "OPTForCausalLM", {"ffn_dim": 128, "word_embed_proj_dim": 64}),
    "xglm": ("XGLMConfig", "XGLMForCausalLM", {"d_model": 64, "num_layers": 4, "attention_heads": 4, "ffn_dim": 128}),
    "biogpt": ("BioGptConfig", "BioGptForCausalLM", {"pad_token_id": 0}),
    "nemotron": ("NemotronConfig", "NemotronForCausalLM", {}),  # its blocks drop the forward's extra arguments
    "stablelm": ("StableLmConfig", "StableLmForCausalLM", {}),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", {"head_dim": 16}),
    "gpt_bigcode": ("GPTBigCodeConfig", "GPTBigCodeForCausalLM", {}),
    "codegen": ("CodeGenConfig", "CodeGenForCausalLM", {"rotary_dim": 8}),
    "gpt_neo": ("GPTNeoConfig", "GPTNeoForCausalLM", {"num_layers": 4, "num_heads": 4,
                                                     "attention_types": [[["global", "local"], 2]]}),
    "granite": ("GraniteConfig", "GraniteForCausalLM", {}),
    "cohere": ("CohereConfig", "CohereForCausalLM", {}),
    "starcoder2": ("Starcoder2Config", "Starcoder2ForCausalLM", {}),
    "olmo": ("OlmoConfig", "OlmoForCausalLM", {"pad_token_id": 0}),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", {"pad_token_id": 0}),
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM", {"num_experts": 4, "num_experts_per_tok": 2,
                                                           "moe_intermediate_size": 32, "shared_expert_intermediate_size": 64}),
    "persimmon": ("PersimmonConfig", "PersimmonForCausalLM", {}),
    "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM", {"pad_token_id": 0}),
    "glm": ("GlmConfig", "GlmForCausalLM", {"head_dim": 16, "pad_token_id": 0}),
    "mpt": ("MptConfig", "MptForCausalLM", {"d_model": 64, "n_layers": 4, "n_heads": 4}),
    # multi-head latent attention caches a compressed latent, not each head's keys: our shared attention read it
    # as one key head and failed at the first decode step ("The expanded size of the tensor (1) must match ... (4)")
    "deepseek_v2": ("DeepseekV2Config", "DeepseekV2ForCausalLM", {**_MLA, "q_lora_rank": None}),  # V2-Lite's
    "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM", {**_MLA, "q_lora_rank": 16}),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", {"head_dim": 16, "num_experts": 4, "num_experts_per_tok": 2,
                                                           "moe_intermediate_size": 32}),
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM", {"head_dim": 16, "num_local_experts": 4, "num_experts_per_tok": 2,
                                                     "sliding_window": 8}),  # attention sinks, windowed layers
}


def tiny(family, tok, **kw):
    cfg_name, model_name, extra = FAMILIES[family]
    torch.manual_seed(3)
    cfg = getattr(transformers, cfg_name)(vocab_size=len(tok), bos_token_id=tok.bos_token_id,
                                          eos_token_id=tok.eos_token_id, **(COMMON | extra))
    return HFLanguageModel(_modules=(getattr(transformers, model_name)(cfg), tok), dtype="float32", threads=1, **kw)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_family_generates_with_states_through_the_generic_path(tiny_lm, family):
    check_against_transformers(tiny(family, tiny_lm.tokenizer))


def test_a_multimodal_checkpoint_runs_on_its_text_decoder(tiny_lm):
    """Gemma-3 from 4B up (and Gemma-3n) load through AutoModelForCausalLM as image-text models whose config keeps
    the decoder's depth and widths in text_config: "'Gemma3Config' object has no attribute 'num_hidden_layers'"."""
    tok = tiny_lm.tokenizer
    text = transformers.Gemma3TextConfig(vocab_size=len(tok) + 8, **(COMMON | {"head_dim": 16, "sliding_window": 8}))
    vision = transformers.SiglipVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                             num_attention_heads=2, image_size=28, patch_size=14)
    cfg = transformers.Gemma3Config(text_config=text.to_dict(), vision_config=vision.to_dict(), mm_tokens_per_image=4,
                                    image_token_index=len(tok) + 1, boi_token_index=len(tok) + 2,
                                    eoi_token_index=len(tok) + 3, bos_token_id=tok.bos_token_id,
                                    eos_token_id=tok.eos_token_id)
    torch.manual_seed(3)
    lm = HFLanguageModel(_modules=(transformers.Gemma3ForConditionalGeneration(cfg), tok), dtype="float32", threads=1)
    assert (lm.num_layers, lm.info()["hidden_size"]) == (4, 64)
    check_against_transformers(lm)
    ids, att = lm.attention(P[0])  # DRAGIN's read of the last layer's attention
    assert att.shape == (len(ids), len(ids))


def check_against_transformers(lm):
    """Greedy tokens as transformers.generate's, with and without a cached prefix; seeded samples repeat; a
    sample's state is the feed-forward output at the EOS of one plain forward over its text."""
    inner = lm.model.get_decoder()
    layer = next(getattr(inner, a) for a in ("layers", "h", "blocks") if hasattr(inner, a))[lm.state_layer]
    # the feed-forward output: its module (MPT calls it ffn), or its last linear
    ffn = next(getattr(layer, a) for a in ("mlp", "ffn", "fc2") if hasattr(layer, a))
    assert lm._tap_modules()[0] is ffn  # found by the architecture's own block list
    cfg = GenerationConfig(n=3, max_new_tokens=8, seed=5, stop=(".",))
    a = lm.generate(P, cfg)
    b = lm.generate(P, cfg)
    for g, h in zip(a, b):
        assert g.states.shape[1] == 64 and np.isfinite(g.states).all()
        assert [s.token_ids for s in g.samples] == [s.token_ids for s in h.samples]  # same seed, same samples
        assert all("." not in s.text for s in [g.greedy] + g.samples)
    s = lm.generate(P[:1], GenerationConfig(n=2, max_new_tokens=6, seed=5))[0].samples[0]
    # its state: the feed-forward output at the EOS of one plain forward over its text
    seq = lm.encode(P[0]) + (s.token_ids if s.finish_reason == "eos" else s.token_ids[:-1]) + [lm.eos_id]
    got = {}
    hook = ffn.register_forward_hook(lambda m, i, o: got.__setitem__("o", (o[0] if isinstance(o, tuple) else o)))
    with torch.inference_mode():
        lm.model(torch.tensor([seq]))
    hook.remove()
    assert np.allclose(s.state, got["o"].reshape(len(seq), -1)[-1].float().numpy(), atol=1e-4)
    ids = lm.encode(P[0])
    ref = lm.model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=6, min_new_tokens=6,
                            pad_token_id=lm.pad_id)[0, len(ids):].tolist()
    g = lm.generate([P[0]], GenerationConfig(n=0, max_new_tokens=6, ignore_eos=True))[0].greedy
    assert g.token_ids == ref  # greedy equals transformers.generate in every family
    cached = lm.generate([P[0]], GenerationConfig(n=0, max_new_tokens=6, ignore_eos=True), prefix="Question:")[0]
    assert cached.greedy.token_ids == ref  # and so does it over a prefix's cached KV (the demonstrations')


def test_device_agnostic_path_matches_the_cpu_fast_path(tiny_lm):
    """What a CUDA run uses (no packed CPU kernels, tensors created on the model's device) against the
    shipped CPU path: identical tokens, states within float tolerance."""
    plain = HFLanguageModel(_modules=(tiny_lm.model, tiny_lm.tokenizer), dtype="float32", threads=1,
                            packed_linear=False, fast_step=False)
    assert not plain.info()["packed_linear"] and not plain.info()["fast_decode"] and tiny_lm.info()["fast_decode"]
    cfg = GenerationConfig(n=4, max_new_tokens=10, seed=9)
    for ga, gb in zip(tiny_lm.generate(P, cfg), plain.generate(P, cfg)):
        assert ga.greedy.token_ids == gb.greedy.token_ids
        assert [s.token_ids for s in ga.samples] == [s.token_ids for s in gb.samples]
        assert np.allclose(ga.states, gb.states, atol=1e-5)


def test_device_argument():
    with pytest.raises(ValueError, match="CUDA is not available"):
        if torch.cuda.is_available():
            pytest.skip("a GPU is present")
        HFLanguageModel(_modules=(None, None), device="cuda")


def test_a_device_this_machine_lacks_is_refused_in_one_line(monkeypatch):
    """Before any weights load: MPS on a machine without it, a GPU number past the machine's, a device
    torch knows but we do not compute on."""
    from seakr.models.hf import resolve_device

    if not torch.backends.mps.is_available():
        with pytest.raises(ValueError, match=r"'mps': MPS \(Apple GPU\) is not available"):
            resolve_device("mps")
    with pytest.raises(ValueError, match="expected cpu, cuda, cuda:N"):
        resolve_device("meta")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ValueError, match=r"'cuda:1': this machine has 1 CUDA device\(s\), numbered from 0"):
        resolve_device("cuda:1")
    assert resolve_device("cuda:0") == torch.device("cuda:0")


def test_cpu_0_is_the_cpu_and_cpu_1_is_told_there_is_one():
    """The Python API and the service's memory check read ``cpu:0`` as the CPU (a service on ``cpu:0`` skipped
    the check that its workers' caches fit the machine's memory)."""
    from seakr.models.hf import resolve_device
    from seakr.serve.app import ServiceLimits, check_memory

    assert resolve_device("cpu:0") == torch.device("cpu") and str(resolve_device("cpu:0")) == "cpu"
    with pytest.raises(ValueError, match=re.escape("device 'cpu:1': there is one cpu device (cpu or cpu:0)")):
        resolve_device("cpu:1")
    for device in ("cpu", "cpu:0"):
        with pytest.raises(ValueError, match="more than this machine's"):
            check_memory(ServiceLimits(workers=10 ** 6, max_kv_mb=2048), device)


@pytest.mark.parametrize("kwargs,needle", [
    ({"device": None}, "device: expected a device (cpu, cuda, cuda:N, mps or auto), got None"),  # torch's listing
    ({"device": 1.5}, "device: expected a device (cpu, cuda, cuda:N, mps or auto), got 1.5"),
    ({"precision": []}, "precision: expected a precision, got []"),  # "unhashable type: 'list'"
    ({"state_layer": 1.5}, "state_layer: expected a whole number in [0, inf) or null, got 1.5"),  # was taken
    ({"state_layer": True}, "state_layer: expected a whole number in [0, inf) or null, got True"),  # was layer 1
    ({"state_layer": "3"}, "state_layer: expected a whole number in [0, inf) or null, got '3'"),  # "'<=' not supported"
    ({"state_source": "ffn"}, "state_source: one of mlp, residual, not 'ffn'"),
    ({"attention": "fast"}, "attention: one of shared, hf, not 'fast'"),
    ({"prompt_cache_size": -1}, "prompt_cache_size: expected a whole number in [0, inf), got -1"),
])
def test_a_model_option_of_another_type_is_named_before_the_weights(kwargs, needle):
    """The Python API's model options (``load_model``, ``SeaKR.from_config``): each is refused in one line naming
    it, before the weights are looked for (the model named here does not exist)."""
    from seakr.models import load_model

    with pytest.raises((TypeError, ValueError), match=re.escape(needle)) as e:
        load_model("no-such-model", **kwargs)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("var,value,needle", [
    ("SEAKR_ATTENTION", "", "SEAKR_ATTENTION='': expected shared or hf"),  # "attention must be ...": which setting?
    ("SEAKR_ATTENTION", "fast", "SEAKR_ATTENTION='fast': expected shared or hf"),
    ("SEAKR_CUDA_GRAPHS", "off", "SEAKR_CUDA_GRAPHS='off': expected 1 or 0"),  # taken as on, without a word
    ("SEAKR_DRAFT_TOKENS", "ten", "SEAKR_DRAFT_TOKENS: expected a whole number"),
    ("SEAKR_DRAFT_TOKENS", "100", "SEAKR_DRAFT_TOKENS: expected a whole number in [0, 64]"),
])
def test_a_setting_from_the_environment_is_named_as_the_variable(monkeypatch, var, value, needle):
    from seakr.models import load_model

    monkeypatch.setenv(var, value)
    with pytest.raises(ValueError, match=re.escape(needle)):
        load_model("no-such-model")  # before the weights are looked for


def test_hub_id_loads_from_the_local_cache(tiny_lm, tmp_path, monkeypatch):
    """``--model org/name`` reads the Hugging Face cache layout (models--org--name/snapshots/REV)."""
    from seakr.models import ModelNotInstalled, load_model

    snap = tmp_path / "models--seakr-test--tiny-llama" / "snapshots" / ("0" * 40)
    tiny("llama", tiny_lm.tokenizer).model.save_pretrained(snap)
    tiny_lm.tokenizer.save_pretrained(snap)
    (tmp_path / "models--seakr-test--tiny-llama" / "refs").mkdir()
    (tmp_path / "models--seakr-test--tiny-llama" / "refs" / "main").write_text("0" * 40)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub.constants as c

    monkeypatch.setattr(c, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(c, "HF_HUB_OFFLINE", True)
    lm = load_model("seakr-test/tiny-llama", dtype="float32", threads=1)
    assert lm.info()["source"]["source"] == "hub:seakr-test/tiny-llama"
    assert lm.generate(P[:1], GenerationConfig(n=2, max_new_tokens=4))[0].states.shape[1] == 64
    with pytest.raises(ModelNotInstalled, match="not in the local Hugging Face cache"):
        load_model("seakr-test/absent", dtype="float32", threads=1)
    # a hub id without an organisation (the hub still serves "gpt2") loads when the cache holds it
    legacy = tmp_path / "models--tinyllama"
    legacy.mkdir()
    (snap.parents[1] / "snapshots").rename(legacy / "snapshots")
    (snap.parents[1] / "refs").rename(legacy / "refs")
    assert load_model("tinyllama", dtype="float32", threads=1).info()["source"]["source"] == "hub:tinyllama"
    with pytest.raises(ValueError, match=r"unknown model 'smollm2' \(did you mean 'smollm2-135m'\?\)"):
        load_model("smollm2", dtype="float32", threads=1)  # not cached: a typo, not a hub lookup
    # as the model's makers spell it (capitals), it had no suggestion
    with pytest.raises(ValueError, match=r"unknown model 'QWEN2.5-CODER-0.5B' \(did you mean 'qwen2.5-coder-0.5b'\?\)"):
        load_model("QWEN2.5-CODER-0.5B", dtype="float32", threads=1)


def test_an_encoder_is_refused_as_not_causal_and_a_block_without_an_mlp_names_the_residual(tiny_lm):
    """A BERT folder loads through AutoModelForCausalLM all the same (BertLMHeadModel) and failed with
    "'BertModel' object has no attribute 'layers'"; it attends both ways, so every state would read text the
    model had not generated yet. Refused as such; as a decoder (is_decoder=True) its blocks are found, and the
    MLP tap it lacks is named with the way out."""
    from seakr.models.registry import ModelError

    tok = tiny_lm.tokenizer
    for is_decoder, needle in ((False, "not a causal language model (BertLMHeadModel reads each token's following"),
                               (True, "have no feed-forward module named mlp")):
        torch.manual_seed(0)
        cfg = transformers.BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                      intermediate_size=64, is_decoder=is_decoder)
        with pytest.raises(ModelError, match=re.escape(needle)):
            HFLanguageModel(_modules=(transformers.BertLMHeadModel(cfg), tok), dtype="float32", threads=1)
    lm = HFLanguageModel(_modules=(transformers.BertLMHeadModel(cfg), tok), dtype="float32", threads=1,
                         state_source="residual")
    g = lm.generate(P[:1], GenerationConfig(n=2, max_new_tokens=4, seed=1))[0]
    assert g.states.shape == (2, 32) and np.isfinite(g.states).all()


def test_a_model_without_an_end_of_sequence_token_is_named(tiny_lm):
    """Neither tokenizer nor config naming an EOS was "int() argument must be ... not 'NoneType'"."""
    from transformers import PreTrainedTokenizerFast

    from seakr.models.registry import ModelError

    tok = PreTrainedTokenizerFast(tokenizer_object=tiny_lm.tokenizer.backend_tokenizer, unk_token="<unk>")
    assert tok.eos_token_id is None
    cfg = transformers.LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=2, num_key_value_heads=1, bos_token_id=None, eos_token_id=None)
    with pytest.raises(ModelError, match="neither its tokenizer nor its config names an end-of-sequence token"):
        HFLanguageModel(_modules=(transformers.LlamaForCausalLM(cfg), tok), dtype="float32", threads=1)


def test_a_tokenizer_larger_than_the_models_embedding_is_named(tiny_lm):
    """A folder pairing a tokenizer with another model's weights ran until the first question: "IndexError: index
    out of range in self". A model holding more rows than the tokenizer (padded vocabularies) is fine."""
    from seakr.models.registry import ModelError

    tok = tiny_lm.tokenizer
    for rows, ok in ((len(tok) - 50, False), (len(tok) + 64, True)):
        cfg = transformers.LlamaConfig(vocab_size=rows, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                       num_attention_heads=2, num_key_value_heads=1, eos_token_id=tok.eos_token_id)
        model = transformers.LlamaForCausalLM(cfg)
        if ok:
            HFLanguageModel(_modules=(model, tok), dtype="float32", threads=1)
            continue
        with pytest.raises(ModelError, match=f"its tokenizer has {len(tok)} tokens and the model embeds {rows}"):
            HFLanguageModel(_modules=(model, tok), dtype="float32", threads=1)


def test_load_model_takes_numpy_numbers_from_a_sweep(tiny_lm, tmp_path):
    """``load_model(m, threads=np.int64(2), state_layer=np.int64(1))`` (a value from ``np.arange`` or a frame)
    was "threads must be a whole number >= 1, not np.int64(2)"."""
    from seakr.models import load_model

    tiny("llama", tiny_lm.tokenizer).model.save_pretrained(tmp_path)
    tiny_lm.tokenizer.save_pretrained(tmp_path)
    lm = load_model(tmp_path, dtype="float32", threads=np.int64(1), state_layer=np.int64(1))
    assert lm.info()["state_layer"] == 1


def test_our_attention_is_installed_only_where_the_model_calls_the_attention_interface(tiny_lm):
    """XGLM has a q_proj and a layer_idx per layer but computes its own attention, and Nemotron's blocks drop the
    forward's extra arguments: ours, installed all the same, never ran. BioGPT calls the interface without its
    class saying so: it keeps the in-place prefix reuse. DeepSeek's latent attention caches no per-head keys."""
    shared = {f: tiny(f, tiny_lm.tokenizer).shared_attention for f in ("llama", "opt", "biogpt", "xglm", "nemotron",
                                                                       "falcon", "mistral-window", "deepseek_v2")}
    assert shared == {"llama": True, "opt": True, "biogpt": True, "xglm": False, "nemotron": False, "falcon": False,
                      "mistral-window": False, "deepseek_v2": False}


def test_chunked_attention_decodes_as_transformers_does_past_the_first_chunk(tiny_lm):
    """Llama 4's ``chunked_attention`` layers attend within chunks of the prompt: our full attention was installed
    (only ``sliding_attention`` told a windowed model) and its greedy tokens left transformers' past the first
    chunk of 8."""
    tok = tiny_lm.tokenizer
    torch.manual_seed(3)
    cfg = transformers.Llama4TextConfig(vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                                        **(COMMON | dict(head_dim=16, num_local_experts=2, num_experts_per_tok=1,
                                                         intermediate_size_mlp=128, attention_chunk_size=8,
                                                         no_rope_layers=[1, 0, 1, 0])))
    lm = HFLanguageModel(_modules=(transformers.Llama4ForCausalLM(cfg), tok), dtype="float32", threads=1)
    assert lm.shared_attention is False
    prompts = ["Question: Who wrote Hamlet? Answer: William Shakespeare wrote Hamlet. Paris is the capital of France.",
               "Question: Who is"]
    for prefix in ("", "Question:"):
        gens = lm.generate(prompts, GenerationConfig(n=2, max_new_tokens=10, seed=5, ignore_eos=True), prefix=prefix)
        for p, g in zip(prompts, gens):
            ids = lm.encode(p)
            ref = lm.model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=10, min_new_tokens=10,
                                    pad_token_id=lm.pad_id)[0, len(ids):].tolist()
            assert g.greedy.token_ids == ref and np.isfinite(g.states).all()


def test_a_state_space_model_is_refused_as_one_at_load(tiny_lm):
    """A Mamba folder loads as a causal LM and failed at its first question with "'MambaConfig' object has no
    attribute 'num_attention_heads'" (with --state-source residual; without, it named the missing mlp)."""
    from seakr.models.registry import ModelError

    tok = tiny_lm.tokenizer
    torch.manual_seed(0)
    mamba = transformers.MambaForCausalLM(transformers.MambaConfig(vocab_size=len(tok), hidden_size=32,
                                                                   num_hidden_layers=2, state_size=4))
    for source in ("mlp", "residual"):
        with pytest.raises(ModelError, match=re.escape("MambaForCausalLM has no attention layers (a state-space")):
            HFLanguageModel(_modules=(mamba, tok), dtype="float32", threads=1, state_source=source)
    # a hybrid, Mamba layers between attention layers: "size mismatch, got input (520), mat (520x4), vec (0)"
    jamba = transformers.JambaForCausalLM(transformers.JambaConfig(
        vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
        intermediate_size=64, attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2, expert_layer_offset=1,
        num_experts=2, mamba_d_state=4, use_mamba_kernels=False))
    with pytest.raises(ModelError, match=re.escape("JambaForCausalLM has state-space, convolution or linear-attention "
                                                   "layers (linear_attention) beside its attention (a hybrid)")):
        HFLanguageModel(_modules=(jamba, tok), dtype="float32", threads=1)


@pytest.mark.parametrize("family, config, kinds", [
    # LFM2: short convolutions between attention layers, no Mamba A_log: it failed at the first prefill with
    # "'LinearAttentionLayer' object has no attribute 'keys'"
    ("Lfm2", dict(layer_types=["conv", "full_attention"]), "conv"),
    ("Qwen3Next", dict(layer_types=["linear_attention", "full_attention"], num_experts=2, num_experts_per_tok=1,
                       moe_intermediate_size=32, shared_expert_intermediate_size=32, linear_num_value_heads=2,
                       linear_num_key_heads=2, linear_key_head_dim=16, linear_value_head_dim=16, head_dim=16), "linear_attention"),
    ("FalconH1", dict(mamba_d_state=4, mamba_n_heads=4, mamba_d_head=16, mamba_d_ssm=64), "hybrid"),
])
def test_a_hybrid_of_recurrent_and_attention_layers_is_refused_at_load(tiny_lm, family, config, kinds):
    from seakr.models.registry import ModelError

    tok = tiny_lm.tokenizer
    torch.manual_seed(0)
    cfg = getattr(transformers, f"{family}Config")(vocab_size=len(tok), hidden_size=64, num_hidden_layers=2,
                                                     num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
                                                     **config)
    model = getattr(transformers, f"{family}ForCausalLM")(cfg)
    with pytest.raises(ModelError, match=re.escape(f"{family}ForCausalLM has state-space, convolution or linear-attention "
                                                   f"layers ({kinds}) beside its attention")):
        HFLanguageModel(_modules=(model, tok), dtype="float32", threads=1)


def test_a_folder_with_its_own_code_is_refused_without_asking(tiny_lm, tmp_path, monkeypatch):
    """A config whose auto_map points at the folder's own modeling code: transformers asked "Do you wish to run the
    custom code? [y/N]" on stdin (15 s in a server, an answer typed in a terminal ran the folder's code)."""
    import builtins
    import json

    from seakr.models import load_model
    from seakr.models.registry import ModelError

    tiny("llama", tiny_lm.tokenizer).model.save_pretrained(tmp_path)
    tiny_lm.tokenizer.save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg |= {"model_type": "xmodel", "auto_map": {"AutoConfig": "configuration_x.XConfig",
                                                  "AutoModelForCausalLM": "modeling_x.XForCausalLM"}}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "configuration_x.py").write_text("from transformers import LlamaConfig\n"
                                                 "class XConfig(LlamaConfig):\n    model_type = 'xmodel'\n")
    (tmp_path / "modeling_x.py").write_text("from transformers import LlamaForCausalLM\n"
                                            "class XForCausalLM(LlamaForCausalLM):\n    pass\n")
    monkeypatch.setattr(builtins, "input", lambda *a: pytest.fail("asked on stdin"))
    with pytest.raises(ModelError, match="never a model folder's own code"):
        load_model(str(tmp_path), dtype="float32", threads=1)
