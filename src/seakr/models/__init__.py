"""Language models: the protocols and capabilities, the packaged-model registry and the transformers backend."""

import os

from .base import (ATTENTION, CAPABILITIES, CHAT, GENERATE, NEXT_TOKEN, STATES, Generation, GenerationConfig,
                   LanguageModel, MissingCapability, Sample, require)
from .options import LOAD_KEYS, MODEL_OPTIONS, LoadOptions
from .registry import DEFAULT_MODEL, REGISTRY, TEST_MODEL, ModelNotInstalled, resolve


def model_path(name: "str | os.PathLike") -> str:
    """A model's name or path as text (a ``pathlib.Path`` too); any other type refused in one line."""
    if not isinstance(name, (str, os.PathLike)):
        raise TypeError(f"model: expected a registry name, a .gguf file or a model folder, got {type(name).__name__}")
    if not os.fspath(name).strip():  # else read as the default model, without a word
        raise ValueError("model: empty; name a model, or leave it out for the default")
    return os.fspath(name)


def load_model(name: "str | os.PathLike" = DEFAULT_MODEL, options: LoadOptions | None = None,
               **knobs) -> "LanguageModel":
    """Load a registry name, GGUF file or HF folder (a ``pathlib.Path`` too) as a :class:`HFLanguageModel`; the
    knobs (:class:`~seakr.models.options.LoadOptions`, or ``options`` already made from them) and the name are
    checked before torch is imported."""
    name = model_path(name)
    opts = options if options is not None else LoadOptions(**knobs)
    from .hf import HFLanguageModel

    return HFLanguageModel(name, options=opts)


__all__ = [
    "ATTENTION", "CAPABILITIES", "CHAT", "DEFAULT_MODEL", "GENERATE", "LOAD_KEYS", "LoadOptions", "NEXT_TOKEN",
           "REGISTRY", "STATES", "TEST_MODEL",
    "MODEL_OPTIONS", "Generation", "GenerationConfig", "LanguageModel", "MissingCapability", "ModelNotInstalled",
           "Sample",
    "load_model", "model_path", "require", "resolve",
]
