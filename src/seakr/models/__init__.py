"""Language models: the protocols and capabilities, the packaged-model registry and the transformers backend."""

from .base import (ATTENTION, CAPABILITIES, CHAT, GENERATE, NEXT_TOKEN, STATES, Generation, GenerationConfig,
                   LanguageModel, MissingCapability, Sample, require)
from .registry import DEFAULT_MODEL, REGISTRY, TEST_MODEL, ModelNotInstalled, resolve


def load_model(name: str = DEFAULT_MODEL, **kwargs) -> "LanguageModel":
    """Load a registry name, GGUF file or HF folder as a :class:`HFLanguageModel` (lazy torch import)."""
    from .hf import HFLanguageModel

    return HFLanguageModel(name, **kwargs)


__all__ = [
    "ATTENTION", "CAPABILITIES", "CHAT", "DEFAULT_MODEL", "GENERATE", "NEXT_TOKEN", "REGISTRY", "STATES", "TEST_MODEL",
    "Generation", "GenerationConfig", "LanguageModel", "MissingCapability", "ModelNotInstalled", "Sample",
    "load_model", "require", "resolve",
]
