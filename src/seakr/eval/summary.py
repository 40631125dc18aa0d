"""The summary of a run: means of every score and cost over its rows, and its table in Markdown."""

from __future__ import annotations

import os
import statistics
from pathlib import Path
from typing import Sequence

from .example import Example
from .metrics import bootstrap_ci
from .rows import ResultRow
from ..common.console import warn
from ..common.jsontext import loads, strict_json
from ..common.writing import write_atomic


def _mean_of(totals: Sequence[dict], key: str, f=lambda v: v) -> float | None:
    """The mean of one cost over the rows, or None where a row lacks it (rows made by hand or by another
    tool): no figure rather than one that counts the missing as zero."""
    return statistics.mean(f(t[key]) for t in totals) if all(t.get(key) is not None for t in totals) else None


def summarize(rows: Sequence[ResultRow], name: str = "") -> dict:
    """The run's table row: EM and F1 (with bootstrap CIs) over the questions with gold answers (``scored``;
    None where none has one), the costs over every question."""
    if not rows:
        return {"name": name, "n": 0}
    em = [r.em for r in rows if r.em is not None]
    f1 = [r.f1 for r in rows if r.f1 is not None]
    tot = [r.totals for r in rows]
    return {
        "name": name,
        "n": len(rows),
        **({"scored": len(f1)} if len(f1) < len(rows) else {}),
        "em": statistics.mean(em) if em else None, "em_ci95": bootstrap_ci(em) if em else None,
        "f1": statistics.mean(f1) if f1 else None, "f1_ci95": bootstrap_ci(f1, seed=1) if f1 else None,
        "retrieval_rate": _mean_of(tot, "retrievals", lambda v: v > 0),
        "retrievals_per_question": _mean_of(tot, "retrievals"),
        "model_calls_per_question": _mean_of(tot, "model_calls"),
        "sampled_sequences_per_question": _mean_of(tot, "sampled_sequences"),
        "generated_tokens_per_question": _mean_of(tot, "generated_tokens"),
        "seconds_per_question": statistics.mean(r.seconds for r in rows),
        "empty_retrieval_rate": _empty_retrieval_rate(tot),
    }


def _empty_retrieval_rate(totals: Sequence[dict]) -> float | None:
    """The share of the run's searches that found no passage; None without searches, or where a row does not
    count them (rows written before the count was kept)."""
    if any(t.get("empty_retrievals") is None for t in totals):
        return None
    n = sum(t.get("retrievals") or 0 for t in totals)
    return sum(t["empty_retrievals"] for t in totals) / n if n else None


def figure(v, spec: str = ".3f") -> str:
    """A figure for a table: a number formatted, None or NaN (no figure: a cost a row lacks, one class) as a dash,
    anything else as it reads (the summary table and the report's study sections)."""
    if v is None or v != v:
        return "–"
    return format(v, spec) if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


def summary_markdown(summaries: Sequence[dict]) -> str:
    head = ("| run | n | EM | F1 | retrieval rate | retrievals/q | model calls/q | sampled seqs/q | s/q |\n"
            "|---|---|---|---|---|---|---|---|---|\n")
    lines = []
    for s in summaries:
        if not s.get("n"):
            lines.append(f"| {s['name']} | 0 | | | | | | | |")
            continue
        lines.append(
            f"| {s['name']} | {s['n']}{_unscored(s)} | {_score_figure(s, 'em')} | {_score_figure(s, 'f1')} | "
            f"{figure(s['retrieval_rate'], '.2f')} "
            f"| {figure(s['retrievals_per_question'], '.2f')} | {figure(s['model_calls_per_question'], '.1f')} "
            f"| {figure(s['sampled_sequences_per_question'], '.0f')} | {s['seconds_per_question']:.1f} |")
    return head + "\n".join(lines) + "\n"


def _score_figure(s: dict, key: str) -> str:
    """"24.2 ± 3.1" (the mean and half its CI, in points), or a dash for a run of questions without gold answers."""
    if s.get(key) is None:
        return "–"
    lo, hi = s[f"{key}_ci95"]
    return f"{100 * s[key]:.1f} ± {50 * (hi - lo):.1f}"


