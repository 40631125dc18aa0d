"""Every corpus reader on our fixtures and on the real shared files (where present), plus malformed
input with file:line messages."""

import gzip
import itertools
import json
import os
import re

import pytest

from helpers import HOTPOT, fixture_path, reshaped, run_cli, shared_path, write_records
from seakr.search.corpora import CorpusError, ctx_id, detect_format, read_corpus


@pytest.mark.parametrize("parts,fmt,min_n", [
    (("hotpotqa", "dev_hard100.hf.jsonl"), "hotpotqa", 900),
    (("hotpotqa", "dev_first53.official.json"), "hotpotqa", 500),
    (("2wikimultihopqa", "dev_first100.flashrag.jsonl"), "2wiki", 800),
    (("2wikimultihopqa", "extra500_maybe_train.official.json"), "2wiki", 3000),
    (("squad", "dev_part1.squad.json"), "squad", 900),
    (("nq", "dev_oracle_first1000.jsonl.gz"), "nq", 900),
    (("corpus", "wiki_filler1000.flashrag.jsonl"), "flashrag", 1000),
])
def test_real_files(parts, fmt, min_n):
    path = shared_path(*parts)
    assert detect_format(path) == fmt
    ps = list(read_corpus(path))
    assert len(ps) >= min_n
    assert all(p.text.strip() and p.id for p in ps)
    assert len({p.id for p in ps}) == len(ps)  # pooled contexts are deduplicated
    if fmt == "flashrag":
        assert not ps[0].title.startswith('"')


def test_real_pooled_corpus_recall(tmp_path):
    """The real questions' pooled paragraphs plus the real filler, indexed: the question alone finds a gold
    paragraph in its top 5 for at least 90 % of them (test_tantivy.py holds our fixtures to the same)."""
    from helpers import pooled_recall_at_5

    hp, filler = shared_path("hotpotqa", "dev_hard100.hf.jsonl"), shared_path("corpus", "wiki_filler1000.flashrag.jsonl")
    assert pooled_recall_at_5(hp, filler, tmp_path / "pool") >= 0.9


@pytest.mark.parametrize("name,fmt,n", [
    ("hotpotqa_mini.official.json", "hotpotqa", 38),
    ("2wiki_mini.flashrag.jsonl", "2wiki", 11),
    ("squad_mini.json", "squad", 2),
    ("nq_mini.oracle.jsonl", "nq", 6),
    ("filler.flashrag.jsonl", "flashrag", 38),
])
def test_fixture_files(name, fmt, n):
    path = fixture_path(name)
    assert detect_format(path) == fmt
    ps = list(read_corpus(path))
    assert len(ps) == n and all(p.text.strip() and p.id and p.title for p in ps)
    assert len({p.id for p in ps}) == len(ps)  # pooled contexts are deduplicated
    assert not ps[0].title.startswith('"')


def test_pooled_ids_are_content_hashes():
    path = HOTPOT
    p = next(iter(read_corpus(path)))
    assert p.id == ctx_id(p.title, p.text)


def test_demo_corpus_from_installed_package():
    ps = list(read_corpus(None, "wiki-offline"))
    assert len(ps) > 10_000 - 100 and all(p.title for p in ps[:100])


def test_dpr_tsv(tmp_path):
    f = tmp_path / "psgs.tsv"
    f.write_text('id\ttext\ttitle\n1\t"Aaron is a prophet"\tAaron\n2\tSecond passage\tB\n')
    ps = list(read_corpus(str(f)))
    assert [(p.id, p.title, p.text) for p in ps] == [("1", "Aaron", "Aaron is a prophet"), ("2", "B", "Second passage")]
    f.write_text("id\ttext\ttitle\n1\tonly two\n")
    with pytest.raises(CorpusError, match=r"psgs.tsv:2: expected 3 tab-separated columns"):
        list(read_corpus(str(f)))
    # one stray quote swallowed every line after it into one field: the error named the file's last line
    f.write_text("id\ttext\ttitle\n1\t\"Aaron, a prophet\tAaron\n" + "".join(f"{i}\tp{i}\tT\n" for i in range(2, 500)))
    with pytest.raises(CorpusError, match=re.escape("psgs.tsv:2: a quote opened in this row closes only on line 500, "
                                                    "so lines 2-500 read as one row of 2 fields (expected 3 ")):
        list(read_corpus(str(f)))
    f.write_text("pid\tbody\n")
    with pytest.raises(CorpusError, match=r":1: expected header"):
        list(read_corpus(str(f), "dpr"))
    f.write_text('{"id": "a", "text": "' + "x" * 100_000 + '"}\n')  # a JSON-lines file read as DPR: quoted, not whole
    with pytest.raises(CorpusError, match=r":1: expected header") as e:
        list(read_corpus(str(f), "dpr"))
    assert len(str(e.value)) < len(str(f)) + 200


