"""The Elasticsearch adapter end to end against noida-db (an ES REST emulator) on loopback, and
against a real cluster when SEAKR_ES_URL is set (e.g. http://localhost:9200/seakr-test)."""

import os
import socket
import subprocess
import time

import pytest

from helpers import fixture_path, free_port
from seakr.search import Passage, SearchError, open_engine
from seakr.search.corpora import read_corpus
from seakr.search.elastic import ElasticEngine
from seakr.search.tantivy_engine import TantivyEngine

pytestmark = pytest.mark.es


@pytest.fixture(scope="module")
def noida(tmp_path_factory):
    noida_db = pytest.importorskip("noida_db")
    binary = os.path.join(os.path.dirname(noida_db.__file__), "noida-db")
    port = free_port()
    data = tmp_path_factory.mktemp("noida")
    proc = subprocess.Popen([binary, "start", "--only", "elasticsearch", "--host", "127.0.0.1",
                             "--data-dir", str(data), "--elasticsearch-port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 15
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("noida-db did not start")
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="module")
def fixture_corpus():
    return list(read_corpus(fixture_path("filler.flashrag.jsonl")))


QUERIES = ["film directed by an american director", "capital city of the country", "river flowing through the city",
           "novel written by the american writer", "university founded in new england", "baroque composer born",
           "tallest building in the world", "highest mountain on the border", "chemical element named after",
           "rock band formed in london"]


def test_adapter_matches_tantivy_top3(noida, fixture_corpus, tmp_path):
    es = open_engine(f"{noida}/fixture")
    assert isinstance(es, ElasticEngine)
    es.create()
    st = es.ingest(fixture_corpus + fixture_corpus[:5])  # duplicates are dropped client-side
    n = len(fixture_corpus)
    assert st["sent"] == n and st["duplicates"] == 5 and es.count() == n
    ta = TantivyEngine.build(fixture_corpus, tmp_path / "t")
    def top3(hits):
        # exact score ties are ordered arbitrarily by the emulator: break them by id, on both sides
        return sorted(hits, key=lambda h: (-round(h.score, 3), h.id))[:3]

    agree = 0
    for q, hits in zip(QUERIES, es.search_many(QUERIES, 6)):
        hits, mine = top3(hits), top3(ta.search(q, 6))
        agree += [h.id for h in hits] == [h.id for h in mine]
        for a, b in zip(hits, mine):
            if a.id == b.id:  # same BM25 up to Porter vs Porter2 stemming of a few words
                assert a.score == pytest.approx(b.score, rel=0.1)
    assert agree >= 8, f"top-3 agreed on {agree}/10 queries"
    assert es.metadata()["doc_count"] == n
    pasted = [f"\x1b[1m{q}\x1b[0m" for q in QUERIES[:2]]  # a console's escapes are not searched for
    assert [[h.id for h in hits] for hits in es.search_many(pasted, 3)] == [[h.id for h in hits] for hits in
                                                                          es.search_many(QUERIES[:2], 3)]


def test_existing_index_needs_overwrite(noida):
    es = open_engine(f"{noida}/again")
    es.create()
    with pytest.raises(SearchError, match="index exists"):
        es.create()
    es.create(overwrite=True)


def test_an_index_of_the_reference_code_is_searched_on_its_own_fields(noida):
    """The reference code (DRAGIN's prep_elastic.py, BEIR's helper) maps ``title`` + ``txt``: queried over
    ``title`` + ``text``, every passage matched on its title alone and came back with no text, without a word."""
    es = open_engine(f"{noida}/refwiki")
    es.client.indices.create(index="refwiki", mappings={"properties": {
        "title": {"type": "text", "analyzer": "english"}, "txt": {"type": "text", "analyzer": "english"}}})
    docs = [("Kubrick", "Stanley Kubrick was an American film director."), ("Odyssey", "A 1968 film by Stanley Kubrick.")]
    for i, (title, txt) in enumerate(docs):
        es.client.index(index="refwiki", id=str(i), document={"title": title, "txt": txt}, refresh=True)
    hits = es.search("american director", 3)
    assert [(h.id, h.title, h.text) for h in hits[:1]] == [("0", "Kubrick", docs[0][1])]
    assert es.metadata()["query"]["fields"] == ["title", "txt"]
    es.ingest([Passage("9", "Spartacus", "Spartacus is an American epic film from 1960.")])  # --add: where its own are
    assert es.search("epic film spartacus", 1)[0].text.startswith("Spartacus is an American epic")
    es.client.indices.create(index="other", mappings={"properties": {"name": {"type": "text"}, "words": {"type": "text"}}})
    with pytest.raises(SearchError, match=r"/other: no passage text field: the index maps name, words; the text is read "
                                          r"from one of text, txt, contents"):
        open_engine(f"{noida}/other").search("x")
    es.client.indices.create(index="bare")  # made by hand, no field mapped yet: ours are written
    bare = open_engine(f"{noida}/bare")
    bare.ingest([Passage("1", "Lima", "Lima is the capital of Peru.")])
    assert [(h.title, h.text) for h in bare.search("capital of peru", 1)] == [("Lima", "Lima is the capital of Peru.")]
    with pytest.raises(SearchError, match=r"/absent: the cluster has no index 'absent'"):
        open_engine(f"{noida}/absent").ingest([Passage("1", "t", "x")])  # --add to nothing: not an auto-made index


def test_bad_urls_and_dead_servers():
    with pytest.raises(SearchError, match="index name in the URL path"):
        open_engine("http://127.0.0.1:9")
    dead = open_engine("http://127.0.0.1:9/idx", timeout=0.5, max_retries=0)
    with pytest.raises(SearchError, match="search failed"):
        dead.search("x")


@pytest.mark.skipif(not os.environ.get("SEAKR_ES_URL"), reason="set SEAKR_ES_URL=http://host:9200/INDEX for a live cluster")
def test_live_cluster(fixture_corpus):
    es = open_engine(os.environ["SEAKR_ES_URL"])
    es.create(overwrite=True)
    es.ingest(fixture_corpus)
    assert es.count() == len(fixture_corpus)
    assert len(es.search(QUERIES[0], 3)) == 3



def test_long_passages_are_counted_as_sent(noida, tmp_path, capsys):
    """As tantivy's writer counts them: a duplicate id dropped client-side is not sent, so not counted."""
    import json

    from seakr.cli import main

    long = "word " * 1200
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"id": i, "title": "T", "text": t}) + "\n"
                                              for i, t in (("a", long), ("a", long), ("b", "a short one"))))
    assert main(["index", "build", str(tmp_path / "c.jsonl"), "--out", f"{noida}/longs"]) == 0
    out, err = capsys.readouterr()
    assert "longs: 1 passage is longer than 1,000 words" in err
    assert out.startswith(f"built {noida}/longs: 2 passages, 1 duplicate ids and 0 empty passages skipped, ")
    st = open_engine(f"{noida}/longs").ingest([Passage("c", "C", long), Passage("c", "C", long)])
    assert st["long"] == 1 and st["duplicates"] == 1


