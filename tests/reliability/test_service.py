"""The HTTP service under hostile or careless clients: a real uvicorn process with SmolLM2 on loopback.
Work budget, disconnecting and timed-out clients, body size, NaN, a damaged index, the token, what
the trace exposes. Numbers refer to the items of the reliability probe; every loop here is bounded in count and time."""

import json
import shutil
import threading
import time

import httpx
import pytest

from helpers import HOTPOT, serving
from scripted import Reply, ScriptedLM
from seakr.serve.app import AnswerRequest, AnswerService, ServiceLimits, work_of

pytestmark = pytest.mark.slow
LONG = {"delta": -1000, "max_steps": 6, "max_new_tokens": 40, "k": 6}  # retrieves every step: many model calls


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    from seakr.search.corpora import read_corpus
    from seakr.search.tantivy_engine import TantivyEngine

    out = tmp_path_factory.mktemp("svc") / "idx"
    TantivyEngine.build(read_corpus(HOTPOT), out)
    return out


@pytest.fixture(scope="module")
def server(index):
    with serving(str(index), workers=1, queue=1, timeout=120) as (proc, url):
        yield url, proc


def wait_idle(url, seconds=90):
    deadline = time.time() + seconds
    while time.time() < deadline:
        h = httpx.get(url + "/v1/health").json()
        if h["inflight"] == 0:
            return h
        time.sleep(0.2)
    pytest.fail(f"still {h['inflight']} in flight after {seconds} s")


def test_02_work_budget_is_checked_before_admission():
    svc = AnswerService(ScriptedLM(lambda v: Reply("x")), None, limits=ServiceLimits())
    big = AnswerRequest(question="q", options={"k": 64, "max_new_tokens": 256, "max_steps": 12, "n_candidates": 10,
                                               "max_passages": 12, "delta": 0.0})
    with pytest.raises(Exception) as e:
        svc.build(big)
    assert e.value.status_code == 422 and "max_rows=256" in e.value.detail
    tall = AnswerRequest(question="q", options={"k": 20, "max_new_tokens": 256, "max_steps": 12, "delta": 0.0})
    with pytest.raises(Exception) as e:
        svc.build(tall)
    assert e.value.status_code == 422 and "max_work=200000" in e.value.detail
    default = svc.build(AnswerRequest(question="q", options={"delta": 0.0}))
    w = work_of(default, 1)  # paper defaults: k=20, N=3, 100 tokens, 7 steps, 5 passages; a one-token question
    decode = 7 * (21 + 63) * 100 + 21 * (32 + 100 + 32)
    prefill = 7 * (1 + 3) * (1 + 5 * 200) + 1 + 2 * (1 + 5 * 200)  # every prompt: the question and its passages
    # the scripted model declares no cache size; the longest prompt: the question and 5 passages of 200 tokens
    assert w == {"rows": 63, "work": decode + prefill, "kv_mb": 0.0, "prompt": 1 + 5 * 200}
    # a long question (2,000 emoji are about 6,000 tokens) is paid on every one of the 31 prompts
    assert work_of(default, 6000)["work"] - w["work"] == 5999 * 31


def test_02_prompt_tokens_and_attention_memory_are_in_the_budget():
    class Sized(ScriptedLM):
        def info(self):
            return {**super().info(), "kv_bytes_per_token": 12288}  # Qwen2.5-0.5B in bf16: 24 x 2 x 2 x 64 x 2

    svc = AnswerService(Sized(lambda v: Reply("x")), None, limits=ServiceLimits(max_kv_mb=512))
    wide = AnswerRequest(question="q", options={"mode": "simple", "k": 64, "n_candidates": 3, "max_new_tokens": 256,
                                                "delta": 0.0})
    with pytest.raises(Exception) as e:
        svc.build(wide)
    assert e.value.status_code == 422 and "max_kv_mb=512" in e.value.detail
    cheap = {"k": 2, "max_steps": 2, "max_new_tokens": 16, "delta": 0.0}
    svc = AnswerService(Sized(lambda v: Reply("x")), None, limits=ServiceLimits(max_work=20_000))
    svc.build(AnswerRequest(question="Who wrote Hamlet?", options=cheap))
    with pytest.raises(Exception) as e:  # the same cheap options, but 999 question tokens on each of 11 prompts
        svc.build(AnswerRequest(question="x " * 999, options=cheap))
    assert e.value.status_code == 422 and "max_work=20000" in e.value.detail


