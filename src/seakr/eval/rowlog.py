"""A run's record: its config and the rows of its answered questions, appended one line a question so a killed
run loses at most the line it was writing, and read back (the committable scores joined with the full rows)."""

from __future__ import annotations

import json
import re
import os
import threading
from pathlib import Path
from typing import Annotated, Callable

from pydantic import AfterValidator, BeforeValidator, Strict

from .rows import ResultRow, check_row, study_row_check
from ..common.console import warn
from ..common.jsontext import loads, strict_json
from ..common.runs import SCORES
from ..common.schema import SchemaError, schema
from ..common.writing import make_folder, missing_folders, remove_empty, write_atomic
from .folders import LOCK, _check_rows_kind, check_folder_is, check_not_foreign, named_paths, run_lock
from .resume import check_same_run
from .specs import shard_spelled


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
                       f"question {tid!r} will run again" if torn is not None else
                       f"the row of question {tid!r} is left out")
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
    try:
        RunRecord(**{k: cfg[k] for k in ("method", "shard") if k in cfg})
    except SchemaError as e:
        raise ValueError(f"{p}: {e}") from None
    return cfg


def _only_engine(v):
    """A recorded method as the record reads it: an object, of which only its engine is held to a shape."""
    return {"engine": v.get("engine")} if isinstance(v, dict) else v


@schema("field", strict=False)
class MethodRecord:
    engine: Annotated[dict, Strict()] | None = None  # the index a run searched (compare, report and merge read it)


@schema("field", extra="ignore", strict=False)
class RunRecord:
    """The fields of a run's ``config.json`` that compare, report and merge read, so a foreign config is named by
    its file, not found by the reader that trips on it."""

    method: Annotated[MethodRecord, BeforeValidator(_only_engine)] | None = None
    shard: Annotated[str, Strict(), AfterValidator(shard_spelled)] | None = None


def _json_string(body: str) -> str | None:
    try:
        return json.loads(f'"{body}"')
    except ValueError:
        return None


class RowLog:
    """Append-only JSONL of finished items, shared by ``seakr eval`` and the studies.

    Opened in two moves. The *claim* (the constructor) needs no model: it locks the folder (one writer), refuses
    another program's folder, another kind's rows, rows without ``--resume`` and rows without a ``config.json``,
    and reads the rows there (a row its ``check`` refuses is named by file and line). A plan claims every run's
    folder before the model loads, so no refusal of the folder waits for the weights. :meth:`begin` takes the
    run's whole record once the method is settled: a resume must match the recorded one (method, model, engine,
    data; :func:`~seakr.eval.resume.check_same_run`), then the files are mended (unreadable lines dropped, so
    appends start on a clean line) and ``config.json`` written. Given ``config``, the constructor does both.

    Every row is flushed and fsync'd before the next, so ``kill -9`` loses at most the item in flight. A claim
    that ends before it began leaves no folder it made behind.
    """

    def __init__(self, out_dir: str | os.PathLike, rows_name: str, config: dict | None = None, *,
                 resume: bool = False, companion: tuple[str, Callable[[dict], dict]] | None = None,
                 check: Callable[[dict], None] | None = None):
        """``companion``: (file name, row -> its slim form): a second log of every row without the
        text it holds (question, passages), to commit, so ``--resume`` continues on another machine
        from that file alone; a row found only there counts as done and is summarised from it."""
        named_paths("out_dir", out_dir)  # run_eval(..., "") and the studies wrote their rows into the current folder
        self.dir, self._f, self._slim_f = Path(out_dir), None, None
        check_not_foreign(self.dir)  # before its lock file is left in another program's folder
        self._made = missing_folders(self.dir)  # what a claim that never begins takes away again
        make_folder(self.dir)
        self._made.insert(0, None if (self.dir / LOCK).exists() else self.dir / LOCK)
        self._dir_lock = run_lock(self.dir).__enter__()  # held until close: one writer per folder
        try:
            self._claim(rows_name, resume, companion, check)
            if config is not None:
                self.begin(config)
        except BaseException:
            self.close()
            raise

    def _claim(self, rows_name: str, resume: bool, companion, check) -> None:
        _check_rows_kind(self.dir, rows_name)  # (check_not_foreign ran in __init__, before the lock)
        self.path = self.dir / rows_name
        self.slim_path, self.slim = (self.dir / companion[0], companion[1]) if companion else (None, None)
        held = any(p and p.exists() and p.stat().st_size for p in (self.path, self.slim_path))
        if held and not resume:
            raise ValueError(f"{self.dir}: holds results already; pass --resume to continue or choose another --out")
        self.recorded = read_run_config(self.dir, required=False) if resume else {}
        if held and not self.recorded:
            raise ValueError(f"{self.dir}: holds rows but no config.json, so nothing says which run they belong to; "
                             "refusing to resume into it (choose another --out)")
        self.torn: list = []  # ids of unreadable lines (None: no id could be read)
        self.skipped: list = []  # unreadable lines before the last, as (file, line, id)
        self.full = self._read(self.path, check)  # a row the check refuses stops here, the folder as it was
        self.kept = self._read(self.slim_path, check) if self.slim_path else []
        self.rows = joined_rows(self.full, self.kept, self.torn)
        self.done = {r["id"] for r in self.rows}

    def _read(self, path: Path, check) -> list[dict]:
        skipped: list = []
        rows = read_results(path, torn=self.torn, check=check, skipped=skipped)
        self.skipped += [(path, n, tid) for n, tid in skipped]
        return rows

    def check_known(self, record: dict) -> None:
        """The resume rule applied to the part of the run's record known before the model loads (the plan's:
        its questions, the options it sets, the model's name, the index's checksum)."""
        if self.recorded:
            check_same_run(self.recorded, record, self.dir, partial=True)

    def finished(self, examples) -> list[dict] | None:
        """Every row this folder holds, where it holds one for each of ``examples`` and nothing in it needs
        mending (an unreadable line, a committed row missing beside its full one); else None, and the run goes
        the usual way: a finished run resumed loads no model to find nothing to do."""
        want = {ex.id for ex in examples}
        kept = {r["id"] for r in self.kept} if self.slim_path else self.done
        return None if self.skipped or not want <= kept or not want <= self.done else list(self.rows)

    def begin(self, config: dict) -> None:
        """Start writing with ``config``, the run's whole record: checked against the recorded one on resume,
        then the files mended and ``config.json`` written."""
        if self.recorded:
            check_same_run(self.recorded, config, self.dir)
        for path, n, tid in self.skipped:
            warn(f"{path}:{n}: unreadable line skipped (a torn or foreign write); " + _lost(tid))
        for path, rows in ((self.path, self.full), (self.slim_path, self.kept)):
            if path is not None and path.exists():  # appends start on a clean line; a kill here loses no row
                write_atomic(path, "".join(json.dumps(r) + "\n" for r in rows))
        write_atomic(self.dir / "config.json", strict_json(config, spell=True, indent=2))  # -inf as "-inf"
        self._made = []
        self._lock = threading.Lock()
        self._f = open(self.path, "a", encoding="utf-8")
        self._slim_f = open(self.slim_path, "a", encoding="utf-8") if self.slim_path else None
        if self._slim_f is not None:  # a row written before the run stopped (disk full, kill -9) between the two
            have = {r["id"] for r in self.kept}  # files: the committed file would lack it and run it again elsewhere
            self._write(self._slim_f, [self.slim(r) for r in self.full if r["id"] not in have])
        self.full = self.kept = []  # read: the rows live on in self.rows

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
            for f in (self._f, self._slim_f):
                if f is not None:
                    f.close()
        finally:
            self._dir_lock.__exit__()
            _take_back(self._made)  # a claim that never began: no folder of its own left behind

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _take_back(made: list) -> None:
    """Take away what a claim made: its lock file (None: one was there before it), then the folders it made."""
    if made and made[0] is not None:
        made[0].unlink(missing_ok=True)
    remove_empty(made[1:])


