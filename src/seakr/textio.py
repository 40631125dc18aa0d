"""Reading the text files users hand us (datasets, corpora), plain or gzip, line by line, so every
failure names the file and the line: bytes that are not UTF-8, a truncated or damaged ``.gz``."""

from __future__ import annotations

import codecs
import contextlib
import errno
import gzip
import io
import json
import math
import os
import re
import stat
import sys
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator


#: The longest line a one-record-per-line file may hold: no passage or question comes near it, and a stream
#: with no line breaks at all (/dev/zero as a corpus, a binary file) had been read whole into memory
MAX_LINE = 256 << 20


def lines(path: str, error: type[Exception] = ValueError, max_line: int | None = None,
          cut: bool = False) -> Iterator[tuple[int, str]]:
    """(1-based line number, line text with its newline) of a UTF-8 text file, ``.gz`` included.
    A byte-order mark opening the file is dropped (Windows editors write one; it is not text).
    Problems raise ``error`` with ``path:line`` in the message. ``path`` may be a ``pathlib.Path``.
    A line over ``max_line`` bytes is refused, or with ``cut`` its start is the last line read."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise error(f"{path}: {missing(path)}")
    if os.path.isdir(path):
        raise error(f"{path}: is a directory, expected a file{_inside(path)}")
    n = 0
    with open_bytes(path, error) as (f, kind):
        try:
            for n, raw in enumerate(f if max_line is None else iter(lambda: f.readline(max_line + 1), b""), 1):
                long = max_line is not None and len(raw) > max_line
                if long and not cut:
                    raise error(f"{path}:{n}: a line of over {max_line >> 20} MB: not a file of one record per line")
                enc = "utf-8-sig" if n == 1 else "utf-8"
                try:  # a cut line may end inside a character: the incremental decoder leaves that one out
                    yield n, codecs.getincrementaldecoder(enc)().decode(raw[:max_line]) if long else raw.decode(enc)
                except UnicodeDecodeError as e:
                    raise error(_not_utf8(path, n, raw, e)) from None
                if long:
                    return
        except _DAMAGED as e:
            _damaged(path, kind, n, e, error)


def _not_utf8(path: str, n: int, raw: bytes, e: UnicodeDecodeError) -> str:
    """Where a line stops being UTF-8, and what the file likely is: Windows tools save UTF-16 (Notepad's
    "Unicode") or Windows-1252 (Excel's "CSV"), whose bytes alone told a user nothing."""
    at = f"{path}:{n}: not UTF-8 text (byte 0x{raw[e.start]:02x} at column {e.start + 1})"
    if n == 1 and raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return f"{at}: a UTF-16 file; save it as UTF-8"
    if any(b < 32 and b not in (9, 10, 13) for b in raw[:e.start + 64]):  # control bytes: binary, not a code page
        return at
    try:
        text = raw.decode("cp1252")
    except UnicodeDecodeError:
        return at
    word = text[max(0, e.start - 12): e.start + 12].strip()  # one character a byte in Windows-1252
    return f"{at}: Windows-1252 perhaps ({word!r}); save it as UTF-8"


try:
    from lzma import LZMAError
except ImportError:  # a Python built without liblzma
    LZMAError = EOFError
#: What a damaged or truncated compressed stream raises while it is read (gzip's BadGzipFile and bz2's "Invalid
#: data stream" are OSErrors)
_DAMAGED = (EOFError, OSError, zlib.error, LZMAError)
#: (magic bytes, name) of what a downloaded data file may be compressed or archived with
_MAGIC = ((b"\x1f\x8b", "gzip"), (b"\xfd7zXZ\x00", "xz"), (b"\x28\xb5\x2f\xfd", "zstd"), (b"PK\x03\x04", "zip"),
          (b"7z\xbc\xaf\x27\x1c", "7z"))
_BZIP2 = re.compile(rb"BZh[1-9](1AY&SY|\x17rE8P\x90)")  # bzip2's magic, then a block's or the empty stream's
#: (magic bytes, name) of the columnar record files datasets come as: the hub's Parquet downloads, and the Arrow
#: files ``datasets`` keeps (``save_to_disk``, its cache): IPC stream (a continuation marker first) or IPC file
_RECORD_MAGIC = ((b"PAR1", "Parquet"), (b"ARROW1", "Arrow"), (b"\xff\xff\xff\xff", "Arrow"))


def _damaged(path: str, kind: str | None, n: int, e: BaseException, error) -> None:
    if kind is None:  # a plain file's read error (EIO) is not a damaged archive
        raise e
    raise error(f"{path}: truncated or damaged {kind} file after line {n} ({first_line(e)})") from None


@contextlib.contextmanager
def open_bytes(path: str, error: type[Exception] = ValueError):
    """(binary file, compression or None) of a data file, gzip, bzip2, xz or (Python 3.14+) zstd compressed
    ones decompressed as they are read, told by their first bytes, not their names: a ``.bz2`` or ``.xz``
    download, or a gzip one saved without its ``.gz``, was "not UTF-8 text (byte 0x8b at column 2)". Peeking
    reads nothing away, so a pipe's one reading is whole. An archive (zip, 7z, tar) is refused naming it, and a
    Parquet or Arrow file (read as records: :func:`record_rows`) as one."""
    with open(path, "rb") as raw:
        magic = raw.peek(16)[:16]
        if records := next((k for m, k in _RECORD_MAGIC if magic.startswith(m)), None):  # read as text it was
            raise error(f"{path}: {_a(records)} file, which is read as records, not text: give a layout or format of "
                        "JSON records (not a CSV, TSV, TOML or prompt file)")  # "not UTF-8 text (byte 0xa4 ...)"
        kind = next((k for m, k in _MAGIC if magic.startswith(m)), "bzip2" if _BZIP2.match(magic) else None)
        if kind in ("zip", "7z"):
            raise error(f"{path}: a {kind} archive{_members(path, kind)}: extract it and name the file inside")
        with raw if kind is None else _decompressor(path, kind, raw, error) as f:  # closing f leaves raw open
            try:
                head = f.peek(512)
                tar = head[257:263] in (b"ustar\x00", b"ustar ") and b"\x00" in head[:257]  # POSIX's, GNU's
            except _DAMAGED as e:
                _damaged(path, kind, 0, e, error)
            if tar:  # a .tar.gz of a dataset is many files, not one
                raise error(f"{path}: a tar archive: extract it (tar xf {path}) and name the file inside")
            yield f, kind


def _decompressor(path: str, kind: str, raw, error):
    if kind == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if kind == "bzip2":
        import bz2

        return bz2.BZ2File(raw)
    if kind == "xz":
        import lzma

        return lzma.LZMAFile(raw)
    try:
        from compression import zstd  # Python 3.14's standard library
    except ImportError:
        return _zstandard(path, raw, error)
    return zstd.ZstdFile(raw)


def _zstandard(path: str, raw, error):
    """zstd before Python 3.14: the ``zstandard`` package (``seakr[zstd]``), read frame by frame, buffered."""
    try:
        import zstandard
    except ImportError:
        raise error(f"{path}: zstd-compressed, which this Python reads with the zstandard package (pip install "
                    f"'seakr[zstd]'; Python 3.14 needs none): install it, or decompress the file (zstd -d {path})") from None
    return io.BufferedReader(_ZstdFrames(raw, zstandard.ZstdDecompressor()))


class _ZstdFrames(io.RawIOBase):
    """The decompressed bytes of a zstd stream of one or more frames. A stream cut inside a frame raises
    EOFError, as the standard library's readers do (zstandard's own stream reader returned nothing, and a
    truncated download read as a shorter file)."""

    def __init__(self, raw, decompressor):
        self.raw, self.zd = raw, decompressor
        self.frame, self.fed = decompressor.decompressobj(), False
        self.out, self.at = b"", 0  # decompressed bytes not yet read from, from ``at`` on (no copy per read)

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while self.at == len(self.out):
            chunk = self.raw.read(1 << 16)
            if not chunk:
                if self.fed and not self.frame.eof:
                    raise EOFError("the zstd stream ends inside a frame")
                return 0
            self.out, self.at = self._feed(chunk), 0
        n = min(len(b), len(self.out) - self.at)
        b[:n] = memoryview(self.out)[self.at:self.at + n]
        self.at += n
        return n

    def _feed(self, chunk: bytes) -> bytes:
        self.fed = True
        parts = []
        while chunk:
            if self.frame.eof:  # the next frame of a concatenated stream
                self.frame = self.zd.decompressobj()
            parts.append(self.frame.decompress(chunk))
            chunk = self.frame.unused_data if self.frame.eof else b""
        return b"".join(parts)


def _members(path: str, kind: str) -> str:
    """`` of N files (a, b, ...)`` naming a zip archive's first files, or nothing (7z; a pipe, not seekable)."""
    if kind != "zip" or not stat.S_ISREG(os.stat(path).st_mode):
        return ""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            names = [i.filename for i in z.infolist() if not i.is_dir()]
    except (zipfile.BadZipFile, OSError):
        return ""
    return f" of {len(names)} file(s) ({', '.join(names[:4])}{', ...' if len(names) > 4 else ''})"


#: The files of a folder that may hold data (compressed ones by their inner name's suffix), and what ``datasets``
#: keeps beside its data, never read as questions
DATA_SUFFIXES = (".arrow", ".parquet", ".json", ".jsonl", ".csv", ".tsv", ".gz", ".bz2", ".xz", ".zst")
METADATA = ("dataset_info.json", "state.json", "dataset_dict.json")


def data_file_names(folder: str) -> list[str]:
    """The names of the data files directly in ``folder``, in name order (hidden files and metadata left out)."""
    return sorted(f for f in os.listdir(folder) if not f.startswith(".") and f not in METADATA
                  and f.lower().endswith(DATA_SUFFIXES) and os.path.isfile(os.path.join(folder, f)))


def _inside(folder: str) -> str:
    """`` (it holds a, b: name one)``: the data files a folder given for a file holds, or nothing."""
    try:
        names = data_file_names(folder)
    except OSError:
        return ""
    return f" (it holds {', '.join(names[:3])}{', ...' if len(names) > 3 else ''}: name one)" if names else ""


def is_pattern(path: str) -> bool:
    """A glob: a name that is not there, with ``*``, ``?`` or ``[`` (a URL's query string is not one)."""
    return not os.path.exists(path) and any(c in path for c in "*?[") and not is_url(path)


def pattern_files(pattern: str, error: type[Exception] = ValueError) -> list[str]:
    """The files a quoted glob matches, in name order (no shell expanded it: a script's, a config's), or one line."""
    import glob

    files = sorted(f for f in glob.glob(pattern) if os.path.isfile(f))
    if not files:
        raise error(f"{pattern}: no file matches this pattern")
    return files


def user_path(p):
    """A path as text (a ``pathlib.Path`` too), a leading ``~`` expanded: a TOML grid's ``data = "~/dev.json"``,
    ``--out=~/idx`` (bash expands no ``~`` after ``=``) and a Python string pass through no shell, and were "no
    such file" (an output made a folder named "~" in the working folder). Anything else is returned as given."""
    p = os.fspath(p) if isinstance(p, os.PathLike) else p
    return os.path.expanduser(p) if isinstance(p, str) and p.startswith("~") else p


def is_url(path: str) -> bool:
    return re.match(r"(https?|s3|gs|hf)://", path, re.IGNORECASE) is not None


def missing(path: str, noun: str = "file") -> str:
    """Why a file named is not there: "no such file" (``noun``), or, for a URL, that files are read from this
    machine ("no such file" read as if the name were mistyped), for ``-``, that standard input is not read."""
    if is_url(path):
        return f"a URL, and files are read from this machine: download it first (curl -LO {path})"
    if path == "-":  # the shell's name for standard input, which only `index build` reads ("-: no such file")
        return "standard input is not read here: save it to a file and name that"
    return f"no such {noun}"


def read_once(path) -> bool:
    """A pipe, socket or device (``<(cmd)``, ``/dev/stdin``): what it holds can be read only once."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, TypeError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)


def check_rereadable(path, why: str, error: type[Exception] = ValueError, name: str | None = None) -> None:
    """Refuse a pipe or device where ``why`` says the file is read more than once: its second read found
    nothing, and the user was told the file held no questions, or a "malformed" prompt set. ``name``: how the
    message names it (the path)."""
    if read_once(path):
        raise error(f"{name or path}: a pipe or device, which can be read once, but {why}; save it to a file and name that")


def read_text(path: str, error: type[Exception] = ValueError) -> str:
    return "".join(line for _, line in lines(path, error))


def dataset_object(head: str) -> bool:
    """Whether a file whose ``head`` this is holds one JSON object of a whole dataset (SQuAD's and TriviaQA's
    official files, ``data``/``Data``/``version`` first), not one record a line or an element."""
    return head.startswith("{") and ('"data"' in head[:50] or '"Data"' in head[:200] or '"version"' in head[:50])


def head(path: str, nchars: int, error: type[Exception] = ValueError) -> str:
    """The first ``nchars`` characters (or a little more: whole lines, but no more than a MB of one: a JSON
    file written on one line, 500 MB of it, was read whole to guess its layout); of a Parquet file, its first
    records as JSON lines (what its layout is told from)."""
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


#: A JSON \u escape of a UTF-16 surrogate (D800-DFFF) whose backslash is not itself escaped. JSON spells a
#: character beyond the first 65,536 as two of them; one alone decodes into a Python str that cannot be written
#: as UTF-8, so a question, passage or answer holding one failed after the model had run, or inside tantivy.
_SURROGATE = re.compile(r"(?<!\\)(?:\\\\)*\\u([dD][89a-fA-F][0-9a-fA-F]{2})")


def lone_surrogate(text: str) -> tuple[int, str] | None:
    """(line, escape) of the first surrogate escape in JSON ``text`` that is not half of a pair, or None."""
    if "\\u" not in text:  # the common case, for the cost of one scan
        return None
    high = None  # a high surrogate's escape, waiting for its low half right after it
    for m in _SURROGATE.finditer(text):
        low = int(m.group(1), 16) >= 0xDC00
        if high is None and not low:
            high = m
        elif high is not None and low and m.start(1) - 2 == high.end():
            high = None  # a pair: one character
        else:
            return _escape_at(text, high or m)
    return _escape_at(text, high) if high else None


def _escape_at(text: str, m: re.Match) -> tuple[int, str]:
    return text.count("\n", 0, m.start(1)) + 1, text[m.start(1) - 2:m.end()]


def check_escapes(text: str, where: str, error: type[Exception] = ValueError, line: int | None = None,
                  numbered: bool = True) -> None:
    """Refuse JSON ``text`` (file ``where``, or a flag's value where not ``numbered``) that escapes half a
    surrogate pair, naming its line: decoded, it is not text any file, index or response can hold."""
    found = lone_surrogate(text)
    if found:
        n, esc = found
        at = f"{where}:{n if line is None else line}" if numbered else where
        raise error(f"{at}: {esc} is half of a surrogate pair (JSON escapes a character past U+FFFF as two), "
                    "not text")


def loads(text: str):
    """``json.loads`` whose input nested past the parser's recursion limit (``[[[[...`` a hundred thousand deep:
    a corrupt or hostile file) or holds a number past Python's bound on digits is a ``json.JSONDecodeError``
    where that starts, as any other malformed JSON is, instead of a traceback or advice meant for programmers;
    an object that gives a key twice is a :class:`KeyTwice` where that object starts."""
    try:
        return json.loads(text, object_pairs_hook=_once)
    except _KeyTwice as e:
        raise KeyTwice(f"the key {said(e.key)} is given twice in one object: which is meant? give it once",
                       text, _twice_at(text)) from None
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply to read (over 500 levels of brackets)", text,
                                   _too_deep_at(text, 500)) from None
    except ValueError as e:  # a JSONDecodeError passes: it says no such thing
        if (why := too_many_digits(e)) is None:
            raise
        at = re.search(r"\d{%d,}" % (sys.get_int_max_str_digits() + 1), text)
        raise json.JSONDecodeError(why, text, at.start() if at else 0) from None


class KeyTwice(json.JSONDecodeError):
    """JSON that parses, where one object gives a key twice (:func:`loads`)."""


class _KeyTwice(Exception):
    def __init__(self, key: str):
        self.key = key


def _once(pairs: list) -> dict:
    """An object's (key, value) pairs as a dict, where each key is given once: ``json.loads`` kept the last of
    two values (``"answer": "Paris", "answer": "Lyon"`` was Lyon, the other dropped unsaid), as a table's
    reader had kept one of two columns of one name."""
    d = dict(pairs)
    if len(d) != len(pairs):
        raise _KeyTwice(repeated(k for k, _ in pairs))
    return d


def _twice_at(text: str) -> int:
    """Where the first object that gives a key twice starts in ``text`` (read again by the pure-Python
    scanner, whose objects know where they start: only on this path, which ends in an error)."""
    from json import decoder, scanner

    class Finder(json.JSONDecoder):
        def __init__(self):
            super().__init__(object_pairs_hook=_once)
            self.parse_object = self._object
            self.scan_once = scanner.py_make_scanner(self)

        @staticmethod
        def _object(s_and_end, *rest):
            try:
                return decoder.JSONObject(s_and_end, *rest)
            except _KeyTwice:
                raise _At(s_and_end[1] - 1) from None

    class _At(Exception):
        def __init__(self, pos: int):
            self.pos = pos

    try:
        Finder().decode(text)
    except _At as e:
        return e.pos
    except Exception:  # noqa: BLE001 - the position is a courtesy; the error stands without it
        pass
    return 0


def too_many_digits(e: BaseException) -> str | None:
    """Python's bound on int(str) ("Exceeds the limit (4300 digits) ... use sys.set_int_max_str_digits()", advice
    meant for programmers) in a user's words; None for any other error."""
    if isinstance(e, ValueError) and "integer string conversion" in str(e):
        return f"a number of over {sys.get_int_max_str_digits():,} digits"
    return None


