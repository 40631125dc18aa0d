"""Are a probe's probabilities calibrated? Raw logistic fit against the same fit recalibrated on out-of-fold logits.

  python benchmarks/probe_calibration.py RUN... [--tap L11:mlp] [--folds 5] [--outer 5] [--train N]
                                         [--out benchmarks/results/selfknow-qwen/probe-calibration]

RUN: short-form detect studies of train questions (tuning data only). Every row is scored by probes that never
saw it: an outer k-fold split (stratified) fits both probes on the other folds (`seakr probe fit`'s fit: C by
inner cross-validation; the second then rescales its logit by a Platt fit on inner out-of-fold logits) and
scores the held-out fold. Reported per probe: log-loss, Brier score, expected calibration error (10 equal-width
bins), AUROC, the range of P(wrong), and the paired per-row log-loss and Brier differences with bootstrap CIs.
The packaged probe of the studies' model is scored beside them where it reads the same tap (a few of these
questions may be among the ones it was fitted on: read it as a reference, not a held-out figure).
"""

from __future__ import annotations

from _common import write_report  # noqa: E402
import argparse
from pathlib import Path

import numpy as np

from seakr.eval.metrics import auroc, paired_bootstrap
from seakr.eval.fitting import load_states
from seakr.probes.probe import fit_probe, packaged_probe


def held_out(X: np.ndarray, wrong: np.ndarray, model: str, tap: str, folds: int, outer: int,
             train: int | None = None) -> dict:
    """Each row's P(wrong) from the raw and the recalibrated probe fitted on the other outer folds; with
    ``train``, on ``train`` rows drawn (stratified) from the other folds only, as a small tuning set would be."""
    from sklearn.model_selection import StratifiedKFold, train_test_split

    out = {"raw": np.zeros(len(wrong)), "recalibrated": np.zeros(len(wrong))}
    for i, (tr, te) in enumerate(StratifiedKFold(outer, shuffle=True, random_state=1).split(X, wrong)):
        if train is not None:
            tr, _ = train_test_split(tr, train_size=train, stratify=wrong[tr], random_state=i)
        for name, flag in (("raw", False), ("recalibrated", True)):
            p = fit_probe(X[tr], wrong[tr], model=model, tap=tap, form="short", folds=folds, recalibrate=flag)
            out[name][te] = p.scores(X[te])
    return out


def figures(p: np.ndarray, wrong: np.ndarray) -> dict:
    y = wrong.astype(float)
    q = np.clip(p, 1e-6, 1 - 1e-6)
    bins = np.minimum((q * 10).astype(int), 9)
    ece = sum(abs(q[bins == b].mean() - y[bins == b].mean()) * np.mean(bins == b) for b in range(10) if (bins == b).any())
    return {"log_loss": float(-np.mean(y * np.log(q) + (1 - y) * np.log(1 - q))), "brier": float(np.mean((q - y) ** 2)),
            "ece": float(ece), "auroc": auroc(list(p), list(wrong)), "p_min": float(p.min()), "p_max": float(p.max())}


def row_losses(p: np.ndarray, wrong: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    y, q = wrong.astype(float), np.clip(p, 1e-6, 1 - 1e-6)
    return -(y * np.log(q) + (1 - y) * np.log(1 - q)), (q - y) ** 2


def run(runs: list[str], tap: str | None, folds: int, outer: int, train: int | None = None) -> dict:
    model, taps, X, wrong, names, _ = load_states(runs)
    tap = tap or taps[0]
    S = X[:, taps.index(tap), :]
    probs = held_out(S, wrong, model, tap, folds, outer, train)
    res = {"model": model, "tap": tap, "n": int(len(wrong)), "wrong": int(wrong.sum()), "data": names,
           "folds": folds, "outer": outer, "train": train, "probes": {k: figures(v, wrong) for k, v in probs.items()}}
    (ll_c, br_c), (ll_r, br_r) = row_losses(probs["recalibrated"], wrong), row_losses(probs["raw"], wrong)
    res["recalibrated_minus_raw"] = {"log_loss": paired_bootstrap(list(ll_c), list(ll_r)),
                                     "brier": paired_bootstrap(list(br_c), list(br_r))}
    try:
        shipped = packaged_probe(model, "short")
    except ValueError:
        shipped = None
    if shipped is not None and shipped.tap == tap and not shipped.features:
        res["probes"]["packaged (reference)"] = figures(shipped.scores(S), wrong)
    return res


def markdown(res: dict) -> str:
    lines = ["# Calibration of the knowledge check's probe: raw fit vs recalibrated on out-of-fold logits", "",
             f"{res['model']}, tap {res['tap']}; {res['n']} train answers ({res['wrong']} wrong) from "
             f"{', '.join(res['data'])}; every row scored by probes fitted on "
             + (f"{res['train']} rows drawn from " if res.get("train") else "")
             + f"the other {res['outer'] - 1} of {res['outer']} folds.", "",
             "| probe | log-loss | Brier | ECE | AUROC | P(wrong) range |", "|---|---|---|---|---|---|"]
    for name, f in res["probes"].items():
        lines.append(f"| {name} | {f['log_loss']:.3f} | {f['brier']:.3f} | {f['ece']:.3f} | {f['auroc']:.3f} | "
                     f"{f['p_min']:.2f}–{f['p_max']:.2f} |")
    d = res["recalibrated_minus_raw"]
    lines += ["", "Recalibrated − raw, paired over rows (95 % bootstrap CI): log-loss "
              f"{d['log_loss']['mean_difference']:+.4f} ({d['log_loss']['ci95'][0]:+.4f}..{d['log_loss']['ci95'][1]:+.4f}), "
              f"Brier {d['brier']['mean_difference']:+.4f} ({d['brier']['ci95'][0]:+.4f}..{d['brier']['ci95'][1]:+.4f}).", ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="short-form detect studies of train questions")
    ap.add_argument("--tap", help="LAYER:SOURCE (default: the first stored, the model's own)")
    ap.add_argument("--folds", type=int, default=5, help="inner folds (C, and the recalibration's logits)")
    ap.add_argument("--outer", type=int, default=5, help="outer folds (held-out scoring)")
    ap.add_argument("--train", type=int, help="fit on this many rows of the other folds (a small tuning set)")
    ap.add_argument("--out", default="benchmarks/results/selfknow-qwen/probe-calibration")
    a = ap.parse_args()
    res = run(a.runs, a.tap, a.folds, a.outer, a.train)
    res["runs"] = [Path(r).name for r in a.runs]
    write_report(a.out, f"probe-calibration{f'-train{a.train}' if a.train else ''}", res, markdown(res))


if __name__ == "__main__":
    main()
