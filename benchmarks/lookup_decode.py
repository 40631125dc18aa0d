"""Prompt-lookup decoding (``draft_tokens``, models/lookup.py) against one token a forward, side by side: each
question of the decision sample answered by SeaKR (every default) and by IRCoT, once with drafting off and once
with ``draft_tokens = 10`` (set before this ran, not tuned), the two orders alternating from one question to the
next, one model in one process. Drafting writes the text plain greedy decoding writes up to the rounding of a
wider matrix product (in bf16 a token's log-prob moves by up to about 0.05), so it changes the seconds and, where
a word's log-prob sits at the query's cut, which words a query keeps: a chain may then read other passages. So
the answers of a few questions change either way, by chance.

The rule, fixed before this ran: ``draft_tokens = 10`` becomes the default if, for each of SeaKR and IRCoT, its F1
with drafting is at most 1.0 below its F1 without, and its mean seconds a question drop. The seconds ratio SeaKR /
IRCoT is printed for both runs and decides nothing.

In bf16 (``--precision auto`` on an AMX CPU) it was not adopted: bf16's rounding moved 8 and 5 of 62 answers.
In float32 an eleven-token forward rounds as a one-token one does to about 1e-5, so there the same text and
log-probs are expected. The same rule, fixed before that run, decides a default for models that compute in float32
alone (``auto`` on a CPU without native bf16, or ``--precision fp32``): ``--precision fp32``, the same questions.

Usage: python benchmarks/lookup_decode.py [--data FILE] [--every 4] [--limit 62] [--precision auto] [--out FILE],
or ``--decide RUN.json`` (the rule over a run's kept rows). Prints one JSON line; ``--out`` keeps per-question rows
(ids, predictions, F1, seconds; no question text).
"""

import argparse
import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import AB_METHODS as METHODS, ab_emit, ab_figures, ab_rows, decision_args, emit  # noqa: E402

DRAFT = 10
MOVE = 1.0  # F1 points


def summary(rows: list[dict]) -> dict:
    out = {}
    for name in METHODS:
        out[name] = ab_figures(rows, name)
        f = out[name]
        f["passes"] = f["f1_on"] >= f["f1_off"] - MOVE and f["seconds_on"] < f["seconds_off"]
    out["seakr_over_ircot"] = {k: round(out["seakr"][f"seconds_{k}"] / out["ircot"][f"seconds_{k}"], 2)
                               for k in ("off", "on")}
    out["adopt"] = all(out[n]["passes"] for n in METHODS)
    return out


def main():
    ap = argparse.ArgumentParser()
    decision_args(ap, limit=62)
    ap.set_defaults(precision="auto")
    ap.add_argument("--decide", default=None, metavar="RUN.json", help="apply the rule to a run's kept rows")
    a = ap.parse_args()
    if a.decide:
        emit(summary(json.load(open(a.decide))["rows"]), None)
        return
    rows, lm = ab_rows(a, lambda lm, k: setattr(lm, "draft_tokens", k), {"off": 0, "on": DRAFT})
    ab_emit(a, lm, "lookup_decode", {"draft_tokens": DRAFT, **summary(rows)}, rows)


if __name__ == "__main__":
    main()
