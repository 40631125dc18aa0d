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
    ([Passage("a", "", "x"), 5], TypeError, r"^index: a list of passages holds Passage objects or texts, not int$"),
    ([Passage("a", "", "x"), Passage("a", "", "y")], SearchError, r"^index: passage id 'a' is given twice"),
    (["", "  "], SearchError, r"^index: every passage's text is empty; nothing to search$"),
    ([Passage(" ", "", "x")], SearchError, r"^index: a passage's id is ' '; ids are visible text$"),
])
def test_a_list_that_cannot_be_searched_is_one_line(docs, error, said):
    with pytest.raises(error, match=said):
        passages_engine(docs)
