"""benchmarks/shipped_calibration.py on hand-made rows: which candidates it reads, and the figures by hand."""

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "shipped_calibration.py"


@pytest.fixture(scope="module")
def cal():
    spec = importlib.util.spec_from_file_location("shipped_calibration", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(SCRIPT.parent))  # its `_common` import, as running the script finds it
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return mod


def test_the_forms_read_from_rows(tmp_path, cal):
    rows = [{"final": {"candidates": {"check": {"p": 0.9, "f1": 1.0}}}},  # answered by the check: no final pair
            {"final": {"candidates": {"check": {"p": 0.1, "f1": 0.0}, "rationale": {"p": 0.3, "f1": 0.4},
                                      "knowledge": {"p": 0.7, "f1": 0.5}}}},
            {"final": {"candidates": {"last step": {"answer": "x", "u": None, "f1": 1.0}}}}]  # another method's row
    (tmp_path / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = cal.pairs([str(tmp_path)])
    assert got["check"][0].tolist() == [0.9, 0.1] and got["check"][1].tolist() == [True, False]
    assert got["rationale"][1].tolist() == [False] and got["knowledge"][1].tolist() == [True]  # F1 0.5 is right


def test_the_figures_by_hand(cal):
    p = np.array([0.05, 0.15, 0.95, 0.92])
    right = np.array([False, True, False, True])
    f = cal.figures(p, right)
    assert f["n"] == 4 and f["right"] == 0.5 and f["mean_p"] == pytest.approx(0.5175)
    # bins 0.0-0.1 (P 0.05, right 0), 0.1-0.2 (0.15, 1), 0.9-1.0 (0.935, 0.5): |0.05|/4 + |0.15-1|/4 + 2*|0.935-0.5|/4
    assert f["ece"] == pytest.approx((0.05 + 0.85 + 2 * 0.435) / 4)
    assert f["brier"] == pytest.approx((0.05 ** 2 + 0.85 ** 2 + 0.95 ** 2 + 0.08 ** 2) / 4)
    assert f["auroc_right"] == pytest.approx(0.5)  # right {0.15, 0.92} above wrong {0.05, 0.95} in 2 of 4 pairs
    assert [b["n"] for b in f["bins"]] == [1, 1, 2] and f["ci"][0] <= f["mean_p_minus_right"] <= f["ci"][1]
    assert cal.figures(np.array([0.2, 0.4]), np.array([False, False]))["auroc_right"] is None  # one class: none
