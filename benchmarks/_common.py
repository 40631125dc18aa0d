"""Shared by the benchmark scripts: median timing, one-JSON-line output, report files."""

import statistics
import time
from pathlib import Path

from seakr.common.jsontext import strict_json


def median_time(fn, repeat: int) -> float:
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def emit(res: dict, out: str | None) -> None:
    """Print the result as one JSON line and append it to ``out`` when given."""
    line = strict_json(res)
    print(line)
    if out:
        with open(out, "a") as f:
            f.write(line + "\n")


def dev_sets(pairs: list[str]) -> dict[str, list[str]]:
    """``NAME=RUN[,RUN...]`` arguments as {name: [runs]}."""
    return {k: v.split(",") for k, v in (x.split("=", 1) for x in pairs)}


def write_report(out: str, stem: str, res: dict, text: str) -> None:
    """``out/stem.json`` and ``out/stem.md``, and the markdown printed."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{stem}.json").write_text(strict_json(res, indent=2))
    (folder / f"{stem}.md").write_text(text)
    print(text)
