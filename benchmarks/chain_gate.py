"""Does a gate that compares the check with the chain pay? (issue: decisions that only add, item 3)

The shipped gate answers from memory when the knowledge check's P(correct) reaches a level (0.3), a level against
the chain's *average*. This measures the per-question alternative: answer from memory when P(check correct) beats
the chain's own predicted P(correct) for the question. The chain's P(correct) comes from a probe fitted on train
chains, reading the state the check already computes (the greedy state at the end of its short closed-book answer),
so the gate would cost nothing more at run time.

Fitted on the train chains of ``final-probe-qwen`` (HotpotQA train 100, 2Wiki train 200; label: the chain's
knowledge answer has F1 < 0.5), cross-validated there; replayed on the decision sample's 42 questions, whose chain
ran on every question (``decide-qwen-hotpotqa246-every4/seakr-query-step-chain-always``: its check's P(correct) and
the chain's answer are recorded), against the shipped level. No report set is read.

    python benchmarks/chain_gate.py > benchmarks/results/chain-gate-qwen/chain_gate.json

The rule, written before the replay ran: the relative gate becomes the 0.5B's default only if its replayed F1 on
the decision sample is at least the shipped gate's + 0.5 (and its train AUROC above 0.6); else it stays off.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from seakr import SeaKR  # noqa: E402
from seakr.eval.datasets import load_dataset  # noqa: E402
from seakr.eval.metrics import auroc, paired_bootstrap  # noqa: E402
from seakr.models import DEFAULT_MODEL, load_model  # noqa: E402
from seakr.prompts import SHORT_STOPS, SHORT_TOKENS  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
TRAIN = ["final-probe-qwen/train-hotpotqa100-chain", "final-probe-qwen/train-2wiki100-chain",
         "final-probe-qwen/train-2wiki-every5-chain"]
DECIDE = "decide-qwen-hotpotqa246-every4/seakr-query-step-chain-always"
LEVEL = 0.3  # the shipped probe gate's level


def scores(run: str) -> dict[str, dict]:
    return {r["id"]: r for r in map(json.loads, (RESULTS / run / "scores.jsonl").read_text().splitlines())}


def questions(run: str) -> dict[str, str]:
    data = json.loads((RESULTS / run / "config.json").read_text())["data"]
    data = data.replace("/work/shared/", str(ROOT.parent / "shared") + "/")
    return {ex.id: ex.question for ex in load_dataset(data)}


def check_state(m: SeaKR, question: str) -> tuple[np.ndarray | None, float]:
    """The check's greedy state and P(correct), as the shipped probe gate computes them."""
    prompt, prefix = m.prompts.render_short(question)
    cfg = dataclasses.replace(m.gen_config(SHORT_STOPS, False, SHORT_TOKENS), n=0, with_states=False, greedy_state=True)
    gen = m.lm.generate([prompt], cfg, prefix=prefix)[0]
    state = gen.greedy.state if gen.greedy and gen.greedy.text.strip() else None
    return state, 1.0 - m.knowledge.probe("short").score(state)


def main() -> None:
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.model_selection import cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    m = SeaKR(load_model(DEFAULT_MODEL), None)
    X, y = [], []
    for run in TRAIN:
        rows, qs = scores(run), questions(run)
        for i, r in rows.items():
            state, _ = check_state(m, qs[i])
            if state is not None:
                X.append(state)
                y.append(r["final"]["candidates"]["knowledge"]["f1"] < 0.5)  # the chain's answer is wrong
    X, y = np.stack(X), np.array(y)
    model = make_pipeline(StandardScaler(), LogisticRegressionCV(Cs=10, cv=5, max_iter=2000))
    cv = cross_val_predict(model, X, y, cv=5, method="predict_proba")[:, 1]
    model.fit(X, y)
    rows, qs = scores(DECIDE), questions(DECIDE)
    out = {"train": {"n": len(y), "chain_wrong": int(y.sum()), "cv_auroc_chain_wrong": auroc(cv, y)}, "decide": []}
    for i, r in rows.items():
        state, p_check = check_state(m, qs[i])
        p_chain = None if state is None else 1.0 - float(model.predict_proba(state[None])[0, 1])
        c = r["final"]["candidates"]
        out["decide"].append({"id": i, "p_check": p_check, "p_check_recorded": c["check"]["p"], "p_chain": p_chain,
                              "f1_check": c["check"]["f1"], "f1_chain": c["knowledge"]["f1"]})
    d = out["decide"]
    level = [x["f1_check"] if x["p_check_recorded"] >= LEVEL else x["f1_chain"] for x in d]
    relative = [x["f1_check"] if x["p_chain"] is not None and x["p_check_recorded"] > x["p_chain"] else x["f1_chain"]
                for x in d]
    out["replay"] = {"n": len(d), "shipped_level": {"f1": statistics.mean(level), "at_once": sum(
        x["p_check_recorded"] >= LEVEL for x in d)}, "relative": {"f1": statistics.mean(relative), "at_once": sum(
            x["p_chain"] is not None and x["p_check_recorded"] > x["p_chain"] for x in d)},
        "relative_minus_shipped": paired_bootstrap(relative, level),
        "auroc_chain_wrong_on_decide": auroc([1 - (x["p_chain"] or 0.0) for x in d], [x["f1_chain"] < 0.5 for x in d])}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
