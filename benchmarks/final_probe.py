"""Which rule should choose SeaKR's final answer for a model, decided on train chains.

  python benchmarks/final_probe.py RUN... [--scored RUN...] [--out benchmarks/results/final-probe-qwen]

RUN: SeaKR eval runs on train questions that kept the final answers' states (``states/final-*``; the
candidate-probe re-rank reads them). For each final form, a probe for "this answer is wrong" (F1 < 0.5)
is scored out of fold (5 stratified folds; each question has one answer of each form) with the
regularisation ``fit_probe`` picks on all rows; then, per question, the choice the probes would make
(the more probable answer; a tie goes to the knowledge answer, as in SeaKR) against each single answer.

--scored RUN: train chains whose final answers carry their U (reasoning self-aware or calibrated): there
the paper's rule (the lower U) and the calibrated choice (the packaged maps) are scored the same way.

--dev RUN: dev eval runs that kept their final answers' states, scored once afterwards with the packaged
final-form probes (the ones ``reasoning=probe`` reads): the choice they make against each single answer.
Both answers and their states do not depend on the choice, so this is the run's own result with those
probes. Reported only; never used to choose.

The rule fixed before these runs: ship ``reasoning=probe`` where its out-of-fold F1 on train is at least
the better single answer's. The probes failed it on the first set (no out-of-fold signal), and the rule
was widened before the second set finished: every choice rule is compared with the knowledge answer alone
on its train questions, and the default is the knowledge answer unless a rule beats it (mean F1
difference above zero); ties go to the knowledge answer, the cheapest (one greedy answer, no samples).
Dev figures come from ``seakr eval`` / ``seakr compare`` afterwards, never from here.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from seakr.eval.metrics import auroc, paired_bootstrap
from seakr.eval.rowlog import run_rows
from seakr.eval.states import StateStore
from seakr.methods.base import pick
from seakr.methods.records import FinalAnswer
from seakr.eval.fitting import _data_name, out_of_fold
from seakr.eval.metrics import CORRECT_F1
from seakr.probes.probe import fit_probe

FORMS = ("rationale", "knowledge")


def both_answers(runs: list[str], read: dict | None = None) -> dict:
    """Questions where both final answers have an F1 and a stored state: states (n, 2, d), F1s (n, 2); a
    question of one data file in two runs (overlapping subsets) is read once. ``read``, where given,
    receives each run's rows {id: row}, for a caller that needs them too."""
    X, F, A, ids, data, seen, tap = [], [], [], [], [], set(), None
    for run in runs:
        stores = {f: StateStore.open(Path(run) / "states" / f"final-{f}") for f in FORMS}
        tap = stores["rationale"].taps[0]  # the state read below (z[0])
        cfg = json.loads((Path(run) / "config.json").read_text())
        rows = {r.id: r for r in run_rows(Path(run))}
        if read is not None:
            read[run] = rows
        for r in rows.values():
            if (r.id, _data_name(cfg, run)) in seen:  # overlapping subsets: the first run's row
                continue
            seen.add((r.id, _data_name(cfg, run)))
            c = r.final.candidates
            zs = [stores[f].get(r.id) if f in c else None for f in FORMS]
            if any(z is None for z in zs) or any(c[f].f1 is None for f in FORMS):
                continue
            X.append(np.stack([z[0] for z in zs]))
            F.append([c[f].f1 for f in FORMS])
            A.append([c[f].answer for f in FORMS])
            ids.append(r.id)
            data.append(_data_name(cfg, run))
    return {"X": np.stack(X), "F": np.array(F), "answers": A, "ids": ids, "data": data, "tap": tap}


