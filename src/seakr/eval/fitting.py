"""Fitting probes and calibration maps from a study's rows (``seakr probe fit``, ``seakr probe calibrate``).

A ``seakr detect`` run keeps, per question, its label (F1 of the greedy answer) and the greedy answer's
state at every tap it read (``states/``). ``fit_from_studies`` pools one or more such runs (tuning data
only), cross-validates a probe at every tap and keeps the best; ``calibrate_from_studies`` maps one
estimator's scores to P(correct).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Sequence

import numpy as np

from ..probes.bank import sampling_record
from ..probes.calibration import Calibration, fit_calibration
from ..probes.probe import (ENGINE_FEATURES, Probe, check_score_names, engine_features, fit_probe, out_of_fold,
                            score_features)
from ..common.console import warn
from .folders import run_dirs
from .resume import other_data
from .rowlog import read_results, read_run_config, run_rows
from .metrics import CORRECT_F1
from .selfknow import chain_f1, choose_gate_p, gate_sweep
from .states import StateStore, tap_name
from .detect import parse_taps
from .rows import study_row_check



#: Where each decision form's answers come from: a fitted file is only as true as the form its rows were
#: answered in (a "short" probe fitted on chain-of-thought answers would gate on the wrong scale).
SOURCES = {"short": "detect studies run with --form short", "cot": "detect studies run with --form cot",
           "candidate": "re-rank studies", "final-rationale": "SeaKR eval runs with reasoning=self-aware",
           "final-knowledge": "SeaKR eval runs with reasoning=self-aware"}


def check_form(form: str, what: str = "fit") -> None:
    """Refuse a form no study writes rows for (the pseudo-step's own states are not stored by any study)."""
    if form not in SOURCES:
        raise ValueError(f"--form {form}: no study stores answers of that form to {what} on; "
                         f"forms with a source: {', '.join(SOURCES)}")


def _study(run: str | Path, rows_name: str = "detect_rows.jsonl", kind: str = "detect",
           form: str | None = None) -> tuple[dict, list[dict]]:
    """A study's config and rows; ``form`` (detect studies): the answers' form the caller fits, which the
    study must have been run in (studies that predate the record are taken as they are)."""
    d = Path(run)
    if not (d / rows_name).is_file():
        raise ValueError(f"{d}: not a {kind} study (needs config.json and {rows_name})")
    cfg = read_run_config(d)
    if form is not None and cfg.get("form", form) != form:
        raise ValueError(f"{d}: a detect study of --form {cfg['form']} answers, not {form}: "
                         f"fit --form {form} on {SOURCES.get(form, 'studies of that form')}")
    return cfg, read_results(d / rows_name, warn,
                             check=study_row_check(rows_name))  # a damaged row: said, not dropped silently


def _folders(runs) -> list:
    """The studies (or runs) a Python caller names: one path alone is one folder, not its letters; none, or a
    path that is not one, is one line."""
    return run_dirs("studies", runs, "study")


def _with_states(runs: Sequence[str | Path], read, states: str = "states"):
    """(run, config, rows, state store) of each run, in order (``read(run)``: its config and rows; ``states``: the
    folder of its stored states); every run must share the model and taps."""
    first, width = None, None
    for run in _folders(runs):
        cfg, rows = read(run)
        store = StateStore.open(Path(run) / states)
        m = _run_model(cfg)
        if first is not None and (m, store.taps) != first:
            raise ValueError(f"{run}: model {m} at taps {store.taps}, the first run has {first[0]} at {first[1]}")
        first, store.width = (m, store.taps), width
        yield run, cfg, rows, store
        width = store.width


def _wording(cfgs: Sequence[dict], runs) -> dict:
    """The check's wording the short-form studies asked in ({} when they predate the record); studies of
    two wordings cannot be pooled (their answers, states and scores belong to different prompts)."""
    seen = {json.dumps(c.get("wording"), sort_keys=True) for c in cfgs}
    if len(seen) > 1:
        raise ValueError(f"{', '.join(map(str, runs))}: studies asked in different wordings; fit on one wording's "
                         "studies")
    w = cfgs[0].get("wording") if cfgs else None
    return {"wording": w} if w is not None else {}


def _sampling(cfgs: Sequence[dict], runs, estimators: Sequence[str]) -> dict:
    """How the runs drew the samples the named estimators read ({} where none reads samples): their scores,
    and a map or probe fitted on them, belong to that sampling, so runs that sampled otherwise are not pooled."""
    recs = [sampling_record((c.get("method") or {}).get("config") or {}, estimators) for c in cfgs]
    if len({json.dumps(r, sort_keys=True) for r in recs}) > 1:
        raise ValueError(f"{', '.join(map(str, runs))}: runs sampled differently ({' / '.join(map(str, recs))}); "
                         f"fit {', '.join(estimators)} on runs of one sampling")
    return {"sampling": recs[0]} if recs and recs[0] else {}


def _run_model(cfg: dict) -> str | None:
    """The model a study or eval run recorded (None where its config predates the record)."""
    return ((cfg.get("method") or {}).get("model") or {}).get("model")


def _data_name(cfg: dict, run) -> str:
    """A run's data file as folder/name (two datasets' train files share a name)."""
    p = Path(cfg.get("data", str(run)))
    return f"{p.parent.name}/{p.name}" if p.parent.name else p.name


def _unread(rows: list[dict], name: str, seen: set, data: list[str]) -> list[dict]:
    """The rows of data file ``name`` that no earlier run gave (a question two runs answered counts once,
    read from the first); marks them read in ``seen`` and names the file in ``data`` once (two runs of one
    file are one data file in a fitted file's provenance)."""
    if name not in data:
        data.append(name)
    rows = [r for r in rows if (name, r["id"]) not in seen]
    seen |= {(name, r["id"]) for r in rows}
    return rows


def load_states(runs: Sequence[str | Path], kept: list | None = None,
                estimators: Sequence[str] = (), form: str | None = None
                ) -> tuple[str, list[str], np.ndarray, np.ndarray, list[str], dict]:
    """(model, taps, X of shape (n, taps, d), wrong labels, data names, the check's wording record and, where
    ``estimators`` that read samples are named, the studies' sampling record: :func:`_sampling`) pooled
    over detect runs, or for a ``final-`` form over SeaKR eval runs (each row's final answer of that form and the
    state the run kept for it in ``states/<form>/``, where the method read them, e.g. with the candidate-probe
    re-rank). Rows without a stored state (an empty answer) are left out. Every run must share the model, the
    taps and (short form) the wording; a question of one data file that two runs answered (overlapping subsets,
    e.g. ``--every 25`` and ``--every 15``) is read from the first only. ``kept``, where given, receives each kept
    row (its ``scores``) with its data name under ``"data"`` and its study under ``"run"``, in the order of X."""
    runs = _folders(runs)  # one path alone is one folder, in the messages too
    final = form is not None and form.startswith("final-")

    def read(run):
        if not final:
            return _study(run, "detect_rows.jsonl", "detect", form)
        if not (Path(run) / "states" / form / "taps.json").is_file():
            raise ValueError(f"{run}: no states of the {form} answers (states/{form}/): run it with an option that "
                             "reads them (rerank=probe or reasoning=probe)")
        return _final_rows(run, form)

    model, taps, xs, ys, data, cfgs, seen = None, None, [], [], [], [], set()
    for run, cfg, rows, store in _with_states(runs, read, f"states/{form}" if final else "states"):
        model, taps = _run_model(cfg), store.taps
        cfgs.append(cfg)
        name = _data_name(cfg, run)
        for r in _unread(rows, name, seen, data):
            z = store.get(r["id"])
            if z is not None:
                xs.append(z)
                ys.append(r["f1"] < CORRECT_F1)
                if kept is not None:
                    kept.append({**r, "data": name, "run": str(run)})
    if not xs:
        raise ValueError(f"{', '.join(map(str, runs))}: no stored {form + ' ' if final else ''}states to fit on")
    record = {} if final else {**_wording(cfgs, runs), **_sampling(cfgs, runs, estimators)}
    return str(model), list(taps), np.stack(xs), np.array(ys), data, record


def one_tap(tap: str) -> str:
    """``--tap`` as stored taps are named: ``best``, or one LAYER:SOURCE read as `detect --probe` reads it (so
    ``11:mlp`` is the stored ``L11:mlp``)."""
    if tap is None or tap == "best":  # None: Python's "not given"
        return "best"
    try:
        taps = parse_taps(tap, None, "--tap") if isinstance(tap, str) and tap.strip() else []
    except ValueError:
        taps = []
    if len(taps) != 1:  # all, mlp, residual (several taps), a list, an empty text
        raise ValueError(f"--tap: {tap!r} is not one LAYER:SOURCE (LAYER 0-based, SOURCE mlp or residual, e.g. "
                         "L11:mlp), nor best (every stored tap)")
    return tap_name(taps[0])


def fit_from_studies(runs: Sequence[str | Path], form: str = "short", tap: str = "best", folds: int = 5,
                     report=None, features: Sequence[str] = ()) -> tuple[Probe, dict]:
    """A probe per tap (``tap="best"``: every stored tap, the best cross-validated AUROC wins), fitted
    on every row of ``runs`` (detect studies; re-rank studies for ``form="candidate"``). Returns the
    probe and {tap: cv_auroc}. ``features`` (short form): estimators of the check's own samples the
    probe reads after the state, stacked on the chosen tap's state probe (:func:`check_probe`)."""
    check_form(form)
    tap = one_tap(tap)
    if features:
        if form != "short":
            raise ValueError("--features: only a short-form (knowledge check) probe reads its scores, not --form "
                             f"{form}")
        p = check_probe(runs, features, tap, folds)
        if report:
            report(p.tap, p)
        return p, {p.tap: p.provenance["cv_auroc"]}
    if form == "candidate":
        p = fit_candidate_probe(runs, folds, tap=tap)
        if report:
            report(p.tap, p)
        return p, {p.tap: p.provenance["cv_auroc"]}
    model, taps, X, wrong, data, wording = load_states(runs, form=form)
    chosen = taps if tap == "best" else [tap]
    for t in chosen:
        if t not in taps:
            raise ValueError(f"--tap {t}: the studies stored {', '.join(taps)}")
    fitted, table = {}, {}
    for t in chosen:
        p = fit_probe(X[:, taps.index(t), :], wrong, model=model, tap=t, form=form, folds=folds, data="+".join(data))
        fitted[t], table[t] = p, p.provenance["cv_auroc"]
        if report:
            report(t, p)
    best = max(table, key=lambda t: table[t])
    fitted[best].provenance.update(taps_tried=table, **wording)
    return fitted[best], table


def _final_rows(run: str | Path, form: str) -> tuple[dict, list[dict]]:
    """An eval run's final candidates of one form as study rows: {f1, scores: {estimator: u}}."""
    d = Path(run)
    cfg = read_run_config(d)
    est = ((cfg.get("method") or {}).get("config") or {}).get("estimator", "eigen")
    name = form.removeprefix("final-")
    rows = []
    for r in run_rows(d):
        c = r.final.candidates.get(name)
        if c is not None and c.f1 is not None:
            rows.append({"id": r.id, "f1": c.f1, "scores": {est: c.u}})
    if not rows:
        raise ValueError(f"{d}: no final {name!r} answers with F1 in its rows (a SeaKR run with reasoning=self-aware?)")
    return cfg, rows


def calibrate_from_studies(runs: Sequence[str | Path], estimator: str, form: str = "short",
                           kind: str | None = "isotonic") -> Calibration:
    """A calibration map for one estimator of one form, from detect studies (form ``short`` or ``cot``
    answers) or, for the final forms, from SeaKR eval runs (each row's rationale or knowledge answer)."""
    check_form(form, "calibrate")
    if form == "candidate":
        raise ValueError("--form candidate: a re-rank candidate is scored by its probe (seakr probe fit --form "
                         "candidate), not by a calibrated estimator")
    runs = _folders(runs)
    scores, correct, data, setups, cfgs, seen = [], [], [], set(), [], set()
    for run in runs:
        cfg, rows = _final_rows(run, form) if form.startswith("final-") else _study(run, form=form)
        cfgs.append(cfg)
        m = cfg.get("method") or {}
        setups.add(((m.get("model") or {}).get("model"), (m.get("config") or {}).get("prompt_style")))
        for r in _unread(rows, _data_name(cfg, run), seen, data):
            if estimator not in r.get("scores", {}):
                have = ", ".join(r.get("scores", {}))
                raise ValueError(f"{run}: its rows have no {estimator!r} score (have: {have})")
            v = r["scores"][estimator]
            scores.append(math.inf if v is None else v)
            correct.append(r["f1"] >= CORRECT_F1)
    if len(setups) > 1:
        raise ValueError(f"{', '.join(map(str, runs))}: runs of different models or prompt styles "
                         f"{sorted(map(str, setups))}")
    cal = fit_calibration(scores, correct, form=form, estimator=estimator, kind=kind, data="+".join(data))
    if len(set(correct)) < 2:  # it "fitted" on 60 wrong answers without a word: a constant, no signal
        warn(f"calibration {form}/{estimator}: all {len(correct)} answers are {'right' if correct[0] else 'wrong'}; "
             f"the map is the constant base rate and ranks nothing (more, or easier, tuning questions)")
    (model, style), = setups
    cal.provenance.update({"model": model, "prompt_style": style, "runs": [Path(r).name for r in runs],
                           **(_wording(cfgs, runs) if form == "short" else {}), **_sampling(cfgs, runs, [estimator])})
    return cal


def gate_from_runs(check_runs: Sequence[str | Path], chain_runs: Sequence[str | Path], gate: str, bank,
                   estimator: str = "eigen") -> dict:
    """The gate level from tuning data. The rule: answer with the check when its P(correct) is at least the
    F1 the chain is expected to reach instead (the chain's mean F1 on the tuning questions, with the
    calibrated final choice): per question that is the choice of the larger expected score, given
    calibrated probabilities. Beside it, every gate level scored on the same questions
    (:func:`seakr.eval.selfknow.gate_sweep`: the trade-off curve) and the level a plain argmax of that
    curve would take, which on a few dozen questions follows their noise."""
    short, models, checks, chains = {}, {}, {}, {}
    for run in (check_runs := _folders(check_runs)):
        cfg, rows = _study(run, form="short")
        models[run], checks[run] = _run_model(cfg), cfg
        short.update((r["id"], r) for r in rows)
    for run in (chain_runs := _folders(chain_runs)):
        cfg = read_run_config(run)
        name = cfg.get("study") or (cfg.get("method") or {}).get("method", "seakr")
        if name != "seakr":
            raise ValueError(f"{run}: a run of {name}; the chain is a SeaKR eval run retrieving at every step")
        models[run], chains[run] = _run_model(cfg), cfg
    _warn_other_data(checks, chains)
    if bank is not None:
        models["--model"] = bank.model
    if len(set(m for m in models.values() if m)) > 1:
        raise ValueError("the check studies, the chain runs and the fitted files belong to different models: "
                         + ", ".join(f"{k}: {m}" for k, m in models.items() if m))
    chain = {r.id: r for run in chain_runs for r in run_rows(Path(run), scored="the gate's tuning")}
    pr, pk = bank.calibration("final-rationale", estimator), bank.calibration("final-knowledge", estimator)
    if gate == "probe":
        p_correct = lambda r: 1.0 - (1.0 if r["scores"].get("probe") is None else r["scores"]["probe"])  # noqa: E731
    else:
        cal = bank.calibration("short", estimator)
        p_correct = lambda r: cal(r["scores"].get(estimator))  # noqa: E731
    grid = tuple(np.round(np.linspace(0, 1, 101), 2))
    sweep = gate_sweep(short, chain, p_correct, grid=grid, chain_f1_of=lambda r: chain_f1(r, "calibrated", pr, pk))
    level = round(sweep["chain_f1"], 2)
    at = next(c for c in sweep["curve"] if c["gate_p"] == level)
    return {"gate": gate, "gate_p": level, "rule": "P(correct) of the check >= the chain's expected F1 (tuning)",
            "at_gate_p": at, "argmax": choose_gate_p(sweep["curve"]), **sweep,
            "data": {"check": [Path(r).name for r in check_runs], "chain": [str(r) for r in chain_runs]}}


def _warn_other_data(checks: dict, chains: dict) -> None:
    """Say which chain runs read a data file that no check run read: check and chain rows are paired by question
    id, and two files may number their questions alike (``nq-0``, ``row-2``), as ``compare`` says of its runs.
    Check runs of other files beside (a fit's question-answer tables) pair with nothing and need no word."""
    for run, cfg in chains.items():
        if all(other_data(c, cfg) for c in checks.values()):
            warn(f"{run} read another data file than {', '.join(map(str, checks))}: check and chain rows are paired "
                 "by question id, which may not name the same questions")


def gate_markdown(res: dict) -> str:
    """A gate level's trade-off curve (every fifth point) and the chosen level, for a terminal."""
    lines = ["| gate_p | F1 | answered by the check | retrievals/q |", "|---|---|---|---|"]
    for c in res["curve"][::5]:
        lines.append(f"| {c['gate_p']:.2f} | {100 * c['f1']:.1f} | {c['answered_by_check']:.2f} | "
                     f"{c['retrievals_per_q']:.2f} |")
    at, best = res["at_gate_p"], res["argmax"]
    lines.append(f"gate_p {res['gate_p']:.2f} (the chain's expected F1 on these {res['n']} questions): F1 "
                 f"{100 * at['f1']:.1f}, "
                 f"{100 * at['answered_by_check']:.0f} % answered by the check, the chain alone "
                 f"{100 * res['chain_f1']:.1f}; "
                 f"the curve's argmax {best['gate_p']:.2f} (F1 {100 * best['f1']:.1f})")
    return "\n".join(lines)


def candidate_rows(runs: Sequence[str | Path]) -> dict:
    """The re-rank candidates of ``seakr rerank-study`` runs, pooled: each candidate's greedy step state
    (``states``, (n, d)), its engine features (``engine``, (n, 5)), whether its passage is not a
    supporting one (``wrong``), its question (``groups``) and (question id, rank) (``keys``). A question of
    one data file that two studies asked is read from the first only, as in :func:`load_states`."""
    out = {"states": [], "engine": [], "wrong": [], "groups": [], "keys": [], "model": None, "tap": None, "data": []}
    seen = set()
    for run, cfg, rows, store in _with_states(runs, lambda run: _study(run, "rerank_rows.jsonl", "re-rank")):
        out["model"], out["tap"] = _run_model(cfg), store.taps[0]
        for r in _unread(rows, _data_name(cfg, run), seen, out["data"]):
            _add_candidates(out, r, store, run)
    if not out["states"]:
        raise ValueError(f"{', '.join(map(str, runs))}: no candidate states to fit on")
    for k in ("states", "engine", "wrong"):
        out[k] = np.array(out[k])
    return out


def _add_candidates(out: dict, r: dict, store, where) -> None:
    if not r.get("titles"):
        return
    if "scores" not in r:
        raise ValueError(f"{where}: rows without the engine's scores (a study run before they were kept): run it again")
    for rank, title in enumerate(r["titles"]):
        z = store.get(f"{r['id']}#{rank}")
        if z is None:
            continue
        out["states"].append(z[0])
        out["engine"].append(engine_features(rank, r["scores"][rank], r["scores"][0]))
        out["wrong"].append(title not in set(r["gold"]))
        out["groups"].append(r["id"])
        out["keys"].append((r["id"], rank))


def fit_candidate_probe(runs: Sequence[str | Path], folds: int = 5, with_state: bool = True,
                        with_engine: bool = True, tap: str = "best") -> Probe:
    """The re-rank probe: P(the passage is not supporting) from the candidate's step state and the
    engine's rank and score, cross-validated by question. ``with_state``/``with_engine`` leave one part
    out (to measure what each adds). With both, the two are stacked (:func:`stack_probe`): one L2
    penalty over ~900 state weights and 5 engine features would shrink the engine's few strong weights
    with the state's many weak ones."""
    c = candidate_rows(runs)
    if tap not in ("best", c["tap"]):  # a re-rank study stores the model's own tap only: another is not taken unread
        raise ValueError(f"--tap {tap}: the re-rank studies stored {c['tap']} only")
    kw = dict(model=str(c["model"]), tap=c["tap"], form="candidate", folds=folds, data="+".join(c["data"]),
              groups=c["groups"])
    if with_state and with_engine:
        return stack_probe(c["states"], c["engine"], c["wrong"], **kw)
    X = c["states"] if with_state else c["engine"]
    return fit_probe(X, c["wrong"], **kw, features=list(ENGINE_FEATURES) if with_engine else [])


def stack_probe(states: np.ndarray, extra: np.ndarray, wrong, *, groups=None, folds: int = 5,
                features: Sequence[str] = ENGINE_FEATURES, form: str = "candidate", **kw) -> Probe:
    """A state probe, then a logistic regression on its out-of-fold logit beside the ``extra`` features,
    folded back into one linear probe over [state, extra]: logit = a (w.s' + c) + v.e' + b with s', e'
    standardised, i.e. weights [a w, v] and intercept a c + b. One L2 penalty over ~900 state weights and
    a few strong extra features would shrink the few with the many; two stages penalise each on its own.
    Its CV AUROC is the second stage's on the out-of-fold state logits (grouped folds where ``groups``)."""
    wrong = np.asarray(wrong, dtype=int)
    ps = fit_probe(states, wrong, groups=groups, folds=folds, form=form, recalibrate=False, **kw)  # its raw logit
    oof = out_of_fold(states, wrong, folds, C=ps.C, groups=groups, logit=True)
    second = fit_probe(np.column_stack([oof, extra]), wrong, groups=groups, folds=folds, Cs=(0.01, 0.1, 1.0, 10.0),
                       form=form, **kw)
    a = second.coef[0] / second.scale[0]  # the stage-2 weight of the raw state logit
    b = second.intercept - second.coef[0] * second.mean[0] / second.scale[0]
    coef = np.concatenate([a * ps.coef, second.coef[1:]])
    prov = {**second.provenance, "stacked": {"state_C": ps.C, "state_cv_auroc": ps.provenance["cv_auroc"],
                                             "extra_C": second.C}}
    return Probe(ps.model, ps.tap, form, coef, float(a * ps.intercept + b), np.concatenate([ps.mean, second.mean[1:]]),
                 np.concatenate([ps.scale, second.scale[1:]]), second.C, prov, list(features))


def check_rows(runs: Sequence[str | Path], features: Sequence[str], tap: str = "best") -> dict:
    """The short-form studies' rows for a stacked check probe: the state at ``tap`` (``best``: the model's
    own, the first stored), the named scores as features, the labels and each row's data name. Rows where
    a score failed (an empty answer) are left out, as rows without a state are."""
    check_score_names(features, "--features")
    runs = _folders(runs)
    kept: list = []
    model, taps, X, wrong, data, wording = load_states(runs, kept, features, form="short")
    t = taps[0] if tap == "best" else tap
    if t not in taps:
        raise ValueError(f"--tap {t}: the studies stored {', '.join(taps)}")
    missing = [f for f in features if kept and f not in kept[0].get("scores", {})]
    if missing:
        raise ValueError(f"{runs[0]}: its rows have no {', '.join(missing)} score")
    F = [score_features(r.get("scores", {}), features) for r in kept]
    ok = np.array([f is not None for f in F])
    return {"model": model, "tap": t, "states": X[ok, taps.index(t), :],
            "extra": np.stack([f for f in F if f is not None]),
            "wrong": wrong[ok], "data": [r["data"] for r, k in zip(kept, ok) if k], "names": data, "wording": wording}


def check_probe(runs: Sequence[str | Path], features: Sequence[str], tap: str = "best", folds: int = 5) -> Probe:
    """A short-form probe that reads the check's own scores after the state (:func:`stack_probe`)."""
    d = check_rows(runs, features, tap)
    p = stack_probe(d["states"], d["extra"], d["wrong"], folds=folds, features=list(features), form="short",
                    model=str(d["model"]), tap=d["tap"], data="+".join(d["names"]))
    p.provenance.update(d["wording"])  # the wording and, for scores of samples, the sampling
    return p
