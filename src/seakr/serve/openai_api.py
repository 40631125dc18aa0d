"""The OpenAI-compatible door: ``GET /v1/models`` and ``POST /v1/chat/completions``, so any chat-completions client
(the ``openai`` package, LangChain's ``ChatOpenAI``, curl) asks SeaKR as it asks vLLM or llama.cpp.

A model id is ``MODEL/METHOD`` (``qwen2.5-coder-0.5b/seakr``; the bare method or the bare model, the server's
method, are taken too). The last user message is the question; earlier messages are not read, and the reply says
so. The method's options ride in the body as extra fields, and with them the request becomes the same
:class:`~seakr.serve.schema.AnswerRequest` that ``/v1/answer`` reads: one schema, one budget, one admission and
cancellation (:mod:`.work`). The reply is a ``chat.completion`` whose content is the answer, with ``usage`` (the
prompt and generated tokens the model really ran) and the decisions in a ``seakr`` object
(:func:`seakr.methods.trace.decisions`); with ``stream: true``, ``chat.completion.chunk`` events carry each trace
event in ``seakr.event`` as it happens, then the answer's text, then ``[DONE]``. Errors have OpenAI's shape
(``{"error": {"message", "type", "param", "code"}}``), which its clients turn into their own exceptions."""

from __future__ import annotations

import json
import time
import uuid
from typing import AsyncIterator

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import ValidationError

from ..methods import METHODS
from ..methods.trace import decisions
from .schema import AnswerRequest, ChatRequest
from .work import answer_once, start_stream, stream_items

#: The routes whose errors take OpenAI's shape.
PATHS = ("/v1/chat/completions", "/v1/models")
_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
          413: "invalid_request_error", 415: "invalid_request_error", 422: "invalid_request_error",
          408: "timeout", 429: "rate_limit_error", 503: "server_error", 504: "timeout"}


def is_openai_path(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in PATHS)


def error_body(status: int, message: str, param: str | None = None, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": _TYPES.get(status, "server_error"), "param": param,
                      "code": code or str(status)}}


def error_response(status: int, message: str, param: str | None = None, code: str | None = None,
                   headers: dict | None = None) -> JSONResponse:
    return JSONResponse(status_code=status, content=error_body(status, message, param, code), headers=headers)


def model_ids(service) -> list[str]:
    """``MODEL/METHOD`` for every method the server answers with, its own method first."""
    name = str((service.lm.info() or {}).get("model") or "model")
    order = [service.method, *(m for m in METHODS if m != service.method)]
    return [f"{name}/{m}" for m in order]


def method_of(service, model: str) -> str:
    """The method a request's ``model`` names: ``MODEL/METHOD``, ``METHOD``, or ``MODEL`` (the server's method);
    404 with the ids served otherwise."""
    name = str((service.lm.info() or {}).get("model") or "model")
    served, _, method = model.rpartition("/")
    if served in (name, "") and method in METHODS:
        return method
    if model == name:
        return service.method
    served_ids = ", ".join(model_ids(service))
    raise HTTPException(404, detail=f"model {model!r} is not served here; choose one of {served_ids}")


def to_answer_request(service, req: ChatRequest) -> tuple[AnswerRequest, list[str]]:
    """The chat request as ``/v1/answer``'s request (the question, the method, the options, the passages) and the
    notes on what was not read; 422 naming the field where it is not one."""
    method = method_of(service, req.model)
    try:
        question, notes = req.question()
        return AnswerRequest.model_validate({"question": question, "method": method, "options": req.options() or None,
                                             "passages": req.passages}), notes
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err.get("loc", ()) if x != "options")
        raise HTTPException(422, detail=f"{where or 'body'}: {err.get('msg')}") from None
    except ValueError as e:
        raise HTTPException(422, detail=str(e)) from None


def usage(trace: dict) -> dict:
    t = trace.get("totals") or {}
    p, c = int(t.get("prompt_tokens") or 0), int(t.get("generated_tokens") or 0)
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


def extension(public: dict, notes: list[str]) -> dict:
    """The reply's ``seakr`` object: the decisions, the options the method did not read, and the notes."""
    config = public.get("config") or {}
    out = {"method": public.get("method"), **decisions(public.get("trace") or {})}
    if config.get("unread_options"):
        out["unread_options"] = config["unread_options"]
    return out | ({"notes": notes} if notes else {})


def completion(public: dict, model: str, notes: list[str]) -> dict:
    return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "system_fingerprint": None,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": public.get("answer", "")},
                         "logprobs": None, "finish_reason": "stop"}],
            "usage": usage(public.get("trace") or {}), "seakr": extension(public, notes)}


def _chunk(cid: str, created: int, model: str, delta: dict, finish: str | None = None, **extra) -> str:
    body = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
            "system_fingerprint": None, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                                      "finish_reason": finish}], **extra}
    return f"data: {json.dumps(body)}\n\n"


async def chunks(items: AsyncIterator[tuple[str, dict]], model: str, notes: list[str],
                 include_usage: bool) -> AsyncIterator[str]:
    """The stream: the role, one chunk per trace event (``seakr.event``), the answer's text with the decisions,
    the finish, the usage where asked, ``[DONE]``; a failure is one ``error`` object, as OpenAI streams it."""
    cid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
    yield _chunk(cid, created, model, {"role": "assistant", "content": ""})
    async for kind, data in items:
        if kind == "event":
            yield _chunk(cid, created, model, {}, seakr={"event": data})
        elif kind == "error":
            yield f"data: {json.dumps(error_body(data.get('status', 500), data['detail']))}\n\n"
            return
        else:
            yield _chunk(cid, created, model, {"content": data.get("answer", "")}, seakr=extension(data, notes))
            yield _chunk(cid, created, model, {}, "stop")
            if include_usage:
                tail = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                        "system_fingerprint": None, "choices": [], "usage": usage(data.get("trace") or {})}
                yield f"data: {json.dumps(tail)}\n\n"
    yield "data: [DONE]\n\n"


def add_routes(app: FastAPI, service) -> None:
    @app.get("/v1/models")
    async def models() -> dict:
        created = int(service.started)
        return {"object": "list", "data": [{"id": i, "object": "model", "created": created, "owned_by": "seakr"}
                                           for i in model_ids(service)]}

    @app.get("/v1/models/{model_id:path}")
    async def model(model_id: str) -> dict:
        if model_id not in model_ids(service):
            raise HTTPException(404, detail=f"model {model_id!r} is not served here")
        return {"id": model_id, "object": "model", "created": int(service.started), "owned_by": "seakr"}

    @app.post("/v1/chat/completions", responses={401: {"description": "missing or wrong token"},
                                                 404: {"description": "model not served"},
                                                 422: {"description": "invalid request"}, 429: {"description": "busy"}})
    async def chat(req: ChatRequest, request: Request):
        asked, notes = to_answer_request(service, req)
        method = service.searchable(service.build(asked, at=("body",)))  # its options ride as the body's own fields
        model_id = f"{(service.lm.info() or {}).get('model') or 'model'}/{method.name}"
        if not req.stream:
            return completion(await answer_once(service, method, asked.question, request), model_id, notes)
        q, cancel = start_stream(service, method, asked.question)
        include = bool(req.stream_options and req.stream_options.include_usage)
        return StreamingResponse(chunks(stream_items(service, q, cancel), model_id, notes, include),
                                 media_type="text/event-stream")
