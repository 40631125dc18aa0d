"""Reading the files users hand us, plain or compressed, line by line, so every failure names the file and
the line: bytes that are not UTF-8, a truncated or damaged archive, a folder or a glob of a split's shards."""

from __future__ import annotations

import codecs
import contextlib
import gzip
import hashlib
import io
import os
import re
import stat
import zlib
from typing import Iterator

from .console import first_line
import zipfile
import glob


#: The longest line a one-record-per-line file may hold: no passage or question comes near it, and without a bound
#: a stream with no line breaks at all (/dev/zero as a corpus, a binary file) would be read whole into memory
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
    ones decompressed as they are read, told by their first bytes, not their names (a download saved without
    its suffix reads the same). Peeking reads nothing away, so a pipe's one reading is whole. An archive (zip,
    7z, tar) is refused naming it, and a Parquet or Arrow file (read as records: :func:`record_rows`) as one."""
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
                    "'seakr[zstd]'; Python 3.14 needs none): install it, or decompress the file "
                    f"(zstd -d {path})") from None
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
    files = sorted(f for f in glob.glob(pattern) if os.path.isfile(f))
    if not files:
        raise error(f"{pattern}: no file matches this pattern")
    return files


def user_path(p):
    """A path as text (a ``pathlib.Path`` too), a leading ``~`` expanded: a TOML grid's value, ``--out=~/idx``
    (bash expands no ``~`` after ``=``) and a Python string pass through no shell. Anything else is returned
    as given."""
    p = os.fspath(p) if isinstance(p, os.PathLike) else p
    return os.path.expanduser(p) if isinstance(p, str) and p.startswith("~") else p


def is_url(path: str) -> bool:
    return re.match(r"(https?|s3|gs|hf)://", path, re.IGNORECASE) is not None


def missing(path: str, noun: str = "file") -> str:
    """Why a file named is not there: "no such file" (``noun``), or, for a URL, that files are read from this
    machine, or, for ``-``, that standard input is not read."""
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
    """Refuse a pipe or device where ``why`` says the file is read more than once: its second read would find
    nothing. ``name``: how the message names it (the path)."""
    if read_once(path):
        raise error(f"{name or path}: a pipe or device, which can be read once, but {why}; save it to a file and name "
                    "that")


def read_text(path: str, error: type[Exception] = ValueError) -> str:
    return "".join(line for _, line in lines(path, error))


def _a(kind: str) -> str:
    return ("an " if kind[0] in "AEIOU" else "a ") + kind


def given_path(path, what: str, noun: str = "file") -> str:
    """A path a Python caller gives (text or ``os.PathLike``, not blank) as text; anything else is one line
    naming ``what`` (an empty text would be the current folder)."""
    if not isinstance(path, (str, os.PathLike)) or not isinstance(os.fspath(path), str):
        raise TypeError(f"{what}: expected {'an' if noun[0] in 'aeiou' else 'a'} {noun}'s path, got "
                        f"{type(path).__name__}")
    if not os.fspath(path).strip():
        raise ValueError(f"{what}: an empty path; name the {noun}")
    return os.fspath(path)


def sha256_file(path, chunk: int = 8 << 20) -> str:
    """The SHA-256 of a file, read in chunks (a model's GGUF, a corpus, a data file: their content names them)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while b := f.read(chunk):
            h.update(b)
    return h.hexdigest()
