"""The decision sample's figures, read from its rows (no model runs): SeaKR with its chain run on every question
(the knowledge check drawn and recorded, never obeyed) beside IRCoT on the same questions.

The chain is greedy and the check runs before it, so every gate level and final-choice rule replays exactly from
these rows: a question the gate would answer at once takes the check's answer and the check's time; any other takes
the chain's answers and times. The re-rank replays exactly where the candidate probe kept BM25's top-1 (then
``rerank=engine`` runs the same chain, decoding only the top-1's step); the run counts where it departed. An engine
re-rank's time is bounded: at least a third of the batched three-candidate call, at most all of it.

    python benchmarks/decide.py RUNS_DIR > RUNS_DIR/decide.json

``RUNS_DIR/<run>/scores.jsonl`` are the committed rows; the per-call seconds and the re-rank's candidates are in the
full rows (``results.jsonl``, kept local: they hold the questions). ``RUNS_DIR/paused.json`` ({run: {id: seconds}})
holds the seconds a run was stopped (SIGSTOP, while a test ran on the same cores) with a question in flight.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from seakr.eval.metrics import paired_bootstrap  # noqa: E402
from seakr.methods.decisions import most_probable  # noqa: E402
from seakr.methods.records import FinalAnswer  # noqa: E402

RULES = ("knowledge", "rationale", "check", "probe-pair", "probe-all", "oracle")


def rows(path: Path, paused: dict | None = None) -> dict[str, dict]:
    """A run's rows by id (the first of a repeated id), each question's stopped seconds (``paused``) taken off its
    time; none for a run not started."""
    out: dict[str, dict] = {}
    if not path.is_file():  # a run not started yet
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        r["seconds"] -= (paused or {}).get(r["id"], 0.0)
        out.setdefault(r["id"], r)
    return out


def kept(c: dict, rule: str) -> str:
    """The candidate ``rule`` keeps, from a row's recorded candidates and their P(correct)."""
    if rule in ("knowledge", "rationale", "check"):
        return rule
    fa = {n: FinalAnswer(x["answer"], p=x.get("p") or 0.0) for n, x in c.items()}
    if rule == "probe-pair":
        return most_probable({n: fa[n] for n in ("rationale", "knowledge")})
    if rule == "probe-all":
        return most_probable(fa)
    return max(c, key=lambda n: c[n]["f1"])  # oracle


#: A chain's stages, as its model calls' purposes begin.
CHAIN_STAGES = ("check", "pseudo-step", "rerank", "final/rationale", "final/knowledge")


def call_seconds(full: dict, stages: tuple[str, ...] = CHAIN_STAGES) -> dict[str, float]:
    """Seconds by stage from a full row's model calls (a batched call's time split evenly over its prompts); a
    call belongs to the stage its purpose begins with (``rerank/forced``: ``rerank``)."""
    out = dict.fromkeys(stages, 0.0)
    for e in full["trace"]["events"]:
        if e["type"] == "model_call":
            out[next(k for k in out if e["purpose"].startswith(k))] += e["seconds"]
    return out


def replay(score: dict, secs: dict, level: float | None, rule: str) -> tuple[float, float, float, bool]:
    """(F1, least seconds, most seconds, answered at once) of one question under a gate level (None: never at
    once), a final rule, and the engine re-rank."""
    c = score["final"]["candidates"]
    ck = c["check"]
    if level is not None and ck["p"] >= level and ck["answer"].strip().lower() not in ("", "unknown"):
        return ck["f1"], secs["check"], secs["check"], True
    name = kept(c, rule)
    both = secs["final/knowledge"] + secs["final/rationale"]  # a choice rule generates both answers
    final = {"knowledge": secs["final/knowledge"], "rationale": secs["final/rationale"]}.get(rule, both)
    base = secs["check"] + secs["pseudo-step"] + final
    return c[name]["f1"], base + secs["rerank"] / 3, base + secs["rerank"], False