def evaluate(d: dict, folds: int) -> dict:
    F = d["F"]
    p_wrong, Cs = {}, {}
    for j, f in enumerate(FORMS):
        wrong = (F[:, j] < CORRECT_F1).astype(int)
        # C as fit_probe picks it on all rows, then each row's P(wrong) from a probe that never saw it
        Cs[f] = fit_probe(d["X"][:, j, :], wrong, model="-", tap=d["tap"], form=f"final-{f}", folds=folds).C
        p_wrong[f] = out_of_fold(d["X"][:, j, :], wrong, folds, C=Cs[f])
    pr, pk = 1 - p_wrong["rationale"], 1 - p_wrong["knowledge"]
    # as SeaKR chooses (methods.base.pick): the more probable answer; "unknown" defers; a tie goes to knowledge
    rat = [pick(FinalAnswer(a, u=-p), FinalAnswer(b, u=-q)) == "rationale" for (a, b), p, q in zip(d["answers"], pr, pk)]
    chosen = np.where(rat, F[:, 0], F[:, 1])
    differ = F[:, 0] != F[:, 1]
    res = {"n": int(len(F)), "differ": int(differ.sum()), "C": Cs, "data": sorted(set(d["data"])),
           "oof_auroc_wrong": {f: auroc(p_wrong[f], F[:, j] < CORRECT_F1) for j, f in enumerate(FORMS)},
           "choice_auroc": auroc((pk - pr)[differ], (F[:, 1] > F[:, 0])[differ]),
           "f1": {"probe": float(chosen.mean()), "rationale": float(F[:, 0].mean()), "knowledge": float(F[:, 1].mean()),
                  "oracle": float(F.max(1).mean())},
           "chose_knowledge": 1 - float(np.mean(rat))}
    res["probe_minus"] = {k: paired_bootstrap(chosen, F[:, j]) for j, k in enumerate(FORMS)}
    res["rationale_minus_knowledge"] = paired_bootstrap(F[:, 0], F[:, 1])
    better = max(res["f1"]["rationale"], res["f1"]["knowledge"])
    res["ship"] = bool(res["f1"]["probe"] >= better)
    return res


def whole_run(run: str, rows: dict, chosen: dict, pair: list[str]) -> dict:
    """The run's F1 over all its questions (``rows``, {id: row}) with the re-scored choice (questions the
    knowledge check answered, or without both answers, keep their own F1), paired against sibling runs
    named in ``pair``."""
    f1 = {i: chosen.get(i, r.f1) for i, r in rows.items()}
    res = {"n": len(f1), "f1": float(np.mean(list(f1.values()))), "as_run": float(np.mean([r.f1 for r in rows.values()]))}
    for other in pair:
        o = {r.id: r.f1 for r in run_rows(Path(run).parent / other)}
        ids = sorted(set(f1) & set(o))
        res[f"minus_{other}"] = paired_bootstrap([f1[i] for i in ids], [o[i] for i in ids])
    return res


def dev_report(runs: list[str], model: str, pair: list[str] = ()) -> dict:
    """The packaged probes' choice on each dev run's stored final states, against each single answer and,
    over the whole run, against its sibling runs ``pair`` (e.g. ircot, dragin)."""
    from seakr.probes.bank import SelfKnowledge

    bank, out = SelfKnowledge(model), {}
    for run in runs:
        read = {}
        d = both_answers([run], read)
        p = {f: np.array([1 - bank.probe(f"final-{f}").score(x) for x in d["X"][:, j, :]]) for j, f in enumerate(FORMS)}
        F = d["F"]
        rat = [pick(FinalAnswer(a, u=-pa), FinalAnswer(b, u=-pb)) == "rationale"
               for (a, b), pa, pb in zip(d["answers"], p["rationale"], p["knowledge"])]
        chosen, differ = np.where(rat, F[:, 0], F[:, 1]), F[:, 0] != F[:, 1]
        whole = whole_run(run, read[run], dict(zip(d["ids"], chosen)), pair)
        out[Path(run).parent.name + "/" + Path(run).name] = {"whole_run": whole,
            "n": int(len(F)), "differ": int(differ.sum()),
            "f1": {"probe": float(chosen.mean()), "rationale": float(F[:, 0].mean()), "knowledge": float(F[:, 1].mean())},
            "choice_auroc": auroc((p["knowledge"] - p["rationale"])[differ], (F[:, 1] > F[:, 0])[differ]),
            "probe_minus": {f: paired_bootstrap(chosen, F[:, j]) for j, f in enumerate(FORMS)}}
    return out