def test_02_the_budget_over_http(server):
    url, _ = server
    r = httpx.post(url + "/v1/answer", json={"question": "q", "options": {"k": 64, "max_new_tokens": 256, "max_steps": 12,
                                                                          "n_candidates": 10, "max_passages": 12}})
    assert r.status_code == 422 and "max_rows" in r.json()["detail"]


def test_03_clients_that_hang_up_free_their_slots(server):
    url, _ = server
    h = httpx.get(url + "/v1/health").json()
    before, served = h["cancelled"], h["served"]

    def hang_up_stream():
        with httpx.stream("POST", url + "/v1/answer/stream", json={"question": "Who directed Jaws?", "options": LONG},
                          timeout=60) as r:
            assert r.status_code == 200
            next(r.iter_lines())  # the work has started; now go away

    def hang_up_plain():
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(url + "/v1/answer", json={"question": "Who wrote Hamlet?", "options": LONG}, timeout=1.5)

    a = threading.Thread(target=hang_up_stream)
    a.start()
    time.sleep(0.5)
    hang_up_plain()
    a.join(60)
    h = wait_idle(url)
    assert h["cancelled"] >= before + 2
    r = httpx.post(url + "/v1/answer", json={"question": "Who directed Jaws?", "method": "cot"}, timeout=120)
    assert r.status_code == 200  # the slots are free again
    assert httpx.get(url + "/v1/health").json()["served"] == served + 1  # a request whose client left is not served


