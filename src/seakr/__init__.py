"""seakr: self-aware knowledge retrieval (SeaKR) for adaptive retrieval-augmented generation."""
__version__ = "0.1.0"
