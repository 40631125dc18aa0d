"""Passages sent with a request, searched for it instead of the server's index (a scripted model, in process)."""

import pytest
from fastapi.testclient import TestClient

from scripted import Reply, ScriptedLM
from seakr.serve.app import MAX_PASSAGE_TEXT, MAX_PASSAGES, AnswerService, ServiceLimits, create_app

ALIEN = "Alien is a 1979 science fiction film directed by Ridley Scott."


def client(engine=None, **limits):
    svc = AnswerService(ScriptedLM(lambda v: Reply("So the answer is Ridley Scott.")), engine, method="single",
                        limits=ServiceLimits(**limits))
    return TestClient(create_app(svc))


def test_a_request_brings_the_passages_it_is_answered_from():
    """A client with its own documents (its retriever's hits, a page) had to index them on the server first; a
    server with no index answered a retrieving method with advice meant for Python ("from_config(index=...)")."""
    c = client()
    r = c.post("/v1/answer", json={"question": "Who directed Alien?"})
    assert r.status_code == 422 and r.json()["detail"] == (
        "method 'single' searches, and this server has no index: send the passages to search with the request ('passages')")
    body = {"question": "Who directed Alien?", "options": {"n_candidates": 1},
            "passages": [{"id": "k", "title": "Stanley Kubrick", "text": "Stanley Kubrick was an American director."},
                         ALIEN]}
    r = c.post("/v1/answer", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["answer"] == "Ridley Scott"
    assert r.json()["trace"]["final"]["passages"] == [{"id": "doc-1", "title": ""}]  # BM25 over the two sent
    assert r.json()["config"]["engine"]["doc_count"] == 2 and "path" not in r.json()["config"]["engine"]
    events = c.post("/v1/answer/stream", json=body).text
    assert "doc-1" in events and "Ridley Scott" in events
    assert "unread_options" not in r.json()["config"]
    # an option the method never reads was taken without a word to the client: its config names it, and why
    r = c.post("/v1/answer", json={**body, "options": {"n_candidates": 1, "k": 4, "max_passages": 2}})
    assert r.status_code == 200 and r.json()["config"]["unread_options"] == {
        "k": "single decodes greedily and draws no samples (SeaKR reads it)", "max_passages": "single does not read it"}
    assert '"unread_options": {"k": ' in c.post("/v1/answer/stream", json={**body, "options": {"k": 4}}).text


def test_a_request_giving_a_key_twice_is_refused_and_malformed_json_says_why():
    """`{"question": "a?", "question": "Who wrote Hamlet?"}` was answered for the second question (FastAPI reads a
    body with json.loads, which keeps the last value), and `{"options": {"k": 3, "k": 5}}` ran with k 5; malformed
    JSON was "JSON decode error" without what was wrong."""
    c = client()
    for body, why in (('{"question": "a?", "question": "Who directed Alien?", "passages": ["x"]}', "the key 'question'"),
                      ('{"question": "q", "passages": ["x"], "options": {"k": 3, "k": 5}}', "the key 'k'"),
                      ('{"question": "q", "passages": [{"text": "a", "text": "b"}]}', "the key 'text'"),
                      ('{"question": ', "Expecting value")):
        for route in ("/v1/answer", "/v1/answer/stream"):
            r = c.post(route, content=body.encode(), headers={"content-type": "application/json"})
            assert r.status_code == 422 and why in r.json()["errors"][0]["error"], (route, r.text)
            assert r.json()["errors"][0]["error"].startswith("invalid JSON (")
            assert r.json()["errors"][0]["field"] == "body"  # the whole body: no field of it was read
    r = c.post("/v1/answer", content='{"question": "Who directed Alien?", "passages": ["x"]}'.encode("utf-16"),
               headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text  # JSON's other encodings are read as json.loads reads them


@pytest.mark.parametrize("passages,said", [
    ([], '"body.passages","error":"at least 1 item(s), got []"'),
    ([ALIEN] * (MAX_PASSAGES + 1), f'"body.passages","error":"at most {MAX_PASSAGES} item(s), got {MAX_PASSAGES + 1}"'),
    (["x" * (MAX_PASSAGE_TEXT + 1)], f'"body.passages.0.text","error":"at most {MAX_PASSAGE_TEXT:,} characters, got '
                                     f'{MAX_PASSAGE_TEXT + 1:,}"'),
    ([{"title": "T"}], '"body.passages.0.passage.text","error":"required"'),
    ([{"text": "x", "url": "u"}], '"body.passages.0.passage.url","error":"unknown key \'url\'; allowed: id, title, text"'),
    ([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}], "passages: passage id 'a' is given twice"),
    (["  ", "\n"], "passages: every passage's text is empty; nothing to search"),
    (["\u0000", "\u001b[1m"], "passages: every passage's text is empty; nothing to search"),  # was indexed and searched
    ([{"id": " ", "text": "x"}], "passages: passage 0: field id: empty; an id names its passage in traces and rows"),
    ([5], "passages.0"),
])
def test_passages_a_request_cannot_search_are_422_naming_them(passages, said):
    r = client().post("/v1/answer", json={"question": "Who?", "passages": passages})
    assert r.status_code == 422 and said in r.text, r.text


def test_passages_sent_to_a_method_that_never_searches_are_422():
    """`cot` with passages indexed them and answered without reading them; the command line refuses `--index`
    for it the same way."""
    r = client().post("/v1/answer", json={"question": "Who directed Alien?", "method": "cot", "passages": [ALIEN]})
    assert r.status_code == 422 and r.json()["errors"] == [{"field": "body.passages", "error": (
        "passages: method 'cot' never searches; leave them out (or choose a method that retrieves)")}]
    assert client().post("/v1/answer", json={"question": "Who directed Alien?", "method": "cot"}).status_code == 200


def test_a_lone_surrogate_in_a_passage_is_422_not_a_failure_mid_request():
    for passage in ('"A \\ud800 B"', '{"title": "\\udfff", "text": "x"}'):
        body = '{"question": "Who?", "passages": [%s]}' % passage
        r = client().post("/v1/answer", content=body.encode(), headers={"content-type": "application/json"})
        assert r.status_code == 422 and '"body.passages.0' in r.text, r.text


def test_the_largest_request_the_schema_admits_fits_the_default_body_limit():
    """64 KB (the limit before passages) refused a request of 16 full passages with 413."""
    import json

    body = {"question": "Who?", "passages": [{"id": f"p{i}", "title": "T" * 300, "text": "é" * MAX_PASSAGE_TEXT}
                                             for i in range(MAX_PASSAGES)]}
    raw = json.dumps(body, ensure_ascii=False).encode()
    assert len(raw) > 64 * 1024
    r = client().post("/v1/answer", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text[:300]


def test_long_passages_count_in_the_budget_at_their_length():
    """The budget counts a passage as a DPR passage (200 tokens); a request's own may be 20 times that."""
    c = client(max_work=3_000)
    short = {"question": "Who directed Alien?", "options": {"n_candidates": 3}, "passages": [ALIEN] * 3}
    assert c.post("/v1/answer", json=short).status_code == 200
    long = {**short, "passages": [ALIEN + " word" * 700] * 3}  # ~700 tokens each, in every prompt of N
    r = c.post("/v1/answer", json=long)
    assert r.status_code == 422 and "max_work=3000" in r.json()["detail"]


def test_the_budget_counts_the_index_s_own_longest_passage(tmp_path):
    """The budget counted every passage of the server's index as 200 tokens: over an index of whole articles, a
    request whose prompts held thousands of tokens each was admitted. The index records its longest passage and
    the service counts its tokens at start; an index without long passages keeps the old figure."""
    from seakr.search import Passage
    from seakr.search.tantivy_engine import TantivyEngine
    from seakr.serve.app import PASSAGE_TOKENS

    short = TantivyEngine.build([Passage("a", "Alien", ALIEN)], tmp_path / "short")
    article = "film " * 3000  # 3,000 tokens for the scripted model's word-per-token count
    long = TantivyEngine.build([Passage("a", "Alien", ALIEN), Passage("b", "Article", article)], tmp_path / "long")
    body = {"question": "Who directed Alien?", "options": {"n_candidates": 3}}
    assert client(short, max_work=10_000).post("/v1/answer", json=body).status_code == 200
    r = client(long, max_work=10_000, max_prompt_tokens=100_000).post("/v1/answer", json=body)
    assert r.status_code == 422 and "passages of up to 3000 tokens" in r.json()["detail"], r.text
    r = client(long, max_work=10_000).post("/v1/answer", json=body)  # each prompt holds up to 3 x 3,000 tokens
    assert r.status_code == 422 and "max_prompt_tokens=4096" in r.json()["detail"], r.text
    svc = AnswerService(ScriptedLM(lambda v: Reply("x")), short)
    assert svc.passage_tokens == PASSAGE_TOKENS
    import json  # an index built before the longest passage was recorded (the demo index on a machine until now)

    from seakr.search.tantivy_engine import MANIFEST
    m = json.loads((long.path / MANIFEST).read_text())
    del m["longest_passage"]
    (long.path / MANIFEST).write_text(json.dumps(m))
    assert AnswerService(ScriptedLM(lambda v: Reply("x")), TantivyEngine(long.path)).passage_tokens == 3000
    # a request's own passages are what its prompts hold, not the index's
    own = {**body, "passages": [ALIEN]}
    assert client(long, max_work=10_000).post("/v1/answer", json=own).status_code == 200
    # passages are cut to fit the model's context, and so is what the budget counts for them

    class Windowed(ScriptedLM):
        def info(self):
            return {**super().info(), "context_tokens": 2048}

    svc = AnswerService(Windowed(lambda v: Reply("So the answer is Ridley Scott.")), long, method="single",
                        limits=ServiceLimits(max_work=10_000))
    assert TestClient(create_app(svc)).post("/v1/answer", json=body).status_code == 200


def test_a_model_that_shares_each_prompt_s_cache_is_budgeted_one_copy_a_prompt():
    """Every row of a prompt reads one copy of the prompt's attention cache where the model shares it: counted
    once per row, a SeaKR re-rank call (3 prompts x 21 rows) over the demo index's longest passages (466 tokens)
    came to 3.6 GB against the 2 GB default, and `seakr serve` would not start over its own demo index."""
    from seakr.methods import build_method
    from seakr.serve.app import work_of

    def lm(shared):
        class Sized(ScriptedLM):
            def info(self):
                return {**super().info(), "kv_bytes_per_token": 24576, "shared_attention": shared}
        return Sized(lambda v: Reply("x"))

    per_copy = lambda m: work_of(m, 30, 466)["kv_mb"] * 2 ** 20 / 24576  # noqa: E731 - tokens held (MB to 0.1)
    ctx = 30 + 5 * 466  # the question and five kept passages
    assert per_copy(build_method("seakr", lm(False), None)) == pytest.approx(63 * (ctx + 100), rel=1e-4)
    assert per_copy(build_method("seakr", lm(True), None)) == pytest.approx(3 * ctx + 63 * 100, rel=1e-3)
    assert work_of(build_method("seakr", lm(True), None), 30, 466)["kv_mb"] < 2048 < work_of(
        build_method("seakr", lm(False), None), 30, 466)["kv_mb"]


@pytest.mark.slow
@pytest.mark.parametrize("method, options", [("single", {}), ("seakr", {"k": 2, "max_steps": 2, "max_new_tokens": 8,
                                                                         "gate": "step"})])
def test_passages_counted_by_their_real_tokens_bound_a_calls_prompt(smol, method, options):
    """64 passages of 3,990 CJK characters (766 KB, under the body limit) were admitted as 200-token passages and
    held the only worker for 88 s (two 8,087-token prefills); they are counted by the model's tokenizer, and a
    call's prompt beyond max_prompt_tokens is refused before any work, naming the limit."""
    svc = AnswerService(smol, None, method=method)
    c = TestClient(create_app(svc))
    body = {"question": "日本 東京", "passages": ["東京都" * 1330] * MAX_PASSAGES, "options": options or None}
    assert len(str(body).encode()) < ServiceLimits().max_body
    r = c.post("/v1/answer", json=body)
    assert r.status_code == 422 and "max_prompt_tokens=4096" in r.json()["detail"], r.text
    said = int(r.json()["detail"].split("holds up to ")[1].split()[0])
    assert said > 4096
    short = {"question": "Who directed Alien?", "passages": [ALIEN, ALIEN + " ", ALIEN + "  "],
             "options": {**options, "max_new_tokens": 4}}
    assert c.post("/v1/answer", json=short).status_code == 200


def test_a_body_that_is_not_an_object_is_said_so():
    for body in ([], 5, "Who?"):
        r = client().post("/v1/answer", json=body)
        assert r.status_code == 422 and r.json()["errors"] == [
            {"field": "body", "error": f"expected an object, got {body!r}"}], r.text


@pytest.mark.parametrize("body,field,said", [
    ({"options": {"k": {"a": 1}}}, "body.options.k", "option k: expected a whole number in [0, inf), got {'a': 1}"),
    ({"options": {"titles": [True]}}, "body.options.titles", "option titles: expected true or false, got [True]"),
    ({"question": "\u200b"}, "body.question", "empty (no visible text)"),
    ({"passages": [{"id": "", "text": "x"}]}, "body.passages.0.passage.id", "at least 1 character(s), got ''"),
    ({"passages": [{"text": 5}]}, "body.passages.0.passage.text", "expected text, got 5"),
    ({"question": 5}, "body.question", "expected text, got 5"),
])
def test_a_refused_value_is_one_error_in_the_words_of_its_own_schema(body, field, said):
    """An option's value of any JSON kind reaches its method's schema, which names the option; a passage is refused
    as the form it was sent in (text or object), not as every form it could have been; a validator's sentence is
    given without pydantic's "Value error, " before it."""
    r = client().post("/v1/answer", json={"question": "Who?", **body})
    assert r.status_code == 422 and r.json()["errors"] == [{"field": field, "error": said}], r.text
