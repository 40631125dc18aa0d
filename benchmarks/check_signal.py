"""Which signal should the knowledge check's gate read, decided on train short-form studies.

  python benchmarks/check_signal.py TRAIN_RUN... [--dev NAME=RUN[,RUN]...] [--out benchmarks/results/selfknow-qwen]

TRAIN_RUN: ``seakr detect --form short`` studies of train questions (they keep each greedy answer's state
and every estimator's score). Four candidates for "the check's answer is wrong":

  state      the probe on the answer's state alone (what the package shipped: gate=probe)
  eigen      EigenScore of the check's k samples alone (gate=check reads it through a calibration map)
  scores     a logistic regression on the check's own scores (FEATURES)
  stacked    the state probe's logit beside those scores (``seakr probe fit --features``)

Each is scored out of fold on the pooled train rows (5 stratified folds; the stacked probe refitted inside
each outer fold, its own inner folds included), and its AUROC read per train set. The rule, fixed before
the train rows were read: the candidate with the highest AUROC on the weaker train set is shipped if it beats
``state`` there by at least 0.01; otherwise ``state`` stays.

--dev NAME=RUN,...: dev studies of the same form, scored once afterwards with each candidate fitted on all
train rows: AUROC per dev set and the paired difference against EigenScore. Never used to choose.
"""

from __future__ import annotations

from _common import dev_sets, write_report  # noqa: E402
import argparse
from pathlib import Path

import numpy as np

from seakr.eval.metrics import auroc, paired_auroc_difference
from seakr.eval.fitting import check_rows, out_of_fold, stack_probe
from seakr.probes.probe import fit_probe

FEATURES = ("eigen", "ln-entropy", "max-entropy", "mean-entropy", "perplexity")
CANDIDATES = ("state", "eigen", "scores", "stacked")
MARGIN = 0.01  # what a new signal must add over the state probe on the weaker train set


def fitted(d: dict, folds: int) -> tuple[dict, dict]:
    """Each candidate fitted on all rows of ``d`` (a function of (states, extra) -> P(wrong)), and each C."""
    kw = dict(model=str(d["model"]), tap=d["tap"], form="short", folds=folds)
    state = fit_probe(d["states"], d["wrong"], **kw)
    scores = fit_probe(d["extra"], d["wrong"], Cs=(0.01, 0.1, 1.0, 10.0), **kw)
    stacked = stack_probe(d["states"], d["extra"], d["wrong"], features=list(FEATURES), **kw)
    e = FEATURES.index("eigen")
    return {"state": lambda S, X: np.array([state.score(s) for s in S]),
            "eigen": lambda S, X: X[:, e],
            "scores": lambda S, X: np.array([scores.score(x) for x in X]),
            "stacked": lambda S, X: np.array([stacked.score(s, x) for s, x in zip(S, X)])}, \
        {"state": state.C, "scores": scores.C, "stacked": stacked.C}


def out_of_fold_all(d: dict, folds: int, seed: int = 0) -> dict:
    """Every candidate's out-of-fold P(wrong) on the train rows (EigenScore needs no fitting)."""
    from sklearn.model_selection import StratifiedKFold

    y = d["wrong"].astype(int)
    C_state = fit_probe(d["states"], y, model="-", tap=d["tap"], form="short", folds=folds).C
    C_scores = fit_probe(d["extra"], y, model="-", tap=d["tap"], form="short", folds=folds, Cs=(0.01, 0.1, 1.0, 10.0)).C
    oof = {"state": out_of_fold(d["states"], y, folds, C=C_state, seed=seed),
           "eigen": d["extra"][:, FEATURES.index("eigen")],
           "scores": out_of_fold(d["extra"], y, folds, C=C_scores, seed=seed),
           "stacked": np.zeros(len(y))}
    for tr, te in StratifiedKFold(folds, shuffle=True, random_state=seed).split(d["states"], y):
        p = stack_probe(d["states"][tr], d["extra"][tr], y[tr], folds=folds, features=list(FEATURES),
                        model="-", tap=d["tap"], form="short")
        oof["stacked"][te] = [p.score(s, x) for s, x in zip(d["states"][te], d["extra"][te])]
    return oof


