"""The one-time GGUF conversion with and without reading the file's header once, side by side.

transformers parses a GGUF's header for the config, again for the tokenizer and again for the weights, and
rebuilds gguf's tensor-name table per submodule; ``registry._gguf_parsed_once`` shares both within one
conversion. Rounds alternate the two ways into fresh temporary caches; per way the median seconds, the
ratio, and whether the written folders are byte-identical (the speed-up must not change a stored byte).
Usage: python benchmarks/convert.py [--model smollm2-135m] [--dtype bfloat16] [--rounds 2] [--out FILE]
"""

from _common import emit  # noqa: E402
import argparse
import contextlib
import filecmp
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from seakr.models import registry  # noqa: E402


def convert(model: str, dtype: str, cache: Path, shared: bool) -> tuple[float, Path]:
    """Seconds for one conversion into ``cache`` (the module's own switch swapped out for the old way)."""
    real = registry._gguf_parsed_once
    registry._gguf_parsed_once = real if shared else contextlib.nullcontext
    os.environ["SEAKR_CACHE"] = str(cache)
    try:
        t = time.perf_counter()
        path, _ = registry.resolve(model, dtype)
        return time.perf_counter() - t, Path(path)
    finally:
        registry._gguf_parsed_once = real


def identical(a: Path, b: Path) -> bool:
    """Every file the conversion writes, byte for byte (the provenance file holds its own timings)."""
    names = sorted(p.name for p in a.iterdir() if p.name != "seakr-source.json")
    same, differ, errors = filecmp.cmpfiles(a, b, names, shallow=False)
    return not differ and not errors and len(same) == len(names)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out")
    a = ap.parse_args()
    times: dict[str, list[float]] = {"each_read": [], "read_once": []}
    folders: dict[str, Path] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            for way in (("each_read", "read_once") if r % 2 == 0 else ("read_once", "each_read")):
                s, folders[way] = convert(a.model, a.dtype, Path(tmp) / f"{way}-{r}", way == "read_once")
                times[way].append(s)
        res = {"benchmark": "convert", "model": a.model, "dtype": a.dtype, "rounds": a.rounds,
               **{f"{k}_s": round(statistics.median(v), 1) for k, v in times.items()},
               "ratio_each_over_once": round(statistics.median(times["each_read"])
                                             / statistics.median(times["read_once"]), 2),
               "identical_files": identical(folders["each_read"], folders["read_once"])}
    emit(res, a.out)


if __name__ == "__main__":
    main()
