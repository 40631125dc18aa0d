"""Dataset loaders on the real shared files and on small official-format files written here."""

import json
import re
import sys

import pytest

from helpers import HOTPOT, fixture_path, shared_path
from seakr.common.layouts import DatasetError
from seakr.eval.datasets import detect_layout, load_dataset


@pytest.mark.parametrize("parts,layout,n", [
    (("hotpotqa", "dev_hard100.hf.jsonl"), "hotpotqa", 100),
    (("hotpotqa", "dev_first53.official.json"), "hotpotqa", 53),
    (("2wikimultihopqa", "dev_first100.flashrag.jsonl"), "2wiki", 100),
    (("2wikimultihopqa", "extra500_maybe_train.official.json"), "2wiki", 500),
    (("nq", "dev_oracle_first1000.jsonl.gz"), "nq", 1000),
    (("squad", "dev_part1.squad.json"), "squad", 4961),
    (("hotpotqa", "train_first10000.qa_sftitles.simrag.csv"), "qa-csv", 10000),
    (("2wikimultihopqa", "train_first10000.qa_sftitles.simrag.csv"), "qa-csv", 10000),
    (("musique", "train_hipporag100.official.jsonl"), "musique", 100),
])
def test_real_files(parts, layout, n):
    path = shared_path(*parts)
    assert detect_layout(path) == layout
    exs = load_dataset(path)
    assert len(exs) == n
    assert all(e.question and e.answers and e.id for e in exs)
    if layout in ("hotpotqa", "2wiki", "musique"):
        assert all(e.contexts and e.supporting_titles for e in exs)
        assert all(set(e.supporting_titles) <= {t for t, _ in e.contexts} for e in exs[:20])


def test_a_compressed_dataset_reads_as_the_plain_file(tmp_path):
    """HotpotQA's official file as ``.json.bz2`` or ``.json.xz`` was "not UTF-8 text (byte 0xd6 ...)"."""
    import bz2
    import lzma

    plain = fixture_path("hotpotqa_mini.official.json")
    want = [e.to_dict() for e in load_dataset(plain)]
    for name, pack in (("hotpot_dev.json.bz2", bz2.compress), ("hotpot_dev.json.xz", lzma.compress)):
        (tmp_path / name).write_bytes(pack(open(plain, "rb").read()))
        assert detect_layout(str(tmp_path / name)) == "hotpotqa"
        assert [e.to_dict() for e in load_dataset(tmp_path / name)] == want


@pytest.mark.parametrize("name,layout,n", [
    ("hotpotqa_mini.official.json", "hotpotqa", 12),
    ("2wiki_mini.flashrag.jsonl", "2wiki", 4),
    ("nq_mini.oracle.jsonl", "nq", 6),
    ("squad_mini.json", "squad", 3),
    ("qa_mini.qa.csv", "qa-csv", 3),
])
def test_fixture_files(name, layout, n):
    path = fixture_path(name)
    assert detect_layout(path) == layout
    exs = load_dataset(path)
    assert len(exs) == n and all(e.question and e.answers and e.id for e in exs)
    if layout in ("hotpotqa", "2wiki"):
        assert all(e.contexts and set(e.supporting_titles) <= {t for t, _ in e.contexts} for e in exs)
    assert load_dataset(HOTPOT)[0].answers == ["American"]


def test_2wiki_flashrag_aliases():
    exs = load_dataset(fixture_path("2wiki_mini.flashrag.jsonl"))
    assert any(len(e.answers) > 1 for e in exs)  # answer + aliases


def test_triviaqa_official(tmp_path):
    f = tmp_path / "wikipedia-dev.json"
    f.write_text(json.dumps({"Data": [{"Question": "Which planet is the Red Planet?", "QuestionId": "tq1",
                                       "Answer": {"Value": "Mars", "Aliases": ["Mars", "Planet Mars"], "Type": "WikipediaEntity"}}],
                             "Domain": "Wikipedia", "Version": 1.0}))
    exs = load_dataset(str(f))
    assert exs[0].answers == ["Mars", "Planet Mars"] and exs[0].dataset == "triviaqa"


def test_iirc_official_drops_unanswerable(tmp_path):
    f = tmp_path / "iirc_dev.json"
    f.write_text(json.dumps([{"title": "Jaws", "links": [], "text": "...", "questions": [
        {"qid": "a", "question": "How old?", "answer": {"type": "value", "answer_value": "27", "answer_unit": "years"}},
        {"qid": "b", "question": "Who?", "answer": {"type": "span", "answer_spans": [{"text": "Steven Spielberg"}]}},
        {"qid": "c", "question": "Why?", "answer": {"type": "none"}},
        {"qid": "d", "question": "Was it?", "answer": {"type": "binary", "answer_value": "yes"}}]}]))
    exs = load_dataset(str(f))
    assert [(e.id, e.answers) for e in exs] == [("a", ["27"]), ("b", ["Steven Spielberg"]), ("d", ["yes"])]
    q = {"question": "Who?", "answer": {"type": "span", "answer_spans": [{"text": "X"}]}}  # no qid: ids made up
    f.write_text(json.dumps([{"title": "A", "questions": [q]}, {"title": "B", "questions": [q]}]))
    assert [e.id for e in load_dataset(str(f))] == ["iirc-0-0", "iirc-1-0"]  # unique across passages


def test_flashrag_generic(tmp_path):
    f = tmp_path / "test.jsonl"
    f.write_text('{"id": "1", "question": "q?", "golden_answers": ["a", "b"]}\n')
    assert load_dataset(str(f), "flashrag")[0].answers == ["a", "b"]


def test_malformed_files_name_file_line_field(tmp_path):
    f = tmp_path / "hotpot.jsonl"
    f.write_text('{"id": "1", "question": "q", "answer": "a"}\n{"id": "2", "question": "q"}\n')
    with pytest.raises(DatasetError, match=r"hotpot.jsonl:2: question '2' has no gold answer, but 1 other\(s\) have; "
                                           r"give it one, or leave out every answer to run the questions unscored$"):
        load_dataset(str(f), "hotpotqa")
    f.write_text('{"id": "1", "question": "q", "answer": "a"}\n{oops\n')
    with pytest.raises(DatasetError, match=r"hotpot.jsonl:2: invalid JSON"):
        load_dataset(str(f), "hotpotqa")
    g = tmp_path / "iirc.json"
    g.write_text(json.dumps([{"questions": [{"qid": "x", "question": "q", "answer": {"type": "weird"}}]}]))
    with pytest.raises(DatasetError, match=r"record 0: field questions\[0\].answer.type: one of span, value, binary, none, not 'weird'"):
        load_dataset(str(g), "iirc")
    with pytest.raises(DatasetError, match="no such file"):
        load_dataset(str(tmp_path / "none.json"), "hotpotqa")
    for empty in ("", "\n \n", "[]"):  # "cannot tell the dataset layout; pass --layout" before
        f.write_text(empty)
        with pytest.raises(DatasetError, match=r"hotpot.jsonl: no questions in this file"):
            load_dataset(str(f))