def _too_deep_at(text: str, depth: int) -> int:
    """Where ``text``'s brackets (outside strings) first open ``depth`` levels deep (0 if they never do)."""
    level, quoted, escaped = 0, False, False
    for i, ch in enumerate(text):
        if quoted:
            quoted, escaped = (escaped or ch != '"'), (not escaped and ch == "\\")
        elif ch == '"':
            quoted = True
        elif ch in "[{":
            level += 1
            if level > depth:
                return i
        elif ch in "]}":
            level -= 1
    return 0


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
        for rows in (pq.ParquetFile(path).iter_batches(batch_size=batch) if kind == "Parquet" else _arrow_batches(path, batch)):
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


def _a(kind: str) -> str:
    return ("an " if kind[0] in "AEIOU" else "a ") + kind


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
    import json

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
    import csv

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
    """The one line for a table row of the wrong width (``expected``: "3 fields (as the header)"). A row that ran
    over several lines was made so by a quote opened in it and closed lines later, or never: the error named the
    line where it ended (a whole file's last line for a DPR TSV with one stray quote), not where it began."""
    end = reader.line_num
    if end > start:
        return (f"{path}:{start}: a quote opened in this row closes only on line {end}, so lines {start}-{end} read as "
                f"one row of {got} field{'s' * (got != 1)} (expected {expected}); a quote inside a field is written "
                f"twice (\"\")")
    return f"{path}:{end}: expected {expected}, got {got}"


