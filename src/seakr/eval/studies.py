"""Self-awareness measurements: threshold calibration (paper §5.3), INSIDE-style detection, re-ranking.

calibrate  Simple-QA setting, counterfactual sweep: every question is answered closed-book (with its U)
           *and* with SeaKR's single-retrieval re-rank, once. For a threshold delta, SeaKR keeps the
           closed-book answer when U <= delta and the retrieval answer otherwise, so F1(delta) and the
           retrieval rate are exact for every delta without re-running the model. The chosen delta
           maximises F1 (ties: the higher delta, i.e. fewer retrievals) and is written to the model's
           calibration file, which SeaKR reads by default.
           Multi-hop setting (calibrate_from_runs): the same sweep over two eval runs, SeaKR never
           retrieving and always retrieving; a question retrieves iff its never-run chain has a step
           with U > delta. Written to the model's multi-hop calibration file.
detect     Closed-book greedy answers + every estimator per question; AUROC and Pearson r of each
           estimator for predicting an incorrect answer (F1 < 0.5).
rerank     Distractor-setting multi-hop questions: recall@1 of a gold paragraph among the top-N BM25
           hits for the search engine's order vs self-aware re-ranking (min U of the next step), and
           the signal under both: how often a gold candidate gets a lower U than a non-gold one.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from .. import uncertainty as U
from ..methods.base import ANSWER_STOPS, calibration_path, min_u_index, read_thresholds, sufficiency
from ..prompts import SHORT_STOPS, SHORT_TOKENS, check_wording, wording_record
from ..methods.seakr import SeaKR, guarded_choice
from ..methods.records import u_from_json
from ..probes.bank import check_sampling
from ..models.registry import cache_dir, cache_lock
from ..textio import make_folder, warn, write_atomic
from ..methods.text import short_answer
from ..methods.trace import Tracer, clean
from .datasets import Example, check_examples, require_golds
from .metrics import auroc, bootstrap_ci, f1_score, paired_auroc_difference, paired_bootstrap, pearson, roc_curve
from .rows import ResultRow, check_fields
from .runner import (RowLog, figure, other_data, read_results, read_run_config, recorded_with, run_rows,
                     selection_summary, versions)
from .states import StateStore, own_tap, tap_name


def _finite(x):
    """A U read from a row (a number, null or an older file's "inf" string) for ranking: +inf unless finite."""
    u = u_from_json(x)
    return u if math.isfinite(u) else math.inf


#: The file each study writes its rows to, by the study's name (its command).
STUDY_FILES = {"calibrate": "calibration_rows.jsonl", "detect": "detect_rows.jsonl", "rerank-study": "rerank_rows.jsonl"}
#: What each study's rows hold for its summary and for the probes fitted on it: a resumed log or a fit
#: refuses a row without them by file, line and field (a hand-edited or foreign file), before any work.
STUDY_ROWS = {
    "calibration_rows.jsonl": {"u": "u", "f1_direct": "score", "f1_rag": "score"},
    "detect_rows.jsonl": {"f1": "score", "scores": "scores"},
    "rerank_rows.jsonl": {"titles": "names", "gold": "names", "u": "us", "u_se": "us?", "engine_top1_gold": "flag?",
                          "seakr_top1_gold": "flag?", "guarded_top1_gold": "flag?", "any_gold_in_top_n": "flag?"},
}


def study_row_check(rows_name: str):
    """The check of a study's rows (:data:`STUDY_ROWS`) for ``read_results`` and ``RowLog``; None for a
    log of rows no summary here reads."""
    spec = STUDY_ROWS.get(rows_name)
    if spec is None:
        return None

    def check(row) -> None:
        check_fields(row, spec)
        for k in ("u", "u_se"):  # one per candidate title: auroc() refused 3 Us for 2 titles after the study's end
            if k in spec and isinstance(row.get(k), list) and len(row[k]) != len(row["titles"]):
                raise ValueError(f"field {k!r} holds {len(row[k])} values for {len(row['titles'])} titles")
    return check


def _each(study: str, method: SeaKR, examples: Sequence[Example], out_dir: str, rows_name: str, fn,
          progress=None, resume: bool = False, data: dict | None = None) -> tuple[list[dict], list[dict]]:
    """Run ``fn(example) -> row`` over the examples not yet in ``out_dir/rows_name``; every row is
    written (fsync'd) as it finishes, so a long study resumes where it was killed. Returns the rows of these
    examples and every row the study holds (a resumed one may hold more, from a larger --limit)."""
    cfg = {"study": study, "method": method.describe(), "versions": versions(), "examples": len(examples), **(data or {})}
    with RowLog(out_dir, rows_name, cfg, resume=resume, check=study_row_check(rows_name)) as log:
        _fit_context(method.lm, log.todo(examples))
        if progress:
            progress(len(log.rows_for(examples)))
        for ex in log.todo(examples):
            try:
                row = fn(ex)
            except ValueError as e:  # a question the model cannot take (its prompt beyond the context): name it
                raise ValueError(f"question {ex.id}: {e}; the {len(log.rows)} rows before it are kept") from None
            log.append(row)
            if progress:
                progress(1)
        return log.rows_for(examples), list(log.rows)


def finished_study(study: str, out_dir: str, examples: Sequence[Example], model: str) -> tuple[list[dict], dict, set] | None:
    """Every row (a larger --limit's too), the recorded configuration and the ids of ``examples``, of a study that
    has nothing left to do for them, where it was run with ``model`` (:func:`~seakr.eval.runner.recorded_with`);
    None where a resume would ask a
    question, mend a torn or unreadable line or refuse another model, which a resume does as ever. (A finished
    study resumed loaded the model, and pooled the index, to find nothing to do.) Its options and questions are
    what the plan's own check compared."""
    cfg = recorded_with(out_dir, model)
    if cfg is None:
        return None
    torn: list = []
    skipped: list = []
    name = STUDY_FILES[study]
    rows = read_results(Path(out_dir) / name, torn=torn, skipped=skipped, check=study_row_check(name))
    want = {ex.id for ex in examples}
    if torn or skipped or not want <= {r["id"] for r in rows}:
        return None
    return rows, cfg, want


def study_of_rows(study: str, out_dir: str, rows: list[dict], cfg: dict, ids=None, write: bool = True) -> dict:
    """A finished study's summary of the questions ``ids`` (None: every row) written again from its rows and
    recorded configuration (:func:`finished_study`), as the study itself writes it (``write``: a calibration's
    threshold stored in the model's file too)."""
    info, config, out = cfg["method"]["model"], cfg["method"]["config"], Path(out_dir)
    if study == "calibrate":
        def result_of(rs, files):
            return _calibration_result(rs, info, config, "simple", out, write, files=files)
    elif study == "detect":
        def result_of(rs, files):
            return _detect_result(rs, info, cfg.get("setting", "closed-book"), cfg.get("form", "cot"),
                                  config.get("prompt_style"), config["k"], out, files)
    else:
        def result_of(rs, files):
            return _rerank_result(rs, info.get("model"), config["n_candidates"], config["rerank_z"], out, files)
    chosen = rows if ids is None else [r for r in rows if r["id"] in ids]
    return selection_summary(result_of, chosen, rows, study, out)


def _fit_context(lm, examples: Sequence[Example]) -> None:
    """A question longer than the model's context by itself fits no prompt of any form: refused before the
    first question is asked (it ended a study where it stood, and every --resume at the same place)."""
    ctx = (lm.info() or {}).get("context_tokens")
    for ex in examples if ctx else ():
        if len(ex.question.encode()) >= ctx and (n := lm.count_tokens(ex.question)) >= ctx:  # bytes bound tokens
            raise ValueError(f"question {ex.id}: {n} tokens, more than the model's {ctx}-token context; nothing "
                             "more was run")


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
              resume: bool = False, data: dict | None = None) -> dict:
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
    rows, held = _each("calibrate", method, examples, out_dir, STUDY_FILES["calibrate"], one, progress, resume, data)
    info, config = method.lm.info(), dataclasses.asdict(method.config)
    return selection_summary(lambda rs, files: _calibration_result(rs, info, config, "simple", out, write, files=files),
                             rows, held, "calibrate", out)


