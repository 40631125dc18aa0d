"""The decode path of this checkout against another commit's, side by side, in alternating rounds.

Two source trees cannot share one process (both register the same attention function with
transformers), so each round runs one child process per tree, one after the other, never together:
the child loads the model, warms up, and times a batch-1 greedy call and a k-sample call on a
~500-token HotpotQA prompt. Rounds alternate the order (A B, B A, ...) so the machine's drift hits
both alike; the result is the median of each figure and the ratio base / this checkout (> 1: this
checkout is faster). Model loading is outside the timings.

Usage: python benchmarks/ab_decode.py --base HEAD~3 [--model smollm2-135m] [--rounds 5] [--out FILE]
"""

from _common import emit  # noqa: E402
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CHILD = r"""
import json, os, sys, time
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, sys.argv[1])
import seakr
assert seakr.__file__.startswith(sys.argv[1]), seakr.__file__
from seakr.models import GenerationConfig, load_model
from seakr.prompts import PromptBuilder
model, tokens, k, repeat = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
lm = load_model(model, dtype="auto")
prompt, prefix = PromptBuilder("hotpotqa").render("Which city is farther north, Oslo or Helsinki?")
greedy = GenerationConfig(n=0, max_new_tokens=tokens, ignore_eos=True, with_states=False)
ks = GenerationConfig(n=k, max_new_tokens=tokens, ignore_eos=True, seed=1)
lm.generate([prompt], greedy)  # warm-up
out = {"greedy": [], "k": [], "cached_prefix": []}
for _ in range(repeat):
    for key, cfg, pre in (("greedy", greedy, None), ("k", ks, None), ("cached_prefix", ks, prefix)):
        t = time.perf_counter(); lm.generate([prompt], cfg, prefix=pre); out[key].append(time.perf_counter() - t)
print("RESULT " + json.dumps(out))
"""


def export(rev: str, dest: str) -> str:
    """``src/`` of ``rev`` (a commit) or of the working tree (``rev`` = ".") under ``dest``."""
    if rev == ".":
        return os.path.join(ROOT, "src")
    os.makedirs(dest, exist_ok=True)
    tar = subprocess.run(["git", "-C", ROOT, "archive", rev, "src/seakr"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", dest], input=tar, check=True)
    return os.path.join(dest, "src")


def child(src: str, a) -> dict:
    r = subprocess.run([sys.executable, "-c", CHILD, src, a.model, str(a.tokens), str(a.k), str(a.repeat)],
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": src})
    line = next((x for x in r.stdout.splitlines() if x.startswith("RESULT ")), None)
    if r.returncode or line is None:
        raise SystemExit(f"child for {src} failed:\n{r.stderr[-3000:]}")
    return json.loads(line[len("RESULT "):])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True, help="commit to compare against (e.g. HEAD~1)")
    ap.add_argument("--new", default=".", help="commit or '.' for the working tree (default)")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3, help="timed calls of each kind per child")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"base": export(a.base, os.path.join(tmp, "base")), "new": export(a.new, os.path.join(tmp, "new"))}
        times = {name: {"greedy": [], "k": [], "cached_prefix": []} for name in trees}
        for r in range(a.rounds):
            for name in (("base", "new") if r % 2 == 0 else ("new", "base")):
                for key, ts in child(trees[name], a).items():
                    times[name][key].extend(ts)
    med = {n: {k: round(statistics.median(v), 4) for k, v in t.items()} for n, t in times.items()}
    commit = lambda rev: subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", rev], capture_output=True,  # noqa: E731
                                        text=True).stdout.strip() if rev != "." else "working tree"
    res = {"benchmark": "ab_decode", "model": a.model, "base": commit(a.base), "new": commit(a.new),
           "tokens": a.tokens, "k": a.k, "rounds": a.rounds, "repeat": a.repeat, "statistic": "median",
           "seconds": med, "at": time.strftime("%Y-%m-%dT%H:%M:%S"),
           "ratio_base_over_new": {k: round(med["base"][k] / med["new"][k], 3) for k in med["new"]}}
    emit(res, a.out)


if __name__ == "__main__":
    main()
