"""Language models: the protocols and capabilities, the packaged-model registry and the transformers backend."""

import os

from .base import (ATTENTION, CAPABILITIES, CHAT, GENERATE, NEXT_TOKEN, STATES, Generation, GenerationConfig,
                   LanguageModel, MissingCapability, Sample, require)
from .registry import DEFAULT_MODEL, REGISTRY, TEST_MODEL, ModelNotInstalled, resolve


def model_path(name: "str | os.PathLike") -> str:
    """A model's name or path as text (a ``pathlib.Path`` too); any other type refused in one line."""
    if not isinstance(name, (str, os.PathLike)):
        raise TypeError(f"model: expected a registry name, a .gguf file or a model folder, got {type(name).__name__}")
    if not os.fspath(name).strip():  # read as the default model, without a word
        raise ValueError("model: empty; name a model, or leave it out for the default")
    return os.fspath(name)


def load_model(name: "str | os.PathLike" = DEFAULT_MODEL, **kwargs) -> "LanguageModel":
    """Load a registry name, GGUF file or HF folder (a ``pathlib.Path`` too) as a :class:`HFLanguageModel`
    (lazy torch import: the name is checked first)."""
    from ..textio import native

    name = model_path(name)
    from .hf import HFLanguageModel

    return HFLanguageModel(name, **{k: native(v) for k, v in kwargs.items()})  # threads=np.int64(2) from a sweep


__all__ = [
    "ATTENTION", "CAPABILITIES", "CHAT", "DEFAULT_MODEL", "GENERATE", "NEXT_TOKEN", "REGISTRY", "STATES", "TEST_MODEL",
    "Generation", "GenerationConfig", "LanguageModel", "MissingCapability", "ModelNotInstalled", "Sample",
    "load_model", "model_path", "require", "resolve",
]
