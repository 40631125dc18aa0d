"""HTTP service: ``POST /v1/answer``, ``POST /v1/answer/stream`` (server-sent events), ``GET /v1/health``,
and the trace viewer at ``/``.

One model instance is shared by every request. The model runs on ``workers`` threads (default 1:
a CPU model gains nothing from two generations at once; the workers' requests interleave, their model
calls take turns on the one model); at most ``workers + queue`` requests are
admitted at a time, the rest get ``429`` at once (never an unbounded backlog).

What a request may cost is checked before it is admitted (:func:`work_of`): the rows of its largest
model call and its attention cache (memory), and the token-forwards of all its calls, prompts
included, in the worst case (time), against the
server's limits; beyond them it gets ``422`` naming the limit. A request whose client disconnects or
that times out (``504``) is cancelled: it stops at its next decode step and frees its slot. Bodies over
``max_body`` bytes get ``413``. With a token set, every route but ``/v1/health`` needs
``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..methods import METHODS, build_method
from ..models.base import Cancelled
from ..search.base import Passage, SearchError
from ..common.console import said
from ..common.schema import worded
from ..common.jsontext import loads
from . import openai_api
from .limits import ServiceLimits

from .schema import (LIMITS, MAX_PASSAGE_TEXT, MAX_PASSAGE_TITLE, MAX_PASSAGES, MAX_QUESTION,  # noqa: F401
                     AnswerRequest, AnswerResponse, ChatRequest, Door, MethodName, OptionRefused, PassageIn)
from .work import Busy, answer_once, sse, start_stream, stream_items, too_large  # noqa: F401
import socket
import os
import ipaddress
from ..models.machine import device_name
from ..search import as_engine, passages_engine


#: Tokens a retrieved passage adds to a prompt, for the budget: DPR's 100-word passages are 130-150
#: tokens in the packaged tokenizers, rounded up (the demonstrations are a cached prefix, counted once).
PASSAGE_TOKENS = 200
#: The type of a body's validation error that the server's own policy raised: its words name the field
REFUSED = "refused"


def refused(loc: tuple, msg: str) -> RequestValidationError:
    """The server's refusal of the body's field at ``loc``, answered as pydantic's refusals of the body are."""
    return RequestValidationError([{"type": REFUSED, "loc": loc, "msg": msg}])


def _calls(method) -> list[tuple[int, int, int, int]]:
    """(prompts, rows per prompt, new tokens, passages in the prompt) of every call, worst case."""
    c = method.config
    sampled = c.k + 1 if method.name == "seakr" else 1
    T, steps, N, P = c.max_new_tokens, c.max_steps, c.n_candidates, getattr(c, "max_passages", c.n_candidates)
    A = c.answer_tokens  # a forced answer's budget
    if method.name == "seakr":
        if getattr(c, "mode", "multihop") == "simple":
            return [(1, sampled, T, 0), (1, sampled, A, 0), (N, sampled, T, 1), (N, sampled, A, 1)]
        check = [(1, sampled, 24, 0)] if getattr(c, "gate", "step") != "step" else []
        final = [(1, sampled, A, 0), (1, sampled, T, P), (1, sampled, A, P)]
        return check + [(1, sampled, T, P), (N, sampled, T, P)] * steps + final
    if method.name in ("cot", "single"):
        return [(1, 1, T, N), (1, 1, A, N)]
    # ircot: one call per step; flare/dragin: tentative + regenerate per step; a forced answer last
    return [(1, 1, T, P)] * (steps if method.name == "ircot" else 2 * steps) + [(1, 1, A, P)]


def index_passage_tokens(engine, lm) -> int:
    """Tokens a passage of ``engine`` may add to a prompt: those of its longest passage in characters (token counts
    follow characters closely, not exactly), at least PASSAGE_TOKENS; PASSAGE_TOKENS where the engine cannot say
    (one's own engine, an Elasticsearch index seakr did not build, a tantivy index of over a million passages built
    before it recorded its longest). Over an index of whole articles, a budget of 200-token passages would admit
    requests whose prompts hold thousands of tokens each."""
    longest = getattr(engine, "longest_passage", None)
    p = longest() if callable(longest) else None
    return max(PASSAGE_TOKENS, lm.count_tokens(p.text)) if isinstance(p, Passage) else PASSAGE_TOKENS