def blank(text: str) -> bool:
    """No visible character: empty, spaces, control or zero-width characters, or a console's escapes only (a NUL
    typed or sent is not a question; "\x1b[0m" was one, asked as "" once its escape was dropped). Only an escape's
    tail is printable, so the text is cleaned only where it holds an ESC: every passage of an index build passes
    here (cleaning each cost 10 us a 600-character passage, 50 times the strip it replaced)."""
    if "\x1b" in text:
        text = without_controls(text)
    return not any(ch.isprintable() and not ch.isspace() for ch in text)


def encodable(text: str) -> bool:
    """Text a file, tokenizer or response can hold: no lone surrogate (half a JSON pair; a shell's undecodable
    byte arrives as one too)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_question(q: str, error: type[Exception] = ValueError) -> str:
    """A question as typed: a visible character at least, and encodable as UTF-8 (a shell can pass
    undecodable bytes). Every door (the commands, the Python API, HTTP, a data file) asks this."""
    if not isinstance(q, str):  # b"Who?" or ["Who?"] from Python was "must be a non-empty string"
        raise TypeError(f"question: expected text, got {type(q).__name__}"
                        + (" (decode it: question.decode('utf-8'))" if isinstance(q, bytes) else ""))
    if not encodable(q):  # first: bytes a shell passed undecoded are no visible text either, and not "empty"
        raise error("question: not valid UTF-8 (undecodable bytes, or half a surrogate pair)")
    if blank(q):
        raise error("question must be a non-empty string")
    return q


def write_atomic(path, content: str | bytes) -> None:
    """Write a file whole or not at all: the content (text as UTF-8) goes to a hidden file beside it, then
    replaces it. A write cut off (disk full, a file-size limit, kill -9) had left a fitted probe, a run's
    config.json or the model's calibration file truncated, the earlier content lost with it. A link is
    followed (its target is replaced, the link stays); a device or pipe (/dev/stdout) is written through."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    target = os.path.realpath(path)
    if os.path.isdir(path):  # was IsADirectoryError, from Python
        raise ValueError(f"{path}: is a directory, expected a file name")
    # stat the name given, not the link's target: /dev/stdout into a pipe resolves to "/proc/PID/fd/pipe:[N]",
    # which names nothing, and the write went to a hidden file in /proc ("[Errno 2] No such file or directory")
    if os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode):
        with open(path, "wb") as f:
            f.write(data)
        return
    tmp = os.path.join(os.path.dirname(target), f".{os.path.basename(target)}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        f = open(tmp, "wb")
    except OSError as e:
        raise file_error(path, e) from None
    try:
        with f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if os.path.exists(target):
            os.chmod(tmp, stat.S_IMODE(os.stat(target).st_mode))  # a 0600 file stays 0600
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


#: control characters other than newline and tab, as escapes: a terminal acts on them (ESC starts a colour, a
#: title or a clipboard write; CR overwrites the line shown)
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0))}


