"""The folders runs and studies keep their record in: which folder is whose, the lock a writer holds, and the
refusals of a folder that holds another program's files or another kind of rows."""

from __future__ import annotations

import os
from pathlib import Path

from ..locks import FolderLock
from ..common.runs import index_holding, is_run_folder
from ..common.files import given_path
from ..common.runs import ROW_FILES, seakr_config


def check_rows_home(folders, rows_name: str) -> None:
    """The folders a plan writes to (its out, and a grid's run folders in it), each checked once: none is another
    program's (:func:`check_not_foreign`), and none holds another kind's rows: each kind writes its own
    config.json, which ``compare`` and ``--resume`` read to know what the folder holds. The plan checks them
    before the model loads; :class:`RowLog` checks its own folder when it opens."""
    for d in dict.fromkeys(Path(f) for f in folders):
        _check_rows_kind(d, rows_name)
        check_not_foreign(d)


def rows_held(d: Path) -> list[str]:
    """The row files ``d`` holds with rows in them; :data:`~seakr.common.runs.ROW_FILES` names each one's kind."""
    return [n for n in ROW_FILES if (d / n).is_file() and (d / n).stat().st_size]


def _check_rows_kind(d: Path, rows_name: str) -> None:
    """The rows already in ``d`` are of the kind ``rows_name`` keeps, or none (see :func:`check_rows_home`)."""
    mine = ROW_FILES.get(rows_name)
    other = [n for n in rows_held(d) if ROW_FILES[n] != mine]
    if mine is not None and other:
        raise ValueError(f"{d}: holds the rows of {ROW_FILES[other[0]]} ({', '.join(other)}); {mine} writes to "
                         "a folder of its own: choose another --out")


def check_not_foreign(d: Path) -> None:
    """A run writes its config.json, rows and summary into a folder that is not another program's: a model
    folder has a config.json of its own, an index folder holds only the files its manifest lists, and ``/``, a
    home or a project folder would have a run's files spread among its own. Such a folder is new, a run's or
    study's own, or holds only runs, notes and hidden files (:func:`_ours`)."""
    d = Path(d)
    if (idx := index_holding(d)) == Path(os.path.abspath(d)):
        raise ValueError(f"{d}: is a seakr index, which a run's files would damage; choose another --out")
    if idx is not None:  # `index build --overwrite` replaces the index folder whole
        raise ValueError(f"{d}: inside the seakr index {idx}, which `seakr index build --overwrite` replaces whole "
                         "(the run with it); choose another --out")
    if d.is_dir() and not is_run_folder(d):
        theirs = sorted(e.name for e in d.iterdir() if not _ours(e))
        if theirs:
            shown = ", ".join(theirs[:3]) + (f" and {len(theirs) - 3:,} more" if len(theirs) > 3 else "")
            raise ValueError(f"{d}: holds files that are not a seakr run's ({shown}), and a run writes its config, "
                             "rows and summary at the top of its --out; choose a new or empty folder (a subfolder "
                             "of this one will do)")
    cfg = d / "config.json"
    if cfg.is_file() and seakr_config(d) is None:
        raise ValueError(f"{cfg}: not a seakr run's configuration (a model's, or another tool's), and a run would "
                         "replace it; choose another --out")


#: What a folder of runs holds beside them: tables, plots, grids, notes (the committed results' own kinds).
NOTE_SUFFIXES = {".md", ".json", ".jsonl", ".png", ".svg", ".html", ".toml", ".txt", ".csv", ".log"}


def _ours(e: Path, depth: int = 2) -> bool:
    """An entry a folder of runs may hold: a hidden file (.DS_Store), a run or study folder (a grid's runs, a
    sharded run's shards), notes, or a folder of those -- not another program's files. ``/`` passed once a run
    sat in one of its folders: every entry counts, not one."""
    if e.name.startswith("."):
        return e.is_file()
    if e.is_dir():
        return is_run_folder(e) or (depth > 0 and all(_ours(x, depth - 1) for x in e.iterdir()))
    return e.suffix.lower() in NOTE_SUFFIXES


def named_paths(what: str, *paths) -> None:
    """Folders the Python API is given, as the command line takes them: an empty one is refused, not the
    current folder."""
    for x in paths:
        given_path(x, what, "folder")


def check_folder_is(d, kind: str = "run") -> None:
    """A run's or study's folder that is none on disk, in one line: no such folder, or a file, so a mistyped
    path is not read as a folder that lacks its files."""
    if not os.path.exists(d):
        raise ValueError(f"{d}: no such folder")
    if not os.path.isdir(d):
        raise ValueError(f"{d}: a file, not a {kind} folder")


def run_dirs(what: str, dirs, kind: str = "run") -> list:
    """The run (or study) folders a Python caller gives: one path alone is one folder, not its letters."""
    dirs = [dirs] if isinstance(dirs, (str, os.PathLike)) else dirs
    if not isinstance(dirs, (list, tuple)):
        raise TypeError(f"{what}: expected {kind} folders (a list of paths), got {type(dirs).__name__}")
    if not dirs:
        raise ValueError(f"{what}: no {kind} folder given")
    named_paths(what, *dirs)
    for d in dirs:
        check_folder_is(d, kind)
    return list(dirs)


LOCK = ".seakr.lock"  # in every folder a run writes rows to; git-ignored


def run_lock(folder: str | os.PathLike) -> FolderLock:
    """One run writes to a folder at a time: a second run into it (another terminal, a ``--resume`` started
    twice) would answer the same questions again and rewrite the log under the first one's appends."""
    def busy(pid: str) -> ValueError:
        return ValueError(f"{folder}: another seakr run (pid {pid}) is writing here; wait for it to end or choose "
                          "another --out")

    return FolderLock(folder, LOCK, busy)


def check_free(folder: str | os.PathLike) -> None:
    """Refuse, before the model loads, a folder (or a grid run's folder in it) that a live run is writing to."""
    folder = Path(folder)
    for d in [folder, *(p.parent for p in folder.glob(f"*/{LOCK}"))]:
        if (d / LOCK).exists():
            with run_lock(d):
                pass
