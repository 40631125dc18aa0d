"""What one request may cost, kept apart from the app so the command line reads its defaults without
importing FastAPI."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..common.console import said
import re


@dataclass
class ServiceLimits:
    """What one request may cost, and who may ask (``seakr serve --max-rows/--max-work/--max-body/--token``)."""

    max_rows: int = 256  # rows of the largest model call (greedy + k samples, times the N re-rank candidates)
    max_work: int = 200_000  # token-forwards of every call together, worst case (SeaKR, paper defaults: ~97,000)
    max_kv_mb: int = 2048  # attention cache of the largest call, worst case (SeaKR, paper defaults, 0.5B: ~0.9 GB)
    #: prompt tokens of one call, worst case (time: a prompt is prefilled before its first token; on a 2-core AVX2
    #: CPU in fp32 4,096 tokens took 15 s with SmolLM2-135M and 32 s with the 0.5B: docs/performance.md)
    max_prompt_tokens: int = 4096
    max_body: int = 1 << 20  # bytes of a request body: room for a request's 64 passages of 4,000 characters
    body_seconds: float = 10.0  # a request body must arrive within this (a slow client holds a connection no longer)
    token: str | None = None  # bearer token required on every route but /v1/health
    docs: bool = True  # serve /docs and /openapi.json
    cors_origins: tuple[str, ...] = ()  # web pages of other origins that may call the API ("*": any); none by default

    #: the command line's flag for each bound, which its refusal names
    FLAGS: ClassVar[dict[str, str]] = {"max_rows": "--max-rows", "max_work": "--max-work", "max_kv_mb": "--max-kv-mb",
                                       "max_body": "--max-body", "max_prompt_tokens": "--max-prompt-tokens"}

    def __post_init__(self):
        for name, flag in self.FLAGS.items():  # from Python, max_body=-1 refused every request with a 413
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{flag}: expected a whole number >= 1, got {said(v)}")
        b = self.body_seconds
        if isinstance(b, bool) or not isinstance(b, (int, float)) or not 0 < b < float("inf"):
            raise ValueError(f"--body-timeout: expected seconds > 0, got {said(b)}")
        origins = (self.cors_origins,) if isinstance(self.cors_origins, str) else self.cors_origins  # one, from Python
        self.cors_origins = tuple(check_origin(o) for o in origins)
        t = self.token
        # a token no client can send: a header cannot hold a control character (a newline from a token file
        # read with $(cat ...) in some shells' quoting), and the header's value is read without its outer
        # spaces, so " tok" never matched: the server refused every request
        if t is not None and (not isinstance(t, str) or t != t.strip() or any(ord(c) < 32 or ord(c) == 127 for c in t)):
            raise ValueError("--token (or SEAKR_TOKEN): a token no HTTP client can send (spaces around it or a control "
                             "character in it); give it without them")


def check_origin(origin) -> str:
    """A web origin a browser sends (``scheme://host[:port]``, no path, no trailing slash: it is compared as a
    string, and ``http://localhost:3000/`` never matched the page's ``http://localhost:3000``), or ``*``."""
    if origin == "*":
        return origin
    if not isinstance(origin, str) or not re.fullmatch(r"https?://[^/\s?#]+", origin, re.IGNORECASE):
        why = " (no path or trailing slash: an origin is scheme://host[:port])" if isinstance(origin, str) and \
            re.match(r"https?://[^/\s]+/", origin, re.IGNORECASE) else ""
        raise ValueError(f"--cors-origin: {said(origin)} is not a web origin such as http://localhost:3000{why}")
    return origin.lower()