def _unscored(s: dict) -> str:
    return f" ({s['n'] - s['scored']} without gold)" if "scored" in s else ""


def selection_summary(result_of, rows: Sequence[dict], held: Sequence[dict], name: str, out: Path) -> dict:
    """``result_of(rows, files)``: a run's or study's summary of ``rows``, its files written under ``out`` where
    ``files``. The summary returned (printed) is of the questions asked for (``rows``); the files, which `compare`,
    `report`, `export` and `probe fit` read beside the rows, of every row the folder holds (``held``): a resume with
    a smaller --limit wrote its few questions' summary over the folder's (a calibration's threshold into the
    model's file)."""
    if len(held) <= len(rows):
        return result_of(rows, True)
    warn(f"{name}: {out} holds {len(held)} answered questions, {len(held) - len(rows)} beyond these {len(rows)} "
         f"(an earlier, larger --limit); the summary here is of these {len(rows)}, its files of all {len(held)}")
    result_of(held, True)
    return result_of(rows, False)


def _summary(out: Path, rows: Sequence[dict], name: str, resume: bool, answered: int, wall: float, concurrency: int,
             held: Sequence[dict] | None = None) -> dict:
    """The run's summary of ``rows``, and its summary files of ``held`` (:func:`selection_summary`; default: the
    same rows). The timing adds to a resumed run's."""
    old = _read_summary(out / "summary.json") if resume else {}
    timing = throughput(old, answered, wall, concurrency)

    def result_of(rs, files):
        s = {**summarize([ResultRow.from_dict(r) for r in rs], name), **timing}
        if files:
            write_atomic(out / "summary.json", strict_json(s, indent=2))
            write_atomic(out / "summary.md", summary_markdown([s]))
        return s

    s = selection_summary(result_of, rows, rows if held is None else held, name, out)
    if s.get("empty_retrieval_rate") == 1:  # every search found nothing: said as such
        warn(f"{name}: none of its {round(s['retrievals_per_question'] * s['n'])} searches found a passage: does the "
             "index hold these questions' passages? (leave --index out for the pooled index of the data file's own "
             "paragraphs)")
    return s


def summary_of_rows(out_dir: str | os.PathLike, rows: Sequence[dict], name: str, examples: Sequence[Example]) -> dict:
    """A finished run's summary of ``examples``, written again from its rows (all of them, a larger --limit's too,
    for the files: :meth:`~seakr.eval.rowlog.RowLog.finished`), its timing kept."""
    want = {ex.id for ex in examples}
    return _summary(Path(out_dir), [r for r in rows if r["id"] in want], name, True, 0, 0.0, 1, rows)


def _percent(rows: Sequence[dict], key: str) -> str:
    """A running EM or F1 for the progress bar, over the rows that have one ("-": none, questions without gold)."""
    scored = [r[key] for r in rows if r.get(key) is not None]
    return f"{100 * statistics.mean(scored):.1f}" if scored else "-"


def _read_summary(path: Path) -> dict:
    try:
        s = loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return s if isinstance(s, dict) else {}


def throughput(old: dict, answered: int, wall: float, concurrency: int) -> dict:
    """Wall time and throughput over every sitting that answered questions into one run directory: a
    resumed run adds its part to what the summary had measured, and a resume with nothing left keeps it
    (long runs finish over several sittings; rewriting only the last one's timing would lose the rest)."""
    if not answered:
        return {k: old[k] for k in ("wall_seconds", "timed_questions", "questions_per_minute",
                                    "concurrency") if k in old}
    prev_wall = float(old.get("wall_seconds") or 0.0)
    prev_n = int(old.get("timed_questions", round(float(old.get("questions_per_minute") or 0) * prev_wall / 60)))
    n, w = prev_n + answered, max(prev_wall + wall, 1e-9)
    before = old.get("concurrency")
    conc = [*(before if isinstance(before, list) else [] if before is None else [before])]
    if concurrency not in conc:
        conc.append(concurrency)
    return {"wall_seconds": round(w, 2), "timed_questions": n, "questions_per_minute": round(60 * n / w, 3),
            "concurrency": conc[0] if len(conc) == 1 else conc}