def test_03_bodies_over_the_limit_get_413_unread(server):
    url, _ = server
    r = httpx.post(url + "/v1/answer", content=b'{"question": "' + b"x" * 2_000_000 + b'"}',
                   headers={"content-type": "application/json"})
    assert r.status_code == 413 and "request body over" in r.json()["detail"]

    def chunks():  # no content-length: the limit still stops the read
        for _ in range(300):
            yield b"x" * 10_000

    r = httpx.post(url + "/v1/answer", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413


@pytest.mark.parametrize("opt", ["temperature", "alpha", "delta", "top_p"])
def test_11_nan_options_are_422(server, opt):
    url, _ = server
    body = '{"question": "Who?", "options": {"%s": NaN}}' % opt
    r = httpx.post(url + "/v1/answer", content=body.encode(), headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text


def test_18_the_trace_shows_no_server_path(server, index):
    url, _ = server
    r = httpx.post(url + "/v1/answer", json={"question": "Who wrote Hamlet?", "method": "cot"}, timeout=120)
    assert r.status_code == 200
    assert str(index) not in r.text and "path" not in (r.json()["config"]["engine"] or {})


def test_03_a_timed_out_request_is_cancelled(index):
    with serving(str(index), workers=1, queue=0, timeout=2) as (proc, url):
        r = httpx.post(url + "/v1/answer", json={"question": "Who directed Jaws?", "options": LONG}, timeout=60)
        assert r.status_code == 504
        h = wait_idle(url, 60)  # the slot frees at the next decode step, not when the long call would end
        assert h["cancelled"] >= 1 and h["served"] == 0  # cancelled is not served
        ok = httpx.post(url + "/v1/answer", json={"question": "Who directed Jaws?", "method": "cot"}, timeout=60)
        assert ok.status_code in (200, 504) and ok.status_code != 429  # admitted: the slot was given back
        log = open(proc.log_path).read()
        assert "Traceback" not in log and "never retrieved" not in log, log[-2000:]  # one line per abandoned request


def test_08_a_damaged_index_fails_both_endpoints_at_once(index, tmp_path):
    copy = tmp_path / "idx"
    shutil.copytree(index, copy)
    with serving(str(copy), workers=1, queue=1, timeout=300) as (proc, url):
        for f in next(copy.glob("gen-*")).iterdir():  # damage every stored document in place, under the running server
            if f.name.endswith(".store"):  # r+b, never truncate: the server has the file mapped (SIGBUS)
                with open(f, "r+b") as h:
                    data = h.read()
                    h.seek(0)
                    h.write(bytes(b ^ 0xFF for b in data))
        r = httpx.post(url + "/v1/answer", json={"question": "Who directed Jaws?", "method": "single"}, timeout=120)
        assert r.status_code == 503 and r.headers["content-type"].startswith("application/json")
        assert "search index" in r.json()["detail"] and str(copy) not in r.text and str(tmp_path) not in r.text
        t = time.time()
        kinds = []
        with httpx.stream("POST", url + "/v1/answer/stream", json={"question": "Who directed Jaws?", "method": "single"},
                          timeout=120) as s:
            for line in s.iter_lines():
                if line.startswith("event: "):
                    kinds.append(line[7:])
                if line.startswith("data: ") and kinds and kinds[-1] == "error":
                    assert "search index" in json.loads(line[6:])["detail"] and str(tmp_path) not in line
        assert kinds[-1] == "error" and time.time() - t < 300  # not the 300 s timeout
        h = httpx.get(url + "/v1/health")  # a monitor sees the index fail, and the failures are not "served"
        assert h.status_code == 503 and h.json()["status"] == "degraded" and h.json()["index"].startswith("failing: ")
        assert h.json()["failed"] == 2 and h.json()["served"] == 0 and str(tmp_path) not in h.text


def test_11_bearer_scheme_in_any_case_and_a_non_ascii_token():
    from seakr.serve.app import _bearer_ok

    def scope(value: bytes):
        return {"headers": [(b"authorization", value)]}
    token = "pässwört-ключ"
    assert _bearer_ok(scope(b"Bearer " + token.encode()), token)
    assert _bearer_ok(scope(b"bearer " + token.encode()), token) and _bearer_ok(scope(b"BEARER  " + token.encode()), token)
    assert not _bearer_ok(scope(b"Bearer " + token.encode("latin-1", "replace")), token)
    assert not _bearer_ok(scope(b"Basic " + token.encode()), token) and not _bearer_ok({"headers": []}, token)


def trickled(url, headers):
    """Five clients that send a body a byte a second get 408 once the server's body timeout (2 s here) passes, not
    when they choose to finish: their connections and slots are not theirs to hold."""
    import socket
    import threading

    host, port = url.removeprefix("http://").split(":")
    said, started = [], time.time()

    def client():
        s = socket.create_connection((host, int(port)), timeout=30)
        head = (f"POST /v1/answer HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                f"Authorization: {headers['authorization']}\r\nContent-Length: 60\r\n\r\n")
        s.sendall(head.encode())
        try:
            for b in b'{"question": "' + b"x" * 40:
                s.sendall(bytes([b]))
                time.sleep(1)
        except OSError:  # the server closed the connection: what it said is read below
            pass
        said.append((s.recv(4096).decode(errors="replace"), time.time() - started))
        s.close()

    threads = [threading.Thread(target=client) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(said) == 5 and all(r.startswith("HTTP/1.1 408") and "within 2 s" in r for r, _ in said), said
    assert all(took < 10 for _, took in said)  # not the 40 s a byte a second would take


def test_token_protects_every_route_but_health_and_the_viewers_page(index):
    """The viewer's page and files carry no data and a browser's page load cannot send a header: they are served
    without the token, and the page sends it with its API requests (test_browser)."""
    with serving(str(index), workers=1, queue=1, extra=("--token", "s3cret", "--no-docs", "--body-timeout", "2")) as (
            proc, url):
        assert httpx.get(url + "/v1/health").status_code == 200
        for path in ("/", "/static/viewer.js", "/static/viewer.css"):
            assert httpx.get(url + path).status_code == 200, path
        for method, path in (("POST", "/v1/answer"), ("POST", "/v1/answer/stream"), ("GET", "/docs"),
                             ("GET", "/v1/models"), ("POST", "/v1/chat/completions"), ("GET", "/static/x.js")):
            r = httpx.request(method, url + path, json={"question": "q"})
            assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", path
        ok = {"authorization": "Bearer s3cret"}
        assert httpx.get(url + "/", headers=ok).status_code == 200
        trickled(url, ok)
        assert httpx.get(url + "/docs", headers=ok).status_code == 404  # --no-docs
        assert httpx.get(url + "/openapi.json", headers=ok).status_code == 404
        wrong = httpx.post(url + "/v1/answer", json={"question": "q"}, headers={"authorization": "Bearer s3cre"})
        assert wrong.status_code == 401