def test_qa_csv_reads_list_strings_and_names_a_bad_line(tmp_path):
    exs = load_dataset(fixture_path("qa_mini.qa.csv"))
    assert exs[1].answers == ["Paris", "Paris, France"] and exs[1].supporting_titles == ["Paris", "Lyon"]
    assert exs[2].supporting_titles == [] and not exs[0].contexts
    bad = tmp_path / "bad.csv"
    bad.write_text("ID,Question,Answers,Documents\nq1,Who?,['a'],[]\nq2,Who?,not a list,[]\n")
    with pytest.raises(DatasetError, match=r"bad.csv:3: field 'Answers' should be a list"):
        load_dataset(str(bad))
    short = tmp_path / "short.csv"
    short.write_text("ID,Question,Answers,Documents\nq1,Who?\n")
    with pytest.raises(DatasetError, match=r"short.csv:2: expected 4 fields"):
        load_dataset(str(short))
    short.write_text('ID,Question,Answers,Documents\nq1,"Who?,[\'a\'],[]\nq2,Who?,[\'b\'],[]\n')  # a quote left open
    with pytest.raises(DatasetError, match=r"short.csv:2: a quote opened in this row closes only on line 3, so lines "
                                           r"2-3 read as one row of 2 fields \(expected 4 fields"):
        load_dataset(str(short))
    table = tmp_path / "t.csv"  # a quoted question over two lines is one row, numbered by the line that ends it
    table.write_text('question,answer\n"Who wrote\nHamlet?",Shakespeare\n"x,y\nWho?,z\n')
    with pytest.raises(DatasetError, match=r"t.csv:4: a quote opened in this row closes only on line 5"):
        load_dataset(str(table))
    table.write_text('question,answer\n"Who wrote\nHamlet?",Shakespeare\n')
    assert [(e.id, e.question) for e in load_dataset(str(table))] == [("row-3", "Who wrote\nHamlet?")]
    long = tmp_path / "long.csv"  # a field over csv's 128 KB default: it was csv's traceback
    long.write_text("ID,Question,Answers,Documents\n" + 'q1,Who?,[\'a\'],"[\'' + "t" * 200_000 + '\']"\n')
    assert load_dataset(str(long))[0].supporting_titles == ["t" * 200_000]


def test_a_csv_field_past_the_line_bound_names_file_and_line(tmp_path, monkeypatch):
    """A quoted field may run over many lines, each under the line bound: csv's own limit then refuses it, once
    a traceback ("_csv.Error: field larger than field limit"), now one line."""

    monkeypatch.setattr("seakr.eval.qatables.MAX_LINE", 1000)
    f = tmp_path / "many.csv"
    f.write_text("ID,Question,Answers,Documents\n" + 'q1,Who?,[\'a\'],"[\'' + ("t" * 500 + "\n") * 5 + '\']"\n')
    with pytest.raises(DatasetError, match=r"many.csv:\d+: not readable as CSV \(field larger than field limit"):
        load_dataset(str(f))


@pytest.mark.parametrize("lines,needle", [
    (['{"id": "a", "question": "q1", "golden_answers": ["x"]}', '{"id": "a", "question": "q2", "golden_answers": ["y"]}'],
     r"data.jsonl:2: id 'a' repeats the question at .*data.jsonl:1; ids must be unique"),
    (['{"id": "", "question": "q", "golden_answers": ["x"]}'], r"data.jsonl:1: example id: empty \(no visible text\)"),
    (['{"id": "a", "question": "  ", "golden_answers": ["x"]}'], r"data.jsonl:1: example question: empty \(no visible text\)"),
    (['{"id": "b", "question": "q", "golden_answers": ["x"]}', '{"id": "a", "question": "q", "golden_answers": []}'],
     r"data.jsonl:2: question 'a' has no gold answer, but 1 other\(s\) have"),
    (['{"id": "a", "question": "q", "golden_answers": [""]}', '{"id": "b", "question": "q", "golden_answers": ["x"]}'],
     r"data.jsonl:1: question 'a' has no gold answer, but 1 other\(s\) have"),
    (['{"id": "a", "question": "q", "golden_answers": [null]}'], r"data.jsonl:1: field golden_answers\[0\]: null is no answer"),
    # a null id was the id "None" (and two of them one id); an object its repr
    (['{"id": null, "question": "q", "golden_answers": ["x"]}'], r"data.jsonl:1: field id: expected a question id \(text or a whole number\), got None"),
    (['{"id": {"a": 1}, "question": "q", "golden_answers": ["x"]}'], r"data.jsonl:1: field id: expected a question id .*, got \{"),
    (['{"id": 1.5, "question": "q", "golden_answers": ["x"]}'], r"data.jsonl:1: field id: expected a question id .*, got 1.5"),
])
def test_every_question_needs_a_unique_id_a_question_and_an_answer(tmp_path, lines, needle):
    """Checked at load, whatever the layout: a repeated id would overwrite or skip a row on --resume and pair
    the wrong questions in a comparison; a question without a gold answer would score 0 silently."""
    f = tmp_path / "data.jsonl"
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(DatasetError, match=needle) as e:
        load_dataset(str(f), "flashrag")
    assert "\n" not in str(e.value)


