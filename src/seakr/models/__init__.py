"""Language models: the protocols and capabilities, the packaged-model registry and the transformers backend."""

import os

from ..common.console import unknown_key
from ..common.jsontext import native
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
    name = model_path(name)
    from .hf import HFLanguageModel

    _check_load_options(HFLanguageModel, kwargs)
    return HFLanguageModel(name, **{k: native(v) for k, v in kwargs.items()})  # threads=np.int64(2) from a sweep


#: How the model loads, set beside a method's options but not one of them: (flag, a grid's top-level key, the
#: Python keyword of ``load_model`` and ``SeaKR.from_config``).
MODEL_OPTIONS = {"precision": ("--precision", "precision", "precision"), "device": ("--device", "device", "device"),
                 "threads": ("--threads", "threads", "threads"), "layer": ("--layer", "layer", "state_layer"),
                 "state_layer": ("--layer", "layer", "state_layer"),
                 "state_source": ("--state-source", "state_source", "state_source")}


def _check_load_options(cls, kwargs: dict) -> None:
    """An option ``load_model`` does not take, with the closest it does (``layer=``, the command line's
    ``--layer``, is ``state_layer=``)."""
    import inspect

    allowed = [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "model") and not p.startswith("_")]
    for key in kwargs:
        if key in MODEL_OPTIONS and MODEL_OPTIONS[key][2] != key:  # the command line's name for it (layer)
            raise TypeError(f"load_model: unknown option {key!r} (did you mean {MODEL_OPTIONS[key][2]!r}?)")
        if key not in allowed:
            raise TypeError(unknown_key("load_model", key, allowed).replace("unknown key", "unknown option", 1))


__all__ = [
    "ATTENTION", "CAPABILITIES", "CHAT", "DEFAULT_MODEL", "GENERATE", "NEXT_TOKEN", "REGISTRY", "STATES", "TEST_MODEL",
    "MODEL_OPTIONS", "Generation", "GenerationConfig", "LanguageModel", "MissingCapability", "ModelNotInstalled", "Sample",
    "load_model", "model_path", "require", "resolve",
]
