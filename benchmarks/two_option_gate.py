"""Should a two-option question go to the knowledge check whatever its P(correct)? A two-option question is a
yes/no question or one that names its two answers ("Who was born first, A or B?"). The chain is weak there (each
option needs its own retrieval, and the rationale's answer often names neither option), while the check is right
about half the time by chance alone, and answering at once costs the check's seconds only. The probe's P(correct)
ranks such answers well on the 2Wiki train run (AUROC 0.78 / 0.79 by type) but backwards on a report set, so
whether P should decide for them at all is a question for decision data.

Replayed without a model from the gate-level runs' rows (``benchmarks/results/gate-level-qwen``: the check and
the chain ran on every question), joined by id to the question text of their decision files. Two variants:

- ``shipped``: the check answers at once where its P(correct) reaches the shipped level (0.5) with a real answer;
- ``two_option``: as ``shipped``, and also every two-option question whose check answer is a real one.

A question is two-option when its first word is an auxiliary verb (a yes/no question) or its last clause, after
a comma, is ``X or Y?`` (:func:`two_options`).

The rule, fixed before this ran: each variant's score is the mean of its replayed F1 on the two decision runs
(the HotpotQA decision sample, every 4th of ``dev_decide246``, the first 62; 2Wiki train ``train_migres500``,
every 8th, the first 62). ``two_option`` is adopted only if its score is at least ``shipped``'s + 1.0 and it is not
more than 1.0 below ``shipped`` on either run (the same bar as the gate level's). Paired bootstrap CIs are printed
beside the verdict and decide nothing.

Usage: python benchmarks/two_option_gate.py [ROWS_DIR] (default: benchmarks/results/gate-level-qwen). Needs the
decision files under ``../shared/data``. Prints one JSON line.
"""

import json
import re
import statistics
import sys
from pathlib import Path

from _common import SHARED, emit, replay_verdict

from seakr.eval.datasets import load_dataset
from seakr.eval.metrics import paired_bootstrap

LEVEL = 0.5  # the shipped probe gate level for the 0.5B when this rule was written
BAR, FLOOR = 1.0, 1.0  # F1 points
RUNS = {"hotpotqa-decide246-every4.json": "hotpotqa/dev_decide246.hf.jsonl",
        "2wiki-train-migres500-every8.json": "2wikimultihopqa/train_migres500.official_plus.jsonl"}
AUX = {"is", "are", "was", "were", "do", "does", "did", "has", "have", "had", "can", "could", "will", "would",
       "should", "shall", "may", "might", "must"}
LAST_CLAUSE_OR = re.compile(r",\s*[^,]+?\s+or\s+[^,]+\?\s*$", re.IGNORECASE)


def two_options(question: str) -> bool:
    """A yes/no question (it opens with an auxiliary verb) or one whose last clause names two options."""
    words = question.strip().split()
    return bool(words) and (words[0].lower() in AUX or bool(LAST_CLAUSE_OR.search(question.strip())))


def replay(rows: list[dict], questions: dict[str, str], variant: str) -> dict:
    """One variant over one run's rows: F1 (percent), the share answered at once, seconds a question."""
    sure = [r["real"] and (r["p"] >= LEVEL or (variant == "two_option" and two_options(questions[r["id"]])))
            for r in rows]
    f1 = [r["f1_check"] if s else r["f1_chain"] for r, s in zip(rows, sure)]
    secs = [r["seconds_check"] if s else r["seconds"] for r, s in zip(rows, sure)]
    return {"f1": round(100 * statistics.mean(f1), 1), "at_once": sum(sure),
            "seconds": round(statistics.mean(secs), 2), "per_question": f1}


def paired_ci(a: list[float], b: list[float]) -> list[float]:
    """95 % paired bootstrap interval of mean(b - a), in F1 points."""
    return [round(100 * x, 1) for x in paired_bootstrap(b, a)["ci95"]]


def run(folder: Path, name: str) -> dict:
    rows = json.loads((folder / name).read_text())["rows"]
    questions = {ex.id: ex.question for ex in load_dataset(SHARED / RUNS[name])}
    out = {v: replay(rows, questions, v) for v in ("shipped", "two_option")}
    two = [r for r in rows if two_options(questions[r["id"]])]
    return {"run": name, "questions": len(rows), "two_option_questions": len(two),
            "ci": paired_ci(out["shipped"].pop("per_question"), out["two_option"].pop("per_question")), **out}


def decide(runs: list[dict]) -> dict:
    return {"benchmark": "two_option_gate", "level": LEVEL, **replay_verdict(runs, "shipped", "two_option", BAR, FLOOR), "runs": runs}


def main():
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "results" / "gate-level-qwen"
    emit(decide([run(folder, name) for name in RUNS]), None)


if __name__ == "__main__":
    main()
