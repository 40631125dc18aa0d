"""The names of the files a run, a study or an index keeps its record in, and how a folder is told to be one."""

from __future__ import annotations

import os
from pathlib import Path

from .jsontext import loads

SCORES = "scores.jsonl"  # the committable companion of results.jsonl (score_row)


#: Every rows file a run or a study keeps, and what keeps it: a folder holds one kind.
ROW_FILES = {"results.jsonl": "an eval run", SCORES: "an eval run", "detect_rows.jsonl": "a detect study",
             "rerank_rows.jsonl": "a re-rank study", "calibration_rows.jsonl": "a calibration"}


#: The files a seakr run or study writes into its folder (a file of one's own kept beside them is not one).
RUN_FILES = frozenset(ROW_FILES) | {"config.json", "summary.json", "summary.md", "report.html", "detect.json",
                                    "rerank.json", "calibration.json", ".seakr.lock"}


def path_shaped(name: str) -> bool:
    """Whether a name given for a model, a prompt set or the like reads as a path (``./x``, ``~/x``, ``/x``,
    ``a/b``) rather than as a name to look up."""
    return name.startswith((".", "~", os.sep)) or os.sep in name


def seakr_config(folder) -> dict | None:
    """The config.json a seakr run or study keeps in ``folder`` (it records a method or a study); None where there
    is none, or where it is unreadable or another program's (a model's config.json)."""
    try:
        c = loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return c if isinstance(c, dict) and ("method" in c or "study" in c) else None


#: A tantivy index folder's manifest: the file that makes a folder a seakr index.
MANIFEST = "seakr-index.json"


def index_holding(folder: str | os.PathLike) -> Path | None:
    """The seakr index that ``folder`` is, or lies inside (its absolute path), or None."""
    p = Path(os.path.abspath(folder))
    return next((up for up in (p, *p.parents) if (up / MANIFEST).is_file()), None)


def is_run_folder(d: Path) -> bool:
    """Whether ``d`` is a run's or study's own folder: its config or rows, or a study's stored states (made
    before its rows). Not its lock alone: a refused run may have left one."""
    return any((d / n).exists() for n in ("config.json", *ROW_FILES)) or (d / "states" / "taps.json").is_file()


def check_not_a_record(path: str | os.PathLike, what: str | None = None) -> None:
    """An output file (an export, a report, a probe, a page) is not one of the files a run, a study or an index
    keeps its record in, which writing it would replace. ``what`` names the flag in the message. A link is
    judged by what it points to, which the write replaces."""
    p = Path(path)
    if os.path.islink(p) or (str(p.parent) and os.path.realpath(p.parent) != os.path.abspath(p.parent)):
        p = Path(os.path.realpath(p))
        path = f"{path} (a link to {p})"
    d = p.parent if str(p.parent) else Path(".")
    if (idx := index_holding(d)) is not None:  # a file its manifest does not list: "damaged: rebuild it"
        whose = f"is inside the seakr index {idx}, which a file of another kind damages"
    elif d.name == "states" and (d / "taps.json").is_file() and p.exists():
        whose = f"is one of the stored states of the study in {d.parent}, which writing over it would lose"
    elif p.name in ("config.json", "summary.json",
                    *ROW_FILES) and is_run_folder(d):  # the summary: timing of every sitting
        whose = f"is the record of the seakr run or study in {d}, which writing over it would lose"
    else:
        return
    raise ValueError(f"{what + ' ' if what else ''}{path}: {whose}; name another file")
