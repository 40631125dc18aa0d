"""benchmarks/stop_after_step.py on hand-made rows: which questions it scores, and the stop curve's F1,
retrievals and savings at a level, computed by hand."""

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "stop_after_step.py"


@pytest.fixture(scope="module")
def stop():
    spec = importlib.util.spec_from_file_location("stop_after_step", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def row(i, f1, retrievals, choice, p_chosen, p_knowledge=None, k_f1=None):
    cands = {"rationale": {"p": p_chosen, "f1": f1}, "knowledge": {"p": p_knowledge if p_knowledge is not None else p_chosen,
                                                                  "f1": k_f1 if k_f1 is not None else f1}}
    if choice == "check":
        cands = {"check": {"p": p_chosen, "f1": f1}}
    return {"id": i, "order": int(i[1:]), "f1": f1, "totals": {"retrievals": retrievals},
            "final": {"choice": choice, "candidates": cands}}


def write(folder: Path, rows):
    folder.mkdir()
    (folder / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_the_curve_by_hand(tmp_path, stop):
    write(tmp_path / "one", [row("q0", 1.0, 1, "knowledge", 0.8), row("q1", 0.0, 1, "rationale", 0.6),
                             row("q2", 0.0, 1, "knowledge", 0.2), row("q3", 1.0, 0, "check", 0.9)])
    write(tmp_path / "chain", [row("q0", 0.5, 3, "knowledge", 0.1), row("q1", 1.0, 2, "knowledge", 0.1),
                               row("q2", 1.0, 3, "knowledge", 0.1), row("q3", 1.0, 0, "check", 0.9)])
    res = stop.study(str(tmp_path / "one"), str(tmp_path / "chain"))
    assert res["n"] == 4 and res["chained"] == 3  # the check answered q3 at once in both
    assert res["auroc_wrong"]["chosen"] == 1.0  # the two wrong one-step answers have the lower P
    at = {c["tau"]: c for c in res["curve"]}
    c = at[0.5]  # q0 (0.8) and q1 (0.6) stop: F1 (1 + 0 + 1) / 3, retrievals (1 + 1 + 3) / 3 of the chain's 8
    assert c["stopped"] == 2 and c["f1"] == pytest.approx(2 / 3) and c["retrievals"] == pytest.approx(5 / 3)
    assert c["saved"] == pytest.approx(1 - 5 / 8) and c["minus_chain"]["mean_difference"] == pytest.approx(2 / 3 - 2.5 / 3)
    c = at[0.7]  # only q0 stops: F1 (1 + 1 + 1) / 3 beats the chain's 2.5 / 3 with 2 retrievals saved
    assert c["f1"] == pytest.approx(1.0) and c["saved"] == pytest.approx(2 / 8)
    assert 0.7 in res["qualifying"] and 0.5 not in res["qualifying"]
    assert "| 0.70 | 1 | 100.0 | 2.00 | 25 % |" in stop.markdown(res)


def test_the_committed_study_follows_from_its_committed_rows(stop):
    folder = SCRIPT.parent / "results" / "stop-after-step-qwen"
    committed = json.loads((folder / "study.json").read_text())
    res = stop.study(str(folder / "train-2wiki-fresh80-step1"), str(folder / "train-2wiki-fresh80-chain"))
    assert json.loads(json.dumps({**res, "runs": committed["runs"]})) == committed
    assert (folder / "study.md").read_text() == stop.markdown(committed)
