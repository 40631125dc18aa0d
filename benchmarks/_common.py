"""Shared by the benchmark scripts: median timing and one-JSON-line output."""

import json
import statistics
import time


def median_time(fn, repeat: int) -> float:
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def emit(res: dict, out: str | None) -> None:
    """Print the result as one JSON line and append it to ``out`` when given."""
    line = json.dumps(res)
    print(line)
    if out:
        with open(out, "a") as f:
            f.write(line + "\n")
