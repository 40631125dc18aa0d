"""Self-contained HTML: one answer's trace (``seakr ask --html``) and an eval report (``seakr report``)."""

from __future__ import annotations

import base64
import html
import json
from importlib import resources
from pathlib import Path

from ..eval.runner import read_run_config
from ..textio import parse_json


def _asset(name: str) -> str:
    return resources.files("seakr.serve").joinpath("static", name).read_text()


def _page(title: str, body: str) -> str:
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_asset('viewer.css')}</style></head><body><header><h1>seakr</h1><p>{html.escape(title)}</p></header>"
            f"<main>{body}</main></body></html>")


def answer_html(ans) -> str:
    # Inside <script>, "</script>" or "<!--" in any text would end or blank the page: write <, > and &
    # as JSON unicode escapes (they only ever occur inside JSON strings, so the data is unchanged).
    raw = json.dumps(ans.to_dict() if hasattr(ans, "to_dict") else ans)
    data = raw.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    body = (f"<div id='out'></div><script type='application/json' id='seakr-answer'>{data}</script>"
            f"<script>{_asset('viewer.js')}</script>")
    return _page("answer trace", body)


def write_answer_html(ans, path: str) -> None:
    Path(path).write_text(answer_html(ans))


def report_html(run_dir: str) -> str:
    """Summary tables of every eval run under ``run_dir`` plus its calibration / ROC plots."""
    from ..eval.runner import SCORES, run_rows, summarize, summary_markdown

    root = Path(run_dir)
    if not root.exists():
        raise ValueError(f"{run_dir}: no such directory")
    runs = sorted({p.parent for name in ("results.jsonl", SCORES) for p in root.rglob(name)})
    sums = []
    for r in runs:
        cfg = read_run_config(r, required=False)
        sums.append(summarize(run_rows(r), cfg.get("name", r.name)))
    parts = []
    if sums:
        md = summary_markdown(sums).strip().splitlines()
        head = [c.strip() for c in md[0].strip("|").split("|")]
        rows = [[c.strip() for c in line.strip("|").split("|")] for line in md[2:]]
        parts.append("<h2>Methods</h2><table class='cands'><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"
                     + "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows) + "</table>")
    for js in sorted(root.rglob("detect.json")):
        d = parse_json(js.read_text(), str(js))
        parts.append(f"<h2>Detection ({html.escape(str(d.get('model')))}, n={d.get('n')})</h2><table class='cands'><tr><th>estimator</th><th>AUROC</th><th>PCC</th></tr>"
                     + "".join(f"<tr><td>{html.escape(k)}</td><td>{v['auroc'] if v['auroc'] is None else format(v['auroc'], '.3f')}</td>"
                               f"<td>{v['pcc_with_1_minus_f1'] if v['pcc_with_1_minus_f1'] is None else format(v['pcc_with_1_minus_f1'], '.3f')}</td></tr>"
                               for k, v in d["estimators"].items()) + "</table>")
    for png in sorted(list(root.rglob("calibration.png")) + list(root.rglob("roc.png"))):
        b64 = base64.b64encode(png.read_bytes()).decode()
        parts.append(f"<h2>{html.escape(str(png.relative_to(root)))}</h2><img alt='{html.escape(png.name)}' src='data:image/png;base64,{b64}'>")
    if not parts:
        raise ValueError(f"{run_dir}: no eval results, detect.json or plots found")
    return _page(f"report: {root}", "".join(parts))


def write_report(run_dir: str, path: str) -> None:
    Path(path).write_text(report_html(run_dir))