def test_numbers_are_answers_and_squad_2_drops_unanswerable(tmp_path):
    f = tmp_path / "data.jsonl"
    f.write_text('{"id": 7, "question": "q", "golden_answers": [1969, "nineteen sixty-nine"]}\n')
    (ex,) = load_dataset(str(f), "flashrag")
    assert ex.id == "7" and ex.answers == ["1969", "nineteen sixty-nine"]
    f.write_text('{"id": "a", "question": "q", "answer": 1990.0}\n')  # a plain file's one number answer
    assert load_dataset(str(f))[0].answers == ["1990"]  # refused before; and "1990.0" normalised to "19900"
    g = tmp_path / "squad2.json"
    qas = [{"id": "1", "question": "q", "answers": [{"text": "a", "answer_start": 0}]},
           {"id": "2", "question": "q2", "answers": [], "is_impossible": True}]
    g.write_text(json.dumps({"version": "v2.0", "data": [{"title": "T", "paragraphs": [{"context": "a b", "qas": qas}]}]}))
    assert [e.id for e in load_dataset(str(g), "squad")] == ["1"]
    two = tmp_path / "two.json"
    two.write_text('[{"data": []}, {"data": []}]')
    with pytest.raises(DatasetError, match=r"two.json: expected one JSON object .* got 2 records"):
        load_dataset(str(two), "squad")


def test_musique_official(tmp_path):
    rec = {"id": "2hop__1", "question": "Who founded the journal?", "answer": "Stanley Hall",
           "answer_aliases": ["G. Stanley Hall"], "answerable": True,
           "paragraphs": [{"idx": 0, "title": "A", "paragraph_text": "a", "is_supporting": False},
                          {"idx": 1, "title": "Journal", "paragraph_text": "founded by Hall", "is_supporting": True}]}
    f = tmp_path / "musique_dev.jsonl"
    f.write_text(json.dumps(rec) + "\n" + json.dumps({**rec, "id": "2hop__2", "answerable": False}) + "\n")
    assert detect_layout(str(f)) == "musique"
    (ex,) = load_dataset(str(f))
    assert ex.answers == ["Stanley Hall", "G. Stanley Hall"] and ex.supporting_titles == ["Journal"]
    assert ex.contexts == [("A", "a"), ("Journal", "founded by Hall")] and ex.dataset == "musique"
    f.write_text(json.dumps({**rec, "paragraphs": [{"title": "A"}]}) + "\n")
    with pytest.raises(DatasetError, match=r"musique_dev.jsonl:1: missing field 'paragraphs\[0\].paragraph_text'"):
        load_dataset(str(f))


def test_a_path_object_reads_like_its_text(tmp_path):
    from pathlib import Path

    assert load_dataset(Path(HOTPOT)) == load_dataset(HOTPOT)  # it was an AttributeError: no 'endswith'


def test_nq_open_official_layout_and_plain_question_answer_files(tmp_path):
    """NQ-open's own release has no id and a list under ``answer``; a plain {id, question, answer} file is
    the layout a user writes by hand. Both are found without --layout."""
    f = tmp_path / "NQ-open.dev.jsonl"
    f.write_text('{"question": "who wrote hamlet", "answer": ["Shakespeare", "William Shakespeare"]}\n'
                 '{"question": "capital of peru", "answer": ["Lima"]}\n')
    assert detect_layout(str(f)) == "nq"
    assert [(e.id, e.answers) for e in load_dataset(str(f))] == [
        ("nq-0", ["Shakespeare", "William Shakespeare"]), ("nq-1", ["Lima"])]
    g = tmp_path / "mine.jsonl"
    g.write_text('{"id": "q1", "question": "Who?", "answer": "x"}\n')
    assert detect_layout(str(g)) == "nq" and load_dataset(str(g))[0].answers == ["x"]
    g.write_text('{"id": "q1", "question": "Who?", "answer": {"text": "x"}}\n')
    with pytest.raises(DatasetError, match=r"mine.jsonl:1: field answer: dict is no answer"):
        load_dataset(str(g))


def test_a_byte_order_mark_and_windows_line_ends_are_read_as_text(tmp_path):
    """Windows editors open a UTF-8 file with a BOM and end lines with CRLF: every reader takes both."""
    f = tmp_path / "dev.jsonl"
    f.write_bytes(b'\xef\xbb\xbf{"id": "a", "question": "Who?", "golden_answers": ["x"]}\r\n\r\n'
                  b'{"id": "b", "question": "Why?", "golden_answers": ["y"]}\r\n')
    assert [(e.id, e.question, e.answers) for e in load_dataset(str(f))] == [("a", "Who?", ["x"]), ("b", "Why?", ["y"])]
    j = tmp_path / "hotpot.json"
    j.write_bytes(b'\xef\xbb\xbf' + json.dumps([{"_id": "h", "question": "Q?", "answer": "A"}]).encode())
    assert load_dataset(str(j))[0].answers == ["A"]
    c = tmp_path / "qa.csv"
    c.write_bytes(b"\xef\xbb\xbfID,Question,Answers,Documents\r\nq1,Who?,['x'],['T']\r\n")
    assert load_dataset(str(c))[0].answers == ["x"]


def test_ids_that_are_whole_numbers_read_as_their_text_in_every_layout(tmp_path):
    """Some copies store 2Wiki, IIRC or plain ids as numbers: read as their text; null was "None" in every
    layout (NQ's plain files too, where a missing id is the line's number)."""
    f = tmp_path / "n.jsonl"
    f.write_text('{"id": 7, "question": "q", "answer": "x"}\n{"question": "r", "answer": "y"}\n')
    assert [e.id for e in load_dataset(str(f), "nq")] == ["7", "nq-1"]
    f.write_text('{"id": null, "question": "q", "answer": "x"}\n')
    with pytest.raises(DatasetError, match=r"n.jsonl:1: field id: expected a question id .*, got None"):
        load_dataset(str(f), "nq")
    h = tmp_path / "h.json"
    h.write_text(json.dumps([{"_id": None, "question": "q", "answer": "a", "context": []}]))
    with pytest.raises(DatasetError, match=r"h.json.*: field _id: expected a question id .*, got None"):
        load_dataset(str(h), "hotpotqa")


@pytest.mark.parametrize("change,needle", [
    ({"supporting_facts": [5]}, "field supporting_facts: should be [[title, sentence], ...]"),  # was a TypeError
    ({"supporting_facts": [[]]}, "field supporting_facts: should be"),  # was "not enough values to unpack"
    ({"supporting_facts": "T"}, "field supporting_facts: should be"),  # its letters were titles
    ({"supporting_facts": {"title": "T"}}, "field supporting_facts: should be"),
    ({"context": [[None, ["s."]]]}, "the title text"),  # the title "None"
    ({"context": {"title": [None], "sentences": [["s."]]}}, "'title' (text)"),
])
def test_supporting_facts_and_context_titles_of_another_shape_name_the_record(tmp_path, change, needle):
    f = tmp_path / "h.json"
    f.write_text(json.dumps([{"_id": "a", "question": "q?", "answer": "x", "supporting_facts": [["T", 0]],
                              "context": [["T", ["s1.", "s2."]]], **change}]))
    with pytest.raises(DatasetError, match=r"^.*h\.json.*record 0: .*" + re.escape(needle)):
        load_dataset(str(f), "hotpotqa")


