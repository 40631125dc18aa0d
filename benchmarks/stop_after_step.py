"""Could SeaKR stop its chain after the first retrieval? A train study of a current-context knowledge check.

  python benchmarks/stop_after_step.py --subset TRAIN_MIGRES500 OUT.jsonl     # the questions (train, unread)
  seakr eval --data OUT.jsonl --index POOL --method seakr --option max_steps=1 --out STEP1
  seakr eval --data OUT.jsonl --index POOL --method seakr --out CHAIN
  python benchmarks/stop_after_step.py --step1 STEP1 --chain CHAIN [--out benchmarks/results/stop-after-step-qwen]

The questions: 2Wiki ``train_migres500`` lines 100 onwards that are not multiples of 5 (the final-form probes
were fitted on the first 100 and every 5th), the first 80; POOL: the index ``seakr eval`` pools for the whole
``train_migres500`` file with ``--filler wiki_filler1000.flashrag.jsonl`` (4,112 passages), as the probes' chains.

RUN --step1: SeaKR with every default and ``max_steps=1`` on train questions; RUN --chain: the same options
and questions with the whole chain. Past a failed knowledge check both runs take the same first step (same
query, same kept passage); the one-step run then answers from that passage and its rationale and reads each
answer's P(correct) from the final-form probes, which is what a check after every step would read. The
study scores that P as a stop signal: stop with the one-step answer when its P(correct) >= tau, else go on
with the chain.

The rule, fixed before the rows: a stop level qualifies when, on the questions the check sent to the chain,
stopping keeps F1 at or above the chain's (paired mean difference >= 0) and saves >= 25 % of their
retrievals. Whether one does is reported with the AUROC of P for "the one-step answer is wrong" (F1 < 0.5);
this is train data, so nothing is chosen for dev here: a qualifying level would become an option measured
on dev in its own run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from seakr.eval.metrics import auroc, paired_bootstrap
from seakr.eval.metrics import CORRECT_F1

LEVELS = [round(x, 2) for x in np.arange(0.05, 0.96, 0.05)]


def rows(run: str) -> dict[str, dict]:
    with open(Path(run) / "scores.jsonl") as f:
        return {r["id"]: r for r in (json.loads(line) for line in f if line.strip())}


def chained(step1: dict, chain: dict) -> list[str]:
    """The questions the knowledge check sent to the chain in both runs (the check is the same call)."""
    ids = sorted(set(step1) & set(chain), key=lambda i: chain[i]["order"])
    return [i for i in ids if step1[i]["final"]["choice"] != "check" and chain[i]["final"]["choice"] != "check"]


def p_of(row: dict, name: str | None = None) -> float:
    final = row["final"]
    return float(final["candidates"][name or final["choice"]]["p"])


def curve(step1: dict, chain: dict, ids: list[str]) -> list[dict]:
    f_chain = np.array([chain[i]["f1"] for i in ids])
    r_chain = np.array([chain[i]["totals"]["retrievals"] for i in ids], dtype=float)
    out = []
    for tau in LEVELS:
        stop = np.array([p_of(step1[i]) >= tau for i in ids])
        f = np.where(stop, [step1[i]["f1"] for i in ids], f_chain)
        r = np.where(stop, [step1[i]["totals"]["retrievals"] for i in ids], r_chain)
        out.append({"tau": tau, "stopped": int(stop.sum()), "f1": float(f.mean()), "retrievals": float(r.mean()),
                    "saved": float(1 - r.sum() / max(r_chain.sum(), 1)), "minus_chain": paired_bootstrap(f, f_chain)})
    return out


def study(step1_run: str, chain_run: str) -> dict:
    step1, chain = rows(step1_run), rows(chain_run)
    ids = chained(step1, chain)
    wrong = np.array([step1[i]["f1"] < CORRECT_F1 for i in ids])
    res = {"runs": {"step1": step1_run, "chain": chain_run}, "n": len(set(step1) & set(chain)), "chained": len(ids),
           "step1_right": int((~wrong).sum()),
           "auroc_wrong": {"chosen": auroc([1 - p_of(step1[i]) for i in ids], wrong),
                           "knowledge": auroc([1 - p_of(step1[i], "knowledge") for i in ids],
                                              [step1[i]["final"]["candidates"]["knowledge"]["f1"] < CORRECT_F1 for i in ids])},
           "f1": {"step1": float(np.mean([step1[i]["f1"] for i in ids])), "chain": float(np.mean([chain[i]["f1"] for i in ids]))},
           "retrievals": {"step1": float(np.mean([step1[i]["totals"]["retrievals"] for i in ids])),
                          "chain": float(np.mean([chain[i]["totals"]["retrievals"] for i in ids]))},
           "step1_minus_chain": paired_bootstrap([step1[i]["f1"] for i in ids], [chain[i]["f1"] for i in ids]),
           "curve": curve(step1, chain, ids)}
    res["qualifying"] = [c["tau"] for c in res["curve"] if c["minus_chain"]["mean_difference"] >= 0 and c["saved"] >= 0.25]
    return res


def markdown(res: dict) -> str:
    a, f, r = res["auroc_wrong"], res["f1"], res["retrievals"]
    d = res["step1_minus_chain"]
    lines = [f"# Stopping after the first step ({res['chained']} of {res['n']} train questions reached the chain)", "",
             f"One step: F1 {100 * f['step1']:.1f}, {r['step1']:.2f} retrievals/q; whole chain: F1 {100 * f['chain']:.1f}, "
             f"{r['chain']:.2f} retrievals/q; one step − chain {100 * d['mean_difference']:+.1f} "
             f"(CI {100 * d['ci95'][0]:+.1f}..{100 * d['ci95'][1]:+.1f}). One-step answers right (F1 >= 0.5): {res['step1_right']}.", "",
             f"AUROC of the one-step P(correct) for \"its answer is wrong\": chosen answer {a['chosen']:.3f}, "
             f"knowledge answer {a['knowledge']:.3f}.", "",
             "| stop when P(correct) >= tau | stopped | F1 | retrievals/q | saved | − chain (CI) |", "|---|---|---|---|---|---|"]
    for c in res["curve"]:
        m = c["minus_chain"]
        lines.append(f"| {c['tau']:.2f} | {c['stopped']} | {100 * c['f1']:.1f} | {c['retrievals']:.2f} | {100 * c['saved']:.0f} % | "
                     f"{100 * m['mean_difference']:+.1f} ({100 * m['ci95'][0]:+.1f}..{100 * m['ci95'][1]:+.1f}) |")
    q = res["qualifying"]
    lines += ["", "Levels that meet the rule (F1 >= the chain's, >= 25 % fewer retrievals): "
              + (", ".join(f"{t:.2f}" for t in q) if q else "none") + "."]
    return "\n".join(lines) + "\n"


def fresh_subset(src: str, out: str, n: int = 80) -> None:
    """The study's questions: lines >= 100 of ``src`` that are not multiples of 5, the first ``n``."""
    lines = [line for line in Path(src).read_text().splitlines() if line.strip()]
    fresh = [line for i, line in enumerate(lines) if i >= 100 and i % 5][:n]
    Path(out).write_text("".join(line + "\n" for line in fresh))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--subset", nargs=2, metavar=("TRAIN_FILE", "OUT"))
    ap.add_argument("--step1")
    ap.add_argument("--chain")
    ap.add_argument("--out", default="benchmarks/results/stop-after-step-qwen")
    a = ap.parse_args()
    if a.subset:
        fresh_subset(*a.subset)
        return
    if not (a.step1 and a.chain):
        ap.error("give --step1 and --chain (or --subset)")
    res = study(a.step1, a.chain)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "study.json").write_text(json.dumps(res, indent=2))
    (out / "study.md").write_text(markdown(res))
    print(markdown(res))


if __name__ == "__main__":
    main()
