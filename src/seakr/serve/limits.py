"""What the service admits and what one request may cost, kept apart from the app so the command line reads its
defaults without importing FastAPI."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator

from ..common.schema import Count, Positive, PositiveReal, schema


def _sendable(token: str) -> str:
    """A token an HTTP client can send: a header's value is read without its outer spaces and cannot hold a control
    character, so a token with either would refuse every request, its own client's too."""
    if not token.strip():
        raise ValueError("empty: give a token, or leave it out to serve without one")
    if token != token.strip() or any(ord(c) < 32 or ord(c) == 127 for c in token):
        raise ValueError("a token no HTTP client can send (spaces around it or a control character in it); give it "
                         "without them")
    return token


def check_origin(origin: str) -> str:
    """A web origin a browser sends (``scheme://host[:port]``, no path, no trailing slash: the browser's is compared
    with it as text), or ``*``; lower case, as browsers send it."""
    if origin == "*":
        return origin
    if not re.fullmatch(r"https?://[^/\s?#]+", origin, re.IGNORECASE):
        why = " (no path or trailing slash: an origin is scheme://host[:port])" if re.match(
            r"https?://[^/\s]+/", origin, re.IGNORECASE) else ""
        raise ValueError(f"{origin!r} is not a web origin such as http://localhost:3000{why}")
    return origin.lower()


def _origins(v):
    """One origin alone, or a list of them, as the tuple the service keeps."""
    return (v,) if isinstance(v, str) else tuple(v) if isinstance(v, list) else v


#: the command line's flag for each setting, which a refusal names
FLAGS = {"workers": "--workers", "queue": "--queue", "timeout": "--timeout", "max_rows": "--max-rows",
         "max_work": "--max-work", "max_kv_mb": "--max-kv-mb", "max_body": "--max-body",
         "max_prompt_tokens": "--max-prompt-tokens", "body_seconds": "--body-timeout",
         "token": "--token (or SEAKR_TOKEN)", "docs": "--docs", "cors_origins": "--cors-origin"}


def _as_flag(field: str, text: str) -> ValueError:
    return ValueError(FLAGS[field.removeprefix("limit ")] + text)


@schema("limit", field_error=_as_flag)
class ServiceLimits:
    """How many requests the service takes at once, what one may cost, and who may ask (``seakr serve --workers
    --queue --timeout --max-rows --max-work --max-body --token ...``)."""

    workers: Positive = 1  # generations at once (a CPU model gains nothing from two: their calls take turns)
    queue: Count = 4  # requests admitted beyond the workers; more get 429 at once
    timeout: PositiveReal = 600.0  # seconds a request may take before 504 (it is then cancelled)
    max_rows: Positive = 256  # rows of the largest model call (greedy + k samples, times the N re-rank candidates)
    max_work: Positive = 200_000  # token-forwards of every call together, worst case (SeaKR, paper defaults: ~97,000)
    max_kv_mb: Positive = 2048  # attention cache of the largest call, worst case (SeaKR, paper defaults, 0.5B: ~0.9 GB)
    #: prompt tokens of one call, worst case (time: a prompt is prefilled before its first token; on a 2-core AVX2
    #: CPU in fp32 4,096 tokens took 15 s with SmolLM2-135M and 32 s with the 0.5B: docs/performance.md)
    max_prompt_tokens: Positive = 4096
    max_body: Positive = 1 << 20  # bytes of a request body: room for a request's 64 passages of 4,000 characters
    body_seconds: PositiveReal = 10.0  # a request body must arrive within this
    token: Annotated[str, AfterValidator(_sendable)] | None = None  # required on every route but /v1/health
    docs: bool = True  # serve /docs and /openapi.json
    # web pages of other origins that may call the API ("*": any); none by default
    cors_origins: Annotated[tuple[str, ...], BeforeValidator(_origins),
                            AfterValidator(lambda v: tuple(map(check_origin, v)))] = ()
