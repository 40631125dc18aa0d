"""Where a method's retrieval threshold delta comes from when none is given: the model's calibration file, then
the packaged measurement, then the paper's value."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ..common.console import said
from ..common.jsontext import json_file
from ..common.schema import SchemaError, Threshold, schema
from .config import MODES
from ..common.cache import cache_root
from ..models.registry import REGISTRY


#: Fallback threshold: the paper's delta for Llama-2-7B layer 16. Wrong for other models: calibrate.
PAPER_DELTA = -6.0


def default_prompt_style(lm) -> str:
    """The packaged model's measured better prompt style (registry), where the model can take it."""
    style = getattr(REGISTRY.get(str(lm.info().get("model"))), "prompt_style", "plain")
    return style if style == "plain" or style in lm.capabilities else "plain"


def _style_tag(style: str) -> str:
    # U moves with the prompt's wording, so a threshold belongs to a prompt style; plain keeps the old names
    return "" if style == "plain" else f"-{style}"


def _mode_tag(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {said(mode)}")
    return "" if mode == "simple" else f"-{mode}"  # simple-QA calibration keeps the old names


def calibration_path(model_info: dict, style: str = "plain", mode: str = "simple") -> Path:
    name = str(model_info.get("model", "model")).replace("/", "_")
    tap = f"L{model_info.get('state_layer')}-{model_info.get('state_source', 'mlp')}"
    return cache_root() / "calibration" / f"{name}-{tap}{_style_tag(style)}{_mode_tag(mode)}.json"


def _packaged_key(model_info: dict, style: str, mode: str) -> str:
    return (f"{model_info.get('model')}:L{model_info.get('state_layer')}:{model_info.get('state_source', 'mlp')}"
            + (_style_tag(style) + _mode_tag(mode)).replace("-", ":"))


@schema("field", extra="ignore")
class ThresholdFile:
    """A model's calibration file: a threshold per estimator (inf and -inf: never / always retrieve; NaN, which no
    U ever exceeds, is none), beside whatever else `seakr calibrate` records."""

    delta: dict[str, Threshold] = dataclasses.field(default_factory=dict)


def read_thresholds(p: Path) -> dict:
    """A model's calibration file (:class:`ThresholdFile`), checked: a hand-edited or damaged one is named with
    its line, not a traceback, wherever it is read (SeaKR's default, `seakr calibrate`'s write)."""
    d = json_file(p)
    try:
        if not isinstance(d, dict):
            raise SchemaError("expected a JSON object")
        ThresholdFile(**d)
    except SchemaError as e:
        raise ValueError(f"{p}: not a threshold file such as {{\"delta\": {{\"eigen\": -6.0}}}} ({e}): fix it, delete "
                         "it, or run `seakr calibrate` again") from None
    return d


def default_delta(model_info: dict, estimator: str, style: str = "plain", mode: str = "simple") -> tuple[float, str]:
    """The threshold for this model/layer/prompt style/mode/estimator, and where it came from: the
    user's calibration file, else the packaged measurement (methods/deltas.json), for this mode; a
    multi-hop run with neither falls back to the simple-QA values (named as such in the source); else
    the paper's -6 (eigen only)."""
    packaged = json.loads((Path(__file__).parent / "deltas.json").read_text(encoding="utf-8"))
    for m in dict.fromkeys((mode, "simple")):
        p = calibration_path(model_info, style, m)
        if p.exists():
            d = read_thresholds(p)
            if estimator in d.get("delta", {}):
                return float(d["delta"][estimator]), str(p)
        key = _packaged_key(model_info, style, m)
        if not estimator.startswith("_") and estimator in packaged.get(key, {}):  # "_provenance" is not a value
            return float(packaged[key][estimator]), f"packaged:{key}"
    if estimator in ("eigen",):
        return PAPER_DELTA, "paper"
    raise ValueError(f"no threshold for estimator {estimator!r} on {_packaged_key(model_info, style, mode)}: "
                     "give one (delta= in Python, --delta on the command line, \"delta\" in a request's options) or "
                     "run `seakr calibrate`")
