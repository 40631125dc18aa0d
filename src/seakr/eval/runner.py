"""Run a method over a dataset: one JSONL line per question, flushed as each question ends.

``results.jsonl`` is appended and fsync'd after every question, so ``kill -9`` loses at most the
question in flight; ``resume=True`` skips the ids already there. Beside it: ``scores.jsonl`` (the
same rows without the question, passages and trace events: ids, predictions, scores, U values,
decisions, costs; the file to commit, from which ``--resume`` continues on another machine),
``config.json`` (the method's effective config, the engine, versions), ``states/final-<form>/`` (the
final answers' states where the method read them: what ``seakr probe fit --form final-<form>`` fits on;
derived, not committed) and, at the end, ``summary.json`` + ``summary.md``.
"""

from __future__ import annotations

import json
import math
import re
import os
import platform
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Sequence

from .datasets import Example, check_examples
from .metrics import auroc, bootstrap_ci, exact_match, f1_score, paired_bootstrap
from .rows import ResultRow, check_row
from .states import StateStore, own_tap, tap_name
from ..locks import FolderLock
from ..search.base import index_holding
from ..textio import (ROW_FILES, SCORES, did_you_mean, given_path, loads, make_folder, seakr_config, spelled, strict_json,
                      warn, write_atomic)


def versions() -> dict:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for pkg in ("seakr", "torch", "transformers", "tantivy", "numpy"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    return out


def check_rows_home(folder: str | os.PathLike, rows_name: str) -> None:
    """A run or study writes to a folder that holds no other kind's rows: a detect study sent to an eval
    run's folder replaced its config.json (``compare`` then called the run a detect study, ``--resume``
    refused it). Called before the model loads where the command knows its kind, and by :class:`RowLog`."""
    _check_rows_kind(Path(folder), rows_name)
    check_not_foreign(Path(folder))


def _check_rows_kind(d: Path, rows_name: str) -> None:
    """The rows already in ``d`` are of the kind ``rows_name`` keeps, or none (see :func:`check_rows_home`)."""
    mine = ROW_FILES.get(rows_name)
    other = [n for n, kind in ROW_FILES.items() if kind != mine and (d / n).is_file() and (d / n).stat().st_size]
    if mine is not None and other:
        raise ValueError(f"{d}: holds the rows of {ROW_FILES[other[0]]} ({', '.join(other)}); {mine} writes to "
                         "a folder of its own: choose another --out")


def check_not_foreign(d: Path) -> None:
    """A run writes its config.json, rows and summary into a folder that is not another program's: ``--out``
    naming a model folder replaced the model's own config.json (the model no longer loaded), naming an
    index folder left it "damaged: rebuild it" (files its manifest does not list), and naming ``/``, a home
    or a project folder spread a run's files among its own. Such a folder is new, a run's or study's own, or
    holds only runs, notes and hidden files (:func:`_ours`)."""
    d = Path(d)
    if (idx := index_holding(d)) == Path(os.path.abspath(d)):
        raise ValueError(f"{d}: is a seakr index, which a run's files would damage; choose another --out")
    if idx is not None:  # `index build --overwrite` replaces the index folder whole
        raise ValueError(f"{d}: inside the seakr index {idx}, which `seakr index build --overwrite` replaces whole "
                         "(the run with it); choose another --out")
    if d.is_dir() and not _is_run(d):
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


def check_not_a_record(path: str | os.PathLike, what: str | None = None) -> None:
    """An output file (an export, a report, a probe, a page) is not one of the files a run, a study or an index
    keeps its record in: ``seakr export RUN --out RUN/results.jsonl`` replaced the run's rows with its
    predictions, and the run was lost. ``what`` names the flag in the message. A link is judged by what it
    points to, which the write replaces (``--out link.jsonl``, a link to a run's scores, wrote over them)."""
    p = Path(path)
    if os.path.islink(p) or (str(p.parent) and os.path.realpath(p.parent) != os.path.abspath(p.parent)):
        p = Path(os.path.realpath(p))
        path = f"{path} (a link to {p})"
    d = p.parent if str(p.parent) else Path(".")
    if (idx := index_holding(d)) is not None:  # a file its manifest does not list: "damaged: rebuild it"
        whose = f"is inside the seakr index {idx}, which a file of another kind damages"
    elif d.name == "states" and (d / "taps.json").is_file() and p.exists():
        whose = f"is one of the stored states of the study in {d.parent}, which writing over it would lose"
    elif p.name in ("config.json", "summary.json", *ROW_FILES) and _is_run(d):  # the summary: timing of every sitting
        whose = f"is the record of the seakr run or study in {d}, which writing over it would lose"
    else:
        return
    raise ValueError(f"{what + ' ' if what else ''}{path}: {whose}; name another file")


#: What a folder of runs holds beside them: tables, plots, grids, notes (the committed results' own kinds).
NOTE_SUFFIXES = {".md", ".json", ".jsonl", ".png", ".svg", ".html", ".toml", ".txt", ".csv", ".log"}


def _is_run(d: Path) -> bool:
    """Whether ``d`` is a run's or study's own folder: its config or rows, or a study's stored states (made
    before its rows). Not its lock alone: a refused run may have left one."""
    return any((d / n).exists() for n in ("config.json", *ROW_FILES)) or (d / "states" / "taps.json").is_file()


def _ours(e: Path, depth: int = 2) -> bool:
    """An entry a folder of runs may hold: a hidden file (.DS_Store), a run or study folder (a grid's runs, a
    sharded run's shards), notes, or a folder of those -- not another program's files. ``/`` passed once a run
    sat in one of its folders: every entry counts, not one."""
    if e.name.startswith("."):
        return e.is_file()
    if e.is_dir():
        return _is_run(e) or (depth > 0 and all(_ours(x, depth - 1) for x in e.iterdir()))
    return e.suffix.lower() in NOTE_SUFFIXES


def read_results(path: Path, warn=None, torn: list | None = None, check: Callable[[dict], None] | None = None,
                 skipped: list | None = None) -> list[dict]:
    """Read a JSONL of finished rows, the first row of each id. An unreadable line is skipped, never the
    rows after it: a torn last line (a kill in the middle of a write) silently, one elsewhere with
    ``warn(message)`` (or, given ``skipped``, listed there as (line, id or None) for the caller to say); the id
    such a line still shows, if any, is added to ``torn``. A row that reads but that ``check`` refuses (a
    hand-edited or foreign file) is an error naming the file, line and field."""
    rows, seen = [], set()
    if not path.exists():
        return rows
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = loads(line)
            if not isinstance(row, dict) or "id" not in row:
                raise ValueError("not a result row")
        except ValueError:
            m = re.search(r'"id":\s*"((?:[^"\\]|\\.)*)"', line)
            tid = _json_string(m.group(1)) if m else None
            if torn is not None:  # None: a row lost whose question no one can name (joined_rows)
                torn.append(tid)
            if n < len(lines) and skipped is not None:
                skipped.append((n, tid))
            elif n < len(lines) and warn is not None:  # the last element has no newline after it: a torn tail
                who = ("no question id could be read from it: the questions only the committed rows hold will run "
                       "again" if tid is None and torn is not None else
                       "its row is lost (no question id could be read from it)" if tid is None else
                       f"question {tid!r} will run again" if torn is not None else f"the row of question {tid!r} is left out")
                warn(f"{path}:{n}: unreadable line skipped (a torn or foreign write); {who}")
            continue
        if check is not None:
            try:
                check(row)
            except ValueError as e:
                raise ValueError(f"{path}:{n}: {e}") from None
        if row["id"] not in seen:  # a duplicated line (two writers, a copied file) counts once
            seen.add(row["id"])
            rows.append(row)
    return rows


def named_paths(what: str, *paths) -> None:
    """Folders the Python API is given, as the command line takes them: an empty one was the current folder."""
    for x in paths:
        given_path(x, what, "folder")


def check_folder_is(d, kind: str = "run") -> None:
    """A run's or study's folder that is none on disk, in one line: no such folder, or a file (each read "not a run
    directory (no config.json)", as if a folder lacked its files, where the path itself was mistyped)."""
    if not os.path.exists(d):
        raise ValueError(f"{d}: no such folder")
    if not os.path.isdir(d):
        raise ValueError(f"{d}: a file, not a {kind} folder")


def run_dirs(what: str, dirs, kind: str = "run") -> list:
    """The run (or study) folders a Python caller gives: one path alone is one folder (a string was read letter
    by letter: "/: not an eval run directory")."""
    dirs = [dirs] if isinstance(dirs, (str, os.PathLike)) else dirs
    if not isinstance(dirs, (list, tuple)):
        raise TypeError(f"{what}: expected {kind} folders (a list of paths), got {type(dirs).__name__}")
    if not dirs:
        raise ValueError(f"{what}: no {kind} folder given")
    named_paths(what, *dirs)
    for d in dirs:
        check_folder_is(d, kind)
    return list(dirs)


def read_run_config(run_dir: str | os.PathLike, required: bool = True) -> dict:
    """A run's ``config.json`` as a dict, or one error naming the file (missing, not JSON, not an object)."""
    p = Path(run_dir) / "config.json"
    if not p.is_file():
        if required:
            check_folder_is(run_dir)
            raise ValueError(f"{run_dir}: not a run directory (no config.json)")
        return {}
    try:
        cfg = loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{p}: not a run configuration ({e})") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"{p}: not a run configuration (a JSON {type(cfg).__name__}, expected an object)")
    _check_config_shape(p, cfg)
    return cfg


def _check_config_shape(p: Path, cfg: dict) -> None:
    """The fields compare, report and merge read: ``method`` and its ``engine`` objects, ``shard`` "I/N"
    (a ``method: 5`` or ``shard: 5`` was an AttributeError naming no file)."""
    from .plan import PlanError, parse_shard

    method = cfg.get("method")
    for name, v in (("method", method), ("method.engine", method.get("engine") if isinstance(method, dict) else None)):
        if v is not None and not isinstance(v, dict):
            raise ValueError(f"{p}: field '{name}' should be an object, got {json.dumps(v)[:40]}")
    shard = cfg.get("shard")
    try:
        if shard is not None:
            parse_shard(shard if isinstance(shard, str) else "")
    except PlanError:
        raise ValueError(f"{p}: field 'shard' should be \"I/N\" or null, got {json.dumps(shard)[:40]}") from None


def _json_string(body: str) -> str | None:
    try:
        return json.loads(f'"{body}"')
    except ValueError:
        return None


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


class RowLog:
    """Append-only JSONL of finished items, shared by ``seakr eval`` and the studies.

    Every row is flushed and fsync'd before the next, so ``kill -9`` loses at most the item in
    flight. Opening an existing log needs ``resume=True`` (no silent mixing of two runs) and the same
    ``config["method"]`` (method, model, engine) as the one recorded in ``config.json`` beside it; a
    same ``data_sha256`` when both record one; unreadable lines are dropped (a warning names any but a
    torn last one) and the file rewritten so appends start on a clean line.
    """

    def __init__(self, out_dir: str | os.PathLike, rows_name: str, config: dict, *, resume: bool = False,
                 companion: tuple[str, Callable[[dict], dict]] | None = None, check: Callable[[dict], None] | None = None):
        """``companion``: (file name, row -> its slim form): a second log of every row without the
        text it holds (question, passages), to commit, so ``--resume`` continues on another machine
        from that file alone; a row found only there counts as done and is summarised from it."""
        named_paths("out_dir", out_dir)  # run_eval(..., "") and the studies wrote their rows into the current folder
        self.dir = Path(out_dir)
        check_not_foreign(self.dir)  # before its lock file is left in another program's folder
        make_folder(self.dir)
        self._dir_lock = run_lock(self.dir).__enter__()  # held until close: one writer per folder
        try:
            self._open(rows_name, config, resume, companion, check)
        except BaseException:
            self._dir_lock.__exit__()
            raise

    def _open(self, rows_name: str, config: dict, resume: bool, companion, check) -> None:
        _check_rows_kind(self.dir, rows_name)  # (check_not_foreign ran in __init__, before the lock)
        self.path = self.dir / rows_name
        self.slim_path, self.slim = (self.dir / companion[0], companion[1]) if companion else (None, None)
        cfg_path = self.dir / "config.json"
        if any(p and p.exists() and p.stat().st_size for p in (self.path, self.slim_path)) and not resume:
            raise ValueError(f"{self.dir}: holds results already; pass --resume to continue or choose another --out")
        if resume and cfg_path.exists():
            _check_same_run(read_run_config(self.dir), config, self.dir)
        elif resume and any(p and p.exists() and p.stat().st_size for p in (self.path, self.slim_path)):
            raise ValueError(f"{self.dir}: holds rows but no config.json, so nothing says which run they belong to; "
                             "refusing to resume into it (choose another --out)")
        torn: list[str] = []
        full = _reread(self.path, torn, check)  # a row the check refuses stops here, the folder as it was
        slim = _reread(self.slim_path, torn, check) if self.slim_path else []
        # delta=-inf as "-inf", as options spell it
        write_atomic(cfg_path, strict_json(config, spell=True, indent=2))
        self.rows = joined_rows(full, slim, torn)
        self.done = {r["id"] for r in self.rows}
        self._lock = threading.Lock()
        self._f = open(self.path, "a", encoding="utf-8")
        self._slim_f = open(self.slim_path, "a", encoding="utf-8") if self.slim_path else None
        if self._slim_f is not None:  # a row written before the run stopped (disk full, kill -9) between the two
            have = {r["id"] for r in slim}  # files: the committed file would lack it and run it again elsewhere
            self._write(self._slim_f, [self.slim(r) for r in full if r["id"] not in have])

    def todo(self, examples):
        return [ex for ex in examples if ex.id not in self.done]

    def rows_for(self, examples) -> list[dict]:
        """The finished rows of these examples (a resumed log may hold more, e.g. from a larger --limit)."""
        want = {ex.id for ex in examples}
        return [r for r in self.rows if r["id"] in want]

    def append(self, row: dict, after=None) -> None:
        """Write one finished row; ``after(rows)`` runs under the same lock (progress display)."""
        with self._lock:
            self._write(self._f, [row])
            if self._slim_f is not None:
                self._write(self._slim_f, [self.slim(row)])
            self.rows.append(row)
            self.done.add(row["id"])
            if after:
                after(self.rows)

    @staticmethod
    def _write(f, rows: list[dict]) -> None:
        """Rows on disk before the next is started: ``kill -9`` loses at most the row in flight."""
        if rows:
            f.write("".join(json.dumps(r) + "\n" for r in rows))
            f.flush()
            os.fsync(f.fileno())

    def close(self) -> None:
        try:
            self._f.close()
            if self._slim_f is not None:
                self._slim_f.close()
        finally:
            self._dir_lock.__exit__()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def differences(a, b, prefix: str = "") -> list[tuple[str, object, object]]:
    """Every field where two JSON-like values differ: (dotted name, a's value, b's value; None where absent)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in list(a) + [k for k in b if k not in a]:
            out += differences(a.get(k), b.get(k), f"{prefix}{k}.") if k in a and k in b else [(f"{prefix}{k}", a.get(k), b.get(k))]
        return out
    return [] if a == b else [(prefix.rstrip(".") or "value", a, b)]


def method_differences(old: dict, new: dict) -> list[tuple[str, object, object]]:
    """Where two run configs' methods differ (options added since ``old`` was recorded at their old values)."""
    return differences(_comparable(_with_added_options(old.get("method"))), _comparable(_with_added_options(new.get("method"))))


def said_differences(diff: list, first: str, second: str, most: int = 4) -> str:
    """Every field that differs with both values, for one line (a changed model was once reported as its
    prompt style alone, the first of the fields it changes)."""
    said = "; ".join(f"method.{k}: {strict_json(a, spell=True)} {first}, {strict_json(b, spell=True)} {second}"
                     for k, a, b in diff[:most])
    return said + (f"; {len(diff) - most} more" if len(diff) > most else "")


def _with_added_options(method: dict | None) -> dict | None:
    """A recorded method description with the options added since it was recorded, at the values that
    reproduce it (``Config.ADDED``)."""
    from ..methods import METHODS

    if not isinstance(method, dict) or not isinstance(method.get("config"), dict) or method.get("method") not in METHODS:
        return method
    added = getattr(METHODS[method["method"]].Config, "ADDED", {})
    return {**method, "config": {**added, **method["config"]}}


#: What a study records of how it asks, beside the method: a resume must ask the same way (where both
#: record it; a study from before a record was added is resumed as it is).
STUDY_KEYS = ("setting", "form", "states", "probe", "wording", "probe_model")


def _check_same_run(old: dict, config: dict, where: Path) -> None:
    check_same_method(method_differences(old, json.loads(json.dumps(config))), where)
    check_same_questions(old, config, where)
    check_same_asking(old, config, where)


def check_same_method(diff: list, where) -> None:
    """A resume over a run recorded with another method config (``diff``: :func:`method_differences`, or the
    plan's part of it before the model loads) is refused, naming every field that differs."""
    if diff:
        raise ValueError(f"{where}: --resume with a different method config than the one recorded in config.json "
                         f"({said_differences(diff, 'recorded', 'now')})")


def check_same_questions(old: dict, new: dict, where) -> None:
    """The data file and which of its questions a run owns (shard, every), where both record them: a resume
    must answer the same ones. RowLog checks it, and the plan before the model loads."""
    if other_data(old, new):
        raise ValueError(f"{where}: --resume with different data ({new.get('data')}) than the run "
                         f"recorded in config.json ({old.get('data')})")
    if "shard" in old and "shard" in new and _shard_of(old) != _shard_of(new):
        shard = [f"shard {s}" if s else "no shard (the whole run)" for s in (new["shard"], old["shard"])]
        raise ValueError(f"{where}: --resume with {shard[0]} but the run recorded {shard[1]}")
    every = (old.get("every") or 1, new.get("every") or 1)  # a run without it took every question
    if "data" in old and "data" in new and every[0] != every[1]:
        raise ValueError(f"{where}: --resume with every {every[1]} but the run recorded every {every[0]} (another "
                         "selection of the questions); resume it as it was, or choose another --out")


def check_same_asking(old: dict, new: dict, where) -> None:
    """How a study asks (:data:`STUDY_KEYS`), where both record it: `detect --form short --resume` over a cot
    study mixed the two forms. The command checks form and setting before the model loads, RowLog all."""
    for key in STUDY_KEYS:
        if key in old and key in new and old[key] != new[key]:
            raise ValueError(f"{where}: --resume with {key} {json.dumps(new[key])[:80]} but the study recorded "
                             f"{key} {json.dumps(old[key])[:80]}; resume it as it was asked, or choose another --out")


def _reread(path: Path, torn: list | None = None, check=None) -> list[dict]:
    """The readable rows of a log, the file rewritten with them so appends start on a clean line."""
    rows = read_results(path, warn, torn, check)
    if path.exists():
        with open(path, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    return rows


def joined_rows(full: list[dict], slim: list[dict], torn=()) -> list[dict]:
    """A run's rows as a resume reads them: results.jsonl's, then scores.jsonl's for the ids it lacks (a run
    resumed elsewhere from the committed rows), but for a question whose full row was torn (it runs again, as
    the warning says, even if its committed row survived). A line no id can be read from (``None`` in ``torn``:
    zeros a crash left, a foreign write) may have been any question's full row: every question only the committed
    rows hold runs again, so no full row is lost for good."""
    have = {r["id"] for r in full}
    if None in torn:
        return list(full)
    return full + [r for r in slim if r["id"] not in have and r["id"] not in torn]


def score_row(row: dict) -> dict:
    """A result row without text from the data (question, passages, the trace's events): what a run
    commits for --resume (:meth:`~seakr.eval.rows.ResultRow.to_score_dict`)."""
    return ResultRow.from_dict(row).to_score_dict()


def run_rows(run_dir: Path, warn=warn, scored: str | None = None) -> list[ResultRow]:
    """A run directory's finished rows: results.jsonl's, then scores.jsonl's for the ids it lacks
    (a run resumed on another machine from the committed score rows). A damaged line inside either file
    whose row the other does not hold is said with ``warn``: `compare` and `report` counted without it, silently.
    ``scored``: what needs every row's F1 (a calibration, a fit): a question without gold answers is refused."""
    skipped: dict[str, list] = {"results.jsonl": [], SCORES: []}
    rows = joined_rows(*(read_results(Path(run_dir) / name, check=check_row, skipped=skipped[name])
                         for name in ("results.jsonl", SCORES)))
    have = {r["id"] for r in rows}
    for name, lines in skipped.items():
        for n, tid in lines:
            if tid is None or tid not in have:
                who = f"the row of question {tid!r} is left out" if tid is not None else "a row is left out (no id could be read)"
                warn(f"{Path(run_dir) / name}:{n}: unreadable line skipped (a torn or foreign write); {who}")
    out = [ResultRow.from_dict(r) for r in rows]
    bare = next((r for r in out if r.f1 is None), None) if scored else None
    if bare is not None:
        raise ValueError(f"{run_dir}: question {bare.id!r} was answered without a gold answer (no F1); {scored} needs "
                         "a run of questions with answers")
    return out


def other_data(old: dict, new: dict) -> bool:
    """Whether two run configs name different data files (by content; by file name for runs recorded
    before the checksum was)."""
    if old.get("data_sha256") and new.get("data_sha256"):
        return old["data_sha256"] != new["data_sha256"]
    if old.get("data") and new.get("data"):
        return os.path.basename(old["data"]) != os.path.basename(new["data"])
    return False


def data_identity(path: str) -> dict:
    """What a run records of its data file, so ``--resume`` can refuse another one."""
    from .splits import split_digest

    return {"data": os.path.abspath(path), "data_sha256": split_digest(path)}


def _comparable(cfg):
    """Config equality for --resume, ignoring fields that cannot change an answer: where things ran
    (threads), and the threshold a run resolved from the packaged table when it retrieves at every step
    anyway (``retrieval="always"`` never reads delta; a packaged delta that changed since the run began,
    e.g. a new multi-hop key, must not lock its rows out of a resume)."""
    if isinstance(cfg, float) and not math.isfinite(cfg):  # as config.json spells it ("-inf"), or older ones did
        return spelled(cfg)
    if not isinstance(cfg, dict):
        return cfg
    skip = {"threads"}
    if (cfg.get("config") or {}).get("retrieval") == "always" and (cfg["config"].get("delta") is None):
        skip |= {"delta", "delta_source"}
    if cfg.get("checksum") and ("path" in cfg or "url" in cfg):  # an index is its content, wherever it lies
        skip |= {"path"}
    out = {k: _comparable(v) for k, v in cfg.items() if k not in skip}
    for k in ("delta_source", "gate_p_source"):  # a calibration file under another SEAKR_CACHE: the same file
        if isinstance(out.get(k), str) and os.sep in out[k]:
            out[k] = os.path.basename(out[k])
    return out


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
    return "–" if v is None or v != v else format(v, spec) if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


def summary_markdown(summaries: Sequence[dict]) -> str:
    head = "| run | n | EM | F1 | retrieval rate | retrievals/q | model calls/q | sampled seqs/q | s/q |\n|---|---|---|---|---|---|---|---|---|\n"
    lines = []
    for s in summaries:
        if not s.get("n"):
            lines.append(f"| {s['name']} | 0 | | | | | | | |")
            continue
        lines.append(
            f"| {s['name']} | {s['n']}{_unscored(s)} | {_score_figure(s, 'em')} | {_score_figure(s, 'f1')} | {figure(s['retrieval_rate'], '.2f')} "
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


class FinalStates:
    """The final answers' states of an eval run, one store per final form (``states/final-rationale``,
    ``states/final-knowledge``), at the model's state tap; written only where the method read them."""

    def __init__(self, out_dir: str | os.PathLike, method):
        self.dir, self.method = Path(out_dir) / "states", method
        self._stores: dict = {}
        self._lock = threading.Lock()

    def put(self, qid: str, states: dict) -> None:
        for name, state in (states or {}).items():
            with self._lock:
                if name not in self._stores:  # the tap is read where states exist: a method with states has a model
                    self._stores[name] = StateStore(self.dir / f"final-{name}", [tap_name(own_tap(self.method.lm))])
            self._stores[name].put(qid, state)


def check_lengths(method, examples: Sequence[Example]) -> None:
    """Every question's bare prompt fits the model's context, checked before the first is answered: one that
    does not had ended the run where it stood, and every ``--resume`` again at the same question."""
    check = getattr(method, "check_question", None)
    for ex in examples if check is not None else ():
        try:
            check(ex.question)
        except ValueError as e:
            raise ValueError(f"question {ex.id}: {e}; nothing more was run (shorten it, or leave it out)") from None


def takes_cancel(method) -> bool:
    """Whether ``method.answer`` takes a ``cancel`` event (every packaged method does; one of a user's own may
    not)."""
    import inspect

    try:
        return "cancel" in inspect.signature(method.answer).parameters
    except (TypeError, ValueError):
        return False


def answer_concurrently(one: Callable, todo: Sequence[Example], concurrency: int, cancel: bool) -> None:
    """``one(example[, cancel])`` over ``todo``, ``concurrency`` at a time. Ctrl-C, SIGTERM or a question's error
    stops the questions in flight at their next decode step and drops the queued ones: the pool's exit had
    waited for every question, so Ctrl-C on a 6-question run took 122 s to act (100 questions: an hour); the
    rows finished are on disk already."""
    stop = threading.Event() if cancel else None
    pool = ThreadPoolExecutor(concurrency)
    try:
        for fut in [pool.submit(one, ex, stop) if cancel else pool.submit(one, ex) for ex in todo]:
            fut.result()
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)  # first: no queued question starts once told to stop
        if stop is not None:
            stop.set()
        pool.shutdown(wait=True)
        raise
    pool.shutdown()


def run_eval(method, examples: Sequence[Example], out_dir: str | os.PathLike, *, resume: bool = False,
             name: str | None = None, progress=None, extra_config: dict | None = None, concurrency: int = 1,
             order_of: dict | None = None) -> dict:
    """Answer every example (``concurrency`` questions in flight; wrap the model in
    :class:`~seakr.models.batching.BatchingModel` so their model calls share decode batches).
    ``order_of`` maps ids to their place in the whole run (shards keep the unsharded order)."""
    if not callable(getattr(method, "answer", None)) or not callable(getattr(method, "describe", None)):
        raise TypeError(f"method: expected a seakr method (seakr.methods.build_method), got {type(method).__name__}")
    examples = check_examples(examples)
    cfg = {"name": name or method.name, "method": method.describe(), "versions": versions(),
           "examples": len(examples), **(extra_config or {})}
    if unread := dict(getattr(method, "unread", list)()):  # said once at the start; the folder keeps it, beside
        cfg["unread_options"] = unread  # the method (a resume compares the method alone)
    with RowLog(out_dir, "results.jsonl", cfg, resume=resume, companion=(SCORES, score_row), check=check_row) as log:
        rows = log.rows_for(examples)
        if progress:
            progress(len(rows), f1=_percent(rows, "f1"))
        todo = log.todo(examples)
        check_lengths(method, todo)
        t_start = time.perf_counter()

        def shown(rows):
            if progress:
                progress(1, EM=_percent(rows, "em"), F1=_percent(rows, "f1"))

        order = {ex.id: i for i, ex in enumerate(examples)} if order_of is None else order_of
        keep_states = FinalStates(out_dir, method)

        def one(ex, cancel=None):
            t = time.perf_counter()
            ans = method.answer(ex.question, cancel=cancel) if cancel is not None else method.answer(ex.question)
            dt = time.perf_counter() - t
            keep_states.put(ex.id, ans.states)  # before the row: a row on disk always has its states
            em, f1 = (exact_match(ans.answer, ex.answers), f1_score(ans.answer, ex.answers)) if ex.answers else (None, None)
            row = ResultRow(ex.id, ans.answer, em, f1, round(dt, 3), order.get(ex.id, 0), ex.type, question=ex.question,
                            golds=ex.answers, trace=ans.trace)
            log.append(row.to_dict(), shown)

        if concurrency <= 1:
            for ex in todo:
                one(ex)
        else:
            answer_concurrently(one, todo, concurrency, takes_cancel(method))
        rows = log.rows_for(examples)  # a resumed log may hold questions outside this --limit
        held = list(log.rows)
    return _summary(Path(out_dir), rows, cfg["name"], resume, len(todo), time.perf_counter() - t_start, concurrency,
                    held)


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
    if s.get("empty_retrieval_rate") == 1:  # "retrieval rate 1.00" read as if passages had been read
        warn(f"{name}: none of its {round(s['retrievals_per_question'] * s['n'])} searches found a passage: does the "
             "index hold these questions' passages? (leave --index out for the pooled index of the data file's own "
             "paragraphs)")
    return s


def recorded_with(out_dir: str | os.PathLike, model: str) -> dict | None:
    """The configuration a run or study recorded in ``out_dir``, where it ran with ``model`` (a registry name
    resolved, a path) and recorded its method's options; None otherwise (a finished resume then goes the usual way)."""
    cfg = read_run_config(out_dir, required=False)
    method = cfg.get("method")
    recorded = method.get("model") if isinstance(method, dict) else None
    ok = isinstance(recorded, dict) and recorded.get("model") == model and isinstance(method.get("config"), dict)
    return cfg if ok else None


def finished_rows(out_dir: str | os.PathLike, examples: Sequence[Example]) -> list[dict] | None:
    """Every row of a run that has nothing left to do for ``examples`` (it may hold more: a larger --limit's),
    read as :class:`RowLog` reads them; None where a resume would answer a question, mend a file (a torn line, a
    committed row missing beside its full one) or warn, which a run does as ever. (A finished run resumed, by a job resubmitted or a grid
    run again, loaded the model to find nothing to do: seconds on a CPU, minutes for a large model on a GPU.)"""
    out, want = Path(out_dir), {ex.id for ex in examples}
    if not (out / "config.json").exists():
        return None
    torn: list = []
    skipped: list = []
    slim = read_results(out / SCORES, torn=torn, skipped=skipped, check=check_row)
    if skipped or not want <= {r["id"] for r in slim}:  # the small file first: a run with work left stops here
        return None
    rows = joined_rows(read_results(out / "results.jsonl", torn=torn, skipped=skipped, check=check_row), slim, torn)
    if skipped or not want <= {r["id"] for r in rows}:
        return None
    return rows


def summary_of_rows(out_dir: str | os.PathLike, rows: Sequence[dict], name: str, examples: Sequence[Example]) -> dict:
    """A finished run's summary of ``examples``, written again from its rows (:func:`finished_rows`: all of them,
    a larger --limit's too, for the files), its timing kept."""
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
        return {k: old[k] for k in ("wall_seconds", "timed_questions", "questions_per_minute", "concurrency") if k in old}
    prev_wall = float(old.get("wall_seconds") or 0.0)
    prev_n = int(old.get("timed_questions", round(float(old.get("questions_per_minute") or 0) * prev_wall / 60)))
    n, w = prev_n + answered, max(prev_wall + wall, 1e-9)
    before = old.get("concurrency")
    conc = [*(before if isinstance(before, list) else [] if before is None else [before])]
    if concurrency not in conc:
        conc.append(concurrency)
    return {"wall_seconds": round(w, 2), "timed_questions": n, "questions_per_minute": round(60 * n / w, 3),
            "concurrency": conc[0] if len(conc) == 1 else conc}


def merge_runs(out_dir: str | os.PathLike, dirs: Sequence[str]) -> dict:
    """Join shard directories of one run into ``out_dir`` (results, config, summary).

    Refuses shards of different runs (method config, data, shard count) and overlapping questions;
    says which shards are missing."""
    named_paths("merge", out_dir)
    dirs = run_dirs("merge", dirs)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():  # from Python it was mkdir's FileExistsError, once the shards were read
        raise ValueError(f"{out}: exists and is not a directory")
    for d in dirs:  # the merged run became a run inside a shard: `report` and `compare` of the shard found both
        if Path(os.path.realpath(d)) in Path(os.path.realpath(out)).parents:
            raise ValueError(f"{out}: inside the shard {d}; merge into a folder outside the shards")
    cfgs, rows, seen = [], [], {}
    for d in dirs:
        p = Path(d)
        cfg = read_run_config(p)
        if cfg.get("study"):  # its rows are not answers: it "merged" into an empty run that claimed to be a study
            raise ValueError(f"{d}: a {cfg['study']} study, not a shard of an eval run")
        diff = method_differences(cfgs[0], cfg) if cfgs else []
        if diff:
            raise ValueError(f"{d}: a different run than {dirs[0]} ({said_differences(diff, 'there', 'here')})")
        if cfgs and other_data(cfgs[0], cfg):
            raise ValueError(f"{d}: a different run than {dirs[0]} (another data file)")
        if cfgs and _shard_of(cfg)[1] != _shard_of(cfgs[0])[1]:
            raise ValueError(f"{d}: " + (f"shard {cfg['shard']}" if cfg.get("shard") else "a whole run (no --shard)")
                             + f" is of another split than {cfgs[0].get('shard') or 'a whole run (no --shard)'}")
        for key in ("limit", "every"):  # shards of one run cut the same questions
            if cfgs and cfg.get(key) != cfgs[0].get(key):
                raise ValueError(f"{d}: {key} {cfg.get(key)} but {dirs[0]} has {key} {cfgs[0].get(key)}: not shards of one run")
        for r in run_rows(p, warn):
            if r.id in seen:
                raise ValueError(f"{d}: question {r.id} is also in {seen[r.id]}: overlapping shards")
            seen[r.id] = d
            rows.append(r)
        cfgs.append(cfg)
    if not cfgs:
        raise ValueError("merge: no shard directories given")
    n = _shard_of(cfgs[0])[1]
    have = {_shard_of(c)[0] for c in cfgs}
    missing = sorted(set(range(n)) - have)
    if missing:
        warn(f"merge: shards {', '.join(f'{i}/{n}' for i in missing)} missing; the merged run is partial")
    _check_unheld(out)
    check_not_foreign(out)
    make_folder(out)
    with run_lock(out):  # two merges into one new folder at once each wrote their rows over the other's
        _check_unheld(out)  # again, now that no other merge can be writing here
        return _write_merged(out, dirs, cfgs, rows, missing)


def _shard_of(cfg: dict) -> tuple[int, int]:
    """A run's shard as numbers, (0, 1) for a whole run: runs before the plan wrote I/N recorded "00/02" as given."""
    from .plan import parse_shard

    return parse_shard(cfg["shard"]) if cfg.get("shard") else (0, 1)


def _check_unheld(out: Path) -> None:
    held = [n for n in (*ROW_FILES, "config.json") if (out / n).exists()]
    if held:  # score rows alone (a run resumed elsewhere) or a study's were overwritten: results.jsonl was all it asked
        raise ValueError(f"{out}: holds {', '.join(held)} already; merge into a new directory")


def _write_merged(out: Path, dirs: Sequence[str], cfgs: list[dict], rows: list, missing: list[int]) -> dict:
    rows.sort(key=lambda r: r.order)
    with open(out / "results.jsonl", "w", encoding="utf-8") as f, open(out / SCORES, "w", encoding="utf-8") as g:
        for r in rows:
            if r.trace is not None:  # a full row; shards resumed from score rows alone have only those
                f.write(json.dumps(r.to_dict()) + "\n")
            g.write(json.dumps(r.to_score_dict()) + "\n")
    merged = {k: v for k, v in cfgs[0].items() if k != "shard"}
    merged.update({"merged_from": [str(d) for d in dirs], "missing_shards": missing})
    if all(isinstance(c.get("examples"), int) for c in cfgs):  # the first shard's count was kept as the whole's
        merged["examples"] = sum(c["examples"] for c in cfgs)
    write_atomic(out / "config.json", strict_json(merged, spell=True, indent=2))
    s = summarize(rows, merged.get("name", out.name))
    write_atomic(out / "summary.json", strict_json(s, indent=2))
    write_atomic(out / "summary.md", summary_markdown([s]))
    return s


def run_labels(dirs: Sequence[str], names: list[str]) -> list[str]:
    """Each run's label in a comparison: its name, or where two runs share one (two "cot" runs from two
    folders), its folder as given; a folder given twice is numbered."""
    out = [d if names.count(n) > 1 else n for d, n in zip(dirs, names)]
    return [f"{x} #{out[:i].count(x) + 1}" if out.count(x) > 1 else x for i, x in enumerate(out)]


def _runs_inside(p: Path, what: str) -> str:
    """``; it holds the runs a, b: compare those``: the runs a grid's folder holds, for a command given the grid."""
    inner = sorted(q.name for q in p.iterdir() if (q / "config.json").is_file()) if p.is_dir() else []
    return f"; it holds the runs {', '.join(inner[:6])}: {what}" if inner else ""


#: What ``seakr export`` writes a run's predictions as: JSON lines of id and prediction; ``{id: prediction}``, the
#: file SQuAD's, TriviaQA's and NQ-open's scripts read; HotpotQA's ``{"answer": ..., "sp": ...}`` (no supporting
#: facts are predicted: every ``sp`` list is empty, and its script scores them 0)
EXPORT_FORMATS = ("jsonl", "squad", "hotpotqa", "2wiki")


def export_predictions(run_dir: str | os.PathLike, fmt: str = "jsonl") -> str:
    """A run's predictions, in its questions' order, as a leaderboard or an official script reads them."""
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"export: format {fmt!r}{did_you_mean(fmt, EXPORT_FORMATS)}; choose from {', '.join(EXPORT_FORMATS)}")
    named_paths("export", run_dir)
    check_folder_is(run_dir)
    p = Path(run_dir)
    cfg = read_run_config(p, required=False)
    if cfg.get("study"):
        raise ValueError(f"{run_dir}: a {cfg['study']} study, not an eval run: it holds no predictions to export")
    rows = sorted(run_rows(p), key=lambda r: r.order)
    if not rows:
        raise ValueError(f"{run_dir}: no answered question here (an eval run's folder holds results.jsonl or "
                         f"scores.jsonl){_runs_inside(p, 'export one')}")
    if fmt == "jsonl":
        return "".join(json.dumps({"id": r.id, "prediction": r.prediction}, ensure_ascii=False) + "\n" for r in rows)
    answers = {r.id: r.prediction for r in rows}
    body = answers if fmt == "squad" else {"answer": answers, "sp": {r.id: [] for r in rows}}
    if fmt == "2wiki":  # 2WikiMultihopQA's script reads the evidence triples beside HotpotQA's two keys
        body["evidence"] = {r.id: [] for r in rows}
    return json.dumps(body, ensure_ascii=False, indent=1) + "\n"


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
            raise ValueError(f"{d}: not an eval run directory (no results.jsonl / config.json){_runs_inside(p, 'compare')}")
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
            lines.append(f"- {name} read another data file than {base}: the question ids may not mean the same questions")
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
    question: the ceiling of any choice rule. None when no row carries both scored candidates."""
    per = {"self-aware": [], "rationale": [], "knowledge": [], "oracle": []}
    chose_rationale, scored, rules = 0, [], set()
    for r in rows:
        c = r.final.candidates
        if r.final.rule not in CHOICE_RULES or any(n not in c or c[n].f1 is None for n in ("rationale", "knowledge")):
            continue
        rules.add(r.final.rule)
        a, b = c["rationale"].f1, c["knowledge"].f1
        for k, v in (("self-aware", r.f1), ("rationale", a), ("knowledge", b), ("oracle", max(a, b))):
            per[k].append(v)
        chose_rationale += r.final.choice == "rationale"
        vr, vk = _choice_value(r.final.rule, c["rationale"]), _choice_value(r.final.rule, c["knowledge"])
        if math.isfinite(vr) and math.isfinite(vk):
            scored.append((vr, vk, a, b))
    if not per["self-aware"]:
        return None
    out = {"n": len(per["self-aware"]), "chose_rationale": chose_rationale / len(per["self-aware"]),
           "rule": "/".join(sorted(rules)), "f1": {k: statistics.mean(v) for k, v in per.items()}}
    out["self_aware_minus"] = {k: paired_bootstrap(per["self-aware"], per[k]) for k in ("rationale", "knowledge", "oracle")}
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
            "auroc": auroc([ur - uk for ur, uk, _, _ in differ], [b > a for _, _, a, b in differ]) if differ else float("nan"),
            "gap": statistics.median(uk - ur for ur, uk, _, _ in scored)}


def _final_stage_lines(name: str, t: dict) -> str:
    f, rule = t["f1"], t.get("rule", "self-aware")
    lines = [f"\n{name}: final stage against its ablations, from the same rows (n={t['n']}; "
             f"chose the rationale answer on {100 * t['chose_rationale']:.0f} %):",
             f"- F1 {rule} {100 * f['self-aware']:.1f}, rationales only {100 * f['rationale']:.1f}, "
             f"knowledge only {100 * f['knowledge']:.1f}, oracle choice {100 * f['oracle']:.1f}"]
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
