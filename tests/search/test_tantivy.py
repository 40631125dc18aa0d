"""The embedded engine: build, search, reopen, incremental add, atomicity, corruption, BM25 parity."""

import json
import math
import os
import re
import subprocess
import sys
import time
from collections import Counter

import numpy as np
import pytest

from helpers import SEAKR_CLI, stalled_adder
from seakr.search import Passage, SearchError, open_engine
from seakr.search.corpora import read_corpus
from seakr.search.tantivy_engine import MANIFEST, TantivyEngine, analyzer

DOCS = [
    Passage("1", "Paris", "Paris is the capital and most populous city of France."),
    Passage("2", "Lyon", "Lyon is the third-largest city of France, on the Rhone."),
    Passage("3", "Berlin", "Berlin is the capital and largest city of Germany."),
    Passage("4", "France", "France is a country in Western Europe whose capital is Paris. Paris Paris."),
    Passage("5", "Seine", "The Seine is a river that flows through Paris to the English Channel."),
]


@pytest.fixture
def idx(tmp_path):
    return TantivyEngine.build(DOCS, tmp_path / "idx")


def test_build_search_reopen(idx, tmp_path):
    hits = idx.search("capital of France", 3)
    assert len(hits) == 3 and hits[0].score >= hits[1].score >= hits[2].score
    assert hits[0].id in {"1", "4"}
    again = open_engine(str(tmp_path / "idx"))
    assert [h.id for h in again.search("capital of France", 3)] == [h.id for h in hits]
    assert again.count() == 5 and again.verify()
    assert idx.search("the of and", 3) == []  # only stop words: nothing to match
    assert idx.search_many(["Berlin", "Seine river"], 1)[1][0].id == "5"


def _smallfloat_roundtrip(n):
    # Lucene's SmallFloat.intToByte4/byte4ToInt (document-length quantisation shared by tantivy).
    free = 24
    def long_to_int4(i):
        bits = i.bit_length()
        if bits < 4:
            return i
        shift = bits - 4
        return ((i >> shift) & 7) | ((shift + 1) << 3)
    def int4_to_long(i):
        bits, shift = i & 7, (i >> 3) - 1
        return bits if shift < 0 else (bits | 8) << shift
    if n < free:
        return n
    return free + int4_to_long(long_to_int4(n - free))


def test_bm25_scores_match_independent_lucene_formula_times_es_scale(idx):
    an = analyzer()
    fields = {f: [an.analyze(getattr(d, f)) for d in DOCS] for f in ("title", "text")}
    N = len(DOCS)

    def field_score(f, i, terms):
        toks = fields[f][i]
        avg = sum(len(t) for t in fields[f]) / N
        dl = _smallfloat_roundtrip(len(toks))
        tf = Counter(toks)
        s = 0.0
        for t in terms:
            n = sum(1 for d in fields[f] if t in d)
            if tf[t] == 0:
                continue
            idf = math.log(1 + (N - n + 0.5) / (n + 0.5))
            s += 2.2 * idf * tf[t] / (tf[t] + 1.2 * (1 - 0.75 + 0.75 * dl / avg))
        return s

    for q in ["capital of France", "Paris river", "largest city Germany"]:
        terms = an.analyze(q)
        expect = {}
        for i, d in enumerate(DOCS):
            a, b = field_score("title", i, terms), field_score("text", i, terms)
            if a or b:
                expect[d.id] = max(a, b) + 0.5 * min(a, b)  # dis_max, tie_breaker 0.5
        got = {h.id: h.score for h in idx.search(q, 10)}
        assert set(got) == set(expect)
        for k in got:
            assert got[k] == pytest.approx(expect[k], rel=1e-5), (q, k)


def test_incremental_add_skips_known_ids(idx):
    st = idx.add([Passage("6", "Rome", "Rome is the capital of Italy."), Passage("1", "dup", "ignored")])
    assert st["added"] == 1 and st["duplicates"] == 1
    assert idx.count() == 6 and idx.search("Italy", 1)[0].id == "6"
    assert TantivyEngine(idx.path).verify()


def test_duplicate_ids_first_wins_and_counted(tmp_path):
    e = TantivyEngine.build(DOCS + [Passage("1", "Other", "A different Paris text")], tmp_path / "d")
    assert e.count() == 5 and e.manifest["duplicates_skipped"] == 1


def test_the_longest_passage_is_recorded_and_found_by_its_id(tmp_path):
    """The service budgets a prompt's passages by the index's longest one: the build records it (a skipped
    duplicate's text does not count), an add raises it, and ``passage(id)`` reads it back."""
    long = "word " * 900
    e = TantivyEngine.build(DOCS + [Passage("1", "Again", long)], tmp_path / "l")
    assert e.manifest["longest_passage"] == {"id": max(DOCS, key=lambda p: len(p.text)).id,
                                             "chars": max(len(p.text) for p in DOCS)}
    assert e.passage("3").text == DOCS[2].text and e.passage("3").title == DOCS[2].title
    assert e.passage("missing") is None and e.passage("") is None and e.passage("\udc80") is None
    with pytest.raises(TypeError, match="a passage id is text, got int"):
        e.passage(3)
    e.add([Passage("x", "Long", long)])
    assert TantivyEngine(e.path).manifest["longest_passage"] == {"id": "x", "chars": len(long)}
    assert TantivyEngine(e.path).longest_passage().id == "x"
    m = json.loads((e.path / MANIFEST).read_text())  # an index built before it was recorded: unknown, not guessed
    del m["longest_passage"], m["long_passages"]
    (e.path / MANIFEST).write_text(json.dumps(m))
    old = TantivyEngine(e.path)
    old.add([Passage("y", "Longer", long + "word")])
    assert "longest_passage" not in old.manifest and "long_passages" not in old.manifest
    assert old.longest_passage().id == "y"  # read through once instead
    old.SCAN_FOR_LONGEST = 3  # a large old index is not read through: the caller keeps its own figure
    assert old.longest_passage() is None