def _calibration_result(rows: list[dict], info: dict, config: dict, mode: str, out: Path, write: bool,
                        files: bool = True, **extra) -> dict:
    """The sweep over ``rows``, written (``files``) as calibration.json + its plot under ``out``, and (``write``)
    the chosen threshold stored in the model's calibration file for this prompt style and mode."""
    sweep, best = calibration_sweep(rows)
    result = {"model": info.get("model"), "state_layer": info.get("state_layer"), "state_source": info.get("state_source"),
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
    output is rewritten, but a folder where a run or a study keeps rows is not (``--out`` naming a simple-QA
    calibration study replaced that study's rows, hours of model time; naming the never-run mixed the two)."""
    from .plan import check_output_dir
    from .runner import ROW_FILES

    check_output_dir(str(out))  # a file, a dangling link, an unwritable place or a live run's folder: one line
    kept = [n for n in ("config.json", *ROW_FILES) if (out / n).exists()]
    if "config.json" in kept or len(kept) > ("calibration_rows.jsonl" in kept):
        raise ValueError(f"{out}: holds the rows of a run or study ({', '.join(kept)}); write the calibration to a folder of its own")


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
        raise ValueError(f"{never_dir} and {always_dir} differ in {', '.join(diff) or 'model'}: not two branches of one SeaKR")
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
             f"{never_dir} only and {len(a_rows) - len(rows)} by {always_dir} only are left out (resume the shorter run)")
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
    ax2.plot([s["delta"] for s in pts], [s["retrieval_rate"] for s in pts], "s--", color="tab:orange", label="retrieval rate")
    ax2.set_ylabel("retrieval rate")
    if math.isfinite(best["delta"]):
        ax.axvline(best["delta"], color="gray", lw=1)
    ax.set_title(f"calibration: {title}")
    fig.legend(loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


SETTINGS = ("closed-book", "open-book")
PROBE_KS = (5, 10, 20)  # k values scored from the first k samples of one generation (the k choice)


def probe_ks(k: int) -> tuple[int, ...]:
    """The k values a study drawing ``k`` samples scores: those of PROBE_KS below it, and ``k`` itself (a k=3
    study recorded "5", "10" and "20", each the EigenScore of its three samples, and named its best "k=20")."""
    return tuple(sorted({x for x in PROBE_KS if x < k} | {k}))


def gold_passages(ex: Example) -> list[str]:
    """The passages given with a question that hold its answer: the contexts whose titles are the
    supporting titles (NQ oracle: the gold passage; SQuAD: its paragraph; HotpotQA/2Wiki: the gold
    paragraphs among the distractors)."""
    gold = set(ex.supporting_titles)
    return [text for title, text in ex.contexts if title in gold]


#: ``--probe`` values that name every layer (both sources, or one): their taps need the model's depth.
TAP_KEYWORDS = ("all", "mlp", "residual")


def study_taps(own, probe=(), probe_model_tap=None) -> list:
    """The taps a detect study stores, in the order it records them: the model's own first, then the
    ``--probe`` taps, then the probe file's, each once (the study and the early ``--resume`` check)."""
    return list(dict.fromkeys([own, *probe, *([probe_model_tap] if probe_model_tap is not None else [])]))


def parse_taps(spec: str | None, layers: int | None, where: str = "--probe") -> list[tuple[int, str]]:
    """``all`` (every layer, both sources), ``mlp`` or ``residual`` (every layer, one source), or a
    comma list such as ``11:mlp,L5:residual``; layers are 0-based. ``layers=None`` checks only the
    spelling (before the model is loaded), so the keywords give no taps yet. ``where`` names the flag."""
    if not spec or (layers is None and spec in TAP_KEYWORDS):
        return []
    if spec in TAP_KEYWORDS:
        return [(li, src) for src in (("mlp", "residual") if spec == "all" else (spec,)) for li in range(layers)]
    taps = []
    for part in spec.split(","):
        li, _, src = part.strip().removeprefix("L").partition(":")
        if not li.isdigit() or src not in ("mlp", "residual") or (layers is not None and int(li) >= layers):
            span = f"0..{layers - 1}" if layers is not None else "a 0-based layer"
            raise ValueError(f"{where}: {part.strip()!r} is not LAYER:SOURCE (LAYER {span}, SOURCE mlp or "
                             "residual), nor all, mlp or residual")
        taps.append((int(li), src))
    return taps


#: Prompt forms of the detect study: ``cot`` (SeaKR's own answer prompt, demonstrations and chain of
#: thought) or ``short`` (the knowledge check: a short answer, no demonstrations).
FORMS = ("cot", "short")


def check_open_book(examples: Sequence[Example], setting: str) -> None:
    """Open-book detection reads each question's gold passage: a question without one is named (the command
    asks before the model loads)."""
    if setting == "open-book":
        bare = [ex.id for ex in examples if not gold_passages(ex)]
        if bare:
            raise ValueError(f"open-book detection needs each question's gold passage; {len(bare)} have none "
                             f"(first: {bare[0]})")


def detect_asking(form: str, setting: str, probe_model=None) -> dict:
    """What a detect study records of how it asks and a resume must match, of what is known before the model
    loads: the form, the setting, the check's wording and the probe file (the taps include the model's own)."""
    return {"setting": setting, "form": form, **({"wording": wording_record()} if form == "short" else {}),
            **({"probe_model": {"tap": probe_model.tap, "form": probe_model.form, **probe_model.provenance}}
               if probe_model else {})}


def detect(method: SeaKR, examples: Sequence[Example], out_dir: str, progress=None, resume: bool = False,
           data: dict | None = None, setting: str = "closed-book", probe: Sequence[tuple[int, str]] = (),
           form: str = "cot", probe_model=None) -> dict:
    """Greedy answer + every estimator per question, closed-book or with the gold passage(s)
    (open-book: the model is right often enough for AUROC to see both classes). ``probe``: also
    score EigenScore at each (layer, source) and k in :func:`probe_ks`, from the same samples. The greedy
    answer's state at every tap is kept under ``out_dir/states`` (what ``seakr probe fit`` reads), and
    ``probe_model`` (a fitted :class:`~seakr.probes.Probe`) adds its P(wrong) as the estimator "probe"."""
    if setting not in SETTINGS or form not in FORMS:
        raise ValueError(f"setting must be one of {', '.join(SETTINGS)} and form one of {', '.join(FORMS)}, "
                         f"not {setting!r}/{form!r}")
    require_golds(examples, "detect")
    check_open_book(examples, setting)
    lm, own = method.lm, own_tap(method.lm)
    if probe_model is not None:
        probe_model.check(lm.info())
        if probe_model.form != form:  # a probe reads the states of the prompt form it was fitted on
            raise ValueError(f"the probe was fitted on {probe_model.form!r} answers; this study asks in form {form!r}")
        if form == "short":
            check_wording(probe_model.provenance, "--probe-file")
        check_sampling(probe_model, vars(method.config), "--probe-file")
    taps = study_taps(own, [tuple(t) for t in probe], probe_model.layer_source if probe_model else None)
    store = StateStore(Path(out_dir) / "states", [tap_name(t) for t in taps])

    def one(ex):
        passages = gold_passages(ex) if setting == "open-book" else []
        t0 = time.perf_counter()
        g, ans, prompt = _detect_answer(method, ex.question, passages, form, taps)
        row = {"id": ex.id, "answer": ans, "golds": ex.answers, "f1": f1_score(ans, ex.answers),
               "seconds": round(time.perf_counter() - t0, 3)}
        greedy_state = store.put(ex.id, g.greedy.state if g.greedy else None)
        if probe:  # every tap's EigenScore, then the model's own state (taps[0]) for the usual estimators
            row["probe"] = _probe_scores(g.states, taps, method.config.alpha, probe_ks(method.config.k))
        if len(taps) > 1:
            g.samples = [dataclasses.replace(s, state=None if s.state is None else s.state[0]) for s in g.samples]
        scores = U.all_scores(g, method.config.alpha)
        scores["prompt"] = sufficiency(lm, prompt, ex.question)
        if probe_model is not None:
            j = taps.index(probe_model.layer_source)
            scores["probe"] = probe_model.score_check(None if greedy_state is None else greedy_state[j], scores)
        return clean({**row, "scores": scores})

    out = Path(out_dir)
    meta = {**(data or {}), **detect_asking(form, setting, probe_model), "states": store.taps,
            **({"probe": [tap_name(t) for t in taps]} if probe else {})}
    rows, held = _each("detect", method, examples, out_dir, STUDY_FILES["detect"], one, progress, resume, meta)
    info, style, k = lm.info(), method.config.prompt_style, method.config.k
    return selection_summary(lambda rs, files: _detect_result(rs, info, setting, form, style, k, out, files),
                             rows, held, "detect", out)


def _detect_result(rows: list[dict], info: dict, setting: str, form: str, style: str, k: int, out: Path,
                   files: bool = True) -> dict:
    """A detect study's summary, written (``files``) as detect.json with its ROC plot."""
    result = _detect_summary(rows, info, setting)
    result.update(form=form, prompt_style=style, cost=detect_costs(rows, k),
                  empty_answers=sum(not r["answer"] for r in rows))
    if not files:
        return result
    write_atomic(out / "detect.json", json.dumps(clean(result), indent=2))
    _plot_roc(rows, [r["f1"] < 0.5 for r in rows], result["estimators"], out / "roc.png")
    return result


def detect_costs(rows: Sequence[dict], k: int) -> dict:
    """What each estimator costs per decision: model rows decoded (the greedy answer counts one; a
    sample-based estimator adds its k samples; the prompting estimator one more prefill) and the median
    seconds of the study's call, which decoded all k + 1 rows together."""
    secs = [r["seconds"] for r in rows if r.get("seconds") is not None]
    cost = {}
    for name in (rows[0]["scores"] if rows else {}):
        need = U.NEEDS.get(name, "greedy")  # a probe reads the greedy answer's state: one row
        cost[name] = {"rows": 1 + (k if need == "samples" else 0), "extra_prefill": need == "prompt"}
    return {"estimators": cost, "median_seconds_k_plus_1_rows": float(np.median(secs)) if secs else None}


def _detect_prompt(method: SeaKR, question: str, passages, form: str) -> tuple[str, str]:
    return method.prompts.render_short(question, passages) if form == "short" else method.prompts.render(question, [], passages)


def _detect_answer(method: SeaKR, question: str, passages, form: str, taps):
    """One generation (greedy + k samples, every state read at ``taps``), its answer and its prompt."""
    prompt, prefix = _detect_prompt(method, question, passages, form)
    short = form == "short"
    cfg = method.gen_config(SHORT_STOPS if short else ANSWER_STOPS, True, max_new=SHORT_TOKENS if short else None)
    cfg.n, cfg.with_states, cfg.greedy_state, cfg.greedy_trail = method.config.k, True, True, True
    g = _generate(method.lm, prompt, prefix, cfg, taps if len(taps) > 1 else ())
    text = g.greedy.text
    return g, short_answer(text), prompt


def _generate(lm, prompt, prefix, cfg, taps):
    if not taps:
        return lm.generate([prompt], cfg, prefix=prefix)[0]
    with lm.probing(taps):
        return lm.generate([prompt], cfg, prefix=prefix)[0]


def _probe_scores(states: np.ndarray, probe, alpha: float, ks: Sequence[int]) -> dict:
    """EigenScore of the first k valid samples at every tap: {"L11:mlp": {"5": u, "10": u, "20": u}}."""
    out = {}
    for j, tap in enumerate(probe):
        z = states[:, j, :] if states.ndim == 3 else states  # (0, 0) when no sample had a state
        out[tap_name(tap)] = {str(k): U.eigen_score(z[:k], alpha) for k in ks}
    return out


def _detect_summary(rows: list[dict], info: dict, setting: str) -> dict:
    # clean() wrote +inf ("too few valid samples") as null; it ranks as most uncertain
    for r in rows:
        r["scores"] = {k: _finite(v) for k, v in r["scores"].items()}
    wrong = [r["f1"] < 0.5 for r in rows]
    table = {}
    for name in rows[0]["scores"] if rows else []:
        s = [r["scores"][name] for r in rows]
        table[name] = {"auroc": auroc(s, wrong), "pcc_with_1_minus_f1": pearson(s, [1 - r["f1"] for r in rows])}
    result = {"model": info.get("model"), "state": f"L{info.get('state_layer')}:{info.get('state_source')}",
              "setting": setting, "n": len(rows), "accuracy_f1>=0.5": 1 - float(np.mean(wrong)) if rows else None,
              "estimators": table}
    if rows and "eigen" in table:  # the paper's claim, paired: EigenScore against each other estimator
        e = [r["scores"]["eigen"] for r in rows]
        result["eigen_minus"] = {name: paired_auroc_difference(e, [r["scores"][name] for r in rows], wrong)
                                 for name in table if name != "eigen"}
    if rows and all("probe" in r for r in rows):
        result.update(_probe_summary(rows, wrong, result["state"]))
    return result


def _probe_summary(rows: list[dict], wrong: list[bool], own: str) -> dict:
    """AUROC at every (tap, k); the best; and each tap's paired AUROC difference to the model's own
    state at the study's k (the same questions resampled for both), so a better tap is told from luck.
    The k values are those every row scored (rows of one study score the same ones)."""
    ks = sorted(set.intersection(*(set(r["probe"][own]) for r in rows)), key=int)
    if not ks:
        return {}
    score = lambda tap, k: [_finite(r["probe"][tap].get(k)) for r in rows]  # noqa: E731
    table = {tap: {k: auroc(score(tap, k), wrong) for k in ks} for tap in rows[0]["probe"]}
    best = max(((t, k) for t in table for k in table[t]), key=lambda tk: (_finite_or(table[tk[0]][tk[1]]), int(tk[1])))
    top = ks[-1]
    vs_own = {tap: paired_auroc_difference(score(tap, top), score(own, top), wrong) for tap in table if tap != own}
    return {"probe_auroc": table, "probe_best": {"tap": best[0], "k": int(best[1]), "auroc": table[best[0]][best[1]]},
            f"probe_vs_own_k{top}": vs_own}


def _finite_or(x, default=-math.inf):
    return x if x is not None and math.isfinite(x) else default


def _plot_roc(rows, wrong, table, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not rows:
        return
    fig, ax = plt.subplots(figsize=(4.6, 4.2))
    for name in table:
        fpr, tpr = roc_curve([r["scores"][name] for r in rows], wrong)
        ax.plot(fpr, tpr, label=f"{name} ({table[name]['auroc']:.2f})")
    ax.plot([0, 1], [0, 1], ":", color="gray")
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate (incorrect answers)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


#: The studies measure the paper's signals (U of its own forms); the gate and rules they never use are
#: pinned so a study's recorded configuration does not move with the method's defaults, and delta is 0
#: (a study scores both branches of every decision itself).
STUDY_OPTIONS = {"gate": "step", "reasoning": "self-aware", "rerank": "self-aware", "delta": 0.0}
#: The method options each study reads (its sampling, prompts and U); it asks its own questions, so a chain's or a
#: gate's option was taken and never read (``detect --option gate=check`` was refused for simple mode's sake)
_STUDY_READS = frozenset({"k", "temperature", "top_k", "top_p", "seed", "max_new_tokens", "alpha", "prompt_set",
                          "n_shot", "prompt_style", "titles", "marker", "answer_tokens"})
STUDY_READS = {"detect": _STUDY_READS, "calibrate": _STUDY_READS | {"estimator", "n_candidates"},
               "rerank-study": _STUDY_READS | {"estimator", "n_candidates", "rerank_z"}}


class StudiedSeaKR(SeaKR):
    """SeaKR as a study runs it: the study reads its own options (:data:`STUDY_READS`, refused otherwise before the
    model loads), not the chain's, so the chain's unread-option notes do not apply (``rerank-study --option
    rerank_z=2`` was said to be unread beside rerank=self-aware, while the study's guarded rule reads it)."""

    def unread(self) -> list[tuple[str, str]]:
        return []


#: What the short form (the knowledge check: no demonstrations, a 24-token answer) leaves unread of a detect study's
SHORT_UNREAD = frozenset({"prompt_set", "n_shot", "marker", "answer_tokens", "max_new_tokens"})


def check_study_options(study: str, options: dict, form: str | None = None) -> None:
    """Refuse a SeaKR option that ``study`` (asking in ``form``, for detect) never reads (an unknown name is left to
    the options schema, which names the closest one)."""
    from ..methods.seakr import SeaKRConfig

    short = study == "detect" and form == "short"
    reads = STUDY_READS[study] - SHORT_UNREAD if short else STUDY_READS[study]
    known = {f.name for f in dataclasses.fields(SeaKRConfig)}
    unread = sorted(k for k in options if k in known and k not in reads)
    if unread:
        what = {"calibrate": "a calibration", "rerank-study": "a re-rank study"}.get(study, f"a {study} study")
        what += " in the short form" if short else ""
        raise ValueError(f"--option {', '.join(unread)}: {what} does not read {'them' if len(unread) > 1 else 'it'} "
                         f"(it asks its own questions; it reads {', '.join(sorted(reads))})")


def calibration_lines(r: dict, out: str) -> str:
    """What a calibration chose, for a terminal: delta, its F1 and retrieval rate, the tie, the plot."""
    c = r["chosen"]
    lines = [f"chosen delta ({r['mode']}) = {c['delta']:.3f} (F1 {100 * c['f1']:.1f}, retrieval rate {c['retrieval_rate']:.2f}, n={r['n']})"]
    if c["tied_delta_min"] < c["delta"]:
        lines.append(f"  the same F1 from delta {c['tied_delta_min']:.3f} up (retrieval rate up to {c['tied_retrieval_rate_max']:.2f}):"
                     " the cost rule took the fewest retrievals; more tuning questions would narrow the tie")
    lines.append(f"plot: {Path(out) / 'calibration.png'}" + (f"; written to {r['written_to']}" if "written_to" in r else ""))
    return "\n".join(lines)


def detect_markdown(r: dict) -> str:
    """A detect study's result as a table: each estimator's AUROC and PCC, best first."""
    lines = [f"n={r['n']}  {r['setting']} accuracy (F1>=0.5) {r['accuracy_f1>=0.5']:.2f}  state {r['state']}",
             "| estimator | AUROC | PCC |", "|---|---|---|"]
    for name, v in sorted(r["estimators"].items(), key=lambda kv: -(kv[1]["auroc"] or 0)):
        lines.append(f"| {name} | {figure(v['auroc'])} | {figure(v['pcc_with_1_minus_f1'])} |")
    if "probe_best" in r:
        b = r["probe_best"]
        lines.append(f"probe: best EigenScore AUROC {figure(b['auroc'])} at {b['tap']}, k={b['k']}")
    if r["n"] and r["accuracy_f1>=0.5"] in (0, 1):  # "nan" in every cell said nothing of why
        lines.append(f"(no AUROC: it compares right answers with wrong ones, and all {r['n']} were "
                     f"{'right' if r['accuracy_f1>=0.5'] else 'wrong'})")
    if r.get("empty_answers"):  # an instruct model given a bare "Answer:" often ends its reply at once
        hint = "; an instruct model often ends its reply at once given the plain prompt style: try --option " \
            "prompt_style=chat" if r.get("prompt_style") == "plain" else ""
        lines.append(f"({r['empty_answers']} of {r['n']} answers were empty{hint})")
    return "\n".join(lines)


def rerank_study(method: SeaKR, examples: Sequence[Example], out_dir: str, progress=None, resume: bool = False,
                 data: dict | None = None) -> dict:
    """recall@1 of a gold paragraph among the top-N: the engine's order, the paper's rule (min U) and
    the guarded rule (leave the top-1 only beyond the noise of the difference), from one scoring. Each
    candidate's greedy step state is kept under ``states/`` (id ``QID#RANK``), with the engine's scores in
    the rows: what a candidate probe is fitted on (``seakr probe fit --form candidate``)."""
    examples = check_examples(examples)
    z = method.config.rerank_z
    method.greedy_states = True
    store = StateStore(Path(out_dir) / "states", [tap_name(own_tap(method.lm))])

    def one(ex):
        tr = Tracer(ex.question, "rerank-study")
        hits = method.search(tr, ex.question, method.config.n_candidates)
        gold = set(ex.supporting_titles)
        if not hits:  # kept in the log (so --resume does not redo it) but outside the recall figures
            return {"id": ex.id, "titles": [], "gold": sorted(gold), "u": []}
        cand = method.score_candidates(tr, ex.question, [], [], hits)
        us, ses = [c.u for c in cand], [U.UNCERTAIN if c.u_se is None else c.u_se for c in cand]
        for c in cand:
            store.put(f"{ex.id}#{c.rank}", c.state)
        best = min_u_index(us)  # the paper's rule, whatever the method's rerank option
        guarded = guarded_choice(us, ses, z)
        return clean({"id": ex.id, "titles": [h.title for h in hits], "gold": sorted(gold), "u": us, "u_se": ses,
                      "scores": [h.score for h in hits],
                      "engine_top1_gold": hits[0].title in gold, "seakr_top1_gold": hits[best].title in gold,
                      "guarded_top1_gold": hits[guarded].title in gold,
                      "any_gold_in_top_n": any(h.title in gold for h in hits)})

    out = Path(out_dir)
    rows, held = _each("rerank-study", method, examples, out_dir, STUDY_FILES["rerank-study"], one, progress, resume, data)
    model, n = method.lm.info().get("model"), method.config.n_candidates
    return selection_summary(lambda rs, files: _rerank_result(rs, model, n, z, out, files), rows, held, "rerank-study", out)


def _rerank_result(rows: list[dict], model, n: int, z: float, out: Path, files: bool = True) -> dict:
    """A re-rank study's summary, written (``files``) as rerank.json; a warning where the index held little of
    what the questions need (a study of 6 questions whose searches found nothing printed n 0 and nulls)."""
    result = {"model": model, "N": n, "rerank_z": z, **rerank_summary(rows)}
    if not files:
        return result
    write_atomic(out / "rerank.json", json.dumps(clean(result), indent=2))
    none, gold = len(rows) - result["n"], result["gold_in_top_n"]
    if none or gold == 0:
        said = [f"{none} of {len(rows)} questions found no passage (left out of the figures)"] if none else []
        said += [f"no question's top {n} held a gold passage"] if gold == 0 else []
        warn(f"re-rank study: {'; '.join(said)}: does the index hold these questions' passages? (leave --index out "
             "for the pooled index of the data file's own paragraphs)")
    return result


def rerank_summary(rows: Sequence[dict]) -> dict:
    """The figures of a re-rank study, from its rows alone: recall@1 of the three rules, each paired
    against the engine's order, and the signal they have to work with (:func:`gold_lower_u`)."""
    rows = [r for r in rows if r["titles"]]
    n = len(rows)

    def rate(key):  # rows of an older log lack the guarded column: no figure rather than a wrong one
        have = [r[key] for r in rows if key in r]
        return sum(have) / len(have) if have and len(have) == n else None

    return {"n": n, "recall@1_engine": rate("engine_top1_gold"), "recall@1_self_aware": rate("seakr_top1_gold"),
            "recall@1_guarded": rate("guarded_top1_gold"), "gold_in_top_n": rate("any_gold_in_top_n"),
            "paired_vs_engine": {k: paired_bootstrap([float(r[k]) for r in rows], [float(r["engine_top1_gold"]) for r in rows])
                                 for k in ("seakr_top1_gold", "guarded_top1_gold") if rate(k) is not None},
            "gold_lower_u": gold_lower_u(rows)}


def gold_lower_u(rows: Sequence[dict]) -> dict:
    """How often a gold candidate gets the lower U, over the (gold, non-gold) candidate pairs of each
    question that has both (a within-question AUROC; a tie, both +inf included, counts 1/2). This is
    the most any U-only re-rank can use: at 0.5 the engine's order is all there is. Each question
    counts once (the mean of its pairs), with a bootstrap CI over questions; beside it, the median
    jackknife standard error of one U and the median U gap between a question's candidates."""
    per_q, ses, gaps = [], [], []
    for r in rows:
        us = [_finite(u) for u in r["u"]]
        share = auroc([-u for u in us], [t in r["gold"] for t in r["titles"]])  # NaN: no gold or no non-gold
        if math.isfinite(share):
            per_q.append(share)
        ses += [s for s in r.get("u_se") or [] if s is not None and math.isfinite(s)]
        fin = sorted(u for u in us if math.isfinite(u))
        gaps += [b - a for a, b in zip(fin, fin[1:])]
    lo, hi = bootstrap_ci(per_q, n=2000)
    return {"questions": len(per_q), "fraction": float(np.mean(per_q)) if per_q else None, "ci95": [lo, hi],
            "median_u_se": float(np.median(ses)) if ses else None,
            "median_gap": float(np.median(gaps)) if gaps else None}
