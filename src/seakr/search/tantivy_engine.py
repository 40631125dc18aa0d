"""Embedded BM25 over an on-disk tantivy index, built to match the paper's Elasticsearch setup.

Match with ES 7.17 (docs/design-notes.md §2): tantivy's BM25 is Lucene's with the ``k1+1`` factor ES keeps
(k1=1.2, b=0.75 fixed, doc lengths quantised the same way), so scores are the numbers ES reports. Fields
``title`` and ``text`` are analysed like ES's ``english`` analyzer: split on non-alphanumerics, lower-case,
Lucene's 33 English stop words (+ "s", standing in for the possessive filter), English stemming. Differences we
accept and state: tantivy's stemmer is Snowball English (Porter2) where ES uses the original Porter, and its
tokenizer splits on every non-alphanumeric character ("1,234" -> "1", "234"). The query is ES's ``multi_match``
best_fields: a disjunction-max over the two fields' term disjunctions with tie-breaker 0.5.

Integrity: every write makes a new generation and switches to it atomically (search/generations.py); the manifest
records the document count (checked on opening) and an order-independent checksum (``verify()``)."""

from __future__ import annotations

import hashlib
import os
import time
import traceback
import uuid
from pathlib import Path
from typing import Iterable, Sequence

from ..common.checks import encodable
from ..common.files import given_path
from ..common.runs import MANIFEST
from ..common.writing import folder_error, missing_folders, remove_empty
from ..locks import FolderLock, holder
from .failures import guard, io_failure, write_failure
from .base import (BM25_B, BM25_K1, LUCENE_ENGLISH_STOPWORDS, TIE_BREAKER, Intake, Passage, SearchError, check_many,
                   check_search, iter_batches)
from .generations import (added, data_folder, file_digests, mark, new_generation, next_generation,
                          read_manifest, readable_copy, remove_orphans, remove_tree, retire, sweep,
                          writable, write_manifest)

FORMAT = "seakr-tantivy/2"  # generations (search/generations.py)
FORMATS = ("seakr-tantivy/1", FORMAT)  # /1: the index's files at the top of its folder; opened as before
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
    sb.add_unsigned_field("ord", stored=True, indexed=False)  # document order: ties in score are broken by it
    return sb.build()


def check_replaceable(out: Path) -> dict | None:
    """What ``--overwrite`` may build a new generation into: nothing there yet or an empty folder (None), or a seakr
    index (its manifest). Any other folder is refused: an index is not written among files it does not know. A new
    generation never deletes a file: what the folder holds beside the index stays."""
    if out.exists() and not out.is_dir():
        raise SearchError(f"{out}: exists and is not a directory; refusing to replace it with an index")
    if not out.is_dir() or not any(out.iterdir()):
        return None
    mpath = out / MANIFEST
    if not mpath.is_file():
        raise SearchError(f"{out}: not a seakr index (no {MANIFEST}); refusing to write an index among its files, "
                          "choose another --out")
    try:
        m = read_manifest(out)
    except (OSError, SearchError):
        m = None
    if not isinstance(m, dict) or m.get("format") not in FORMATS or not isinstance(m.get("files"), dict):
        raise SearchError(f"{mpath}: not a valid {FORMAT} manifest (with its recorded files); refusing to replace "
                          f"{out}")
    return m


