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
           the signal under both: how often a gold candidate gets a lower U than a non-gold one."""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence


from ..methods.seakr import SeaKR, SeaKRConfig
from ..methods.records import u_from_json
from ..common.console import warn
from .example import Example
from .rowlog import RowLog, row_kind
from .runner import versions


def _finite(x):
    """A U read from a row (a number, null or an older file's "inf" string) for ranking: +inf unless finite."""
    u = u_from_json(x)
    return u if math.isfinite(u) else math.inf


def _each(study: str, method: SeaKR, examples: Sequence[Example], out_dir: str, rows_name: str, fn,
          progress=None, resume: bool = False, data: dict | None = None,
          log: RowLog | None = None) -> tuple[list[dict], list[dict]]:
    """Run ``fn(example) -> row`` over the examples not yet in ``out_dir/rows_name``; every row is
    written (fsync'd) as it finishes, so a long study resumes where it was killed. Returns the rows of these
    examples and every row the study holds (a resumed one may hold more, from a larger --limit). ``log``: the
    folder's row log as the command claimed it before the model loaded; else it is claimed here."""
    cfg = {"study": study, "method": method.describe(), "versions": versions(), "examples": len(examples),
           **(data or {})}
    log = log if log is not None else RowLog(out_dir, rows_name, resume=resume, **row_kind(rows_name))
    with log:
        log.begin(cfg)
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


def _fit_context(lm, examples: Sequence[Example]) -> None:
    """A question longer than the model's context by itself fits no prompt of any form: refused before the
    first question is asked (it ended a study where it stood, and every --resume at the same place)."""
    ctx = (lm.info() or {}).get("context_tokens")
    for ex in examples if ctx else ():
        if len(ex.question.encode()) >= ctx and (n := lm.count_tokens(ex.question)) >= ctx:  # bytes bound tokens
            raise ValueError(f"question {ex.id}: {n} tokens, more than the model's {ctx}-token context; nothing "
                             "more was run")


#: The studies measure the paper's signals (U of its own forms); the gate and rules they never use are
#: pinned so a study's recorded configuration does not move with the method's defaults, and delta is 0
#: (a study scores both branches of every decision itself).
STUDY_OPTIONS = {"gate": "step", "reasoning": "self-aware", "rerank": "self-aware", "delta": 0.0}


#: The method options each study reads (its sampling, prompts and U); it asks its own questions, so a chain's or a
#: gate's option is taken and said to be unread (``detect --option gate=check``)
_STUDY_READS = frozenset({"k", "temperature", "top_k", "top_p", "seed", "max_new_tokens", "alpha", "prompt_set",
                          "n_shot", "prompt_style", "titles", "marker", "answer_tokens"})


STUDY_READS = {"detect": _STUDY_READS, "calibrate": _STUDY_READS | {"estimator", "n_candidates"},
               "rerank-study": _STUDY_READS | {"estimator", "n_candidates", "rerank_z"}}


class StudiedSeaKR(SeaKR):
    """SeaKR as a study runs it: the study reads its own options (:data:`STUDY_READS`, the others said and left out
    before the model loads), not the chain's, so the chain's unread-option notes do not apply."""

    def unread(self) -> list[tuple[str, str]]:
        return []


#: What the short form (the knowledge check: no demonstrations, a 24-token answer) leaves unread of a detect study's
SHORT_UNREAD = frozenset({"prompt_set", "n_shot", "marker", "answer_tokens", "max_new_tokens"})


def read_study_options(study: str, options: dict, form: str | None = None) -> dict:
    """The options ``study`` (asking in ``form``, for detect) reads; one it never reads is said once and left out,
    not refused, so one set of flags serves every study (an unknown name is left to the options schema, which names
    the closest one)."""
    short = study == "detect" and form == "short"
    reads = STUDY_READS[study] - SHORT_UNREAD if short else STUDY_READS[study]
    known = {f.name for f in dataclasses.fields(SeaKRConfig)}
    unread = sorted(k for k in options if k in known and k not in reads)
    if unread:
        what = {"calibrate": "a calibration", "rerank-study": "a re-rank study"}.get(study, f"a {study} study")
        what += " in the short form" if short else ""
        warn(f"--option {', '.join(unread)}: not read, {what} asks its own questions (it reads "
             f"{', '.join(sorted(reads))})", once=True)
    return {k: v for k, v in options.items() if k not in unread}
