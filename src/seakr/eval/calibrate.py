"""The calibration study: sweep delta over the step U of a chain's questions and keep the value with the best F1
(or from two runs, one that never retrieves and one that always does), written where the method finds it."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from ..methods.deltas import calibration_path, read_thresholds
from ..methods.seakr import SeaKR
from ..common.cache import cache_dir, cache_lock
from ..common.console import warn
from ..common.writing import make_folder, write_atomic
from ..methods.trace import Tracer, clean
from .datasets import require_golds
from .example import Example
from .metrics import f1_score
from .rows import ResultRow
from .resume import other_data
from .rowlog import read_run_config, run_rows
from .summary import selection_summary
from .rows import STUDY_FILES
from .studies import _each
from .folders import check_not_foreign
from .specs import check_output_dir
from ..common.runs import ROW_FILES


def calibration_sweep(rows: Sequence[dict]) -> tuple[list[dict], dict]:
    """F1 and retrieval rate for every threshold on a quantile grid of the closed-book U values.

    ``rows``: ``u`` (closed-book uncertainty), ``f1_direct``, ``f1_rag``. Retrieval happens when
    ``u > delta``. The chosen threshold maximises F1; ties go to the higher delta (fewer retrievals),
    and the choice says where the tie begins (``tied_delta_min``, its retrieval rate).
    """
    # a missing/NaN U is the estimator's failure (+inf: retrieves at any delta); -inf never retrieves
    us = np.array([math.inf if r["u"] is None or r["u"] != r["u"] else r["u"] for r in rows], dtype=float)
    fin = us[np.isfinite(us)]
    grid = np.unique(np.concatenate([[-np.inf], np.quantile(fin, np.linspace(0, 1, 41)) if len(fin) else [], [np.inf]]))
    sweep = []
    for d in grid:
        use_rag = us > d
        f1 = float(np.mean([r["f1_rag"] if u else r["f1_direct"] for r, u in zip(rows, use_rag)])) if rows else 0.0
        sweep.append({"delta": float(d), "f1": f1, "retrieval_rate": float(use_rag.mean()) if rows else 0.0})
    best = dict(max(sweep, key=lambda s: (round(s["f1"], 6), s["delta"])))
    # how far the tie reaches: on a small tuning set F1 is often flat over a range of delta, and the
    # cost rule (fewest retrievals) then picks its edge, which one more question can move
    ties = [s for s in sweep if round(s["f1"], 6) == round(best["f1"], 6)]
    best["tied_delta_min"], best["tied_retrieval_rate_max"] = ties[0]["delta"], ties[0]["retrieval_rate"]
    return sweep, best


def calibrate(method: SeaKR, examples: Sequence[Example], out_dir: str, progress=None, write: bool = True,
              resume: bool = False, data: dict | None = None, log=None) -> dict:
    require_golds(examples, "a calibration")

    def one(ex):
        # the two branches of SeaKR's simple-QA mode, both computed (SeaKR._simple runs one of them)
        tr = Tracer(ex.question, "calibrate")
        direct = method.answer_prompt(tr, ex.question, [], [], "direct")
        hits = method.search(tr, ex.question, method.config.n_candidates)
        if hits:
            best, rag = method.answer_with_passages(tr, ex.question, hits)
            ra = rag[best].answer
        else:
            ra = direct.answer
        return clean({"id": ex.id, "u": direct.u, "f1_direct": f1_score(direct.answer, ex.answers),
                      "f1_rag": f1_score(ra, ex.answers), "direct": direct.answer, "rag": ra})

    out = Path(out_dir)
    rows, held = _each("calibrate", method, examples, out_dir, STUDY_FILES["calibrate"], one, progress, resume, data,
                       log)
    info, config = method.lm.info(), dataclasses.asdict(method.config)
    return selection_summary(lambda rs, files: _calibration_result(rs, info, config, "simple", out, write, files=files),
                             rows, held, "calibrate", out)


def _calibration_result(rows: list[dict], info: dict, config: dict, mode: str, out: Path, write: bool,
                        files: bool = True, **extra) -> dict:
    """The sweep over ``rows``, written (``files``) as calibration.json + its plot under ``out``, and (``write``)
    the chosen threshold stored in the model's calibration file for this prompt style and mode."""
    sweep, best = calibration_sweep(rows)
    result = {"model": info.get("model"), "state_layer": info.get("state_layer"),
              "state_source": info.get("state_source"),
              "estimator": config["estimator"], "k": config["k"], "alpha": config["alpha"], "mode": mode, **extra,
              "n": len(rows), "chosen": best, "sweep": sweep}
    if not files:
        return result
    write_atomic(out / "calibration.json", json.dumps(clean(result), indent=2))
    title = f"{info.get('model')} layer {info.get('state_layer')}" + (", multi-hop" if mode == "multihop" else "")
    _plot_sweep(sweep, best, out / "calibration.png", title)
    if write:
        _write_calibration(result, info, config["prompt_style"], mode)
    return result