def test_a_compressed_dpr_corpus_is_told_by_its_name_without_the_compression(tmp_path):
    """``psgs_w100.tsv.xz`` (or ``.bz2``) was "cannot guess the corpus format", and with ``--format dpr`` "not
    UTF-8 text": read as the plain file is."""
    import bz2
    import lzma

    plain = tmp_path / "psgs.tsv"
    plain.write_text("id\ttext\ttitle\n1\tAaron is a prophet\tAaron\n2\tSecond passage\tB\n")
    want = [(p.id, p.title, p.text) for p in read_corpus(str(plain))]
    for name, pack in (("psgs.tsv.xz", lzma.compress), ("psgs.tsv.bz2", bz2.compress)):
        (tmp_path / name).write_bytes(pack(plain.read_bytes()))
        assert [(p.id, p.title, p.text) for p in read_corpus(str(tmp_path / name))] == want


def test_ms_marco_and_pyserini_collections_read_as_passages(tmp_path):
    """MS MARCO's collection.tsv (no header: a numeric id, the text) was "expected header 'id<TAB>text<TAB>title'";
    a TSV whose header orders its columns otherwise was refused too; Pyserini's JSON lines (``contents`` the text
    alone) were indexed as passages all title and no text."""
    f = tmp_path / "collection.tsv"
    f.write_text("0\tThe presence of communication amid minds.\n7\tManhattan Project.\n")
    assert [(p.id, p.title, p.text) for p in read_corpus(str(f))] == [
        ("0", "", "The presence of communication amid minds."), ("7", "", "Manhattan Project.")]
    f.write_text("0\tone\n7\n")
    with pytest.raises(CorpusError, match=r"collection.tsv:2: expected 2 tab-separated columns \(id, text\), got 1"):
        list(read_corpus(str(f)))
    f.write_text("title\tid\ttext\nAaron\t1\tAaron is a prophet\n")
    assert [(p.id, p.title, p.text) for p in read_corpus(str(f))] == [("1", "Aaron", "Aaron is a prophet")]
    g = tmp_path / "pyserini.jsonl"
    g.write_text('{"id": "d1", "contents": "Paris is the capital of France."}\n'
                 '{"id": "d2", "contents": "\\"Lima\\"\\nLima is the capital of Peru."}\n'
                 '{"id": "d3", "title": "Quito", "contents": "Quito is the capital.\\nIt is high."}\n')
    assert [(p.id, p.title, p.text) for p in read_corpus(str(g))] == [
        ("d1", "", "Paris is the capital of France."), ("d2", "Lima", "Lima is the capital of Peru."),
        ("d3", "Quito", "Quito is the capital.\nIt is high.")]  # a title field: contents are all text


def test_hotpotqa_wikipedia_abstracts_read_with_their_sentences_joined(tmp_path):
    """The abstracts HotpotQA's full-wiki setting retrieves from (``wiki_00.bz2`` files of its Wikipedia dump)
    keep a passage as a list of sentences: "field 'text' should be str, got list"."""
    import bz2

    rec = {"id": "12", "url": "https://en.wikipedia.org/wiki?curid=12", "title": "Anarchism",
           "text": ["Anarchism is a political philosophy.", " It rejects hierarchy."], "charoffset": [[[0, 9]]]}
    f = tmp_path / "wiki_00.bz2"
    f.write_bytes(bz2.compress((json.dumps(rec) + "\n").encode()))
    assert [(p.id, p.title, p.text) for p in read_corpus(str(f))] == [
        ("12", "Anarchism", "Anarchism is a political philosophy. It rejects hierarchy.")]


def test_an_index_folder_that_cannot_be_made_is_one_line_before_any_passage_is_read(tmp_path):
    """A file on the index's way was a traceback ("FileExistsError: [Errno 17] File exists"), and /proc "[Errno
    2] No such file or directory: '/proc/.idx.building-9610'"; through the command, ``build_index`` and the engine."""
    from seakr.search import Passage
    from seakr.search.build import build_index
    from seakr.search.tantivy_engine import TantivyEngine

    (tmp_path / "file").write_text("x")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "title": "A", "text": "alpha"}\n')
    cases = [(tmp_path / "file" / "idx", f"{tmp_path / 'file'} is not a directory"),
             (tmp_path / "file" / "a" / "idx", f"{tmp_path / 'file'} is not a directory")]
    if os.path.isdir("/proc/self"):
        cases.append(("/proc/seakr-idx", "/proc refuses new folders: "))
    for out, why in cases:
        r = run_cli("index", "build", str(corpus), "--out", str(out))
        assert r.returncode == 2 and r.stderr.startswith(f"seakr: error: --out {out}: cannot create the index folder "
                                                         f"({why}") and r.stderr.count("\n") == 1, r.stderr
        with pytest.raises(ValueError, match=re.escape(f"--out {out}: cannot create the index folder ({why}")):
            build_index([(str(corpus), "auto")], str(out))
        with pytest.raises(ValueError, match=re.escape(f"{out}: cannot create the index folder ({why}")):
            TantivyEngine.build([Passage("a", "A", "alpha")], out)  # the engine's own door, below build_index
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl", "file"]  # nothing tried is left


