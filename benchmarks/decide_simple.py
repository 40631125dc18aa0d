"""Simple mode's gate and re-rank, replayed from the decision runs' rows (no model runs;
``benchmarks/configs/decide-simple.toml`` says which runs, ``docs/results.md`` "2026-12-07 (simple QA)" the rule).

Each run records the branches a rule needs, and every answer is greedy, so each rule replays from them:

* ``step-always-engine``: the closed-book answer with its U (the step gate's), and the top-1 passage's answer;
* ``probe-never-sure-engine``: the knowledge check's answer with its P(correct) (the probe gate's), and the top-1's;
* ``probe-never-sure-min-u``: the check again, and the answer of each of BM25's top 3 with the lowest U kept (the
  paper's re-rank).

A question's seconds under a rule are the seconds of the calls that rule makes, from the full rows' model calls
(``results.jsonl``, kept local: they hold the questions).

    python benchmarks/decide_simple.py DIR [DIR ...] > benchmarks/results/decide-simple-qwen/decide.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from decide import call_seconds, rows  # noqa: E402  (its sibling: a run's rows; seconds by stage)
from seakr.eval.metrics import paired_bootstrap  # noqa: E402
from seakr.methods.text import is_unknown  # noqa: E402

RUNS = {"step": "step-always-engine", "probe": "probe-never-sure-engine", "min_u": "probe-never-sure-min-u"}
LEVEL = 0.5  # the multi-hop gate's level (the probe runs record gate_p 1.0: never sure)


#: Simple mode's stages: the closed-book answer, the check, the passages' answers.
STAGES = ("direct", "check", "rerank")


def question(runs: dict[str, dict], secs: dict[str, dict], delta: float) -> dict[str, tuple[float, float]]:
    """{rule: (F1, seconds)} of one question under every rule; ``delta``: the step gate's, as its run recorded it."""
    c = {k: r["final"]["candidates"] for k, r in runs.items()}
    direct, check = c["step"]["direct"], c["probe"]["check"]
    top1, min_u = c["probe"]["passage"], c["min_u"]["passage"]
    closed_s, check_s = secs["step"]["direct"], secs["probe"]["check"]
    top1_s, min_u_s = secs["probe"]["rerank"], secs["min_u"]["rerank"]
    unsure = direct["u"] is None or direct["u"] > delta
    sure = check["p"] >= LEVEL and not is_unknown(check["answer"])
    return {"closed-book": (direct["f1"], closed_s),
            "always+top1": (top1["f1"], closed_s + top1_s),  # the code asks the closed-book answer first
            "always+min_u": (min_u["f1"], closed_s + min_u_s),
            "step+top1": (top1["f1"], closed_s + top1_s) if unsure else (direct["f1"], closed_s),
            "step+min_u": (min_u["f1"], closed_s + min_u_s) if unsure else (direct["f1"], closed_s),
            "probe+top1": (check["f1"], check_s) if sure else (top1["f1"], check_s + top1_s),
            "probe+min_u": (check["f1"], check_s) if sure else (min_u["f1"], check_s + min_u_s),
            "_step_retrieves": (float(unsure), 0.0), "_probe_retrieves": (float(not sure), 0.0)}


def figures(dirs: list[Path]) -> dict:
    per: dict[str, list[tuple[float, float]]] = {}
    sets = {}
    for d in dirs:
        runs = {k: rows(d / name / "scores.jsonl") for k, name in RUNS.items()}
        full = {k: rows(d / name / "results.jsonl") for k, name in RUNS.items()}
        delta = json.loads((d / RUNS["step"] / "config.json").read_text())["method"]["delta"]  # the packaged one
        ids = [i for i in runs["step"] if all(i in runs[k] and i in full[k] for k in RUNS)]
        got = [question({k: runs[k][i] for k in RUNS}, {k: call_seconds(full[k][i], STAGES) for k in RUNS}, delta)
               for i in ids]
        sets[d.name] = {rule: 100 * statistics.mean(g[rule][0] for g in got) for rule in got[0]} | {"n": len(ids)}
        for g in got:
            for rule, v in g.items():
                per.setdefault(rule, []).append(v)
    rules = {r: {"f1": 100 * statistics.mean(f for f, _ in v), "seconds": statistics.mean(s for _, s in v)}
             for r, v in per.items() if not r.startswith("_")}
    rerank = "min_u" if rules["always+min_u"]["f1"] >= rules["always+top1"]["f1"] + 0.5 else "top1"
    gates = {g: rules[f"{g}+{rerank}"] for g in ("step", "probe", "always")}
    best = max(v["f1"] for v in gates.values())
    gate = min((g for g, v in gates.items() if v["f1"] >= best - 0.5), key=lambda g: gates[g]["seconds"])
    paper = [100 * f for f, _ in per["step+min_u"]]
    chosen = [100 * f for f, _ in per[f"{gate}+{rerank}"]]
    return {"n": len(paper), "delta": delta, "level": LEVEL, "rules": rules, "by_set": sets,
            "retrieval_rate": {"step": statistics.mean(f for f, _ in per["_step_retrieves"]),
                               "probe": statistics.mean(f for f, _ in per["_probe_retrieves"])},
            "chosen": {"rerank": rerank, "gate": gate, "minus_paper": paired_bootstrap(chosen, paper)}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", type=Path, nargs="+")
    print(json.dumps(figures(ap.parse_args().dirs), indent=1))


if __name__ == "__main__":
    main()
