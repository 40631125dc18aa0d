"""Evaluation: datasets, metrics, the resumable runner, calibration and self-awareness studies."""

from .datasets import Example, load_dataset
from .metrics import exact_match, f1_score, normalize
from .compare import compare
from .runner import run_eval

__all__ = ["Example", "compare", "exact_match", "f1_score", "load_dataset", "normalize", "run_eval"]
