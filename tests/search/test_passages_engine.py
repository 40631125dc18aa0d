"""A list of passages (or texts) given in code as the index: BM25 over them, for as long as the engine lives."""

import gc
import os

import pytest

from seakr.search import Passage, SearchError, as_engine, passages_engine


def test_a_list_of_passages_or_texts_is_searched_and_its_folder_goes_with_the_engine():
    """`index=[Passage(...)]` was "expected an index folder, an http(s):// URL or a search engine, got list": a
    folder had to be built first, even for two passages."""
    engine = as_engine([Passage("p1", "Stanley Kubrick", "Stanley Kubrick was an American film director."),
                        "Alien is a 1979 science fiction film directed by Ridley Scott."])
    assert engine.count() == 2
    (hit,) = engine.search("science fiction Alien", 1)
    assert (hit.id, hit.title) == ("doc-1", "") and "Ridley Scott" in hit.text
    assert engine.search("Kubrick director", 1)[0].id == "p1"
    folder = engine.temporary_folder.name
    assert os.path.isdir(folder)
    del engine, hit
    gc.collect()
    assert not os.path.exists(folder)


@pytest.mark.parametrize("docs,error,said", [
    ([], SearchError, r"^index: an empty list of passages; give at least one$"),
    ([Passage("a", "", "x"), 5], TypeError, r"^index: a list of passages holds Passage objects, texts or dicts with 'text', not int$"),
    ([{"title": "T", "body": "x"}], SearchError, r"^index: passage 0 has no 'text' \(its keys: title, body\)$"),
    ([{"text": None}], SearchError, r"^index: passage 0: missing field 'text' \(or 'contents'\)$"),
    ([{"text": "x", "title": ["T"]}], SearchError, r"^index: passage 0: field title: expected text, got \['T'\]$"),
    ([{"id": True, "text": "x"}], SearchError, r"^index: passage 0: field id: expected text or null, got True$"),
    ({"id": "a", "text": "x"}, SearchError, r"^index: a dict with 'text' is one passage; give a list of passages"),
    (iter([]), SearchError, r"^index: an empty list of passages"),
    ([Passage("a", "", "x"), Passage("a", "", "y")], SearchError, r"^index: passage id 'a' is given twice"),
    (["", "  "], SearchError, r"^index: every passage's text is empty; nothing to search$"),
    (["\x00", "\x1b[0m", " \x07"], SearchError, r"^index: every passage's text is empty; nothing to search$"),  # control characters only
    ({" ": "x"}, SearchError, r"^index: passage id: ' ' has no visible character; ids are visible text$"),
    ({1: "x"}, SearchError, r"^index: passage id: expected text, got 1$"),
    # zero-width characters and a byte-order mark were text, and ids, as a question's are not
    (["\u200b", "\ufeff\u2060"], SearchError, r"^index: every passage's text is empty; nothing to search$"),
    ({"\u200b": "x"}, SearchError, r"^index: passage id: '\\u200b' has no visible character; ids are visible text$"),
    ([{"id": "\x00", "text": "x"}], SearchError, r"^index: passage 0: field id: empty; an id names its passage in traces and rows$"),
    # one text was indexed letter by letter ("Paris is big": ten one-letter passages, none of them "Paris")
    ("Paris is big", TypeError, r"^index: passages come as a list \(or any collection\) of them, not one str; give \[text\]$"),
    (Passage("a", "A", "x"), TypeError, r"^index: passages come as a list .* not one Passage; give \[passage\]$"),
    (5, TypeError, r"^index: passages come as a list .* not one int"),
])
def test_a_list_that_cannot_be_searched_is_one_line(docs, error, said):
    with pytest.raises(error, match=said):
        passages_engine(docs)


def test_passages_come_as_any_collection_a_corpus_is_loaded_into():
    """A generator, a dict of id -> text, rows of dicts (``datasets``, ``json.loads``; BEIR's ``_id``), a pandas
    column or frame, an Arrow table were "expected an index folder ..., got generator" (only a list or a tuple was read)."""
    import pandas as pd
    import pyarrow as pa

    kubrick, alien = "Stanley Kubrick was an American film director.", "Alien is a 1979 film directed by Ridley Scott."
    cases = [((t for t in (kubrick, alien)), "doc-1"), ({"k": kubrick, "a": alien}, "a"),
             ([{"_id": "k", "title": "Kubrick", "text": kubrick, "url": "u"}, {"id": 7, "text": alien}], "7"),
             (pd.Series([kubrick, alien]), "doc-1"), (pd.DataFrame({"id": ["k", "a"], "text": [kubrick, alien]}), "a"),
             (pa.table({"id": ["k", "a"], "text": [kubrick, alien]}), "a")]
    for docs, alien_id in cases:
        engine = as_engine(docs)
        assert engine.count() == 2 and engine.search("Ridley Scott Alien", 1)[0].id == alien_id, docs
    assert as_engine([{"_id": "k", "title": "Kubrick", "text": kubrick}]).search("Kubrick", 1)[0].title == "Kubrick"
    by_id = as_engine({"k": {"title": "Kubrick", "text": kubrick}, "a": Passage("a", "Alien", alien)})  # id -> row
    assert [(h.id, h.title) for h in by_id.search("Kubrick Alien Scott", 2)] == [("a", "Alien"), ("k", "Kubrick")] or \
        {h.id for h in by_id.search("Kubrick Alien Scott", 2)} == {"a", "k"}


