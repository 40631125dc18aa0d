"""The detection study: how well each signal (an estimator of U, a probe on a tap's states) tells a wrong answer
from a right one, closed-book or open-book, in the chain's form or the short one."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from .. import uncertainty as U
from ..methods.base import ANSWER_STOPS, sufficiency
from ..prompts import SHORT_STOPS, SHORT_TOKENS, check_wording, wording_record
from ..methods.seakr import SeaKR
from ..probes.bank import check_sampling
from ..common.writing import write_atomic
from ..methods.text import short_answer
from ..methods.trace import clean
from .datasets import require_golds
from .example import Example
from .metrics import CORRECT_F1, auroc, f1_score, paired_auroc_difference, pearson, roc_curve
from .summary import figure, selection_summary
from .states import StateStore, own_tap, tap_name
from .rows import STUDY_FILES
from .studies import _each, _finite


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
           form: str = "cot", probe_model=None, log=None) -> dict:
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
    rows, held = _each("detect", method, examples, out_dir, STUDY_FILES["detect"], one, progress, resume, meta, log)
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
    _plot_roc(rows, [r["f1"] < CORRECT_F1 for r in rows], result["estimators"], out / "roc.png")
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
    if form == "short":
        return method.prompts.render_short(question, passages)
    return method.prompts.render(question, [], passages)


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
    wrong = [r["f1"] < CORRECT_F1 for r in rows]
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