def scored_rules(runs: list[str], model: str) -> dict:
    """The paper's lower-U rule and the calibrated choice (the packaged maps) against the knowledge answer
    alone, on train chains whose two final answers carry their U."""
    from seakr.probes.bank import SelfKnowledge

    bank = SelfKnowledge(model)
    pr, pk = bank.calibration("final-rationale", "eigen"), bank.calibration("final-knowledge", "eigen")
    f = {"self-aware": [], "calibrated": [], "knowledge": []}
    for run in runs:
        for r in run_rows(Path(run)):
            c = r.final.candidates
            if any(n not in c or c[n].f1 is None for n in FORMS):
                continue
            a, k = c["rationale"], c["knowledge"]
            f["self-aware"].append(a.f1 if pick(a, k) == "rationale" else k.f1)
            p_a, p_k = pr(a.u), pk(k.u)
            f["calibrated"].append(a.f1 if pick(a.replace(u=-p_a), k.replace(u=-p_k)) == "rationale" else k.f1)
            f["knowledge"].append(k.f1)
    n = len(f["knowledge"])
    return {"runs": [str(r) for r in runs], "n": n, "f1": {k: sum(v) / n for k, v in f.items()},
            "minus_knowledge": {k: paired_bootstrap(f[k], f["knowledge"]) for k in ("self-aware", "calibrated")}}


def decide(res: dict, scored: dict | None) -> dict:
    """The knowledge answer unless a rule's mean F1 difference from it on its train questions is above 0."""
    diffs = {"probe": res["probe_minus"]["knowledge"]["mean_difference"],
             "rationales": res["rationale_minus_knowledge"]["mean_difference"]}
    if scored:
        diffs.update({k: d["mean_difference"] for k, d in scored["minus_knowledge"].items()})
    best = max(diffs, key=lambda k: diffs[k])
    return {"reasoning": best if diffs[best] > 0 else "knowledge", "minus_knowledge": diffs}


def _ci(d: dict) -> str:
    return f"{100 * d['mean_difference']:+.1f} (CI {100 * d['ci95'][0]:+.1f}..{100 * d['ci95'][1]:+.1f})"


