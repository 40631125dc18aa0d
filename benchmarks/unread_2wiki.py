"""A 2Wiki sample that no fit, level or choice has read: 100 questions of the 2Wiki train file ``extra500``.

Why: the one 2Wiki set reported so far (``dev_first100``) shows SeaKR +0.6 F1 over IRCoT, with the check's own answer
ahead of both, while the 2Wiki decision runs (``train_migres500``) had the chain ahead. This sample says which of the
two the defaults meet on 2Wiki questions that nothing here chose on. It is a measurement only: nothing is chosen
from it, and no default changes whatever it shows.

Which questions (fixed before any run): ``extra500`` questions at places 50..499 whose place ends in 3, 5 or 7, less
the ones the packaged short-form probe was fitted on (every 25th of the first 10,000 train rows), the first 100 of
those. Left out because something read them: places 0..49 (prompt-style, precision and multi-hop calibration runs),
every 10th place (the first gate level, the multi-hop delta). ``extra500`` and ``train_migres500`` share no question.

    python benchmarks/unread_2wiki.py OUT.json        # writes the sample (official layout), prints what it holds
    seakr eval --data OUT.json --limit 62 --filler ../shared/data/corpus/wiki_filler1000.flashrag.jsonl \\
      --config benchmarks/configs/report.toml --out benchmarks/results/unread-qwen-2wiki-extra100

The index pools all 100 questions' paragraphs with the 1,000 filler passages, as the report sets' do; the first 62
are answered (one question in flight, the three methods one after the other)."""

import argparse
import csv
import json
from collections import Counter
from pathlib import Path

from _common import SHARED

WIKI = SHARED / "2wikimultihopqa"


def probe_ids() -> set[str]:
    """The 2Wiki ids the packaged short-form probe was fitted on: every 25th of the first 10,000 train rows, the first
    400 (its provenance's ``selection``)."""
    with open(WIKI / "train_first10000.qa_sftitles.simrag.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return {r["ID"] for i, r in enumerate(rows[: 25 * 400]) if i % 25 == 0}


def unread_sample(n: int = 100) -> list[dict]:
    records = json.loads((WIKI / "extra500_maybe_train.official.json").read_text())
    fitted = probe_ids()
    places = [i for i in range(50, len(records)) if i % 10 in (3, 5, 7) and records[i]["_id"] not in fitted]
    if len(places) < n:
        raise SystemExit(f"only {len(places)} unread questions, asked for {n}")
    return [records[i] for i in places[:n]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="where the sample is written (JSON, the official 2Wiki layout)")
    ap.add_argument("-n", type=int, default=100)
    args = ap.parse_args()
    sample = unread_sample(args.n)
    args.out.write_text(json.dumps(sample))
    print(json.dumps({"questions": len(sample), "types": Counter(r["type"] for r in sample),
                      "first_ids": [r["_id"] for r in sample[:3]]}))


if __name__ == "__main__":
    main()
