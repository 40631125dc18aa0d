"""The service's guard in process (a scripted model, no server): token, body limit with and without
a content-length, the budget, NaN. The same checks run against a real server in test_service.py."""

import json

from fastapi.testclient import TestClient

from scripted import Reply, ScriptedLM
from seakr.serve.app import AnswerService, ServiceLimits, create_app
from seakr.serve.render import answer_html

AUTH = {"authorization": "Bearer t0k", "content-type": "application/json"}


def client(**limits):
    svc = AnswerService(ScriptedLM(lambda v: Reply("So the answer is Paris.")), None, method="cot",
                        limits=ServiceLimits(**{"token": "t0k", "max_body": 2000, **limits}))
    return TestClient(create_app(svc))


def test_token_body_budget_and_nan():
    c = client()
    assert c.get("/v1/health").status_code == 200
    assert c.post("/v1/answer", json={"question": "q?"}).status_code == 401
    ok = c.post("/v1/answer", json={"question": "Capital of France?"}, headers=AUTH)
    assert ok.status_code == 200 and ok.json()["answer"] == "Paris"

    def chunks():  # chunked: no content-length to refuse up front
        for _ in range(10):
            yield b"x" * 500

    assert c.post("/v1/answer", content=chunks(), headers=AUTH).status_code == 413
    assert c.post("/v1/answer", content=b"x" * 3000, headers=AUTH).status_code == 413
    big = c.post("/v1/answer", json={"question": "q", "method": "seakr", "options": {"k": 60, "n_candidates": 10}},
                 headers=AUTH)
    assert big.status_code == 422 and "max_rows" in big.json()["detail"]
    nan = c.post("/v1/answer", content=b'{"question": "q", "options": {"temperature": NaN}}', headers=AUTH)
    assert nan.status_code == 422


def test_13_script_in_any_text_cannot_break_the_trace_page():
    page = answer_html({"question": "<!--<script>", "answer": "</script><b>&", "trace": {}})
    start = page.index("id='seakr-answer'>") + len("id='seakr-answer'>")
    block = page[start: page.index("</script>", start)]
    assert "<" not in block and ">" not in block
    assert json.loads(block)["answer"] == "</script><b>&"


def test_06_passages_are_cut_to_fit_the_context_by_the_documented_rule():
    """A model with a small context: the prompt with long passages would overflow, so every passage is
    cut to the same number of leading words (the most that fit), and the trace says so."""
    from scripted import engine  # noqa: F401  (the scripted model needs no index here)
    from seakr.methods import SingleRetrieval
    from seakr.search.base import Passage

    class Small(ScriptedLM):
        def info(self):
            return {**super().info(), "context_tokens": 900}

    lm = Small(lambda v: Reply("So the answer is Paris."))
    m = SingleRetrieval(lm, None, max_new_tokens=50)
    long = [Passage(f"p{i}", f"T{i}", " ".join(f"w{i}x{j}" for j in range(400))) for i in range(3)]
    from seakr.methods.trace import Tracer

    tr = Tracer("Which city?", "single")
    prompt, _ = m.render(tr, "Which city?", [], long)
    cut = [e for e in tr.events if e.get("what") == "truncate"]
    assert len(cut) == 1 and cut[0]["budget_tokens"] == 850 and 0 < cut[0]["words_per_passage"] < 400
    n = cut[0]["words_per_passage"]
    assert lm.count_tokens(prompt) <= 850 and all(f"w{i}x{n - 1} ..." in prompt and f"w{i}x{n} " not in prompt for i in range(3))
    short, _ = m.render(tr, "Which city?", [], [Passage("s", "S", "Paris is the capital.")])
    assert "Paris is the capital." in short and len(tr.events) == 1  # nothing cut when it fits


def test_prompt_options_over_http_name_no_server_file_and_the_operators_own_set_is_served(tmp_path):
    own = tmp_path / "ours.json"
    own.write_text(json.dumps({"name": "ours", "demos": [{"question": "Capital of Peru?", "steps": ["Lima is the capital"],
                                                          "answer": "Lima"}]}))
    svc = AnswerService(ScriptedLM(lambda v: Reply("So the answer is Paris.")), None, method="cot",
                        defaults={"prompt_set": str(own)}, limits=ServiceLimits())
    c = TestClient(create_app(svc))
    assert c.post("/v1/answer", json={"question": "Capital of France?"}).json()["answer"] == "Paris"
    said = {str(c.post("/v1/answer", json={"question": "q", "options": {"prompt_set": p}}).json()["errors"])
            for p in ("/etc/passwd", "/nonexistent.json", str(tmp_path))}
    assert said == {str([{"field": "body.options.prompt_set",  # the same line for each
                          "error": "option prompt_set: one of hotpotqa, 2wikimultihopqa, simpleqa"}])}
    for opts, needle in (({"marker": ""}, "option marker"), ({"prompt_style": "weird"}, "option prompt_style"),
                         ({"prompt_set": "simpleqa", "n_shot": 15}, "option n_shot: prompt set 'simpleqa' has")):
        r = c.post("/v1/answer", json={"question": "q", "options": opts})
        assert r.status_code == 422 and needle in r.json()["errors"][0]["error"], r.text


