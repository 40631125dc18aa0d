"""Every layout's reader against records of another shape: each field of a valid record replaced by values
of every JSON kind. A reader either reads the record or refuses it with a DatasetError naming the file and
record, never a TypeError, AttributeError or KeyError naming nothing (NQ's `ctxs: [5]`, SQuAD's
`qas: [null]`, IIRC's `answer_spans: [{}]` were), and never reads null or an object as the text "None" or
"{'a': 1}" (a context sentence, a MuSiQue title were)."""

import json

import pytest

from helpers import reshaped, write_records
from seakr.eval.datasets import DatasetError, load_dataset

VALID = {
    "hotpotqa": ("list", {"_id": "a", "question": "q?", "answer": "x", "type": "bridge", "supporting_facts": [["T", 0]],
                          "context": [["T", ["s1.", "s2."]]]}),
    "2wiki": ("list", {"_id": "a", "type": "comparison", "question": "q?", "answer": "x", "context": [["T", ["s."]]],
                       "supporting_facts": [["T", 0]], "evidences": [["a", "b", "c"]]}),
    "flashrag": ("lines", {"id": "a", "question": "q?", "golden_answers": ["x"], "metadata": {"type": "t"}}),
    "nq": ("lines", {"question": "q?", "answers": ["x"], "ctxs": [{"title": "T", "text": "t", "isgold": True}]}),
    "musique": ("lines", {"id": "a", "paragraphs": [{"idx": 0, "title": "T", "paragraph_text": "p", "is_supporting": True}],
                          "question": "q?", "answer": "x", "answer_aliases": ["y"], "answerable": True}),
    "squad": ("object", {"data": [{"title": "T", "paragraphs": [{"context": "c", "qas": [
        {"id": "a", "question": "q?", "answers": [{"text": "x", "answer_start": 0}]}]}]}]}),
    "triviaqa": ("object", {"Data": [{"QuestionId": "a", "Question": "q?", "Answer": {"Value": "x", "Aliases": ["y"]}}]}),
    "iirc": ("list", {"title": "T", "text": "t", "links": [], "questions": [
        {"qid": "a", "question": "q?", "answer": {"type": "span", "answer_spans": [{"text": "x"}]}, "context": []}]}),
}


@pytest.mark.parametrize("layout", sorted(VALID))
def test_a_record_of_another_shape_is_read_or_named_never_a_traceback(tmp_path, layout):
    kind, rec = VALID[layout]
    f = tmp_path / "d.json"
    write_records(f, kind, rec)
    assert load_dataset(str(f), layout)  # the valid record reads
    for case, changed in reshaped(rec):
        write_records(f, kind, changed)
        try:
            read = json.dumps([ex.to_dict() for ex in load_dataset(str(f), layout)])
        except DatasetError as e:
            assert str(f) in str(e) and "\n" not in str(e), (case, str(e))
            continue
        assert "None" not in read and "{'" not in read, (case, read)
