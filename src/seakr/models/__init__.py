"""Language models: the protocol, the packaged-model registry and the transformers backend."""

from .base import Generation, GenerationConfig, LanguageModel, Sample
from .registry import DEFAULT_MODEL, REGISTRY, TEST_MODEL, ModelNotInstalled, resolve


def load_model(name: str = DEFAULT_MODEL, **kwargs) -> "LanguageModel":
    """Load a registry name, GGUF file or HF folder as a :class:`HFLanguageModel` (lazy torch import)."""
    from .hf import HFLanguageModel

    return HFLanguageModel(name, **kwargs)


__all__ = [
    "DEFAULT_MODEL", "REGISTRY", "TEST_MODEL", "Generation", "GenerationConfig", "LanguageModel",
    "ModelNotInstalled", "Sample", "load_model", "resolve",
]
