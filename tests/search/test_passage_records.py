"""The passage records as schemas (search/records.py): what each field takes, what it reads as none, and how a
refusal names the file, line and field."""

import pytest

from seakr.search.corpora import CorpusError
from seakr.search.records import (CorpusRow, MusiqueParagraphs, NQPassages, Paragraphs, SquadFile, join_sentences,
                                  read)


def row(rec):
    return read(CorpusRow, "c.jsonl:3", rec, CorpusError)


def test_a_corpus_row_reads_numbers_as_their_digits_and_a_missing_title_as_none():
    r = row({"_id": 7, "title": float("nan"), "text": ["In 1685", 1750]})
    assert (r.id, r.title, r.text) == ("7", "", "In 1685 1750")
    assert row({"id": "a", "title": None, "contents": "T\nx"}).title == ""


@pytest.mark.parametrize("rec,said", [
    ({"id": "a", "text": float("nan")}, "c.jsonl:3: field text: NaN (a missing value), not text"),
    ({"_id": " ", "text": "x"}, "c.jsonl:3: field _id: empty; an id names its passage in traces and rows"),
    ({"id": "a", "text": {"s": 1}}, "c.jsonl:3: field text: expected text or a list of texts or null, got {'s': 1}"),
    ({"id": True, "text": "x"}, "c.jsonl:3: field id: expected text or null, got True"),
    ([1, 2], "c.jsonl:3: expected a JSON object, got list"),
])
def test_a_corpus_row_of_another_shape_is_one_line_naming_its_place_and_field(rec, said):
    with pytest.raises(CorpusError) as e:
        row(rec)
    assert str(e.value) == said


def test_every_context_layout_reads_as_title_and_text_pairs():
    official = [["A", ["One.", "Two."]], ["B", ["Three."]]]
    hf = {"title": ["A", "B"], "sentences": [["One.", "Two."], ["Three."]]}
    flashrag = {"title": ["A", "B"], "content": ["One. Two.", "Three."]}
    for ctx in (official, hf, flashrag):
        assert Paragraphs(context=ctx).context == [("A", "One. Two."), ("B", "Three.")]


@pytest.mark.parametrize("ctx,said", [
    ("oops", "field context: has an unknown layout (str)"),
    ([["A", ["x"]], [None, ["y"]]], "field context: entries should be [title, [sentences]], the title text"),
    ({"title": ["A"], "sentences": []}, "field context: should hold equal-length 'title' (text) and "
                                        "'sentences'/'content' lists"),
])
def test_a_context_of_another_layout_is_named(ctx, said):
    with pytest.raises(CorpusError, match="^f:1: " + said.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        read(Paragraphs, "f:1", {"context": ctx}, CorpusError)


def test_a_nested_field_is_named_by_its_path():
    with pytest.raises(CorpusError, match=r"^f:2: missing field 'paragraphs\[1\].paragraph_text'$"):
        read(MusiqueParagraphs, "f:2", {"paragraphs": [{"paragraph_text": "p"}, {"title": "T"}]}, CorpusError)
    with pytest.raises(CorpusError, match=r"^f: missing field 'data\[0\].paragraphs\[0\].context'$"):
        read(SquadFile, "f", {"data": [{"title": "T", "paragraphs": [{"qas": []}]}]}, CorpusError)
    with pytest.raises(CorpusError, match=r"^f:1: missing field 'ctxs'$"):
        read(NQPassages, "f:1", {"question": "q"}, CorpusError)


def test_sentences_are_joined_with_one_space_where_none_separates_them():
    assert join_sentences(["He was born in 1685.", "He died in 1750."]) == "He was born in 1685. He died in 1750."
    assert join_sentences(["A is B.", " C is D."]) == "A is B. C is D."


def test_contents_is_the_text_alone_where_a_title_field_is_given_even_empty():
    """Pyserini writes ``contents`` beside a ``title`` field; FlashRAG puts the title on contents' first line."""
    from seakr.search.corpora import row_passage

    assert row_passage("w", {"id": "a", "title": "", "contents": "A\nB"}).text == "A\nB"
    assert (row_passage("w", {"id": "a", "contents": '"A"\nB'}).title, row_passage("w", {"id": "a", "contents": '"A"\nB'}).text) == ("A", "B")