def test_a_corpus_folder_is_read_file_by_file_and_an_index_kept_out_of_it(tmp_path):
    """``seakr index build FOLDER`` (Pyserini's input; HotpotQA's extracted Wikipedia dump, a hundred folders of
    ``wiki_NN.bz2``) was "is a directory, expected a file". Its files are read in name order at any depth, each
    in its own format, hidden ones left out; an index inside the folder would read itself on a rebuild."""
    import bz2

    from seakr.search.build import build_index, check_index_out

    root = tmp_path / "wiki"
    for sub, i in (("AB", 0), ("AA", 1), ("AA", 0)):
        (root / sub).mkdir(parents=True, exist_ok=True)
        rec = {"id": f"{sub}{i}", "title": f"T{sub}{i}", "text": ["One.", " Two."]}
        (root / sub / f"wiki_0{i}.bz2").write_bytes(bz2.compress((json.dumps(rec) + "\n").encode()))
    (root / "AA" / "dpr.tsv").write_text("id\ttext\ttitle\n9\tA passage.\tNine\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (root / ".DS_Store").write_bytes(b"\0\1")
    assert [p.id for p in read_corpus(str(root))] == ["9", "AA0", "AA1", "AB0"]
    assert "4 passages" in build_index([(str(root), "auto")], str(tmp_path / "idx"))
    for out in (root / "idx", root / "AA" / "deep" / "idx"):
        with pytest.raises(ValueError, match=rf"--out {out}: inside the corpus folder {root}"):
            check_index_out(str(out), [str(root)])
    (tmp_path / "empty" / ".hidden").mkdir(parents=True)
    with pytest.raises(CorpusError, match=r"empty: a folder with no corpus files in it"):
        list(read_corpus(str(tmp_path / "empty")))


def test_musique_paragraphs_index_with_the_ids_an_eval_pools_them_under(tmp_path):
    """`seakr index build musique_dev.jsonl` was "cannot guess the corpus format" (MuSiQue had no corpus format),
    so several MuSiQue files could not share one index; its passages carry the ids `seakr eval` gives them."""
    from seakr.eval.corpus import pooled_passages
    from seakr.eval.datasets import load_dataset

    recs = [{"id": f"2hop__{i}", "question": "Capital?", "answer": "Lima", "answerable": True, "paragraphs": [
        {"idx": 0, "title": "Lima", "paragraph_text": " Lima is the capital of Peru. ", "is_supporting": True},
        {"idx": 1, "title": None, "paragraph_text": f"Paragraph {i}.", "is_supporting": False}]} for i in range(2)]
    f = tmp_path / "musique_ans_v1.0_dev.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert detect_format(str(f)) == "musique"
    want = {p.id: (p.title, p.text) for p in pooled_passages(load_dataset(f))}
    got = [(p.id, p.title, p.text) for p in read_corpus(str(f))]
    assert len(got) == 3 and {i: (t, x) for i, t, x in got} == want  # "Lima" once: pooled by content


def test_a_beir_corpus_is_read_as_json_lines(tmp_path):
    """BEIR's corpus.jsonl (the usual layout of retrieval benchmarks) names the id "_id": it was "cannot guess
    the corpus format", and with --format jsonl "missing field 'id'" on its first line."""
    f = tmp_path / "corpus.jsonl"
    f.write_text('{"_id": "d1", "title": "Alien", "text": "A 1979 film by Ridley Scott.", "metadata": {}}\n'
                 '{"_id": "d2", "title": "", "text": "No title here."}\n')
    assert detect_format(str(f)) == "jsonl"
    assert [(p.id, p.title, p.text) for p in read_corpus(str(f))] == [("d1", "Alien", "A 1979 film by Ridley Scott."),
                                                                     ("d2", "", "No title here.")]
    for line, says in (('{"_id": " ", "text": "x"}', "field _id: empty"), ('{"title": "T", "text": "x"}', "missing field 'id'")):
        f.write_text(line + "\n")
        with pytest.raises(CorpusError, match=f"corpus.jsonl:1: {says}"):
            list(read_corpus(str(f), "jsonl"))


def test_malformed_jsonl_names_file_line_field(tmp_path):
    f = tmp_path / "c.jsonl"
    f.write_text('{"id": "a", "title": "T", "text": "ok"}\n{"id": "b", "title": "T"}\n')
    with pytest.raises(CorpusError, match=r"c.jsonl:2: missing field 'text'"):
        list(read_corpus(str(f), "jsonl"))
    f.write_text('{"id": "a", "contents": "x"}\n{broken\n')
    with pytest.raises(CorpusError, match=r"c.jsonl:2: invalid JSON"):
        list(read_corpus(str(f), "flashrag"))
    f.write_text('{"id": "a", "text": 5, "title": ""}\n{"id": "b", "text": ["x", null]}\n')  # sentences are text
    with pytest.raises(CorpusError, match=r"c.jsonl:2: field text: expected text or a list of texts or null, got"):
        list(read_corpus(str(f), "jsonl"))
    g = tmp_path / "h.json"
    g.write_text(json.dumps([{"_id": "x", "question": "q", "context": "oops"}]))
    with pytest.raises(CorpusError, match="field context: has an unknown layout"):
        list(read_corpus(str(g), "hotpotqa"))
    z = tmp_path / "nq.jsonl.gz"
    with gzip.open(z, "wt") as fh:
        fh.write('{"question": "q", "answers": ["a"]}\n')
    with pytest.raises(CorpusError, match=r"nq.jsonl.gz:1: missing field 'ctxs'"):
        list(read_corpus(str(z), "nq"))
    with pytest.raises(CorpusError, match="no such file"):
        list(read_corpus(str(tmp_path / "nope.jsonl"), "jsonl"))
    f.write_text('{"id": "a", "title": "T", "text": "ok"}\n{"id": " ", "title": "T", "text": "x"}\n')
    with pytest.raises(CorpusError, match=r"c.jsonl:2: field id: empty"):  # ids name passages in traces and rows
        list(read_corpus(str(f), "jsonl"))
    for blank in ("", "\n\n  \n"):  # read as "cannot guess the format; pass --format" before
        f.write_text(blank)
        with pytest.raises(CorpusError, match=r"c.jsonl: the file is empty: no passages to index"):
            detect_format(str(f))


def test_nan_a_missing_value_is_no_title_and_no_text_not_the_word_nan(tmp_path):
    """Python's json writes a table's missing cell as NaN: a passage was indexed with the title or the text
    "nan" (and an id "nan" for each). A missing title is none; a missing text or id is named."""
    f = tmp_path / "c.jsonl"
    f.write_text('{"id": "a", "title": NaN, "text": "Alpha beta"}\n')
    assert [(p.id, p.title, p.text) for p in read_corpus(str(f))] == [("a", "", "Alpha beta")]
    for field, rec in (("text", '{"id": "a", "title": "T", "text": NaN}'), ("id", '{"id": NaN, "text": "x"}')):
        f.write_text(rec + "\n")
        with pytest.raises(CorpusError, match=rf"c.jsonl:1: field {field}: NaN \(a missing value\), not text$"):
            list(read_corpus(str(f), "jsonl"))


def test_a_quoted_glob_of_corpus_files_is_the_files_it_matches(tmp_path):
    """`seakr index build 'wiki/*.jsonl'` from a script or a Makefile (no shell expands it) was "no such file",
    where `--data` takes a quoted glob."""
    from seakr.search.build import pair_sources

    for name in ("b.jsonl", "a.jsonl", "notes.txt"):
        (tmp_path / name).write_text('{"id": "%s", "text": "x"}\n' % name)
    assert pair_sources([str(tmp_path / "*.jsonl"), "c.tsv"], ["jsonl", "dpr"]) == [
        (str(tmp_path / "a.jsonl"), "jsonl"), (str(tmp_path / "b.jsonl"), "jsonl"), ("c.tsv", "dpr")]
    with pytest.raises(ValueError, match=r"\*.tsv: no file matches this pattern$"):
        pair_sources([str(tmp_path / "*.tsv")], ["auto"])


def test_questions_given_to_index_are_named_as_a_dataset(tmp_path):
    """Questions without passages given to `index build` were "cannot guess the corpus format; pass --format", and
    no format finds passages in them."""
    for name, text in (("nq.jsonl", '{"question": "who wrote hamlet", "answer": ["Shakespeare"]}\n'),
                       ("qa.csv", "question,answer\nWho?,x\n")):
        (tmp_path / name).write_text(text)
        with pytest.raises(CorpusError, match=rf"{name}: questions \(a dataset\), without passages to index: give it to "
                                              r"`seakr eval --data`, and the passages to search to `seakr index build`$"):
            detect_format(str(tmp_path / name))
    (tmp_path / "odd.jsonl").write_text('{"x": 1}\n')  # neither: each reader's own words, no loop between the two
    with pytest.raises(CorpusError, match=r"odd.jsonl: cannot guess the corpus format; pass --format"):
        detect_format(str(tmp_path / "odd.jsonl"))


def test_sentences_are_joined_with_one_space_where_none_separates_them():
    from seakr.search.records import join_sentences

    assert join_sentences(["He was born in 1685.", "He died in 1750."]) == "He was born in 1685. He died in 1750."
    assert join_sentences(["A is B.", " C is D."]) == "A is B. C is D."  # HotpotQA's leading spaces kept as they are
    assert join_sentences("one string") == "one string"


def test_a_byte_order_mark_and_windows_line_ends(tmp_path):
    f = tmp_path / "psgs.tsv"
    f.write_bytes(b"\xef\xbb\xbfid\ttext\ttitle\r\n1\tAaron is a prophet\tAaron\r\n")
    assert [(p.id, p.title, p.text) for p in read_corpus(str(f))] == [("1", "Aaron", "Aaron is a prophet")]
    j = tmp_path / "c.jsonl"
    j.write_bytes(b'\xef\xbb\xbf{"id": "a", "title": "T", "text": "ok"}\r\n')
    assert [(p.id, p.title, p.text) for p in read_corpus(str(j))] == [("a", "T", "ok")]


CORPUS_RECORDS = {
    "jsonl": ("lines", {"id": "a", "title": "T", "text": "t"}),
    "flashrag": ("lines", {"id": "a", "contents": "\"T\"\nt"}),
    "hotpotqa": ("list", {"_id": "a", "question": "q", "answer": "x", "context": [["T", ["s1.", "s2."]]]}),
    "2wiki": ("lines", {"id": "a", "question": "q", "golden_answers": ["x"],
                        "metadata": {"context": {"title": ["T"], "content": [["s."]]}}}),
    "squad": ("object", {"data": [{"title": "T", "paragraphs": [{"context": "c", "qas": []}]}]}),
    "nq": ("lines", {"question": "q", "answers": ["x"], "ctxs": [{"title": "T", "text": "t"}]}),
    "musique": ("lines", {"id": "a", "question": "q", "answer": "x", "paragraphs": [
        {"idx": 0, "title": "T", "paragraph_text": "t", "is_supporting": True}]}),
}


@pytest.mark.parametrize("fmt", sorted(CORPUS_RECORDS))
def test_a_corpus_record_of_another_shape_is_read_as_text_or_named(tmp_path, fmt):
    """`seakr index build` over records of another shape: SQuAD's `data: [5]` or NQ's `ctxs[0].text: 5`
    were tracebacks naming no file, and a JSON-lines title `[5]` or `{"a": 1}` was indexed as a list."""
    kind, rec = CORPUS_RECORDS[fmt]
    f = tmp_path / "c.json"
    write_records(f, kind, rec)
    assert list(read_corpus(str(f), fmt))
    for case, changed in reshaped(rec):
        write_records(f, kind, changed)
        try:
            passages = list(read_corpus(str(f), fmt))
        except CorpusError as e:
            assert str(f) in str(e) and "\n" not in str(e), (case, str(e))
            continue
        for p in passages:
            assert all(isinstance(x, str) and x != "None" and "{'" not in x for x in (p.id, p.title, p.text)), (case, p)


@pytest.mark.parametrize("fmt", sorted(CORPUS_RECORDS))
def test_half_a_surrogate_pair_in_a_corpus_is_named_with_its_line(tmp_path, fmt):
    """A title or text escaping half a surrogate pair reached tantivy, whose "Value unsupported 'Ham\\ud800let'"
    named neither the file nor the passage. Every reader refuses it with the file and line."""
    kind, rec = CORPUS_RECORDS[fmt]
    f = tmp_path / "c.json"
    write_records(f, kind, rec)
    text = f.read_text()
    fields = [field for field in ('"T', '"t', '"s1.', '"c"', '"s.') if field in text]
    assert fields
    for field in fields:
        f.write_text(text.replace(field, field[:1] + "\\udc00" + field[1:], 1))
        with pytest.raises(CorpusError, match=f"^{f}:1: .udc00 is half of a surrogate pair"):
            list(read_corpus(str(f), fmt))


def test_an_index_refuses_what_is_not_text_and_a_search_what_is_not_a_query(tmp_path, monkeypatch):
    """The Python API's doors past the corpus readers: a Passage built by hand, a query typed by hand (both were
    tantivy's or the encoder's errors naming nothing), and Elasticsearch's ingest, which checked nothing."""
    from seakr.search import Passage
    from seakr.search.elastic import ElasticEngine
    from seakr.search.tantivy_engine import TantivyEngine

    out = tmp_path / "idx"
    with pytest.raises(ValueError, match=r"^passage title: not valid UTF-8 text"):  # refused where it is made
        Passage("b", "Ham\udcfflet", "x")
    eng = TantivyEngine.build([Passage("a", "Hamlet", "A play.")], out)
    for q in ("Hamlet \ud800", "\udcff"):
        with pytest.raises(ValueError, match="search: the query is not valid UTF-8 text"):
            eng.search(q)
    assert [p.id for p in eng.search("Hamlet \U0001F600")] == ["a"]

    class Client:  # an Elasticsearch client's calls the ingest makes around its stream
        indices = type("I", (), {"refresh": staticmethod(lambda index: None), "get_mapping": staticmethod(
            lambda index: {index: {"mappings": {"properties": {"title": {}, "text": {}}}}})})()

        def count(self, index):
            return {"count": 0}

    import elasticsearch.helpers

    def streaming_bulk(client, actions, **kw):
        for a in actions:
            yield True, a
    monkeypatch.setattr(elasticsearch.helpers, "streaming_bulk", streaming_bulk)
    es = ElasticEngine(Client(), "wiki", url="http://localhost:9200/wiki")
    with pytest.raises(TypeError, match="passage 0: expected a seakr.search.Passage"):
        es.ingest([{"id": "a", "title": "T", "text": "t"}])
    with pytest.raises(ValueError, match=r"passage text: not valid UTF-8 text"):  # refused where it is made
        Passage("a", "T", "t\ud800")


def test_a_csv_of_passages_is_a_corpus(tmp_path):
    """A spreadsheet's CSV of passages (``title,text``; ``id`` optional; semicolons where the decimal mark is a
    comma) was "cannot guess the corpus format", and no ``--format`` read it; a TSV without an id column was
    "expected header". Rows without ids get the pooled content ids; a row with the delimiter unquoted in its
    text is refused (it was cut there), as is a question-answer table given as passages."""
    f = tmp_path / "docs.csv"
    f.write_text('title,text\nParis,"Paris is the capital of France, on the Seine."\n\nLima,Lima is in Peru.\n')
    got = [(p.id, p.title, p.text) for p in read_corpus(str(f))]
    assert got == [(ctx_id("Paris", "Paris is the capital of France, on the Seine."), "Paris",
                    "Paris is the capital of France, on the Seine."), (ctx_id("Lima", "Lima is in Peru."), "Lima", "Lima is in Peru.")]
    f.write_text("ID;Text;Title\nd1;Ein Satz.;Titel\n")
    assert [(p.id, p.title, p.text) for p in read_corpus(str(f), "table")] == [("d1", "Titel", "Ein Satz.")]
    (tmp_path / "docs.tsv").write_text("title\ttext\nLima\tLima is in Peru.\n")
    assert [p.id for p in read_corpus(str(tmp_path / "docs.tsv"))] == [ctx_id("Lima", "Lima is in Peru.")]
    for content, needle in (("id;title;text\n1;A;one; two\n", r"docs.csv:2: expected 3 columns split by ';' \(as the header\), got 4"),
                            ("name,body\nA,b\n", r"docs.csv:1: expected a header naming a 'text' column"),
                            ("id,text,Text\n1,a,b\n", r"docs.csv:1: 'text' names columns 2 and 3: which is meant"),
                            ("question,answer\nWho?,Bob\n", r"docs.csv: questions \(a dataset\), without passages")):
        f.write_text(content)
        with pytest.raises(CorpusError, match=needle):
            list(read_corpus(str(f)))


def test_long_documents_are_cut_into_passages_of_the_words_asked(tmp_path, capsys):
    """A document of 250 words was one passage: a method put all of it into its prompt (cut to fit the
    context) and BM25 scored it as one bag of words. `--passage-words 100` makes DPR-style passages."""
    from seakr.cli import main
    from seakr.search import Passage, open_engine, split_passages

    words = [f"w{i}" for i in range(250)]
    doc, short = Passage("d", "Long", " ".join(words) + " tower"), Passage("s", "Short", "a short passage")
    parts = list(split_passages([doc, short], 100))
    assert [(p.id, p.title, len(p.text.split())) for p in parts] == [
        ("d#1", "Long", 100), ("d#2", "Long", 100), ("d#3", "Long", 51), ("s", "Short", 3)]
    assert " ".join(p.text for p in parts[:3]) == doc.text  # nothing lost, in order
    assert list(split_passages([doc], None)) == [doc]
    for bad in (0, -1, 2.5, True, "100"):
        with pytest.raises(ValueError, match=r"^passage words: expected a whole number in \[1, inf\) or null, got"):
            list(split_passages([doc], bad))
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"id": p.id, "title": p.title, "text": p.text}) + "\n"
                                              for p in (doc, short)))
    assert main(["index", "build", str(tmp_path / "c.jsonl"), "--out", str(tmp_path / "idx"),
                 "--passage-words", "100"]) == 0
    eng = open_engine(str(tmp_path / "idx"))
    assert eng.count() == 4 and [h.id for h in eng.search("tower", 1)] == ["d#3"]
    assert eng.metadata()["sources"] == [f"auto:{tmp_path / 'c.jsonl'}, 100-word passages"]
    with pytest.raises(SystemExit):  # refused by the parser, before any corpus is read
        main(["index", "build", str(tmp_path / "c.jsonl"), "--out", str(tmp_path / "idx0"), "--passage-words", "0"])
    assert "--passage-words: expected a whole number in [1, inf)" in capsys.readouterr().err
    from seakr.search.build import build_index
    with pytest.raises(ValueError, match="passage words"):
        build_index([(str(tmp_path / "missing.jsonl"), "auto")], str(tmp_path / "idx1"), passage_words=0)