def test_a_request_too_large_for_the_servers_free_memory_is_told_so():
    """The model refuses a call the device cannot hold before it starts; over HTTP that was "internal error:
    MemoryError" (500). It is a 503 (and the stream's error event) with the model's own measure."""
    def script(v):
        raise MemoryError("cannot allocate 9.9 GB for a call of 61 rows (100 new tokens each): 1.0 GB are free on cpu")

    c = TestClient(create_app(AnswerService(ScriptedLM(script), None, method="cot", limits=ServiceLimits(token="t0k"))))
    r = c.post("/v1/answer", json={"question": "Capital of France?"}, headers=AUTH)
    assert r.status_code == 503 and r.json()["detail"] == (
        "out of memory: cannot allocate 9.9 GB for a call of 61 rows (100 new tokens each): 1.0 GB are free on cpu; "
        "lower k, max_new_tokens or n_candidates")
    with c.stream("POST", "/v1/answer/stream", json={"question": "Capital of France?"}, headers=AUTH) as s:
        body = "".join(s.iter_text())
    assert "event: error" in body and "out of memory: cannot allocate 9.9 GB" in body


def test_a_body_not_declared_json_or_compressed_is_415_saying_which_header():
    """FastAPI reads a JSON body only when its Content-Type says JSON: `curl -d` without a header (a form),
    `requests.post(data=...)` (none) got "Input should be a valid dictionary or object"; a gzip body got
    "not UTF-8 text". Each is refused before the body is read, naming the header to send."""
    import gzip

    c = client(token=None)
    body = json.dumps({"question": "Capital of France?"}).encode()
    for route in ("/v1/answer", "/v1/answer/stream"):
        for ctype in (None, "application/x-www-form-urlencoded", "text/plain", "text/x+json"):
            r = c.post(route, content=body, headers={"content-type": ctype} if ctype else {})
            assert r.status_code == 415, (route, ctype)
            assert "Content-Type: application/json" in r.json()["detail"] and (ctype or "no Content-Type") in r.json()["detail"]
        z = c.post(route, content=gzip.compress(body), headers={"content-type": "application/json", "content-encoding": "gzip"})
        assert z.status_code == 415 and "Content-Encoding 'gzip'" in z.json()["detail"]
    for ctype in ("application/json; charset=utf-8", "Application/JSON", "application/vnd.api+json"):
        assert c.post("/v1/answer", content=body, headers={"content-type": ctype}).json()["answer"] == "Paris"
    assert c.head("/v1/health").status_code == c.head("/").status_code == 200  # what uptime monitors send
    assert c.post("/nowhere", content=body).status_code == 404  # not an API route: not a body it reads


def test_a_page_of_an_allowed_origin_may_call_the_api_from_a_browser():
    """A web page served elsewhere (a front end on http://localhost:3000) could not call the API: its browser's
    preflight got 405 and no Access-Control-Allow-Origin. ``--cors-origin`` names the pages allowed; none by
    default, and a page of another origin is still refused; the token is asked of the real request as before."""
    page = "http://localhost:3000"
    pre = {"origin": page, "access-control-request-method": "POST",
           "access-control-request-headers": "authorization, content-type"}
    c = client(cors_origins=(page,))
    ok = c.options("/v1/answer", headers=pre)
    assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == page
    assert "authorization" in ok.headers["access-control-allow-headers"].lower()
    r = c.post("/v1/answer", json={"question": "Capital of France?"}, headers={**AUTH, "origin": page})
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == page
    no = c.post("/v1/answer", json={"question": "Capital of France?"}, headers={"origin": page})
    assert no.status_code == 401 and no.headers["access-control-allow-origin"] == page  # the page can read why
    other = c.options("/v1/answer", headers={**pre, "origin": "http://evil.example"})
    assert other.status_code == 400 and "access-control-allow-origin" not in other.headers
    closed = client().options("/v1/answer", headers=pre)
    assert "access-control-allow-origin" not in closed.headers
    assert client(cors_origins=("*",)).options("/v1/answer", headers=pre).headers["access-control-allow-origin"] == "*"


def test_an_origin_that_no_browser_sends_is_refused_in_one_line():
    import pytest

    for bad, needle in (("http://localhost:3000/", "no path or trailing slash"), ("localhost:3000", "not a web origin"),
                        ("http://a b", "not a web origin")):
        with pytest.raises(ValueError, match=r"^--cors-origin: .* is not a web origin such as http://localhost:3000") as e:
            ServiceLimits(cors_origins=(bad,))
        assert needle in str(e.value) and "\n" not in str(e.value)
    assert ServiceLimits(cors_origins=("HTTP://LocalHost:3000",)).cors_origins == ("http://localhost:3000",)
    assert ServiceLimits(cors_origins="http://localhost:3000").cors_origins == ("http://localhost:3000",)  # one, bare


def test_the_limits_are_one_schema_that_names_each_setting_by_its_flag():
    """Python and the command line reach one verdict, named as the command line spells the setting."""
    import pytest

    for kw, said in (({"max_rows": 0}, "--max-rows: expected a whole number in [1, inf), got 0"),
                     ({"max_work": True}, "--max-work: expected a whole number in [1, inf), got True"),
                     ({"body_seconds": float("inf")}, "--body-timeout: expected a number in (0, inf), got inf"),
                     ({"token": "  "}, "--token (or SEAKR_TOKEN): empty"),
                     ({"docs": "yes"}, "--docs: expected true or false, got 'yes'"),
                     ({"queue": -1}, "--queue: expected a whole number in [0, inf), got -1"),
                     ({"timeout": float("nan")}, "--timeout: expected a number in (0, inf), got nan"),
                     ({"max_row": 3}, "unknown limit(s) 'max_row' (did you mean 'max_rows'?)")):
        with pytest.raises(ValueError) as e:
            ServiceLimits(**kw)
        assert said in str(e.value) and "\n" not in str(e.value)
    assert ServiceLimits(cors_origins=["*"]).cors_origins == ("*",)  # a list, as Python callers write one
