"""Learned self-knowledge: probes on one hidden state, and calibration maps from a score to a
probability of being right, per decision form.

SeaKR's EigenScore compares k sampled states; a probe reads *one* state (of the greedy answer) and
was fitted on labelled questions to say how likely that answer is wrong (Probing-RAG; semantic-entropy
probes). A calibration map turns any score of one form into P(correct) for that form, so two forms
(a rationale-based and a knowledge-based answer) are compared on one scale. Both are small JSON files
with their provenance, fitted per model on tuning data (``seakr probe fit``) and shipped in
``probes/data`` for the packaged models.
"""

from .calibration import Calibration, fit_calibration
from .probe import Probe, fit_probe, load_probe, packaged_probe

__all__ = ["Calibration", "Probe", "fit_calibration", "fit_probe", "load_probe", "packaged_probe"]