#: Tuning questions under which a written threshold is said to be thin: the packaged ones took 30 (NQ) to 50 (2Wiki).
FEW_TUNING = 30


def _write_calibration(result: dict, info: dict, style: str, mode: str) -> None:
    """Store the chosen threshold in the model's calibration file (SeaKR reads it by default); an
    infinite choice (never / always retrieve) is not a threshold."""
    best = result["chosen"]
    if not math.isfinite(best["delta"]):
        return
    p = calibration_path(info, style, mode)
    cache_dir(p.parent.name)
    # read, extended, written back under a lock: two calibrations at once (two estimators, two shards) each
    # wrote back what it had read, and one of them was lost
    with cache_lock(f"calibration-{p.stem}"):
        cur = read_thresholds(p) if p.exists() else {}
        cur.setdefault("delta", {})
        cur["delta"][result["estimator"]] = best["delta"]
        cur.setdefault("source", {})[result["estimator"]] = {"n": result["n"], "f1": best["f1"],
                                                             "retrieval_rate": best["retrieval_rate"],
                                                             "at": time.strftime("%Y-%m-%dT%H:%M:%S")}
        write_atomic(p, json.dumps(cur, indent=2))
    result["written_to"] = str(p)
    if result["n"] < FEW_TUNING:  # it overrides the packaged threshold for every later run, unsaid
        warn(f"{p}: delta {best['delta']:.3f} chosen on {result['n']} question(s) (the packaged thresholds took 30 to "
             f"50); every later SeaKR run of {info.get('model')} at this tap reads it: calibrate on more tuning "
             "questions, or delete the file (--no-write keeps a calibration out of it)")


#: What two runs must share for their rows to be two branches of one SeaKR (all but the retrieval rule).
_SAME = ("k", "temperature", "top_k", "top_p", "max_new_tokens", "seed", "estimator", "alpha", "n_candidates",
         "max_steps", "max_passages", "prompt_set", "prompt_style", "n_shot", "titles", "marker", "keep_p",
         "rerank", "reasoning", "mode")


def _branch_config(run_dir: Path, retrieval: str, never: bool) -> dict:
    """A run's config, its method checked to be the branch of multi-hop SeaKR it is used as."""
    cfg_file = run_dir / "config.json"
    cfg = read_run_config(run_dir)
    m = cfg.get("method") or {}
    c = m.get("config") or {}
    want = "delta = inf" if never else "retrieval = always"
    if m.get("method") != "seakr" or c.get("mode") != "multihop" or c.get("retrieval") != retrieval \
            or never != (c.get("delta") in ("inf", math.inf)):
        raise ValueError(f"{cfg_file}: not a multi-hop SeaKR run with {want} "
                         "(see benchmarks/configs/calibrate-multihop.toml)")
    return cfg


def largest_step_u(row: ResultRow) -> float:
    """The U that makes SeaKR leave a never-retrieve chain: its largest step U. SeaKR with threshold
    delta retrieves on this question iff it exceeds delta. A step whose U failed (the estimator's +inf)
    would retrieve at any delta; a chain with no steps never retrieves."""
    return max((s.u for s in row.steps), default=-math.inf)


def _check_own_folder(out: Path) -> None:
    """Where a calibration from runs may write: its rows are recomputed from the runs, so its own earlier
    output is rewritten, but a folder where a run or a study keeps rows is not: those rows cost hours of model
    time, and a calibration's rows written among them would mix the two."""
    check_not_foreign(out)  # another program's folder, an index
    check_output_dir(str(out))  # a file, a dangling link, an unwritable place or a live run's folder: one line
    kept = [n for n in ("config.json", *ROW_FILES) if (out / n).exists()]
    if "config.json" in kept or len(kept) > ("calibration_rows.jsonl" in kept):
        raise ValueError(f"{out}: holds the rows of a run or study ({', '.join(kept)}); write the calibration to a "
                         "folder of its own")


