"""The re-rank study: for each retrieval, the U of every candidate passage's step beside whether it is gold, so
the re-rank rules can be compared on the same candidates."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Sequence

import numpy as np

from .. import uncertainty as U
from ..methods.base import min_u_index
from ..methods.decisions import guarded_choice
from ..methods.seakr import SeaKR
from ..common.console import warn
from ..common.writing import write_atomic
from ..methods.trace import Tracer, clean
from .datasets import check_examples
from .example import Example
from .metrics import auroc, bootstrap_ci, paired_bootstrap
from .summary import selection_summary
from .states import StateStore, own_tap, tap_name
from .rows import STUDY_FILES
from .studies import _each, _finite


def rerank_study(method: SeaKR, examples: Sequence[Example], out_dir: str, progress=None, resume: bool = False,
                 data: dict | None = None, log=None) -> dict:
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
        cand = method.score_candidates(tr, ex.question, [], [], hits, scored=True)
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
    rows, held = _each("rerank-study", method, examples, out_dir, STUDY_FILES["rerank-study"], one, progress, resume,
                       data, log)
    model, n = method.lm.info().get("model"), method.config.n_candidates
    return selection_summary(lambda rs, files: _rerank_result(rs, model, n, z, out, files), rows, held, "rerank-study",
                             out)


def _rerank_result(rows: list[dict], model, n: int, z: float, out: Path, files: bool = True) -> dict:
    """A re-rank study's summary, written (``files``) as rerank.json; a warning where the index held little of
    what the questions need (searches that find nothing leave the study nothing to measure)."""
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
            "paired_vs_engine": {k: paired_bootstrap([float(r[k]) for r in rows],
                                                     [float(r["engine_top1_gold"]) for r in rows])
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
