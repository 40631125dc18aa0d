"""Every layout's reader against records of another shape: each field of a valid record replaced by values
of every JSON kind. A reader either reads the record or refuses it with a DatasetError naming the file and
record, never a TypeError, AttributeError or KeyError naming nothing (NQ's `ctxs: [5]`, SQuAD's
`qas: [null]`, IIRC's `answer_spans: [{}]` were), and never reads null or an object as the text "None" or
"{'a': 1}" (a context sentence, a MuSiQue title were)."""

import json

import pytest

from helpers import reshaped, write_records
from seakr.common.layouts import DatasetError
from seakr.eval.datasets import load_dataset

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


def _strings(o, pre=()):
    items = o.items() if isinstance(o, dict) else enumerate(o) if isinstance(o, list) else ()
    for k, v in items:
        if isinstance(v, str):
            yield pre + (k,)
        yield from _strings(v, pre + (k,))


@pytest.mark.parametrize("layout", sorted(VALID))
def test_half_a_surrogate_pair_anywhere_is_named_with_its_line(tmp_path, layout):
    """JSON may escape half a surrogate pair ("\\ud800"); Python decodes it into a str no file, tokenizer or index
    can hold, so a question holding one failed after the model had run ("'utf-8' codec can't encode"), and an
    answer or title holding one was read. Each is refused with the file and line; a whole pair (an emoji) reads."""
    import copy

    kind, rec = VALID[layout]
    f = tmp_path / "d.json"
    for path in _strings(rec):
        for half in ("\ud800", "\udfff"):
            changed = copy.deepcopy(rec)
            cur = changed
            for k in path[:-1]:
                cur = cur[k]
            cur[path[-1]] += half
            write_records(f, kind, changed)
            with pytest.raises(DatasetError, match=f"^{f}:1: .u{'d800' if half == chr(0xD800) else 'dfff'} is half of "
                                                   "a surrogate pair"):
                load_dataset(str(f), layout)
    for path in _strings(rec):
        if path[-1] in ("question", "Question"):
            changed = copy.deepcopy(rec)
            cur = changed
            for k in path[:-1]:
                cur = cur[k]
            cur[path[-1]] += " \U0001F600"
            write_records(f, kind, changed)
            assert any("\U0001F600" in ex.question for ex in load_dataset(str(f), layout))


def test_the_2wiki_aliases_beside_a_file_are_read_as_strictly_as_the_questions(tmp_path):
    """``id_aliases.json`` was read unchecked: a damaged line was a bare JSONDecodeError, KeyError or TypeError
    naming no file, a list ``answer_id`` "unhashable type", and an alias 5 became an answer."""
    f = tmp_path / "2wiki_dev.json"
    side = tmp_path / "id_aliases.json"
    rec = {"_id": "q1", "question": "Who?", "answer": "Bob", "answer_id": "Q1", "type": "comparison"}
    f.write_text(json.dumps([rec]))
    side.write_text(json.dumps({"Q_id": "Q1", "aliases": ["Robert", 1999]}) + "\n\n")
    assert load_dataset(str(f))[0].answers == ["Bob", "Robert", "1999"]
    for line, needle in (("{broken", "1: invalid JSON"), ("[1]", "1: expected a JSON object, got list"),
                         ('{"aliases": ["x"]}', "1: missing field 'Q_id'"),
                         ('{"Q_id": ["Q1"], "aliases": []}', "1: field Q_id: expected text, got \\['Q1'\\]"),
                         ('{"Q_id": "Q1", "aliases": "Robert"}', "1: field aliases: expected a list of answers, got 'Robert'"),
                         ('{"Q_id": "Q1", "aliases": [null]}', "1: field aliases\\[0\\]: null is no answer"),
                         ('{"Q_id": "Q1", "aliases": ["\\ud800"]}', "1: \\\\ud800 is half of a surrogate pair")):
        side.write_text(line + "\n")
        with pytest.raises(DatasetError, match=f"^{side}:{needle}"):
            load_dataset(str(f))
    side.write_text(json.dumps({"Q_id": "Q1", "aliases": None}) + "\n")
    assert load_dataset(str(f))[0].answers == ["Bob"]
    f.write_text(json.dumps([{**rec, "answer_id": ["Q1"]}]))
    with pytest.raises(DatasetError, match="record 0: field answer_id: expected text or null, got \\['Q1'\\]"):
        load_dataset(str(f))
