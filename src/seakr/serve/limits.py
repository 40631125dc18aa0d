"""What one request may cost, kept apart from the app so the command line reads its defaults without
importing FastAPI."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ServiceLimits:
    """What one request may cost, and who may ask (``seakr serve --max-rows/--max-work/--max-body/--token``)."""

    max_rows: int = 256  # rows of the largest model call (greedy + k samples, times the N re-rank candidates)
    max_work: int = 200_000  # token-forwards of every call together, worst case (SeaKR, paper defaults: ~97,000)
    max_kv_mb: int = 2048  # attention cache of the largest call, worst case (SeaKR, paper defaults, 0.5B: ~0.9 GB)
    max_body: int = 64 * 1024  # bytes of a request body
    token: str | None = None  # bearer token required on every route but /v1/health
    docs: bool = True  # serve /docs and /openapi.json
