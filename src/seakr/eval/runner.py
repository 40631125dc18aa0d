"""Run a method over a dataset: one JSONL line per question, flushed as each question ends.

``results.jsonl`` is appended and fsync'd after every question, so ``kill -9`` loses at most the
question in flight; ``resume=True`` skips the ids already there. Beside it: ``config.json`` (the
method's effective config, the engine, versions) and, at the end, ``summary.json`` + ``summary.md``.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

from .datasets import Example
from .metrics import bootstrap_ci, exact_match, f1_score


def versions() -> dict:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for pkg in ("seakr", "torch", "transformers", "tantivy", "numpy"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    return out


def read_results(path: Path) -> list[dict]:
    """Read a JSONL of finished rows, ignoring a torn last line (a kill in the middle of a write)."""
    rows = []
    if not path.exists():
        return rows
    with open(path) as f:
        for line in f:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                break
    return rows


class RowLog:
    """Append-only JSONL of finished items, shared by ``seakr eval`` and the studies.

    Every row is flushed and fsync'd before the next, so ``kill -9`` loses at most the item in
    flight. Opening an existing log needs ``resume=True`` (no silent mixing of two runs) and the same
    ``config["method"]`` (method, model, engine) as the one recorded in ``config.json`` beside it; a
    torn last line is dropped and the file rewritten so appends start on a clean line.
    """

    def __init__(self, out_dir: str | os.PathLike, rows_name: str, config: dict, *, resume: bool = False):
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / rows_name
        cfg_path = self.dir / "config.json"
        if self.path.exists() and self.path.stat().st_size and not resume:
            raise ValueError(f"{self.dir}: holds results already; pass --resume to continue or choose another --out")
        if resume and cfg_path.exists():
            old = json.loads(cfg_path.read_text())
            if _comparable(old.get("method")) != _comparable(json.loads(json.dumps(config.get("method")))):
                raise ValueError(f"{self.dir}: --resume with a different method config than the one recorded in config.json")
        cfg_path.write_text(json.dumps(config, indent=2))
        self.rows = read_results(self.path)
        if self.path.exists():
            with open(self.path, "w") as f:
                for r in self.rows:
                    f.write(json.dumps(r) + "\n")
        self.done = {r["id"] for r in self.rows}
        self._lock = threading.Lock()
        self._f = open(self.path, "a")

    def todo(self, examples):
        return [ex for ex in examples if ex.id not in self.done]

    def rows_for(self, examples) -> list[dict]:
        """The finished rows of these examples (a resumed log may hold more, e.g. from a larger --limit)."""
        want = {ex.id for ex in examples}
        return [r for r in self.rows if r["id"] in want]

    def append(self, row: dict, after=None) -> None:
        """Write one finished row; ``after(rows)`` runs under the same lock (progress display)."""
        with self._lock:
            self._f.write(json.dumps(row) + "\n")
            self._f.flush()
            os.fsync(self._f.fileno())
            self.rows.append(row)
            self.done.add(row["id"])
            if after:
                after(self.rows)

    def close(self) -> None:
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _comparable(cfg):
    """Config equality for --resume, ignoring fields that only describe where things ran."""
    if isinstance(cfg, dict):
        return {k: _comparable(v) for k, v in cfg.items() if k not in ("threads",)}
    return cfg


def summarize(rows: Sequence[dict], name: str = "") -> dict:
    if not rows:
        return {"name": name, "n": 0}
    em = [r["em"] for r in rows]
    f1 = [r["f1"] for r in rows]
    tot = [r["trace"]["totals"] for r in rows]
    return {
        "name": name,
        "n": len(rows),
        "em": statistics.mean(em), "em_ci95": bootstrap_ci(em),
        "f1": statistics.mean(f1), "f1_ci95": bootstrap_ci(f1, seed=1),
        "retrieval_rate": statistics.mean(t["retrievals"] > 0 for t in tot),
        "retrievals_per_question": statistics.mean(t["retrievals"] for t in tot),
        "model_calls_per_question": statistics.mean(t["model_calls"] for t in tot),
        "sampled_sequences_per_question": statistics.mean(t["sampled_sequences"] for t in tot),
        "generated_tokens_per_question": statistics.mean(t["generated_tokens"] for t in tot),
        "seconds_per_question": statistics.mean(r["seconds"] for r in rows),
    }


def summary_markdown(summaries: Sequence[dict]) -> str:
    head = "| run | n | EM | F1 | retrieval rate | retrievals/q | model calls/q | sampled seqs/q | s/q |\n|---|---|---|---|---|---|---|---|---|\n"
    lines = []
    for s in summaries:
        if not s.get("n"):
            lines.append(f"| {s['name']} | 0 | | | | | | | |")
            continue
        lines.append(
            f"| {s['name']} | {s['n']} | {100 * s['em']:.1f} ± {50 * (s['em_ci95'][1] - s['em_ci95'][0]):.1f} "
            f"| {100 * s['f1']:.1f} ± {50 * (s['f1_ci95'][1] - s['f1_ci95'][0]):.1f} | {s['retrieval_rate']:.2f} "
            f"| {s['retrievals_per_question']:.2f} | {s['model_calls_per_question']:.1f} "
            f"| {s['sampled_sequences_per_question']:.0f} | {s['seconds_per_question']:.1f} |")
    return head + "\n".join(lines) + "\n"


def run_eval(method, examples: Sequence[Example], out_dir: str | os.PathLike, *, resume: bool = False,
             name: str | None = None, progress=None, extra_config: dict | None = None, concurrency: int = 1) -> dict:
    """Answer every example (``concurrency`` questions in flight; wrap the model in
    :class:`~seakr.models.batching.BatchingModel` so their model calls share decode batches)."""
    cfg = {"name": name or method.name, "method": method.describe(), "versions": versions(),
           "examples": len(examples), **(extra_config or {})}
    with RowLog(out_dir, "results.jsonl", cfg, resume=resume) as log:
        rows = log.rows_for(examples)
        if progress:
            progress(len(rows), f1=f"{100 * statistics.mean(r['f1'] for r in rows):.1f}" if rows else "-")
        todo = log.todo(examples)
        t_start = time.perf_counter()

        def shown(rows):
            if progress:
                progress(1, EM=f"{100 * statistics.mean(r['em'] for r in rows):.1f}",
                         F1=f"{100 * statistics.mean(r['f1'] for r in rows):.1f}")

        def one(ex):
            t = time.perf_counter()
            ans = method.answer(ex.question)
            dt = time.perf_counter() - t
            log.append({"id": ex.id, "question": ex.question, "prediction": ans.answer, "golds": ex.answers,
                        "em": exact_match(ans.answer, ex.answers), "f1": f1_score(ans.answer, ex.answers),
                        "type": ex.type, "seconds": round(dt, 3), "trace": ans.trace}, shown)

        if concurrency <= 1:
            for ex in todo:
                one(ex)
        else:
            with ThreadPoolExecutor(concurrency) as pool:
                for fut in [pool.submit(one, ex) for ex in todo]:
                    fut.result()
        rows = log.rows_for(examples)  # a resumed log may hold questions outside this --limit
    wall = time.perf_counter() - t_start
    out = Path(out_dir)
    s = summarize(rows, cfg["name"])
    if todo:
        s["wall_seconds"] = round(wall, 2)
        s["questions_per_minute"] = round(60 * len(todo) / wall, 3)
        s["concurrency"] = concurrency
    (out / "summary.json").write_text(json.dumps(s, indent=2))
    (out / "summary.md").write_text(summary_markdown([s]))
    return s


def compare(dirs: Sequence[str]) -> str:
    sums = []
    for d in dirs:
        p = Path(d)
        rows = read_results(p / "results.jsonl")
        name = json.loads((p / "config.json").read_text()).get("name", p.name) if (p / "config.json").exists() else p.name
        if not rows and not (p / "config.json").exists():
            raise ValueError(f"{d}: not an eval run directory (no results.jsonl / config.json)")
        sums.append(summarize(rows, name))
    return summary_markdown(sums)
