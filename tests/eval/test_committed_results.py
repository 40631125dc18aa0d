"""Every result the repository commits still loads as typed rows and summarises to the figures committed
beside it: the eval runs' score rows (``scores.jsonl`` -> ``summary.json``) and the re-rank studies'
rows (``rerank_rows.jsonl`` -> ``rerank.json``). Only committed files are read (a local
``results.jsonl`` with question text is never committed, so a clean clone sees what this test sees)."""

import json
import math
from pathlib import Path

import pytest

from seakr.eval.rows import ResultRow
from seakr.common.runs import SCORES
from seakr.eval.rowlog import read_results
from seakr.eval.summary import summarize
from seakr.eval.rerankstudy import rerank_summary

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
EVAL_RUNS = sorted(p.parent for p in RESULTS.rglob(SCORES) if (p.parent / "summary.json").exists())
RERANK = sorted(p.parent for p in RESULTS.rglob("rerank.json") if (p.parent / "rerank_rows.jsonl").exists())
FIGURES = ("n", "em", "f1", "retrieval_rate", "retrievals_per_question", "model_calls_per_question",
           "sampled_sequences_per_question", "generated_tokens_per_question", "seconds_per_question")


def same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return (a is None and b is None) or (a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12))
    return a == b


def test_there_are_committed_results_to_check():
    assert len(EVAL_RUNS) >= 10 and len(RERANK) >= 3


@pytest.mark.parametrize("run", EVAL_RUNS, ids=lambda p: str(p.relative_to(RESULTS)))
def test_an_eval_run_loads_and_summarises_to_its_committed_figures(run):
    raw = read_results(run / SCORES)
    rows = [ResultRow.from_dict(r) for r in raw]
    committed = json.loads((run / "summary.json").read_text())
    s = summarize(rows, committed.get("name", ""))
    for k in FIGURES:
        if k in committed:
            assert same(s[k], committed[k]), (k, s[k], committed[k])
    # and the typed row writes back the committed score row (old files included)
    for r, row in zip(raw, rows):
        again = row.to_score_dict()
        assert (again["id"], again["prediction"], again["f1"]) == (r["id"], r["prediction"], r["f1"])
        assert [s.get("u") for s in again["steps"]] == [s.get("u") for s in r.get("steps", [])]
        assert {n: c.get("u") for n, c in again["final"]["candidates"].items()} == \
            {n: c.get("u") for n, c in ((r.get("final") or {}).get("candidates") or {}).items()}


@pytest.mark.parametrize("study", RERANK, ids=lambda p: str(p.relative_to(RESULTS)))
def test_a_rerank_study_summarises_to_its_committed_figures(study):
    committed = json.loads((study / "rerank.json").read_text())
    s = rerank_summary(read_results(study / "rerank_rows.jsonl"))
    for k in ("n", "recall@1_engine", "recall@1_self_aware", "recall@1_guarded", "gold_in_top_n"):
        assert same(s[k], committed.get(k)), (k, s[k], committed.get(k))


def _refuse_constant(name):
    raise ValueError(f"{name} is not JSON")


def test_every_committed_json_file_is_strict_json():
    """NaN and Infinity are Python's extensions: jq, JSON.parse and most readers refuse the whole file. An
    undefined figure is null (with its reason beside it where one is needed)."""
    root = RESULTS.parents[1]
    files = [p for d in ("benchmarks", "src") for p in (root / d).rglob("*") if p.suffix in (".json", ".jsonl")]
    bad = []
    for p in files:
        text = p.read_text()
        for doc in (text.splitlines() if p.suffix == ".jsonl" else [text]):
            try:
                doc.strip() and json.loads(doc, parse_constant=_refuse_constant)
            except ValueError as e:
                bad.append(f"{p.relative_to(root)}: {e}")
                break
    assert len(files) > 50 and not bad, bad


@pytest.mark.parametrize("script,figures,rule", [("final_check.py", "final-check-qwen.json", "margins"),
                                                 ("final_vote.py", "final-vote-qwen.json", "vote")])
def test_a_final_choice_decision_replays_from_its_committed_rows(script, figures, rule):
    """A decision replayed from committed chain rows (the check's answer kept dropped; two agreeing answers not
    outvoting the knowledge answer) is what its benchmark computes from those rows today."""
    committed = json.loads((RESULTS / figures).read_text())
    now = _benchmark(script, *(str(RESULTS.parents[1] / r) for r in committed["runs"]))
    assert now["adopt"] is committed["adopt"] is False
    assert [v[rule] for v in now["runs"].values()] == [v[rule] for v in committed["runs"].values()]