def test_an_index_with_nothing_to_find_is_not_written(tmp_path):
    with pytest.raises(SearchError, match=r"no passage to index \(2 with empty text, 0 duplicate ids\); nothing was written"):
        TantivyEngine.build([Passage("1", "A", ""), Passage("2", "B", "  ")], tmp_path / "e")
    assert not (tmp_path / "e").exists() and not [p for p in os.listdir(tmp_path) if p.startswith(".")]
    e = TantivyEngine.build(DOCS + [Passage("9", "Blank", " ")], tmp_path / "f")
    assert e.count() == 5 and e.manifest["empty_skipped"] == 1


def test_one_writer_thread_writes_the_same_segment_every_build(tmp_path):
    def contents(n):  # segment files by suffix: their names are fresh ids on every build
        path = TantivyEngine.build(DOCS, tmp_path / f"b{n}", threads=1).files
        return sorted((p.suffix, p.read_bytes()) for p in path.iterdir() if p.suffix in (".idx", ".term", ".store", ".pos"))
    a, b = contents(0), contents(1)
    assert [s for s, _ in a] == [".idx", ".pos", ".store", ".term"] and a == b  # one segment, byte for byte


def test_failed_build_leaves_nothing_and_keeps_the_old_index(idx, tmp_path):
    def broken():
        yield DOCS[0]
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        TantivyEngine.build(broken(), tmp_path / "new")
    assert not (tmp_path / "new").exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]
    with pytest.raises(RuntimeError):
        TantivyEngine.build(broken(), tmp_path / "idx", overwrite=True)
    assert TantivyEngine(tmp_path / "idx").count() == 5  # untouched
    with pytest.raises(SearchError, match="already exists"):
        TantivyEngine.build(DOCS, tmp_path / "idx")


def test_missing_foreign_corrupt_and_partial_indexes(idx, tmp_path):
    with pytest.raises(SearchError, match=r"nothing: no index here \(no such folder; build one with"):
        TantivyEngine(tmp_path / "nothing")
    (tmp_path / "foreign").mkdir()
    with pytest.raises(SearchError, match="not a seakr index"):
        TantivyEngine(tmp_path / "foreign")
    m = json.loads((idx.path / MANIFEST).read_text())
    (idx.path / MANIFEST).write_text(json.dumps(dict(m, format="other/9")))
    with pytest.raises(SearchError, match="foreign index format"):
        TantivyEngine(idx.path)
    (idx.path / MANIFEST).write_text(json.dumps(dict(m, doc_count=7)))
    with pytest.raises(SearchError, match="holds 5 documents but its manifest says 7"):
        TantivyEngine(idx.path)
    (idx.path / MANIFEST).write_text(json.dumps(dict(m, checksum="0" * 64)))
    with pytest.raises(SearchError, match="checksum mismatch"):
        TantivyEngine(idx.path).verify()
    (idx.path / MANIFEST).write_text("{not json")
    with pytest.raises(SearchError, match="corrupt manifest"):
        TantivyEngine(idx.path)
    for other, why in (("[1]", "expected a JSON object"), ('"x"', "expected a JSON object"),
                       (json.dumps(dict(m, files=[1])), "expected a JSON object"), (b"\xff\xfe", "not UTF-8 text")):
        # a list or a string was an AttributeError, other bytes a codec error naming no file
        getattr(idx.path / MANIFEST, "write_bytes" if isinstance(other, bytes) else "write_text")(other)
        for read in (lambda: TantivyEngine(idx.path), lambda: TantivyEngine.check_files(idx.path)):
            with pytest.raises(SearchError, match=f"{MANIFEST}: corrupt manifest .{why}"):
                read()
    (idx.path / MANIFEST).write_text(json.dumps(m))
    (idx.files / "meta.json").write_text("garbage")
    with pytest.raises(SearchError, match="differ from the build: meta.json"):  # the recorded digests, first
        TantivyEngine(idx.path)
    with pytest.raises(SearchError, match="corrupt tantivy index"):  # and tantivy's own check behind them
        TantivyEngine(idx.path, check=False)


def test_pooled_corpus_recall(tmp_path):
    """recall@5 of any gold paragraph with the question as the query, over the questions' pooled paragraphs plus
    filler (our fixtures; the real files' in test_corpora.py)."""
    from helpers import HOTPOT, fixture_path, pooled_recall_at_5

    assert pooled_recall_at_5(HOTPOT, fixture_path("filler.flashrag.jsonl"), tmp_path / "pool") >= 0.9


def test_the_python_api_names_a_bad_passage_or_search_argument(tmp_path):
    """The corpus readers make right passages; a Python caller may hand anything: one line naming it,
    and no index folder left behind (a None text was an AttributeError, a float k 'the index looks damaged')."""
    for items, needle in (([Passage("a", "T", "ok"), {"id": "b", "title": "T", "text": "x"}],
                           "passage 1: expected a seakr.search.Passage, got dict (Passage(**record) makes one"),
                          ([("a", "x")], "passage 0: expected a seakr.search.Passage, got tuple")):
        with pytest.raises(TypeError, match=re.escape(needle)):
            TantivyEngine.build(items, tmp_path / "bad")
        assert not (tmp_path / "bad").exists()
    for make, needle in ((lambda: Passage("b", "T", None), "passage text: expected text, got None"),  # was AttributeError
                         (lambda: Passage(1, "T", "x"), "passage id: expected text, got 1")):
        with pytest.raises(ValueError, match=re.escape(needle)):  # the passage's own schema, where it is made
            make()
    eng = TantivyEngine.build([Passage("a", "Alpha", "alpha beta")], tmp_path / "ok")
    assert [p.id for p in eng.search("alpha", np.int64(2))] == ["a"] and eng.search("alpha", 0) == []
    # tantivy takes k as a u32: k >= 2**32 aborted the whole process (SIGABRT, from the CLI's -k, a method's
    # n_candidates, any door); k is bounded by the index's size
    assert [p.id for p in eng.search("alpha", 2**32)] == ["a"] == [p.id for p in eng.search_many(["alpha"], 2**70)[0]]
    for query, k, error, needle in (("alpha", 3.5, TypeError, "k must be a whole number, got 3.5"),
                                    ("alpha", -1, ValueError, "k must be >= 0, got -1"),
                                    ("alpha", True, TypeError, "k must be a whole number, got True"),  # it was k = 1
                                    (None, 3, TypeError, "the query must be text, got NoneType")):
        with pytest.raises(error, match=re.escape(needle)):
            eng.search(query, k)