def work_of(method, question_tokens: int = 0, passage_tokens: int | list[int] = PASSAGE_TOKENS) -> dict:
    """Worst-case cost of answering one question with ``method``.

    ``passage_tokens``: what one passage may add to a prompt (the index's longest), or the request's own passages'
    token counts, a prompt of p passages holding the p longest;
    ``rows``: rows of the largest call (greedy + k samples per prompt, times SeaKR's N re-rank prompts);
    ``work``: token-forwards of every call together, decoding (rows x new tokens) plus prefilling each
    prompt (the question's own tokens and its passages): a long question is paid on every call;
    ``kv_mb``: the attention cache of the largest call times the model's bytes per cached token: rows x (prompt +
    new tokens), or where the model shares each prompt's cache among its rows (``shared_attention``) one copy of
    each prompt and every row's new tokens; ``prompt``: the longest prompt of any call (its prefill time)."""
    info = method.lm.info() or {}
    per_token, shared = int(info.get("kv_bytes_per_token") or 0), bool(info.get("shared_attention"))
    room = method.prompt_budget() if hasattr(method, "prompt_budget") else None  # passages are cut to fit it
    own = sorted(passage_tokens, reverse=True) if isinstance(passage_tokens, list) else None
    work = kv = rows = longest = 0
    for prompts, r, T, passages in _calls(method):
        ctx = question_tokens + (sum(own[:passages]) if own is not None else passages * passage_tokens)
        ctx = min(ctx, room) if room else ctx
        rows, longest = max(rows, prompts * r), max(longest, ctx)
        work += prompts * r * T + prompts * ctx
        kv = max(kv, (prompts * ctx + prompts * r * T if shared else prompts * r * (ctx + T)) * per_token)
    return {"rows": rows, "work": work, "kv_mb": round(kv / 2 ** 20, 1), "prompt": longest}


