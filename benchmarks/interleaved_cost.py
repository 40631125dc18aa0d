"""SeaKR's seconds against IRCoT's with the machine's drift shared: both methods answer each question in turn, in one
process over one loaded model, which of the two goes first alternating from question to question.

Why: a grid runs one method after the other (``seakr eval --config``), so each method is timed in its own stretch of
the run, and a shared 2-core machine's speed moves over minutes: on MuSiQue (2026-12-07) the very same step calls took
1.03x to 1.27x as long in SeaKR's stretch as in IRCoT's. Taking turns question by question gives both methods the
same stretches. Neither reads the other's prompts: the model keeps a prompt's KV for the answer it belongs to only;
the demonstrations' prefix KV is shared by both, as it is within either method's own run.

    python benchmarks/interleaved_cost.py --data ../shared/data/musique/train_hipporag100.official.jsonl \\
      --rows benchmarks/results/unread-qwen-musique100 --out benchmarks/results/interleaved-cost-qwen-musique100.jsonl

Prints one JSON line: each method's seconds a question and F1, the ratio of the mean seconds with its 95 % CI
(questions resampled), and, with ``--rows`` (a grid's folder holding both methods' runs), on how many questions each
method's answer is the one its run there gave (the same answer: the same work, timed twice). ``--out`` also keeps
a row a question (id, each method's seconds, F1 and answer) before that line; ``--replay OUT`` prints the line
again from those rows, without a model.
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np

from _common import emit, pooled_args, pooled_setup
from seakr.common.jsontext import strict_json
from seakr.eval.metrics import f1_score
from seakr.eval.specs import method_options, parse_shard
from seakr.methods import build_method
from seakr.prompts import family_for

RUNS = {"seakr": "seakr-default", "ircot": "ircot"}  # a method: its run's folder in a report grid


def ratio_ci(a: np.ndarray, b: np.ndarray, n: int = 2000, seed: int = 0) -> list[float]:
    """95 % CI of mean(a) / mean(b), the questions resampled together (their shared length cancels)."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(a), size=(n, len(a)))
    r = a[idx].mean(axis=1) / b[idx].mean(axis=1)
    return [float(np.quantile(r, 0.025)), float(np.quantile(r, 0.975))]


def recorded(rows: Path | None, method: str) -> dict[str, str]:
    """{id: prediction} of ``method``'s run in the grid folder ``rows`` (none without one)."""
    if rows is None:
        return {}
    with open(rows / RUNS[method] / "scores.jsonl") as f:
        return {r["id"]: r["prediction"] for r in map(json.loads, f)}


def summary(rows: list[dict], same: dict | None) -> dict:
    """The figures of the per-question rows: each method's mean seconds and F1, the ratio and its CI."""
    secs = {m: np.array([r[m]["seconds"] for r in rows]) for m in RUNS}
    return {"n": len(rows), "seconds": {m: round(float(v.mean()), 3) for m, v in secs.items()},
            "f1": {m: round(100 * float(np.mean([r[m]["f1"] for r in rows])), 1) for m in RUNS},
            "seakr_over_ircot": round(float(secs["seakr"].mean() / secs["ircot"].mean()), 3),
            "ci95": [round(x, 3) for x in ratio_ci(secs["seakr"], secs["ircot"])], "same_answer_as_rows": same}


def replay(path: Path) -> dict:
    """The summary line of an ``--out`` file, computed again from its rows."""
    *rows, last = [json.loads(x) for x in path.read_text().splitlines()]
    return {**{k: last[k] for k in ("bench", "data", "precision")},
            **summary(rows, last["same_answer_as_rows"])}


def run(a) -> tuple[list[dict], dict]:
    """Both methods on each question, taking turns; the rows and, with ``a.rows``, how many answers match."""
    examples, engine, lm = pooled_setup(a)
    if a.shard:  # the questions of these shards (as ``seakr eval --shard I/N`` takes them), in the file's order
        picked = {parse_shard(x) for x in a.shard}
        examples = [ex for i, ex in enumerate(examples) if any(i % n == k for k, n in picked)]
    examples = examples[: a.limit]
    family = family_for(a.data)
    methods = {m: build_method(m, lm, engine, **method_options(m, {}, family)) for m in RUNS}
    before = {m: recorded(a.rows, m) for m in RUNS}
    same, rows = {m: 0 for m in RUNS}, []
    for i, ex in enumerate(examples):
        row = {"id": ex.id}
        for m in list(RUNS) if i % 2 == 0 else list(RUNS)[::-1]:  # who goes first alternates
            t = time.perf_counter()
            ans = methods[m].answer(ex.question).answer
            row[m] = {"seconds": round(time.perf_counter() - t, 3), "f1": f1_score(ans, ex.answers), "prediction": ans}
            same[m] += before[m].get(ex.id) == ans
        rows.append(row)
        print(f"{i + 1}/{len(examples)} " + " ".join(f"{m} {row[m]['seconds']:.2f}s" for m in RUNS), flush=True)
    return rows, same


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    pooled_args(ap, "musique/train_hipporag100.official.jsonl")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--shard", action="append", help="I/N: this shard's questions (repeat for several)")
    ap.add_argument("--rows", type=Path, default=None, help="a report grid's folder with both methods' runs")
    ap.add_argument("--out", default=None, help="a JSONL file: a row a question, then the summary line")
    ap.add_argument("--replay", type=Path, default=None, help="an --out file: print its summary again from its rows")
    a = ap.parse_args()
    if a.replay:
        print(strict_json(replay(a.replay)))
        return
    rows, same = run(a)
    res = {"bench": "interleaved_cost", "data": Path(a.data).name, "precision": a.precision,
           **summary(rows, same if a.rows else None)}
    if a.out:
        Path(a.out).write_text("".join(strict_json(x) + "\n" for x in rows))
    emit(res, a.out)


if __name__ == "__main__":
    main()