def test_documents_given_in_code_are_cut_as_the_index_build_cuts_them():
    from seakr.search import passages_engine

    eng = passages_engine(["alpha " * 150 + "tower", "a short one"], passage_words=100)
    assert eng.count() == 3 and [h.id for h in eng.search("tower", 1)] == ["doc-0#2"]
    assert passages_engine(["alpha " * 150]).count() == 1  # as given by default
    with pytest.raises(ValueError, match="passage words"):
        passages_engine(["x"], passage_words=0)


def test_a_corpus_of_long_documents_given_as_the_index_says_how_to_cut_them(tmp_path, monkeypatch, capsys):
    from seakr.search import open_engine

    monkeypatch.setenv("SEAKR_CACHE", str(tmp_path / "cache"))
    (tmp_path / "my docs.jsonl").write_text(json.dumps({"id": "d", "title": "Long", "text": "word " * 1500}) + "\n"
                                            + json.dumps({"id": "s", "title": "Short", "text": "a short one"}) + "\n")
    assert open_engine(str(tmp_path / "my docs.jsonl")).count() == 2  # taken as given
    err = capsys.readouterr().err
    assert "1 passage is longer than 1,000 words" in err
    assert f"`seakr index build '{tmp_path / 'my docs.jsonl'}' --out IDX --passage-words 100`" in err
    open_engine(str(tmp_path / "my docs.jsonl"))  # cached: said once
    assert "longer than" not in capsys.readouterr().err


