"""The research tables over several runs: paired differences with bootstrap intervals, and the final stage's
choice signal."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Sequence

from .metrics import auroc, paired_bootstrap
from .rows import ResultRow
from ..common.console import warn
from .folders import run_dirs
from .merge import _runs_inside, run_labels
from .resume import other_data
from .rowlog import read_run_config, run_rows
from .summary import summarize, summary_markdown


def compare(dirs: Sequence[str]) -> str:
    """The runs' summary table, then each run's F1 against the first run's on the questions both
    answered: the paired difference and its bootstrap CI (the comparison the table's CIs cannot make)."""
    dirs = run_dirs("compare", dirs)
    sums, runs, finals, cfgs, loaded = [], [], [], [], []
    for d in dirs:
        p = Path(d)
        cfg = read_run_config(p, required=False)
        if cfg.get("study"):  # a detect/re-rank/calibration study: its rows are not answers to pair
            raise ValueError(f"{d}: a {cfg['study']} study, not an eval run (`seakr report {d}` shows it)")
        rows = run_rows(p)
        if not rows and not cfg:
            raise ValueError(f"{d}: not an eval run directory (no results.jsonl / "
                             f"config.json){_runs_inside(p, 'compare')}")
        loaded.append((rows, cfg))
    names = run_labels(dirs, [cfg.get("name", Path(d).name) for d, (_, cfg) in zip(dirs, loaded)])
    for name, (rows, cfg) in zip(names, loaded):
        sums.append(summarize(rows, name))
        runs.append((name, {r.id: r.f1 for r in rows if r.f1 is not None}, {r.id: r.retrievals > 0 for r in rows}))
        finals.append((name, final_stage_table(rows)))
        cfgs.append((name, cfg))
    return (summary_markdown(sums) + _corpus_lines(cfgs) + _paired_lines(runs)
            + "".join(_final_stage_lines(n, t) for n, t in finals if t))


def _corpus_lines(cfgs: list[tuple[str, dict]]) -> str:
    """A paired difference measures the method only when both runs searched the same index with
    questions from the same file; name every run that did not, against the first (also on stderr)."""
    def corpus(cfg):
        e = (cfg.get("method") or {}).get("engine") or {}
        return e.get("checksum") or e.get("url"), e.get("doc_count")

    if len(cfgs) < 2 or not cfgs[0][1]:
        return ""
    (base, b), lines = cfgs[0], []
    cb, nb = corpus(b)
    for name, cfg in cfgs[1:]:
        if not cfg:
            continue
        c, n = corpus(cfg)
        if c and cb and c != cb:
            lines.append(f"- {name} searched another index than {base} ({n} passages, {str(c)[:12]} against "
                         f"{nb}, {str(cb)[:12]}): its paired difference mixes the method with the corpus")
        if other_data(b, cfg):
            lines.append(f"- {name} read another data file than {base}: the question ids may not mean the same "
                         "questions")
    for line in lines:
        warn(line[2:])
    return "\n**Not like for like:**\n" + "\n".join(lines) + "\n" if lines else ""


#: the final-choice rules whose rows carry both answers and what chose between them (U, or P(correct))
CHOICE_RULES = ("self-aware", "calibrated", "probe")


def _choice_value(rule: str, c) -> float:
    """What the rule compared, as "lower wins": the raw U (the paper), or minus P(correct)."""
    if rule == "self-aware":
        return c.u
    return -c.p if c.p is not None else math.nan


def final_stage_table(rows: Sequence[ResultRow]) -> dict | None:
    """The final choice against its two ablations, read off one run's rows (reasoning self-aware,
    calibrated or probe).

    The ablations ``reasoning=rationales`` / ``knowledge`` return exactly the candidate of that name
    that the full run generated and scored (the steps before the final stage do not depend on it;
    ``tests/methods/test_methods_e2e.py`` checks this), so their F1 on the same questions needs no
    second run, and the comparison is paired by construction. ``oracle`` is the better of the two per
    question: the ceiling of any choice rule (the knowledge check's answer too, where every row holds one scored:
    ``check`` is then its F1 alone). None when no row carries both scored candidates."""
    per = {"self-aware": [], "rationale": [], "knowledge": [], "oracle": [], "check": []}
    chose_rationale, scored, rules = 0, [], set()
    for r in rows:
        c = r.final.candidates
        if r.final.rule not in CHOICE_RULES or any(n not in c or c[n].f1 is None for n in ("rationale", "knowledge")):
            continue
        rules.add(r.final.rule)
        a, b = c["rationale"].f1, c["knowledge"].f1
        k = c["check"].f1 if "check" in c and c["check"].f1 is not None else None
        for key, v in (("self-aware", r.f1), ("rationale", a), ("knowledge", b), ("oracle", max(a, b, k or 0.0)),
                       ("check", k)):
            if v is not None:
                per[key].append(v)
        chose_rationale += r.final.choice == "rationale"
        vr, vk = _choice_value(r.final.rule, c["rationale"]), _choice_value(r.final.rule, c["knowledge"])
        if math.isfinite(vr) and math.isfinite(vk):
            scored.append((vr, vk, a, b))
    if not per["self-aware"]:
        return None
    if len(per["check"]) != len(per["self-aware"]):  # not every row holds a scored check: no paired figure
        del per["check"]
    out = {"n": len(per["self-aware"]), "chose_rationale": chose_rationale / len(per["self-aware"]),
           "rule": "/".join(sorted(rules)), "f1": {k: statistics.mean(v) for k, v in per.items()}}
    out["self_aware_minus"] = {k: paired_bootstrap(per["self-aware"], per[k]) for k in per if k != "self-aware"}
    out["choice_signal"] = _choice_signal(scored)
    return out


def _choice_signal(scored: Sequence[tuple[float, float, float, float]]) -> dict | None:
    """Whether what the rule compared says which answer is better, beyond a fixed lean toward one context.

    ``scored``: (value of the rationale answer, of the knowledge answer, their F1s), the value "lower
    wins" (U, or minus P(correct)). Only questions where the candidates' F1 differ can reward a choice.
    On those, ``auroc`` is how well value(rationale) - value(knowledge) ranks "the knowledge answer is
    better" (0.5: no signal, whatever the threshold); ``gap`` is the median value(knowledge) -
    value(rationale) over every question, the offset the rule compares against zero (a chain of thought
    before the answer makes the rationale candidate's samples agree more, whatever its quality)."""
    if not scored:
        return None
    differ = [(ur, uk, a, b) for ur, uk, a, b in scored if a != b]
    better = sum((uk <= ur) == (b > a) for ur, uk, a, b in differ)  # a tie goes to knowledge, as in pick()
    return {"n": len(scored), "differ": len(differ), "lower_u_better": better,
            "auroc": auroc([ur - uk for ur, uk, _, _ in differ],
                           [b > a for _, _, a, b in differ]) if differ else float("nan"),
            "gap": statistics.median(uk - ur for ur, uk, _, _ in scored)}


def _final_stage_lines(name: str, t: dict) -> str:
    f, rule = t["f1"], t.get("rule", "self-aware")
    lines = [f"\n{name}: final stage against its ablations, from the same rows (n={t['n']}; "
             f"chose the rationale answer on {100 * t['chose_rationale']:.0f} %):",
             f"- F1 {rule} {100 * f['self-aware']:.1f}, rationales only {100 * f['rationale']:.1f}, "
             f"knowledge only {100 * f['knowledge']:.1f}" + (f", the check's answer only {100 * f['check']:.1f}"
                                                             if "check" in f else "")
             + f", oracle choice {100 * f['oracle']:.1f}"]
    lines += [f"- {rule} - {k}: {_diff_text(d)}" for k, d in t["self_aware_minus"].items()]
    s = t.get("choice_signal")
    if s and rule == "self-aware":
        lines.append(f"- where the two answers' F1 differ (n={s['differ']}): the lower-U one is the better on "
                     f"{s['lower_u_better']}; AUROC of U(rationale) - U(knowledge) for \"knowledge is better\" "
                     f"{s['auroc']:.2f}; median U(knowledge) - U(rationale) {s['gap']:+.2f} (n={s['n']})")
    elif s:
        lines.append(f"- where the two answers' F1 differ (n={s['differ']}): the more probable one is the better on "
                     f"{s['lower_u_better']}; AUROC of P(knowledge) - P(rationale) for \"knowledge is better\" "
                     f"{s['auroc']:.2f}; median P(rationale) - P(knowledge) {s['gap']:+.2f} (n={s['n']})")
    return "\n".join(lines) + "\n"


def _paired_lines(runs: list[tuple[str, dict, dict]]) -> str:
    """Each run's F1 minus the first run's on their common questions; for a run that retrieved on
    some of them only (an adaptive method), the same split by its decision: where the decision costs."""
    if len(runs) < 2:
        return ""
    base_name, base, base_retrieved = runs[0]
    lines = [f"\nF1 paired against {base_name} (same questions; 95 % bootstrap CI):"]
    for name, f1, retrieved in runs[1:]:
        ids = sorted(set(base) & set(f1))
        if not ids:
            lines.append(f"- {name}: no question with a gold answer in common")
            continue
        lines.append(f"- {name} - {base_name}: {_paired_text(f1, base, ids)}")
        # split by each adaptive run's own decision: against an always-retrieve ablation the first
        # run's split is the one that says what its skipped retrievals cost
        splits = [(name, retrieved)]
        if any(base_retrieved[i] != retrieved[i] for i in ids):
            splits.append((base_name, base_retrieved))
        for who, decided in splits:
            if 0 < sum(decided[i] for i in ids) < len(ids):
                for label, flag in (("retrieved", True), ("did not retrieve", False)):
                    part = [i for i in ids if decided[i] == flag]
                    lines.append(f"  - where {who} {label}: {_paired_text(f1, base, part)}")
    return "\n".join(lines) + "\n"


def _paired_text(a: dict, b: dict, ids: list) -> str:
    d = paired_bootstrap([a[i] for i in ids], [b[i] for i in ids])
    return _diff_text(d)[:-1] + f", n={d['n']})"


def _diff_text(d: dict) -> str:
    """A paired difference in F1 points with its CI: '+4.4 (CI -2.7..+11.3)'."""
    return f"{100 * d['mean_difference']:+.1f} (CI {100 * d['ci95'][0]:+.1f}..{100 * d['ci95'][1]:+.1f})"
