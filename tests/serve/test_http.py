"""The HTTP service as a client sees it: a real uvicorn process on loopback with the real model."""

import concurrent.futures as cf
import json

import httpx
import psutil
import pytest

pytestmark = pytest.mark.slow


def test_health_and_answer(server):
    url, _ = server
    h = httpx.get(url + "/v1/health").json()
    assert h["status"] == "ok" and h["model"] == "smollm2-135m" and h["documents"] > 0
    assert h["precision"] in ("bfloat16", "float32")  # auto: the native float for a model with no measured choice
    r = httpx.post(url + "/v1/answer", json={"question": "Who wrote Hamlet?", "method": "seakr",
                                             "options": {"delta": -1000}}, timeout=300)
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["method"] == "seakr" and isinstance(d["answer"], str)
    assert d["trace"]["totals"]["retrievals"] >= 1 and d["trace"]["steps"]


def test_precision_is_taken_at_start_and_reported(small_index):
    from helpers import serving

    from seakr.models.kernels import int8_available

    if not int8_available():
        pytest.skip("torch without fbgemm/x86 quantised kernels")
    with serving(small_index, extra=("--precision", "int8")) as (proc, url):
        assert httpx.get(url + "/v1/health").json()["precision"] == "int8"


def test_validation_errors_are_clear_4xx(server):
    url, _ = server
    cases = [
        ({"question": ""}, 422), ({"question": "   "}, 422), ({"question": "x" * 2001}, 422),
        ({"question": "q", "method": "selfrag"}, 422), ({"question": "q", "options": {"tempature": 1}}, 422),
        ({"question": "q", "options": {"rerank": "random"}}, 422), ({"question": "q", "extra": 1}, 422), ({}, 422),
    ]
    for body, code in cases:
        r = httpx.post(url + "/v1/answer", json=body, timeout=60)
        assert r.status_code == code, (body, r.status_code, r.text)
        assert "detail" in r.json()
    r = httpx.post(url + "/v1/answer", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422
    r = httpx.post(url + "/v1/answer", json={"question": "q", "method": "SeaKR"}, timeout=60)  # as the paper writes it
    assert r.json()["errors"] == [{"field": "body.method", "error": "one of seakr, cot, single, ircot, flare, dragin, "
                                                                    "not 'SeaKR' (did you mean 'seakr'?)"}], r.text
    for body, at, field in (({"question": "q", "Method": "cot"}, "body.Method", "method"),  # a key in other case
                            ({"question": "q", "passages": [{"Text": "x"}]}, "body.passages.0.passage.Text", "text")):
        r = httpx.post(url + "/v1/answer", json=body, timeout=60)
        assert {"field": at, "error": f"unknown key {at.rsplit('.', 1)[1]!r} (did you mean {field!r}?)"} in \
            r.json()["errors"], r.text
    for body, why in ((b'{"question": "Caf\xe9?"}', "not UTF-8 text"),  # each was 400 "an error parsing the body"
                      # 30,000 deep: past the parser of Python 3.11 (5,000) and 3.13 (10,000), within the body limit
                      (b'{"question": "q", "options": {"k": ' + b"[" * 30_000 + b"]" * 30_000 + b"}}", "nested too deeply"),
                      (b'{"question": "q", "options": {"k": ' + b"9" * 5000 + b"}}", "a number of over 4,300 digits")):
        for route in ("/v1/answer", "/v1/answer/stream"):
            r = httpx.post(url + route, content=body, headers={"content-type": "application/json"})
            assert r.status_code == 422 and why in r.json()["errors"][0]["error"], (route, r.status_code, r.text)
    mid = b'{"question": "q", "options": {"k": ' + b"[" * 5000 + b"]" * 5000 + b"}}"  # 3.11's parser refuses it, 3.13's schema
    assert httpx.post(url + "/v1/answer", content=mid, headers={"content-type": "application/json"}).status_code == 422
    r = httpx.post(url + "/v1/answer", content=json.dumps({"question": "x" * 3_000}).encode(),
                   headers={"content-type": "application/json"})
    assert r.status_code == 422  # over the 2,000-character question limit
    r = httpx.post(url + "/v1/answer", content=json.dumps({"question": "x" * 2_000_000}).encode(),
                   headers={"content-type": "application/json"})
    assert r.status_code == 413  # over the body limit: refused before it is read


def test_sse_streams_steps_then_answer(server):
    url, _ = server
    kinds = []
    with httpx.stream("POST", url + "/v1/answer/stream", json={"question": "Who directed Jaws?", "method": "ircot"},
                      timeout=300) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("event: "):
                kinds.append(line[7:])
            if line.startswith("data: ") and kinds[-1] == "event":
                kinds[-1] = "event:" + json.loads(line[6:])["type"]
    assert "event:step" in kinds and "event:model_call" in kinds and kinds[-1] == "answer"


def test_concurrency_limit_gives_429_not_5xx_and_bounded_memory(server):
    url, proc = server
    p = psutil.Process(proc.pid)
    rss0 = p.memory_info().rss

    def one(i):
        return httpx.post(url + "/v1/answer", json={"question": f"Who wrote play number {i}?", "method": "cot"},
                          timeout=600).status_code

    with cf.ThreadPoolExecutor(16) as ex:
        codes = list(ex.map(one, range(16)))
    growth = p.memory_info().rss - rss0
    print(f"\nconcurrency: 16 clients -> {codes.count(200)} x 200, {codes.count(429)} x 429, "
          f"other {[c for c in codes if c not in (200, 429)]}, server RSS growth {growth / 2**20:.0f} MiB")
    assert all(c < 500 for c in codes), codes
    assert codes.count(200) >= 2 and codes.count(429) >= 1, codes
    assert set(codes) <= {200, 429}
    assert p.memory_info().rss - rss0 < 600 * 2**20
    h = httpx.get(url + "/v1/health").json()
    assert h["inflight"] == 0 and h["rejected"] >= codes.count(429)


def test_options_are_type_checked_and_bounded(server):
    url, _ = server
    for opts in ({"k": "many"}, {"k": 10**9}, {"max_new_tokens": 10**6}, {"delta": "x"}, {"max_steps": 0},
                 {"prompt_set": "/etc/passwd"}, {"top_p": 5}, {"probes": "/etc"}, {"probes": "/nonexistent"}):
        r = httpx.post(url + "/v1/answer", json={"question": "q", "options": opts}, timeout=60)
        assert r.status_code == 422, (opts, r.status_code, r.text)
        if "probes" in opts:  # the same line whether the folder exists or not: no probing of the server's disk
            assert r.json()["errors"] == [{"field": "body.options.probes", "error": (
                "option probes: a folder on the server, set when it starts (seakr serve --option probes=DIR), "
                "not per request")}], r.text
