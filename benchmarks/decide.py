"""The decision sample's figures, read from committed rows (no model runs): SeaKR with its chain run on every
question (the knowledge check recorded, not obeyed) beside IRCoT on the same questions. Because the chain is
greedy and the check runs before it, every gate level and every final-choice rule can be replayed exactly from
these rows: a question the gate would answer at once takes the check's answer and the check's cost; any other
takes the chain's answers and costs. The re-rank is replayed where the probe kept the engine's top-1 (then
``rerank=engine`` runs the same chain, at a third of the re-rank's decoding); where it departed, the row says so.

    python benchmarks/decide.py RUNS_DIR [--levels 0.3,0.4,...] > RUNS_DIR/decide.json

The committed rows are the scores (scores.jsonl); the re-rank's departures need the full rows (results.jsonl),
read where they are present.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from seakr.eval.metrics import paired_bootstrap  # noqa: E402
from seakr.methods.records import FinalAnswer  # noqa: E402
from seakr.methods.decisions import most_probable  # noqa: E402

RULES = ("knowledge", "rationale", "check", "probe-pair", "probe-all", "oracle")


def rows(path: Path) -> dict[str, dict]:
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        out.setdefault(r["id"], r)
    return out


def final_of(r: dict, rule: str) -> str:
    """The candidate ``rule`` keeps, from the row's recorded candidates and their P(correct)."""
    c = r["final"]["candidates"]
    fa = {n: FinalAnswer(x["answer"], p=x.get("p") or 0.0) for n, x in c.items()}
    if rule in ("knowledge", "rationale", "check"):
        return rule
    if rule == "probe-pair":
        return most_probable({n: fa[n] for n in ("rationale", "knowledge")})
    if rule == "probe-all":
        return most_probable(fa)
    return max(c, key=lambda n: c[n]["f1"])  # oracle


def check_seconds(r: dict) -> float:
    """The knowledge check's seconds: the model time no stage of the chain claims."""
    s = r["totals"]["seconds"]
    return max(0.0, s["total"] - sum(s.get(k, 0.0) for k in ("pseudo", "search", "rerank", "final")))


def replay(r: dict, level: float | None, rule: str, engine_rerank: bool) -> tuple[float, float]:
    """(F1, seconds) of one question under a gate level (None: never answer at once), a final rule and a re-rank."""
    c = r["final"]["candidates"]
    if level is not None and c["check"]["p"] >= level and c["check"]["answer"].strip().lower() not in ("", "unknown"):
        return c["check"]["f1"], check_seconds(r)
    secs = r["totals"]["seconds"]["total"]
    if engine_rerank:
        secs -= r["totals"]["seconds"].get("rerank", 0.0) * (2 / 3)
    return c[final_of(r, rule)]["f1"], secs


def departures(r: dict) -> tuple[int, int]:
    """(retrievals whose re-rank left the engine's top-1, retrievals re-ranked), from a full row (results.jsonl:
    its steps list the candidates; the committed scores do not)."""
    steps = [s for s in r["trace"]["steps"] if s.get("candidates")]
    return sum(not s["candidates"][0].get("chosen") for s in steps), len(steps)


def figures(seakr: dict, ircot: dict, levels: list[float], full: dict | None = None) -> dict:
    ids = [i for i in seakr if i in ircot and "check" in seakr[i]["final"]["candidates"]]
    irc = [ircot[i]["f1"] for i in ids]
    irc_s = statistics.mean(ircot[i]["seconds"] for i in ids)
    out = {"n": len(ids), "ircot": {"f1": statistics.mean(irc), "seconds": irc_s}, "rules": {}, "gate": []}
    dep = [departures(full[i]) for i in ids] if full else []
    out["rerank"] = None if not full else {"departed": sum(d for d, _ in dep), "retrievals": sum(n for _, n in dep),
                     "questions_with_a_departure": sum(d > 0 for d, _ in dep)}
    for rule in RULES:
        f = [replay(seakr[i], None, rule, False)[0] for i in ids]
        out["rules"][rule] = {"f1": statistics.mean(f), "minus_ircot": paired_bootstrap(f, irc)}
    for level in levels:
        for rule in ("probe-pair", "probe-all"):
            for eng in (False, True):
                got = [replay(seakr[i], level, rule, eng) for i in ids]
                f = [x for x, _ in got]
                out["gate"].append({"level": level, "rule": rule, "rerank": "engine" if eng else "probe",
                                    "f1": statistics.mean(f), "seconds": statistics.mean(s for _, s in got),
                                    "ratio_to_ircot": statistics.mean(s for _, s in got) / irc_s,
                                    "answered_at_once": sum(seakr[i]["final"]["candidates"]["check"]["p"] >= level
                                                            for i in ids) / len(ids),
                                    "minus_ircot": paired_bootstrap(f, irc)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", type=Path)
    ap.add_argument("--seakr", default="seakr-chain-always")
    ap.add_argument("--ircot", default="ircot")
    ap.add_argument("--levels", default="0.2,0.3,0.4,0.5,0.6,0.7,0.8,1.01")
    a = ap.parse_args()
    s, i = rows(a.runs / a.seakr / "scores.jsonl"), rows(a.runs / a.ircot / "scores.jsonl")
    full = a.runs / a.seakr / "results.jsonl"
    print(json.dumps(figures(s, i, [float(x) for x in a.levels.split(",")], rows(full) if full.is_file() else None),
                     indent=1))


if __name__ == "__main__":
    main()
