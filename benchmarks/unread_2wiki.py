"""2Wiki samples that no fit, level or choice has read: 100 questions of the 2Wiki train file ``extra500`` each.

Why: the one 2Wiki set reported so far (``dev_first100``) shows SeaKR +0.6 F1 over IRCoT, with the check's own answer
ahead of both, while the 2Wiki decision runs (``train_migres500``) had the chain ahead. This sample says which of the
two the defaults meet on 2Wiki questions that nothing here chose on. It is a measurement only: nothing is chosen
from it, and no default changes whatever it shows.

Which questions (fixed before any run): ``extra500`` questions at places 50..499 whose place ends in 3, 5 or 7, less
the ones the packaged short-form probe was fitted on (every 25th of the first 10,000 train rows), the first 100 of
those. Left out because something read them: places 0..49 (prompt-style, precision and multi-hop calibration runs),
every 10th place (the first gate level, the multi-hop delta). ``extra500`` and ``train_migres500`` share no question.
A second sample, fixed after the first had run and before the second did (``--digits 19 -n 90``): the places ending
in 1 or 9 by the same rule (90 of them), the first 62 answered, reported alone and pooled with the first
(``benchmarks/report.py`` over both folders); a measurement only, as the first. A third, fixed after the second had
run and before the third did (``--digits 2468``): the places ending in 2, 4, 6 or 8 by the same rule, the first 100
pooled into the index, the first 62 answered; reported alone and pooled with the other two, a measurement only.

    python benchmarks/unread_2wiki.py OUT.json [--digits 19 -n 90]   # writes the sample (official layout)
    seakr eval --data OUT.json --limit 62 --filler ../shared/data/corpus/wiki_filler1000.flashrag.jsonl \\
      --config benchmarks/configs/report.toml --out benchmarks/results/unread-qwen-2wiki-extra100
    (the second: --out benchmarks/results/unread-qwen-2wiki-extra90b; the third: unread-qwen-2wiki-extra100c)

The index pools all the sample's questions' paragraphs with the 1,000 filler passages, as the report sets' do; the first 62
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


def unread_sample(n: int = 100, digits: str = "357") -> list[dict]:
    """The first ``n`` unread questions whose place in ``extra500`` ends in one of ``digits``."""
    records = json.loads((WIKI / "extra500_maybe_train.official.json").read_text())
    fitted = probe_ids()
    places = [i for i in range(50, len(records)) if str(i % 10) in digits and records[i]["_id"] not in fitted]
    if len(places) < n:
        raise SystemExit(f"only {len(places)} unread questions, asked for {n}")
    return [records[i] for i in places[:n]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="where the sample is written (JSON, the official 2Wiki layout)")
    ap.add_argument("-n", type=int, default=100)
    ap.add_argument("--digits", default="357", choices=("357", "19", "2468"),
                    help="the last digits of the places taken")
    args = ap.parse_args()
    sample = unread_sample(args.n, args.digits)
    args.out.write_text(json.dumps(sample))
    print(json.dumps({"questions": len(sample), "types": Counter(r["type"] for r in sample),
                      "first_ids": [r["_id"] for r in sample[:3]]}))


if __name__ == "__main__":
    main()