def test_a_query_is_searched_without_a_consoles_escapes(tmp_path):
    """`seakr search IDX "<pasted>"` and a Python caller's query kept the escapes a console pastes: "\x1b[1mAlpha"
    looked for "1malpha" and found nothing. The question's own door strips them; every engine's search does too."""
    eng = TantivyEngine.build([Passage("a", "Alpha", "alpha beta"), Passage("b", "Gamma", "gamma delta")], tmp_path / "i")
    assert [p.id for p in eng.search("\x1b[1mAlpha\x1b[0m\x07 beta", 2)] == ["a"]
    assert [[p.id for p in hits] for hits in eng.search_many(["\x1b[31mgamma", "\x00"], 2)] == [["b"], []]
    from helpers import run_cli

    r = run_cli("search", str(tmp_path / "i"), "\x1b[1mGamma\x1b[0m", "--json")
    assert r.returncode == 0 and [h["id"] for h in json.loads(r.stdout)] == ["b"], r.stderr


def test_a_disk_that_refuses_a_write_is_named_and_the_index_keeps_what_it_had(tmp_path, monkeypatch):
    """A full disk (injected here as tantivy reports it) was "Internal error: 'No space left on device
    (os error 28)'" naming no folder; after a failed --add, the stray segments and rewritten metadata made
    the next open report a damaged index."""
    import seakr.search.tantivy_engine as te

    eng = TantivyEngine.build([Passage("a", "Alpha", "alpha beta")], tmp_path / "idx")
    real = te._write

    def full_disk(index, passages, seen, *a, **kw):
        (tmp_path / "idx" / "stray.idx").write_bytes(b"half a segment")
        (tmp_path / "idx" / "meta.json").write_text("{}")
        raise ValueError("Internal error: 'No space left on device (os error 28)'")

    monkeypatch.setattr(te, "_write", full_disk)
    with pytest.raises(SearchError, match=r"idx: adding to the index failed \(Internal error: 'No space left .*it holds what it had"):
        eng.add([Passage("b", "Beta", "beta gamma")])
    TantivyEngine.check_files(tmp_path / "idx")  # every file as the build recorded it
    assert [p.id for p in TantivyEngine(tmp_path / "idx").search("alpha", 3)] == ["a"]
    with pytest.raises(SearchError, match=r"new: the index could not be written .*os error 28.*nothing was kept"):
        TantivyEngine.build([Passage("c", "C", "gamma")], tmp_path / "new")
    assert not (tmp_path / "new").exists() and not list(tmp_path.glob(".new.building-*"))
    monkeypatch.setattr(te, "_write", real)
    with pytest.raises(ValueError, match="bad corpus line"):  # a corpus error keeps its own message
        TantivyEngine.build((Passage("d", "D", "x") if i == 0 else (_ for _ in ()).throw(ValueError("bad corpus line"))
                             for i in range(2)), tmp_path / "other")


def test_a_failed_build_leaves_no_temporary_folder_when_a_thread_writes_into_it(tmp_path, monkeypatch):
    """A tantivy thread (the reader's meta-file watcher, a writer's worker) can put a file into the build's
    temporary folder while it is being removed: the folder's last rmdir then failed "not empty", silently, and
    a `.new.building-PID` folder stayed beside the index (seen once under load)."""
    import shutil

    import seakr.search.tantivy_engine as te

    real_rmtree, raced = shutil.rmtree, []

    def racing_rmtree(path, *a, **kw):
        there = os.path.isdir(path)
        real_rmtree(path, *a, **kw)
        if there and ".building-" in str(path) and not raced:  # as the thread would, between the unlinks and the rmdir
            raced.append(path)
            os.makedirs(path, exist_ok=True)
            open(os.path.join(path, ".tantivy-meta.lock"), "wb").close()

    def full_disk(*a, **kw):
        raise ValueError("Internal error: 'No space left on device (os error 28)'")

    monkeypatch.setattr(te, "_write", full_disk)
    monkeypatch.setattr(shutil, "rmtree", racing_rmtree)
    with pytest.raises(SearchError, match="nothing was kept"):
        TantivyEngine.build([Passage("c", "C", "gamma")], tmp_path / "new")
    assert raced and not (tmp_path / "new").exists() and list(tmp_path.iterdir()) == []


_LIMITED_WRITER = """
import resource, signal, sys
from seakr.search import Passage, SearchError
from seakr.search.tantivy_engine import TantivyEngine

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (150_000, 150_000))
many = [Passage(str(i), f"T{i}", f"word{i} some text about things and more things {i * 7}") for i in range(40_000)]
for write in (lambda: TantivyEngine(sys.argv[1]).add(many), lambda: TantivyEngine.build(many, sys.argv[2])):
    try:
        write()
    except SearchError as e:
        print(e)
"""


