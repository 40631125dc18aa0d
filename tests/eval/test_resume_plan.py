"""``--resume`` is one comparison before the model loads: the selection (every), the index by its checksum and the
model's settings are compared with what the run recorded, for a finished run too, and a row that cannot be read in
results.jsonl is run again whatever scores.jsonl says."""

import json
import time

import pytest

from helpers import HOTPOT, run_cli
from seakr.eval.rowlog import joined_rows, read_results

pytestmark = pytest.mark.slow
COT = ["eval", "--model", "smollm2-135m", "--data", HOTPOT, "--method", "cot", "--option", "max_new_tokens=8",
       "--option", "n_shot=1"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = tmp_path_factory.mktemp("resume") / "run"
    r = run_cli(*COT, "--limit", "4", "--out", str(out))
    assert r.returncode == 0, r.stderr
    return out


def _other_precision(run) -> str:
    """A precision other than the one the run recorded ("auto" settles to bf16 on a CPU that computes it natively)."""
    recorded = json.loads((run / "config.json").read_text())["method"]["model"]["precision"]
    return "fp32" if recorded == "bfloat16" else "bf16"


@pytest.mark.parametrize("extra, field", [(["--every", "2"], "every 2 but the run recorded every 1"),
                                          (["--precision", None], "model.precision"),
                                          (["--layer", "3"], "model.state_layer")])
def test_a_resume_with_other_settings_is_refused_before_the_model_loads(finished, extra, field):
    extra = [x if x is not None else _other_precision(finished) for x in extra]
    t = time.perf_counter()
    r = run_cli(*COT, "--limit", "4", "--out", str(finished), "--resume", *extra)
    assert r.returncode == 2 and field in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert "loading" not in r.stderr.lower() and time.perf_counter() - t < 10  # the model did not load
    rows = [json.loads(x) for x in (finished / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and sorted(r["order"] for r in rows) == [0, 1, 2, 3]  # nothing mixed in


def test_a_resume_over_a_changed_index_is_refused_before_the_model_loads(tmp_path):
    from seakr.search import Passage
    from seakr.search.tantivy_engine import TantivyEngine

    idx = tmp_path / "idx"
    TantivyEngine.build([Passage("a", "Jaws", "Jaws is a novel by Peter Benchley.")], idx)
    args = ["eval", "--model", "smollm2-135m", "--data", HOTPOT, "--method", "single", "--option", "max_new_tokens=4",
            "--option", "n_shot=1", "--limit", "1", "--index", str(idx), "--out", str(tmp_path / "run")]
    assert run_cli(*args).returncode == 0
    TantivyEngine(idx).add([Passage("b", "Shark", "A shark is a fish.")])
    r = run_cli(*args, "--resume")
    assert r.returncode == 2 and "engine.checksum" in r.stderr, r.stderr


def test_an_unreadable_full_row_runs_again_whatever_the_committed_rows_say(tmp_path):
    full, slim = tmp_path / "results.jsonl", tmp_path / "scores.jsonl"
    full.write_text(json.dumps({"id": "a", "f1": 1.0}) + "\n" + "\0" * 300 + "\n")
    slim.write_text(json.dumps({"id": "a", "f1": 1.0}) + "\n" + json.dumps({"id": "b", "f1": 0.5}) + "\n")
    torn: list = []
    rows = joined_rows(read_results(full, torn=torn), read_results(slim, torn=torn), torn)
    assert [r["id"] for r in rows] == ["a"]  # b's full row may be the zeros: b runs again
    torn = []
    rows = joined_rows(read_results(full.with_name("none.jsonl"), torn=torn), read_results(slim, torn=torn), torn)
    assert [r["id"] for r in rows] == ["a", "b"]  # resumed elsewhere from the committed rows alone: all done
