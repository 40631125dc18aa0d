"""How well do the default's probabilities of correctness match how often it is right? Read from committed rows.

  python benchmarks/shipped_calibration.py NAME=RUN[,RUN...] ... [--out benchmarks/results/shipped-calibration]

RUN: eval runs of SeaKR with every default (``gate=probe``, ``reasoning=probe``), whose rows keep each final
candidate's P(correct) beside its F1. For each form whose probability the method compares — the knowledge check
(every question: the gate reads it against ``gate_p``), the rationale answer and the knowledge answer (questions
that went on to the chain: the final choice compares them) — and each set: how many answers, the share right
(F1 >= 0.5, the probes' label), the mean P(correct), their difference with a bootstrap CI (calibration in the
large), the expected calibration error over 10 equal-width bins, the Brier score, the AUROC of P for "right", and
the bins themselves. It reads rows only (no model), so it reports on dev rows without fitting anything on them.
"""

from __future__ import annotations

from _common import write_report  # noqa: E402
import argparse
import json
from pathlib import Path

import numpy as np

from seakr.eval.metrics import CORRECT_F1, auroc, bootstrap_ci

FORMS = ("check", "rationale", "knowledge")


def pairs(runs: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per form, (P(correct), right) of every row's candidate of that form that carries a probability."""
    got = {f: ([], []) for f in FORMS}
    for run in runs:
        for line in (Path(run) / "scores.jsonl").read_text(encoding="utf-8").splitlines():
            cands = json.loads(line)["final"]["candidates"]
            for form in FORMS:
                c = cands.get(form)
                if c is not None and c.get("p") is not None and c.get("f1") is not None:
                    got[form][0].append(c["p"])
                    got[form][1].append(c["f1"] >= CORRECT_F1)
    return {f: (np.array(p, dtype=float), np.array(y, dtype=bool)) for f, (p, y) in got.items()}


def figures(p: np.ndarray, right: np.ndarray, n_bins: int = 10) -> dict:
    """Calibration figures of probabilities ``p`` against outcomes ``right``."""
    y = right.astype(float)
    bins = np.minimum((p * n_bins).astype(int), n_bins - 1)
    table = [{"bin": f"{b / n_bins:.1f}-{(b + 1) / n_bins:.1f}", "n": int((bins == b).sum()),
              "mean_p": float(p[bins == b].mean()), "right": float(y[bins == b].mean())}
             for b in range(n_bins) if (bins == b).any()]
    ece = sum(abs(t["mean_p"] - t["right"]) * t["n"] for t in table) / len(p)
    lo, hi = bootstrap_ci(list(p - y))  # per answer P - outcome: its mean is mean P - share right
    both = 0 < y.sum() < len(y)
    return {"n": int(len(p)), "right": float(y.mean()), "mean_p": float(p.mean()),
            "mean_p_minus_right": float(p.mean() - y.mean()), "ci": [lo, hi], "ece": float(ece),
            "brier": float(np.mean((p - y) ** 2)), "auroc_right": auroc(list(p), list(right)) if both else None,
            "bins": table}


def markdown(res: dict) -> str:
    lines = ["| set | form | n | right | mean P(correct) | P - right (95 % CI) | ECE | Brier | AUROC |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, forms in res["sets"].items():
        for form, f in forms.items():
            if f is None:
                continue
            a = "–" if f["auroc_right"] is None else f"{f['auroc_right']:.3f}"
            lines.append(f"| {name} | {form} | {f['n']} | {f['right']:.3f} | {f['mean_p']:.3f} | "
                         f"{f['mean_p_minus_right']:+.3f} ({f['ci'][0]:+.3f}..{f['ci'][1]:+.3f}) | {f['ece']:.3f} | "
                         f"{f['brier']:.3f} | {a} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sets", nargs="+", help="NAME=RUN[,RUN...]")
    ap.add_argument("--out", default="benchmarks/results/shipped-calibration")
    args = ap.parse_args()
    res = {"sets": {}, "label": f"right: F1 >= {CORRECT_F1}", "runs": {}}
    for spec in args.sets:
        name, runs = spec.split("=", 1)
        res["runs"][name] = runs.split(",")
        got = pairs(res["runs"][name])
        res["sets"][name] = {f: figures(*got[f]) if len(got[f][0]) else None for f in FORMS}
    write_report(args.out, "calibration", res, markdown(res))


if __name__ == "__main__":
    main()