def markdown(res: dict, scored: dict | None, decision: dict, runs: list[str]) -> str:
    f, m = res["f1"], res["probe_minus"]
    lines = [
        "# The final choice on train chains", "",
        f"Runs: {', '.join(Path(r).name for r in runs)}; {res['n']} questions with both final answers, "
        f"{res['differ']} where their F1 differ.", "",
        "| | rationale form | knowledge form |", "|---|---|---|",
        f"| probe: out-of-fold AUROC for \"wrong\" | {res['oof_auroc_wrong']['rationale']:.3f} | {res['oof_auroc_wrong']['knowledge']:.3f} |",
        f"| C | {res['C']['rationale']:.4g} | {res['C']['knowledge']:.4g} |", "",
        f"Choice by the probes (the more probable answer, out of fold): F1 {100 * f['probe']:.1f}; rationale only "
        f"{100 * f['rationale']:.1f}, knowledge only {100 * f['knowledge']:.1f}, oracle {100 * f['oracle']:.1f}; "
        f"chose the knowledge answer on {100 * res['chose_knowledge']:.0f} %.",
        f"Probe choice minus rationale {_ci(m['rationale'])}, minus knowledge {_ci(m['knowledge'])}; AUROC of "
        f"P(knowledge) - P(rationale) for \"knowledge is better\" where they differ: {res['choice_auroc']:.3f}.",
        f"Rationale only minus knowledge only: {_ci(res['rationale_minus_knowledge'])}.", ""]
    if scored:
        s = scored["minus_knowledge"]
        lines += [f"On {scored['n']} train chains whose answers carry their U ({', '.join(Path(r).name for r in scored['runs'])}): "
                  f"the paper's lower-U rule {100 * scored['f1']['self-aware']:.1f}, the calibrated choice "
                  f"{100 * scored['f1']['calibrated']:.1f} (its maps were fitted on these chains), knowledge only "
                  f"{100 * scored['f1']['knowledge']:.1f}; minus knowledge: lower U {_ci(s['self-aware'])}, "
                  f"calibrated {_ci(s['calibrated'])}.", ""]
    lines += [f"First rule (fixed before the runs: reasoning=probe where its F1 >= the better single answer's): "
              f"**{'met' if res['ship'] else 'not met'}**. Widened rule (the knowledge answer unless a rule beats it): "
              f"**reasoning = {decision['reasoning']}** (each rule minus knowledge: "
              + ", ".join(f"{k} {100 * v:+.1f}" for k, v in decision["minus_knowledge"].items()) + ").", ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--scored", nargs="*", default=[], help="train chains whose final answers carry their U")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--out", default="benchmarks/results/final-probe-qwen")
    ap.add_argument("--write", help="reasoning.json to record the decision in (e.g. src/seakr/probes/data/reasoning.json)")
    ap.add_argument("--dev", nargs="*", default=[], help="dev eval runs with stored final states: reported only")
    ap.add_argument("--pair", nargs="*", default=["ircot", "dragin"], help="sibling runs of each dev run to pair the whole run with")
    a = ap.parse_args()
    res = evaluate(both_answers(a.runs), a.folds)
    scored = scored_rules(a.scored, a.model) if a.scored else None
    decision = decide(res, scored)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "train-choice.json").write_text(json.dumps({**res, "scored": scored, "decision": decision}, indent=2))
    text = markdown(res, scored, decision, a.runs)
    (out / "train-choice.md").write_text(text)
    print(text)
    if a.dev:
        dev = dev_report(a.dev, a.model, a.pair)
        (out / "dev-choice.json").write_text(json.dumps(dev, indent=2))
        lines = ["# The packaged final-form probes' choice on dev runs (reported only)", "",
                 "| run | n (differ) | probes' choice | rationale only | knowledge only | choice − knowledge | AUROC where they differ |",
                 "|---|---|---|---|---|---|---|"]
        for name, r in dev.items():
            f = r["f1"]
            lines.append(f"| {name} | {r['n']} ({r['differ']}) | {100 * f['probe']:.1f} | {100 * f['rationale']:.1f} | "
                         f"{100 * f['knowledge']:.1f} | {_ci(r['probe_minus']['knowledge'])} | {r['choice_auroc']:.2f} |")
        lines += ["", "| run, all questions | F1 as run | F1 with these probes | " + " | ".join(f"minus {o}" for o in a.pair) + " |",
                  "|---|---|---|" + "---|" * len(a.pair)]
        for name, r in dev.items():
            w = r["whole_run"]
            lines.append(f"| {name} ({w['n']}) | {100 * w['as_run']:.1f} | {100 * w['f1']:.1f} | "
                         + " | ".join(_ci(w[f"minus_{o}"]) for o in a.pair) + " |")
        (out / "dev-choice.md").write_text("\n".join(lines) + "\n")
        print("\n".join(lines))
    if a.write:
        record(Path(a.write), a.model, res, scored, decision)


def record(path: Path, model: str, res: dict, scored: dict | None, decision: dict) -> None:
    """The decision where ``reasoning="auto"`` reads it, with what it rests on."""
    import time

    d = json.loads(path.read_text()) if path.is_file() else {
        "_about": "The final-choice rule per packaged model, chosen on train chains (benchmarks/final_probe.py); "
                  "reasoning=\"auto\" takes it. Each rule's mean F1 minus the knowledge answer alone's, on train."}
    d[model] = {"reasoning": decision["reasoning"], "rule": "the knowledge answer unless a choice rule beats it on train",
                "minus_knowledge": {k: round(v, 4) for k, v in decision["minus_knowledge"].items()},
                "n": res["n"] + (scored["n"] if scored else 0),
                "probe_oof_auroc": {k: round(v, 3) for k, v in res["oof_auroc_wrong"].items()},
                "data": res["data"] + (scored["runs"] if scored else []),
                "fitted_at": time.strftime("%Y-%m-%d")}
    path.write_text(json.dumps(d, indent=1) + "\n")


if __name__ == "__main__":
    main()