def test_a_write_refused_inside_tantivys_thread_is_named_and_undone(tmp_path):
    """A real refused write (a file-size limit; a full disk reads the same) fails in tantivy's worker thread,
    which reports only "An error occurred in a thread: 'An index writer was killed.. (io::Error most
    likely)'": that came out bare, naming neither the folder nor the disk. The add is undone as for any
    refused write."""
    TantivyEngine.build([Passage("a", "Alpha", "alpha beta")], tmp_path / "idx")
    r = subprocess.run([sys.executable, "-c", _LIMITED_WRITER, str(tmp_path / "idx"), str(tmp_path / "new")],
                       capture_output=True, text=True, timeout=300)
    said = r.stdout.splitlines()
    assert len(said) == 2, r.stdout + r.stderr
    assert re.fullmatch(rf"{re.escape(str(tmp_path / 'idx'))}: adding to the index failed \(tantivy's writer thread "
                        r"stopped on a refused write: a full disk, a quota or a file-size limit; [\d,.]+ MB free "
                        r"there\); it holds what it had", said[0]), said[0]
    assert said[1].startswith(f"{tmp_path / 'new'}: the index could not be written (tantivy's writer thread stopped")
    TantivyEngine.check_files(tmp_path / "idx")
    assert [p.id for p in TantivyEngine(tmp_path / "idx").search("alpha", 3)] == ["a"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]


def test_a_manifest_write_that_fails_after_the_segments_undoes_the_add(tmp_path, monkeypatch):
    """The segments were written, then the manifest's write failed: the index listed files it did not have
    and the next open called it damaged. The add is now whole or not at all."""
    import errno

    import seakr.search.tantivy_engine as te

    eng = TantivyEngine.build([Passage("a", "Alpha", "alpha beta")], tmp_path / "idx")
    real_replace = os.replace

    def full_disk(src, dst):
        if str(dst).endswith(te.MANIFEST):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(te.os, "replace", full_disk)
    with pytest.raises(SearchError, match=r"idx: adding to the index failed .*No space left.*it holds what it had"):
        eng.add([Passage("b", "Beta", "beta gamma")])
    monkeypatch.setattr(te.os, "replace", real_replace)
    TantivyEngine.check_files(tmp_path / "idx")
    assert [p.id for p in TantivyEngine(tmp_path / "idx").search("beta", 3)] == ["a"]


@pytest.mark.parametrize("field,value", [("checksum", 5), ("checksum", "xyz"), ("duplicates_skipped", "two"),
                                         ("sources", None), ("sources", 5), ("doc_count", -1)])
def test_a_manifest_field_of_another_shape_is_named_before_an_add_writes(tmp_path, field, value):
    """`"checksum": 5` failed only once the added passages were written (a TypeError), leaving segments the
    manifest did not list: the next open called the index damaged."""
    import json

    from seakr.search.tantivy_engine import MANIFEST

    path = tmp_path / "idx"
    TantivyEngine.build([Passage("a", "Alpha", "alpha beta")], path)
    m = json.loads((path / MANIFEST).read_text())
    good = dict(m)
    if value is None:
        m[field] = None
    else:
        m[field] = value
    (path / MANIFEST).write_text(json.dumps(m))
    if value is None:  # an optional field left null reads as absent
        TantivyEngine(path).add([Passage("b", "Beta", "beta")])
        return
    with pytest.raises(SearchError, match=rf"corrupt manifest \(field {field}: expected "):
        TantivyEngine(path).add([Passage("b", "Beta", "beta")])
    (path / MANIFEST).write_text(json.dumps(good))
    assert [p.id for p in TantivyEngine(path).search("alpha", 3)] == ["a"]  # nothing was written


@pytest.mark.skipif(sys.platform == "win32", reason="flock: POSIX only")
def test_one_process_adds_at_a_time_and_a_reader_is_told_it_is_being_written(tmp_path):
    """Two `index build --add` at once failed with tantivy's "LockBusy" or read the other's half-written files
    as a damaged index ("rebuild it"); a reader opening mid-add was told the same."""
    path = tmp_path / "idx"
    TantivyEngine.build([Passage("a", "Vienna", "Vienna is the capital of Austria.")], path)
    adder = stalled_adder(path)
    try:
        assert adder.stdout.readline().strip() == "adding"
        with pytest.raises(SearchError, match=rf"another process \(pid {adder.pid}\) is writing to this index; run this"):
            TantivyEngine(path).add([Passage("c", "Graz", "Graz is in Styria.")])
        # mid-add, a reader opens the generation the manifest points at, whole: never the one being written
        assert [p.id for p in TantivyEngine(path).search("Vienna", 3)] == ["a"]
    finally:
        adder.kill()  # the lock goes with its process
        adder.wait()
    eng = TantivyEngine(path)
    assert eng.add([Passage("c", "Graz", "Graz is in Styria.")])["added"] == 1 and TantivyEngine(path).count() == 2
    assert sorted(p.name for p in path.glob("gen-*")) == [eng.files.name]  # the killed adder's generation swept
    (eng.files / "meta.json").write_bytes(b"{}")
    with pytest.raises(SearchError, match="differ from the build"):  # with no writer, damage is damage
        TantivyEngine(path)