def _manifest(t, stats: dict, sources: Sequence[str], gen: Path, uid: str) -> dict:
    """What a built index records of itself: engine, analyzer, scoring, counts, sources, and its current generation
    with its files' digests."""
    return {
        "format": FORMAT,
        "uid": uid,
        "generation": gen.name,
        "engine": "tantivy",
        "tantivy": getattr(t, "__version__", ""),
        "analyzer": {"tokenizer": "simple", "filters": ["lowercase", "lucene_english_stop+s", "stemmer_english"],
                     "stopwords": list(STOPWORDS)},
        "bm25": {"k1": BM25_K1, "b": BM25_B, "scale": "elasticsearch (k1+1 numerator)"},
        "query": {"type": "multi_match best_fields", "fields": ["title", "text"], "tie_breaker": TIE_BREAKER},
        "doc_count": stats["added"],
        "ordered": True,  # each passage stores its document order (ties in score are broken by it)
        "duplicates_skipped": stats["duplicates"],
        "empty_skipped": stats["empty"],
        "long_passages": stats["long"],
        "longest_passage": stats["longest"],
        "checksum": format(stats["checksum"], "064x"),
        "sources": list(sources),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "build_seconds": round(stats["seconds"], 2),
        "files": file_digests(gen),
    }


def _utf8(path: Path) -> str:
    """The path as tantivy (Rust) takes it: UTF-8 text. A name of other bytes (a Latin-1 folder name) reaches
    Python as surrogates, and tantivy refused it with "surrogates not allowed", naming nothing."""
    text = str(path)
    if not encodable(text):
        raise SearchError(f"{text}: a path that is not UTF-8 text, which the index engine cannot take; rename the "
                          "folder or choose another")
    return text


def _busy(path: Path):
    return lambda pid: SearchError(f"{path}: another process (pid {pid}) is writing to this index; run this when "
                                   "it ends")


def _refused(out: Path, e: BaseException) -> SearchError:
    # tantivy's "Internal error: 'No space left on device (os error 28)'" named no folder
    return SearchError(f"{out}: the index could not be written ({write_failure(out, e)}); nothing was kept")


def _fill(gen: Path, passages, sources, heap_mb, threads, progress, out: Path, uid: str) -> dict:
    """The passages written into the generation folder ``gen``; the manifest that records it."""
    t = _tantivy()
    index = t.Index(_schema(), path=str(gen))  # UTF-8 as out is, checked by build
    index.register_tokenizer(ANALYZER, analyzer())
    stats = _write(index, passages, set(), heap_mb, progress, threads, first=0)
    if not stats["added"]:  # an index that can find nothing is a mistake (an empty file, a wrong field)
        raise SearchError(f"{out}: no passage to index ({stats['empty']} with empty text, "
                          f"{stats['duplicates']} duplicate ids); nothing was written")
    return _manifest(t, stats, sources, gen, uid)


def _adopt(out: Path, gen: Path, manifest: dict) -> None:
    """A generation built beside ``out`` made ``out``'s next one (another build made ``out`` meanwhile, and this
    one was asked to overwrite): moved in under the next name and this index's id, then switched to."""
    with FolderLock(out, WRITER, _busy(out)):
        old = check_replaceable(out)
        uid = old.get("uid") or manifest["uid"]
        moved = next_generation(out, old)
        os.rename(gen, moved)
        mark(moved, uid)
        new = manifest | {"uid": uid, "generation": moved.name}
        write_manifest(out, new)
        _retire(out, old, new)


def _retire(folder: Path, old: dict, new: dict) -> None:
    """After a switch: the old data's files that its manifest records as ours (:func:`generations.retire`). Best
    effort: a file held open elsewhere (Windows) stays, and a generation left behind is the next writer's sweep."""
    try:
        retire(data_folder(folder, old), old.get("files") or {}, data_folder(folder, new), new["files"])
    except OSError:
        pass


def doc_digest(p: Passage) -> int:
    return int.from_bytes(hashlib.sha256(f"{p.id}\x1f{p.title}\x1f{p.text}".encode()).digest(), "big")


