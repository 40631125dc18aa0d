"""A finished study's summary written again from its rows and recorded configuration: ``--resume`` of a study
with nothing left to do answers from here without loading the model."""

from __future__ import annotations

from pathlib import Path

from .calibrate import _calibration_result
from .detect import _detect_result
from .rerankstudy import _rerank_result
from .summary import selection_summary



def study_of_rows(study: str, out_dir: str, rows: list[dict], cfg: dict, ids=None, write: bool = True) -> dict:
    """A finished study's summary of the questions ``ids`` (None: every row) written again from its rows and
    recorded configuration (as a claimed row log reads them), as the study itself writes it (``write``: a calibration's
    threshold stored in the model's file too)."""
    info, config, out = cfg["method"]["model"], cfg["method"]["config"], Path(out_dir)
    if study == "calibrate":
        def result_of(rs, files):
            return _calibration_result(rs, info, config, "simple", out, write, files=files)
    elif study == "detect":
        def result_of(rs, files):
            return _detect_result(rs, info, cfg.get("setting", "closed-book"), cfg.get("form", "cot"),
                                  config.get("prompt_style"), config["k"], out, files)
    else:
        def result_of(rs, files):
            return _rerank_result(rs, info.get("model"), config["n_candidates"], config["rerank_z"], out, files)
    chosen = rows if ids is None else [r for r in rows if r["id"] in ids]
    return selection_summary(result_of, chosen, rows, study, out)