def _lost(tid: str | None) -> str:
    """What an unreadable line costs a resume: the question it held runs again, or (no id) every question only
    the committed rows hold does (:func:`joined_rows`)."""
    if tid is None:
        return "no question id could be read from it: the questions only the committed rows hold will run again"
    return f"question {tid!r} will run again"


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
    whose row the other does not hold is said with ``warn``, so `compare` and `report` never count without it unsaid.
    ``scored``: what needs every row's F1 (a calibration, a fit): a question without gold answers is refused."""
    skipped: dict[str, list] = {"results.jsonl": [], SCORES: []}
    rows = joined_rows(*(read_results(Path(run_dir) / name, check=check_row, skipped=skipped[name])
                         for name in ("results.jsonl", SCORES)))
    have = {r["id"] for r in rows}
    for name, lines in skipped.items():
        for n, tid in lines:
            if tid is None or tid not in have:
                who = (f"the row of question {tid!r} is left out" if tid is not None
                       else "a row is left out (no id could be read)")
                warn(f"{Path(run_dir) / name}:{n}: unreadable line skipped (a torn or foreign write); {who}")
    out = [ResultRow.from_dict(r) for r in rows]
    bare = next((r for r in out if r.f1 is None), None) if scored else None
    if bare is not None:
        raise ValueError(f"{run_dir}: question {bare.id!r} was answered without a gold answer (no F1); {scored} needs "
                         "a run of questions with answers")
    return out


def row_kind(rows_name: str) -> dict:
    """The keywords a :class:`RowLog` of ``rows_name`` takes: an eval run's rows are checked and kept beside their
    committable companion (:func:`score_row`); a study's are checked by their own schema."""
    if rows_name == "results.jsonl":
        return {"companion": (SCORES, score_row), "check": check_row}
    return {"check": study_row_check(rows_name)}


def recorded_with(cfg: dict, model: str) -> dict | None:
    """A run's or study's recorded configuration ``cfg``, where it ran with ``model`` (a registry name resolved, a
    path) and recorded its method's options; None otherwise (a finished resume then goes the usual way)."""
    method = cfg.get("method")
    recorded = method.get("model") if isinstance(method, dict) else None
    ok = isinstance(recorded, dict) and recorded.get("model") == model and isinstance(method.get("config"), dict)
    return cfg if ok else None
