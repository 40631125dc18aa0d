"""The re-rank decision with a learned candidate probe: fitted on train questions, measured on dev.

  python benchmarks/rerank_probe.py [--ship]

Reads re-rank studies (``seakr rerank-study``, which keep each candidate's greedy step state and the
engine's scores): TRAIN to fit, DEV to report. Fits three logistic probes for "the passage is not a
supporting one", cross-validated by question on train: the step state with the engine's rank and score
(the shipped one), the state alone, and the engine's features alone. On each dev study: the
within-question AUROC (gold against non-gold candidates) and recall@1 of the engine's order, of each
probe and, where a study of the paper's rule on the same questions exists, of the lowest U; recall@1
paired against the engine's order. Writes rerank-probe.json/.md under benchmarks/results/rerank-probe-qwen;
``--ship`` also writes the full probe into the package (seakr/probes/data).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from seakr.eval.metrics import paired_bootstrap
from seakr.eval.rowlog import read_results
from seakr.eval.selfknow import rerank_signal
from seakr.eval.fitting import candidate_rows, fit_candidate_probe
from seakr.probes.probe import packaged_name

RES = Path(__file__).parent / "results"
OUT = RES / "rerank-probe-qwen"
TRAIN = ["rerank-qwen-train-hotpotqa100", "rerank-qwen-train-2wiki100"]
DEV = {"hotpotqa dev_hard100": ("rerank-qwen-hotpotqa100-greedy", "rerank-qwen-hotpotqa100"),
       "2wiki dev_first100": ("rerank-qwen-2wiki100-greedy", None)}  # (states study, the paper rule's U study)


def probes(train: list[Path]) -> dict:
    return {"state+engine": fit_candidate_probe(train), "state": fit_candidate_probe(train, with_engine=False),
            "engine": fit_candidate_probe(train, with_state=False)}


def p_support(probe, state, engine) -> float:
    """P(supporting) of one candidate under a probe that reads the state, the engine's features, or both."""
    has_state = probe.dim > len(probe.features)
    return 1.0 - probe.score(state if has_state else np.zeros(0), engine if probe.features else None)


def one_dev(study: Path, paper: Path | None, fitted: dict) -> dict:
    c = candidate_rows([study])
    by_q: dict[str, list[int]] = {}
    for j, (qid, _rank) in enumerate(c["keys"]):
        by_q.setdefault(qid, []).append(j)
    u_rows = {r["id"]: r for r in read_results(paper / "rerank_rows.jsonl")} if paper else {}
    rows = {r["id"]: r for r in read_results(study / "rerank_rows.jsonl")}
    scorers = {"engine order": lambda j: -c["keys"][j][1]}
    for name, p in fitted.items():
        scorers[f"probe: {name}"] = (lambda p: lambda j: p_support(p, c["states"][j], c["engine"][j]))(p)
    questions = {name: [([f(j) for j in js], [not c["wrong"][j] for j in js]) for js in by_q.values()]
                 for name, f in scorers.items()}
    same = [q for q, js in by_q.items() if q in u_rows and u_rows[q]["titles"] == rows[q]["titles"]]
    if same:  # the paper's rule (lowest U), on the questions whose candidates are the same passages
        questions["lowest U (paper)"] = [([-(u if u is not None else math.inf) for u in u_rows[q]["u"]],
                                          [t in rows[q]["gold"] for t in rows[q]["titles"]]) for q in same]
    out = {name: rerank_signal(qs) for name, qs in questions.items()}
    base = out["engine order"]["top1"]
    for name, r in out.items():
        if name != "engine order" and len(r["top1"]) == len(base):
            r["recall@1_minus_engine"] = paired_bootstrap(r["top1"], base)
    for r in out.values():
        del r["top1"]
    return {"n_questions": len(by_q), "n_candidates": len(c["keys"]), "paper_rule_questions": len(same), "scores": out}


def markdown(res: dict) -> str:
    lines = ["# The re-rank decision: a candidate probe against the engine's order and the paper's lowest U", "",
             f"Fitted on train re-rank studies ({', '.join(res['train'])}; {res['train_candidates']} candidates), "
             "cross-validated by question; reported on dev only. Regenerate: `python benchmarks/rerank_probe.py`.", "",
             "| probe | CV AUROC (train, by question) | C |", "|---|---|---|"]
    lines += [f"| {k} | {v['cv_auroc']:.3f} | {v['C']:g} |" for k, v in res["probes"].items()]
    for name, d in res["dev"].items():
        lines += ["", f"## {name} ({d['n_questions']} questions, {d['n_candidates']} candidates)", "",
                  "| rule | within-question AUROC (gold vs not) | recall@1 | minus the engine's order (paired) |",
                  "|---|---|---|---|"]
        for rule, r in d["scores"].items():
            ci = r["auroc_ci95"]
            a = "–" if r["auroc_within"] is None else f"{r['auroc_within']:.3f} (CI {ci[0]:.3f}..{ci[1]:.3f}, {r['pairs_questions']} q)"
            diff = r.get("recall@1_minus_engine")
            dd = "" if diff is None else f"{100 * diff['mean_difference']:+.1f} pts (CI {100 * diff['ci95'][0]:+.1f}..{100 * diff['ci95'][1]:+.1f})"
            lines.append(f"| {rule} | {a} | {r['recall@1']:.3f} ({r['n']} q) | {dd} |")
        if d["paper_rule_questions"]:
            lines.append(f"\nThe lowest-U row is the earlier k = 20 study of the same questions (plain prompts), on the "
                         f"{d['paper_rule_questions']} questions whose three candidates are the same passages.")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ship", action="store_true", help="write the state+engine probe into seakr/probes/data")
    args = ap.parse_args()
    train = [RES / t for t in TRAIN if (RES / t / "rerank_rows.jsonl").exists()]
    fitted = probes(train)
    res = {"model": fitted["state+engine"].model, "train": [t.name for t in train],
           "train_candidates": fitted["state+engine"].provenance["n"],
           "probes": {k: {"cv_auroc": p.provenance["cv_auroc"], "C": p.C, "n": p.provenance["n"]} for k, p in fitted.items()},
           "dev": {name: one_dev(RES / s, RES / u if u else None, fitted)
                   for name, (s, u) in DEV.items() if (RES / s / "rerank_rows.jsonl").exists()}}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "rerank-probe.json").write_text(json.dumps(res, indent=2))
    (OUT / "rerank-probe.md").write_text(markdown(res))
    if args.ship:
        p = fitted["state+engine"]
        path = Path(__file__).parents[1] / "src" / "seakr" / "probes" / "data" / packaged_name(p.model, "candidate")
        p.save(path)
        print(f"shipped {path}")
    print(markdown(res))


if __name__ == "__main__":
    main()