def calibrate_from_runs(never_dir: str, always_dir: str, out_dir: str, write: bool = True) -> dict:
    """Multi-hop threshold from two eval runs of SeaKR over the same tuning questions, one that never
    retrieves and one that always does: F1(delta) takes the always-run's F1 where the never-run's
    chain has a step with U > delta and the never-run's elsewhere (:func:`calibration_sweep`).
    Exact where SeaKR would not retrieve; where it would, it assumes retrieving from the first
    uncertain step on behaves as retrieving at every step."""
    never, always = Path(never_dir), Path(always_dir)
    cn, ca = _branch_config(never, "self-aware", True), _branch_config(always, "always", False)
    mn, ma = cn["method"], ca["method"]
    diff = [k for k in _SAME if mn["config"].get(k) != ma["config"].get(k)]
    if diff or mn.get("model") != ma.get("model"):
        raise ValueError(f"{never_dir} and {always_dir} differ in {', '.join(diff) or 'model'}: not two branches of "
                         "one SeaKR")
    if other_data(cn, ca):  # ids alone matched across two datasets
        raise ValueError(f"{never_dir} and {always_dir} answered different data files: not two branches of one SeaKR")
    _check_own_folder(Path(out_dir))
    a_rows = {r.id: r for r in run_rows(always, scored="a calibration")}
    n_rows = run_rows(never, scored="a calibration")
    rows = [{"id": r.id, "u": largest_step_u(r), "f1_direct": r.f1, "f1_rag": a_rows[r.id].f1}
            for r in n_rows if r.id in a_rows]
    if not rows:
        raise ValueError(f"{never_dir} and {always_dir} share no answered question")
    if len(rows) < max(len(n_rows), len(a_rows)):  # a run stopped early left δ tuned on fewer questions, unsaid
        warn(f"calibrate: δ from the {len(rows)} questions both runs answered; {len(n_rows) - len(rows)} answered by "
             f"{never_dir} only and {len(a_rows) - len(rows)} by {always_dir} only are left out (resume the shorter "
             "run)")
    out = make_folder(out_dir)
    # +-inf (a failed estimate / a chain without steps) are written as strings: JSON has no infinities
    write_atomic(out / "calibration_rows.jsonl", "".join(
        json.dumps({**r, "u": r["u"] if math.isfinite(r["u"]) else str(r["u"])}) + "\n" for r in rows))
    return _calibration_result(rows, mn["model"], mn["config"], "multihop", out, write, runs=[str(never), str(always)])


def _plot_sweep(sweep, best, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [s for s in sweep if math.isfinite(s["delta"])]
    if not pts:
        return
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.plot([s["delta"] for s in pts], [100 * s["f1"] for s in pts], "o-", label="F1")
    ax.set_xlabel("threshold δ (retrieve when U > δ)")
    ax.set_ylabel("F1 (%)")
    ax2 = ax.twinx()
    ax2.plot([s["delta"] for s in pts], [s["retrieval_rate"] for s in pts], "s--", color="tab:orange",
             label="retrieval rate")
    ax2.set_ylabel("retrieval rate")
    if math.isfinite(best["delta"]):
        ax.axvline(best["delta"], color="gray", lw=1)
    ax.set_title(f"calibration: {title}")
    fig.legend(loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def calibration_lines(r: dict, out: str) -> str:
    """What a calibration chose, for a terminal: delta, its F1 and retrieval rate, the tie, the plot."""
    c = r["chosen"]
    lines = [f"chosen delta ({r['mode']}) = {c['delta']:.3f} (F1 {100 * c['f1']:.1f}, retrieval rate "
             f"{c['retrieval_rate']:.2f}, n={r['n']})"]
    if c["tied_delta_min"] < c["delta"]:
        lines.append(f"  the same F1 from delta {c['tied_delta_min']:.3f} up (retrieval rate up to "
                     f"{c['tied_retrieval_rate_max']:.2f}):"
                     " the cost rule took the fewest retrievals; more tuning questions would narrow the tie")
    written = f"; written to {r['written_to']}" if "written_to" in r else ""
    lines.append(f"plot: {Path(out) / 'calibration.png'}{written}")
    return "\n".join(lines)
