"""Does the knowledge check's probe gain from more train questions? Decided on the questions it never saw.

  python benchmarks/probe_growth.py --old RUN... --new RUN... [--probe FILE] [--dev NAME=RUN[,RUN]...]
                                    [--out benchmarks/results/selfknow-qwen/probe-growth]

--old: the short-form train studies the shipped probe was fitted on; --new: studies of more train questions
(a question already in --old is read from there, so "new" rows are those the shipped probe never saw).
--probe: the shipped probe (default: the packaged short-form probe of the studies' model).

Two probes are compared on the new rows of each train set: the shipped one (those rows are held out for
it) and a refit on old + new rows, scored out of fold (5 stratified folds; its strength C chosen by
cross-validation on all rows, as ``seakr probe fit`` chooses it). The rule, fixed before the new rows were
read: the refit ships if its AUROC on the new rows of the weaker train set is at least the shipped probe's
there; otherwise the shipped probe stays.

--dev: dev studies of the same form, scored once afterwards by both probes (the refit fitted on all train
rows): AUROC and the paired difference. Never used to choose.
"""

from __future__ import annotations

from _common import dev_sets, write_report  # noqa: E402
import argparse
from pathlib import Path

import numpy as np

from seakr.eval.metrics import auroc, paired_auroc_difference
from seakr.probes import load_probe
from seakr.eval.fitting import load_states, out_of_fold
from seakr.probes.probe import fit_probe, packaged_probe


def train_rows(old: list[str], new: list[str]) -> dict:
    """Pooled train rows, each marked new where it came from a --new study (the old studies are read
    first, so a question in both counts as old)."""
    kept: list = []
    model, taps, X, wrong, names, _ = load_states([*old, *new], kept)
    new_runs = {str(r) for r in new}
    return {"model": model, "taps": taps, "X": X, "wrong": wrong, "new": np.array([r["run"] in new_runs for r in kept]),
            "data": np.array([r["data"] for r in kept]), "names": names}


def compare(d: dict, shipped, folds: int) -> dict:
    """AUROC of the shipped probe and of the out-of-fold refit on each train set's new rows."""
    if shipped.tap not in d["taps"]:
        raise ValueError(f"the studies stored {', '.join(d['taps'])}, the probe reads {shipped.tap}")
    X = d["X"][:, d["taps"].index(shipped.tap), :]
    refit = fit_probe(X, d["wrong"], model=d["model"], tap=shipped.tap, form="short", folds=folds)
    oof = out_of_fold(X, d["wrong"], folds, C=refit.C)
    old = np.array([shipped.score(x) for x in X])
    out = {}
    for name in d["names"]:
        m = (d["data"] == name) & d["new"]
        if not m.any():
            continue  # a train set only the shipped probe's studies cover
        out[name] = {"new_rows": int(m.sum()), "wrong": int(d["wrong"][m].sum()),
                     "shipped": auroc(old[m], d["wrong"][m]), "refit": auroc(oof[m], d["wrong"][m]),
                     "refit_minus_shipped": paired_auroc_difference(oof[m], old[m], d["wrong"][m])}
    weaker = min(out, key=lambda s: out[s]["shipped"])
    ship = "refit" if out[weaker]["refit"] >= out[weaker]["shipped"] else "shipped"
    return {"per_set": out, "weaker_set": weaker, "ship": ship, "refit_C": refit.C,
            "refit_cv_auroc": refit.provenance["cv_auroc"], "n": int(len(d["wrong"])), "new": int(d["new"].sum()),
            "rule": "the refit ships if its out-of-fold AUROC on the new rows of the weaker train set (by the "
                    "shipped probe) is >= the shipped probe's there"}, refit


def dev_report(shipped, refit, dev: dict[str, list[str]]) -> dict:
    out = {}
    for name, runs in dev.items():
        _, taps, X, wrong, _, _ = load_states(runs)
        S = X[:, taps.index(shipped.tap), :]
        a, b = np.array([refit.score(x) for x in S]), np.array([shipped.score(x) for x in S])
        out[name] = {"n": int(len(wrong)), "wrong": int(wrong.sum()), "shipped": auroc(b, wrong), "refit": auroc(a, wrong),
                     "refit_minus_shipped": paired_auroc_difference(a, b, wrong)}
    return out


def markdown(res: dict) -> str:
    lines = ["# More train questions for the knowledge check's probe", "",
             f"{res['n']} train answers, {res['new']} of them new to the shipped probe; refit C {res['refit_C']:.4g} "
             f"(cross-validated AUROC {res['refit_cv_auroc']:.3f} on all rows).", "",
             "| train set | new rows (wrong) | shipped | refit, out of fold | refit − shipped (CI) |", "|---|---|---|---|---|"]
    for name, r in res["per_set"].items():
        c = r["refit_minus_shipped"]
        lines.append(f"| {name} | {r['new_rows']} ({r['wrong']}) | {r['shipped']:.3f} | {r['refit']:.3f} | "
                     f"{c['difference']:+.3f} ({c['ci95'][0]:+.3f}..{c['ci95'][1]:+.3f}) |")
    lines += ["", f"Rule ({res['rule']}): weaker set {res['weaker_set']}, ships **{res['ship']}**.", ""]
    if res.get("dev"):
        lines += ["## Dev, scored once afterwards", "", "| dev set (n, wrong) | shipped | refit | refit − shipped (CI) |",
                  "|---|---|---|---|"]
        for name, r in res["dev"].items():
            c = r["refit_minus_shipped"]
            lines.append(f"| {name} ({r['n']}, {r['wrong']}) | {r['shipped']:.3f} | {r['refit']:.3f} | "
                         f"{c['difference']:+.3f} ({c['ci95'][0]:+.3f}..{c['ci95'][1]:+.3f}) |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", nargs="+", required=True)
    ap.add_argument("--new", nargs="+", required=True)
    ap.add_argument("--probe", help="the shipped probe file (default: the packaged short-form probe)")
    ap.add_argument("--dev", nargs="*", default=[], help="NAME=RUN[,RUN...]: dev studies, reported only")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--out", default="benchmarks/results/selfknow-qwen/probe-growth")
    a = ap.parse_args()
    d = train_rows(a.old, a.new)
    shipped = load_probe(a.probe) if a.probe else packaged_probe(d["model"], "short")
    res, refit = compare(d, shipped, a.folds)
    res.update(old=[Path(r).name for r in a.old], new_runs=[Path(r).name for r in a.new])
    if a.dev:
        res["dev"] = dev_report(shipped, refit, dev_sets(a.dev))
    write_report(a.out, "probe-growth", res, markdown(res))


if __name__ == "__main__":
    main()
