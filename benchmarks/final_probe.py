"""Whether probes on the final answers' states choose between SeaKR's two final answers, decided on train.

  python benchmarks/final_probe.py RUN... [--out benchmarks/results/final-probe-qwen]

RUN: SeaKR eval runs on train questions that kept the final answers' states (``states/final-*``; the
candidate-probe re-rank reads them). For each final form, a probe for "this answer is wrong" (F1 < 0.5)
is scored out of fold (5 stratified folds; each question has one answer of each form) with the
regularisation ``fit_probe`` picks on all rows; then, per question, the choice the probes would make
(the more probable answer; a tie goes to the knowledge answer, as in SeaKR) against each single answer.

The rule, fixed before any of these runs: ship ``reasoning=probe`` as the default where its out-of-fold
F1 on train is at least the better single answer's (knowledge-only or rationale-only, pooled over the
runs). Dev figures come from ``seakr eval`` / ``seakr compare`` afterwards, never from here.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from seakr.eval.metrics import auroc, paired_bootstrap
from seakr.eval.runner import run_rows
from seakr.eval.studies import StateStore
from seakr.probes.fitting import CORRECT_F1, _data_name
from seakr.probes.probe import fit_probe

FORMS = ("rationale", "knowledge")


def both_answers(runs: list[str]) -> dict:
    """Questions where both final answers have an F1 and a stored state: states (n, 2, d), F1s (n, 2)."""
    X, F, ids, data = [], [], [], []
    for run in runs:
        stores = {f: StateStore.open(Path(run) / "states" / f"final-{f}") for f in FORMS}
        cfg = json.loads((Path(run) / "config.json").read_text())
        for r in run_rows(Path(run)):
            c = r.final.candidates
            zs = [stores[f].get(r.id) if f in c else None for f in FORMS]
            if any(z is None for z in zs) or any(c[f].f1 is None for f in FORMS):
                continue
            X.append(np.stack([z[0] for z in zs]))
            F.append([c[f].f1 for f in FORMS])
            ids.append(r.id)
            data.append(_data_name(cfg, run))
    return {"X": np.stack(X), "F": np.array(F), "ids": ids, "data": data}


def out_of_fold(X: np.ndarray, wrong: np.ndarray, folds: int, seed: int = 0) -> tuple[np.ndarray, float]:
    """P(wrong) of each row from a probe that never saw it (C as ``fit_probe`` picks it on all rows)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold

    C = fit_probe(X, wrong, model="-", tap="-", form="short", folds=folds).C
    p = np.zeros(len(wrong))
    for tr, te in StratifiedKFold(folds, shuffle=True, random_state=seed).split(X, wrong):
        mu, sd = X[tr].mean(0), X[tr].std(0)
        sd = np.where(sd > 0, sd, 1.0)
        lr = LogisticRegression(C=C, max_iter=5000).fit((X[tr] - mu) / sd, wrong[tr])
        p[te] = lr.predict_proba((X[te] - mu) / sd)[:, 1]
    return p, C


def evaluate(d: dict, folds: int) -> dict:
    F = d["F"]
    p_wrong, Cs = {}, {}
    for j, f in enumerate(FORMS):
        wrong = (F[:, j] < CORRECT_F1).astype(int)
        p_wrong[f], Cs[f] = out_of_fold(d["X"][:, j, :], wrong, folds)
    pr, pk = 1 - p_wrong["rationale"], 1 - p_wrong["knowledge"]
    chosen = np.where(pr > pk, F[:, 0], F[:, 1])
    differ = F[:, 0] != F[:, 1]
    res = {"n": int(len(F)), "differ": int(differ.sum()), "C": Cs,
           "oof_auroc_wrong": {f: auroc(p_wrong[f], F[:, j] < CORRECT_F1) for j, f in enumerate(FORMS)},
           "choice_auroc": auroc((pk - pr)[differ], (F[:, 1] > F[:, 0])[differ]),
           "f1": {"probe": float(chosen.mean()), "rationale": float(F[:, 0].mean()), "knowledge": float(F[:, 1].mean()),
                  "oracle": float(F.max(1).mean())},
           "chose_knowledge": float((pr <= pk).mean())}
    res["probe_minus"] = {k: paired_bootstrap(chosen, F[:, j]) for j, k in enumerate(FORMS)}
    better = max(res["f1"]["rationale"], res["f1"]["knowledge"])
    res["ship"] = bool(res["f1"]["probe"] >= better)
    return res


def markdown(res: dict, runs: list[str]) -> str:
    f, m = res["f1"], res["probe_minus"]
    ci = lambda d: f"{100 * d['mean_difference']:+.1f} (CI {100 * d['ci95'][0]:+.1f}..{100 * d['ci95'][1]:+.1f})"  # noqa: E731
    return "\n".join([
        "# Final-form probes on train chains (out of fold)", "",
        f"Runs: {', '.join(Path(r).name for r in runs)}; {res['n']} questions with both final answers, "
        f"{res['differ']} where their F1 differ.", "",
        "| | rationale form | knowledge form |", "|---|---|---|",
        f"| out-of-fold AUROC for \"wrong\" | {res['oof_auroc_wrong']['rationale']:.3f} | {res['oof_auroc_wrong']['knowledge']:.3f} |",
        f"| C | {res['C']['rationale']:.4g} | {res['C']['knowledge']:.4g} |", "",
        f"Choice by the probes (the more probable answer): F1 {100 * f['probe']:.1f}; rationale only "
        f"{100 * f['rationale']:.1f}, knowledge only {100 * f['knowledge']:.1f}, oracle {100 * f['oracle']:.1f}; "
        f"chose the knowledge answer on {100 * res['chose_knowledge']:.0f} %.",
        f"Probe choice minus rationale {ci(m['rationale'])}, minus knowledge {ci(m['knowledge'])}; AUROC of "
        f"P(knowledge) - P(rationale) for \"knowledge is better\" where they differ: {res['choice_auroc']:.3f}.", "",
        f"Rule (fixed before the runs): ship reasoning=probe where its F1 >= the better single answer's: "
        f"**{'ship' if res['ship'] else 'keep the calibrated choice'}**.", ""])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--out", default="benchmarks/results/final-probe-qwen")
    a = ap.parse_args()
    res = evaluate(both_answers(a.runs), a.folds)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "train-choice.json").write_text(json.dumps(res, indent=2))
    (out / "train-choice.md").write_text(markdown(res, a.runs))
    print(markdown(res, a.runs))


if __name__ == "__main__":
    main()
