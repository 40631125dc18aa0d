"""The attribution against IRCoT on the decision sample (no model runs): SeaKR's chain with IRCoT's parts swapped in
one at a time, each beside IRCoT on the same questions, as run and with the shipped gate replayed, split by what
the gate does.

The runs (benchmarks/configs/decide.toml, decide-query-step.toml, decide-attribution.toml) drew the knowledge check
and recorded it without obeying it (gate_p = 1), so the gate replays exactly: a question whose check has
P(correct) >= the level (and an answer) takes the check's answer at the check's seconds, any other the chain's
answer and seconds as run. The check's seconds are its model call's, from the full rows where they are kept
(``results.jsonl``, local: they hold the questions), else the row's time less its other stages'.

    python benchmarks/attribution.py RUNS_DIR > RUNS_DIR/attribution.json
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

#: The chains, from the paper's to the one closest to IRCoT's loop; the default past the gate is the second. The
#: first ran before BM25's top-1 and the knowledge answer were chosen: its candidate probe kept BM25's top-1 at every
#: retrieval, so its chain is the engine re-rank's, and its knowledge answer is read from its candidates (its
#: seconds are as run: three candidates decoded, both final answers).
READ = {"seakr-chain-always": "knowledge"}
VARIANTS = {"seakr-chain-always": "the paper's query (the pseudo-step minus its unsure words)",
            "seakr-query-step-chain-always": "IRCoT's query (the last step): the default",
            "seakr-ircot-stopping": "IRCoT's query and stopping",
            "seakr-ircot-reading": "IRCoT's query and answer reading"}
DEFAULT = "seakr-query-step-chain-always"
LEVEL = 0.3  # the 0.5B's shipped gate level (gates.json)


def check_seconds(score: dict, full: dict | None) -> float:
    """The knowledge check's seconds in one question."""
    if full is not None:
        return sum(e["seconds"] for e in full["trace"]["events"]
                   if e["type"] == "model_call" and e["purpose"].startswith("check"))
    t = score["totals"]["seconds"]
    return max(0.0, t["total"] - sum(t.get(k, 0.0) for k in ("pseudo", "rerank", "final", "search")))


def at_once(score: dict, level: float = LEVEL) -> bool:
    """Whether the gate answers this question from memory (as replay() in decide.py)."""
    ck = score["final"]["candidates"]["check"]
    return ck["p"] >= level and ck["answer"].strip().lower() not in ("", "unknown")


def chain_f1(score: dict, read: str | None = None) -> float:
    return score["f1"] if read is None else score["final"]["candidates"][read]["f1"]


def gated(score: dict, full: dict | None, read: str | None = None) -> tuple[float, float]:
    """(F1, seconds) of one question with the gate in front of the chain."""
    if at_once(score):
        return score["final"]["candidates"]["check"]["f1"], check_seconds(score, full)
    return chain_f1(score, read), score["seconds"]


def variant(scores: dict, full: dict, ircot: dict, base: dict | None, ids: list[str], read: str | None = None) -> dict:
    run = [chain_f1(scores[i], read) for i in ids]
    g = [gated(scores[i], full.get(i), read) for i in ids]
    f, s = [x for x, _ in g], [t for _, t in g]
    irc, irc_s = [ircot[i]["f1"] for i in ids], statistics.mean(ircot[i]["seconds"] for i in ids)
    chain = [i for i in ids if not at_once(scores[i])]
    out = {"chain_as_run": {"f1": statistics.mean(run), "seconds": statistics.mean(scores[i]["seconds"] for i in ids),
                            "minus_ircot": paired_bootstrap(run, irc)},
           "gated": {"f1": statistics.mean(f), "seconds": statistics.mean(s), "ratio_to_ircot": statistics.mean(s) / irc_s,
                     "minus_ircot": paired_bootstrap(f, irc)},
           "chain_questions": {"n": len(chain), "f1": statistics.mean(chain_f1(scores[i], read) for i in chain),
                               "ircot": statistics.mean(ircot[i]["f1"] for i in chain)}}
    if base is not None:
        out["gated"]["minus_default"] = paired_bootstrap(f, [gated(base[i], None)[0] for i in ids])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", type=Path)
    a = ap.parse_args()
    paused = json.loads((a.runs / "paused.json").read_text()) if (a.runs / "paused.json").is_file() else {}
    load = lambda run, name: rows(a.runs / run / name, paused.get(run))  # noqa: E731
    ircot = load("ircot", "scores.jsonl")
    have = {v: load(v, "scores.jsonl") for v in VARIANTS if (a.runs / v / "scores.jsonl").is_file()}
    ids = [i for i in have[DEFAULT] if i in ircot and all(i in s for s in have.values())]
    base = have[DEFAULT]
    out = {"n": len(ids), "level": LEVEL, "ircot": {"f1": statistics.mean(ircot[i]["f1"] for i in ids),
                                                   "seconds": statistics.mean(ircot[i]["seconds"] for i in ids)},
           "from_memory": {"n": sum(at_once(base[i]) for i in ids),
                           "check_f1": statistics.mean([base[i]["final"]["candidates"]["check"]["f1"] for i in ids
                                                        if at_once(base[i])] or [float("nan")]),
                           "ircot_f1": statistics.mean([ircot[i]["f1"] for i in ids if at_once(base[i])] or [float("nan")])},
           "variants": {}}
    for v, scores in have.items():
        out["variants"][v] = {"what": VARIANTS[v], **variant(scores, load(v, "results.jsonl"), ircot,
                                                             None if v == DEFAULT else base, ids, READ.get(v))}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