def table_delimiter(line: str, names) -> str:
    """The delimiter a table's header line is split by: the first of tab, semicolon (a spreadsheet's CSV where
    the decimal mark is a comma) and comma that gives a column named one of ``names`` (lower case); else comma."""
    import csv

    for d in ("\t", ";", ","):
        if d in line and any(c.strip().lower() in names for c in next(csv.reader([line], delimiter=d))):
            return d
    return ","


def repeated(items: Iterable):
    """The first item that an earlier one equals; None where each is given once (a column's name, an id)."""
    seen: set = set()
    return next((x for x in items if x in seen or seen.add(x)), None)


def column_twice(header: list[str], names) -> str | None:
    """Why a table's header cannot be read: one of ``names`` (lower case) named by two columns (case and
    spaces aside), e.g. "'answer' names columns 2 and 3"; None where each names at most one. The readers took
    the first column and dropped the other's cells unsaid."""
    low = [h.strip().lower() for h in header]
    for n in names:
        at = [i + 1 for i, h in enumerate(low) if h == n]
        if len(at) > 1:
            return f"{n!r} names columns {', '.join(map(str, at[:-1]))} and {at[-1]}: which is meant? name one of them"
    return None


def misspelled(rec, names) -> str | None:
    """Why a record's key is read as no field: it spells one of ``names`` (lower case) in other case or spacing
    ("key 'Title' is read as no field: name it 'title'"); None where no key does. A table's header is read in
    any case; a record's keys are read as they are spelled, and "Title" or "Answer" had gone unread unsaid."""
    for k in rec:
        if isinstance(k, str) and k not in names and (low := k.strip().lower()) in names:
            if low in rec:  # both: which is meant? ("answer" read, "ANSWER" dropped unsaid)
                return f"keys {low!r} and {said(k)} spell one field two ways; give it once"
            return f"key {said(k)} is read as no field: name it {low!r}"
    return None


