"""The question records as schemas (eval/records.py): one rule for an answer and an id in every layout, a field
read under either of its spellings and named as the file spells it."""

import math

import pytest

from seakr.common.schema import SchemaError
from seakr.eval.records import FlashragQuestion, HotpotQuestion, IIRCAnswer, NQQuestion, TriviaQuestion


@pytest.mark.parametrize("given,read", [
    ("Paris", ["Paris"]), (1990, ["1990"]), (1990.0, ["1990"]), (2.5, ["2.5"]), (True, ["yes"]), (False, ["no"]),
    (None, []), (math.nan, []),
])
def test_one_answer_is_text_a_number_or_true_false_and_a_missing_one_is_none(given, read):
    assert HotpotQuestion(question="q", id="a", answer=given).answer == read


@pytest.mark.parametrize("bad,said", [(None, "null"), (math.nan, "NaN"), (math.inf, "Infinity"), ({}, "dict"),
                                      ([1], "list")])
def test_an_answer_of_another_kind_is_named_with_its_place(bad, said):
    with pytest.raises(SchemaError, match=rf"^field golden_answers\[1\]: {said} is no answer; answers are text, "
                                          "numbers or true/false$"):
        FlashragQuestion(id="a", question="q", golden_answers=["x", bad])


def test_an_id_is_text_or_a_whole_number_read_as_text_under_the_name_the_file_gives_it():
    assert HotpotQuestion(question="q", _id=5).id == "5" and HotpotQuestion(question="q", id="x").id == "x"
    for bad in (None, 1.5, True, ["a"]):
        with pytest.raises(SchemaError, match=r"^field _id: expected a question id \(text or a whole number\)"):
            HotpotQuestion(question="q", _id=bad)
    with pytest.raises(SchemaError, match=r"^missing field '_id'$"):
        HotpotQuestion(question="q")


def test_a_plain_question_file_takes_one_answer_or_a_list_under_any_of_its_names():
    for name in ("answers", "answer", "possible_answers"):
        assert NQQuestion(question="q", **{name: "x"}).answers == ["x"]
        assert NQQuestion(question="q", **{name: ["x", 2]}).answers == ["x", "2"]
    assert NQQuestion(question="q").id is None and NQQuestion(question="q", qid=3).id == "3"


def test_triviaqa_reads_either_spelling_and_names_a_given_field_as_the_file_spells_it():
    official = TriviaQuestion(Question="q", QuestionId="t1", Answer={"Value": "x", "Aliases": ["y", 5]})
    hf = TriviaQuestion(question="q", question_id="t1", answer={"value": "x", "aliases": ["y", 5]})
    assert (official.answer.value, official.answer.aliases) == (hf.answer.value, hf.answer.aliases) == ("x", ["y"])
    with pytest.raises(SchemaError, match=r"^field Answer.Value: expected text, got 5$"):
        TriviaQuestion(Question="q", QuestionId="t1", Answer={"Value": 5})
    with pytest.raises(SchemaError, match=r"^missing field 'Answer.value'$"):  # a missing one: by its first spelling
        TriviaQuestion(Question="q", QuestionId="t1", Answer={"Aliases": []})


def test_an_iirc_value_answer_needs_its_value():
    assert IIRCAnswer(type="span", answer_spans=[{"text": "x"}]).answer_spans[0].text == "x"
    with pytest.raises(SchemaError, match="an answer of type value needs a field 'answer_value'"):
        IIRCAnswer(type="value")
    with pytest.raises(SchemaError, match=r"^field type: one of span, value, binary, none, not 'weird'"):
        IIRCAnswer(type="weird")


def test_a_flag_is_true_false_or_null_and_null_reads_as_false():
    from seakr.eval.records import MusiqueQuestion, NQContext, SquadQA

    assert NQContext(text="t", isgold=None).isgold is None and SquadQA(id="a", question="q", is_impossible=None)
    para = {"paragraph_text": "p", "is_supporting": None}
    assert MusiqueQuestion(id="a", question="q", answer="x", paragraphs=[para]).paragraphs[0].is_supporting is None
    with pytest.raises(SchemaError, match=r"^field isgold: expected true or false or null, got 'x'$"):
        NQContext(text="t", isgold="x")
