"""Dataset loaders on the real shared files and on small official-format files written here."""

import json

import pytest

from helpers import HOTPOT, fixture_path, shared_path
from seakr.eval.datasets import DatasetError, detect_layout, load_dataset


@pytest.mark.parametrize("parts,layout,n", [
    (("hotpotqa", "dev_hard100.hf.jsonl"), "hotpotqa", 100),
    (("hotpotqa", "dev_first53.official.json"), "hotpotqa", 53),
    (("2wikimultihopqa", "dev_first100.flashrag.jsonl"), "2wiki", 100),
    (("2wikimultihopqa", "extra500_maybe_train.official.json"), "2wiki", 500),
    (("nq", "dev_oracle_first1000.jsonl.gz"), "nq", 1000),
    (("squad", "dev_part1.squad.json"), "squad", 4961),
    (("hotpotqa", "train_first10000.qa_sftitles.simrag.csv"), "qa-csv", 10000),
    (("2wikimultihopqa", "train_first10000.qa_sftitles.simrag.csv"), "qa-csv", 10000),
])
def test_real_files(parts, layout, n):
    path = shared_path(*parts)
    assert detect_layout(path) == layout
    exs = load_dataset(path)
    assert len(exs) == n
    assert all(e.question and e.answers and e.id for e in exs)
    if layout in ("hotpotqa", "2wiki"):
        assert all(e.contexts and e.supporting_titles for e in exs)
        assert all(set(e.supporting_titles) <= {t for t, _ in e.contexts} for e in exs[:20])


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


def test_flashrag_generic(tmp_path):
    f = tmp_path / "test.jsonl"
    f.write_text('{"id": "1", "question": "q?", "golden_answers": ["a", "b"]}\n')
    assert load_dataset(str(f), "flashrag")[0].answers == ["a", "b"]


def test_malformed_files_name_file_line_field(tmp_path):
    f = tmp_path / "hotpot.jsonl"
    f.write_text('{"id": "1", "question": "q", "answer": "a"}\n{"id": "2", "question": "q"}\n')
    with pytest.raises(DatasetError, match=r"hotpot.jsonl:2: missing field 'answer'"):
        load_dataset(str(f), "hotpotqa")
    f.write_text('{"id": "1", "question": "q", "answer": "a"}\n{oops\n')
    with pytest.raises(DatasetError, match=r"hotpot.jsonl:2: invalid JSON"):
        load_dataset(str(f), "hotpotqa")
    g = tmp_path / "iirc.json"
    g.write_text(json.dumps([{"questions": [{"qid": "x", "question": "q", "answer": {"type": "weird"}}]}]))
    with pytest.raises(DatasetError, match=r"record 0 questions\[0\]: field 'answer.type' has unknown value"):
        load_dataset(str(g), "iirc")
    with pytest.raises(DatasetError, match="no such file"):
        load_dataset(str(tmp_path / "none.json"), "hotpotqa")


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