def build_stopped_mid_stream(tmp_path, out, *extra, n=100_000) -> tuple[int, str]:
    """``seakr index build`` reading a corpus through a fifo: ``n`` passages flow, the corpus stalls mid-stream,
    and the job gets SIGTERM (a scheduler's time limit). Returns the exit code and stderr."""
    import signal

    fifo = tmp_path / "corpus.jsonl"
    os.mkfifo(fifo)
    p = subprocess.Popen([*SEAKR_CLI, "index", "build", "--format", "jsonl", str(fifo), "--out", str(out), *extra],
                         stderr=subprocess.PIPE, text=True)
    with open(fifo, "w", encoding="utf-8") as w:
        for i in range(n):
            w.write(json.dumps({"id": f"x{i}", "title": f"T{i}", "text": f"passage {i} on topic {i % 97}"}) + "\n")
        w.flush()
        time.sleep(1.0)
        p.send_signal(signal.SIGTERM)
        err = p.communicate(timeout=120)[1]
    return p.returncode, err


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX fifo and SIGTERM")
def test_an_add_stopped_by_sigterm_leaves_the_index_as_it_was(tmp_path):
    """A job's time limit (SIGTERM) during `index build --add` ended the process at once: the segments it had
    written stayed beside a manifest that did not list them, and the next open said "the index is damaged:
    rebuild it" (a 21M-passage index, by a timeout). It is now undone as any failed add is."""
    path = tmp_path / "idx"
    TantivyEngine.build([Passage("a", "Vienna", "Vienna is the capital of Austria.")], path)
    code, err = build_stopped_mid_stream(tmp_path, path, "--add")
    assert code == 143 and err.strip().splitlines()[-1] == "seakr: stopped (SIGTERM)", err[-1000:]
    eng = TantivyEngine(path)  # not "damaged": what it held, and nothing else
    assert eng.count() == 1 and [h.id for h in eng.search("Vienna", 3)] == ["a"]


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX fifo and SIGTERM")
def test_a_build_stopped_by_sigterm_leaves_nothing_behind(tmp_path):
    """A fresh build writes into a hidden folder beside --out and renames it when done; SIGTERM left that folder
    (as large as the index) behind."""
    out = tmp_path / "out"
    out.mkdir()
    code, err = build_stopped_mid_stream(tmp_path, out / "idx", n=50_000)
    assert code == 143, err[-1000:]
    assert list(out.iterdir()) == []


def test_two_builds_to_one_new_folder_keep_the_first_and_refuse_the_second(tmp_path):
    """Two `seakr index build --out X` at once (array jobs each building the index "if missing"): neither found X
    at its start, and the one finishing last replaced the other's index, both saying "built". The second now
    refuses, its work discarded; with overwrite it replaces, as asked."""
    out = tmp_path / "idx"

    def passages(meanwhile):
        yield Passage("a", "Alpha", "alpha beta")
        meanwhile()  # the other build finishes while this one streams
        yield Passage("b", "Beta", "beta gamma")

    def other():  # another process: its build folder is its own
        code = ("import sys; from seakr.search import Passage; from seakr.search.tantivy_engine import TantivyEngine; "
                "TantivyEngine.build([Passage('z', 'Zeta', 'zeta beta')], sys.argv[1])")
        subprocess.run([sys.executable, "-c", code, str(out)], check=True, timeout=120)
    with pytest.raises(SearchError, match=r"idx: another build made it while this one ran; this one was not kept"):
        TantivyEngine.build(passages(other), out)
    assert [p.id for p in TantivyEngine(out).search("beta", 5)] == ["z"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]  # no temp folder left
    import shutil

    shutil.rmtree(out)
    eng = TantivyEngine.build(passages(other), out, overwrite=True)
    assert sorted(p.id for p in eng.search("beta", 5)) == ["a", "b"]


def test_a_folder_name_that_is_not_utf8_is_named_not_a_codec_error(tmp_path):
    """`index build --out $'i\\xfe'` failed with "'utf-8' codec can't encode character '\\udcfe' ... surrogates not
    allowed", naming nothing (tantivy takes UTF-8 paths only); an index renamed so could not be opened either."""
    import os

    bad = tmp_path / os.fsdecode(b"i\xfe")
    with pytest.raises(SearchError, match=re.escape(f"{bad}: a path that is not UTF-8 text, which the index engine cannot take")):
        TantivyEngine.build([Passage("a", "Alpha", "Alpha is a city.")], bad)
    assert not bad.exists()
    TantivyEngine.build([Passage("a", "Alpha", "Alpha is a city.")], tmp_path / "good")
    (tmp_path / "good").rename(bad)
    with pytest.raises(SearchError, match=r"not UTF-8 text"):
        TantivyEngine(bad)


