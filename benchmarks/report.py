"""A report set's figures, read from its committed rows (no model runs): SeaKR with every default beside IRCoT and
DRAGIN on the same questions, each run one after the other on one quiet machine (benchmarks/configs/report.toml).

    python benchmarks/report.py RUNS_DIR > RUNS_DIR/report.json
    python benchmarks/report.py RUNS_DIR RUNS_DIR ...   (several shards of one file, their questions pooled)

It prints, over the questions every run answered: each method's F1 and seconds a question; SeaKR's paired
difference from IRCoT and from DRAGIN with a 95 % bootstrap CI; the knowledge check's own answer alone (the target
says SeaKR must not fall below it); SeaKR's seconds over IRCoT's; and the questions split by what SeaKR's gate did
(answered from memory, or ran the chain), each side with both methods' F1. ``RUNS_DIR/paused.json`` ({run: {id:
seconds}}) holds the seconds a run was stopped (SIGSTOP, while a test ran on the same cores) with a question in
flight; they are taken off that question's time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from decide import rows  # noqa: E402  (its sibling: a run's rows, stopped seconds taken off)
from seakr.eval.metrics import paired_bootstrap  # noqa: E402


def from_memory(r: dict) -> bool:
    """SeaKR's gate answered with the knowledge check's answer (no chain ran)."""
    return (r.get("final") or {}).get("choice") == "check" and not (r.get("totals") or {}).get("retrievals")


def figures(runs: dict[str, dict[str, dict]], seakr: str, others: list[str]) -> dict:
    ids = [i for i in runs[seakr] if all(i in runs[o] for o in others)]
    if not ids:
        return {"n": 0}
    mean = lambda run, key="f1": statistics.mean(runs[run][i][key] for i in ids)  # noqa: E731
    out: dict = {"n": len(ids), "f1": {r: mean(r) for r in (seakr, *others)},
                 "seconds": {r: mean(r, "seconds") for r in (seakr, *others)}}
    s = [runs[seakr][i]["f1"] for i in ids]
    out["seakr_minus"] = {o: paired_bootstrap(s, [runs[o][i]["f1"] for i in ids]) for o in others}
    out["seconds_over"] = {o: out["seconds"][seakr] / out["seconds"][o] for o in others}
    check = [((runs[seakr][i].get("final") or {}).get("candidates") or {}).get("check", {}).get("f1") for i in ids]
    if all(c is not None for c in check):
        out["check_alone"] = {"f1": statistics.mean(check), "seakr_minus": paired_bootstrap(s, check)}
    split = {"from_memory": [i for i in ids if from_memory(runs[seakr][i])]}
    split["chain"] = [i for i in ids if i not in set(split["from_memory"])]
    out["split_by_gate"] = {name: {"n": len(sel), **({r: statistics.mean(runs[r][i]["f1"] for i in sel)
                                                      for r in (seakr, *others)} if sel else {})}
                            for name, sel in split.items()}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", type=Path, nargs="+", help="a runs folder, or several (shards: their questions pooled)")
    ap.add_argument("--seakr", default="seakr-default")
    ap.add_argument("--others", default="ircot,dragin")
    a = ap.parse_args()
    others = [o for o in a.others.split(",") if all((d / o / "scores.jsonl").is_file() for d in a.runs)]
    runs: dict[str, dict] = {r: {} for r in (a.seakr, *others)}
    for d in a.runs:
        paused = json.loads((d / "paused.json").read_text()) if (d / "paused.json").is_file() else {}
        for r in runs:
            runs[r].update(rows(d / r / "scores.jsonl", paused.get(r)))
    # what was not the default, so the tests replay it as run
    said = {k: v for k, v in (("seakr", a.seakr), ("others", others)) if getattr(a, k) != ap.get_default(k)}
    print(json.dumps(said | figures(runs, a.seakr, others), indent=1))


if __name__ == "__main__":
    main()
