"""What a model's files say about it before it loads: its depth (the state layer's range) and its context window,
read from a GGUF header or a Hugging Face config without reading any weight."""

from __future__ import annotations

from pathlib import Path

from ..common.jsontext import loads
from .registry import REGISTRY, model_kind
import struct


def model_depth(name_or_path: str) -> int | None:
    """A model's decoder layers, read without its weights -- the registry's figure, a folder's ``config.json``,
    a GGUF file's header, a hub id's cached config -- so a layer or tap beyond them is refused before the load
    (a minute on a CPU); None where they are not known so cheaply (the loaded model checks then)."""
    return _model_figure(name_or_path, "layers", "block_count", ("num_hidden_layers", "n_layer"))


def model_context(name_or_path: str) -> int | None:
    """A model's context window in tokens, read as :func:`model_depth` reads its layers, so a generation
    length that leaves no room for a prompt is refused before the load; None where not known so cheaply."""
    return _model_figure(name_or_path, "context", "context_length", ("max_position_embeddings", "n_positions"))


def _model_figure(name_or_path: str, field: str, gguf_key: str, config_keys: tuple[str, ...]) -> int | None:
    """One positive integer of a model's shape from the cheapest place that holds it (see model_depth)."""
    try:
        kind = model_kind(name_or_path)
    except (TypeError, ValueError):
        return None
    if kind == "registry":
        return getattr(REGISTRY[name_or_path], field) or None
    if kind == "gguf":
        return _gguf_figure(Path(name_or_path).expanduser(), gguf_key)
    if kind == "folder":
        return _config_figure(Path(name_or_path).expanduser() / "config.json", config_keys)
    try:  # a hub id: its config where the local cache holds one
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(name_or_path, "config.json")
    except Exception:  # noqa: BLE001 -- no cache, a malformed id: the load says what is wrong
        return None
    return _config_figure(Path(cached), config_keys) if isinstance(cached, str) else None


def _config_figure(path: Path, keys: tuple[str, ...]) -> int | None:
    """The first of ``keys`` a transformers config holds (GPT-2 and Bloom spell them ``n_layer``/``n_positions``;
    a multimodal config holds them in its text model's); None if unreadable or not a positive integer."""
    try:
        cfg = loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(cfg, dict) and not any(k in cfg for k in keys) and isinstance(cfg.get("text_config"), dict):
        cfg = cfg["text_config"]
    n = next((cfg[k] for k in keys if k in cfg), None) if isinstance(cfg, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None


# GGUF value types of fixed width (little-endian struct codes); 8 is a string, 9 an array
_GGUF_FIXED = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def _gguf_figure(path: Path, key: str, max_keys: int = 256) -> int | None:
    """``<architecture>.<key>`` (``block_count``, ``context_length``) from a GGUF file's header. The key-value
    pairs precede the tensors and the architecture's keys the tokenizer's vocabulary, so this reads a few hundred
    bytes, where the gguf package's reader parses every one (2.3 s for the test model). None for anything
    unexpected: the load decides."""
    def read(f, code: str):
        size = struct.calcsize(code)
        data = f.read(size)
        if len(data) < size:
            raise EOFError
        return struct.unpack("<" + code, data)[0]

    def text(f) -> str:
        n = read(f, "Q")
        if n > 1 << 16:  # no key or architecture name is that long: a damaged file (and no 2^60-byte read)
            raise EOFError
        return f.read(n).decode("utf-8")

    def skip(f, kind: int) -> None:
        if kind == 8:
            f.seek(read(f, "Q"), 1)
        elif kind == 9:
            item, n = read(f, "I"), read(f, "Q")
            if item in _GGUF_FIXED:
                f.seek(n * struct.calcsize(_GGUF_FIXED[item]), 1)
            elif n > 1 << 24:  # no header holds an array that long: a damaged file
                raise EOFError
            else:
                for _ in range(n):
                    skip(f, item)
        else:
            read(f, _GGUF_FIXED[kind])

    try:
        with open(path, "rb") as f:
            if f.read(4) != b"GGUF" or read(f, "I") < 2:
                return None
            read(f, "Q")  # the tensor count
            arch, counts = None, {}
            for _ in range(min(read(f, "Q"), max_keys)):
                name, kind = text(f), read(f, "I")
                if name == "general.architecture" and kind == 8:
                    arch = text(f)
                elif name.endswith("." + key) and kind in (4, 5, 10, 11):
                    counts[name] = read(f, _GGUF_FIXED[kind])
                else:
                    skip(f, kind)
                n = counts.get(f"{arch}.{key}")
                if n is not None:
                    return n if n > 0 else None
    except (OSError, EOFError, KeyError, ValueError, OverflowError, struct.error):  # UnicodeDecodeError is a ValueError
        return None
    return None