def test_both_supporting_fact_layouts_and_none_read():
    from seakr.eval.records import HotpotQuestion

    def titles(sf):
        return HotpotQuestion(question="q", id="a", supporting_facts=sf).supporting_facts

    assert titles([["A", 0], ["B", 1], ["A", 2]]) == ["A", "B"]
    assert titles({"title": ["A", "A", "C"], "sent_id": [0, 1, 0]}) == ["A", "C"]
    assert titles(None) == [] and titles([]) == []


def test_a_question_type_is_text():
    from seakr.common.schema import SchemaError
    from seakr.eval.records import HotpotQuestion

    assert HotpotQuestion(question="q", id="a", type=None).type == "" and HotpotQuestion(
        question="q", id="a", type="bridge").type == "bridge"
    with pytest.raises(SchemaError, match=r"^field type: expected text \(a question's type\), got 5$"):
        HotpotQuestion(question="q", id="a", type=5)


def test_questions_no_answer_can_score_are_named_once(tmp_path, capsys):
    """HotpotQA's train split holds answers "A" and '""', which SQuAD's normalisation empties: those questions
    counted as wrong whatever was answered, without a word. They load (refusing would refuse the file), named."""
    f = tmp_path / "qa.jsonl"
    f.write_text("".join(json.dumps({"id": i, "question": f"Which letter {i}?", "golden_answers": a}) + "\n"
                         for i, a in (("q1", ["B"]), ("q2", ["A"]), ("q3", ['""', "The"]), ("q4", ["the A", "Ay"]))))
    for _ in range(2):  # a run reads its data twice (the plan's check, then the run): one warning
        assert [ex.id for ex in load_dataset(f, layout="flashrag")] == ["q1", "q2", "q3", "q4"]
    assert capsys.readouterr().err == (f"seakr: warning: {f}: 2 question(s) can never score, every gold answer being "
                                       "empty once normalised (e.g. 'q2': 'A'); they count as wrong whatever is answered\n")


def _squad_as_hugging_face(official: dict) -> list[dict]:
    """An official SQuAD file as ``datasets.load_dataset("squad").to_json()`` writes it: one question a record."""
    return [{"id": qa["id"], "title": art["title"], "context": para["context"], "question": qa["question"],
             "answers": {"text": [a["text"] for a in qa["answers"]], "answer_start": [a["answer_start"] for a in qa["answers"]]}}
            for art in official["data"] for para in art["paragraphs"] for qa in para["qas"]]


@pytest.mark.parametrize("as_list", [False, True])
def test_squad_and_triviaqa_in_hugging_face_layouts_read_as_their_official_files(tmp_path, as_list):
    """Most users take these sets from Hugging Face: SQuAD's records were "cannot tell the dataset layout" (or
    "missing field 'data'" named squad*), TriviaQA's "missing field 'Data'". Parity with the official layout: the
    same questions, answers, contexts and pooled passages; SQuAD 2.0's unanswerable questions are dropped."""
    from seakr.search.corpora import read_corpus

    official = json.loads(open(fixture_path("squad_mini.json")).read())
    recs = _squad_as_hugging_face(official) + [{"id": "v2-none", "title": "X", "context": "c", "question": "q?",
                                               "answers": {"text": [], "answer_start": []}}]
    hf = tmp_path / "validation.json"  # no dataset in the name: told by its fields
    hf.write_text(json.dumps(recs) if as_list else "".join(json.dumps(r) + "\n" for r in recs))
    assert detect_layout(str(hf)) == "squad"
    assert load_dataset(str(hf)) == load_dataset(fixture_path("squad_mini.json"))
    key = lambda p: (p.title, p.text)  # noqa: E731
    passages = sorted([*map(key, read_corpus(fixture_path("squad_mini.json"))), ("X", "c")])  # every paragraph is pooled
    assert sorted(map(key, read_corpus(str(hf), "squad"))) == passages
    tq = tmp_path / "tq.jsonl"
    tq.write_text(json.dumps({"question": "Who wrote Hamlet?", "question_id": "tc_1", "question_source": "web", "entity_pages": {},
                              "answer": {"aliases": ["Shakespeare", 5], "normalized_aliases": ["shakespeare"],
                                         "value": "William Shakespeare", "type": "WikipediaEntity"}}) + "\n")
    assert detect_layout(str(tq)) == "triviaqa"
    (ex,) = load_dataset(str(tq))
    assert (ex.id, ex.question, ex.answers, ex.dataset) == ("tc_1", "Who wrote Hamlet?", ["William Shakespeare", "Shakespeare"], "triviaqa")
    tq.write_text(json.dumps({"question": "q", "question_id": "t", "question_source": "web", "answer": {"aliases": []}}) + "\n")
    with pytest.raises(DatasetError, match=r"tq.jsonl:1: missing field 'answer.value'"):
        load_dataset(str(tq))


def _hotpot_as_hugging_face(rec: dict) -> dict:
    """An official HotpotQA record as the hub's Parquet holds it: struct columns of parallel lists."""
    return {"id": rec["_id"], "question": rec["question"], "answer": rec["answer"], "type": rec["type"], "level": rec["level"],
            "supporting_facts": {"title": [t for t, _ in rec["supporting_facts"]], "sent_id": [i for _, i in rec["supporting_facts"]]},
            "context": {"title": [t for t, _ in rec["context"]], "sentences": [s for _, s in rec["context"]]}}


