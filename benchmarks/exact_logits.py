"""The float32 head of a 16-bit model (``exact_logits``, models/head.py) against the bf16 head, side by side: each
question of the decision sample answered by SeaKR (every default) and by IRCoT once with the bf16 head's logits and
once with its top 64 recomputed in float32 from the same hidden state, the two orders alternating from one question
to the next, one model in one process (the head is switched, not reloaded).

Why: a bf16 head rounds logits to 0.06-0.125, so two tokens closer than that tie and argmax takes the lower id
(1.25 % of 800 greedy steps of the 0.5B on train prompts chose another token than the float32 product), and a
chosen token's log-prob is off by up to 0.25 (0.11 at the 95th percentile), which SeaKR's query cut reads. The
recomputation touches 64 rows a step, so it should cost nothing measurable; it moves a few answers either way.

The rule, fixed before this ran: the float32 head becomes the default for a model computing in 16 bits on a CPU if,
for each of SeaKR and IRCoT, its F1 is at most 1.0 below the bf16 head's, and its mean seconds a question at most
1.05x the bf16 head's. Printed beside and deciding nothing: how many of each arm's predictions are the float32
model's on the same questions (``--fp32-rows``, the drafting-off rows of ``lookup-decode-qwen/decide-fp32.json``),
and SeaKR's seconds over IRCoT's.

Usage: python benchmarks/exact_logits.py [--data FILE] [--every 4] [--limit 62] [--precision auto] [--out FILE], or
``--decide RUN.json`` (the rule over a run's kept rows). Prints one JSON line; ``--out`` keeps per-question rows
(ids, predictions, F1, seconds; no question text).
"""

import argparse
import json
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import AB_METHODS, ab_emit, ab_figures, ab_rows, decision_args, emit  # noqa: E402

MOVE = 1.0  # F1 points
MOST = 1.05  # x the bf16 head's seconds
FP32_ROWS = Path(__file__).parent / "results" / "lookup-decode-qwen" / "decide-fp32.json"


def summary(rows: list[dict], fp32: dict[tuple[str, str], str]) -> dict:
    out = {}
    for name in AB_METHODS:
        f = out[name] = ab_figures(rows, name)
        f["passes"] = f["f1_on"] >= f["f1_off"] - MOVE and f["seconds_on"] <= MOST * f["seconds_off"]
        rs = [r for r in rows if r["method"] == name and (r["id"], name) in fp32]
        f["as_float32"] = {k: sum(r[k]["prediction"] == fp32[r["id"], name] for r in rs) for k in ("off", "on")}
        f["with_float32_rows"] = len(rs)
    out["seakr_over_ircot"] = {k: round(out["seakr"][f"seconds_{k}"] / out["ircot"][f"seconds_{k}"], 2)
                               for k in ("off", "on")}
    out["adopt"] = all(out[n]["passes"] for n in AB_METHODS)
    return out


def float32_predictions(path: Path) -> dict[tuple[str, str], str]:
    """(question id, method) -> the float32 model's prediction (plain decoding) on the decision sample."""
    if not path.is_file():
        return {}
    return {(r["id"], r["method"]): r["off"]["prediction"] for r in json.loads(path.read_text())["rows"]}


def switch(lm, top: int) -> None:
    lm.exact_head.top = top


def main():
    from seakr.models.head import TOP

    ap = argparse.ArgumentParser()
    decision_args(ap, limit=62)
    ap.set_defaults(precision="auto")
    ap.add_argument("--fp32-rows", type=Path, default=FP32_ROWS)
    ap.add_argument("--decide", default=None, metavar="RUN.json", help="apply the rule to a run's kept rows")
    a = ap.parse_args()
    fp32 = float32_predictions(a.fp32_rows)
    if a.decide:
        emit(summary(json.load(open(a.decide))["rows"], fp32), None)
        return
    rows, lm = ab_rows(a, switch, {"off": 0, "on": TOP}, load={"exact_logits": True})
    ab_emit(a, lm, "exact_logits", {"top": TOP, **summary(rows, fp32)}, rows)


if __name__ == "__main__":
    main()
