"""Methods: SeaKR and the paper's baselines over the three protocols (model, engine, estimator)."""

from ..common.console import unknown_choice
from .base import Method, MethodConfig
from .baselines import CoT, DRAGIN, FLARE, IRCoT, SingleRetrieval
from .seakr import SeaKR, SeaKRConfig
from .trace import Answer

METHODS: dict[str, type[Method]] = {m.name: m for m in (SeaKR, CoT, SingleRetrieval, IRCoT, FLARE, DRAGIN)}


def method_name(name: str) -> str:
    """``name`` where it names a method; else the one refusal every door gives, with the nearest name."""
    if name not in METHODS:
        raise ValueError(unknown_choice("method", name, METHODS))
    return name


def build_method(name: str, lm, engine=None, **options) -> Method:
    return METHODS[method_name(name)](lm, engine, **options)


__all__ = ["METHODS", "Answer", "CoT", "DRAGIN", "FLARE", "IRCoT", "Method", "MethodConfig", "SeaKR", "SeaKRConfig",
           "SingleRetrieval", "build_method", "method_name"]
