"""How the knowledge check asks, chosen on train questions: for each candidate wording, a short closed-book
answer (greedy + k samples) to train questions of HotpotQA and 2Wiki, and the AUROC of each estimator for
"the answer is wrong" (F1 < 0.5) beside the accuracy.

  python benchmarks/short_wording.py [--n 200] [--out benchmarks/results/short-wording-qwen]

Train files only (every 50th question from the 10th, a slice disjoint from the probe's): the wording that
wins here is the one the package ships (``seakr.prompts.SHORT_WORDING``); dev figures come from
``seakr detect --form short`` afterwards. Rows (ids, answers, F1, scores) go to rows.jsonl as they are
made and a rerun resumes; summary.json and summary.md are rewritten from the rows.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from seakr import uncertainty as U
from seakr.eval.datasets import load_dataset
from seakr.eval.metrics import auroc, f1_score
from seakr.methods.text import extract_answer
from seakr.prompts import SHORT_STOPS, SHORT_TOKENS, ShortWording
from seakr.common.jsontext import strict_json

SHARED = os.environ.get("SEAKR_SHARED", str(Path(__file__).resolve().parents[2] / "shared" / "data"))
TRAIN = {"hotpotqa": "hotpotqa/train_first10000.qa_sftitles.simrag.csv",
         "2wiki": "2wikimultihopqa/train_first10000.qa_sftitles.simrag.csv"}
#: The candidates: the shipped one first, then variants of each of its three parts.
WORDINGS = {
    "instruction+lead": ShortWording(),
    "template+lead": ShortWording(None, "Question: {question}", "Answer:"),
    "template+ask+lead": ShortWording(None, "Answer the question in a few words.\nQuestion: {question}", "Answer:"),
    "terse+lead": ShortWording("Answer in as few words as possible.", "Question: {question}", "Answer:"),
    "name-only+lead": ShortWording("Reply with the answer alone (a name, a place, a date or a number), not a sentence.",
                                   "Question: {question}", "Answer:"),
}
SHIPPED = "instruction+lead"
ACCURACY_FLOOR = 0.9
ESTIMATORS = ("eigen", "max-entropy", "ln-entropy", "perplexity")


def questions(n: int) -> dict:
    out = {}
    for name, rel in TRAIN.items():
        exs = load_dataset(os.path.join(SHARED, rel))
        out[name] = [exs[i] for i in range(10, len(exs), 50)][:n]
    return out


def ask(method, wording: ShortWording, ex) -> dict:
    prompt, prefix = method.prompts.render_short(ex.question, (), wording)
    cfg = method.gen_config(SHORT_STOPS, True, max_new=SHORT_TOKENS)
    cfg.n, cfg.with_states = method.config.k, True
    t = time.perf_counter()
    g = method.lm.generate([prompt], cfg, prefix=prefix)[0]
    text = g.greedy.text
    ans = extract_answer(text) or text.strip().rstrip(".")
    scores = U.all_scores(g, method.config.alpha)
    return {"id": ex.id, "answer": ans, "f1": f1_score(ans, ex.answers), "seconds": round(time.perf_counter() - t, 3),
            "scores": {e: (None if not np.isfinite(scores[e]) else float(scores[e])) for e in ESTIMATORS}}


def summarize(rows: list[dict]) -> dict:
    table = {}
    for w in WORDINGS:
        per = {}
        for data in TRAIN:
            rs = [r for r in rows if r["wording"] == w and r["data"] == data]
            if not rs:
                continue
            wrong = [r["f1"] < 0.5 for r in rs]
            sc = lambda e: [np.inf if r["scores"][e] is None else r["scores"][e] for r in rs]  # noqa: E731
            per[data] = {"n": len(rs), "accuracy": 1 - float(np.mean(wrong)),
                         "auroc": {e: auroc(sc(e), wrong) for e in ESTIMATORS},
                         "seconds": float(np.median([r["seconds"] for r in rs]))}
        if per:
            table[w] = per
    # a check that is almost never right would never answer: its AUROC is no use to the gate
    floor = {d: ACCURACY_FLOOR * table[SHIPPED][d]["accuracy"] for d in TRAIN} if len(table.get(SHIPPED, {})) == len(TRAIN) else {}
    full = [w for w in table if len(table[w]) == len(TRAIN) and all(table[w][d]["accuracy"] >= floor.get(d, 0) for d in TRAIN)]
    best = max(full, key=lambda w: np.mean([table[w][d]["auroc"]["eigen"] for d in TRAIN])) if full else None
    out = {"n": max((v["n"] for per in table.values() for v in per.values()), default=0),
           "wordings": {w: vars(WORDINGS[w]) for w in table}, "table": table, "chosen": best,
           "rule": f"the highest mean EigenScore AUROC over the two train sets, among wordings whose accuracy on "
                   f"each is at least {ACCURACY_FLOOR:.0%} of the shipped wording's"}
    if best and best != SHIPPED:  # the winner against the shipped wording, paired over questions
        out["chosen_minus_shipped"] = {d: _paired(rows, best, SHIPPED, d) for d in TRAIN}
    return out


def _paired(rows, a, b, data):
    by = {w: {r["id"]: r for r in rows if r["wording"] == w and r["data"] == data} for w in (a, b)}
    ids = sorted(set(by[a]) & set(by[b]))
    # each wording has its own labels: the difference of two AUROCs on the same questions, resampled together
    sa = [by[a][i]["scores"]["eigen"] for i in ids]
    sb = [by[b][i]["scores"]["eigen"] for i in ids]
    wa = [by[a][i]["f1"] < 0.5 for i in ids]
    wb = [by[b][i]["f1"] < 0.5 for i in ids]
    rng, diffs = np.random.default_rng(0), []
    inf = lambda xs: np.array([np.inf if x is None else x for x in xs])  # noqa: E731
    sa, sb, wa, wb = inf(sa), inf(sb), np.array(wa), np.array(wb)
    for _ in range(1000):
        j = rng.integers(0, len(ids), len(ids))
        if wa[j].all() or not wa[j].any() or wb[j].all() or not wb[j].any():
            continue
        diffs.append(auroc(sa[j], wa[j]) - auroc(sb[j], wb[j]))
    return {"n": len(ids), "diff": auroc(sa, wa) - auroc(sb, wb),
            "ci": [float(np.percentile(diffs, 2.5)), float(np.percentile(diffs, 97.5))]}


def markdown(s: dict) -> str:
    lines = ["# The knowledge check's wording, chosen on train questions", "",
             "Train files only (HotpotQA and 2Wiki `train_first10000`, every 50th question from the 10th); default "
             "Qwen2.5-Coder-0.5B, chat template, k = 20, 24 tokens. AUROC for \"the short answer is wrong\" (F1 < 0.5). "
             f"Rule: {s['rule']}. Regenerate: `python benchmarks/short_wording.py`.", "",
             "| wording | system | user | lead | " + " | ".join(f"{d} acc. / EigenScore / max-ent." for d in TRAIN) + " |",
             "|---|---|---|---|" + "---|" * len(TRAIN)]
    for w, per in s["table"].items():
        d = s["wordings"][w]
        cells = [f"{per[x]['accuracy']:.2f} / {per[x]['auroc']['eigen']:.3f} / {per[x]['auroc']['max-entropy']:.3f}"
                 + (f" ({per[x]['n']} q, stopped)" if per[x]["n"] < s["n"] else "") if x in per else "–" for x in TRAIN]
        mark = " (chosen)" if w == s["chosen"] else ""
        lines.append(f"| {w}{mark} | {d['system'] or '(template)'} | {d['user'].replace(chr(10), ' / ')} | "
                     f"{d['lead'] or '–'} | " + " | ".join(cells) + " |")
    for d, x in s.get("chosen_minus_shipped", {}).items():
        lines.append(f"\n{d}: chosen minus shipped EigenScore AUROC {x['diff']:+.3f} (CI {x['ci'][0]:+.3f}..{x['ci'][1]:+.3f}, n={x['n']})")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200, help="train questions per file")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "short-wording-qwen"))
    ap.add_argument("--only", nargs="*", default=list(WORDINGS), help="wordings to run (default: all)")
    ap.add_argument("--summary-only", action="store_true", help="rewrite the summary from the rows (no model)")
    args = ap.parse_args()
    if args.summary_only:
        return write_summary(Path(args.out), _read(Path(args.out) / "rows.jsonl"))
    from seakr.eval.studies import STUDY_OPTIONS
    from seakr.methods.seakr import SeaKR
    from seakr.models import load_model

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "rows.jsonl"
    rows = _read(path)
    done = {(r["wording"], r["data"], r["id"]) for r in rows}
    qs = questions(args.n)
    method = SeaKR(load_model("qwen2.5-coder-0.5b"), None, prompt_style="chat", **STUDY_OPTIONS)
    with path.open("a") as f:
        for w in args.only:
            for data, exs in qs.items():
                for ex in exs:
                    if (w, data, ex.id) in done:
                        continue
                    r = {"wording": w, "data": data, **ask(method, WORDINGS[w], ex)}
                    f.write(json.dumps(r) + "\n")
                    f.flush()
                    rows.append(r)
            print(w, json.dumps(summarize(rows)["table"].get(w)), flush=True)
    write_summary(out, rows)


def _read(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def write_summary(out: Path, rows: list[dict]) -> None:
    s = summarize(rows)
    (out / "summary.json").write_text(strict_json(s, indent=2))  # an AUROC with one class: null
    (out / "summary.md").write_text(markdown(s))
    print(json.dumps({"chosen": s["chosen"], **{w: {d: v["auroc"]["eigen"] for d, v in per.items()} for w, per in s["table"].items()}}))


if __name__ == "__main__":
    main()
