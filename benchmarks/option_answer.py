"""Should the chain's answer to a two-option question be one of the options? A two-option question names its
answers: a yes/no question, or one whose last clause is "X or Y?" ("Which film came out first, X or Y?"). The chain
often answers such a question with a third thing it read on the way (the director it looked up, not the film
asked about), which cannot be right; the knowledge check's closed-book answer, which SeaKR already holds when the
chain runs, usually names one of the two. So where the chain's answer names neither option and the check's answer
names one, the check's answer is the better guess: half right by chance alone, against none.

Replayed without a model from gate-level rows (the check and the chain ran on every question, so the variant
replays exactly and costs nothing: the check's answer is computed before the chain in every run), joined by id to
the question text of their decision files. Two variants:

- ``shipped``: the check answers at once where its P(correct) reaches the shipped level (0.5) with a real answer;
  elsewhere the chain's answer;
- ``options``: as ``shipped``, and where the chain ran on a two-option question (:func:`two_options`) and its
  answer is not an option while the check's is (:func:`is_option`), the check's answer.

An answer is an option when, normalised as the F1 metric normalises (lower case, no punctuation or articles), it
is "yes" or "no", or its words stand in the normalised question as a run of whole words.

The rule, fixed before this ran: each variant's score is the mean of its replayed F1 on three decision runs (the
HotpotQA decision sample, every 4th of ``dev_decide246``, the first 62; 2Wiki train ``train_migres500``, every 8th,
the first 62; and a second 2Wiki train run, every 8th from the 5th question (``--start 4``), the first 62, none of
them in the first). ``options`` is adopted only if its score is at least ``shipped``'s + 1.0 and it is not more than
1.0 below ``shipped`` on any run (the bar of the gate decisions). Paired bootstrap CIs and the questions where the
variants differ are printed beside the verdict and decide nothing.

Usage: python benchmarks/option_answer.py [ROWS_DIR ...] (default: ``benchmarks/results/gate-level-qwen`` and
``benchmarks/results/option-answer-qwen``, whose run comes from ``gate_level.py --start 4``). Needs the decision
files under ``../shared/data``. Prints one JSON line.
"""

import json
import statistics
import sys
from pathlib import Path

from _common import SHARED, emit, replay_verdict
from two_option_gate import two_options

from seakr.eval.datasets import load_dataset
from seakr.eval.metrics import normalize, paired_bootstrap

LEVEL = 0.5  # the shipped probe gate level for the 0.5B when this rule was written
BAR, FLOOR = 1.0, 1.0  # F1 points
HERE = Path(__file__).parent / "results"
RUNS = {"hotpotqa-decide246-every4.json": "hotpotqa/dev_decide246.hf.jsonl",
        "2wiki-train-migres500-every8.json": "2wikimultihopqa/train_migres500.official_plus.jsonl",
        "2wiki-train-migres500-every8-start4.json": "2wikimultihopqa/train_migres500.official_plus.jsonl"}
FOLDERS = (HERE / "gate-level-qwen", HERE / "option-answer-qwen")


def is_option(answer: str | None, question: str) -> bool:
    """``answer`` is yes/no or names something the question names (its normalised words, whole, in the question's)."""
    words = normalize(answer or "")
    return bool(words) and (words in ("yes", "no") or f" {words} " in f" {normalize(question)} ")


def replay(rows: list[dict], questions: dict[str, str], variant: str) -> dict:
    """One variant over one run's rows: F1 (percent), how often the check's answer replaced the chain's."""
    f1, took = [], []
    for r in rows:
        q = questions[r["id"]]
        sure = r["real"] and r["p"] >= LEVEL
        swap = (variant == "options" and not sure and two_options(q) and not is_option(r["chain"], q)
                and is_option(r["check"], q))
        f1.append(r["f1_check"] if sure or swap else r["f1_chain"])
        if swap:
            took.append({"id": r["id"], "chain": r["f1_chain"], "check": r["f1_check"]})
    return {"f1": round(100 * statistics.mean(f1), 1), "swapped": len(took), "per_question": f1, "took": took}


def run(path: Path) -> dict:
    rows = json.loads(path.read_text())["rows"]
    questions = {ex.id: ex.question for ex in load_dataset(SHARED / RUNS[path.name])}
    out = {v: replay(rows, questions, v) for v in ("shipped", "options")}
    a, b = out["shipped"].pop("per_question"), out["options"].pop("per_question")
    out["shipped"].pop("took")
    ci = [round(100 * x, 1) for x in paired_bootstrap(b, a)["ci95"]]
    return {"run": path.name, "questions": len(rows),
            "two_option_questions": sum(two_options(questions[r["id"]]) for r in rows), "ci": ci, **out}


def decide(runs: list[dict]) -> dict:
    return {"benchmark": "option_answer", "level": LEVEL, **replay_verdict(runs, "shipped", "options", BAR, FLOOR), "runs": runs}


def main():
    folders = [Path(p) for p in sys.argv[1:]] or list(FOLDERS)
    paths = [f / name for name in RUNS for f in folders if (f / name).is_file()]
    if [p.name for p in paths] != list(RUNS):
        sys.exit(f"option_answer: need the rows of {', '.join(RUNS)} (found {[p.name for p in paths]})")
    emit(decide([run(p) for p in paths]), None)


if __name__ == "__main__":
    main()