def native(v):
    """A NumPy scalar (a sweep over ``np.arange``, a DataFrame's cell), or a 0-d array or tensor, as Python's own
    number, bool or text; anything else as given. Python doors check ``isinstance(v, int)``, and ``np.int64(5)``
    was "expected int, got np.int64(5)"."""
    return v.item() if getattr(v, "ndim", None) == 0 and hasattr(v, "item") else v


def said(v) -> str:
    """An option's value as an error quotes it: a whole number of thousands of digits by its size (its repr
    raised "Exceeds the limit (4300 digits)", advising sys.set_int_max_str_digits), anything else's repr cut
    to 80 characters (a pasted passage as a marker)."""
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10 ** 80:
        return f"a whole number of about {int(v.bit_length() * math.log10(2)) + 1:,} digits"
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass(frozen=True)
class Range:
    """The values a numeric knob may take: ``lo``..``hi`` (None: unbounded), each end open or closed, whole
    numbers only when ``integer``. One rule for a method's options and a generation call's knobs."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    integer: bool = False
    finite: bool = True  # False: +-inf are values too (a threshold that never or always fires)

    def contains(self, v) -> bool:
        if isinstance(v, float) and not math.isfinite(v):
            return not self.finite
        lo_ok = self.lo is None or (v > self.lo if self.lo_open else v >= self.lo)
        hi_ok = self.hi is None or (v < self.hi if self.hi_open else v <= self.hi)
        return lo_ok and hi_ok

    def describe(self) -> str:
        # a whole bound as it is written: float(2**64 - 1) rounds up to 2**64
        num = lambda x: str(x) if isinstance(x, int) else f"{int(x)}" if x.is_integer() else f"{x:g}"  # noqa: E731
        lo = "-inf" if self.lo is None else num(self.lo)
        hi = "inf" if self.hi is None else num(self.hi)
        kind = "a whole number" if self.integer else "a number"
        return f"{kind} in {'(' if self.lo_open or self.lo is None else '['}{lo}, {hi}{')' if self.hi_open or self.hi is None else ']'}"

    def check(self, name: str, v, label: str = "option") -> None:
        """``v``, already of its type, in range; else one line naming it (``label name``)."""
        if not self.contains(v):
            raise ValueError(f"{label} {name}: expected {self.describe()}, got {said(v)}")

    def value(self, name: str, v, label: str = "option"):
        """``v`` (a NumPy number too) typed and checked: an int where ``integer``, else a float; a bool, a text,
        NaN or anything else is refused in the same line as a value out of range."""
        v = native(v)
        number = isinstance(v, (int, float)) and not isinstance(v, bool) and v == v
        if not number or (self.integer and not isinstance(v, int)):
            raise ValueError(f"{label} {name}: expected {self.describe()}, got {said(v)}")
        self.check(name, v, label)
        return v if self.integer else float(v)


#: A terminal's escape sequences (colours, a window title) and every control character that is not whitespace.
_TERMINAL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")


def without_controls(text: str) -> str:
    """Text without terminal escapes and control characters (whitespace stays): a question pasted from a console
    reached the prompt and the search as it was ("\x1b[1mWho\x1b[0m directed Alien?" searched for "1mWho")."""
    return _TERMINAL.sub("", text)


def shown(text) -> str:
    """Text from a corpus, a dataset or the model as a console should show it: its control characters escaped
    (a passage holding "\x1b]0;title\x07" retitled the terminal that ran `seakr search`)."""
    return str(text).translate(_CONTROLS)


_LONG_RUN = re.compile(r"\S{241,}")


def message(text) -> str:
    """An error or warning line as a console should show it: :func:`shown`, and any run of over 240 characters
    without a space (a flag's value of 5,000 digits, a pasted passage as a path) cut in its middle, saying
    how long it was: such a value was echoed whole, 5 KB on one line."""
    return _LONG_RUN.sub(lambda m: f"{m[0][:160]}...({len(m[0]):,} characters)...{m[0][-40:]}", shown(text))


def check_output_file(path: str, flag: str, error: type[Exception] = ValueError) -> None:
    """Fail before any slow work when ``path`` cannot be written."""
    if not path.strip():
        raise error(f"{flag}: an empty path; name the file")
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise error(f"{flag} {path}: is a directory, expected a file name")
    if not parent.is_dir():
        raise error(f"{flag} {path}: no such directory {parent}")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise error(f"{flag} {path}: not writable")
    # a file is written beside its name, then moved over it (a device or a pipe is written through)
    why = None if p.exists() and not p.is_file() else place_refused(str(parent), file=True)
    if why:
        raise error(f"{flag} {path}: cannot write there ({why})")


def parse_json(text: str, where: str, error: type[Exception] = ValueError):
    """``text`` (the content of file ``where``) as JSON; bad JSON raises ``error`` naming ``where:line``."""
    import json

    try:
        value = loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{where}:{e.lineno}: invalid JSON ({e.msg})") from None
    check_escapes(text, where, error)
    return value


def given_path(path, what: str, noun: str = "file") -> str:
    """A path a Python caller gives (text or ``os.PathLike``, not blank) as text; anything else is one line naming
    ``what`` (None or a number was pathlib's "expected str, bytes or os.PathLike object", "" the current folder)."""
    if not isinstance(path, (str, os.PathLike)) or not isinstance(os.fspath(path), str):
        raise TypeError(f"{what}: expected {'an' if noun[0] in 'aeiou' else 'a'} {noun}'s path, got {type(path).__name__}")
    if not os.fspath(path).strip():
        raise ValueError(f"{what}: an empty path; name the {noun}")
    return os.fspath(path)


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


def json_file(path: str, error: type[Exception] = ValueError):
    """A JSON file's content; a missing file, bytes that are not UTF-8 or bad JSON raise ``error`` naming it."""
    return parse_json(read_text(str(path), error), str(path), error)


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


#: What check_fields accepts for each kind of field a fitted file holds.
FIELD_KINDS = {"text": (lambda v: isinstance(v, str), "text"),
               "number": (_number, "a finite number"),
               "numbers": (lambda v: isinstance(v, list) and all(map(_number, v)), "a list of finite numbers"),
               "texts": (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v), "a list of texts"),
               "object": (lambda v: isinstance(v, dict), "an object")}


def did_you_mean(value, choices, cutoff: float = 0.6) -> str:
    """`` (did you mean 'x'?)`` for the choice closest to ``value`` read in lower case (a model's, an estimator's or
    a decision's name as its makers capitalise it: "EigenScore", "Probe", "Qwen2.5-Coder-0.5B"), else ``""``."""
    import difflib

    if not isinstance(value, str):
        return ""
    flat = lambda text: re.sub(r"[^0-9a-z]", "", text.lower())  # noqa: E731 -- "Max Entropy" is max-entropy
    key, names = flat(value), {flat(str(c)): str(c) for c in choices}
    # a name that begins the value (the longest), or that the value begins (the shortest), before letters in
    # common: "EigenScore" is eigen, not hidden-score; a name of one or two letters begins too much to say ("keep"
    # is not --k), and is meant only where it is the value
    longer = [f for f in names if f and key.startswith(f) and (len(f) >= 3 or f == key)]
    shorter = [f for f in names if len(key) >= 3 and f.startswith(key)]
    close = ([names[max(longer, key=len)]] if longer else [names[min(shorter, key=len)]] if shorter else
             [names[f] for f in difflib.get_close_matches(key, list(names), n=1, cutoff=cutoff)])  # "--" is no likeness
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_key(where: str, key: str, allowed) -> str:
    """The line for a key a file's object does not take, with the closest one it does (a grid's, a prompt set's)."""
    return f"{where}: unknown key {key!r}" + (did_you_mean(key, allowed) or f"; allowed: {', '.join(allowed)}")


def check_fields(d: dict, kinds: dict[str, str], where: str, error: type[Exception] = ValueError) -> None:
    """One line naming the first field of a JSON object (a fitted file) whose value is not of its kind
    (:data:`FIELD_KINDS`); absent fields pass (the reader names the ones it needs). Without it a hand-edited
    file fails deep in numpy ("could not convert string to float") or as a TypeError naming no file."""
    for key, kind in kinds.items():
        ok, expect = FIELD_KINDS[kind]
        if key in d and not ok(d[key]):
            raise error(f"{where}: field {key!r} must be {expect}, not {json.dumps(d[key])[:40]}")


_WARNED: set[str] = set()


def warn(msg: str, once: bool = False) -> None:
    """One line on stderr for what goes on but should be known (a skipped row, a missing shard, a fallback);
    ``once``: not again in this process (a server builds a method per request)."""
    import sys

    if once and msg in _WARNED:
        return
    _WARNED.add(msg)
    print(f"seakr: warning: {message(msg)}", file=sys.stderr)  # it may quote a file's name or a dataset's text


def first_line(e: BaseException, limit: int = 200) -> str:
    """An exception's message as one line for an error of ours: its first line, cut at ``limit``; the
    exception's type where it has no message (``str(e).splitlines()[0]`` raised IndexError there)."""
    text = str(e).strip()
    return text.splitlines()[0][:limit] if text else type(e).__name__


#: A write the file system refused, and how to say it: no space, the quota spent, a read-only file system.
REFUSED_WRITES = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "the disk quota is spent",
                  errno.EROFS: "the file system is read-only",
                  errno.EFBIG: "a file reached the size limit set for this process (ulimit -f)"}