def test_an_add_says_what_it_added_and_skips_empty_passages_as_tantivy_does(noida, tmp_path, capsys):
    """An --add into Elasticsearch said "built", and a passage without text was indexed there (tantivy skips it)."""
    import json

    from seakr.cli import main

    (tmp_path / "a.jsonl").write_text(json.dumps({"id": "a", "title": "A", "text": "alpha"}) + "\n")
    (tmp_path / "b.jsonl").write_text("".join(json.dumps({"id": i, "title": "T", "text": t}) + "\n"
                                              for i, t in (("b", "beta"), ("e", "  "))))
    assert main(["index", "build", str(tmp_path / "a.jsonl"), "--out", f"{noida}/adds"]) == 0
    capsys.readouterr()
    assert main(["index", "build", str(tmp_path / "b.jsonl"), "--out", f"{noida}/adds", "--add"]) == 0
    assert capsys.readouterr().out == (f"added 1 passages (0 duplicate ids and 1 empty passages skipped) -> 2 in "
                                       f"{noida}/adds\n")


def test_a_build_with_nothing_to_index_leaves_the_cluster_as_it_was(noida, tmp_path, capsys):
    """Tantivy's build refuses a corpus without text and keeps the old index; into Elasticsearch it made an empty
    index, and with --overwrite deleted the old one first."""
    import json

    from seakr.cli import main

    (tmp_path / "blank.jsonl").write_text("".join(json.dumps({"id": i, "title": "T", "text": " "}) + "\n" for i in "ab"))
    (tmp_path / "one.jsonl").write_text(json.dumps({"id": "k", "title": "K", "text": "kept"}) + "\n")
    assert main(["index", "build", str(tmp_path / "blank.jsonl"), "--out", f"{noida}/blank"]) == 2
    assert f"{noida}/blank: no passage to index (2 with empty text); nothing was written" in capsys.readouterr().err
    es = open_engine(f"{noida}/blank")
    assert not es.client.indices.exists(index="blank")
    assert main(["index", "build", str(tmp_path / "one.jsonl"), "--out", f"{noida}/kept"]) == 0
    assert main(["index", "build", str(tmp_path / "blank.jsonl"), "--out", f"{noida}/kept", "--overwrite"]) == 2
    assert [h.id for h in open_engine(f"{noida}/kept").search("kept", 3)] == ["k"]