class AnswerService:
    """The shared model + engine, the limits, an admission counter and the worker pool."""

    def __init__(self, lm, engine, method: str | Door = "seakr", defaults: dict | None = None,
                 limits: ServiceLimits | None = None):
        """``method``: the server's method by name, its ``defaults`` under every request's options; or a
        :class:`Door` already made (and so checked) before the model loaded. ``limits``: the workers, queue and
        timeout, and what a request may cost (:class:`ServiceLimits`)."""
        # an engine of one's own with only search() gets the rest of the protocol (health, error messages read it)
        self.lm, self.engine = lm, as_engine(engine)
        self.door = method if isinstance(method, Door) else \
            Door(method, dict(defaults or {}), (lm.info() or {}).get("context_tokens"))
        self.method = self.door.method
        self.limits = limits = limits or ServiceLimits()
        self.passage_tokens = index_passage_tokens(engine, lm)  # what the budget counts for the index's passages
        check_memory(limits, str((lm.info() or {}).get("device", "cpu")))
        self.pool = ThreadPoolExecutor(max_workers=limits.workers, thread_name_prefix="seakr-model")
        self._lock = threading.Lock()
        self.inflight, self.started = 0, time.time()
        self.served = self.rejected = self.cancelled = self.failed = 0
        self._health = (-self.HEALTH_TTL, "ok")

    @property
    def capacity(self) -> int:
        """Requests admitted at once: the workers' and the queue's."""
        return self.limits.workers + self.limits.queue

    def build(self, req: AnswerRequest, at: tuple = ("body", "options")):
        """The method a request asks for, its options settled by the server's :class:`Door`; a refused option is a
        validation error of the body at ``at`` + the option (where the chat route's options ride: the body itself),
        as every other field's is."""
        name = req.method or self.method
        try:
            config = self.door.settle(name, req.options)
        except OptionRefused as e:
            raise refused((*at, *[e.field] * bool(e.field)), str(e)) from None
        if req.passages is not None and not METHODS[name].retrieves:  # indexed for the request, and never read
            raise refused(("body", "passages"), f"passages: method {name!r} never searches; leave them out (or choose "
                                                "a method that retrieves)")
        try:
            method = build_method(name, self.lm, self.request_engine(req.passages), config=config)
        except (ValueError, TypeError) as e:
            raise HTTPException(422, detail=str(e)) from None
        # the request's own passages as they will be prompted: title and text, each counted
        own = [self.lm.count_tokens(p if isinstance(p, str) else f"{p.title}\n{p.text}") for p in req.passages or []]
        self.check_budget(method, req.question, own or 0)
        return method

    @staticmethod
    def searchable(method):
        """The method, when it has something to search or searches nothing; else refused before admission, in the
        words of the HTTP request."""
        if method.retrieves and method.engine is None:
            raise HTTPException(422, detail=f"method {method.name!r} searches, and this server has no index: send "
                                            "the passages to search with the request ('passages')")
        return method

    def request_engine(self, passages):
        """The server's index, or the request's own passages indexed for it (removed with the request)."""
        if passages is None:
            return self.engine

        try:  # texts and {id, title, text} rows, read as in code (an id left out is doc-<position>)
            return passages_engine([p if isinstance(p, str) else p.model_dump() for p in passages], advise=False)
        except (ValueError, TypeError, SearchError) as e:  # a repeated id, no text at all
            raise HTTPException(422, detail=f"passages: {str(e).removeprefix('index: ')}") from None

    def build_default(self):
        """The server's own method, with the defaults its :class:`Door` settled when it was made."""
        return build_method(self.method, self.lm, self.engine, config=self.door.config)

    def check_budget(self, method, question: str = "", passage_tokens: int | list[int] = 0) -> None:
        """``passage_tokens``: the request's own passages' token counts; else the index's longest passage."""
        pt = passage_tokens or self.passage_tokens
        w = work_of(method, self.lm.count_tokens(question) if question else 0, pt)
        if w["prompt"] > self.limits.max_prompt_tokens:
            raise HTTPException(422, detail=f"request too large: a call's prompt holds up to {w['prompt']} tokens (the "
                                            "question and its passages); this server allows max_prompt_tokens="
                                            f"{self.limits.max_prompt_tokens}")
        pt = max(pt) if isinstance(pt, list) else pt
        if w["rows"] > self.limits.max_rows:
            raise HTTPException(422, detail=f"request too large: its largest model call decodes {w['rows']} rows "
                                            "(k+1 per prompt x re-rank candidates); this server allows "
                                            f"max_rows={self.limits.max_rows}")
        if w["work"] > self.limits.max_work:
            raise HTTPException(422, detail=f"request too large: up to {w['work']} token-forwards (decoding: rows x "
                                            f"max_new_tokens; prefilling: the question and passages of up to {pt} "
                                            "tokens, on every call); "
                                            f"this server allows max_work={self.limits.max_work}")
        if w["kv_mb"] > self.limits.max_kv_mb:
            raise HTTPException(422, detail=f"request too large: its largest call holds about {w['kv_mb']:.0f} MB of "
                                            "attention cache (prompts and their rows' new tokens, passages of up to "
                                            f"{pt} tokens); this server allows "
                                            f"max_kv_mb={self.limits.max_kv_mb}")

    def admit(self):
        with self._lock:
            if self.inflight >= self.capacity:
                self.rejected += 1
                raise Busy()
            self.inflight += 1

    def release(self, fut=None):
        """The slot frees when the work ends; a request whose work was cancelled was not served, one that failed
        (its index, the model) is counted as failed."""
        err = None if fut is None or fut.cancelled() else fut.exception()
        gave_up = fut is not None and (fut.cancelled() or isinstance(err, Cancelled))
        with self._lock:
            self.inflight -= 1
            if not gave_up:
                self.failed += err is not None
                self.served += err is None

    #: seconds a health probe of the index is taken as still true (monitors may ask every second)
    HEALTH_TTL = 5.0

    def index_health(self) -> str:
        """"ok", or "failing: <what the search says>" (one search of the index, at most every HEALTH_TTL s)."""
        now = time.monotonic()
        if self.engine is None or now - self._health[0] < self.HEALTH_TTL:
            return self._health[1]
        try:  # a query, and one stored passage read back (a search that finds nothing reads none)
            self.engine.search("health", 1)
            if callable(getattr(self.engine, "longest_passage", None)):
                self.engine.longest_passage()
            self._health = (now, "ok")
        except Exception as e:  # noqa: BLE001 - whatever the index says, said as the clients read it
            self.search_failure(e)  # which records it as the health
        return self._health[1]

    def submit(self, fn, *args):
        self.admit()
        fut = self.pool.submit(fn, *args)
        fut.add_done_callback(self.release)  # the slot frees when the work really ends
        return fut

    def public(self, ans, method=None) -> dict:
        """The answer as clients see it: no server-side path or URL of the index (it may hold credentials);
        the options ``method`` took and never read, and why, in ``config.unread_options``, so the client sees it."""
        d = ans.to_dict()
        eng = (d.get("config") or {}).get("engine")
        if isinstance(eng, dict):
            for key in ("path", "url"):
                eng.pop(key, None)
        unread = dict(method.unread()) if method is not None else {}
        if unread and isinstance(d.get("config"), dict):
            d["config"]["unread_options"] = unread
        return d

    def index_name(self) -> str:
        m = self.engine.metadata() if self.engine is not None else {}
        return str(m.get("index") or m.get("engine") or "index")

    def search_failure(self, e: Exception) -> str:
        """What a client is told when the index fails: what went wrong, never where the index lives (the
        server's log keeps the whole message)."""
        msg = str(e)
        m = self.engine.metadata() if self.engine is not None else {}
        for place in filter(None, (m.get("path"), m.get("url"))):
            msg = msg.replace(str(place), "<index>")
        msg = re.sub(r"(?:[A-Za-z]:)?(?:[/\\][^\s/\\:'\"]+)+[/\\]?", "<path>", msg)  # any other file path
        print(f"seakr: search index failed: {e}", file=sys.stderr)
        self._health = (time.monotonic(), f"failing: {msg}")  # what /v1/health says until its next probe
        return f"search index {self.index_name()}: {msg}"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_port(host: str, port: int) -> None:
    """Fail before the model loads when the address cannot be bound (taken, or not this machine's)."""
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(fam, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host.strip("[]"), port))
        except OSError as e:
            raise ValueError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None


