"""Self-knowledge where SeaKR decides, for one model: one table per decision form, from committed rows.

  python benchmarks/selfknow.py [--out benchmarks/results/selfknow-qwen]

Reads (all dev data; every probe, calibration map and gate level comes from the package, fitted on train):
  short   the knowledge check's detect studies (``seakr detect --form short``) of the dev files: AUROC of every
          estimator for "the short answer is wrong", paired against EigenScore, with each one's cost;
  gate    the check's P(correct) beside SeaKR chains that retrieve (nearly) every step: F1 and retrievals of
          the gated system against the chain alone, along the gate level (the trade-off curve);
  final   SeaKR's final pair in the method tables' runs: the raw-U rule against the calibrated one;
  table   SeaKR with the fitted signals (check gate, chain, calibrated final) against IRCoT and DRAGIN.
Writes selfknow.json and selfknow.md under --out and prints the JSON.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from seakr.eval.metrics import auroc, paired_auroc_difference, paired_bootstrap
from seakr.eval.rowlog import read_results, run_rows
from seakr.eval.selfknow import chain_f1, final_choice, gate_sweep
from seakr.probes.bank import SelfKnowledge

RES = Path(__file__).parent / "results"
MODEL = "qwen2.5-coder-0.5b"
SETS = {  # dev set -> (detect studies of the check, the method table's folder)
    "hotpotqa": (["dev-hotpotqa-hard100-short", "dev-hotpotqa-first53-short"], "table-qwen-hotpotqa100"),
    "2wiki": (["dev-2wiki-first100-short"], "table-qwen-2wiki100"),
}
CHAIN = "seakr-multihop-delta50"  # SeaKR with the shipped delta: retrieves on nearly every question


def short_form(out: Path, studies: list[str]) -> dict:
    rows = [r for s in studies for r in read_results(out / s / "detect_rows.jsonl")]
    wrong = [r["f1"] < 0.5 for r in rows]
    names = list(rows[0]["scores"])
    score = lambda n: [np.inf if r["scores"][n] is None else r["scores"][n] for r in rows]  # noqa: E731
    cost = json.loads((out / studies[0] / "detect.json").read_text())["cost"]["estimators"]
    return {"n": len(rows), "right": int(len(rows) - sum(wrong)),
            "estimators": {n: {"auroc": auroc(score(n), wrong), **paired_auroc_difference(score(n), score("eigen"), wrong),
                               "rows": cost[n]["rows"]} for n in names}}


def first_step(short: dict, chain: dict) -> dict:
    """The paper's gate signal against the check's, on one label: does the model answer wrong without
    retrieval (the short closed-book answer's F1 < 0.5)? The paper decides on the first pseudo-step's U
    (the shipped run's rows); the check on its own answer's scores."""
    ids = sorted(i for i in set(short) & set(chain) if chain[i].steps)
    wrong = [short[i]["f1"] < 0.5 for i in ids]
    step_u = [chain[i].steps[0].u for i in ids]
    sc = lambda n: [np.inf if short[i]["scores"].get(n) is None else short[i]["scores"][n] for i in ids]  # noqa: E731
    return {"n": len(ids), "wrong": int(sum(wrong)), "auroc": {"pseudo-step U (paper)": auroc(step_u, wrong),
            "check EigenScore": auroc(sc("eigen"), wrong), "check probe": auroc(sc("probe"), wrong)},
            "check_eigen_minus_pseudo_step": paired_auroc_difference(sc("eigen"), step_u, wrong)}


def p_check(bank: SelfKnowledge, gate: str):
    if gate == "probe":
        return lambda r: 1.0 - (1.0 if r["scores"].get("probe") is None else r["scores"]["probe"])
    cal = bank.calibration("short", "eigen")
    return lambda r: cal(r["scores"]["eigen"])


def one_set(out: Path, bank: SelfKnowledge, name: str) -> dict:
    studies, table = SETS[name]
    short = {r["id"]: r for s in studies for r in read_results(out / s / "detect_rows.jsonl")}
    chain = {r.id: r for r in run_rows(RES / table / CHAIN)}
    pr, pk = bank.calibration("final-rationale", "eigen"), bank.calibration("final-knowledge", "eigen")
    cal_chain = lambda r: chain_f1(r, "calibrated", pr, pk)  # noqa: E731
    res = {"short": short_form(out, studies), "final": final_choice(list(chain.values()), pr, pk), "gate": {},
           "first_step": first_step(short, chain)}
    for gate in ("check", "probe"):
        g_p, source = bank.gate_p(gate)
        grid = sorted({*np.round(np.linspace(0, 1, 21), 2).tolist(), g_p})  # the shipped level exactly, on the curve
        sweep = gate_sweep(short, chain, p_check(bank, gate), grid=grid, chain_f1_of=cal_chain)
        at = next(c for c in sweep["curve"] if c["gate_p"] == g_p)
        res["gate"][gate] = {"gate_p": g_p, "source": source, "at_gate_p": at, **sweep}
    gates = {g: (p_check(bank, g), bank.gate_p(g)[0], 1 if g == "probe" else 21) for g in ("probe", "check")}
    res["table"] = method_table(table, short, chain, gates, cal_chain)
    return res


def method_table(table: str, short: dict, chain: dict, gates: dict, cal_chain) -> dict:
    """Per question: SeaKR with the fitted signals = the check's answer where P(correct) >= gate_p, else the
    chain with the calibrated final choice; one row per gate (``gates``: name -> (p_correct, gate_p, rows the
    check decodes)), beside SeaKR as run, IRCoT and DRAGIN on the same questions."""
    runs = {n: {r.id: r for r in run_rows(RES / table / n)} for n in ("ircot", "dragin")}
    ids = sorted(set(short) & set(chain) & set(runs["ircot"]) & set(runs["dragin"]))
    f1, ret, rows_, answered = {}, {}, {}, {}
    for gate, (p_correct, gate_p, check_rows) in gates.items():
        name = f"seakr-{gate}"
        sure = {i: p_correct(short[i]) >= gate_p and bool(short[i]["answer"].strip()) for i in ids}
        answered[name] = float(np.mean(list(sure.values())))
        f1[name] = [short[i]["f1"] if sure[i] else cal_chain(chain[i]) for i in ids]
        ret[name] = [0 if sure[i] else chain[i].retrievals for i in ids]
        rows_[name] = [check_rows + (0 if sure[i] else chain[i].totals["sampled_sequences"]) for i in ids]
    f1["seakr-paper"] = [chain[i].f1 for i in ids]
    ret["seakr-paper"] = [chain[i].retrievals for i in ids]
    rows_["seakr-paper"] = [chain[i].totals["sampled_sequences"] for i in ids]
    for n in runs:
        f1[n] = [runs[n][i].f1 for i in ids]
        ret[n] = [runs[n][i].retrievals for i in ids]
        rows_[n] = [runs[n][i].totals["sampled_sequences"] for i in ids]
    return {"n": len(ids), "answered_by_check": answered,
            "f1": {k: float(np.mean(v)) for k, v in f1.items()},
            "retrievals_per_q": {k: float(np.mean(v)) for k, v in ret.items()},
            "model_rows_per_q": {k: float(np.mean(v)) for k, v in rows_.items()},
            "minus": {g: {k: paired_bootstrap(f1[g], f1[k]) for k in f1 if not k.startswith("seakr-") or k == "seakr-paper"}
                      for g in answered}}


def _ci(d: dict, scale: float = 100) -> str:
    lo, hi = d["ci95"]
    return f"{scale * d['mean_difference']:+.1f} (CI {scale * lo:+.1f}..{scale * hi:+.1f})"


def markdown(res: dict) -> str:
    out = [f"# Self-knowledge where SeaKR decides: {res['model']}",
           "", "Dev questions only; every probe, calibration map and gate level was fitted on train questions "
           "(`seakr/probes/data`, provenance inside). Regenerate: `python benchmarks/selfknow.py`.", ""]
    for name, r in res["sets"].items():
        sh = r["short"]
        out += [f"## {name}", "", f"### The knowledge check: a short closed-book answer ({sh['n']} questions, {sh['right']} right)",
                "", "| estimator | AUROC for \"wrong\" | minus EigenScore (paired) | model rows per decision |", "|---|---|---|---|"]
        for est, v in sorted(sh["estimators"].items(), key=lambda kv: -kv[1]["auroc"]):
            diff = "" if est == "eigen" else f"{v['difference']:+.3f} (CI {v['ci95'][0]:+.3f}..{v['ci95'][1]:+.3f})"
            out.append(f"| {est} | {v['auroc']:.3f} | {diff} | {v['rows']} |")
        fs = r["first_step"]
        d = fs["check_eigen_minus_pseudo_step"]
        out += ["", f"### Which signal knows whether the model can answer without retrieval ({fs['n']} questions, "
                f"{fs['wrong']} answered wrong closed-book)", "",
                "AUROC for \"the short closed-book answer is wrong\": " + ", ".join(f"{k} {v:.3f}" for k, v in fs["auroc"].items())
                + f"; check EigenScore - pseudo-step U {d['difference']:+.3f} (CI {d['ci95'][0]:+.3f}..{d['ci95'][1]:+.3f}).",
                "", "### The gate: the check against the chain that retrieves at every step", "",
                "| gate | gate level (chosen on train) | AUROC of P(correct) for \"wrong\" | answered by the check | "
                "F1 | the chain alone | gated - chain (paired) | retrievals/q (gated / chain) |", "|---|---|---|---|---|---|---|---|"]
        for gate, g in r["gate"].items():
            a = g["at_gate_p"]
            out.append(f"| {gate} | {g['gate_p']:.2f} | {g['check_auroc_wrong']:.3f} | {a['answered_by_check']:.2f} | "
                       f"{100 * a['f1']:.1f} | {100 * g['chain_f1']:.1f} | {_ci(a['minus_chain'])} | "
                       f"{a['retrievals_per_q']:.2f} / {g['chain_retrievals_per_q']:.2f} |")
        f = r["final"]
        out += ["", f"### The final choice ({f['n']} questions; the two answers' F1 differ on {f['differ']})", "",
                f"AUROC for \"the knowledge answer is the better one\": raw U {f['auroc_raw_u']:.2f}, calibrated "
                f"{f['auroc_calibrated']:.2f}; the calibrated rule chose the knowledge answer on "
                f"{100 * f['chose_knowledge_calibrated']:.0f} %.", "",
                "| rule | F1 | calibrated minus it (paired) |", "|---|---|---|"]
        for rule in ("raw_u", "rationale", "knowledge"):
            out.append(f"| {rule} | {100 * f['f1'][rule]:.1f} | {_ci(f['calibrated_minus'][rule])} |")
        out.append(f"| calibrated | {100 * f['f1']['calibrated']:.1f} | |")
        t = r["table"]
        out += ["", f"### Method table, composed from the rows ({t['n']} questions)", "",
                "seakr-probe / seakr-check: the check's answer where its P(correct) reaches the packaged gate level, "
                "else the chain of `seakr-multihop-delta50` (SeaKR as shipped, retrieving on nearly every question) with "
                "the calibrated final choice. Answered by the check: "
                + ", ".join(f"{k} {100 * v:.0f} %" for k, v in t["answered_by_check"].items()) + ".", "",
                "| method | F1 | retrievals/q | model rows/q | seakr-probe minus it (paired) | seakr-check minus it (paired) |",
                "|---|---|---|---|---|---|"]
        for m in t["f1"]:
            cells = [_ci(t["minus"][g][m]) if m in t["minus"][g] else "" for g in ("seakr-probe", "seakr-check")]
            out.append(f"| {m} | {100 * t['f1'][m]:.1f} | {t['retrievals_per_q'][m]:.2f} | {t['model_rows_per_q'][m]:.0f} | "
                       f"{cells[0]} | {cells[1]} |")
        out.append("")
    return "\n".join(out) + "\n"


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(res["sets"]), figsize=(5.2 * len(res["sets"]), 3.6))
    for ax, (name, r) in zip(np.atleast_1d(axes), res["sets"].items()):
        for gate, g in r["gate"].items():
            xs = [c["gate_p"] for c in g["curve"]]
            ax.plot(xs, [100 * c["f1"] for c in g["curve"]], "o-", ms=3, label=f"F1, gate={gate}")
            ax.axvline(g["gate_p"], color="gray", lw=0.8, ls=":")
        ax.axhline(100 * r["gate"]["check"]["chain_f1"], color="black", lw=0.8, label="chain alone")
        ax2 = ax.twinx()
        ax2.plot(xs, [c["retrievals_per_q"] for c in r["gate"]["check"]["curve"]], "s--", ms=3, color="tab:orange",
                 label="retrievals/q (check)")
        ax.set_title(name)
        ax.set_xlabel("gate level: answer at once when P(correct) >= it")
        ax.set_ylabel("F1 (%)")
        ax2.set_ylabel("retrievals per question")
        ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(RES / "selfknow-qwen"))
    a = ap.parse_args()
    out = Path(a.out)
    bank = SelfKnowledge(MODEL)
    res = {"model": MODEL, "sets": {name: one_set(out, bank, name) for name in SETS}}
    (out / "selfknow.json").write_text(json.dumps(res, indent=2))
    (out / "selfknow.md").write_text(markdown(res))
    plot(res, out / "gate-tradeoff.png")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
