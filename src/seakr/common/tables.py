"""Records of a file of many (JSON lines, CSV/TSV, Parquet/Arrow), numbered by where each sits, and the
header rules of question-answer tables."""

from __future__ import annotations

import json
import os
import stat
from typing import Iterable, Iterator

from .console import first_line, repeated
from .files import MAX_LINE, _RECORD_MAGIC, _a, lines
from .jsontext import check_escapes, loads
import csv


def dataset_object(head: str) -> bool:
    """Whether a file whose ``head`` this is holds one JSON object of a whole dataset (SQuAD's and TriviaQA's
    official files, ``data``/``Data``/``version`` first), not one record a line or an element."""
    return head.startswith("{") and ('"data"' in head[:50] or '"Data"' in head[:200] or '"version"' in head[:50])


def head(path: str, nchars: int, error: type[Exception] = ValueError) -> str:
    """The first ``nchars`` characters (or a little more: whole lines, but no more than a MB of one, so a JSON
    file written on one line is not read whole to guess its layout); of a Parquet file, its first records as
    JSON lines (what its layout is told from)."""
    if record_file(path):
        return _records_head(path, nchars, error)
    return head_of(lines(path, error, max_line=max(nchars, 1 << 20), cut=True), nchars)


def head_of(numbered: Iterable[tuple[int, str]], nchars: int) -> str:
    """The whole lines of (line number, line) pairs that hold the first ``nchars`` characters."""
    out, size = [], 0
    for _, line in numbered:
        out.append(line)
        size += len(line)
        if size >= nchars:
            break
    return "".join(out)


def record_file(path) -> str | None:
    """"Parquet" or "Arrow" for a columnar file of records, told by its magic bytes, not its name, else None;
    only a regular file is peeked at (a pipe's first bytes, read here, would be lost to its one reading)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as f:
            magic = f.read(8)
    except (OSError, TypeError, ValueError):
        return None
    return next((kind for m, kind in _RECORD_MAGIC if magic.startswith(m)), None)


def record_rows(path, error: type[Exception] = ValueError, batch: int = 1024) -> Iterator[tuple[int, dict]]:
    """(1-based row number, record) of a Parquet or Arrow file, streamed ``batch`` rows at a time (pyarrow:
    ``seakr[parquet]``)."""
    kind = record_file(path) or "Parquet"
    try:
        import pyarrow.ipc  # noqa: F401
        import pyarrow.parquet as pq
    except ImportError:
        raise error(f"{path}: {_a(kind)} file; reading it needs pyarrow (pip install 'seakr[parquet]')") from None
    n, twice = 0, None
    try:
        batches = (pq.ParquetFile(path).iter_batches(batch_size=batch) if kind == "Parquet"
                   else _arrow_batches(path, batch))
        for rows in batches:
            names = rows.schema.names
            if n == 0 and (twice := repeated(names)):
                break  # a row as a dict kept one of the two columns' cells, unsaid
            for rec in rows.to_pylist():
                n += 1
                yield n, rec
    except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError; a cut file an OSError
        raise error(f"{path}: a damaged {kind} file after row {n} ({first_line(e)})") from None
    if twice:
        raise error(f"{path}: two columns are named {twice!r}; rename one")


def _arrow_batches(path, batch: int):
    """An Arrow IPC file's or stream's record batches, cut to ``batch`` rows (``datasets`` writes 1,000 a batch)."""
    import pyarrow as pa

    with pa.memory_map(str(path)) as src:
        filed = src.read(6) == b"ARROW1"
        src.seek(0)
        if filed:
            reader = pa.ipc.open_file(src)
            batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
        else:
            batches = pa.ipc.open_stream(src)
        for rb in batches:
            for off in range(0, rb.num_rows, batch):
                yield rb.slice(off, batch)


def _records_head(path, nchars: int, error) -> str:
    out, size = [], 0
    for _, rec in record_rows(path, error, batch=4):  # a TriviaQA row carries whole Wikipedia pages: not 1,024 of them
        out.append(json.dumps(rec, default=str) + "\n")
        size += len(out[-1])
        if size >= nchars:
            break
    return "".join(out)


def jsonl(path: str, error: type[Exception] = ValueError) -> Iterator[tuple[int, dict]]:
    """(line number, record) of a JSON-lines file; blank lines skipped; each record must be an object. A
    Parquet or Arrow file is read as the same records (its row numbers for line numbers)."""
    if record_file(path):
        yield from record_rows(path, error)
        return
    yield from jsonl_records(lines(path, error, MAX_LINE), path, error)


def jsonl_records(numbered: Iterable[tuple[int, str]], path: str,
                  error: type[Exception] = ValueError) -> Iterator[tuple[int, dict]]:
    """:func:`jsonl` of (line number, line) pairs already read (a pipe's, whose head told its layout)."""
    for n, line in numbered:
        if not line.strip():
            continue
        try:
            rec = loads(line)
        except json.JSONDecodeError as e:
            raise error(f"{path}:{n}: invalid JSON ({e.msg})") from None
        check_escapes(line, path, error, n)
        if not isinstance(rec, dict):
            raise error(f"{path}:{n}: expected a JSON object, got {type(rec).__name__}")
        yield n, rec


def csv_rows(reader, path: str, error: type[Exception] = ValueError) -> Iterator[tuple[int, list[str]]]:
    """A ``csv.reader``'s rows, each with the line it starts on (a quoted field may hold line breaks), its refusals
    (a field past the size limit, a quote left open) one line naming the file and line instead of a ``_csv.Error``
    traceback."""
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            raise error(f"{path}:{reader.line_num}: not readable as CSV ({e})") from None
        yield start, row


def row_width_refused(path: str, reader, start: int, got: int, expected: str) -> str:
    """The one line for a table row of the wrong width (``expected``: "3 fields (as the header)"), naming the
    line where the row began: a quote opened in a row and closed lines later, or never, makes it run over
    several lines."""
    end = reader.line_num
    if end > start:
        return (f"{path}:{start}: a quote opened in this row closes only on line {end}, so lines {start}-{end} read as "
                f"one row of {got} field{'s' * (got != 1)} (expected {expected}); a quote inside a field is written "
                f"twice (\"\")")
    return f"{path}:{end}: expected {expected}, got {got}"


def table_delimiter(line: str, names) -> str:
    """The delimiter a table's header line is split by: the first of tab, semicolon (a spreadsheet's CSV where
    the decimal mark is a comma) and comma that gives a column named one of ``names`` (lower case); else comma."""
    for d in ("\t", ";", ","):
        if d in line and any(c.strip().lower() in names for c in next(csv.reader([line], delimiter=d))):
            return d
    return ","


def column_twice(header: list[str], names) -> str | None:
    """Why a table's header cannot be read: one of ``names`` (lower case) named by two columns (case and
    spaces aside), e.g. "'answer' names columns 2 and 3"; None where each names at most one."""
    low = [h.strip().lower() for h in header]
    for n in names:
        at = [i + 1 for i, h in enumerate(low) if h == n]
        if len(at) > 1:
            return f"{n!r} names columns {', '.join(map(str, at[:-1]))} and {at[-1]}: which is meant? name one of them"
    return None
