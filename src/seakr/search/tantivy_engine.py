"""Embedded BM25 over an on-disk tantivy index, built to match the paper's Elasticsearch setup.

Match with ES 7.17 (docs/design-notes.md §2): tantivy's BM25 is Lucene's with the
``k1+1`` factor ES keeps (k1=1.2, b=0.75 fixed, doc lengths quantised the same way), so scores are the
numbers ES reports. Fields ``title`` and ``text`` are analysed like ES's ``english`` analyzer:
split on non-alphanumerics, lower-case, Lucene's 33 English stop words (+ "s", standing in for the
possessive filter), English stemming. Differences we accept and state: tantivy's stemmer is Snowball
English (Porter2) where ES uses the original Porter, and its tokenizer splits on every
non-alphanumeric character ("1,234" -> "1", "234"). The query is ES's ``multi_match`` best_fields:
a disjunction-max over the two fields' term disjunctions with tie-breaker 0.5.

Integrity: a build writes to a temporary directory and renames it into place (never a half index);
``seakr-index.json`` records the document count and an order-independent checksum of (id, title,
text); opening verifies the count against the index, ``verify()`` recomputes the checksum.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import threading
import time
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Sequence

from ..locks import FolderLock, holder
from ..textio import encodable, first_line, folder_error, given_path, loads, refused_write
from .base import (BM25_B, BM25_K1, LUCENE_ENGLISH_STOPWORDS, MANIFEST, TIE_BREAKER, Intake, Passage, SearchError,
                   check_many, check_search, iter_batches)

FORMAT = "seakr-tantivy/1"
WRITER = ".seakr-writer.lock"  # held while a process adds to the index (one writer at a time)
ANALYZER = "seakr_english"
STOPWORDS = LUCENE_ENGLISH_STOPWORDS + ("s",)
_MOD = 1 << 256


def _tantivy():
    try:
        import tantivy
    except ImportError as e:  # pragma: no cover - a core dependency
        raise SearchError("the embedded engine needs the package tantivy: pip install tantivy") from e
    return tantivy


def analyzer():
    t = _tantivy()
    return (
        t.TextAnalyzerBuilder(t.Tokenizer.simple())
        .filter(t.Filter.lowercase())
        .filter(t.Filter.custom_stopword(list(STOPWORDS)))
        .filter(t.Filter.stemmer("english"))
        .build()
    )


def _schema():
    t = _tantivy()
    sb = t.SchemaBuilder()
    sb.add_text_field("id", stored=True, tokenizer_name="raw", index_option="basic")
    sb.add_text_field("title", stored=True, tokenizer_name=ANALYZER, index_option="freq")
    sb.add_text_field("text", stored=True, tokenizer_name=ANALYZER, index_option="freq")
    return sb.build()


#: tantivy's word when a segment write fails in its worker thread: the OS error stays in the thread
_WORKER_DIED = "index writer was killed"


def _io_failure(e: BaseException) -> bool:
    """A write the file system refused, as Python or tantivy ("... (os error 28)") reports it; a corpus
    file that cannot be read, a corpus error or a bad passage is not one and keeps its own message."""
    return refused_write(e) is not None or _WORKER_DIED in str(e)


def _write_failure(path: Path, e: BaseException) -> str:
    """What a refused index write says: tantivy's text, and where its worker thread hid the cause
    ("An index writer was killed ... (io::Error most likely)": a full disk named neither), the disk's room."""
    if _WORKER_DIED not in str(e):
        return first_line(e)
    free = shutil.disk_usage(next(p for p in (path, *path.parents) if p.exists())).free
    return (f"tantivy's writer thread stopped on a refused write: a full disk, a quota or a file-size limit; "
            f"{free / 1e6:,.1f} MB free there")