def test_long_documents_indexed_as_given_are_told_at_every_door(tmp_path, capsys):
    """`seakr index build` and `passages_engine` took a 1,500-word document whole without a word, where a corpus
    given as the index said so: each door now names the long passages and what cuts them, once."""
    from seakr.cli import main
    from seakr.search import passages_engine
    from seakr.search.build import build_index

    docs = [{"id": "d", "title": "Long", "text": "word " * 1500}, {"id": "s", "title": "Short", "text": "a short one"}]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    assert main(["index", "build", str(tmp_path / "c.jsonl"), "--out", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a: 1 passage is longer than 1,000 words" in err[0] and "--passage-words 100" in err[0]
    build_index([(str(tmp_path / "c.jsonl"), "jsonl")], str(tmp_path / "b"))
    assert "passage_words=100" in capsys.readouterr().err
    assert passages_engine(docs).count() == 2
    assert "`passages_engine(docs, passage_words=100)` cuts them" in capsys.readouterr().err
    # cut, or short: nothing to say
    assert main(["index", "build", str(tmp_path / "c.jsonl"), "--out", str(tmp_path / "c"), "--passage-words", "100"]) == 0
    passages_engine(docs, passage_words=100), passages_engine(docs[1:])
    assert "longer than" not in capsys.readouterr().err


def test_long_passages_are_counted_as_written_not_as_read(tmp_path, capsys):
    """`index build --add` warned of long passages whose ids the index already held and then skipped: counted as
    the corpus was read, before the duplicate check. Counted as written, a skipped duplicate says nothing, in a
    build and in an add, and the index's manifest keeps the count."""
    from seakr.cli import main
    from seakr.search.tantivy_engine import TantivyEngine

    long = "word " * 1500
    (tmp_path / "a.jsonl").write_text(json.dumps({"id": "d", "title": "Long", "text": long}) + "\n")
    (tmp_path / "twice.jsonl").write_text("".join(json.dumps({"id": i, "title": "T", "text": long}) + "\n"
                                                  for i in ("d", "d", "e", "e", "e")))
    assert main(["index", "build", str(tmp_path / "a.jsonl"), "--out", str(tmp_path / "idx")]) == 0
    assert "1 passage is longer than" in capsys.readouterr().err
    assert main(["index", "build", str(tmp_path / "a.jsonl"), "--out", str(tmp_path / "idx"), "--add"]) == 0
    out, err = capsys.readouterr()
    assert "added 0 passages (1 duplicate ids" in out and "longer than" not in err
    assert main(["index", "build", str(tmp_path / "twice.jsonl"), "--out", str(tmp_path / "idx"), "--add"]) == 0
    assert "idx: 1 passage is longer than" in capsys.readouterr().err  # e, once; d was there
    assert TantivyEngine(tmp_path / "idx").manifest["long_passages"] == 2
    assert main(["index", "build", str(tmp_path / "twice.jsonl"), "--out", str(tmp_path / "new")]) == 0
    assert "new: 2 passages are longer than" in capsys.readouterr().err  # d and e, each once


def _through_a_pipe(data: bytes, fmt: str) -> list:
    """The passages ``read_corpus`` reads of ``data`` written into a pipe (what `seakr index build - --format F`
    and `<(zcat f.gz)` hand the readers: a file that can be read once; reopened, an empty one)."""
    import threading

    r, w = os.pipe()

    def write():
        with os.fdopen(w, "wb") as f:
            f.write(data)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        return list(read_corpus(f"/dev/fd/{r}", fmt))
    finally:
        writer.join(timeout=10)
        os.close(r)


@pytest.mark.skipif(not os.path.exists("/dev/fd"), reason="a pipe named as a file: Linux, macOS")
def test_json_lines_from_a_pipe_are_read_as_they_come():
    """`zcat train.jsonl.gz | seakr index build - --format hotpotqa` held the whole pipe in memory before the
    first passage (its layout is told from the head, and a pipe cannot be read twice): the head is kept, the rest
    streamed. Here the writer sends its second record only after the reader has the first record's passages."""
    import threading

    recs = [json.loads(line) for line in open(fixture_path("2wiki_mini.flashrag.jsonl"), encoding="utf-8")]
    first = json.dumps(recs[0]) + "\n" + " " * 4096 + "\n"  # past the head the layout is told from
    got_first, gave_up = threading.Event(), threading.Event()
    r, w = os.pipe()

    def write():
        with os.fdopen(w, "wb") as f:
            f.write(first.encode())
            f.flush()
            if not got_first.wait(timeout=10):  # read whole, the reader waits for the pipe's end: it comes now
                gave_up.set()
            f.write((json.dumps(recs[1]) + "\n").encode())

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        passages = read_corpus(f"/dev/fd/{r}", "2wiki")
        titles = {p.title for p in itertools.islice(passages, 1)}
        assert not gave_up.is_set() and titles <= set(recs[0]["metadata"]["context"]["title"]), titles
        got_first.set()
        assert len(list(passages)) > 0
    finally:
        got_first.set()
        writer.join(timeout=10)
        os.close(r)


@pytest.mark.skipif(not os.path.exists("/dev/fd"), reason="a pipe named as a file: Linux, macOS")
@pytest.mark.parametrize("name,fmt,lines", [
    ("hotpotqa_mini.official.json", "hotpotqa", False),
    ("hotpotqa_mini.official.json", "hotpotqa", True),
    ("2wiki_mini.flashrag.jsonl", "2wiki", False),
    ("squad_mini.json", "squad", False),
])
def test_a_layout_told_from_its_head_reads_from_a_pipe(name, fmt, lines):
    """HotpotQA's, 2Wiki's and SQuAD's readers peek at the head to tell the official JSON from Hugging Face's
    lines, then read the file again: from stdin the second read found nothing ("/dev/stdin:1: invalid JSON")."""
    data = open(fixture_path(name), "rb").read()
    if lines:  # the same records as JSON lines
        data = "".join(json.dumps(r) + "\n" for r in json.loads(data)).encode()
    assert _through_a_pipe(data, fmt) == list(read_corpus(fixture_path(name), fmt))
    with pytest.raises(CorpusError, match=r"^/dev/fd/\d+:\d+: invalid JSON"):  # still named as the file it is
        _through_a_pipe(data[:len(data) // 2] if not lines else b"{\"_id\": ", fmt)
