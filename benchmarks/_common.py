"""Shared by the benchmark scripts: median timing, one-JSON-line output, report files, a pooled-index set-up."""

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


SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def pooled_args(ap, data: str, precision: str = "auto") -> None:
    """The flags of a benchmark over one dataset's pooled paragraphs + filler: ``--model``, ``--precision``,
    ``--data`` (``data`` under ../shared/data by default) and ``--filler``."""
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--precision", default=precision)
    ap.add_argument("--data", default=str(SHARED / data))
    ap.add_argument("--filler", default=str(SHARED / "corpus" / "wiki_filler1000.flashrag.jsonl"))


def pooled_setup(a):
    """(every question of ``a.data``, a search engine over its pooled paragraphs + ``a.filler``, the model): the
    index is built once into the cache."""
    from seakr.eval.corpus import pooled_index
    from seakr.eval.datasets import load_dataset
    from seakr.models import load_model
    from seakr.search import open_engine

    full = load_dataset(a.data)
    return full, open_engine(pooled_index(a.data, full, [a.filler])), load_model(a.model, precision=a.precision)
