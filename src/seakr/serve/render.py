"""Self-contained HTML: one answer's trace (``seakr ask --html``) and an eval report (``seakr report``)."""

from __future__ import annotations

import base64
import html
import json
from importlib import resources
from pathlib import Path

from ..common.runs import SCORES, check_not_a_record
from ..eval.folders import named_paths
from ..eval.rowlog import read_run_config, run_rows
from ..eval.summary import figure, summarize, summary_markdown
from ..common.jsontext import parse_json
from ..common.writing import write_atomic
from ..eval.merge import run_labels


def _asset(name: str) -> str:
    return resources.files("seakr.serve").joinpath("static", name).read_text(encoding="utf-8")


def _page(title: str, body: str) -> str:
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'><meta name='generator' "
            f"content='seakr'><title>{html.escape(title)}</title>"
            f"<style>{_asset('viewer.css')}</style></head><body>"
            f"<header><h1>seakr</h1><p>{html.escape(title)}</p></header>"
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
    write_atomic(Path(path), answer_html(ans))


def _table(head: list[str], rows: list[list]) -> str:
    cells = ("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return ("<table class='cands'><tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in head) + "</tr>"
            + "".join(cells) + "</table>")


def _study(path: Path, fields: dict[str, type]) -> dict:
    """A study's JSON file, refused in one line naming the file and field when it is not what the study
    writes (a hand edit, another tool's file of the same name), rather than a KeyError in the middle."""
    d = parse_json(path.read_text(encoding="utf-8", errors="replace"), str(path))
    if not isinstance(d, dict):
        raise ValueError(f"{path}: not a JSON object")
    for k, t in fields.items():
        if not isinstance(d.get(k), t):
            want = {dict: "an object", int: "a whole number"}.get(t, t.__name__)
            raise ValueError(f"{path}: field {k!r} is {'missing' if k not in d else repr(d[k])[:40]}, not {want}")
    return d


def _detect_section(path: Path, label: str) -> str:
    d = _study(path, {"estimators": dict})
    rows = []
    for k, v in d["estimators"].items():
        if not isinstance(v, dict):
            raise ValueError(f"{path}: field 'estimators.{k}' is not an object")
        rows.append([k, figure(v.get("auroc")), figure(v.get("pcc_with_1_minus_f1"))])
    return (f"<h2>Detection: {html.escape(label)} ({html.escape(str(d.get('model')))}, "
            f"n={html.escape(str(d.get('n')))})</h2>"
            + _table(["estimator", "AUROC", "PCC"], rows))


def _rerank_section(path: Path, label: str) -> str:
    d = _study(path, {"n": int})
    paired = d.get("paired_vs_engine") if isinstance(d.get("paired_vs_engine"), dict) else {}
    rows = []
    for rule, key, pkey in (("engine order", "recall@1_engine", None),
                            ("self-aware (min U)", "recall@1_self_aware", "seakr_top1_gold"),
                            ("guarded", "recall@1_guarded", "guarded_top1_gold")):
        p = paired.get(pkey) if isinstance(paired.get(pkey), dict) else {}
        ci = p.get("ci95") if isinstance(p.get("ci95"), list) and len(p["ci95"]) == 2 else [None, None]
        rows.append([rule, figure(d.get(key)), "" if pkey is None else f"{figure(p.get('mean_difference'), '+.2f')} "
                     f"(CI {figure(ci[0], '+.2f')}..{figure(ci[1], '+.2f')})"])
    return (f"<h2>Re-ranking: {html.escape(label)} ({html.escape(str(d.get('model')))}, n={d['n']}, "
            f"gold in the top {html.escape(str(d.get('N')))}: {figure(d.get('gold_in_top_n'), '.2f')})</h2>"
            + _table(["rule", "recall@1", "− engine order"], rows))


def _calibration_section(path: Path, label: str) -> str:
    d = _study(path, {"chosen": dict})
    c = d["chosen"]
    return (f"<h2>Calibration: {html.escape(label)} ({html.escape(str(d.get('model')))}, "
            f"{html.escape(str(d.get('estimator')))}, "
            f"n={html.escape(str(d.get('n')))})</h2>"
            + _table(["chosen δ", "F1", "retrieval rate"],
                     [[figure(c.get("delta")), figure(c.get("f1")), figure(c.get("retrieval_rate"), ".2f")]]))


#: The studies a report shows, by the file each writes.
STUDY_SECTIONS = {"detect.json": _detect_section, "rerank.json": _rerank_section,
                  "calibration.json": _calibration_section}


def _runs_section(root: Path) -> str:
    runs = sorted({p.parent for name in ("results.jsonl", SCORES) for p in root.rglob(name)})
    # runs of one name in several folders (a "seakr" per table) are told apart by their folder, as compare does
    labels = run_labels([str(r.relative_to(root)) for r in runs],
                        [read_run_config(r, required=False).get("name", r.name) for r in runs])
    sums = [summarize(run_rows(r), label) for r, label in zip(runs, labels)]
    if not sums:
        return ""
    md = summary_markdown(sums).strip().splitlines()
    return "<h2>Methods</h2>" + _table([c.strip() for c in md[0].strip("|").split("|")],
                                       [[c.strip() for c in line.strip("|").split("|")] for line in md[2:]])


def report_html(run_dir: str) -> str:
    """Every eval run under ``run_dir`` (summary table), every study (detection AUROCs, re-rank recall,
    the chosen δ) and their calibration / ROC plots, as one page."""
    named_paths("report", run_dir)
    root = Path(run_dir)
    if not root.is_dir():
        raise ValueError(f"{run_dir}: no such directory")
    parts = [_runs_section(root)]
    for name, section in STUDY_SECTIONS.items():
        # each study by its folder under the report's (two tables' studies share their folders' names)
        parts += [section(js, str(js.parent.relative_to(root)) if js.parent != root else root.name)
                  for js in sorted(root.rglob(name))]
    for png in sorted(list(root.rglob("calibration.png")) + list(root.rglob("roc.png"))):
        b64 = base64.b64encode(png.read_bytes()).decode()
        parts.append(f"<h2>{html.escape(str(png.relative_to(root)))}</h2><img alt='{html.escape(png.name)}' "
                     f"src='data:image/png;base64,{b64}'>")
    if not any(parts):
        raise ValueError(f"{run_dir}: no eval results, study results ({', '.join(STUDY_SECTIONS)}) or plots found")
    # a folder named in another encoding than UTF-8 (bytes Python keeps as lone surrogates) made the page
    # unwritable ("surrogates not allowed"): its bytes show as U+FFFD, as a browser shows them
    return _page(f"report: {root}", "".join(parts)).encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def write_report(run_dir: str, path: str) -> None:
    check_not_a_record(path, "report")
    write_atomic(Path(path), report_html(run_dir))