def check_memory(limits: ServiceLimits, device: str) -> None:
    """Every worker may hold a request's largest attention cache at once: on a CPU the machine's memory must
    hold them all, or the system would kill the server under load. The command checks it before the model loads,
    on the device its flags name; the service, on the loaded model's."""
    workers, max_kv_mb = limits.workers, limits.max_kv_mb
    if device_name(device) != "cpu" or not hasattr(os, "sysconf"):
        return
    try:
        ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return
    if workers * max_kv_mb * 2 ** 20 > ram:
        raise ValueError(f"--workers {workers} x --max-kv-mb {max_kv_mb}: up to {workers * max_kv_mb / 1024:,.0f} GB "
                         f"of attention cache at once, more than this machine's {ram / 2 ** 30:.0f} GB of memory; "
                         "lower --workers (a CPU gains nothing from more than one) or --max-kv-mb")


def _static(name: str) -> str:
    return resources.files("seakr.serve").joinpath("static", name).read_text(encoding="utf-8")


def unreadable_body(exc: Exception) -> str | None:
    """What FastAPI's "There was an error parsing the body" (400) means where the request is at fault: bytes
    that are not UTF-8. Said as malformed JSON is (422)."""
    cause = exc.__cause__ if getattr(exc, "status_code", None) == 400 else None
    return "not UTF-8 text (a JSON body is UTF-8)" if isinstance(cause, UnicodeDecodeError) else None


class _Request(Request):
    """A request whose JSON body is read as every file of ours is (:func:`seakr.common.jsontext.loads`): a key
    given twice in one object (``{"question": "a", "question": "b"}``) is refused, and JSON nested past the
    parser or a number past Python's digits is malformed JSON, said where it is."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            self._json = loads(body.decode(json.detect_encoding(body), "surrogatepass"))
        return self._json


class _Route(APIRoute):
    def get_route_handler(self):
        handler = super().get_route_handler()

        async def route(request: Request):
            return await handler(_Request(request.scope, request.receive))
        return route


def _said(e: dict, body: type) -> str:
    """A refusal of a request's body (schema ``body``) in the words every door uses (``common.schema.worded``); the
    server's own refusals in their words; malformed JSON with what is wrong ("JSON decode error" alone did not say)."""
    if e.get("type") == REFUSED:
        return e.get("msg", "")
    if e.get("type") == "json_invalid":
        return f"invalid JSON ({(e.get('ctx') or {}).get('error') or e.get('msg', '')})"
    loc = tuple(e.get("loc") or ())
    return worded({**e, "loc": loc[1:] if loc[:1] == ("body",) else loc}, body)


