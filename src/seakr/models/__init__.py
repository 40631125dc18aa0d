"""Language models: the protocols and capabilities, the packaged-model registry and the transformers backend."""

import os

from .base import (ATTENTION, CAPABILITIES, CHAT, GENERATE, NEXT_TOKEN, STATES, Generation, GenerationConfig,
                   LanguageModel, MissingCapability, Sample, require)
from .registry import DEFAULT_MODEL, REGISTRY, TEST_MODEL, ModelNotInstalled, resolve


def load_model(name: "str | os.PathLike" = DEFAULT_MODEL, **kwargs) -> "LanguageModel":
    """Load a registry name, GGUF file or HF folder (a ``pathlib.Path`` too) as a :class:`HFLanguageModel`
    (lazy torch import)."""
    if not isinstance(name, (str, os.PathLike)):
        raise TypeError(f"model: expected a registry name, a .gguf file or a model folder, got {type(name).__name__}")
    from .hf import HFLanguageModel

    return HFLanguageModel(os.fspath(name), **kwargs)


__all__ = [
    "ATTENTION", "CAPABILITIES", "CHAT", "DEFAULT_MODEL", "GENERATE", "NEXT_TOKEN", "REGISTRY", "STATES", "TEST_MODEL",
    "Generation", "GenerationConfig", "LanguageModel", "MissingCapability", "ModelNotInstalled", "Sample",
    "load_model", "require", "resolve",
]