def test_a_tilde_path_is_the_home_folders_at_every_door(tmp_path, monkeypatch, capsys):
    """Bash expands no ``~`` after ``=`` (``--out=~/idx``), nor inside quotes, nor in a Python string: ``index
    build`` made a folder named "~" in the working folder, and ``search``, ``index info``, ``open_engine`` and
    ``read_corpus`` were "no index here" / "no such file" for the home folder's."""
    from seakr.cli import main
    from seakr.search import as_engine
    from seakr.search.build import build_index

    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir(), work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    (home / "c.jsonl").write_text("".join(json.dumps(p.to_dict()) + "\n" for p in DOCS))
    assert main(["index", "build", "~/c.jsonl", "--out=~/idx"]) == 0
    assert (home / "idx").is_dir() and not any(work.iterdir())
    capsys.readouterr()
    assert main(["search", "~/idx", "Seine river", "-k", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["id"] == "5"
    assert main(["index", "info", "~/idx"]) == 0 and json.loads(capsys.readouterr().out)["doc_count"] == len(DOCS)
    assert [p.id for p in read_corpus("~/c.jsonl")] == [p.id for p in DOCS]
    assert open_engine("~/idx").search("Berlin", 1)[0].id == "3" and as_engine("~/idx").search("Lyon", 1)[0].id == "2"
    build_index([("~/c.jsonl", "jsonl")], "~/idx2")
    assert (home / "idx2").is_dir() and not any(work.iterdir())


def test_a_corpus_file_given_as_the_index_is_indexed_once_into_the_cache(tmp_path, monkeypatch, capsys):
    """``ask --index docs.jsonl`` (and ``index="docs.jsonl"``, ``eval --index``, ``search``) was "no index here": a
    handful of documents needed ``index build`` first. The file is indexed once, under its content's digest."""
    from seakr.cli import main
    from seakr.eval.plan import EvalPlan
    from seakr.search import as_engine
    from seakr.search.corpora import CorpusError

    monkeypatch.setenv("SEAKR_CACHE", str(tmp_path / "cache"))
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps(p.to_dict()) + "\n" for p in DOCS))
    eng = open_engine(str(corpus))
    assert eng.search("Seine river", 1)[0].id == "5" and eng.count() == len(DOCS)
    built = sorted((tmp_path / "cache" / "indexes").iterdir())
    manifest = built[0] / MANIFEST
    stamp = manifest.stat().st_mtime_ns
    assert as_engine(corpus).search("Berlin", 1)[0].id == "3"  # the Python API's door: the same cached index
    assert main(["search", str(corpus), "Lyon", "-k", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["id"] == "2"
    # --k as the other commands spell it: "seakr: unrecognized arguments: --k 1", naming no command
    assert main(["search", str(corpus), "Lyon", "--k", "1", "--json"]) == 0
    assert [h["id"] for h in json.loads(capsys.readouterr().out)] == ["2"]
    assert sorted((tmp_path / "cache" / "indexes").iterdir()) == built and manifest.stat().st_mtime_ns == stamp
    import seakr.search.build as build

    hashed = []
    real = build.sha256_file
    monkeypatch.setattr(build, "sha256_file", lambda p, *a: hashed.append(p) or real(p, *a))
    open_engine(str(corpus))  # the file's digest is remembered under its size and time: 13 GB were read each time
    assert hashed == []
    with corpus.open("a") as f:  # a changed file makes another index: the old one would answer from stale passages
        f.write(json.dumps({"id": "6", "title": "Rhine", "text": "The Rhine flows through Basel."}) + "\n")
    assert open_engine(str(corpus)).search("Rhine Basel", 1)[0].id == "6" and len(hashed) == 1
    assert len(list((tmp_path / "cache" / "indexes").iterdir())) == 2
    # an edit of the same size whose time is put back (`cp -p`, `rsync -t`, `touch -r`): the inode's change time
    # moves, which no one can set back; the memo kept the old digest, so the old index answered
    st = corpus.stat()
    corpus.write_text(corpus.read_text().replace("Basel", "Mainz"))
    os.utime(corpus, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert corpus.stat().st_size == st.st_size and corpus.stat().st_mtime_ns == st.st_mtime_ns
    assert open_engine(str(corpus)).search("Rhine Mainz", 1)[0].id == "6" and len(hashed) == 2
    assert len(list((tmp_path / "cache" / "indexes").iterdir())) == 3
    fixture = os.path.join(os.path.dirname(__file__), "..", "fixtures", "hotpotqa_mini.official.json")
    EvalPlan(data=fixture, out=str(tmp_path / "o"), runs=["ircot"], index=str(corpus)).check()  # eval's door
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"question": "Which river?"}) + "\n")
    with pytest.raises(CorpusError, match=r"q.jsonl: questions \(a dataset\)"):  # refused before anything is built
        open_engine(str(questions))
    assert len(list((tmp_path / "cache" / "indexes").iterdir())) == 3
    with pytest.raises(SearchError, match=r"seakr-index.json: a file of the seakr index .*; name the folder"):
        open_engine(str(manifest))
    (tmp_path / "x.json").write_text('{"a": 1}')
    with pytest.raises(CorpusError, match=r"x.json: neither an index folder nor a corpus file .* --format FORMAT"):
        open_engine(str(tmp_path / "x.json"))
    run = tmp_path / "run"  # a run's folder given as the index: its config.json was to be indexed "with --format"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"name": "cot", "method": {"method": "cot"}}))
    (run / "scores.jsonl").write_text(json.dumps({"id": "q1", "f1": 1.0}) + "\n")
    for given in (run, run / "scores.jsonl"):
        with pytest.raises(SearchError, match=r": a file of the seakr run or study .*run \(its config and rows\), not a corpus; give an index"):
            open_engine(str(given))
    from seakr.search.build import build_index  # `index build RUN` guessed no format, and with --format jsonl failed
    for given, fmt, what in ((run, "auto", "the folder of a seakr run or study"),  # mid-build
                             (run / "scores.jsonl", "jsonl", f"a file of the seakr run or study {run}")):
        with pytest.raises(ValueError, match=f"{re.escape(str(given))}: {re.escape(what)} \\(its config and rows\\)"):
            build_index([(str(given), fmt)], str(tmp_path / "from-run"))
        assert not (tmp_path / "from-run").exists()
    idx = manifest.parent  # `index build IDX` was "IDX/....fast: cannot guess the corpus format"
    for given, what in ((idx, "the seakr index"), (manifest, "a file of the seakr index")):
        with pytest.raises(ValueError, match=f"{re.escape(str(given))}: {what} {re.escape(str(idx))}, not a corpus"):
            build_index([(str(given), "auto")], str(tmp_path / "from-index"))
        assert not (tmp_path / "from-index").exists()


def test_an_index_build_shows_progress_only_once_every_input_is_checked(tmp_path, monkeypatch):
    """The check phase, then the work: a refused build opens no progress bar (on a terminal, a bar drawn and then
    an error), whichever door calls it; an accepted one opens one."""
    import contextlib

    from seakr.search import build

    opened = []

    @contextlib.contextmanager
    def bar(description, **kw):
        opened.append(description)
        yield lambda n=1, **fields: None

    monkeypatch.setattr(build, "progress_bar", bar)
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "1", "title": "T", "text": "some text"}) + "\n")
    pairs = [(str(corpus), "jsonl")]
    for out, kw in ((tmp_path / "i", {"add": True, "overwrite": True}), (tmp_path / "i", {"passage_words": 0}),
                    (corpus, {}), (tmp_path / "i", {"engine": "elasticsearch"})):
        with pytest.raises(ValueError):
            build.build_index(pairs, str(out), progress=True, **kw)
    assert opened == [] and not (tmp_path / "i").exists()
    build.build_index(pairs, str(tmp_path / "i"), progress=True)
    assert opened == [f"indexing into {tmp_path / 'i'}"] and TantivyEngine(tmp_path / "i").count() == 1