def nearest_existing(path: str) -> str:
    """``path`` or the closest folder above it that exists (where making it would begin)."""
    p = os.path.abspath(path)
    while not os.path.lexists(p) and os.path.dirname(p) != p:
        p = os.path.dirname(p)
    return p


def folder_refused(where: str, file: bool = False) -> str | None:
    """Why the folder ``where`` takes no new folder (or ``file``), None where it does, learnt by making one and
    removing it: permission bits do not say all (root passes every access check, yet /proc, /sys and a
    read-only mount refuse)."""
    import tempfile

    try:
        if file:
            fd, name = tempfile.mkstemp(prefix=".seakr-try-", dir=where)
            os.close(fd)
            os.unlink(name)
        else:
            os.rmdir(tempfile.mkdtemp(prefix=".seakr-try-", dir=where))
    except OSError as e:
        return e.strerror or str(e)
    return None


#: errors of making a file or folder that are not the place's fault: the disk lacks room, or the system cannot
#: follow the path (a name too long, a link loop); the commands word each on its own line
_PASSED_ON = (errno.ENOSPC, errno.EDQUOT, errno.ENAMETOOLONG, errno.ELOOP)


def folder_error(path, e: OSError, what: str = "the folder") -> OSError | ValueError:
    """What to raise for the folder ``path`` that could not be made (``e``): one line naming it and why, as a
    ValueError (the Python API's callers read "[Errno 2] No such file or directory: '/proc/x'" for /proc, "[Errno 17]
    File exists: 'a.csv'" for a file on the way); ``e`` itself where the disk lacks room or the path is one the
    system cannot follow (a name too long, a link loop), which the commands name on their own line."""
    if e.errno in _PASSED_ON:
        return e
    where = nearest_existing(str(path))
    return ValueError(f"{path}: cannot create {what} ({no_place(where) or f'{where} refuses new folders: {e.strerror or e}'})")


