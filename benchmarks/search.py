"""Search benchmark: build throughput, size, load time, latency, and gold-paragraph recall.

(a) the pooled corpus of ../shared/data (HotpotQA + 2Wiki + SQuAD + NQ paragraphs + filler);
(b) a generated corpus of DPR-shaped passages (default 1,000,000; Zipfian vocabulary, 100-word
    passages, two-word titles), streamed into the index without holding it in memory;
recall@3/@5 of any and of all gold paragraphs for the pooled HotpotQA and 2Wiki dev questions with the
question as the query. Prints one JSON object. Usage: python benchmarks/search.py [--generated 1000000]
"""

from _common import emit  # noqa: E402
import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

from seakr.search import Passage
from seakr.search.corpora import read_corpus
from seakr.search.tantivy_engine import TantivyEngine

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.abspath(os.path.join(HERE, "..", "..", "shared", "data"))
POOL = [
    "hotpotqa/dev_hard100.hf.jsonl", "hotpotqa/dev_first53.official.json", "2wikimultihopqa/dev_first100.flashrag.jsonl",
    "squad/dev_part1.squad.json", "nq/dev_oracle_first1000.jsonl.gz", "corpus/wiki_filler1000.flashrag.jsonl",
]


def du(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def latency(engine, queries, k=3):
    for q in queries[:20]:
        engine.search(q, k)
    ts = []
    for q in queries:
        t = time.perf_counter()
        engine.search(q, k)
        ts.append((time.perf_counter() - t) * 1000)
    ts.sort()
    return {"p50_ms": round(statistics.median(ts), 3), "p95_ms": round(ts[int(0.95 * (len(ts) - 1))], 3), "queries": len(ts)}


def build(passages, out):
    t = time.perf_counter()
    TantivyEngine.build(passages, out, overwrite=True)
    dt = time.perf_counter() - t
    t = time.perf_counter()
    e2 = TantivyEngine(out)
    load = time.perf_counter() - t
    return e2, {"passages": e2.count(), "build_seconds": round(dt, 2), "passages_per_second": round(e2.count() / dt),
                "index_mb": round(du(out) / 1e6, 1), "load_seconds": round(load, 4)}


def questions(path):
    """(question, gold titles) from the HF HotpotQA and FlashRAG 2Wiki layouts."""
    out = []
    for line in open(path):
        r = json.loads(line)
        sf = r["supporting_facts"] if "supporting_facts" in r else r["metadata"]["supporting_facts"]
        gold = set(sf["title"]) if isinstance(sf, dict) else {t for t, _ in sf}
        out.append((r["question"], gold))
    return out


def recall(engine, qs):
    res = {}
    for k in (3, 5):
        anyh = allh = 0
        for q, gold in qs:
            titles = {h.title for h in engine.search(q, k)}
            anyh += bool(titles & gold)
            allh += gold <= titles
        res[f"recall@{k}_any"] = round(anyh / len(qs), 3)
        res[f"recall@{k}_all"] = round(allh / len(qs), 3)
    return res


def generated(n, seed=0, vocab=60_000):
    """DPR-shaped synthetic passages: Zipf word frequencies, topic words, 100 words (10% shorter)."""
    rng = np.random.default_rng(seed)
    words = np.array(["".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz"), size=rng.integers(3, 10))) for _ in range(vocab)])
    p = 1.0 / np.arange(1, vocab + 1) ** 1.07
    p /= p.sum()
    chunk = 10_000
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        ids = rng.choice(vocab, size=(m, 100), p=p)
        topics = rng.integers(500, vocab, size=(m, 12))
        mix = rng.random((m, 100)) < 0.3
        ids = np.where(mix, topics[np.arange(m)[:, None], rng.integers(0, 12, size=(m, 100))], ids)
        lens = np.where(rng.random(m) < 0.1, rng.integers(20, 100, size=m), 100)
        for i in range(m):
            yield Passage(str(start + i), f"{words[topics[i, 0]]} {words[topics[i, 1]]}", " ".join(words[ids[i, : lens[i]]]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--generated", type=int, default=1_000_000)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="seakr-bench-")
    res = {"benchmark": "search", "engine": "tantivy"}
    try:
        srcs = [os.path.join(DATA, s) for s in POOL]
        pool, res["pooled"] = build((p for s in srcs for p in read_corpus(s)), os.path.join(tmp, "pool"))
        hq = questions(os.path.join(DATA, "hotpotqa/dev_hard100.hf.jsonl"))
        wq = questions(os.path.join(DATA, "2wikimultihopqa/dev_first100.flashrag.jsonl"))
        res["pooled"].update(latency(pool, [q for q, _ in hq + wq] * 5))
        res["recall_hotpotqa_dev"] = recall(pool, hq)
        res["recall_2wiki_dev"] = recall(pool, wq)
        if a.generated:
            # Written to a DPR-format TSV first: the build is timed reading it, as from psgs_w100.tsv.
            tsv = os.path.join(tmp, "psgs.tsv")
            with open(tsv, "w") as f:
                f.write("id\ttext\ttitle\n")
                for p in generated(a.generated):
                    f.write(f"{p.id}\t{p.text}\t{p.title}\n")
            gen, res["generated"] = build(read_corpus(tsv, "dpr"), os.path.join(tmp, "gen"))
            res["generated"]["tsv_mb"] = round(os.path.getsize(tsv) / 1e6, 1)
            rng = np.random.default_rng(1)
            docs = [p.text.split() for _, p in zip(range(200), generated(200, seed=0))]
            qs = [" ".join(rng.choice(d, size=7, replace=False)) for d in docs]
            res["generated"].update(latency(gen, qs * 3))
        res["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    emit(res, a.out)


if __name__ == "__main__":
    sys.exit(main())