def test_a_build_is_all_or_nothing(noida, tmp_path, capsys):
    """An --overwrite whose corpus failed halfway (a broken line after 1,200 passages: two bulk chunks sent)
    deleted the old index and left the passages sent before the failure as the index; a new index that failed
    was left partial. Now an overwrite fills a staged index and switches the name over only once it is whole."""
    import json

    from seakr.cli import main

    (tmp_path / "one.jsonl").write_text(json.dumps({"id": "k", "title": "K", "text": "kept"}) + "\n")
    bad = "".join(json.dumps({"id": f"n{i}", "title": "N", "text": f"new {i}"}) + "\n" for i in range(1200))
    (tmp_path / "bad.jsonl").write_text(bad + '{"id": broken\n')
    (tmp_path / "good.jsonl").write_text(bad)
    indices = lambda: sorted(open_engine(f"{noida}/x").client.indices.get_alias(index="whole*"))  # noqa: E731
    assert main(["index", "build", str(tmp_path / "one.jsonl"), "--out", f"{noida}/whole"]) == 0
    assert main(["index", "build", str(tmp_path / "bad.jsonl"), "--out", f"{noida}/whole", "--overwrite"]) == 2
    assert "bad.jsonl:1201: invalid JSON" in capsys.readouterr().err
    es = open_engine(f"{noida}/whole")
    assert es.count(refresh=True) == 1 and [h.id for h in es.search("kept", 3)] == ["k"]
    assert indices() == ["whole"]  # the staged copy was deleted
    assert main(["index", "build", str(tmp_path / "bad.jsonl"), "--out", f"{noida}/fresh"]) == 2
    assert not es.client.indices.exists(index="fresh")  # not a partial index under the name
    for _ in range(2):  # over an index, then over the alias the first overwrite left
        assert main(["index", "build", str(tmp_path / "good.jsonl"), "--out", f"{noida}/whole", "--overwrite"]) == 0
        assert open_engine(f"{noida}/whole").count(refresh=True) == 1200
        assert len(indices()) == 1 and indices()[0].startswith("whole-seakr-")  # one index behind the name
    assert main(["index", "build", str(tmp_path / "one.jsonl"), "--out", f"{noida}/whole", "--add"]) == 0
    assert open_engine(f"{noida}/whole").count(refresh=True) == 1201
    assert main(["index", "build", str(tmp_path / "bad.jsonl"), "--out", f"{noida}/whole", "--overwrite"]) == 2
    assert open_engine(f"{noida}/whole").count(refresh=True) == 1201 and len(indices()) == 1

    def interrupted():  # Ctrl-C in the middle of a Python build
        yield from (Passage(f"i{i}", "I", f"text {i}") for i in range(700))
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        open_engine(f"{noida}/whole").build(interrupted(), overwrite=True)
    assert open_engine(f"{noida}/whole").count(refresh=True) == 1201 and len(indices()) == 1
    es = open_engine(f"{noida}/whole")
    es.create(overwrite=True)  # an empty index in place of the alias
    assert es.count(refresh=True) == 0 and indices() == ["whole"]


