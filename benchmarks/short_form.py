"""The knowledge check's self-knowledge table for any model: every estimator's AUROC for "the short
closed-book answer is wrong", pooled over each dev set's detect studies, paired against EigenScore.

  python benchmarks/short_form.py --runs DIR [--out benchmarks/results/selfknow-qwen15]

``DIR`` holds the studies ``seakr detect --form short --out DIR/<study>`` wrote (their rows are local: they
carry the gold answers); the studies' names are those of ``benchmarks/selfknow.py``. Writes short_form.json and
short_form.md under --out and prints the JSON. The same table as selfknow.py's first one, for a model that has
no fitted probes, gates or method tables (e.g. the 1.5B).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from selfknow import SETS, short_form  # noqa: E402

from seakr.eval.metrics import auroc  # noqa: E402
from seakr.eval.rowlog import read_results


def auroc_ci(runs: Path, studies: list[str], name: str, n: int = 2000, seed: int = 0) -> list[float]:
    """A bootstrap 95 % CI of one estimator's pooled AUROC (questions resampled; a one-class resample skipped)."""
    import numpy as np

    rows = [r for s in studies for r in read_results(runs / s / "detect_rows.jsonl")]
    x = np.array([np.inf if r["scores"][name] is None else r["scores"][name] for r in rows])
    y = np.array([r["f1"] < 0.5 for r in rows])
    rng = np.random.default_rng(seed)
    vals = [v for v in (auroc(x[i], y[i]) for i in (rng.integers(0, len(y), len(y)) for _ in range(n))) if v == v]
    return [float(q) for q in np.quantile(vals, [0.025, 0.975])]


def markdown(model: str, style: str, res: dict) -> str:
    out = [f"# The knowledge check's self-knowledge: {model}, {style} prompts", "",
           "Dev questions only, k = 20 at temperature 1.0, nothing fitted. "
           "Regenerate: `python benchmarks/short_form.py --runs DIR`.", ""]
    for name, r in res.items():
        ci = r["eigen_auroc_ci95"]
        out += [f"## {name} ({r['n']} questions, {r['right']} right; EigenScore AUROC CI {ci[0]:.3f}..{ci[1]:.3f})", "",
                "| estimator | AUROC for \"wrong\" | minus EigenScore (paired) | model rows per decision |", "|---|---|---|---|"]
        for est, v in sorted(r["estimators"].items(), key=lambda kv: -kv[1]["auroc"]):
            diff = "" if est == "eigen" else f"{v['difference']:+.3f} (CI {v['ci95'][0]:+.3f}..{v['ci95'][1]:+.3f})"
            out.append(f"| {est} | {v['auroc']:.3f} | {diff} | {v['rows']} |")
        out.append("")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", required=True, help="folder of the dev sets' short-form detect studies")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    runs, out = Path(a.runs), Path(a.out)
    method = json.loads((runs / SETS["hotpotqa"][0][0] / "config.json").read_text())["method"]
    model, style = method["model"]["model"], method["prompt"]["style"]
    res = {name: short_form(runs, studies) for name, (studies, _) in SETS.items()}
    for name, (studies, _) in SETS.items():
        res[name]["eigen_auroc_ci95"] = auroc_ci(runs, studies, "eigen")
    out.mkdir(parents=True, exist_ok=True)
    (out / "short_form.json").write_text(json.dumps({"model": model, "style": style, "sets": res}, indent=2))
    (out / "short_form.md").write_text(markdown(model, style, res))
    print(json.dumps({"model": model, "style": style, "sets": res}))


if __name__ == "__main__":
    main()
