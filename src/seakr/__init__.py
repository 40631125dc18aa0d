"""seakr: self-aware knowledge retrieval (SeaKR) for adaptive retrieval-augmented generation.

``from seakr import SeaKR`` is lazy: importing the package does not import torch.
"""

__version__ = "0.1.0"


def __getattr__(name):
    if name in ("SeaKR", "SeaKRConfig"):
        from .methods import seakr as _m

        return getattr(_m, name)
    if name in ("load_model", "GenerationConfig"):
        from . import models

        return getattr(models, name)
    if name == "open_engine":
        from .search import open_engine

        return open_engine
    raise AttributeError(name)
