"""``seakr fit``: every file SeaKR's defaults read for one model, fitted on train files in one resumable run.

    check    the knowledge check on half A: short closed-book answers, k samples, the answer's state
    probe    the check's probe (its tap by cross-validation) and EigenScore map: before the chain's hours
    chain    SeaKR's chain retrieving at every step on half A (the files whose questions carry paragraphs)
    maps     both final answers' EigenScore maps, from the chain
    check2   the check on half B, scored by the new probe
    chain2   the chain on half B
    gate     the levels (gate=probe, gate=check) at which the check's answer is expected to beat the chain, on B
    report   fit-report.md / .json: each signal's AUROC with its CI, the gate's trade-off, seconds per question

The plan (:mod:`seakr.eval.fitplan`) is checked whole before the model loads. The model loads once for every
stage; each stage writes a row as each question is answered, so a killed fit resumes where it stood. The first
questions of the check and of the chain (:data:`PILOT`) are timed before the rest, and the run is projected from
them (and refused past ``budget_minutes``, its rows kept) before the long work starts; each finished stage
re-projects the rest from every question timed so far, and the budget holds there too. The fitted files are
recomputed from the rows and written atomically, under the names a run with ``probes=OUT`` reads, so ``gate``,
``reasoning`` and ``rerank`` = ``"auto"`` pick them up.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..common.jsontext import strict_json
from ..common.writing import write_atomic
from ..progress import progress_bar
from ..methods import build_method
from ..probes.bank import SelfKnowledge
from ..probes.probe import calibration_name, packaged_name
from ..search import open_engine
from .detect import detect, parse_taps
from .metrics import CORRECT_F1
from .fitting import calibrate_from_studies, fit_from_studies, gate_from_runs
from .rowlog import read_results, read_run_config, run_rows
from .runner import run_eval
from .studies import StudiedSeaKR
from .fitplan import ESTIMATOR, GATES, FitPlan, Stage, describe, plan_stages, stage_seconds
from .metrics import auroc, auroc_ci
from .specs import PlanError

#: Questions timed before the long work: a check question's seconds follow its answer's length (one pilot
#: projected 2.8 s a question for a stage that ran at 5.5), a chain question costs minutes.
PILOT = {"check": 5, "chain": 1}


def _say(msg: str) -> None:
    print(msg, file=sys.stderr)


def fit(fp: FitPlan, lm=None, *, progress: bool = True, say: Callable[[str], Any] = _say) -> dict:
    """Run every stage of ``fp`` (``lm``: a model already loaded, else the plan's, loaded once for all stages);
    returns the report."""
    stages = plan_stages(fp, lm)
    say(describe(fp, stages))
    lm = lm or fp.model.load()
    run_check(stages["check"][0], lm, fp, progress, first=PILOT["check"])
    run_chain(stages["chain"][0], lm, progress, first=PILOT["chain"])
    say(project(fp, stages))
    checks = [run_check(s, lm, fp, progress) for s in stages["check"]]
    say(project(fp, stages))  # each stage's measured pace re-projects the rest and keeps to the budget
    files = fit_check_files(fp, checks, say)  # before the chain's hours: too few right or wrong answers say so now
    chains = [run_chain(s, lm, progress) for s in stages["chain"]]
    say(project(fp, stages))
    files["maps"] |= fit_chain_maps(fp, files["model"], chains)
    checks2 = [run_check(s, lm, fp, progress, probe=files["probe"]) for s in stages["check2"]]
    say(project(fp, stages))
    chains2 = [run_chain(s, lm, progress) for s in stages["chain2"]]
    gates = fit_gates(fp, files["model"], checks2, chains2, say)
    report = fit_report(fp, files, gates, {"check": checks, "chain": chains, "check2": checks2, "chain2": chains2})
    write_atomic(Path(fp.out) / "fit-report.json", strict_json(report, indent=1))
    write_atomic(Path(fp.out) / "fit-report.md", report_markdown(report))
    say(f"fitted for {files['model']} -> {fp.out} (fit-report.md); a run reads them with the option probes={fp.out}")
    return report


# ---------------------------------------------------------------------- the model stages
def run_check(stage: Stage, lm, fp: FitPlan, progress: bool = True, first: int | None = None, probe=None) -> str:
    """The knowledge check over a stage's questions (``first``: only that many, a pilot), its rows and states in
    its folder; ``probe`` (half B) adds the new probe's P(wrong) as the score ``probe``."""
    if (examples := _to_ask(stage, first)) is None:
        return stage.out
    plan, sel = stage.plan, stage.sel
    m = StudiedSeaKR(lm, None, **plan.options_for(plan.runs[0], sel.family))
    taps = parse_taps("all", lm.info()["layers"]) if fp.taps == "all" else []
    with progress_bar(f"{stage.name} {Path(stage.out).name}", total=len(examples), enabled=progress) as adv:
        detect(m, examples, stage.out, progress=adv, resume=True, data=plan.questions_record(), form="short",
               probe=taps, probe_model=probe)
    return stage.out


def run_chain(stage: Stage, lm, progress: bool = True, first: int | None = None) -> str:
    """SeaKR's chain, retrieving at every step, over a stage's questions (``first``: only that many, a pilot)."""
    if (examples := _to_ask(stage, first)) is None:
        return stage.out
    plan, sel = stage.plan, stage.sel
    index = plan.ensure_index(sel, progress)
    m = build_method("seakr", lm, open_engine(index), **plan.options_for(plan.runs[0], sel.family))
    with progress_bar(f"{stage.name} {Path(stage.out).name}", total=len(examples), enabled=progress) as adv:
        run_eval(m, examples, stage.out, resume=True, name="seakr", progress=adv,
                 extra_config=plan.questions_record(), order_of=sel.order_of)
    return stage.out


def _to_ask(stage: Stage, first: int | None) -> list | None:
    """The stage's questions (``first``: a pilot's); none to ask where a resumed stage already holds the pilot's
    rows (a run over fewer questions than its rows would take them for an earlier, larger limit)."""
    examples = stage.sel.examples[:first]
    return None if first and len(stage_seconds(stage.out)) >= len(examples) else examples


def project(fp: FitPlan, stages: dict[str, list[Stage]]) -> str:
    """The rest of the run's time from the mean seconds of every question of the check and of the chain measured
    so far (the pilots' at first, then each finished stage's too, both halves pooled); refused past the budget,
    with the limit that would fit."""
    timed = {name: [stage_seconds(s.out) for s in stages[name]] for name in stages}  # each stage's rows, read once
    pace = {k: float(np.mean([t for name in (k, k + "2") for secs in timed[name] for t in secs] or [0.0]))
            for k in ("check", "chain")}
    left = {name: sum(len(s.sel.examples) - len(secs) for s, secs in zip(stages[name], timed[name])) for name in stages}
    minutes = sum(n * pace[name.rstrip("2")] for name, n in left.items()) / 60
    said = (f"fit: about {minutes:.0f} min left on this machine ({pace['check']:.1f} s a question for the check, "
            f"{pace['chain']:.1f} s for the chain)")
    if fp.budget_minutes is not None and minutes > fp.budget_minutes:
        fits = int(fp.limit * fp.budget_minutes / minutes)
        fix = f"a limit of about {fits} fits it" if fits >= 2 else "no limit fits it"
        raise PlanError(f"{said}, over the budget of {fp.budget_minutes:g} min: {fix} (the rows so far are kept; "
                        "--resume continues)")
    return said


# ---------------------------------------------------------------------- the fitted files
def fit_check_files(fp: FitPlan, checks: list[str], say=_say) -> dict:
    """The check's probe and its EigenScore map, written into ``fp.out`` under their packaged names."""
    probe, taps = fit_from_studies(checks, "short", "best", fp.folds)
    out, model = Path(fp.out), probe.model
    probe.save(out / packaged_name(model, "short"))
    say(f"probe short at {probe.tap}: cross-validated AUROC {probe.provenance['cv_auroc']:.3f} "
        f"on {probe.provenance['n']} answers")
    short = calibrate_from_studies(checks, ESTIMATOR, "short", kind=None)  # by its count
    short.save(out / calibration_name(model, "short", ESTIMATOR))
    return {"model": model, "probe": probe, "taps": taps, "maps": {"short": short}}


def fit_chain_maps(fp: FitPlan, model: str, chains: list[str]) -> dict:
    """Both final answers' EigenScore maps, from the chains' rows."""
    maps = {}
    for form in ("final-rationale", "final-knowledge"):
        maps[form] = calibrate_from_studies(chains, ESTIMATOR, form, kind=None)
        maps[form].save(Path(fp.out) / calibration_name(model, form, ESTIMATOR))
    return maps


def fit_gates(fp: FitPlan, model: str, checks2: list[str], chains2: list[str], say=_say) -> dict:
    """Both gate levels on half B, each curve in ``gate-GATE.json`` and the level in ``gates.json``."""
    sampling = (read_run_config(checks2[0]).get("method") or {}).get("config")
    bank = SelfKnowledge(model, fp.out, sampling=sampling)
    out = {}
    for gate in GATES:
        out[gate] = res = gate_from_runs(checks2, chains2, gate, bank)
        write_atomic(Path(fp.out) / f"gate-{gate}.json", strict_json(res, indent=1))
        bank.save_gate_level(res)
        say(f"gate={gate}: level {res['gate_p']:.2f}, F1 {100 * res['at_gate_p']['f1']:.1f} on half B "
            f"(the chain alone {100 * res['chain_f1']:.1f})")
    return out


# ---------------------------------------------------------------------- the report
def _signal(scores, wrong) -> dict:
    """AUROC of ``scores`` for a wrong answer, with its bootstrap 95 % CI."""
    scores = np.array([np.nan if x is None else x for x in scores], dtype=float)  # none: no state (an empty answer)
    wrong = np.asarray(wrong, dtype=bool)
    return {"n": int(len(wrong)), "wrong": int(wrong.sum()), "auroc": auroc(scores, wrong),
            "ci95": list(auroc_ci(scores, wrong))}


def _check_rows(runs: list[str]) -> list[dict]:

    return [r for run in runs for r in read_results(Path(run) / "detect_rows.jsonl")]


def _final_signals(chains: list[str]) -> dict:

    out = {}
    for form in ("rationale", "knowledge"):
        cands = [r.final.candidates[form] for run in chains for r in run_rows(Path(run))
                 if form in r.final.candidates and r.final.candidates[form].f1 is not None]
        out[f"final-{form} {ESTIMATOR}"] = _signal([c.u for c in cands], [c.f1 < CORRECT_F1 for c in cands])
    return out


def fit_report(fp: FitPlan, files: dict, gates: dict, runs: dict[str, list[str]]) -> dict:
    """Each signal's AUROC for a wrong answer with its bootstrap CI -- the probe's on half B, which it was not
    fitted on (its cross-validated AUROC on A beside it), the check's EigenScore on both halves, each final
    answer's U on the chain -- the gate levels with their trade-off curves, and each stage's seconds a question."""
    probe = files["probe"]
    rows = {"A": _check_rows(runs["check"]), "B": _check_rows(runs["check2"])}

    def check(name: str, half: str) -> dict:
        return _signal([r["scores"].get(name) for r in rows[half]], [r["f1"] < CORRECT_F1 for r in rows[half]])

    signals = {"check probe (half B, unseen)": check("probe", "B"),
               f"check {ESTIMATOR} (half A)": check(ESTIMATOR, "A"),
               f"check {ESTIMATOR} (half B)": check(ESTIMATOR, "B"), **_final_signals(runs["chain"])}
    return {"model": files["model"], "train": list(fp.train), "limit": fp.limit, "out": fp.out,
            "probe": {"tap": probe.tap, "C": probe.C, "cv_auroc": probe.provenance["cv_auroc"],
                      "taps_tried": files["taps"]},
            "signals": signals,
            "gates": {g: {"gate_p": r["gate_p"], "at_gate_p": r["at_gate_p"], "chain_f1": r["chain_f1"], "n": r["n"],
                          "curve": r["curve"][::10]} for g, r in gates.items()},
            "seconds_per_question": {k: _mean_seconds(v) for k, v in runs.items()}}


def _mean_seconds(runs: list[str]) -> float | None:
    secs = [s for r in runs for s in stage_seconds(r)]
    return round(float(np.mean(secs)), 2) if secs else None


def _pct(x) -> str:
    return "–" if x is None or x != x else f"{100 * x:.1f}"


def report_markdown(r: dict) -> str:
    """The report as one page: the signals, the gate's trade-off, the cost."""
    lines = [f"# Fitted signals for {r['model']}", "",
             f"Train files: {', '.join(r['train'])} (the first {r['limit']} questions of each, halves A and B).",
             f"The probe reads {r['probe']['tap']} (C={r['probe']['C']:g}); its cross-validated AUROC on half A "
             f"{r['probe']['cv_auroc']:.3f}, and on half B, which it was not fitted on, below.", "",
             "| signal (AUROC for a wrong answer) | n | wrong | AUROC | 95 % CI |", "|---|---|---|---|---|"]
    for name, s in r["signals"].items():
        lo, hi = s["ci95"]
        lines.append(f"| {name} | {s['n']} | {s['wrong']} | {_pct(s['auroc'])} | {_pct(lo)}..{_pct(hi)} |")
    for gate, g in r["gates"].items():
        lines += ["", f"## gate={gate}: level {g['gate_p']:.2f} (half B, {g['n']} questions; the chain alone "
                      f"{_pct(g['chain_f1'])} F1)", "",
                  "| level | F1 | answered by the check | retrievals/q |", "|---|---|---|---|"]
        lines += [f"| {c['gate_p']:.2f} | {_pct(c['f1'])} | {c['answered_by_check']:.2f} | "
                  f"{c['retrievals_per_q']:.2f} |" for c in g["curve"]]
    lines += ["", "| stage | seconds a question |", "|---|---|"]
    lines += [f"| {k} | {'–' if v is None else f'{v:.1f}'} |" for k, v in r["seconds_per_question"].items()]
    return "\n".join(lines) + "\n"


__all__ = ["FitPlan", "fit"]