def test_a_parquet_file_from_the_hub_reads_as_its_json_lines(tmp_path, monkeypatch):
    """The hub serves datasets as Parquet: HotpotQA's validation split (struct columns) and SQuAD's were "not
    UTF-8 text (byte 0x50 at column 1)". Read through pyarrow, record by record, as the same JSON lines read."""
    pa, pq = pytest.importorskip("pyarrow"), pytest.importorskip("pyarrow.parquet")
    from seakr.search.corpora import read_corpus

    recs = [_hotpot_as_hugging_face(r) for r in json.loads(open(HOTPOT).read())]
    lines_file, parquet = tmp_path / "hotpot.jsonl", tmp_path / "validation-00000-of-00001.parquet"
    lines_file.write_text("".join(json.dumps(r) + "\n" for r in recs))
    pq.write_table(pa.Table.from_pylist(recs), parquet, row_group_size=5)  # three row groups
    assert detect_layout(str(parquet)) == "hotpotqa"
    assert load_dataset(str(parquet)) == load_dataset(str(lines_file)) == load_dataset(HOTPOT)
    key = lambda p: (p.id, p.title, p.text)  # noqa: E731
    assert list(map(key, read_corpus(str(parquet)))) == list(map(key, read_corpus(HOTPOT)))
    squad = tmp_path / "squad-validation.parquet"
    pq.write_table(pa.Table.from_pylist(_squad_as_hugging_face(json.loads(open(fixture_path("squad_mini.json")).read()))), squad)
    assert load_dataset(str(squad)) == load_dataset(fixture_path("squad_mini.json"))
    from seakr.search.corpora import CorpusError

    with pytest.raises(CorpusError, match=r"a Parquet file, which is read as records, not text"):  # was "not UTF-8 text"
        list(read_corpus(str(parquet), "dpr"))
    twice = tmp_path / "twice.parquet"  # a record as a dict kept the last 'answer' column's cells, unsaid
    pq.write_table(pa.table([["q1"], ["Who?"], ["Ann"], ["Bo"]], names=["id", "question", "answer", "answer"]), twice)
    with pytest.raises(DatasetError, match=r"^\S*twice.parquet: two columns are named 'answer'; rename one$"):
        load_dataset(str(twice))
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(parquet.read_bytes()[:300])
    with pytest.raises(DatasetError, match=r"cut.parquet: a damaged Parquet file after row 0"):
        load_dataset(str(cut), layout="hotpotqa")
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)  # an install without the extra
    with pytest.raises(DatasetError, match=r"a Parquet file; reading it needs pyarrow \(pip install 'seakr\[parquet\]'\)"):
        load_dataset(str(parquet))