def _restore(path: Path, before: set, kept: dict[str, bytes]) -> None:
    """An index folder as it was: the files a failed write added removed, the rewritten ones put back."""
    for name in set(os.listdir(path)) - before:
        f = path / name
        shutil.rmtree(f, ignore_errors=True) if f.is_dir() else f.unlink(missing_ok=True)
    for name, data in kept.items():
        (path / name).write_bytes(data)


def _remove_dir(path: Path, tries: int = 5) -> None:
    """Remove a folder tantivy has had open, and make sure it is gone: its threads (a reader's meta-file
    watcher, a failed writer's workers) can put a file into the folder while ``rmtree`` empties it, so that
    the final ``rmdir`` fails "not empty" (silently, under ``ignore_errors``) and a stray ``.building-``
    folder stayed beside the index. Each try removes what the last one left."""
    for i in range(tries):
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.lexists(path):
            return
        time.sleep(0.05 * (i + 1))


@contextmanager
def _guard(path, what: str):
    """tantivy signals damaged files with a Rust panic (``PanicException``, a ``BaseException``) or
    ValueError/OSError variants: turn any of them into a one-line :class:`SearchError`. Rust's panic hook
    writes its own text to file descriptor 2 before Python sees the exception; that text is held back and
    dropped when the call panicked (replayed when it did not), so the one line is all a user sees."""
    with _held_stderr() as held:
        try:
            yield
        except (KeyboardInterrupt, SystemExit, GeneratorExit, SearchError):
            raise
        except BaseException as e:  # noqa: BLE001 - PanicException derives from BaseException
            held.drop = True
            msg = first_line(e)
            raise SearchError(f"{path}: {what} failed, the index looks damaged ({msg}); run `seakr index info --verify`") from None


_HOLD_LOCK = threading.Lock()  # descriptor 2 is one per process: one holder at a time
_HOLD_FILE = None


@contextmanager
def _held_stderr():
    """File descriptor 2 sent to a scratch file for the duration; what it caught is written to the real
    descriptor afterwards unless ``drop`` was set. Cheap (two dup2 calls on a file opened once); other
    threads' stderr lines of that moment come out a little later, not lost."""
    global _HOLD_FILE
    from types import SimpleNamespace

    state = SimpleNamespace(drop=False)
    with _HOLD_LOCK:
        try:
            saved = os.dup(2)
        except OSError:  # no descriptor 2 (a detached process): nothing to hold back
            yield state
            return
        if _HOLD_FILE is None:
            import tempfile

            _HOLD_FILE = tempfile.TemporaryFile()
            atexit.register(_HOLD_FILE.close)  # else "ResourceWarning: unclosed file" at every exit under -X dev
        _HOLD_FILE.seek(0)
        _HOLD_FILE.truncate()
        os.dup2(_HOLD_FILE.fileno(), 2)
        try:
            yield state
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if not state.drop and _HOLD_FILE.tell():
                _HOLD_FILE.seek(0)
                os.write(2, _HOLD_FILE.read())


