"""Seed-to-seed noise of self-aware re-ranking, with and without common random numbers.

For each question: BM25's top-N passages for the question (pooled index of the data file), the next
step generated with each one as context (SeaKR's re-rank call: N prompts x k samples in one call), U
of each candidate, for several seeds. Reported, averaged over questions: the standard deviation over
seeds of one candidate's U, of the difference between two candidates' U, and how often the chosen
(min-U) candidate differs from its most frequent choice. Same questions, same seeds, one process.
Usage: python benchmarks/rerank_noise.py --data hotpot.jsonl --limit 30 --seeds 4 [--model smollm2-135m]
"""

from _common import emit  # noqa: E402
import argparse
import itertools
import os
import statistics
import sys
import time
from collections import Counter

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from seakr.eval.corpus import pooled_index  # noqa: E402
from seakr.eval.datasets import load_dataset
from seakr.methods import SeaKR  # noqa: E402
from seakr.methods.base import min_u_index
from seakr.methods.trace import Tracer  # noqa: E402
from seakr.models import load_model  # noqa: E402
from seakr.search import open_engine  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--limit", type=int, default=30)
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    exs = load_dataset(a.data)
    engine = open_engine(pooled_index(a.data, exs, []))
    lm = load_model(a.model)
    res, t0 = {}, time.time()
    for crn in (True, False):
        sd_u, sd_d, flips, infinite = [], [], [], 0
        for ex in exs[: a.limit]:
            hits = engine.search(ex.question, 3)
            if len(hits) < 2:
                continue
            us = []
            for seed in range(a.seeds):
                m = Streams(lm, engine, delta=0.0, prompt_set="hotpotqa", seed=seed)
                m.crn = crn
                us.append([c["u"] for c in m.score_candidates(Tracer(ex.question, "noise"), ex.question, [], [], hits)])
            print(f"{'crn' if crn else 'independent'} {ex.id} U per seed: {us}", file=sys.stderr, flush=True)
            picks = [min_u_index(u) for u in us]
            flips.append(1 - Counter(picks).most_common(1)[0][1] / len(picks))
            if not np.isfinite(us).all():  # an empty step (U = +inf) in some seed: no finite spread
                infinite += 1
                continue
            sd_u.append(float(np.std([u[0] for u in us])))
            sd_d.append(float(np.mean([np.std([u[i] - u[j] for u in us]) for i, j in itertools.combinations(range(len(hits)), 2)])))
        res["crn" if crn else "independent"] = {
            "questions": len(flips), "questions_with_infinite_u": infinite, "sd_u": round(statistics.mean(sd_u), 4), "sd_u_difference": round(statistics.mean(sd_d), 4),
            "choice_flip_rate": round(statistics.mean(flips), 3)}
    emit({"benchmark": "rerank_noise", "model": a.model, "data": os.path.basename(a.data), "seeds": a.seeds, "k": 20,
          "N": 3, **res, "seconds": round(time.time() - t0, 1), "at": time.strftime("%Y-%m-%dT%H:%M:%S")}, a.out)


class Streams(SeaKR):
    """SeaKR whose calls use common random numbers or not (``crn``)."""

    crn = True

    def gen_config(self, *args, **kw):
        cfg = super().gen_config(*args, **kw)
        cfg.common_random_numbers = self.crn
        return cfg


if __name__ == "__main__":
    main()