def test_an_arrow_file_as_datasets_keeps_it_reads_as_its_json_lines(tmp_path, monkeypatch):
    """`datasets`' save_to_disk (and its cache) keeps a split as Arrow IPC streams (`data-00000-of-00001.arrow`):
    "not UTF-8 text (byte 0xff at column 1)". Read through pyarrow as the JSON lines are, stream or file format."""
    pa = pytest.importorskip("pyarrow")
    from seakr.search.corpora import read_corpus

    recs = [_hotpot_as_hugging_face(r) for r in json.loads(open(HOTPOT).read())]
    table = pa.Table.from_pylist(recs)
    stream, filed = tmp_path / "data-00000-of-00001.arrow", tmp_path / "hotpot.arrow"
    with pa.OSFile(str(stream), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        for b in table.to_batches(max_chunksize=5):
            w.write_batch(b)
    with pa.OSFile(str(filed), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table, max_chunksize=7)
    for f in (stream, filed):
        assert detect_layout(str(f)) == "hotpotqa" and load_dataset(str(f)) == load_dataset(HOTPOT)
    key = lambda p: (p.id, p.title, p.text)  # noqa: E731
    assert list(map(key, read_corpus(str(stream)))) == list(map(key, read_corpus(HOTPOT)))
    cut = tmp_path / "cut.arrow"
    cut.write_bytes(stream.read_bytes()[:600])
    with pytest.raises(DatasetError, match=r"cut.arrow: a damaged Arrow file after row 0"):
        load_dataset(str(cut), layout="hotpotqa")
    saved = tmp_path / "saved"  # save_to_disk's folder: its split, the metadata beside it left alone
    saved.mkdir()
    for name in ("dataset_info.json", "state.json", "data-00000-of-00001.arrow"):
        (saved / name).write_bytes(stream.read_bytes() if name.endswith(".arrow") else b"{}")
    assert load_dataset(str(saved)) == load_dataset(HOTPOT)
    monkeypatch.setitem(sys.modules, "pyarrow.ipc", None)  # an install without the extra
    with pytest.raises(DatasetError, match=r"an Arrow file; reading it needs pyarrow"):
        load_dataset(str(stream))


def test_a_split_in_shards_reads_whole_from_its_folder_or_a_quoted_glob(tmp_path, capsys):
    """The hub keeps a split as numbered shards (TriviaQA's validation: ``validation-0000{0..3}-of-00004.parquet``)
    beside the other splits; one file could be named, so a split of several was read in part, as if whole. A
    quoted glob (or a folder of one split) reads every shard in order; a folder of several splits, a missing
    shard and shards of two layouts are refused in one line; one shard alone is read with a warning."""
    pa, pq = pytest.importorskip("pyarrow"), pytest.importorskip("pyarrow.parquet")
    from seakr.eval.resume import data_identity

    recs = [_hotpot_as_hugging_face(r) for r in json.loads(open(HOTPOT).read())]
    hub = tmp_path / "distractor"
    hub.mkdir()
    for i, part in enumerate((recs[:4], recs[4:9], recs[9:])):
        pq.write_table(pa.Table.from_pylist(part), hub / f"train-{i:05d}-of-00003.parquet")
    pq.write_table(pa.Table.from_pylist(recs[:2]), hub / "validation-00000-of-00001.parquet")
    whole = load_dataset(HOTPOT)
    assert load_dataset(str(hub / "train-*.parquet")) == whole
    assert len(load_dataset(str(hub / "validation-*.parquet"))) == 2
    with pytest.raises(DatasetError, match=r"distractor: a folder of 2 splits or files; name one \(quoted, to read every "
                                           r"shard\): '.*distractor/train-\*.parquet', '.*distractor/validation-\*.parquet'$"):
        load_dataset(str(hub))
    capsys.readouterr()
    assert load_dataset(str(hub / "train-00001-of-00003.parquet")) == whole[4:9]
    assert "train-00001-of-00003.parquet: shard 2 of 3 of the split 'train'; its questions alone are read (name the " \
           "split as" in capsys.readouterr().err
    one = tmp_path / "split"
    one.mkdir()
    for f in sorted(hub.glob("train-*")):
        (one / f.name).write_bytes(f.read_bytes())
    assert load_dataset(str(one)) == whole  # a folder of one split
    assert data_identity(str(one))["data_sha256"] == data_identity(str(hub / "train-*.parquet"))["data_sha256"] \
        != data_identity(str(hub / "train-00000-of-00003.parquet"))["data_sha256"]
    (one / "train-00001-of-00003.parquet").unlink()
    with pytest.raises(DatasetError, match=r"split: shard train-00001-of-00003.parquet is missing \(2 of 3 here\); a split "
                                           r"read in part would be reported as whole$"):
        load_dataset(str(one))
    with pytest.raises(DatasetError, match=r"nothing-\*.parquet: no file matches this pattern$"):
        load_dataset(str(hub / "nothing-*.parquet"))
    url = "https://huggingface.co/datasets/x/resolve/main/v.parquet?download=true"  # a query string is no glob
    with pytest.raises(DatasetError, match=r"a URL, and files are read from this machine: download it first"):
        load_dataset(url)
    (tmp_path / "mixed").mkdir()
    (tmp_path / "mixed" / "a.json").write_text(open(HOTPOT).read())
    (tmp_path / "mixed" / "b.json").write_text(open(fixture_path("squad_mini.json")).read())
    with pytest.raises(DatasetError, match=r"mixed/b.json: layout squad, but .*mixed/a.json is hotpotqa; one run reads one "
                                           r"dataset$"):
        load_dataset(str(tmp_path / "mixed" / "*.json"))
    with pytest.raises(DatasetError, match=r"tmp.*: a folder without data files; it holds the folders distractor, mixed, "):
        load_dataset(str(tmp_path))


def test_a_2wiki_record_as_the_hub_holds_it_reads_as_the_official_one(tmp_path):
    """The hub's 2Wiki copies write HotpotQA's Hugging Face layout (``id``, struct context and supporting facts,
    ``evidences``): "missing field '_id'". Read as the official record it came from."""
    official = {"_id": "2w1", "type": "compositional", "question": "Who is the father of the director of Alien?",
                "context": [["Alien", ["Alien is a film by Ridley Scott."]], ["Ridley Scott", ["His father was Francis."]]],
                "supporting_facts": [["Alien", 0], ["Ridley Scott", 0]], "evidences": [["Alien", "director", "Ridley Scott"]],
                "answer": "Francis"}
    hub = {**_hotpot_as_hugging_face({**official, "level": ""}), "evidences": {"fact": ["Alien"], "relation": ["director"],
                                                                            "entity": ["Ridley Scott"]}}
    del hub["level"]
    (tmp_path / "2wiki_dev.json").write_text(json.dumps([official]))
    (tmp_path / "validation.jsonl").write_text(json.dumps(hub) + "\n")
    assert detect_layout(str(tmp_path / "validation.jsonl")) == "2wiki"
    assert load_dataset(str(tmp_path / "validation.jsonl")) == load_dataset(str(tmp_path / "2wiki_dev.json"))


def test_a_question_answer_table_reads_as_csv_or_tsv_by_its_header(tmp_path):
    """A CSV or TSV of questions and answers (PopQA's TSV; a spreadsheet's export) was "cannot tell the dataset
    layout": its header names the columns (any case), its first line tells tabs from commas, an answer cell may
    hold a JSON or Python list, and without an id column the rows are numbered by line."""
    from seakr.prompts import family_for

    tsv = tmp_path / "popqa.tsv"
    tsv.write_text('id\tsubj\tquestion\tpossible_answers\n'
                   '4222\tGeorge Rankin\tWhat is George Rankin\'s occupation?\t["politician", "political leader"]\n'
                   "9\tX\tWhat year?\t[1990]\n")
    assert detect_layout(str(tsv)) == "table"
    assert [(e.id, e.question, e.answers) for e in load_dataset(tsv)] == [
        ("4222", "What is George Rankin's occupation?", ["politician", "political leader"]), ("9", "What year?", ["1990"])]
    csv_ = tmp_path / "mine.csv"
    csv_.write_bytes('\ufeffQuestion,Answer\r\n"Capital of France, the country?",Paris\r\n\r\nWhat is cited?,[citation needed]\r\n'
                     "Who?,\"['Ann', 'Bo']\"\r\n".encode())
    assert [(e.id, e.question, e.answers) for e in load_dataset(csv_)] == [
        ("row-2", "Capital of France, the country?", ["Paris"]), ("row-4", "What is cited?", ["[citation needed]"]),
        ("row-5", "Who?", ["Ann", "Bo"])]
    assert load_dataset(csv_, layout="table")[0].dataset == "table" and family_for("table") == "simpleqa"
    semi = tmp_path / "excel.csv"  # a spreadsheet's CSV where the comma is the decimal mark; pandas' NumPy cells
    semi.write_text('id;question;answer\n1;Capital of Peru, the country?;"[\'Lima\' \'Ciudad de los Reyes\']"\n'
                    "2;Pi to two places?;3,14\n3;Old name of Lima?;Lima | Ciudad de los Reyes\n")
    assert detect_layout(str(semi)) == "table"
    assert [(e.id, e.question, e.answers) for e in load_dataset(semi)] == [
        ("1", "Capital of Peru, the country?", ["Lima", "Ciudad de los Reyes"]), ("2", "Pi to two places?", ["3,14"]),
        ("3", "Old name of Lima?", ["Lima", "Ciudad de los Reyes"])]  # aliases split by a bar
    csv_.write_text("context,query\nx,Who?\n")  # no answer column: questions alone, said (test_unlabelled...)
    assert [(e.question, e.answers) for e in load_dataset(csv_)] == [("Who?", [])]
    csv_.write_text("question,answer\nWho?,x,extra\n")
    with pytest.raises(DatasetError, match=r"mine.csv:2: expected 2 fields \(as the header\), got 3"):
        load_dataset(csv_)
    csv_.write_text("id,question,answer\na,Who?,x\na,Where?,y\n")
    with pytest.raises(DatasetError, match=r"mine.csv:3: id 'a' repeats the question at .*mine.csv:2"):
        load_dataset(csv_)
    csv_.write_text("question,answer,Answer \nWho?,Ann,Bo\n")  # the second column's answers were dropped unsaid
    with pytest.raises(DatasetError, match=r"mine.csv:1: 'answer' names columns 2 and 3: which is meant"):
        load_dataset(csv_)


def test_a_table_written_by_pandas_in_columns_reads_row_by_row(tmp_path):
    """pandas' ``DataFrame.to_json()`` writes columns by default (``{"question": {"0": ...}, "answer": {"0": ...}}``):
    "field 'answer' should be a string or a list of strings". Read as the rows it holds; one record of another
    shape (an official file's one object, a dataset of one question) is untouched."""
    f = tmp_path / "mine.json"
    f.write_text(json.dumps({"id": {"0": "q1", "1": "q2"}, "question": {"0": "Who wrote Hamlet?", "1": "Capital of Peru?"},
                             "answer": {"0": "Shakespeare", "1": ["Lima", "Ciudad de los Reyes"]}}))
    assert detect_layout(str(f)) == "nq"
    assert [(e.id, e.question, e.answers) for e in load_dataset(f)] == [
        ("q1", "Who wrote Hamlet?", ["Shakespeare"]), ("q2", "Capital of Peru?", ["Lima", "Ciudad de los Reyes"])]
    f.write_text(json.dumps({"id": "q1", "question": "Who?", "answer": "x"}) + "\n")
    assert [e.id for e in load_dataset(f)] == ["q1"]
    assert len(load_dataset(fixture_path("squad_mini.json"))) == 3  # one object of the whole dataset


def test_popqa_records_read_their_answers_written_as_a_list_in_a_string(tmp_path):
    """PopQA on the hub writes ``possible_answers`` as a JSON list inside a string: "cannot tell the layout"."""
    f = tmp_path / "popqa.jsonl"
    f.write_text(json.dumps({"id": 7, "question": "Who?", "possible_answers": '["a", "b"]'}) + "\n"
                 + json.dumps({"id": 8, "question": "What?", "possible_answers": ["c"]}) + "\n")
    assert detect_layout(str(f)) == "nq"
    assert [(e.id, e.answers) for e in load_dataset(f)] == [("7", ["a", "b"]), ("8", ["c"])]


def test_a_test_split_without_gold_answers_reads_as_questions_alone(tmp_path, capsys):
    """Test splits carry no answers (HotpotQA's has no 'answer' nor supporting facts, TriviaQA's "without
    answers" no 'Answer', the hub's copies empty strings), nor does a file of one's own questions: refused whole
    before ("missing field 'answer'", "cannot tell the dataset layout"). Read as questions with no gold answer,
    every one of them; a mix of questions with and without is still refused (test_every_question_needs...)."""
    from seakr.eval.datasets import require_golds, warn_unlabelled

    hotpot = tmp_path / "test.json"  # HotpotQA's test split under a plain name: told by its context
    hotpot.write_text(json.dumps([{"_id": "h1", "question": "Q1?", "context": [["T", ["A sentence."]]]},
                                  {"_id": "h2", "question": "Q2?", "context": [["U", ["Another."]]]}]))
    assert detect_layout(str(hotpot)) == "hotpotqa"
    exs = load_dataset(str(hotpot))
    assert [(e.id, e.answers, e.contexts) for e in exs] == [("h1", [], [("T", "A sentence.")]), ("h2", [], [("U", "Another.")])]
    trivia = tmp_path / "unfiltered-web-test-without-answers.json"
    trivia.write_text(json.dumps({"Data": [{"Question": "Who?", "QuestionId": "tq1"}], "Version": 1.0}))
    assert [(e.id, e.answers) for e in load_dataset(str(trivia))] == [("tq1", [])]
    hub = tmp_path / "trivia-test.jsonl"  # the hub's test split: every answer an empty string
    hub.write_text(json.dumps({"question": "Who?", "question_id": "t1", "question_source": "web",
                               "answer": {"value": "", "aliases": []}}) + "\n")
    assert [(e.id, e.answers) for e in load_dataset(str(hub))] == [("t1", [])]
    mine = tmp_path / "mine.jsonl"
    mine.write_text('{"question": "Capital of Peru?"}\n{"id": "x", "question": "Who wrote Hamlet?", "answer": null}\n')
    assert detect_layout(str(mine)) == "nq"
    assert [(e.id, e.question, e.answers) for e in load_dataset(str(mine))] == [
        ("nq-0", "Capital of Peru?", []), ("x", "Who wrote Hamlet?", [])]
    capsys.readouterr()
    warn_unlabelled(str(mine), load_dataset(str(mine)))
    assert "mine.jsonl: no question has a gold answer: answers are written, without EM or F1" in capsys.readouterr().err
    with pytest.raises(DatasetError, match=r"^question 'nq-0' has no gold answer, and detect labels answers right or wrong"):
        require_golds(load_dataset(str(mine)), "detect")
    require_golds(load_dataset(HOTPOT), "detect")  # labelled: passes


def test_nan_written_for_a_missing_answer_is_no_answer_not_the_answer_nan(tmp_path):
    """Python's json writes a table's missing value as NaN; read as the number it became the gold answer "nan",
    which a prediction "NaN" matched. A lone NaN answer is none (a file of them: questions alone; among answered
    ones: refused); NaN inside a list of answers is malformed, as null is."""
    f = tmp_path / "qa.jsonl"
    f.write_text('{"id": "a", "question": "q", "answer": NaN}\n{"id": "b", "question": "q2", "answer": Infinity}\n')
    assert [(e.id, e.answers) for e in load_dataset(str(f))] == [("a", []), ("b", [])]
    f.write_text('{"id": "a", "question": "q", "answer": NaN}\n{"id": "b", "question": "q2", "answer": "Lima"}\n')
    for layout in ("nq", "hotpotqa"):
        with pytest.raises(DatasetError, match=r"qa.jsonl:1: question 'a' has no gold answer, but 1 other\(s\) have"):
            load_dataset(str(f), layout)
    f.write_text('{"id": "a", "question": "q", "golden_answers": ["Lima", NaN]}\n')
    with pytest.raises(DatasetError, match=r"qa.jsonl:1: field golden_answers\[1\]: NaN is no answer; answers are text, numbers or true/false$"):
        load_dataset(str(f))
    for field in ("answer", "possible_answers"):  # named as the file spells it (both were called 'answers')
        f.write_text('{"id": "a", "question": "q", "%s": ["Lima", null]}\n' % field)
        with pytest.raises(DatasetError, match=rf"qa.jsonl:1: field {field}\[1\]: null is no answer; answers are text, "
                                               "numbers or true/false$"):
            load_dataset(str(f), "nq")


def test_a_true_or_false_answer_is_yes_or_no(tmp_path):
    """BoolQ and StrategyQA write their answers as JSON booleans: "field 'answer' should be a string or a list of
    strings". Read as "yes" and "no", the words HotpotQA's comparison questions answer with (and the metric's
    exact yes/no rule reads)."""
    from seakr.eval.metrics import exact_match

    f = tmp_path / "boolq.jsonl"
    f.write_text('{"question": "is the sky blue", "answer": true, "passage": "The sky is blue."}\n'
                 '{"question": "is fire cold", "answer": false, "passage": "Fire is hot."}\n')
    assert [e.answers for e in load_dataset(str(f))] == [["yes"], ["no"]]
    g = tmp_path / "strategyqa.json"
    g.write_text(json.dumps([{"qid": "s1", "question": "Could a llama fly?", "answer": False}]))
    (ex,) = load_dataset(str(g), "nq")
    assert (ex.id, ex.answers) == ("s1", ["no"]) and exact_match("No.", ex.answers) == 1.0  # its own id, not nq-0
    h = tmp_path / "hotpot.json"
    h.write_text(json.dumps([{"_id": "h", "question": "Same country?", "answer": True, "context": []}]))
    assert load_dataset(str(h), "hotpotqa")[0].answers == ["yes"]


def test_a_corpus_given_for_the_questions_is_named_as_passages(tmp_path):
    """A corpus given to --data ("which file goes where") was "cannot tell the dataset layout; pass --layout",
    and no layout reads passages as questions."""
    for name, text in (("psgs.tsv", "id\ttext\ttitle\n1\tAlpha beta\tA\n"),
                       ("docs.jsonl", '{"id": "a", "title": "Alien", "text": "Alien is a 1979 film."}\n')):
        (tmp_path / name).write_text(text)
        with pytest.raises(DatasetError, match=rf"{name}: passages \(a (dpr|jsonl) corpus\), not questions: index them "
                                               rf"\(seakr index build .*{name} --out IDX\) and pass --index IDX, or pool "
                                               r"them with --filler; questions need a 'question' field or column$"):
            load_dataset(str(tmp_path / name))
    (tmp_path / "odd.jsonl").write_text('{"x": 1}\n')
    with pytest.raises(DatasetError, match=r"odd.jsonl: cannot tell the dataset layout; pass --layout"):
        load_dataset(str(tmp_path / "odd.jsonl"))


@pytest.mark.parametrize("path,error,said", [
    (None, TypeError, "data: expected a data file's path, got NoneType"),
    (5, TypeError, "data: expected a data file's path, got int"),
    (b"dev.json", TypeError, "data: expected a data file's path, got bytes"),
    ("  ", ValueError, "data: an empty path; name the data file"),
])
def test_a_data_path_that_is_not_one_is_one_line(path, error, said):
    """From Python, load_dataset(None) was os.stat's "path should be string, bytes, os.PathLike or integer", an
    int "argument of type 'int' is not iterable", and "" or spaces ": no such file"."""
    with pytest.raises(error, match="^" + re.escape(said) + "$"):
        load_dataset(path)


def test_an_answer_key_spelled_in_other_case_is_refused(tmp_path):
    """`{"id", "question", "Answer"}` read as a question without an answer: the file was answered as a test
    split's, unscored, with a warning that named no key."""
    f = tmp_path / "q.jsonl"
    f.write_text(json.dumps({"id": "1", "question": "What is the capital of France?", "Answer": "Paris"}) + "\n")
    with pytest.raises(DatasetError, match=rf"^{re.escape(str(f))}:1: key 'Answer' is read as no field: name it 'answer'$"):
        load_dataset(str(f))
    f.write_text(json.dumps({"id": "1", "question": "What is the capital of France?", "answer": "Paris",
                             "Answer_source": "wiki"}) + "\n")
    assert load_dataset(str(f))[0].answers == ["Paris"]  # other fields stay allowed


@pytest.mark.parametrize("rec,said", [
    ({"ID": "q7", "question": "Who wrote Hamlet?", "answer": "Shakespeare"}, ":1: key 'ID' is read as no field: "
     "name it 'id'"),  # was the id nq-0: predictions exported under it matched no official id
    ({"id": "q7", "question": "Who wrote Hamlet?", "answer": "Shakespeare", "ANSWER": "Marlowe"},
     ":1: keys 'answer' and 'ANSWER' spell one field two ways; give it once"),  # was Shakespeare, Marlowe unsaid
    ({"id": "q7", "Question": "Who wrote Hamlet?", "answer": "Shakespeare"}, ": key 'Question' is read as no field: "
     "name it 'question'"),  # was "cannot tell the dataset layout"
])
def test_a_question_records_id_or_question_spelled_another_way_is_refused(tmp_path, rec, said):
    f = tmp_path / "q.jsonl"
    f.write_text(json.dumps(rec) + "\n")
    with pytest.raises(DatasetError, match="^" + re.escape(f"{f}{said}") + "$"):
        load_dataset(str(f))


def test_a_runs_or_an_indexs_own_file_given_as_the_questions_is_named(tmp_path):
    """An index's meta.json was "passages (a jsonl corpus), not questions: index them", a run's scores.jsonl "cannot
    tell the dataset layout", and its results.jsonl was answered again as a dataset: `index build` refuses them as a
    corpus, and the questions' door now does too, naming the data file the run read."""
    from seakr.search import Passage
    from seakr.search.tantivy_engine import TantivyEngine

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"method": {"method": "cot"}, "data": "/data/dev.jsonl"}))
    (run / "results.jsonl").write_text(json.dumps({"id": "q1", "question": "Who?", "answers": ["x"]}) + "\n")
    for given, what in ((run / "results.jsonl", f"a file of the seakr run or study {run}"),
                        (run, "the folder of a seakr run or study")):
        with pytest.raises(DatasetError, match="^" + re.escape(f"{given}: {what} (its config and rows), not questions; "
                                                                 "the data file it read: /data/dev.jsonl")):
            load_dataset(str(given))
    idx = tmp_path / "idx"
    TantivyEngine.build([Passage("p1", "T", "some text")], idx)
    with pytest.raises(DatasetError, match="^" + re.escape(f"{idx / 'meta.json'}: a file of the seakr index {idx}, not "
                                                             "questions; an index is given as --index")):
        load_dataset(str(idx / "meta.json"))
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "dev.jsonl").write_text(json.dumps({"id": "q1", "question": "Who?", "answer": "x"}) + "\n")
    assert [e.id for e in load_dataset(str(tmp_path / "mine" / "dev.jsonl"))] == ["q1"]  # a folder of one's own: read
    (run / "dev.jsonl").write_text(json.dumps({"id": "q1", "question": "Who?", "answer": "x"}) + "\n")
    assert [e.id for e in load_dataset(str(run / "dev.jsonl"))] == ["q1"]  # one's own file beside a run's (--out .)