def test_a_folder_of_corpus_files_given_as_the_index_is_indexed_once_and_an_index_stays_an_index(tmp_path, monkeypatch):
    """``--index wiki/`` (a folder of corpus files, as ``index build`` reads) was "not a seakr index"; an index
    folder that lost its manifest is still named as a damaged index, never read as a corpus."""
    monkeypatch.setenv("SEAKR_CACHE", str(tmp_path / "cache"))
    wiki = tmp_path / "wiki"
    (wiki / "AA").mkdir(parents=True)
    (wiki / "AA" / "a.jsonl").write_text("".join(json.dumps(p.to_dict()) + "\n" for p in DOCS[:3]))
    (wiki / "b.jsonl").write_text("".join(json.dumps(p.to_dict()) + "\n" for p in DOCS[3:]))
    eng = open_engine(str(wiki))
    assert eng.count() == len(DOCS) and eng.search("Seine river", 1)[0].id == "5"
    assert len(list((tmp_path / "cache" / "indexes").iterdir())) == 1
    open_engine(str(wiki) + "/")  # the same folder, the same cached index
    assert len(list((tmp_path / "cache" / "indexes").iterdir())) == 1
    idx = tmp_path / "idx"
    TantivyEngine.build(DOCS, idx)
    (idx / MANIFEST).unlink()
    with pytest.raises(SearchError, match=r"not a seakr index"):
        open_engine(str(idx))
    (tmp_path / "empty").mkdir()
    with pytest.raises(SearchError, match=r"not a seakr index"):
        open_engine(str(tmp_path / "empty"))


def test_a_corpus_on_stdin_is_read_where_there_is_no_stdin_device(tmp_path, monkeypatch):
    """Windows has no /dev/stdin: `type docs.jsonl | seakr index build - --format jsonl` was "no such file". There
    the stream is copied to a temporary file first (which also lets its format be guessed)."""
    import io

    import seakr.search.build as build

    monkeypatch.setattr(build, "STDIN_DEVICE", str(tmp_path / "no-such-device"))
    data = "".join(json.dumps(p.to_dict()) + "\n" for p in DOCS).encode()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    pairs = build.pair_sources(["-"], ["auto"])
    assert pairs[0][0] != "-" and open(pairs[0][0], "rb").read() == data
    print(build.build_index(pairs, str(tmp_path / "idx")))
    assert open_engine(str(tmp_path / "idx")).search("Seine river", 1)[0].id == "5"


def test_a_corpus_file_of_any_name_gets_a_cache_folder_tantivy_takes(tmp_path, monkeypatch):
    """A file named with spaces, quotes or bytes that are not UTF-8 named the cached index after itself, and a
    path that is not UTF-8 is one tantivy cannot open."""
    monkeypatch.setenv("SEAKR_CACHE", str(tmp_path / "cache"))
    body = "".join(json.dumps(p.to_dict()) + "\n" for p in DOCS)
    for name in ("my docs (v2).jsonl", os.fsdecode(b"caf\xe9 docs.jsonl")):
        f = tmp_path / name
        f.write_text(body)
        assert open_engine(str(f)).search("Seine river", 1)[0].id == "5"
    assert all(p.name.isascii() and " " not in p.name for p in (tmp_path / "cache" / "indexes").iterdir())


def test_the_manifest_names_its_sources_by_absolute_paths(tmp_path, monkeypatch):
    """``index build docs.jsonl --out idx`` recorded "auto:docs.jsonl", which names nothing once the manifest is
    read from another folder (``index info``, a run's config) or machine."""
    from seakr.search.build import build_index, pair_sources

    (tmp_path / "c.jsonl").write_text("".join(json.dumps(p.to_dict()) + "\n" for p in DOCS))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.jsonl").write_text(json.dumps({"id": "new", "title": "New", "text": "A passage added."}) + "\n")
    build_index(pair_sources(["c.jsonl"], ["auto"]), "idx")
    build_index(pair_sources(["./d.jsonl"], ["jsonl"]), "idx", add=True)
    assert open_engine(str(tmp_path / "idx")).metadata()["sources"] == [f"auto:{tmp_path / 'c.jsonl'}",
                                                                      f"jsonl:{tmp_path / 'd.jsonl'}"]
    monkeypatch.setenv("SEAKR_CACHE", str(tmp_path / "cache"))  # the index built for a corpus given as the index
    assert open_engine("c.jsonl").metadata()["sources"] == [str(tmp_path / "c.jsonl")]
    from seakr.eval.corpus import pooled_index
    from seakr.eval.datasets import load_dataset
    from helpers import HOTPOT

    os.symlink(HOTPOT, tmp_path / "h.json")  # the pooled index of a dataset given by a relative path
    assert open_engine(pooled_index("h.json", load_dataset("h.json"))).metadata()["sources"] == [str(tmp_path / "h.json")]