def test_a_set_of_texts_gets_the_same_ids_in_every_process():
    """A set has no order and a text's hash differs per process: ``index={...}`` numbered its texts doc-<i> in
    that order, so a passage's id in traces and rows changed from run to run. Texts are numbered sorted."""
    import subprocess
    import sys

    code = ("from seakr.search import as_engine\n"
            "e = as_engine({f'passage number {i} about topic {i * 7}' for i in range(12)})\n"
            "print(sorted((p.id, p.text) for p in e.search('passage number topic', 12)))")
    runs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                           env={**__import__("os").environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2", "3")}
    assert len(runs) == 1 and "doc-0" in runs.pop()


def test_rows_given_in_code_are_read_as_a_corpus_file_s_lines(tmp_path):
    """A DataFrame with a missing title (None or NaN), a numeric id (7.5), Pyserini's or FlashRAG's `contents` and a
    list of sentences were refused in code ("id, title and text are texts (an id may be a number)", "has no
    'text'") while `index build` read the same rows from a JSONL file; one passage given as a dict was read as a
    dict of id -> text (passages "id" and "text"). Both doors now read a row alike."""
    import json
    import math

    import pandas as pd

    from seakr.search import read_corpus

    rows = [{"id": "a", "title": None, "text": "Alien is a 1979 film."}, {"id": 7.5, "title": "B", "text": "Blade Runner."},
            {"id": "c", "contents": '"Heat"\nHeat is a 1995 crime film.'}, {"id": "d", "title": "D", "text": ["One.", "Two."]},
            {"id": "e", "title": math.nan, "text": "Eraserhead."}]
    f = tmp_path / "rows.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    from_file = list(read_corpus(str(f), "jsonl"))
    in_code = [passages_engine(pd.DataFrame([r]) if i == 0 else [r]).search(p.text.split()[0], 1)[0]
               for i, (r, p) in enumerate(zip(rows, from_file))]
    assert [(p.id, p.title, p.text) for p in in_code] == [(p.id, p.title, p.text) for p in from_file]
    assert [(p.id, p.title) for p in from_file] == [("a", ""), ("7.5", "B"), ("c", "Heat"), ("d", "D"), ("e", "")]
    pa = pytest.importorskip("pyarrow")  # two columns of one name: a row as a dict kept one's cells, unsaid
    for table in (pd.DataFrame([["k", "Kubrick.", "Alien."]], columns=["id", "text", "text"]),
                  pa.table([["k"], ["Kubrick."], ["Alien."]], names=["id", "text", "text"])):
        with pytest.raises(SearchError, match=r"^index: the table names two columns 'text'; rename one$"):
            passages_engine(table)


def test_a_field_spelled_in_other_case_is_refused_not_read_as_none(tmp_path):
    """A DataFrame's "Title" column beside "text" left every passage untitled without a word (the table readers
    take headers in any case; a row's keys were read exactly); so a corpus line's " title". Extra fields stay."""
    import json

    import pandas as pd

    from seakr.search import read_corpus
    from seakr.search.corpora import CorpusError

    with pytest.raises(SearchError, match=r"^index: passage 0: key 'Title' is read as no field: name it 'title'$"):
        passages_engine(pd.DataFrame({"id": ["k"], "Title": ["Alien"], "text": ["Alien is a 1979 film."]}))
    f = tmp_path / "c.jsonl"
    f.write_text(json.dumps({"ID": "k", "text": "Alien is a 1979 film."}) + "\n")
    with pytest.raises(CorpusError, match=rf"^{f}:1: key 'ID' is read as no field: name it 'id'$"):
        list(read_corpus(str(f), "jsonl"))
    with pytest.raises(SearchError, match=r"^index: passage 0: keys 'title' and 'Title' spell one field two ways"):
        passages_engine([{"id": "k", "title": "Alien", "Title": "Aliens", "text": "Alien is a 1979 film."}])
    eng = passages_engine([{"id": "k", "title": "Alien", "text": "Alien is a 1979 film.", "year": 1979, "Genre": "sf"}])
    assert eng.search("Alien", 1)[0].title == "Alien"


def test_a_passage_of_invisible_characters_is_skipped_as_empty_beside_others():
    """A NUL, a zero-width space or a byte-order mark alone was indexed as a passage beside real ones (only a list
    of nothing else was refused): a title search then put an empty passage into the prompt, and it counted in
    BM25's document frequencies. Every door's intake skips it as it skips an empty text."""
    for invisible in ("\x00", "\u200b", "\ufeff", "\x1b[0m"):
        engine = passages_engine([Passage("e", "Dog", invisible), Passage("d", "", "the dog barked")])
        assert [p.id for p in engine.search("dog", 3)] == ["d"], repr(invisible)


def test_a_passage_without_a_title_is_one_whose_title_is_none():
    """`Passage("p", None, text)` was refused ("title must be text, got NoneType") where a row's null title, a
    table's missing one and a text alone are passages without a title; an engine of one's own returning such
    passages was refused the same way."""
    p = Passage("p", None, "Alien is a 1979 film directed by Ridley Scott.")
    assert p.title == "" and p.to_dict()["title"] == ""
    assert [h.id for h in passages_engine([p, {"id": "q", "title": None, "text": "a dog"}]).search("Alien", 3)] == ["p"]


def test_a_passage_refuses_an_id_of_no_visible_text_wherever_it_is_made():
    """`passages_engine` and the corpus readers refused such an id; `TantivyEngine.build` from Python took it. The
    passage's own schema refuses it now, so no door can take it."""
    for pid in (" ", "\x00", "\u200b"):
        with pytest.raises(ValueError, match=r"^passage id: .* has no visible character; ids are visible text$"):
            Passage(pid, "T", "dog")