def _field(e: dict) -> str:
    """Where a refusal is, as the errors' ``field`` says it (``body.options.k``); malformed JSON is the body's."""
    return "body" if e.get("type") == "json_invalid" else ".".join(str(x) for x in e.get("loc", []))


def create_app(service: AnswerService) -> FastAPI:
    docs = service.limits.docs
    app = FastAPI(title="seakr", version="0.1.0", docs_url="/docs" if docs else None, redoc_url=None,
                  openapi_url="/openapi.json" if docs else None,
                  description="SeaKR: self-aware knowledge retrieval. Answers with the full decision trace.")
    app.router.route_class = _Route
    app.add_middleware(_Guard, limits=service.limits)
    if service.limits.cors_origins:  # added last, so outermost: a browser's preflight (no token) is answered here
        from starlette.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(service.limits.cors_origins),
                           allow_methods=["GET", "POST", "HEAD"],
                           allow_headers=["Authorization", "Content-Type", "Last-Event-ID"],
                           max_age=600)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        body = ChatRequest if openai_api.is_openai_path(request.url.path) else AnswerRequest
        errs = [{"field": _field(e), "error": _said(e, body)} for e in exc.errors()]
        if openai_api.is_openai_path(request.url.path):  # its clients read {"error": {"message", "param"}}
            first = errs[0] if errs else {"field": "body", "error": "invalid request"}
            field = first["field"].removeprefix("body").lstrip(".") or None
            said = first["error"]
            named = exc.errors() and exc.errors()[0].get("type") == REFUSED  # its words name the option already
            return openai_api.error_response(422, f"{field}: {said}" if field and not named else said, param=field)
        return JSONResponse(status_code=422,
                            content={"detail": "invalid request", "errors": json.loads(json.dumps(errs, default=str))})

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        why = unreadable_body(exc)
        if openai_api.is_openai_path(request.url.path):
            return openai_api.error_response(422 if why else exc.status_code, why or str(exc.detail),
                                             headers=getattr(exc, "headers", None))
        if why is None:
            return await http_exception_handler(request, exc)
        return JSONResponse(status_code=422,
                            content={"detail": "invalid request", "errors": [{"field": "body", "error": why}]})

    @app.get("/v1/health")
    def health():  # a thread of FastAPI's pool: the probe may wait on a search cluster
        """200 while the index answers; 503 ("degraded") when its search fails, so a monitor sees it."""
        info, index = service.lm.info(), service.index_health()
        body = {"status": "ok" if index == "ok" else "degraded", "index": index, "model": info.get("model"),
                "precision": info.get("precision"), "method": service.method,
                "documents": service.engine.count() if service.engine is not None else 0,
                "inflight": service.inflight, "capacity": service.capacity, "served": service.served,
                "failed": service.failed, "rejected": service.rejected, "cancelled": service.cancelled}
        return JSONResponse(status_code=200 if index == "ok" else 503, content=body)

    # HEAD: what many uptime monitors send; one operation in the schema (two methods on one route gave the
    # schema a duplicate operation id, and the server log its warning)
    app.add_api_route("/v1/health", health, methods=["HEAD"], include_in_schema=False)

    _answer_route(app, service)
    _stream_route(app, service)
    openai_api.add_routes(app, service)
    _viewer_routes(app)
    return app


def _answer_route(app: FastAPI, service: AnswerService) -> None:
    @app.post("/v1/answer", response_model=AnswerResponse,
              responses={422: {"description": "invalid request"}, 429: {"description": "busy: try later"},
                         503: {"description": "the search index failed"}, 504: {"description": "timed out"}})
    async def answer(req: AnswerRequest, request: Request):
        method = service.searchable(service.build(req))
        return await answer_once(service, method, req.question, request)


def _stream_route(app: FastAPI, service: AnswerService) -> None:
    @app.post("/v1/answer/stream", responses={200: {"content": {"text/event-stream": {}}},
                                              429: {"description": "busy"}, 422: {"description": "invalid"}})
    async def answer_stream(req: AnswerRequest):
        """Server-sent events: one ``event`` per trace event and step as it happens, then ``answer``
        (or ``error``, at once when the work fails)."""
        method = service.searchable(service.build(req))
        q, cancel = start_stream(service, method, req.question)
        return StreamingResponse(sse(stream_items(service, q, cancel)), media_type="text/event-stream")