def test_searching_leaves_no_file_open_at_exit(idx):
    """Every guarded tantivy call holds stderr in one scratch file a process; it was never closed, and a process
    that searched ended with "ResourceWarning: unclosed file <_io.BufferedRandom ...>" under ``-X dev`` (and at the
    end of a pytest run that searched)."""
    code = ("import sys; from seakr.search import open_engine; "
            "print(len(open_engine(sys.argv[1]).search('capital of France', 2)))")
    r = subprocess.run([sys.executable, "-X", "dev", "-c", code, str(idx.path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "2", r.stderr
    assert "ResourceWarning" not in r.stderr, r.stderr


def test_the_engine_and_the_corpus_reader_name_a_wrong_argument_before_any_work(tmp_path):
    """From Python, TantivyEngine.build(one_passage, out) failed mid-build ("'Passage' object is not iterable"),
    a None folder or corpus path was posixpath's "expected str, bytes or os.PathLike object", and read_corpus("")
    was ": no such file"."""
    for call, error, said in (
            (lambda: TantivyEngine.build(DOCS[0], tmp_path / "i"), TypeError,
             "build: passages come as a list (or any collection) of them, not one Passage; give [passage]"),
            (lambda: TantivyEngine.build("Paris", tmp_path / "i"), TypeError,
             "build: passages come as a list (or any collection) of them, not one str; give [text]"),
            (lambda: TantivyEngine.build(DOCS, None), TypeError, "out: expected an index folder's path, got NoneType"),
            (lambda: TantivyEngine(None), TypeError, "index: expected an index folder's path, got NoneType"),
            (lambda: list(read_corpus(None)), TypeError, "corpus: expected a corpus file's path, got NoneType"),
            (lambda: list(read_corpus(" ")), ValueError, "corpus: an empty path; name the corpus file")):
        with pytest.raises(error, match="^" + re.escape(said) + "$"):
            call()
    assert not any(tmp_path.iterdir())
    assert next(iter(read_corpus(None, "wiki-offline"))).text  # the packaged leads need no path


def test_an_add_of_a_corpus_the_index_holds_read_another_way_is_refused(tmp_path, capsys):
    """`index build long.jsonl --add --passage-words 100` over an index built from long.jsonl whole added its
    text again as three more passages (other ids): the index held each word twice, and BM25 counted it twice.
    Read another way (another cut or format, the file itself or in a folder the index holds) it is refused
    before anything is read; read the same way it is said, and the manifest does not list it twice."""
    from seakr.cli import main

    long = " ".join(f"w{i}" for i in range(250))
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "long.jsonl").write_text(json.dumps({"id": "L", "title": "Long", "text": long}) + "\n")
    (tmp_path / "other.jsonl").write_text(json.dumps({"id": "o", "title": "O", "text": "other text"}) + "\n")
    src, idx = str(tmp_path / "f" / "long.jsonl"), str(tmp_path / "idx")
    assert main(["index", "build", src, "--out", idx]) == 0
    for extra, how in ((["--passage-words", "100"], "jsonl, 100-word passages"), (["--format", "dpr"], "dpr, whole")):
        assert main(["index", "build", src, "--out", idx, "--add", *extra]) == 2
        assert capsys.readouterr().err.startswith(
            f"seakr: error: index build --add: {idx} holds {src} already (jsonl, whole documents); adding it as {how}")
    assert main(["index", "build", src, str(tmp_path / "other.jsonl"), "--out", idx, "--add", "--format", "jsonl"]) == 0
    out, err = capsys.readouterr()
    assert "added 1 passages (1 duplicate ids" in out and f"{idx} holds {src} already (jsonl, whole documents): its" in err
    m = open_engine(idx).metadata()
    assert m["doc_count"] == 2 and m["sources"] == [f"auto:{src}", f"jsonl:{tmp_path / 'other.jsonl'}"]
    folder = str(tmp_path / "byfolder")  # a folder held, one of its files added as other passages
    assert main(["index", "build", str(tmp_path / "f"), "--out", folder]) == 0
    assert main(["index", "build", src, "--out", folder, "--add", "--passage-words", "100"]) == 2
    assert f"holds {src} already (from {tmp_path / 'f'}: auto, whole documents)" in capsys.readouterr().err
    assert open_engine(folder).count() == 1


def test_equal_scores_come_back_in_document_order_whatever_the_build(tmp_path):
    """Two builds of one corpus ordered tied scores differently (tantivy picks among ties by the segments a build
    happened to write): ties are broken by document order, at the cut of k too, and after an add."""
    docs = [Passage(f"d{i}", "T", "same words here") for i in range(300)] + [Passage("x", "Other", "words elsewhere")]
    runs = [[p.id for p in TantivyEngine.build(docs, tmp_path / f"b{n}", threads=4).search("same words", 5)]
            for n in range(2)]
    assert runs == [["d0", "d1", "d2", "d3", "d4"]] * 2
    eng = TantivyEngine(tmp_path / "b0")
    eng.add([Passage("late", "T", "same words here")])
    assert [p.id for p in TantivyEngine(tmp_path / "b0").search("same words", 301)][-1] == "late"


def test_a_dict_of_passages_names_the_id_whose_value_is_no_text():
    from seakr.search import as_engine

    with pytest.raises(TypeError, match=r"the passage of id 'a' is NoneType; a dict of passages maps each id to its text"):
        as_engine({"a": None})  # was "... not tuple": the dict's item, not what was wrong with it
    assert as_engine({"a": "Vienna is the capital of Austria."}).search("Vienna", 1)[0].id == "a"


def test_an_index_built_before_document_order_was_stored_breaks_ties_by_id(tmp_path):
    eng = TantivyEngine.build([Passage(i, "T", "same words") for i in ("b", "a", "c")], tmp_path / "idx")
    m = json.loads((tmp_path / "idx" / MANIFEST).read_text())
    del m["ordered"]
    (tmp_path / "idx" / MANIFEST).write_text(json.dumps(m))
    assert [p.id for p in TantivyEngine(tmp_path / "idx").search("same", 3)] == ["a", "b", "c"]
    assert [p.id for p in eng.search("same", 3)] == ["b", "a", "c"]  # stored: the corpus's order