def test_the_longest_passage_is_recorded_for_the_service(noida):
    """The service counted every passage of an Elasticsearch index as 200 tokens (it could not learn the longest):
    over whole articles a request whose prompts held thousands of tokens each was admitted. A build records the
    longest passage in the index's mapping and an add keeps it; the service reads it at start."""
    from scripted import Reply, ScriptedLM
    from seakr.serve.app import PASSAGE_TOKENS, AnswerService

    es = open_engine(f"{noida}/longest")
    es.build([Passage("a", "A", "short one"), Passage("b", "B", "film " * 600), Passage("c", "C", "mid " * 50)])
    assert es.longest_passage() == Passage("b", "B", "film " * 600)
    es.ingest([Passage("d", "D", "film " * 900)])  # an add past it
    assert es.longest_passage().id == "d"
    svc = AnswerService(ScriptedLM(lambda v: Reply("x")), open_engine(f"{noida}/longest"))
    assert svc.passage_tokens == 900  # the scripted model counts a word a token
    es.build([Passage("e", "E", "one " * 300)], overwrite=True)  # an overwrite records its own
    assert open_engine(f"{noida}/longest").longest_passage().id == "e"
    es.ingest([Passage("e", "E", "now short")])  # the longest re-sent shorter: no longer known, not kept wrong
    assert es.longest_passage() is None
    assert es.passage("nope") is None
    other = open_engine(f"{noida}/elsewhere")  # an index built without seakr: no record, the 200-token figure
    other.client.indices.create(index="elsewhere")
    other.client.index(index="elsewhere", id="1", document={"title": "T", "text": "word " * 5000}, refresh=True)
    assert other.longest_passage() is None
    other.ingest([Passage("2", "U", "film " * 10)])  # an add does not make up a record it cannot know
    assert other.longest_passage() is None
    assert AnswerService(ScriptedLM(lambda v: Reply("x")), other).passage_tokens == PASSAGE_TOKENS


def test_both_engines_take_and_count_a_stream_alike(noida, tmp_path):
    """Each engine had its own copy of the rules for what a build takes (the check, empty texts, repeated ids,
    long passages, the longest); Elasticsearch kept the first of two equally long passages, tantivy the larger id.
    One intake serves both: the same stream gives the same counts and the same longest passage."""
    from seakr.search.tantivy_engine import TantivyEngine

    long_text = "word " * 1200
    stream = [Passage("b", "B", "ab " * 40), Passage("a", "A", "ba " * 40), Passage("e", "E", "  "),
              Passage("b", "B2", "again"), Passage("l", "L", long_text), Passage("m", "M", "short")]
    es = open_engine(f"{noida}/intake")
    got = es.build(stream)
    ta = TantivyEngine.build(stream, tmp_path / "t")
    manifest = ta.metadata()
    assert (got["sent"], got["duplicates"], got["empty"], got["long"]) == (4, 1, 1, 1) == (
        manifest["doc_count"], manifest["duplicates_skipped"], manifest["empty_skipped"], manifest["long_passages"])
    assert es.longest_passage().id == ta.longest_passage().id == "l"
    tie = [Passage("x", "X", "ab " * 40), Passage("z", "Z", "ba " * 40), Passage("y", "Y", "cd " * 40)]
    assert open_engine(f"{noida}/tie").build(tie) and open_engine(f"{noida}/tie").longest_passage().id == "z"
    assert TantivyEngine.build(tie, tmp_path / "tie").longest_passage().id == "z"
    with pytest.raises(TypeError, match=r"^passage 2: expected a seakr.search.Passage, got dict"):
        open_engine(f"{noida}/bad").build([Passage("a", "A", "x"), Passage("a", "A", "y"), {"id": "c"}])


def test_an_add_of_a_corpus_the_index_holds_read_another_way_is_refused(noida, tmp_path, capsys):
    """As for tantivy: a document indexed whole and added again as 100-word passages was in the index twice (the
    index kept no record of its sources). The mapping lists them now; added again the same way, the add says the
    ids it holds are replaced (Elasticsearch replaces a document re-sent under its id)."""
    import json

    from seakr.cli import main
    from seakr.search.elastic import ElasticEngine

    long = " ".join(f"w{i}" for i in range(250))
    src = tmp_path / "long.jsonl"
    src.write_text(json.dumps({"id": "L", "title": "Long", "text": long}) + "\n")
    url = f"{noida}/again-add"
    assert main(["index", "build", str(src), "--out", url]) == 0
    assert ElasticEngine.from_url(url).sources() == [f"auto:{src}"]
    assert main(["index", "build", str(src), "--out", url, "--add", "--passage-words", "100"]) == 2
    assert f"holds {src} already (jsonl, whole documents); adding it as jsonl, 100-word passages" in capsys.readouterr().err
    assert open_engine(url).count() == 1
    assert main(["index", "build", str(src), "--out", url, "--add"]) == 0
    assert "ids the index holds are replaced by the text read now" in capsys.readouterr().err
    assert open_engine(url).count() == 1 and ElasticEngine.from_url(url).sources() == [f"auto:{src}"]
