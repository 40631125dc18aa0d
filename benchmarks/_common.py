"""Shared by the benchmark scripts: median timing, one-JSON-line output, report files, a pooled-index set-up."""

import argparse
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


def chain_rows_args(doc: str) -> argparse.Namespace:
    """The arguments of a replay over committed chain rows: the run folders, and the probe gate's level (a question
    with P(check) below it goes to the chain): by default 0.3, the level shipped when these decisions were made."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--gate", type=float, default=0.3, help="the probe gate's level (0.3: shipped when decided)")
    return ap.parse_args()


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

#: SeaKR's chain as decided (docs/results.md), the check drawn and recorded but never obeyed: a decision benchmark
#: replays the shipped gate on its rows
CHAIN = {"gate_p": 1.0, "query_from": "step", "rerank": "engine", "reasoning": "knowledge"}


def pooled_args(ap, data: str, precision: str = "auto") -> None:
    """The flags of a benchmark over one dataset's pooled paragraphs + filler: ``--model``, ``--precision``,
    ``--data`` (``data`` under ../shared/data by default) and ``--filler``."""
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--precision", default=precision)
    ap.add_argument("--data", default=str(SHARED / data))
    ap.add_argument("--filler", default=str(SHARED / "corpus" / "wiki_filler1000.flashrag.jsonl"))


def pooled_setup(a, **load):
    """(every question of ``a.data``, a search engine over its pooled paragraphs + ``a.filler``, the model, loaded
    with ``load``'s options beside ``a.precision``): the index is built once into the cache."""
    from seakr.eval.corpus import pooled_index
    from seakr.eval.datasets import load_dataset
    from seakr.models import load_model
    from seakr.search import open_engine

    full = load_dataset(a.data)
    return full, open_engine(pooled_index(a.data, full, [a.filler])), load_model(a.model, precision=a.precision, **load)


def decision_args(ap, limit: int) -> None:
    """The flags of a decision benchmark over the decision sample (every 4th of ``dev_decide246``, the first
    ``limit``; fp32 by default, as the decisions before were made): the pooled set-up's, ``--every``, ``--start``
    (the first question taken, so a second run can take the questions between a first one's), ``--limit``,
    ``--family`` (whose demonstrations) and ``--out`` (the rows and the summary, as one JSON file)."""
    pooled_args(ap, "hotpotqa/dev_decide246.hf.jsonl", precision="fp32")
    ap.add_argument("--every", type=int, default=4)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--limit", type=int, default=limit)
    ap.add_argument("--family", default="hotpotqa")
    ap.add_argument("--out", default=None, help="the per-question rows and the summary, as one JSON file")


def decision_questions(full: list, a) -> list:
    """The questions a decision run takes: every ``a.every``-th from ``a.start``, the first ``a.limit`` of them."""
    return full[a.start :: a.every][: a.limit]


def taken(a) -> dict:
    """How a decision run took its questions, as its result records it (``start`` only where it is not 0, so the
    results of runs from the first question keep their shape)."""
    return {"every": a.every, **({"start": a.start} if a.start else {}), "limit": a.limit}


def decision_run(a, benchmark: str, method_class, options: dict, row, said, summary) -> None:
    """Each chosen question answered once by ``method_class`` with ``options`` (the family's defaults under them);
    ``row(example, answer, level)`` makes its row, ``level`` the shipped gate's level (to replay it); ``said(row)``
    is its progress line; ``summary(rows)`` the figures printed as one JSON line and, with ``--out``, kept with
    the rows (ids, answers, scores, seconds; no question text)."""
    import os
    import sys

    from seakr.eval.specs import method_options
    from seakr.methods import build_method

    full, engine, lm = pooled_setup(a)
    questions = decision_questions(full, a)
    level = build_method("seakr", lm, engine, **method_options("seakr", {}, a.family)).gate_p  # the shipped gate
    m = method_class(lm, engine, **method_options("seakr", options, a.family))
    rows = []
    for i, ex in enumerate(questions):
        rows.append(row(ex, m.answer(ex.question), level))
        print(f"{i + 1}/{len(questions)} {said(rows[-1])}", file=sys.stderr, flush=True)
    res = {"benchmark": benchmark, "model": a.model, "precision": lm.precision, "data": os.path.basename(a.data),
           **taken(a), "gate_level": level, **summary(rows), "date": time.strftime("%Y-%m-%d")}
    emit(res, None)
    if a.out:
        with open(a.out, "w") as f:
            f.write(strict_json({**res, "rows": rows}, indent=1) + "\n")


def replayed_pair(rows: list[dict], new: str, old: str) -> dict:
    """Two final answers' F1 (row keys ``f1_<name>``) with the shipped gate replayed (a sure check answers from
    memory with either), in percent, and ``new`` - ``old`` paired, with its 95 % bootstrap CI."""
    from seakr.eval.metrics import paired_bootstrap

    f1 = {k: [r["f1_check"] if r["gate_sure"] else r[f"f1_{k}"] for r in rows] for k in (old, new)}
    paired = paired_bootstrap(f1[new], f1[old])
    lo, hi = paired["ci95"]
    return {**{f"f1_{k}": round(100 * statistics.mean(v), 1) for k, v in f1.items()},
            f"{new}_minus_{old}": round(100 * paired["mean_difference"], 1), "ci": [round(100 * lo, 1), round(100 * hi, 1)]}


def beside_row(ex, ans, level: float, what: str, old: str, new: str) -> tuple[dict, dict]:
    """One question of a run whose method records a second final answer (trace decision ``what``, with its
    ``answer`` and its own ``seconds``) beside the knowledge answer: the check's answer, both answers (``old``: the
    knowledge answer, ``new``: the second), their F1, whether the shipped gate (``level``) would have answered from
    memory, and each answer's seconds a question (the total less the other's final call). Returns the row and the
    recorded decision (for what else it holds)."""
    from seakr.eval.metrics import f1_score
    from seakr.methods.text import is_unknown

    d = ans.to_dict()["trace"]
    cands = d["final"]["candidates"]
    second = next(e for e in d["events"] if e.get("what") == what)
    check = cands.get("check", {})
    t = d["totals"]["seconds"]
    return {"id": ex.id, "gate_sure": check.get("p", 0) >= level and not is_unknown(check.get("answer", "")),
            "check": check.get("answer"), old: cands["knowledge"]["answer"], new: second["answer"],
            "f1_check": f1_score(check.get("answer", ""), ex.answers),
            f"f1_{old}": f1_score(cands["knowledge"]["answer"], ex.answers),
            f"f1_{new}": f1_score(second["answer"], ex.answers),
            f"seconds_{old}": round(t["total"] - second["seconds"], 3),
            f"seconds_{new}": round(t["total"] - t.get("final", 0.0), 3)}, second


def chain_seconds(rows: list[dict], form: str) -> float:
    """Mean seconds of ``form`` over the questions the gate sends to the chain (a sure check ends a question after
    the check, about a second, alike for every form)."""
    return statistics.mean(r[f"seconds_{form}"] for r in rows if not r["gate_sure"])


def cheaper_form_summary(rows: list[dict], new: str, old: str = "whole", bar: float = -1.0) -> dict:
    """The rule of a cheaper form of the knowledge answer: ``new`` is adopted only if its gate-replayed F1 is at
    least ``old``'s + ``bar`` and its seconds a chain question are lower."""
    pair = replayed_pair(rows, new, old)
    secs = {f: chain_seconds(rows, f) for f in (old, new)}
    return {"questions": len(rows), "chain_questions": sum(not r["gate_sure"] for r in rows), **pair,
            **{f"chain_seconds_{f}": round(v, 2) for f, v in secs.items()},
            f"adopt_{new}": pair[f"{new}_minus_{old}"] >= bar and secs[new] < secs[old]}


def costlier_form_summary(rows: list[dict], new: str, old: str, bar: float = 1.0, most: float = 1.10) -> dict:
    """The rule of a form that may cost more: ``new`` is adopted only if its gate-replayed F1 is at least ``old``'s
    + ``bar`` and its seconds a chain question at most ``most`` times ``old``'s."""
    pair = replayed_pair(rows, new, old)
    chain = any(not r["gate_sure"] for r in rows)
    secs = {f: chain_seconds(rows, f) for f in (old, new)} if chain else {}
    ratio = secs[new] / secs[old] if chain else None
    return {"questions": len(rows), "chain_questions": sum(not r["gate_sure"] for r in rows), **pair,
            **{f"chain_seconds_{f}": round(v, 3) for f, v in secs.items()},
            "seconds_ratio": None if ratio is None else round(ratio, 3),
            "passes_bar": pair[f"{new}_minus_{old}"] >= bar and ratio is not None and ratio <= most}


def replay_verdict(runs: list[dict], old: str, new: str, bar: float = 1.0, floor: float = 1.0) -> dict:
    """The rule of a variant replayed on several decision runs (each run's ``[variant]["f1"]``): ``new`` is adopted
    only if its mean F1 is at least ``old``'s + ``bar`` and it is not more than ``floor`` below ``old`` on any run."""
    score = {v: statistics.mean(r[v]["f1"] for r in runs) for v in (old, new)}
    floor_ok = all(r[new]["f1"] >= r[old]["f1"] - floor for r in runs)
    return {"score": {k: round(s, 2) for k, s in score.items()}, "floor_ok": floor_ok,
            "adopt": score[new] >= score[old] + bar and floor_ok}


def recall(titles: list[str], gold: list[str]) -> float | None:
    """The share of the gold supporting titles among ``titles`` (None: no gold titles)."""
    return sum(g in titles for g in gold) / len(gold) if gold else None


AB_METHODS = ("seakr", "ircot")


def ab_rows(a, switch, arms: dict, load: dict | None = None) -> tuple[list[dict], object]:
    """Each question of the decision sample answered by SeaKR (every default) and by IRCoT once under each of two
    model settings (``arms``: {"off": value, "on": value}; ``switch(lm, value)`` sets one), the order of the two
    alternating from one question to the next, one model (loaded with ``load``'s options) in one process. Returns the
    rows (id, method, and per arm the prediction, F1 and seconds) and the model."""
    import sys

    from seakr.eval.metrics import f1_score
    from seakr.eval.specs import method_options
    from seakr.methods import build_method

    full, engine, lm = pooled_setup(a, **(load or {}))
    methods = {n: build_method(n, lm, engine, **method_options(n, {}, a.family)) for n in AB_METHODS}

    def answer(m, ex, value) -> dict:
        switch(lm, value)
        t = time.perf_counter()
        ans = m.answer(ex.question)
        return {"prediction": ans.answer, "f1": f1_score(ans.answer, ex.answers), "seconds": time.perf_counter() - t}

    rows = []
    for i, ex in enumerate(decision_questions(full, a)):
        for name, m in methods.items():
            order = ("off", "on") if i % 2 == 0 else ("on", "off")
            got = {k: answer(m, ex, arms[k]) for k in order}
            rows.append({"id": ex.id, "method": name, **got})
            print(f"{i + 1} {name} f1 {got['off']['f1']:.2f}/{got['on']['f1']:.2f} s {got['off']['seconds']:.1f}/"
                  f"{got['on']['seconds']:.1f}", file=sys.stderr, flush=True)
    return rows, lm


def ab_figures(rows: list[dict], name: str) -> dict:
    """One method's figures of an A/B run (:func:`ab_rows`): F1 and mean seconds per arm, the speed-up, how many
    predictions are the same, and on - off paired with its 95 % bootstrap CI (F1 points)."""
    from seakr.eval.metrics import paired_bootstrap

    rs = [r for r in rows if r["method"] == name]
    f1 = {k: 100 * statistics.mean(r[k]["f1"] for r in rs) for k in ("off", "on")}
    ci = paired_bootstrap([r["on"]["f1"] for r in rs], [r["off"]["f1"] for r in rs])["ci95"]
    secs = {k: statistics.mean(r[k]["seconds"] for r in rs) for k in ("off", "on")}
    return {"f1_off": round(f1["off"], 1), "f1_on": round(f1["on"], 1),
            "seconds_off": round(secs["off"], 2), "seconds_on": round(secs["on"], 2),
            "speedup": round(secs["off"] / secs["on"], 2),
            "same_prediction": sum(r["off"]["prediction"] == r["on"]["prediction"] for r in rs),
            "on_minus_off_ci": [round(100 * x, 1) for x in ci]}


def ab_emit(a, lm, benchmark: str, figures: dict, rows: list[dict]) -> None:
    """An A/B run's result (:func:`ab_rows`) printed as one JSON line and, with ``--out``, kept with its rows (ids,
    predictions, F1, seconds; no question text)."""
    import json
    import os

    res = {"benchmark": benchmark, "model": a.model, "precision": lm.precision, "data": os.path.basename(a.data),
           **taken(a), **figures, "date": time.strftime("%Y-%m-%d")}
    emit(res, None)
    if a.out:
        with open(a.out, "w") as f:
            f.write(json.dumps({**res, "rows": rows}, indent=1) + "\n")