def no_place(where: str) -> str | None:
    """Why the nearest existing path ``where`` cannot hold anything new: not a folder, or a link to nothing."""
    if os.path.islink(where) and not os.path.exists(where):
        return f"{where} is a symbolic link to nothing ({os.readlink(where)})"
    return None if os.path.isdir(where) else f"{where} is not a directory"


def place_refused(where: str, file: bool = False) -> str | None:
    """Why ``where`` (the nearest existing path) takes no new folder (or ``file``), tried as :func:`folder_refused`
    tries it, worded as every pre-check words it; None where it does."""
    if (why := no_place(where)) is not None:
        return why
    refused = folder_refused(where, file)
    return refused and f"{where} refuses new {'files' if file else 'folders'}: {refused}"


def file_error(path, e: OSError) -> OSError | ValueError:
    """As :func:`folder_error`, for the file ``path`` whose hidden twin (:func:`write_atomic`) could not be made
    beside it: the error named that twin ("[Errno 2] No such file or directory: 'out/.p.json.123-456.tmp'")."""
    if e.errno in _PASSED_ON:
        return e
    parent = os.path.dirname(os.path.realpath(path))
    where = nearest_existing(parent)
    why = no_place(where) or (f"no folder {parent}" if where != parent else f"{parent} refuses new files: {e.strerror or e}")
    return ValueError(f"{path}: cannot write the file ({why})")


