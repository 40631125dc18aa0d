"""Running one admitted request on the model's worker pool, for every route that answers (``/v1/answer``, its
stream, ``/v1/chat/completions``): admission (429 when full), the deadline and the client hanging up (the work is
cancelled at its next decode step and its slot frees), and the mapping of a failure to a status. The routes only
shape what comes out: one place decides what a request may cost in time, whatever door it came by."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from typing import AsyncIterator

from fastapi import HTTPException, Request

from ..models.base import Cancelled
from ..search.base import SearchError


class Busy(Exception):
    pass


BUSY = {"status_code": 429, "detail": "busy: too many requests in flight, try again later",
        "headers": {"Retry-After": "5"}}


def too_large(e: MemoryError) -> str:
    """What a client reads when its request needs more memory than the server has free now: the model's own
    measure, and the options that size it."""
    said = str(e) or "the request needs more memory than the server has free"
    return f"out of memory: {said}; lower k, max_new_tokens or n_candidates"


def failure(service, e: BaseException) -> tuple[int, str]:
    """The status and words a client gets for work that failed (never a traceback)."""
    if isinstance(e, SearchError):
        return 503, service.search_failure(e)
    if isinstance(e, ValueError):
        return 422, str(e)
    if isinstance(e, MemoryError):  # the model's refusal of a call too large for the device, before it starts
        return 503, too_large(e)
    return 500, f"internal error: {type(e).__name__}"


def _log_abandoned(fut) -> None:
    """The end of work whose client is gone: one log line, never "Future exception was never retrieved"."""
    err = None if fut.cancelled() else fut.exception()
    if err is not None and not isinstance(err, Cancelled):
        print(f"seakr: an abandoned request failed: {type(err).__name__}: {str(err)[:200]}", file=sys.stderr)
    elif err is not None:
        print("seakr: an abandoned request stopped (cancelled)", file=sys.stderr)


async def answer_once(service, method, question: str, request: Request) -> dict:
    """The answer as clients see it (:meth:`AnswerService.public`), or an HTTPException: 429 when full, 504 past
    the deadline or when the client hangs up (the work is cancelled), else :func:`failure`'s status."""
    cancel = threading.Event()
    try:
        fut = service.submit(method.answer, question, None, cancel)
    except Busy:
        raise HTTPException(**BUSY) from None
    afut = asyncio.wrap_future(fut)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + service.limits.timeout
    while not afut.done():  # watch for the client hanging up and for the deadline
        await asyncio.wait({afut}, timeout=0.5)
        if afut.done():
            break
        if await request.is_disconnected() or loop.time() > deadline:
            cancel.set()
            service.cancelled += 1
            afut.add_done_callback(_log_abandoned)  # its outcome is read, so nothing logs a traceback
            raise HTTPException(504, detail=f"timed out after {service.limits.timeout:.0f} s") from None
    try:
        return service.public(afut.result(), method)
    except BaseException as e:  # a bug must not take the service down
        status, detail = failure(service, e)
        raise HTTPException(status, detail=detail) from None


def start_stream(service, method, question: str) -> tuple[asyncio.Queue, threading.Event]:
    """Start the work with a listener: the queue receives ``("event", trace event)`` as each decision is made,
    then ``("answer", public answer)`` or ``("error", {"detail", "status"})``. Raises 429 when full."""
    loop = asyncio.get_running_loop()
    q: asyncio.Queue = asyncio.Queue(maxsize=10_000)
    cancel = threading.Event()

    def put(kind, data):
        loop.call_soon_threadsafe(q.put_nowait, (kind, data))

    def work():
        try:
            ans = method.answer(question, listener=lambda ev: put("event", ev), cancel=cancel)
            put("answer", service.public(ans, method))
        except Cancelled:
            raise  # the client is gone: the slot's release counts it cancelled, not served
        except BaseException as e:  # reported to the client as an error event, never a hang
            status, detail = failure(service, e)
            put("error", {"detail": detail, "status": status})
            raise  # the slot's release counts it failed

    try:
        service.submit(work)
    except Busy:
        raise HTTPException(**BUSY) from None
    return q, cancel


async def stream_items(service, q: asyncio.Queue, cancel: threading.Event) -> AsyncIterator[tuple[str, dict]]:
    """The queue's items until the answer or an error; past the deadline one ``("error", timed out)``. A client
    that goes away (the generator is closed before the end) cancels the work."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + service.limits.timeout
    done = False
    try:
        while True:
            try:
                kind, data = await asyncio.wait_for(q.get(), timeout=max(0.1, deadline - loop.time()))
            except asyncio.TimeoutError:
                yield "error", {"detail": "timed out", "status": 504}
                return
            yield kind, data
            if kind in ("answer", "error"):
                done = True
                return
    finally:
        if not done:
            cancel.set()
            service.cancelled += 1


async def sse(items: AsyncIterator[tuple[str, dict]]) -> AsyncIterator[str]:
    """``/v1/answer/stream``'s body: one named server-sent event per item."""
    async for kind, data in items:
        yield f"event: {kind}\ndata: {json.dumps(data)}\n\n"
