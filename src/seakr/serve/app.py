"""HTTP service: ``POST /v1/answer``, ``POST /v1/answer/stream`` (server-sent events), ``GET /v1/health``,
and the trace viewer at ``/``.

One model instance is shared by every request. The model runs on ``workers`` threads (default 1:
a CPU model gains nothing from two generations at once); at most ``workers + queue`` requests are
admitted at a time, the rest get ``429`` at once (never an unbounded backlog). A request that
exceeds ``timeout`` seconds gets ``504``; its computation still occupies its slot until it ends, so
memory stays bounded under any load.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from typing import Any, Literal

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..methods import METHODS, build_method
from ..prompts import FAMILIES

MAX_QUESTION = 2000
#: Per-request ceilings on the options that scale compute or memory (the service protects itself).
LIMITS = {"k": 64, "max_new_tokens": 256, "max_steps": 12, "max_passages": 12, "n_candidates": 10, "n_shot": 16,
          "query_max_words": 256, "keep_top_k": 200, "top_k": 1000}
MethodName = Literal["seakr", "cot", "single", "ircot", "flare", "dragin"]
assert set(MethodName.__args__) == set(METHODS)


class AnswerRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: str = Field(min_length=1, max_length=MAX_QUESTION, description="the question (1-2,000 characters)")
    method: MethodName | None = Field(default=None, description="default: the server's method")
    options: dict[str, float | int | str | bool | None] | None = Field(
        default=None, description="method options, e.g. {\"estimator\": \"energy\", \"max_steps\": 4}")

    @field_validator("question")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("question is blank")
        return v


class AnswerResponse(BaseModel):
    question: str
    answer: str
    method: str
    trace: dict[str, Any]
    config: dict[str, Any]


class Busy(Exception):
    pass


class AnswerService:
    """The shared model + engine, an admission counter and the worker pool."""

    def __init__(self, lm, engine, method: str = "seakr", defaults: dict | None = None, workers: int = 1,
                 queue: int = 4, timeout: float = 600.0):
        self.lm, self.engine, self.method, self.defaults = lm, engine, method, dict(defaults or {})
        self.capacity, self.timeout = workers + queue, timeout
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="seakr-model")
        self._lock = threading.Lock()
        self.inflight = 0
        self.served = self.rejected = 0

    def build(self, req: AnswerRequest):
        name = req.method or self.method
        opts = {**self.defaults, **(req.options or {})}
        cfg_fields = {f.name for f in dataclasses.fields(METHODS[name].Config)}
        unknown = sorted(set(opts) - cfg_fields)
        if unknown:
            raise HTTPException(422, detail=f"unknown option(s) for method {name}: {', '.join(unknown)}")
        for key, cap in LIMITS.items():
            v = opts.get(key)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v > cap:
                raise HTTPException(422, detail=f"option {key}: at most {cap} on this server, got {v}")
        if opts.get("prompt_set") not in (None, *FAMILIES):  # packaged sets only: no server-side file paths
            raise HTTPException(422, detail=f"option prompt_set: one of {', '.join(FAMILIES)}")
        try:
            return build_method(name, self.lm, self.engine, **opts)
        except (ValueError, TypeError) as e:
            raise HTTPException(422, detail=str(e)) from None

    def admit(self):
        with self._lock:
            if self.inflight >= self.capacity:
                self.rejected += 1
                raise Busy()
            self.inflight += 1

    def release(self, _=None):
        with self._lock:
            self.inflight -= 1
            self.served += 1

    def submit(self, fn, *args):
        self.admit()
        fut = self.pool.submit(fn, *args)
        fut.add_done_callback(self.release)  # the slot frees when the work really ends
        return fut


def _static(name: str) -> str:
    return resources.files("seakr.serve").joinpath("static", name).read_text()


def create_app(service: AnswerService) -> FastAPI:
    app = FastAPI(title="seakr", version="0.1.0",
                  description="SeaKR: self-aware knowledge retrieval. Answers with the full decision trace.")

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        errs = [{"field": ".".join(str(x) for x in e.get("loc", [])), "error": e.get("msg", "")} for e in exc.errors()]
        return JSONResponse(status_code=422, content={"detail": "invalid request", "errors": json.loads(json.dumps(errs, default=str))})

    @app.get("/v1/health")
    async def health() -> dict:
        info = service.lm.info()
        return {"status": "ok", "model": info.get("model"), "method": service.method,
                "documents": service.engine.count() if service.engine is not None else 0,
                "inflight": service.inflight, "capacity": service.capacity,
                "served": service.served, "rejected": service.rejected}

    @app.post("/v1/answer", response_model=AnswerResponse,
              responses={422: {"description": "invalid request"}, 429: {"description": "busy: try later"},
                         504: {"description": "timed out"}})
    async def answer(req: AnswerRequest):
        method = service.build(req)
        try:
            fut = service.submit(method.answer, req.question)
        except Busy:
            raise HTTPException(429, detail="busy: too many requests in flight, try again later",
                                headers={"Retry-After": "5"}) from None
        try:
            ans = await asyncio.wait_for(asyncio.wrap_future(fut), timeout=service.timeout)
        except asyncio.TimeoutError:
            raise HTTPException(504, detail=f"timed out after {service.timeout:.0f} s") from None
        except ValueError as e:
            raise HTTPException(422, detail=str(e)) from None
        except Exception as e:  # a bug must not take the service down; report it without a traceback
            raise HTTPException(500, detail=f"internal error: {type(e).__name__}") from e
        return ans.to_dict()

    @app.post("/v1/answer/stream", responses={200: {"content": {"text/event-stream": {}}},
                                              429: {"description": "busy"}, 422: {"description": "invalid"}})
    async def answer_stream(req: AnswerRequest):
        """Server-sent events: one ``event`` per trace event and step as it happens, then ``answer``."""
        method = service.build(req)
        loop = asyncio.get_running_loop()
        q: asyncio.Queue = asyncio.Queue(maxsize=10_000)

        def listener(ev):
            loop.call_soon_threadsafe(q.put_nowait, ("event", ev))

        def work():
            try:
                ans = method.answer(req.question, listener=listener)
                loop.call_soon_threadsafe(q.put_nowait, ("answer", ans.to_dict()))
            except Exception as e:  # reported to the client as an error event
                loop.call_soon_threadsafe(q.put_nowait, ("error", {"detail": str(e)}))

        try:
            service.submit(work)
        except Busy:
            raise HTTPException(429, detail="busy: too many requests in flight, try again later",
                                headers={"Retry-After": "5"}) from None

        async def events():
            deadline = loop.time() + service.timeout
            while True:
                try:
                    kind, data = await asyncio.wait_for(q.get(), timeout=max(0.1, deadline - loop.time()))
                except asyncio.TimeoutError:
                    yield f"event: error\ndata: {json.dumps({'detail': 'timed out'})}\n\n"
                    return
                yield f"event: {kind}\ndata: {json.dumps(data)}\n\n"
                if kind in ("answer", "error"):
                    return

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def index():
        return HTMLResponse(_static("index.html"))

    @app.get("/static/{name}", include_in_schema=False)
    async def static(name: str):
        if name not in ("viewer.js", "viewer.css"):
            raise HTTPException(404, detail="not found")
        media = "text/javascript" if name.endswith(".js") else "text/css"
        return Response(_static(name), media_type=media)

    return app