def file_digests(path: Path) -> dict[str, str]:
    """sha256 of every file of an index directory except the manifest (what ``verify`` re-checks)."""
    out = {}
    for f in sorted(path.iterdir()):
        if f.is_file() and f.name != MANIFEST and not f.name.endswith(".lock"):
            h = hashlib.sha256()
            with open(f, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            out[f.name] = h.hexdigest()
    return out


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_orphans(out: Path) -> list[Path]:
    """Temporary directories of builds into ``out`` whose process is gone (killed mid-build)."""
    gone = []
    for d in out.parent.glob(f".{out.name}.*-*"):
        kind, _, pid = d.name[len(out.name) + 2:].rpartition("-")
        if kind in ("building", "old") and pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
            shutil.rmtree(d, ignore_errors=True)
            gone.append(d)
    return gone


def check_replaceable(out: Path) -> None:
    """``--overwrite`` replaces a seakr index and nothing else: the folder must hold a valid manifest, and
    every entry in it must be a file that manifest records (or a lock); anything else (a user's file, a
    sub-folder, the corpus itself) is named and the folder left alone."""
    if out.is_symlink():  # was "exists and is not a directory", said of a link to an index folder
        raise SearchError(f"{out}: a link (to {os.path.realpath(out)}); an index is built beside its folder and moved "
                          f"into place, which would replace the link, not what it points to: give --out "
                          f"{os.path.realpath(out)}")
    if out.exists() and not out.is_dir():
        raise SearchError(f"{out}: exists and is not a directory; refusing to replace it with an index")
    if not out.is_dir() or not any(out.iterdir()):
        return
    mpath = out / MANIFEST
    if not mpath.is_file():
        raise SearchError(f"{out}: not a seakr index (no {MANIFEST}); refusing to delete it, choose another --out")
    try:
        m = read_manifest(out)
    except (OSError, SearchError):
        m = None
    if not isinstance(m, dict) or m.get("format") != FORMAT or not isinstance(m.get("files"), dict):
        raise SearchError(f"{mpath}: not a valid {FORMAT} manifest (with its recorded files); refusing to delete {out}")
    own = set(m["files"]) | {MANIFEST, MANIFEST + ".tmp"}
    foreign = sorted(f.name for f in out.iterdir() if f.name not in own and not (f.is_file() and f.name.endswith(".lock")))
    if foreign:
        more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
        raise SearchError(f"{out}: holds {foreign[0]!r}{more}, not part of the index its manifest records; refusing to "
                          "delete it (move it out, or choose another --out)")


def read_manifest(path: Path) -> dict:
    """An index's manifest, or one line naming it: not UTF-8, not JSON, or JSON of another shape (a list or a
    string there was an AttributeError; bytes from another tool a bare codec error naming no file)."""
    mpath = path / MANIFEST
    try:
        m = loads(mpath.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise SearchError(f"{mpath}: corrupt manifest (not UTF-8 text)") from None
    except json.JSONDecodeError as e:
        raise SearchError(f"{mpath}: corrupt manifest ({e.msg})") from None
    if not isinstance(m, dict) or not isinstance(m.get("files", {}), dict):
        raise SearchError(f"{mpath}: corrupt manifest (expected a JSON object with the index's files)")
    _check_manifest_fields(mpath, m)
    return m


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


#: What an add updates in place: checked when the manifest is read, since a field of another shape failed
#: only after the passages were written (``"checksum": 5`` left new segments the manifest did not list:
#: the next open called the index damaged).
MANIFEST_FIELDS = {
    "checksum": (lambda v: isinstance(v, str) and len(v) == 64 and all(c in "0123456789abcdef" for c in v),
                 "64 hex digits"),
    "doc_count": (_count, "a whole number >= 0"),
    "duplicates_skipped": (lambda v: v is None or _count(v), "a whole number >= 0"),
    "empty_skipped": (lambda v: v is None or _count(v), "a whole number >= 0"),
    "sources": (lambda v: v is None or isinstance(v, list) and all(isinstance(x, str) for x in v), "a list of file names"),
}


def _check_manifest_fields(mpath: Path, m: dict) -> None:
    for name, (ok, want) in MANIFEST_FIELDS.items():
        if not ok(m.get(name)):
            raise SearchError(f"{mpath}: corrupt manifest (field '{name}' should be {want}, got "
                              f"{json.dumps(m.get(name))[:40]})")


def _manifest(t, stats: dict, sources: Sequence[str], folder: Path) -> dict:
    """What a built index records of itself: engine, analyzer, scoring, counts, sources and its files' digests."""
    return {
        "format": FORMAT,
        "engine": "tantivy",
        "tantivy": getattr(t, "__version__", ""),
        "analyzer": {"tokenizer": "simple", "filters": ["lowercase", "lucene_english_stop+s", "stemmer_english"],
                     "stopwords": list(STOPWORDS)},
        "bm25": {"k1": BM25_K1, "b": BM25_B, "scale": "elasticsearch (k1+1 numerator)"},
        "query": {"type": "multi_match best_fields", "fields": ["title", "text"], "tie_breaker": TIE_BREAKER},
        "doc_count": stats["added"],
        "duplicates_skipped": stats["duplicates"],
        "empty_skipped": stats["empty"],
        "long_passages": stats["long"],
        "longest_passage": stats["longest"],
        "checksum": format(stats["checksum"], "064x"),
        "sources": list(sources),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "build_seconds": round(stats["seconds"], 2),
        "files": file_digests(folder),
    }


def _utf8(path: Path) -> str:
    """The path as tantivy (Rust) takes it: UTF-8 text. A name of other bytes (a Latin-1 folder name) reaches
    Python as surrogates, and tantivy refused it with "surrogates not allowed", naming nothing."""
    text = str(path)
    if not encodable(text):
        raise SearchError(f"{text}: a path that is not UTF-8 text, which the index engine cannot take; rename the "
                          "folder or choose another")
    return text


def _missing_folders(folder: Path) -> list[Path]:
    """``folder`` and its ancestors that do not exist yet, innermost first."""
    made = []
    while not folder.exists() and folder != folder.parent:
        made.append(folder)
        folder = folder.parent
    return made


def _remove_empty(folders: list[Path]) -> None:
    """Remove the folders (innermost first) while they are empty: what a failed build made and left unused."""
    for f in folders:
        try:
            f.rmdir()
        except OSError:
            return


def doc_digest(p: Passage) -> int:
    return int.from_bytes(hashlib.sha256(f"{p.id}\x1f{p.title}\x1f{p.text}".encode()).digest(), "big")


class TantivyEngine:
    """Open an index built by :meth:`build`. ``search`` returns the top-k passages, best first."""

    def __init__(self, path: str | os.PathLike, check: bool = True):
        """``check``: compare every file with the sha256 its build recorded before opening (a damaged
        index is refused, never searched with another ranking); reading the files costs about what the
        operating system's cache will read for the first searches anyway."""
        self.path = Path(given_path(path, "index", "index folder"))
        mpath = self.path / MANIFEST
        if not self.path.is_dir():
            what = "a file, not a folder" if self.path.exists() else "no such folder"  # a typo, not a missing build
            raise SearchError(f"{self.path}: no index here ({what}; build one with `seakr index build`)")
        _utf8(self.path)
        if not mpath.exists():
            raise SearchError(f"{self.path}: not a seakr index (no {MANIFEST})")
        self.manifest = read_manifest(self.path)
        if self.manifest.get("format") != FORMAT:
            raise SearchError(f"{self.path}: foreign index format {self.manifest.get('format')!r} (expected {FORMAT})")
        if check:
            try:
                self.check_files(self.path)
            except SearchError:
                self._being_written()
                raise
        t = _tantivy()
        with _guard(self.path, "opening the corrupt tantivy index"):
            self.index = t.Index.open(str(self.path))  # UTF-8: checked above
            self.index.register_tokenizer(ANALYZER, analyzer())
            self._an = analyzer()
            self.schema = self.index.schema
            self.index.reload()
            n = self.index.searcher().num_docs
        if n != self.manifest["doc_count"]:
            self._being_written()
            raise SearchError(
                f"{self.path}: index holds {n} documents but its manifest says {self.manifest['doc_count']} "
                "(an interrupted add?); rebuild it"
            )

    # ------------------------------------------------------------------ build
    @classmethod
    def build(cls, passages: Iterable[Passage], out: str | os.PathLike, *, overwrite: bool = False,
              sources: Sequence[str] = (), heap_mb: int = 512, threads: int | None = None,
              progress=None) -> "TantivyEngine":
        """Stream ``passages`` into a new index at ``out`` (atomically: tmp dir + rename). ``threads``
        writers (default: up to 4) share the passages out into as many segments by timing, so the
        files differ from build to build (the ranking does not); ``threads=1`` writes one segment, the same one every time (under a new name)."""
        check_many(passages, "build")  # one Passage failed mid-build
        out = Path(os.path.abspath(given_path(out, "out", "index folder")))  # "." or "idx/" name no sibling temp
        _utf8(out)
        if out.exists() and not overwrite:
            raise SearchError(f"{out}: already exists (pass overwrite / --overwrite to replace it)")
        check_replaceable(out)
        made = _missing_folders(out.parent)
        tmp = out.parent / f".{out.name}.building-{os.getpid()}"
        try:  # the index is built beside its place and moved there: both folders must be makeable
            out.parent.mkdir(parents=True, exist_ok=True)
            remove_orphans(out)
            _remove_dir(tmp)  # one a failed build of this process could not remove
            tmp.mkdir()
        except OSError as e:
            raise folder_error(out, e, "the index folder") from None
        try:
            t = _tantivy()
            index = t.Index(_schema(), path=str(tmp))  # UTF-8 as out is, checked above
            index.register_tokenizer(ANALYZER, analyzer())
            stats = _write(index, passages, set(), heap_mb, progress, threads)
            if not stats["added"]:  # an index that can find nothing is a mistake (an empty file, a wrong field)
                raise SearchError(f"{out}: no passage to index ({stats['empty']} with empty text, "
                                  f"{stats['duplicates']} duplicate ids); nothing was written")
            (tmp / MANIFEST).write_text(json.dumps(_manifest(t, stats, sources, tmp), indent=2), encoding="utf-8")
            if out.exists():  # checked again: two builds to one new folder each replaced the other, both "built"
                if not overwrite:
                    raise SearchError(f"{out}: another build made it while this one ran; this one was not kept "
                                      "(pass overwrite / --overwrite to replace it)")
                check_replaceable(out)
                old = out.parent / f".{out.name}.old-{os.getpid()}"
                os.rename(out, old)
                os.rename(tmp, out)
                _remove_dir(old)
            else:
                os.rename(tmp, out)
        except BaseException as e:
            # the failed write's frames hold the index and its writer (threads that may still write into tmp):
            # let them go before the folder is removed
            index = None  # noqa: F841
            traceback.clear_frames(e.__traceback__)
            _remove_dir(tmp)
            _remove_empty(made)  # a refused build left the folders it had made for --out
            if _io_failure(e):  # tantivy's "Internal error: 'No space left on device (os error 28)'" named no folder
                raise SearchError(f"{out}: the index could not be written ({_write_failure(out, e)}); nothing was "
                                  "kept") from None
            raise
        return cls(out)

    def _being_written(self) -> None:
        """An index whose files are mid-add in another process differs from its manifest: say so, rather
        than call it damaged (the advice to rebuild would throw away a good index)."""
        pid = holder(self.path, WRITER)
        if pid is not None:
            raise SearchError(f"{self.path}: another process (pid {pid}) is adding to this index; open it when "
                              "that add ends")

    def add(self, passages: Iterable[Passage], progress=None, sources: Sequence[str] = ()) -> dict:
        """Incremental add; ids already in the index are skipped (first occurrence wins). One process adds at a
        time: a second is refused at once (two at once had failed with tantivy's "LockBusy" or left the second
        reading the first's half-written files as a damaged index)."""
        def busy(pid: str) -> SearchError:
            return SearchError(f"{self.path}: another process (pid {pid}) is adding to this index; run this add "
                               "when that one ends")

        with FolderLock(self.path, WRITER, busy):
            fresh = read_manifest(self.path)
            if fresh != self.manifest:  # another add ended since this index was opened: add on top of it
                self.manifest = fresh
                self.index.reload()
            return self._add(passages, progress, sources)

    def _add(self, passages: Iterable[Passage], progress, sources: Sequence[str]) -> dict:
        searcher = self.index.searcher()
        known = _KnownIds(searcher)
        # tantivy rewrites only its two small metadata files in place (segments are new files): kept here, a
        # write the disk refuses is undone whole (its stray segments and rewritten metadata had made the
        # next open report a damaged index)
        before = set(os.listdir(self.path))
        kept = {n: (self.path / n).read_bytes() for n in ("meta.json", ".managed.json") if (self.path / n).is_file()}
        try:  # the segments and the manifest that lists them, or neither (a manifest write that failed
            # after the segments had been written left an index the next open called damaged)
            stats = _write(self.index, passages, known, 256, progress)
            m = dict(self.manifest)
            m["doc_count"] += stats["added"]
            m["duplicates_skipped"] = (m.get("duplicates_skipped") or 0) + stats["duplicates"]
            if "long_passages" in m:  # an index built before these were recorded keeps them unknown
                m["long_passages"] += stats["long"]
            if isinstance(m.get("longest_passage"), dict):
                m["longest_passage"] = max(m["longest_passage"], stats["longest"], key=lambda x: x["chars"])
            m["checksum"] = format((int(m["checksum"], 16) + stats["checksum"]) % _MOD, "064x")
            m["sources"] = list(m.get("sources") or []) + list(sources)
            m["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S")
            m["files"] = file_digests(self.path)
            tmp = self.path / (MANIFEST + ".tmp")
            tmp.write_text(json.dumps(m, indent=2), encoding="utf-8")
            os.replace(tmp, self.path / MANIFEST)
        except BaseException as e:
            _restore(self.path, before, kept)
            if _io_failure(e):
                raise SearchError(f"{self.path}: adding to the index failed ({_write_failure(self.path, e)}); it holds "
                                  "what it had") from None
            raise
        self.manifest = m
        self.index.reload()
        return stats

    # ------------------------------------------------------------------ query
    def _query(self, text: str):
        t = _tantivy()
        terms = self._an.analyze(text)
        if not terms:
            return None
        per_field = []
        for field in ("title", "text"):
            per_field.append(t.Query.boolean_query(
                [(t.Occur.Should, t.Query.term_query(self.schema, field, term, index_option="freq")) for term in terms]
            ))
        return t.Query.disjunction_max_query(per_field, tie_breaker=TIE_BREAKER)

    def search(self, query: str, k: int = 3) -> list[Passage]:
        # never more than the index holds: tantivy takes k as a u32, and k >= 2**32 aborts the process
        query, k = check_search(query, k)
        k = min(k, self.count())
        q = self._query(query)
        if q is None or k <= 0:
            return []
        out = []
        with _guard(self.path, "search"):
            searcher = self.index.searcher()
            for score, addr in searcher.search(q, k, count=False).hits:
                out.append(_passage_of(searcher.doc(addr), float(score)))
        return out

    def passage(self, pid: str) -> Passage | None:
        """The passage of id ``pid``, or None where the index holds none."""
        if not isinstance(pid, str):
            raise TypeError(f"a passage id is text, got {type(pid).__name__}")
        if not encodable(pid):  # no passage is indexed under half a surrogate pair (check_passage refuses it)
            return None
        t = _tantivy()
        with _guard(self.path, "search"):
            searcher = self.index.searcher()
            hits = searcher.search(t.Query.term_query(self.schema, "id", pid), 1, count=False).hits
            if not hits:
                return None
            return _passage_of(searcher.doc(hits[0][1]))

    #: Passages an index built before its longest passage was recorded may hold to be read through for it
    #: (the 10,033-passage demo index took 0.06 s; beyond this the caller keeps its own figure).
    SCAN_FOR_LONGEST = 1_000_000

    def longest_passage(self) -> Passage | None:
        """The index's longest passage in characters: recorded by the build and every add, or read once from an
        index built before that was recorded (up to SCAN_FOR_LONGEST passages; None beyond)."""
        known = self.manifest.get("longest_passage")
        if isinstance(known, dict) and isinstance(known.get("id"), str):
            return self.passage(known["id"])
        if self.count() > self.SCAN_FOR_LONGEST:
            return None
        with _guard(self.path, "search"):
            searcher = self.index.searcher()
            docs = (searcher.doc(addr) for _, addr in searcher.search(_tantivy().Query.all_query(), self.count(),
                                                                       count=False).hits)
            d = max(docs, key=lambda d: len(d.get_first("text") or ""), default=None)
        return _passage_of(d) if d is not None else None

    def search_many(self, queries: Sequence[str], k: int = 3) -> list[list[Passage]]:
        # tantivy's search holds the GIL: threads would not help (docs/design-notes.md §2.3).
        return [self.search(q, k) for q in queries]

    def count(self) -> int:
        return int(self.manifest["doc_count"])

    def metadata(self) -> dict:
        m = {k: v for k, v in self.manifest.items() if k not in ("sources", "files")}
        m["files"] = len(self.manifest.get("files", {}))
        m["path"] = str(self.path)
        m["sources"] = self.manifest.get("sources", [])
        return m

    @staticmethod
    def check_files(path: str | os.PathLike) -> None:
        """Every file of the index against the sha256 its build recorded; works on an index too damaged
        to open. Indexes built before per-file digests existed pass."""
        path = Path(path)
        try:
            want = read_manifest(path).get("files")
        except OSError as e:
            raise SearchError(f"{path}: no readable {MANIFEST} ({e.strerror})") from None
        if want is not None:
            have = file_digests(path)
            bad = sorted(n for n in set(want) | set(have) if want.get(n) != have.get(n))
            if bad:
                raise SearchError(f"{path}: {len(bad)} index file(s) differ from the build: {', '.join(bad[:5])}; "
                                  "the index is damaged: rebuild it")

    def verify(self) -> bool:
        """:meth:`check_files`, then recompute the checksum over every stored document (slow on big indexes)."""
        self.check_files(self.path)
        t = _tantivy()
        total = 0
        with _guard(self.path, "reading every document"):
            searcher = self.index.searcher()
            n = searcher.num_docs
            hits = searcher.search(t.Query.all_query(), n, count=False).hits if n else []
            for _, addr in hits:
                d = searcher.doc(addr)
                total = (total + doc_digest(Passage(d["id"][0], d.get_first("title") or "", d.get_first("text") or ""))) % _MOD
        if format(total, "064x") != self.manifest["checksum"]:
            raise SearchError(f"{self.path}: checksum mismatch: the stored documents differ from the manifest")
        return True


class _KnownIds:
    """Membership test against an existing index (for incremental adds), plus ids seen in this add."""

    def __init__(self, searcher):
        self.searcher, self.new = searcher, set()

    def __contains__(self, pid):
        return pid in self.new or self.searcher.doc_freq("id", pid) > 0

    def add(self, pid):
        self.new.add(pid)


def _passage_of(doc, score: float = 0.0) -> Passage:
    """A stored tantivy document as the passage it was built from."""
    return Passage(doc["id"][0], doc.get_first("title") or "", doc.get_first("text") or "", score)


def _write(index, passages, seen, heap_mb, progress, threads=None) -> dict:
    t = _tantivy()
    t0 = time.time()
    threads = threads or min(4, os.cpu_count() or 1)
    writer = index.writer(heap_size=heap_mb * 1_000_000, num_threads=threads)
    took, checksum = Intake(seen), 0
    try:
        for batch in iter_batches(passages, 5000):
            for p in filter(took.take, batch):
                writer.add_document(t.Document(id=p.id, title=p.title, text=p.text))
                checksum = (checksum + doc_digest(p)) % _MOD
            if progress:
                progress(len(batch))
        writer.commit()
        writer.wait_merging_threads()
    except BaseException:
        try:
            writer.rollback()
        except Exception:
            pass
        raise
    return {"added": took.taken, "duplicates": took.duplicates, "empty": took.empty, "long": took.long,
            "checksum": checksum, "longest": took.longest or {"id": "", "chars": 0}, "seconds": time.time() - t0}