def _viewer_routes(app: FastAPI) -> None:
    @app.api_route("/", methods=["GET", "HEAD"], response_class=HTMLResponse, include_in_schema=False)
    async def index():
        return HTMLResponse(_static("index.html"))

    @app.get("/static/{name}", include_in_schema=False)
    async def static(name: str):
        if name not in ("viewer.js", "viewer.css"):
            raise HTTPException(404, detail="not found")
        media = "text/javascript" if name.endswith(".js") else "text/css"
        return Response(_static(name), media_type=media)


def _bearer_ok(scope, token: str) -> bool:
    """``Authorization: Bearer <token>``: the scheme in any case (RFC 7235), the token compared as UTF-8
    bytes in constant time (a non-ASCII token matches itself, not only its latin-1 bytes)."""
    raw = next((v for k, v in scope.get("headers", []) if k.lower() == b"authorization"), b"")
    scheme, _, cred = raw.strip().partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(cred.strip(), token.encode("utf-8"))


#: What is served without the token: the health check, and the viewer's page and files (no data; a browser's page
#: load cannot send a header, and the page sends the token with its API requests).
OPEN_PATHS = ("/v1/health", "/", "/static/viewer.js", "/static/viewer.css")


class _Guard:
    """ASGI middleware: the bearer token (every route but /v1/health) and the body-size limit, checked
    before the application reads anything."""

    def __init__(self, app, limits: ServiceLimits):
        self.app, self.limits = app, limits

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        token = self.limits.token
        if token and scope.get("path") not in OPEN_PATHS and not _bearer_ok(scope, token):
            return await _reply(send, 401, "missing or wrong bearer token", {"www-authenticate": "Bearer"},
                                path=scope.get("path", ""))
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limits.max_body):
            return await _reply(send, 413, f"request body over {self.limits.max_body} bytes",
                                path=scope.get("path", ""))
        why = _unread_body(scope, headers)
        if why:
            return await _reply(send, 415, why, path=scope.get("path", ""))
        seen, done = 0, False
        deadline = asyncio.get_running_loop().time() + self.limits.body_seconds

        async def limited():
            nonlocal seen, done
            if done:  # the body is in: what follows is the client hanging up, waited for as long as the work runs
                return await receive()
            try:  # a body trickled a byte at a time held its connection (and its slot) for as long as it liked
                msg = await asyncio.wait_for(receive(), max(0.0, deadline - asyncio.get_running_loop().time()))
            except asyncio.TimeoutError:
                raise _TooSlow() from None
            seen += len(msg.get("body", b""))
            done = msg.get("type") != "http.request" or not msg.get("more_body", False)
            if seen > self.limits.max_body:  # a chunked body without a length: stop reading here
                raise _TooLarge()
            return msg

        try:
            await self.app(scope, limited, send)
        except _TooLarge:
            await _reply(send, 413, f"request body over {self.limits.max_body} bytes", path=scope.get("path", ""))
        except _TooSlow:
            await _reply(send, 408, f"request body not received within {self.limits.body_seconds:g} s",
                         {"connection": "close"}, path=scope.get("path", ""))


def _unread_body(scope, headers: dict) -> str | None:
    """Why a POST body to the API would not be read as JSON, said before reading it: FastAPI reads a body as JSON
    only when it is declared so (a form post, ``curl -d`` without a header), and never decompresses one."""
    if scope.get("method") != "POST" or not scope.get("path", "").startswith("/v1/"):
        return None
    enc = headers.get("content-encoding", "").strip().lower()
    if enc not in ("", "identity"):
        return f"Content-Encoding {said(enc)} is not read: send the body uncompressed"
    media = headers.get("content-type", "").split(";")[0].strip().lower()
    if not (media == "application/json" or media.startswith("application/") and media.endswith("+json")):
        got = f"Content-Type {said(media)}" if media else "no Content-Type"
        return f"send the body as JSON with the header Content-Type: application/json (this request had {got})"
    return None


class _TooLarge(BaseException):  # FastAPI turns any Exception while reading a body into a 400
    pass


class _TooSlow(BaseException):
    pass


async def _reply(send, status: int, detail: str, extra: dict | None = None, path: str = "") -> None:
    content = openai_api.error_body(status, detail) if openai_api.is_openai_path(path) else {"detail": detail}
    body = json.dumps(content).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