def per_set(scores: dict, d: dict) -> dict:
    sets = sorted(set(d["data"]))
    out = {}
    for name, s in scores.items():
        row = {ds: auroc(s[[x == ds for x in d["data"]]], d["wrong"][[x == ds for x in d["data"]]]) for ds in sets}
        row["pooled"] = auroc(s, d["wrong"])
        out[name] = row
    return out


def decide(table: dict, sets: list[str]) -> dict:
    weakest = {c: min(table[c][s] for s in sets) for c in CANDIDATES}
    best = max(weakest, key=lambda c: weakest[c])
    ship = best if best != "state" and weakest[best] >= weakest["state"] + MARGIN else "state"
    return {"weaker_set_auroc": weakest, "best": best, "ship": ship,
            "rule": f"highest AUROC on the weaker train set, shipped if it beats the state probe there by >= {MARGIN}"}


def dev_report(models: dict, dev: dict[str, list[str]]) -> dict:
    out = {}
    for name, runs in dev.items():
        d = check_rows(runs, FEATURES)
        s = {c: models[c](d["states"], d["extra"]) for c in CANDIDATES}
        out[name] = {"n": int(len(d["wrong"])), "wrong": int(d["wrong"].sum()),
                     **{c: {"auroc": auroc(s[c], d["wrong"]),
                            **({} if c == "eigen" else {"minus_eigen": paired_auroc_difference(s[c], s["eigen"], d["wrong"])})}
                        for c in CANDIDATES}}
    return out


def markdown(res: dict) -> str:
    sets = res["train_sets"]
    lines = ["# The knowledge check's signal, chosen on train", "",
             f"Train studies: {', '.join(res['train_runs'])}; {res['n']} answers ({res['wrong']} wrong); "
             f"features of `scores` / `stacked`: {', '.join(FEATURES)}.", "",
             "| candidate | " + " | ".join(sets) + " | pooled |", "|---" * (len(sets) + 2) + "|"]
    for c in CANDIDATES:
        t = res["train_oof_auroc"][c]
        lines.append(f"| {c} | " + " | ".join(f"{t[s]:.3f}" for s in sets) + f" | {t['pooled']:.3f} |")
    dcs = res["decision"]
    lines += ["", f"Out of fold. Rule ({dcs['rule']}): best **{dcs['best']}**, shipped **{dcs['ship']}**.", ""]
    if res.get("dev"):
        lines += ["## Dev, scored once afterwards (each candidate fitted on all train rows)", "",
                  "| dev set (n, wrong) | " + " | ".join(CANDIDATES) + " |", "|---" * (len(CANDIDATES) + 1) + "|"]
        for name, r in res["dev"].items():
            cells = []
            for c in CANDIDATES:
                m = r[c].get("minus_eigen")
                ci = f" ({m['difference']:+.3f}, CI {m['ci95'][0]:+.3f}..{m['ci95'][1]:+.3f})" if m else ""
                cells.append(f"{r[c]['auroc']:.3f}{ci}")
            lines.append(f"| {name} ({r['n']}, {r['wrong']}) | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("train", nargs="+")
    ap.add_argument("--dev", nargs="*", default=[], help="NAME=RUN[,RUN...]: dev studies, reported only")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--out", default="benchmarks/results/selfknow-qwen")
    a = ap.parse_args()
    d = check_rows(a.train, FEATURES)
    oof = out_of_fold_all(d, a.folds)
    table = per_set(oof, d)
    sets = sorted(set(d["data"]))
    res = {"train_runs": [Path(r).name for r in a.train], "train_sets": sets, "n": int(len(d["wrong"])),
           "wrong": int(d["wrong"].sum()), "features": list(FEATURES), "train_oof_auroc": table,
           "decision": decide(table, sets)}
    if a.dev:
        models, res["C"] = fitted(d, a.folds)
        res["dev"] = dev_report(models, dev_sets(a.dev))
    write_report(a.out, "check-signal", res, markdown(res))


if __name__ == "__main__":
    main()
