"""A run's record: its config and the rows of its answered questions, appended one line a question so a killed
run loses at most the line it was writing, and read back (the committable scores joined with the full rows)."""

from __future__ import annotations

import json
import re
import os
import threading
from pathlib import Path
from typing import Annotated, Callable, Sequence

from pydantic import AfterValidator, BeforeValidator, Strict

from .example import Example
from .rows import ResultRow, check_row
from ..common.console import warn
from ..common.jsontext import loads, strict_json
from ..common.runs import SCORES
from ..common.schema import SchemaError, schema
from ..common.writing import make_folder, write_atomic
from .folders import _check_rows_kind, check_folder_is, check_not_foreign, named_paths, run_lock
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

    Every row is flushed and fsync'd before the next, so ``kill -9`` loses at most the item in
    flight. Opening an existing log needs ``resume=True`` (no silent mixing of two runs) and the same
    ``config["method"]`` (method, model, engine) as the one recorded in ``config.json`` beside it; a
    same ``data_sha256`` when both record one; unreadable lines are dropped (a warning names any but a
    torn last one) and the file rewritten so appends start on a clean line.
    """

    def __init__(self, out_dir: str | os.PathLike, rows_name: str, config: dict, *, resume: bool = False,
                 companion: tuple[str, Callable[[dict], dict]] | None = None,
                 check: Callable[[dict], None] | None = None):
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
            check_same_run(read_run_config(self.dir), config, self.dir)
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
    committed row missing beside its full one) or warn, which a run does as ever. A finished run resumed (a job
    resubmitted, a grid run again) so loads no model to find nothing to do."""
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