def make_folder(path, what: str = "the folder") -> Path:
    """``mkdir -p path``, a refusal as :func:`folder_error` words it."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise folder_error(path, e, what) from None
    return Path(path)


def refused_write(e: BaseException) -> str | None:
    """What a write the file system refused says (a full disk, a quota, a read-only mount, a size limit), as
    Python raises it or as a Rust library words it ("... (os error 28)"); None for any other error."""
    if isinstance(e, OSError) and e.errno in REFUSED_WRITES:
        return REFUSED_WRITES[e.errno]
    return next((why for n, why in REFUSED_WRITES.items() if f"(os error {n})" in str(e)), None)


def spelled(x: float) -> str | None:
    """A non-finite number as a config spells it: the text "inf" / "-inf" its number options read back; NaN
    as null."""
    return ("inf" if x > 0 else "-inf") if x == x else None


def finite(x, spell: bool = False):
    """A JSON-safe copy: each non-finite float null ("no figure"), or with ``spell`` :func:`spelled` (a
    threshold of -inf is "always", not "unset"); tuples become lists."""
    if isinstance(x, float) and not math.isfinite(x):
        return spelled(x) if spell else None
    if isinstance(x, dict):
        return {k: finite(v, spell) for k, v in x.items()}
    return [finite(v, spell) for v in x] if isinstance(x, (list, tuple)) else x


def strict_json(obj, *, spell: bool = False, **kw) -> str:
    """``json.dumps`` that every JSON reader takes: Python writes NaN and Infinity, which jq and JSON.parse refuse
    (the whole file); :func:`finite` makes them null, or spells them."""
    return json.dumps(finite(obj, spell), allow_nan=False, **kw)