def test_the_shipped_gate_level_is_the_one_its_decision_replays_to():
    """The 0.5B's probe gate level in the package is what the written rule gives over the committed rows of both
    decision runs (``benchmarks/gate_level.py --decide``), and the committed verdict is that replay."""
    from seakr.probes.bank import SelfKnowledge

    folder = RESULTS / "gate-level-qwen"
    now = _benchmark("gate_level.py", "--decide", str(folder / "hotpotqa-decide246-every4.json"),
                     str(folder / "2wiki-train-migres500-every8.json"))
    committed = json.loads((folder / "decide.json").read_text())
    assert now == committed
    assert SelfKnowledge("qwen2.5-coder-0.5b").gate_p("probe")[0] == now["level"] == 0.5


def test_drafting_defaults_to_what_its_decisions_say(monkeypatch):
    """Prompt-lookup decoding's verdicts (``benchmarks/lookup_decode.py --decide``) replay from their committed
    rows, and the package ships what they say: off in bf16 (not adopted), on in float32 (adopted); a final answer's
    calls on in bf16 too (adopted)."""
    from seakr.models.lookup import FLOAT32_DRAFT, draft_depths

    monkeypatch.delenv("SEAKR_DRAFT_TOKENS", raising=False)

    verdict = {}
    for name, precision in (("decide.json", "bfloat16"), ("decide-fp32.json", "float32")):
        run = RESULTS / "lookup-decode-qwen" / name
        now = _benchmark("lookup_decode.py", "--decide", str(run))
        committed = json.loads(run.read_text())
        assert now == {k: committed[k] for k in now} and committed["precision"] == precision
        verdict[precision] = now["adopt"]
    assert verdict == {"bfloat16": False, "float32": True}
    # the final answer's calls, decided apart (benchmarks/final_draft.py): on in bf16 (adopted)
    run = RESULTS / "final-draft-qwen" / "decide.json"
    final = _benchmark("final_draft.py", "--decide", str(run))
    assert final == {k: json.loads(run.read_text())[k] for k in final} and final["adopt_drafted"]
    assert draft_depths(None, "bfloat16") == (0, FLOAT32_DRAFT) and draft_depths(None, "float32") == (FLOAT32_DRAFT,) * 2
    assert FLOAT32_DRAFT == committed["draft_tokens"] == final["draft_tokens"]
    assert draft_depths(None, "float32", "cuda") == (0, 0)  # measured on a CPU only


def test_the_float32_head_defaults_to_what_its_decision_says():
    """The float32 head's verdict (``benchmarks/exact_logits.py --decide``) replays from its committed rows, and the
    package ships what it says: off (not adopted)."""
    from seakr.models.options import LoadOptions

    run = RESULTS / "exact-logits-qwen" / "decide.json"
    now = _benchmark("exact_logits.py", "--decide", str(run))
    committed = json.loads(run.read_text())
    assert now == {k: committed[k] for k in now} and committed["precision"] == "bfloat16"
    assert now["adopt"] is False and LoadOptions().exact_logits is False


POOLED = sorted(RESULTS.glob("sanity-*-shards*.json")) + sorted(RESULTS.glob("*-pooled.json"))


@pytest.mark.parametrize("report", sorted(RESULTS.glob("*/report.json")) + sorted(RESULTS.glob("*/*/report.json"))
                         + POOLED,
                         ids=lambda p: str(p.relative_to(RESULTS)))
def test_a_report_replays_from_its_committed_rows(report):
    """A report set's figures (or the pooled figures of several folders, whose file names them, and the runs
    compared where they are not SeaKR's default beside IRCoT and DRAGIN), as docs/results.md cites them, are what
    ``benchmarks/report.py`` computes from the committed rows today."""
    committed = json.loads(report.read_text())
    folders = [RESULTS.parents[1] / r for r in committed.pop("runs", [])] or [report.parent]
    others = ["--others", ",".join(committed["others"])] if "others" in committed else []
    seakr = ["--seakr", committed["seakr"]] if "seakr" in committed else []
    assert _benchmark("report.py", *map(str, folders), *seakr, *others) == committed


@pytest.mark.parametrize("rows", sorted(RESULTS.glob("interleaved-cost-*.jsonl")), ids=lambda p: p.name)
def test_an_interleaved_cost_replays_from_its_committed_rows(rows):
    """The seconds ratio measured with both methods taking turns, as docs/results.md cites it, is what its
    per-question rows give today."""
    assert _benchmark("interleaved_cost.py", "--replay", str(rows)) == json.loads(rows.read_text().splitlines()[-1])


def _benchmark(script: str, *args: str) -> dict:
    """What a benchmark script under ``benchmarks/`` prints (one JSON object), run as its users run it."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, str(RESULTS.parents[0] / script), *args], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out)