class TantivyEngine:
    """Open an index built by :meth:`build`. ``search`` returns the top-k passages, best first."""

    def __init__(self, path: str | os.PathLike, check: bool = True):
        """``check``: compare every file of the current generation with the sha256 its build recorded before
        opening (a damaged index is refused, never searched with another ranking); reading the files costs about
        what the operating system's cache will read for the first searches anyway. Files the manifest does not
        record are not read."""
        self.path = Path(given_path(path, "index", "index folder"))
        mpath = self.path / MANIFEST
        if not self.path.is_dir():
            what = "a file, not a folder" if self.path.exists() else "no such folder"  # a typo, not a missing build
            raise SearchError(f"{self.path}: no index here ({what}; build one with `seakr index build`)")
        _utf8(self.path)
        if not mpath.exists():
            raise SearchError(f"{self.path}: not a seakr index (no {MANIFEST})")
        self.manifest = read_manifest(self.path)
        if self.manifest.get("format") not in FORMATS:
            raise SearchError(f"{self.path}: foreign index format {self.manifest.get('format')!r} (expected {FORMAT})")
        if check:
            try:
                self.check_files(self.path)
            except SearchError:
                self._being_written()
                raise
        self._open(data_folder(self.path, self.manifest))

    def _open(self, files: Path) -> None:
        """tantivy's index over the generation ``files`` (through a folder of links where it cannot be written:
        tantivy makes lock files where it opens)."""
        t = _tantivy()
        self.files = files
        with guard(self.path, "opening the corrupt tantivy index"):
            self.index = t.Index.open(str(files if writable(files) else readable_copy(files)))  # UTF-8: checked
            self.index.register_tokenizer(ANALYZER, analyzer())
            self._an = analyzer()
            self.schema = self.index.schema
            self.index.reload()
            n = self.index.searcher().num_docs
        if n != self.manifest["doc_count"]:
            self._being_written()
            raise SearchError(
                f"{self.path}: index holds {n} documents but its manifest says {self.manifest['doc_count']} "
                "(an interrupted add of the first index layout?); rebuild it"
            )

    # ------------------------------------------------------------------ build
    @classmethod
    def build(cls, passages: Iterable[Passage], out: str | os.PathLike, *, overwrite: bool = False,
              sources: Sequence[str] = (), heap_mb: int = 512, threads: int | None = None,
              progress=None) -> "TantivyEngine":
        """Stream ``passages`` into a new index at ``out``: a new folder is built beside its place and moved there;
        over an index (``overwrite``) the passages become a new generation, switched to when whole (the old one is
        read until then, and nothing but the old generation is removed). ``threads`` writers (default: up to 4)
        share the passages out into as many segments by timing, so the files differ from build to build (the
        ranking does not); ``threads=1`` writes one segment, the same one every time (under a new name)."""
        check_many(passages, "build")  # one Passage failed mid-build
        out = Path(os.path.abspath(given_path(out, "out", "index folder")))  # "." or "idx/" name no sibling temp
        _utf8(out)
        if out.exists() and not out.is_dir():  # a file or a device: --overwrite would not make it a folder
            raise SearchError(f"{out}: exists and is not a directory; an index is a folder: choose another --out")
        if out.exists() and not overwrite:
            raise SearchError(f"{out}: already exists (pass overwrite / --overwrite to replace it)")
        old = check_replaceable(out)
        if old is not None:
            with FolderLock(out, WRITER, _busy(out)):
                return cls._regenerate(out, passages, sources, heap_mb, threads, progress)
        return cls._first_build(out, passages, sources, heap_mb, threads, progress, overwrite)

    @classmethod
    def _first_build(cls, out, passages, sources, heap_mb, threads, progress, overwrite) -> "TantivyEngine":
        made = missing_folders(out.parent)
        tmp = out.parent / f".{out.name}.building-{os.getpid()}"
        try:  # the index is built beside its place and moved there: both folders must be makeable
            out.parent.mkdir(parents=True, exist_ok=True)
            remove_orphans(out)
            remove_tree(tmp)  # one a failed build of this process could not remove
            tmp.mkdir()
        except OSError as e:
            raise folder_error(out, e, "the index folder") from None
        try:
            uid = uuid.uuid4().hex
            gen = new_generation(tmp, None, uid)
            manifest = _fill(gen, passages, sources, heap_mb, threads, progress, out, uid)
            write_manifest(tmp, manifest)
            if out.exists() and any(out.iterdir()):  # two builds to one new folder: the first keeps it
                if not overwrite:
                    raise SearchError(f"{out}: another build made it while this one ran; this one was not kept "
                                      "(pass overwrite / --overwrite to build a new generation over it)")
                _adopt(out, gen, manifest)
                remove_tree(tmp)
            else:
                os.rename(tmp, out)  # over nothing, or over an empty folder
        except BaseException as e:
            traceback.clear_frames(e.__traceback__)  # its frames hold the index and its writer's threads
            remove_tree(tmp)
            remove_empty(made)  # a refused build leaves no folder it made for --out
            if io_failure(e):
                raise _refused(out, e) from None
            raise
        return cls(out)

    @classmethod
    def _regenerate(cls, out, passages, sources, heap_mb, threads, progress) -> "TantivyEngine":
        """``--overwrite`` over an index: a new generation from the passages alone, then the switch."""
        old = check_replaceable(out)  # read again under the writer's lock
        sweep(out, old)
        uid = old.get("uid") or uuid.uuid4().hex
        gen = new_generation(out, old, uid)
        try:
            manifest = _fill(gen, passages, sources, heap_mb, threads, progress, out, uid)
            write_manifest(out, manifest)
        except BaseException as e:
            traceback.clear_frames(e.__traceback__)
            remove_tree(gen)
            if io_failure(e):
                raise _refused(out, e) from None
            raise
        _retire(out, old, manifest)
        return cls(out)

    @staticmethod
    def sweep_stale(path: str | os.PathLike) -> list[Path]:
        """Remove the generations killed writers left in the index ``path`` (under the writer's lock)."""
        path = Path(path)
        with FolderLock(path, WRITER, _busy(path)):
            return sweep(path, read_manifest(path))

    def _being_written(self) -> None:
        """A first-layout index mid-add in another process differs from its manifest: said so, not "damaged"."""
        pid = holder(self.path, WRITER)
        if pid is not None:
            raise SearchError(f"{self.path}: another process (pid {pid}) is adding to this index; open it when "
                              "that add ends")

    def add(self, passages: Iterable[Passage], progress=None, sources: Sequence[str] = ()) -> dict:
        """Incremental add, as a new generation: the current one's files linked, the new passages written beside
        them, the manifest switched when the generation is whole. Ids already in the index are skipped (first
        occurrence wins). One process adds at a time: a second is refused at once."""
        with FolderLock(self.path, WRITER, _busy(self.path)):
            fresh = read_manifest(self.path)
            if fresh != self.manifest:  # another add ended since this index was opened: add on top of it
                self.manifest = fresh
                self._open(data_folder(self.path, fresh))
            sweep(self.path, fresh)  # what a killed writer left
            return self._add(passages, progress, sources)

    def _add(self, passages: Iterable[Passage], progress, sources: Sequence[str]) -> dict:
        old = self.manifest
        uid = old.get("uid") or uuid.uuid4().hex
        gen = new_generation(self.path, old, uid, base=self.files, names=list(old.get("files") or {}))
        try:
            t = _tantivy()
            index = t.Index.open(str(gen))
            index.register_tokenizer(ANALYZER, analyzer())
            index.reload()
            stats = _write(index, passages, _KnownIds(index.searcher()), 256, progress,
                           first=old["doc_count"] if old.get("ordered") else None)
            m = added(old, stats, sources) | {"format": FORMAT, "uid": uid, "generation": gen.name,
                                               "files": file_digests(gen)}
            write_manifest(self.path, m)
        except BaseException as e:
            index = None  # noqa: F841 - let go of its writer's threads before the folder goes
            traceback.clear_frames(e.__traceback__)
            remove_tree(gen)
            if io_failure(e):
                raise SearchError(f"{self.path}: adding to the index failed ({write_failure(self.path, e)}); it holds "
                                  "what it had") from None
            raise
        self.manifest = m
        self._open(gen)
        _retire(self.path, old, m)
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
        # tantivy picks among equal scores by the segments a build happened to write, which differ from build to
        # build: every hit tied with the k-th is read, and ties are broken by document order (the id, where the
        # index predates the stored order)
        with guard(self.path, "search"):
            searcher = self.index.searcher()
            more = k
            while True:
                hits = searcher.search(q, more, count=False).hits
                if len(hits) < more or more >= self.count() or hits[-1][0] < hits[k - 1][0]:
                    break
                more = min(self.count(), 2 * more + 10)
            ordered, out = self.manifest.get("ordered"), []
            for s, a in hits:
                d = searcher.doc(a)
                out.append((-float(s), d.get_first("ord") if ordered else 0, d["id"][0], d))
        out.sort(key=lambda x: x[:3])
        return [_passage_of(d, -s) for s, _, _, d in out[:k]]

    def passage(self, pid: str) -> Passage | None:
        """The passage of id ``pid``, or None where the index holds none."""
        if not isinstance(pid, str):
            raise TypeError(f"a passage id is text, got {type(pid).__name__}")
        if not encodable(pid):  # no passage is indexed under half a surrogate pair (check_passage refuses it)
            return None
        t = _tantivy()
        with guard(self.path, "search"):
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
        with guard(self.path, "search"):
            searcher = self.index.searcher()
            hits = searcher.search(_tantivy().Query.all_query(), self.count(), count=False).hits
            docs = (searcher.doc(addr) for _, addr in hits)
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
        """Every file the current generation records, against the sha256 its build recorded; works on an index too
        damaged to open. Other files are not the index's and are not read. Indexes built before per-file digests
        existed pass."""
        path = Path(path)
        try:
            m = read_manifest(path)
        except OSError as e:
            raise SearchError(f"{path}: no readable {MANIFEST} ({e.strerror})") from None
        want = m.get("files")
        if want is not None:
            data = data_folder(path, m)
            have = {}
            for name in want:
                try:
                    have.update(file_digests(data, [name]))
                except OSError:  # missing, or not a file
                    pass
            bad = sorted(n for n in want if want[n] != have.get(n))
            if bad:
                raise SearchError(f"{path}: {len(bad)} index file(s) differ from the build: {', '.join(bad[:5])}; "
                                  "the index is damaged: rebuild it (or `seakr index info --repair` for a cached "
                                  "corpus index)")

    def verify(self) -> bool:
        """:meth:`check_files`, then recompute the checksum over every stored document (slow on big indexes)."""
        self.check_files(self.path)
        t = _tantivy()
        total = 0
        with guard(self.path, "reading every document"):
            searcher = self.index.searcher()
            n = searcher.num_docs
            hits = searcher.search(t.Query.all_query(), n, count=False).hits if n else []
            for _, addr in hits:
                d = searcher.doc(addr)
                p = Passage(d["id"][0], d.get_first("title") or "", d.get_first("text") or "")
                total = (total + doc_digest(p)) % _MOD
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


def _write(index, passages, seen, heap_mb, progress, threads=None, first: int | None = None) -> dict:
    """``first``: the document order of the first passage taken (stored as ``ord``, which breaks ties between equal
    scores the same way in every build); None for an index built before it was stored."""
    t = _tantivy()
    t0 = time.time()
    threads = threads or min(4, os.cpu_count() or 1)
    writer = index.writer(heap_size=heap_mb * 1_000_000, num_threads=threads)
    took, checksum = Intake(seen), 0
    try:
        for batch in iter_batches(passages, 5000):
            for p in filter(took.take, batch):
                order = {} if first is None else {"ord": first + took.taken - 1}
                writer.add_document(t.Document(id=p.id, title=p.title, text=p.text, **order))
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