def departures(full: dict) -> tuple[int, int]:
    """(retrievals whose re-rank left the engine's top-1, retrievals re-ranked)."""
    steps = [s for s in full["trace"]["steps"] if s.get("candidates")]
    return sum(not s["candidates"][0].get("chosen") for s in steps), len(steps)


def figures(scores: dict, full: dict, ircot: dict, levels: list[float | None]) -> dict:
    ids = [i for i in scores if i in ircot and i in full]
    irc, irc_s = [ircot[i]["f1"] for i in ids], statistics.mean(ircot[i]["seconds"] for i in ids)
    secs = {i: call_seconds(full[i]) for i in ids}
    dep = [departures(full[i]) for i in ids]
    out = {"n": len(ids), "ircot": {"f1": statistics.mean(irc), "seconds": irc_s},
           "seakr_as_run_seconds": statistics.mean(scores[i]["seconds"] for i in ids),
           "seconds_by_stage": {k: statistics.mean(secs[i][k] for i in ids) for k in secs[ids[0]]},
           "rerank": {"departed": sum(d for d, _ in dep), "retrievals": sum(n for _, n in dep)},
           "rules": {}, "replays": []}
    for rule in RULES:
        f = [scores[i]["final"]["candidates"][kept(scores[i]["final"]["candidates"], rule)]["f1"] for i in ids]
        out["rules"][rule] = {"f1": statistics.mean(f), "minus_ircot": paired_bootstrap(f, irc)}
    for level in levels:
        for rule in ("knowledge", "probe-pair", "probe-all"):
            got = [replay(scores[i], secs[i], level, rule) for i in ids]
            f = [g[0] for g in got]
            lo, hi = statistics.mean(g[1] for g in got), statistics.mean(g[2] for g in got)
            out["replays"].append({"level": level, "rule": rule, "f1": statistics.mean(f), "at_once": sum(g[3] for g in got),
                                   "seconds": [lo, hi], "ratio_to_ircot": [lo / irc_s, hi / irc_s],
                                   "minus_ircot": paired_bootstrap(f, irc)})
    at = lambda i: scores[i]["final"]["candidates"]["check"]["p"] >= 0.31  # noqa: E731  (the level shipped before)
    gated = [(scores[i]["final"]["candidates"]["check"]["f1"], secs[i]["check"]) if at(i)
             else (ircot[i]["f1"], secs[i]["check"] + ircot[i]["seconds"]) for i in ids]
    out["ircot_with_the_gate"] = {"level": 0.31, "f1": statistics.mean(f for f, _ in gated),
                                  "seconds": statistics.mean(t for _, t in gated),
                                  "minus_ircot": paired_bootstrap([f for f, _ in gated], irc)}
    out["split_by_gate"] = {name: {"n": len(sel), **{k: statistics.mean(v(i) for i in sel) if sel else None for k, v in (
        ("check", lambda i: scores[i]["final"]["candidates"]["check"]["f1"]),
        ("knowledge", lambda i: scores[i]["final"]["candidates"]["knowledge"]["f1"]),
        ("ircot", lambda i: ircot[i]["f1"]))}} for name, sel in (("gate_answers", [i for i in ids if at(i)]),
                                                                 ("chain_runs", [i for i in ids if not at(i)]))}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", type=Path)
    ap.add_argument("--seakr", default="seakr-chain-always")
    ap.add_argument("--ircot", default="ircot")
    ap.add_argument("--levels", default="none,0.2,0.3,0.4,0.5,0.6,0.7")
    a = ap.parse_args()
    paused = json.loads((a.runs / "paused.json").read_text()) if (a.runs / "paused.json").is_file() else {}
    scores = rows(a.runs / a.seakr / "scores.jsonl", paused.get(a.seakr))
    full = rows(a.runs / a.seakr / "results.jsonl", paused.get(a.seakr))
    ircot = rows(a.runs / a.ircot / "scores.jsonl", paused.get(a.ircot))
    levels = [None if x == "none" else float(x) for x in a.levels.split(",")]
    print(json.dumps(figures(scores, full, ircot, levels), indent=1))


if __name__ == "__main__":
    main()
